//! `raspc probe svflow`: the command around [`crate::probe`].

use crate::args::*;
use crate::cmd::*;
use crate::{plot, probe, Failure};
use std::io::Write;

pub(crate) fn probe_cmd(kind: ProbeKind, stdout: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    let ProbeKind::Svflow { model, program, text, entry, seq_len, eval_window, levels, seeds, sequences, attention, attn_temp, weight_noise, json, out: report_file, plot: plot_dir } =
        kind;
    // Refuse outputs that may not be written before the (long) run, not after it.
    if let Some(dir) = &plot_dir {
        if dir.as_os_str() == "-" {
            return Err("`--plot -`: the probe writes its plots into a folder, not to standard output; give a folder (`./-` for one named `-`)".to_string().into());
        }
        if report_file.as_ref().is_some_and(|r| r == dir) {
            return Err(format!("-o and --plot are both `{}`: the report is a file, the plots go into a folder", dir.display()).into());
        }
        plot::check_probe_plots(dir)?;
    }
    if let Some(path) = &report_file {
        // A report inside the plot folder: the folder is made first.
        if let (Some(dir), Some(parent)) = (&plot_dir, path.parent())
            && parent == dir.as_path()
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the folder `{}`: {e}", dir.display()))?;
        }
        super::output::may_replace(path, REPORT, &|b| is_report(path, b))?;
    }
    // With --json the text goes nowhere and the report is printed as one JSON object at the end.
    let mut sink = std::io::sink();
    let out: &mut dyn Write = if json { &mut sink } else { &mut *stdout };
    if levels.iter().any(|l| !(0.0..=1.0).contains(l)) || levels.is_empty() {
        return Err("--levels must be fractions between 0 and 1".to_string().into());
    }
    if let Some(l) = levels.iter().enumerate().find_map(|(i, l)| levels[..i].contains(l).then_some(l)) {
        return Err(format!("--levels lists {l} twice (each level is probed --seeds times already)").into());
    }
    if text.is_some() && model.extension().is_none_or(|e| e != "gguf") {
        return Err("--text applies to a language model (a .gguf file); a raspc checkpoint is probed on sequences drawn from its vocabulary".to_string().into());
    }
    finite_flag("--attn-temp", attn_temp, attn_temp > 0.0, "> 0")?;
    finite_flag("--weight-noise", weight_noise, weight_noise >= 0.0, ">= 0")?;
    if seeds == 0 || sequences == 0 {
        return Err("--seeds and --sequences must be at least 1".to_string().into());
    }
    let budget = limits()?;
    let passes = (levels.len() as u128) * (seeds as u128) * (sequences as u128);
    if passes > budget.max_samples as u128 {
        return Err(format!(
            "--levels ({}) x --seeds ({seeds}) x --sequences ({sequences}) is {passes} forward passes, over the budget of {} (raise it with RASPC_LIMITS=samples=N)",
            levels.len(),
            budget.max_samples
        )
        .into());
    }
    if let Some(n) = seq_len
        && n > budget.max_input_tokens
    {
        return Err(format!("--seq-len {n} is over the budget of {} (raise it with RASPC_LIMITS=input_tokens=N)", budget.max_input_tokens).into());
    }
    // The scored window must leave a prefix to shuffle (the window is the sequence's end).
    let is_gguf = model.extension().is_some_and(|e| e == "gguf");
    // A language model scores at most n - 1 tokens (the first has nothing to be predicted
    // from): a larger window is refused, not silently cut (helper s23: 8 of 8 scored 7).
    let window_fits = |n: usize| match eval_window {
        Some(w) if is_gguf && n > 1 && (w == 0 || w >= n) => {
            Err(Failure::from(format!("--eval-window {w} must be between 1 and --seq-len - 1 = {} for a language model (the first token has nothing to be predicted from)", n - 1)))
        }
        Some(w) if w == 0 || w > n => Err(Failure::from(format!("--eval-window {w} must be between 1 and --seq-len {n}"))),
        _ => Ok(()),
    };
    if attention == AttentionArg::Hard && attn_temp != 1.0 {
        return Err("--attn-temp divides the soft-attention beta; with --attention hard it would change nothing (drop one of them)".to_string().into());
    }
    // The scored window, as the run clamps it: a language model scores at most n - 1 tokens
    // (the first has nothing to be predicted from).
    let window = |n: usize| {
        let w = eval_window.unwrap_or((n / 4).max(1));
        if is_gguf {
            w.clamp(1, n.saturating_sub(1).max(1))
        } else {
            w.clamp(1, n)
        }
    };
    let mk = |n: usize| probe::Settings {
        seq_len: n,
        eval_window: window(n),
        levels: levels.clone(),
        seeds,
        sequences,
        attention: attention_of(attention),
        attn_temp,
        weight_noise,
        readout_temp: 0.1,
    };
    let bar = indicatif::ProgressBar::new((levels.len() as u64) * seeds);
    // Layers with no attention heads (raspc checkpoints can have MLP-only layers).
    let mut headless: Vec<bool> = vec![];
    let (conds, layers, settings) = if is_gguf {
        // (Naming only the flags given: helper t22.)
        let given: Vec<&str> = [(program.is_some(), "--program"), (weight_noise > 0.0, "--weight-noise")].into_iter().filter_map(|(g, f)| g.then_some(f)).collect();
        if !given.is_empty() {
            return Err(format!("{} {} to raspc checkpoints, not to language models", given.join(" and "), if given.len() > 1 { "apply" } else { "applies" }).into());
        }
        if attention == AttentionArg::Hard {
            return Err("--attention hard applies to raspc checkpoints: a language model's attention is its softmax (--attn-temp blurs it)".to_string().into());
        }
        // (The flags first: loading the model takes a while.)
        window_fits(seq_len.unwrap_or(128))?;
        let lm = raspc_lm::LanguageModel::load(&model).map_err(|e| format!("`{}`: {e}", model.display()))?;
        let sample = match &text {
            Some(p) => String::from_utf8(read_input_file(p)?).map_err(|_| format!("`{}` is not valid UTF-8", p.display()))?,
            None => include_str!("../sample.txt").to_string(),
        };
        let settings = mk(seq_len.unwrap_or(128));
        if settings.seq_len < 2 {
            return Err("--seq-len must be at least 2 for a language model".to_string().into());
        }
        warn_if_nothing_moves(&settings, err);
        let conds = probe::run_lm(&lm, &sample, &settings, &mut |d, _| bar.set_position(d as u64))?;
        (conds, lm.config.layers, settings)
    } else {
        let ck = read_checkpoint(&model)?;
        if ck.config.real_input.is_some() {
            return Err(format!("`{}` reads real numbers; probe svflow shuffles vocabulary tokens and needs a model with token inputs", model.display()).into());
        }
        // (Refused before anything runs or is said: review b24 saw the no-program note and a
        // warning first.)
        if ck.config.layers.iter().all(|l| l.heads.is_empty()) {
            return Err(format!("`{}` has no attention heads: there is no attention to probe", model.display()).into());
        }
        let beta = ck.config.attention.soft_beta / attn_temp;
        if !(beta.is_finite() && beta <= budget.max_soft_beta) {
            return Err(format!(
                "--attn-temp {} makes the soft-attention beta {} (the model's {} / {}), over the budget of {} (raise it with RASPC_LIMITS=soft_beta=N)",
                num(attn_temp),
                num(beta),
                num(ck.config.attention.soft_beta),
                num(attn_temp),
                num(budget.max_soft_beta)
            )
            .into());
        }
        let session = match &program {
            Some(p) => Some(load(p, err, color)?),
            None => None,
        };
        let reference = match &session {
            Some(s) => {
                let (name, root) = entry_of(s, entry.as_deref(), err, color)?;
                if s.graph.node(root).kind.is_selector() {
                    return Err(format!("`{name}` is a selector; the probe scores the s-op the model computes: give --entry that s-op (`{}`)", ck.output.label).into());
                }
                Some((&s.graph, root))
            }
            None => None,
        };
        if let (Some(s), Some(p), Some((_, root))) = (&session, &program, reference)
            && !super::compiled_from(s, root, &ck)
        {
            let _ = writeln!(err, "warning: `{}` was not compiled from `{}` (the program hashes differ): the task reference is that program's output", model.display(), p.display());
        }
        let n = seq_len.unwrap_or(ck.config.max_seq_len);
        if n == 0 || n > ck.config.max_seq_len {
            return Err(format!("--seq-len {n} must be between 1 and the model's max_seq_len {}", ck.config.max_seq_len).into());
        }
        let vocab: Vec<raspc_lang::Atom> = ck
            .config
            .vocab
            .iter()
            .filter(|v| v.id != ck.config.bos_id)
            .map(|v| raspc_lang::parse_input(&format!("[{}]", v.token)).map(|mut a| a.remove(0)))
            .collect::<Result<_, _>>()?;
        window_fits(n)?;
        // One forward pass keeps every head's attention pattern (n + 1)² in f64: refused,
        // before running, past what fits.
        let heads: usize = ck.config.layers.iter().map(|l| l.heads.len()).sum();
        within_kept_bytes(
            &format!("the probe keeps every head's attention pattern: {heads} heads x {} x {} positions in f64", n + 1, n + 1),
            heads as u128 * (n as u128 + 1).pow(2) * 8,
            "a smaller --seq-len fits",
        )?;
        let settings = mk(n);
        if program.is_none() {
            let _ = writeln!(out, "no --program: the task reference is the unperturbed model's own output (hard attention, no --attn-temp or --weight-noise) on each shuffled input");
        }
        warn_if_nothing_moves(&settings, err);
        let conds = probe::run(&ck, reference, &vocab, &settings, &mut |d, _| bar.set_position(d as u64))?;
        // Nothing scored (the interpreter rejects every input) or scores that overflowed: no
        // report, rather than a perfect or a garbage one.
        if conds.iter().all(|c| c.scored == 0) {
            bar.finish_and_clear();
            return Err("no prediction was scored: the task reference rejects every probed input (is --program the model's program? `raspc verify` shows why)".to_string().into());
        }
        if conds.iter().any(|c| !(c.nll.is_none_or(f64::is_finite) && c.ece.is_none_or(f64::is_finite) && c.accuracy.is_finite())) {
            bar.finish_and_clear();
            return Err("the probe's scores are not finite (the model's activations overflow on these inputs: `raspc run` or `trace` names where)".to_string().into());
        }
        headless = ck.config.layers.iter().map(|l| l.heads.is_empty()).collect();
        (conds, ck.config.layers.len(), settings)
    };
    let n = settings.seq_len;
    bar.finish_and_clear();

    let count = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    let _ = writeln!(
        out,
        "svflow probe: {} ({} x {}), {} of {} tokens, last {} scored",
        count(conds.len(), "condition", "conditions"),
        count(settings.levels.len(), "level", "levels"),
        count(usize::try_from(seeds).unwrap_or(usize::MAX), "seed", "seeds"),
        count(sequences, "sequence", "sequences"),
        n,
        settings.eval_window
    );
    let width = super::inspect::terminal_width();
    let _ = writeln!(out, "\ntask per level (mean over seeds):");
    let mut by_level: Vec<(f64, Vec<&probe::Condition>)> = vec![];
    for c in &conds {
        match by_level.iter_mut().find(|(l, _)| *l == c.level) {
            Some((_, v)) => v.push(c),
            None => by_level.push((c.level, vec![c])),
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    // A perplexity past a million prints in scientific notation (not 300 digits).
    let ppl = |x: f64| if x < 1e6 { format!("{x:.2}") } else { format!("{x:.3e}") };
    // A numerical output has no distribution over values: no NLL, perplexity or ECE. A
    // categorical one has an ECE, and no NLL only when every scored prediction was left out of
    // it (a reference value none of the output's: helper s23, which was told "numerical").
    let has_nll = conds.iter().any(|c| c.nll.is_some());
    let numerical = conds.iter().all(|c| c.ece.is_none());
    // NaN where a condition has no NLL (a series of them is then "constant": no ρ).
    let nll_of = |c: &probe::Condition| c.nll.unwrap_or(f64::NAN);
    for (lv, cs) in &by_level {
        let accuracy = mean(&cs.iter().map(|c| c.accuracy).collect::<Vec<_>>());
        let nlls: Vec<f64> = cs.iter().filter_map(|c| c.nll).collect();
        if has_nll && !nlls.is_empty() {
            let _ = writeln!(
                out,
                "  level {lv:.2}: NLL {:.4} nats (perplexity {}), accuracy {accuracy:.4}, ECE {:.4}",
                mean(&nlls),
                ppl(mean(&nlls).exp()),
                mean(&cs.iter().filter_map(|c| c.ece).collect::<Vec<_>>())
            );
        } else if numerical {
            let _ = writeln!(out, "  level {lv:.2}: accuracy {accuracy:.4} (no NLL or ECE: the output is numerical)");
        } else {
            let _ = writeln!(
                out,
                "  level {lv:.2}: accuracy {accuracy:.4}, ECE {:.4} (no NLL: every scored prediction is left out of it, see the note)",
                mean(&cs.iter().filter_map(|c| c.ece).collect::<Vec<_>>())
            );
        }
    }
    let excluded: usize = conds.iter().map(|c| c.nll_excluded).sum();
    if excluded > 0 {
        let _ = writeln!(
            out,
            "  note: {excluded} of {} scored predictions are left out of the NLL: the reference's value is none of the output's values (is --program the model's program?)",
            conds.iter().map(|c| c.scored).sum::<usize>()
        );
    }
    let skipped: usize = conds.iter().map(|c| c.probes_excluded).sum();
    if skipped > 0 {
        let _ = writeln!(out, "  note: {skipped} head-query probes were not finite and are left out of the means");
    }
    let mut report = serde_json::Map::new();
    let mut correlations = serde_json::Map::new();
    let mut sens = serde_json::Map::new();
    // Why a layer has no value: no heads, or no finite value in any condition.
    let absent = |metric: &str, l: usize| -> Option<&'static str> {
        if headless.get(l).copied().unwrap_or(false) {
            Some("no attention heads")
        } else if conds.iter().all(|c| !c.layers.get(metric).and_then(|v| v.get(l)).is_some_and(|x| x.is_finite())) {
            Some("no finite value in any condition")
        } else {
            None
        }
    };
    let constant = probe::nearly_constant;
    let spearman_text = |rho: f64, p: f64, a: &[f64], b: &[f64]| -> String {
        if rho.is_finite() {
            format!("{rho:.3} (p {p:.3})")
        } else if a.len() < 3 {
            "absent (fewer than 3 points: two always give ±1)".into()
        } else if constant(a) {
            "absent (the metric is constant)".into()
        } else if !has_nll && numerical {
            "absent (no NLL: the output is numerical)".into()
        } else if !has_nll {
            "absent (no NLL: every scored prediction is left out of it)".into()
        } else if constant(b) {
            "absent (the NLL is constant)".into()
        } else {
            "absent (undefined)".into()
        }
    };
    let spearman_json = |rho: f64, p: f64| -> serde_json::Value {
        if rho.is_finite() {
            serde_json::json!({ "rho": rho, "p": p })
        } else {
            serde_json::json!({ "rho": null, "p": null, "absent": "constant or too short series" })
        }
    };
    for metric in probe::METRICS {
        let _ = writeln!(out, "\n{metric} by layer (rows: levels):");
        // A header naming each column's layer (helper c19: the columns had to be guessed); at a
        // terminal, the layers fold into panels of its width (helper s23: the language model's
        // 30 layers made 330-column rows).
        for (p, panel) in layer_panels(layers, width).into_iter().enumerate() {
            if p > 0 {
                let _ = writeln!(out);
            }
            let header: Vec<String> = panel.clone().map(|l| format!("{:>9}", format!("layer {l}"))).collect();
            let _ = writeln!(out, "  {:>4}  {}", "", header.join(" "));
            for (lv, cs) in &by_level {
                let row: Vec<String> = panel
                    .clone()
                    .map(|l| {
                        let vals: Vec<f64> = cs.iter().filter_map(|c| c.layers.get(metric).and_then(|v| v.get(l)).copied()).filter(|x| x.is_finite()).collect();
                        if absent(metric, l).is_some() || vals.is_empty() {
                            format!("{:>9}", "absent")
                        } else {
                            format!("{:>9.4}", mean(&vals))
                        }
                    })
                    .collect();
                let _ = writeln!(out, "  {lv:.2}: {}", row.join(" "));
            }
        }
        let reasons: Vec<String> = (0..layers).filter_map(|l| absent(metric, l).map(|r| format!("layer {l}: {r}"))).collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "{}", fold(&format!("  absent: {}", reasons.join("; ")), width, 4, "; "));
        }
        let avg = |c: &probe::Condition| mean(&c.layers.get(metric).map_or(&[][..], Vec::as_slice).iter().copied().filter(|x| x.is_finite()).collect::<Vec<_>>());
        let (rho_c, p_c) = probe::spearman(&conds.iter().map(avg).collect::<Vec<_>>(), &conds.iter().map(nll_of).collect::<Vec<_>>(), 999, 1);
        let lv_metric: Vec<f64> = by_level.iter().map(|(_, cs)| mean(&cs.iter().map(|c| avg(c)).collect::<Vec<_>>())).collect();
        let lv_nll: Vec<f64> = by_level.iter().map(|(_, cs)| mean(&cs.iter().map(|c| nll_of(c)).collect::<Vec<_>>())).collect();
        let (rho_l, p_l) = probe::spearman(&lv_metric, &lv_nll, 999, 2);
        let cond_metric: Vec<f64> = conds.iter().map(avg).collect();
        let cond_nll: Vec<f64> = conds.iter().map(nll_of).collect();
        let _ = writeln!(
            out,
            "  Spearman rho with NLL: across conditions {}, across levels {}",
            spearman_text(rho_c, p_c, &cond_metric, &cond_nll),
            spearman_text(rho_l, p_l, &lv_metric, &lv_nll)
        );
        let s = probe::sensitivity(&conds, metric, layers);
        // Each layer named (helper s23: a comma list of 30 values had to be counted), lines
        // folded at a terminal's width.
        let shown: Vec<String> = s
            .iter()
            .enumerate()
            .map(|(l, (z, regime))| match (absent(metric, l), z) {
                (Some(r), _) => format!("layer {l} absent ({r})"),
                (None, Some(z)) => format!("layer {l} {} ({regime})", z_text(*z)),
                (None, None) => format!("layer {l} n/a ({regime})"),
            })
            .collect();
        let _ = writeln!(out, "{}", fold(&format!("  sensitivity z by layer: {}", shown.join(", ")), width, 4, ", "));
        correlations.insert(metric.into(), serde_json::json!({ "conditions": spearman_json(rho_c, p_c), "levels": spearman_json(rho_l, p_l) }));
        sens.insert(
            metric.into(),
            serde_json::json!(s
                .iter()
                .enumerate()
                .map(|(l, (z, regime))| match absent(metric, l) {
                    Some(r) => serde_json::json!({ "z": null, "absent": r }),
                    None => serde_json::json!({ "z": z, "regime": regime }),
                })
                .collect::<Vec<_>>()),
        );
    }
    report.insert("conditions".into(), serde_json::to_value(&conds).map_err(|e| e.to_string())?);
    report.insert("spearman".into(), serde_json::Value::Object(correlations));
    report.insert("sensitivity".into(), serde_json::Value::Object(sens));
    let report = serde_json::Value::Object(report);
    if let Some(path) = report_file {
        super::output::save_file(&path, report.to_string().as_bytes(), REPORT, &|b| is_report(&path, b))?;
        let _ = writeln!(out, "\nreport written to {}", path.display());
    }
    if let Some(dir) = plot_dir {
        super::output::install_cleanup();
        let files = plot::probe_plots(&conds, layers, &dir)?;
        let _ = writeln!(out, "wrote {} plots to {}", files.len(), dir.display());
    }
    if json {
        let _ = writeln!(stdout, "{report}");
    }
    Ok(())
}

const REPORT: &str = "an SVFlow report raspc wrote";

/// A sensitivity z with two decimals, or more where two would round it onto a regime's bound (1
/// or 3: helper s23 saw "1.00 (insensitive)" for 0.996).
fn z_text(z: f64) -> String {
    let two = format!("{z:.2}");
    let shown: f64 = two.parse().unwrap_or(z);
    let crosses = [1.0, 3.0].iter().any(|&b| (shown.abs() >= b) != (z.abs() >= b));
    if crosses {
        format!("{z:.4}")
    } else {
        two
    }
}

/// The layers of a table in panels that fit `width` (a row: 8 characters of level, then 10 per
/// layer); one panel when there is no width (piped output).
fn layer_panels(layers: usize, width: Option<usize>) -> Vec<std::ops::Range<usize>> {
    let per = width.map_or(layers.max(1), |w| (w.saturating_sub(8) / 10).max(1));
    (0..layers.max(1)).step_by(per).map(|s| s..(s + per).min(layers)).collect()
}

/// `text` folded at `width` after ", " separators, continuation lines indented by `indent`;
/// unchanged without a width.
fn fold(text: &str, width: Option<usize>, indent: usize, sep: &str) -> String {
    let Some(width) = width else { return text.to_string() };
    let mark = sep.trim_end();
    let mut lines: Vec<String> = vec![];
    let mut line = String::new();
    for (i, part) in text.split(sep).enumerate() {
        let piece = if i == 0 { part.to_string() } else { format!("{sep}{part}") };
        if !line.is_empty() && line.chars().count() + piece.chars().count() > width {
            lines.push(format!("{line}{mark}"));
            line = format!("{}{part}", " ".repeat(indent));
        } else {
            line.push_str(&piece);
        }
    }
    lines.push(line);
    lines.join("\n")
}

/// Position 0 never moves: the shuffled prefix is positions 1 .. n - E, and fewer than two of
/// them cannot be permuted, so every level would probe the same inputs: said before the run.
fn warn_if_nothing_moves(s: &probe::Settings, err: &mut dyn Write) {
    let n = s.seq_len;
    if s.levels.iter().any(|&l| l > 0.0) && n.saturating_sub(s.eval_window) < 3 {
        let _ = writeln!(
            err,
            "warning: --seq-len {n} with an eval window of {} leaves {} movable position(s) before the window (position 0 stays): nothing is shuffled, every level probes the same inputs (a longer --seq-len or a smaller --eval-window moves some)",
            s.eval_window,
            n.saturating_sub(s.eval_window).saturating_sub(1)
        );
    }
}

/// Is the file at `path` (starting with `head`) an earlier report: a JSON object with this
/// report's keys? (Anything else at `-o` is the user's and is never replaced.)
fn is_report(path: &std::path::Path, head: &[u8]) -> bool {
    let whole = match std::fs::metadata(path) {
        Ok(m) if m.len() <= 256 << 20 => std::fs::read(path).ok(),
        _ => None,
    };
    let bytes = whole.as_deref().unwrap_or(head);
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| v.get("conditions").is_some() && v.get("spearman").is_some())
}

#[cfg(test)]
mod tests {
    use super::{fold, layer_panels};

    #[test]
    fn z_near_a_regime_bound_shows_which_side() {
        assert_eq!(super::z_text(0.9964), "0.9964");
        assert_eq!(super::z_text(-2.9951), "-2.9951");
        assert_eq!(super::z_text(1.234), "1.23");
        assert_eq!(super::z_text(1.0), "1.00");
        assert_eq!(super::z_text(0.5), "0.50");
    }

    #[test]
    fn tables_and_lists_fold_at_the_width() {
        // 30 layers at 80 columns: 7 per panel (8 + 7 x 10 = 78).
        let panels = layer_panels(30, Some(80));
        assert_eq!(panels.first(), Some(&(0..7)));
        assert_eq!(panels.last(), Some(&(28..30)));
        assert_eq!(panels.iter().map(|p| p.len()).sum::<usize>(), 30);
        assert_eq!(layer_panels(30, None), vec![0..30]);
        assert_eq!(layer_panels(3, Some(5)), vec![0..1, 1..2, 2..3]);
        let text = "  z: layer 0 1.00 (moderate), layer 1 2.00 (moderate), layer 2 3.00 (high)";
        let folded = fold(text, Some(40), 4, ", ");
        assert!(folded.lines().all(|l| l.chars().count() <= 40), "{folded}");
        assert_eq!(folded.replace(",\n    ", ", "), text);
        assert_eq!(fold(text, None, 4, ", "), text);
        let absent = "  absent: layer 1: no heads; layer 2: no heads";
        assert_eq!(fold(absent, Some(30), 4, "; "), "  absent: layer 1: no heads;\n    layer 2: no heads");
    }
}
