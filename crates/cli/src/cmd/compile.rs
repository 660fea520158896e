//! `raspc compile`.

use crate::args::*;
use crate::cmd::output::*;
use crate::cmd::*;
use crate::Failure;
use std::io::Write;

/// Adds a field to a JSON object (a no-op on anything else: `Value`'s `IndexMut` would panic).
fn set(j: &mut serde_json::Value, key: &str, v: impl Into<serde_json::Value>) {
    if let Some(o) = j.as_object_mut() {
        o.insert(key.to_string(), v.into());
    }
}
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub(crate) fn compile_cmd(
    path: &Path,
    target: &Target,
    output: &Path,
    force: bool,
    bounds: bool,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    color: bool,
) -> Result<(), Failure> {
    if output.exists() && std::fs::canonicalize(output).ok() == std::fs::canonicalize(path).ok() {
        return Err(format!("-o `{}` is the program itself; refusing to overwrite it", output.display()).into());
    }
    check_output(output, force)?;
    let built = build(path, target, err, color)?;
    let bytes = built.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: the compiled checkpoint is invalid: {e}"))?;
    if let Some(note) = write_checkpoint(output, &bytes, force)? {
        let _ = writeln!(err, "{note}");
    }
    let rejections = if built.compiled.report.is_some() {
        crate::verify::Rejections::default()
    } else {
        crate::verify::sampled_rejections(&built.session.graph, built.root, &built.vocab, target.max_len, target.causal)
    };
    if rejections.total() > 0 {
        let _ = writeln!(
            err,
            "warning: the interpreter rejects {} of {} sampled inputs (the model's output on such inputs means nothing; `raspc verify --allow-rejected` checks the rest):",
            rejections.total(),
            crate::verify::REJECTION_SAMPLES
        );
        for l in rejections.lines() {
            let _ = writeln!(err, "  {l}");
        }
    }
    if let Some(w) = mixed_type_warning(&built.session.graph, built.root, &built.compiled, &built.vocab, target.max_len) {
        let _ = writeln!(err, "{w}");
    }
    if let Some(w) = constant_token_warning(&built.session.graph, built.root, &built.vocab) {
        let _ = writeln!(err, "{w}");
    }
    if let Some(n) = wide_one_hot_note(&built) {
        let _ = writeln!(err, "{n}");
    }
    if bounds && built.compiled.report.is_none() {
        let _ = writeln!(err, "warning: --bounds prints nothing here: it is for real-valued programs (--input-bounds); a token program has no error bounds to show");
    }
    if json {
        let sum = &built.compiled.summary;
        let mut j = serde_json::json!({
            "output": built.compiled.plan.output_label, "path": output.display().to_string(),
            "layers": sum.layers, "attention_sublayers": sum.attn_sublayers, "mlp_sublayers": sum.mlp_sublayers, "heads": sum.heads,
            "d_model": sum.d_model, "mlp_hidden": sum.mlp_hidden, "params": sum.params, "nonzero": sum.nonzero,
        });
        if let Some(r) = &built.compiled.report {
            set(&mut j, "certified_bound_f32", serde_json::json!(r.output_bound));
            set(&mut j, "certified_bound_f64", serde_json::json!(r.output_bound_f64));
            set(&mut j, "input_bounds", serde_json::json!(target.input_bounds));
            if bounds {
                set(&mut j, "sops", r.sops.iter().map(|b| serde_json::json!({ "label": b.label, "lo": b.lo, "hi": b.hi, "err": b.err, "err_f64": b.err_f64 })).collect::<Vec<_>>());
            }
        }
        let _ = writeln!(out, "{j}");
        return Ok(());
    }
    let _ = writeln!(out, "compiled `{}` -> {}: {}", built.compiled.plan.output_label, output.display(), built.compiled.summary);
    if let Some(r) = &built.compiled.report {
        if bounds {
            for b in &r.sops {
                // Four decimals where they say something; small or large ends in exponent form
                // (an interval [0, 1e-6] printed as [0.0000, 0.0000]: helper h8).
                let end = |x: f64| if x == 0.0 || (1e-3..1e6).contains(&x.abs()) { format!("{x:.4}") } else { format!("{x:.4e}") };
                let _ = writeln!(out, "  {}: [{}, {}] err {:.3e} (f64: {:.3e})", b.label, end(b.lo), end(b.hi), b.err, b.err_f64);
            }
        }
        let _ = writeln!(
            out,
            "certified: |{} - program| <= {:.3e} in f32 ({:.3e} in f64) for inputs in [{}]",
            built.compiled.plan.output_label,
            r.output_bound,
            r.output_bound_f64,
            target.input_bounds.as_deref().unwrap_or("")
        );
        let seen = built
            .compiled
            .checkpoint
            .config
            .real_input
            .as_ref()
            .map(|ri| crate::verify::sampled_magnitude(&built.session.graph, built.root, ri, target.max_len, crate::verify::REJECTION_SAMPLES));
        if let Some(w) = r.loose_bound_warning_seen(seen) {
            let _ = writeln!(err, "{w}");
        }
    }
    Ok(())
}

/// A named s-op of numbers stored one-hot over so many values that it is most of the model's
/// width (`m if m > 0 else 0` of a mean over ties: 2,594 values, d_model 2,686, 22 M
/// parameters; helper w27): compiled again with it stored as one number, and said when that
/// model is at most half the size, with the flag that gives it.
pub(crate) fn wide_one_hot_note(built: &Built) -> Option<String> {
    use raspc_compiler::plan::SlotEnc;
    let c = &built.compiled;
    if c.report.is_some() {
        return None;
    }
    let d = c.summary.d_model;
    let (slot, n) = c
        .schedule
        .offset
        .keys()
        .filter_map(|s| match &c.plan.slots[s.0].enc {
            SlotEnc::Cat(v) => Some((&c.plan.slots[s.0], v.len())),
            SlotEnc::Num { .. } => None,
        })
        .max_by_key(|(_, n)| *n)?;
    let SlotEnc::Cat(values) = &slot.enc else { return None };
    if n < 512 || 2 * n < d || values.iter().any(|a| a.is_str() || a.as_f64().is_none()) {
        return None;
    }
    let name = slot.label.split(':').next()?;
    let g = &built.session.graph;
    let named = g.ancestors(built.root).into_iter().any(|id| g.node(id).named && g.node(id).label == name);
    if !named || built.opts.numerical.contains(name) || built.opts.categorical.contains(name) {
        return None;
    }
    let mut opts = built.opts.clone();
    opts.numerical.insert(name.to_string());
    let alt = raspc_compiler::compile(g, built.root, &opts, "").ok()?;
    if alt.summary.params.saturating_mul(2) > c.summary.params {
        return None;
    }
    let n = raspc_compiler::names::thousands;
    Some(format!(
        "note: `{name}` is one-hot over its {} values ({} of d_model {}); stored as one number (`--encoding {name}=numerical`), the model has d_model {} and {} parameters instead of {} (`raspc verify` with the flag checks it)",
        n(values.len()),
        n(values.len()),
        n(d),
        n(alt.summary.d_model),
        n(alt.summary.params),
        n(c.summary.params)
    ))
}

/// A conversion of the input tokens that gives one value for every token of the vocabulary
/// (`tokens_bool` over `--vocab 01`: Python's bool of a non-empty string is True): the program
/// cannot tell the tokens apart through it, which is what the reference does, and rarely what
/// was meant (helper a20: a constant model compiled without a word).
pub fn constant_token_warning(graph: &raspc_lang::Graph, root: raspc_lang::NodeId, vocab: &[raspc_lang::Atom]) -> Option<String> {
    use raspc_lang::graph::{Convert, MapOp, Operand};
    use raspc_lang::NodeKind;
    if vocab.len() < 2 {
        return None;
    }
    graph.ancestors(root).into_iter().find_map(|id| {
        let NodeKind::Map { op: MapOp::Convert(c), args } = &graph.node(id).kind else { return None };
        let [Operand::Sop(t)] = args.as_slice() else { return None };
        if !matches!(graph.node(*t).kind, NodeKind::Tokens) {
            return None;
        }
        // Each token converted on its own, as the interpreter does; a token it cannot convert
        // (`tokens_int` of 'a') is the rejected-inputs warning's business, not this one's.
        let mut values = vocab.iter().map(|tok| match raspc_lang::evaluate(graph, id, std::slice::from_ref(tok)) {
            Ok(raspc_lang::Value::Seq(v)) => v.into_iter().next(),
            _ => None,
        });
        let first = values.next()??;
        if !values.all(|v| v.is_some_and(|v| v == first)) {
            return None;
        }
        let hint = match c {
            Convert::Bool => " (Python's bool of a non-empty string is True; `--vocab '[true,false]'` gives booleans, `tokens == \"1\"` compares characters)",
            _ => "",
        };
        Some(format!(
            "warning: `{}` is {} for every token of the vocabulary ({}): the program cannot tell the tokens apart through it{hint}",
            graph.node(id).label,
            first.repr(),
            vocab.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// A numerical output holds a number, not its type: when the program's output can be one number
/// as values of different types (`1` and `1.0` from a mean of one key or several, `True` and
/// `1`), the model gives one of them for either. So does a one-hot mean (its type says how many
/// keys were selected, which the mean's value does not). Said at compile time, as a warning.
pub fn mixed_type_warning(graph: &raspc_lang::Graph, root: raspc_lang::NodeId, compiled: &raspc_compiler::Compiled, vocab: &[raspc_lang::Atom], max_len: usize) -> Option<String> {
    let numerical = matches!(compiled.checkpoint.output.encoding, raspc_checkpoint::Encoding::Numerical { .. });
    let mean = matches!(graph.node(root).kind, raspc_lang::NodeKind::Aggregate { .. });
    if compiled.report.is_some() || !(numerical || mean) {
        return None;
    }
    let sets = raspc_compiler::infer::infer(graph, root, vocab, max_len);
    let Some(raspc_compiler::infer::ValueSet::Finite(vals)) = sets.get(&root) else { return None };
    let kind = |a: &raspc_lang::Atom| std::mem::discriminant(a);
    // Values by number (0.0 and -0.0 as one): two of different types under one number.
    // The example shown is the pair nearest 0, a non-negative one first: the value set may hold
    // values no input reaches (helper w30: "can be -14 and -14.0" of a length that is never
    // negative made a correct program look wrong).
    let mut by_number: std::collections::HashMap<u64, &raspc_lang::Atom> = std::collections::HashMap::new();
    let mut example: Option<(f64, &raspc_lang::Atom, &raspc_lang::Atom)> = None;
    for b in vals.iter() {
        let Some(x) = b.as_f64() else { continue };
        let a = *by_number.entry((x + 0.0).to_bits()).or_insert(b);
        let rank = |x: f64| (x < 0.0, x.abs());
        if kind(a) != kind(b) && example.is_none_or(|(y, _, _)| rank(x) < rank(y)) {
            example = Some((x, a, b));
        }
    }
    let (_, a, b) = example?;
    Some(format!(
        "warning: `{}` can be {} and {}, one number as values of different types; the model's output holds the number, so `run` gives one of them for either (`verify` compares numbers as Python's == does)",
        compiled.plan.output_label,
        a.repr(),
        b.repr()
    ))
}
