//! `raspc verify`: the command around [`crate::verify`].

use crate::args::*;
use crate::cmd::*;
use crate::{verify, Failure};
use std::io::Write;

/// Adds a field to a JSON object (a no-op on anything else: `Value`'s `IndexMut` would panic).
fn set(j: &mut serde_json::Value, key: &str, v: impl Into<serde_json::Value>) {
    if let Some(o) = j.as_object_mut() {
        o.insert(key.to_string(), v.into());
    }
}
use std::path::Path;

pub(crate) struct VerifyArgs {
    pub(crate) exhaustive: bool,
    pub(crate) samples: Option<usize>,
    pub(crate) seed: u64,
    pub(crate) attention: AttentionModes,
    pub(crate) allow_rejected: bool,
    pub(crate) json: bool,
}

/// The closing lines of `verify`: the inputs the interpreter rejected, then the verdict. Fails
/// (exit 1) on a mismatch, when nothing was checked, or when fewer inputs than asked were
/// checked (unless `--allow-rejected`).
/// With `json`, the text is replaced by one JSON object: `extra`'s fields plus the counts and
/// the verdict.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_verdict(
    asked: usize,
    checked: usize,
    failed: usize,
    rejections: &verify::Rejections,
    allow_rejected: bool,
    json: Option<serde_json::Value>,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let rejected = rejections.total();
    if let Some(mut j) = json {
        set(&mut j, "asked", serde_json::json!(asked));
        set(&mut j, "checked", serde_json::json!(checked));
        set(&mut j, "mismatches", serde_json::json!(failed));
        set(&mut j, "rejected", serde_json::json!(rejected));
        set(&mut j, "rejections", serde_json::json!(rejections.lines()));
        set(&mut j, "ok", serde_json::json!(failed == 0 && checked > 0 && (rejected == 0 || allow_rejected)));
        let _ = writeln!(out, "{j}");
        let mut sink = std::io::sink();
        return verify_verdict(asked, checked, failed, rejections, allow_rejected, None, &mut sink);
    }
    if rejected > 0 {
        let _ = writeln!(out, "rejected: the interpreter rejects {rejected} of the {asked} inputs (not checked):");
        for l in rejections.lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    let _ = writeln!(out, "verified: {}, {}", count_of(checked, "input"), count_of(failed, "mismatch"));
    if failed > 0 {
        return Err(Failure::Silent);
    }
    if checked == 0 {
        return Err("no input was checked: the model was compared with the interpreter on nothing".to_string().into());
    }
    if rejected > 0 && !allow_rejected {
        return Err(format!("only {checked} of the {asked} inputs asked for were checked (pass --allow-rejected to accept that)").into());
    }
    Ok(())
}

pub(crate) fn verify_cmd(path: &Path, target: &Target, a: &VerifyArgs, stdout: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    // With --json the text goes nowhere and one JSON object is printed at the end.
    let mut sink = std::io::sink();
    let out: &mut dyn Write = if a.json { &mut sink } else { &mut *stdout };
    if a.samples == Some(0) {
        return Err("--samples 0 checks nothing: give at least 1".to_string().into());
    }
    if let Some(n) = a.samples {
        let l = limits()?;
        if n as u64 > l.max_samples {
            return Err(format!("--samples {n} is over the budget of {} (raise it with RASPC_LIMITS=samples=N)", l.max_samples).into());
        }
        if (n as u64).saturating_mul(target.max_len as u64) > l.max_tokens {
            return Err(format!("--samples {n} x --max-len {} is over the budget of {} tokens (raise it with RASPC_LIMITS=tokens=N)", target.max_len, l.max_tokens).into());
        }
    }
    if a.exhaustive && target.input_bounds.is_some() {
        return Err("--exhaustive enumerates token inputs; a real-valued program's inputs (--input-bounds) cannot be enumerated: use --samples N (random inputs in the bounds), or --input-grid LO,HI,STEP to compile over a finite grid".to_string().into());
    }
    if target.input_bounds.is_some() && matches!(a.attention, AttentionModes::Soft) {
        return Err("--attention soft: a real-valued model's certified bound holds under hard attention only (soft attention's error grows with the inputs' magnitude and is not bounded); verify it with --attention hard".to_string().into());
    }
    let built = build(path, target, err, color)?;
    if let Some(w) = crate::constant_token_warning(&built.session.graph, built.root, &built.vocab) {
        let _ = writeln!(err, "{w}");
    }
    if built.compiled.report.is_some() {
        let model = raspc_runtime::Model::new(built.compiled.checkpoint.clone(), &raspc_runtime::Device::Cpu).map_err(|e| format!("internal error: {e}"))?;
        let count = a.samples.unwrap_or(1000);
        let _ = writeln!(out, "compiled `{}`: {}", built.compiled.plan.output_label, built.compiled.summary);
        let bar = indicatif::ProgressBar::new(count as u64);
        let r = verify::verify_real(&built.session.graph, built.root, &model, count, a.seed, &mut |n| bar.set_position(n as u64))?;
        bar.finish_and_clear();
        for m in &r.examples {
            let show = |v: &[raspc_lang::Atom]| format!("[{}]", v.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "));
            let got: Vec<raspc_lang::Atom> = m.got.iter().map(verify::decoded_atom).collect();
            let _ = writeln!(out, "mismatch: input {}: expected {}, model {}", show(&m.input), show(&m.expected), show(&got));
        }
        let _ = writeln!(out, "Hard attention: {}, {}", count_of(r.checked, "input"), count_of(r.failed, "mismatch"));
        if matches!(a.attention, AttentionModes::Both) {
            let _ = writeln!(out, "Soft attention: not checked (a real-valued model's certified bound holds under hard attention only)");
        }
        let _ = writeln!(out, "max |model - program| {:.3e}, certified bound {:.3e} (plus up to {:.3e} for the interpreter's own f64 rounding)", r.max_err, r.bound, r.max_slack);
        let seen =
            built.compiled.checkpoint.config.real_input.as_ref().map(|ri| verify::sampled_magnitude(&built.session.graph, built.root, ri, target.max_len, verify::REJECTION_SAMPLES));
        if let Some(w) = built.compiled.report.as_ref().and_then(|r| r.loose_bound_warning_seen(seen)) {
            let _ = writeln!(err, "{w}");
        }
        let show = |v: &[raspc_lang::Atom]| v.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
        let json = a.json.then(|| {
            let examples: Vec<serde_json::Value> = r.examples.iter().map(|m| serde_json::json!({ "input": show(&m.input), "expected": show(&m.expected), "model": m.got.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>() })).collect();
            serde_json::json!({ "output": built.compiled.plan.output_label, "summary": built.compiled.summary.to_string(), "max_abs_err": r.max_err, "certified_bound": r.bound, "interpreter_rounding": r.max_slack, "examples": examples })
        });
        return verify_verdict(count, r.checked, r.failed, &r.rejections, a.allow_rejected, json, if a.json { stdout } else { out });
    }
    let inputs = if a.exhaustive { verify::Inputs::Exhaustive } else { verify::Inputs::Random { count: a.samples.unwrap_or(1000), seed: a.seed } };
    let seqs = verify::generate(&inputs, built.vocab.len(), target.max_len)?;
    let model = raspc_runtime::Model::new(built.compiled.checkpoint.clone(), &raspc_runtime::device("cpu").map_err(|e| e.to_string())?).map_err(|e| format!("internal error: {e}"))?;
    let modes = match a.attention {
        AttentionModes::Hard => vec![raspc_runtime::Attention::Hard],
        AttentionModes::Soft => vec![raspc_runtime::Attention::Soft],
        AttentionModes::Both => vec![raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft],
    };
    let _ = writeln!(out, "compiled `{}`: {}", built.compiled.plan.output_label, built.compiled.summary);
    let asked = a.samples.unwrap_or(1000);
    // Every input of the domain, not just as many random ones as asked (a domain of exactly
    // `asked` inputs is checked whole: `verify::generate`).
    if !a.exhaustive && verify::exhaustive_count(built.vocab.len(), target.max_len) <= asked as u128 {
        // (Helper b10: "the 1000 samples asked" when nothing was asked. Helper b26: exactly as
        // many inputs as samples asked said nothing, though every one is checked.)
        let wanted = if a.samples.is_some() { format!("the {asked} samples asked") } else { format!("the default {asked} samples") };
        let relation = if seqs.len() == asked { format!("as many as {wanted}") } else { format!("fewer than {wanted}") };
        let _ = writeln!(out, "every input checked: {} ({} tokens, lengths 1 to {}), {relation}", seqs.len(), built.vocab.len(), target.max_len);
    }
    let bar = indicatif::ProgressBar::new(seqs.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{wide_bar} {pos}/{len} inputs ({eta})").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
    let report = verify::verify(&built.session.graph, built.root, &model, &built.vocab, &seqs, &modes, &mut |n| bar.set_position(n as u64))?;
    bar.finish_and_clear();
    let c = &model.checkpoint.config;
    for (mode, f) in &report.per_mode {
        let detail = match mode {
            raspc_runtime::Attention::Hard => format!("tie tolerance {}", c.attention.tie_tolerance),
            raspc_runtime::Attention::Soft => format!("beta {}", c.attention.soft_beta),
        };
        let _ = writeln!(out, "{:?} attention ({detail}): {}, {}", mode, count_of(report.checked, "input"), count_of(*f, "mismatch"));
    }
    for m in &report.examples {
        let show = |v: &[raspc_lang::Atom]| format!("[{}]", v.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "));
        let got: Vec<raspc_lang::Atom> = m.got.iter().map(verify::decoded_atom).collect();
        let _ = writeln!(out, "mismatch ({:?}): input {}: expected {}, model {}", m.attention, show(&m.input), show(&m.expected), show(&got));
    }
    let show = |v: &[raspc_lang::Atom]| v.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    let json = a.json.then(|| {
        let modes: serde_json::Map<String, serde_json::Value> = report.per_mode.iter().map(|(mode, f)| (format!("{mode:?}").to_lowercase(), serde_json::json!({ "checked": report.checked, "mismatches": f }))).collect();
        let examples: Vec<serde_json::Value> = report
            .examples
            .iter()
            .map(|m| serde_json::json!({ "attention": format!("{:?}", m.attention).to_lowercase(), "input": show(&m.input), "expected": show(&m.expected), "model": m.got.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>() }))
            .collect();
        serde_json::json!({ "output": built.compiled.plan.output_label, "summary": built.compiled.summary.to_string(), "attention": modes, "examples": examples })
    });
    verify_verdict(seqs.len(), report.checked, report.failed, &report.rejections, a.allow_rejected, json, if a.json { stdout } else { out })
}

/// `1 input`, `2 inputs`, `1 mismatch`, `0 mismatches` (review b24: "1 inputs").
fn count_of(n: usize, noun: &str) -> String {
    match (n, noun.ends_with(['s', 'h', 'x'])) {
        (1, _) => format!("1 {noun}"),
        (_, true) => format!("{n} {noun}es"),
        (_, false) => format!("{n} {noun}s"),
    }
}
