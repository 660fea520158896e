//! `raspc trace`: the residual stream after every sublayer, decoded per s-op.

use crate::args::*;
use crate::cmd::*;
use crate::{verify, Failure};
use std::io::Write;
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub(crate) fn trace_cmd(
    path: &Path,
    input: &str,
    program: Option<&Path>,
    entry: Option<&str>,
    attention: AttentionArg,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    color: bool,
) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let model = raspc_runtime::Model::new(ck.clone(), &raspc_runtime::Device::Cpu).map_err(|e| format!("`{}`: {e}", path.display()))?;
    let mut tokens = parse_tokens("--input", input)?;
    input_file_warning(input, err);
    let json_tokens = tokens.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    // Every sublayer's residual stream is kept (and printed): refused, before running, past what
    // fits.
    let stages = 1 + 2 * ck.config.layers.len();
    within_kept_bytes(
        &format!("trace keeps the residual stream after every sublayer: {stages} stages x {} positions x {} dims", tokens.len() + 1, ck.config.d_model),
        (stages as u128) * (tokens.len() as u128 + 1) * (ck.config.d_model as u128 * 4 + 32),
        "trace a shorter input",
    )?;
    let on_file = |e: raspc_runtime::RuntimeError| format!("`{}`: {e}", path.display());
    // The stream after every sublayer, and what the readout decodes (what `run` prints: the
    // output map may be folded into the readout, so that no slot holds the output).
    let (states, readout) = if model.is_real() {
        let values = model.encode_real(&json_tokens).map_err(|e| format!("`{}`: {e}{}", path.display(), char_input_hint(input, &ck)))?;
        // The interpreter sees the same numbers as floats (tokens_float).
        tokens = values.iter().map(|&v| raspc_lang::Atom::Float(v)).collect();
        let states = model.trace_real(&values, attention_of(attention)).map_err(on_file)?;
        let readout = model.forward_real(std::slice::from_ref(&values), attention_of(attention)).and_then(|t| model.decode(&t)).map_err(on_file)?;
        (states, readout.into_iter().next().unwrap_or_default())
    } else {
        let ids = model.encode(&json_tokens).map_err(|e| format!("`{}`: {e}{}", path.display(), char_input_hint(input, &ck)))?;
        let states = model.trace(&ids, attention_of(attention)).map_err(on_file)?;
        (states, model.run(&json_tokens, attention_of(attention)).map_err(on_file)?)
    };
    // A NaN or an infinity (in the stream, or in a head's scores or weights) decodes to nothing
    // meaningful: the runtime's trace refuses it, naming the sublayer, as `run` does.
    // Real-valued models: an s-op agrees within the certified bound of the output (the bound of
    // the last s-op; earlier ones are certified tighter).
    let num_tol = if model.is_real() { ck.output.tolerance } else { 0.0 };
    // The interpreter's value of every named s-op, when the program is given.
    let mut reference: std::collections::HashMap<String, Vec<raspc_lang::Atom>> = std::collections::HashMap::new();
    // The interpreter's value of the model's output (None with another --entry).
    let mut output_reference: Option<Vec<raspc_lang::Atom>> = None;
    if let Some(p) = program {
        let session = load(p, err, color)?;
        let (_, root) = entry_of(&session, entry, err, color)?;
        if session.graph.node(root).kind.is_selector() {
            return Err(format!("`{}` is a selector; trace compares s-ops: give --entry the s-op the model computes (`{}`)", session.graph.node(root).label, ck.output.label).into());
        }
        // An entry other than the model's output is compared by name only (the output's slot
        // is not that s-op).
        let other_entry = entry.is_some_and(|e| e != ck.output.label);
        if other_entry {
            let _ = writeln!(
                err,
                "note: the model computes `{}`; `--entry {}` names another s-op, compared only where the model holds an s-op of that name",
                ck.output.label,
                entry.unwrap_or_default()
            );
        }
        if !compiled_from(&session, root, &ck) {
            let _ = writeln!(err, "warning: `{}` was not compiled from `{}` (the program hashes differ): s-ops are compared by name only", path.display(), p.display());
        }
        let rejects = |e: raspc_lang::EvalError| format!("the interpreter rejects this input: {}: {}", e.label, e.message);
        let mut all = raspc_lang::interp::evaluate_all(&session.graph, root, &tokens).map_err(rejects)?;
        // A causal model computes, at position i, the program on the prefix ending at i (what
        // `verify --causal` checks): so is every s-op's reference.
        if ck.config.causal {
            for n in 1..tokens.len() {
                let prefix = raspc_lang::interp::evaluate_all(&session.graph, root, &tokens[..n]).map_err(rejects)?;
                for (id, v) in prefix {
                    if let (raspc_lang::Value::Seq(p), Some(raspc_lang::Value::Seq(full))) = (v, all.get_mut(&id))
                        && let Some(last) = p.last()
                    {
                        full[n - 1] = last.clone();
                    }
                }
            }
        }
        let root_value = all.get(&root).cloned();
        if !other_entry && let Some(raspc_lang::Value::Seq(r)) = &root_value {
            output_reference = Some(r.clone());
        }
        for (id, v) in all {
            if let raspc_lang::Value::Seq(s) = v {
                reference.insert(session.graph.node(id).label.clone(), s);
            }
        }
        // The compiler names the output's slot after the output (the entry's name) and gives
        // the s-op that held that name the root's old label (`prog = x` reassigned in a loop:
        // the last `x` is the output): the same swap here.
        let (out_label, root_label) = (ck.output.label.clone(), session.graph.node(root).label.clone());
        if out_label != root_label
            && !other_entry
            && ck.layout.sops.iter().any(|s| s.label == out_label)
            && let Some(raspc_lang::Value::Seq(r)) = root_value
        {
            if let Some(old) = reference.remove(&out_label) {
                reference.insert(root_label, old);
            }
            reference.insert(out_label, r);
        }
    }
    // The last stage that writes each slot: a block whose info names it, or whose output map has
    // a nonzero column in the slot's dims (a slot several blocks add into, an affine sum, is
    // decoded once it is complete).
    let d = ck.config.d_model;
    let stages = crate::inspect::stage_writes(&ck);
    let mut written_at: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (l, layer) in ck.config.layers.iter().enumerate() {
        let (attn, mlp) = (&stages[1 + 2 * l], &stages[2 + 2 * l]);
        let said = |infos: &[raspc_checkpoint::BlockInfo], label: &str| infos.iter().any(|i| i.writes == label);
        for (stage, dims, infos) in [(format!("layer {l} attention"), attn, &layer.head_info), (format!("layer {l} mlp"), mlp, &layer.mlp_info)] {
            for sop in &ck.layout.sops {
                let end = sop.offset.saturating_add(sop.encoding.dims()).min(d);
                // What the block says it writes, or where its weights write (an s-op held in
                // parts is complete once its last part is written).
                if said(infos, &sop.label) || dims.get(sop.offset..end).is_some_and(|r| r.iter().any(|&x| x)) || sop.parts.iter().any(|&p| dims.get(p) == Some(&true)) {
                    written_at.insert(sop.label.clone(), stage.clone());
                }
            }
        }
    }
    let mut first_divergence: Option<(String, String)> = None;
    let mut report = vec![];
    for (stage, x) in &states {
        for sop in &ck.layout.sops {
            let at = written_at.get(&sop.label).map(String::as_str).unwrap_or("embed");
            if at != stage || sop.label.starts_with('<') {
                continue;
            }
            // Rows are d_model wide and layout entries lie within d_model (validated at load):
            // `get` only turns a violation into null instead of a panic.
            // Under hard attention a categorical slot is one-hot (1 at its value, 0 elsewhere) in
            // a model that computes the program: a slot whose largest dim is far from 1, or whose
            // second is far from 0, holds no one value, even if its argmax happens to be the
            // interpreter's (helper f13: a 50/50 split between two lengths read as agreeing, and
            // the divergence was marked two sublayers late).
            let mut ambiguous: Vec<usize> = vec![];
            let values: Vec<serde_json::Value> = x
                .iter()
                .skip(1)
                .enumerate()
                .map(|(pos, row)| match &sop.encoding {
                    raspc_checkpoint::Encoding::Categorical { values } => {
                        let dims = row.get(sop.offset..sop.offset.saturating_add(values.len())).unwrap_or_default();
                        let best = dims.iter().enumerate().fold(None, |b: Option<(usize, f32)>, (i, &x)| if b.is_none_or(|(_, y)| x > y) { Some((i, x)) } else { b });
                        // (The others' largest magnitude: a -0.9 is as far from 0 as a 0.9.)
                        let second = best.map_or(0.0, |(bi, _)| dims.iter().enumerate().filter(|&(i, _)| i != bi).map(|(_, &x)| x.abs()).fold(0.0f32, f32::max));
                        if attention == AttentionArg::Hard && best.is_some_and(|(_, b)| (b - 1.0).abs() > ONE_HOT_SLACK || second > ONE_HOT_SLACK) {
                            ambiguous.push(pos);
                        }
                        best.and_then(|(i, _)| values.get(i)).cloned().unwrap_or_default()
                    }
                    // A set: the values whose dims hold 1; a dim far from both 0 and 1 holds no
                    // set.
                    raspc_checkpoint::Encoding::MultiHot { values } => {
                        let dims = row.get(sop.offset..sop.offset.saturating_add(values.len())).unwrap_or_default();
                        if attention == AttentionArg::Hard && dims.iter().any(|&x| x.abs().min((x - 1.0).abs()) > ONE_HOT_SLACK) {
                            ambiguous.push(pos);
                        }
                        serde_json::Value::Array(raspc_checkpoint::Encoding::held_set(values, dims.iter().map(|&x| f64::from(x))))
                    }
                    // An s-op of whole numbers holding one exactly prints it as one (`3`, not
                    // `3.0`, as `run` and `eval` print it: helper t22); anything else as is.
                    raspc_checkpoint::Encoding::Numerical { values } => sop.number(row).map_or(serde_json::Value::Null, |x| {
                        let whole = values.as_ref().is_some_and(|v| !v.is_empty() && v.iter().all(|v| v.is_i64() || v.is_u64()));
                        if whole && x.fract() == 0.0 && x.abs() < 9.0e15 {
                            serde_json::json!(x as i64)
                        } else {
                            serde_json::json!(x)
                        }
                    }),
                })
                .collect();
            let expected = reference.get(&sop.label);
            let agrees = expected.map(|e| {
                ambiguous.is_empty()
                    && e.len() == values.len()
                    && e.iter().zip(&values).all(|(w, g)| match (g.as_f64(), &sop.encoding) {
                        (Some(x), raspc_checkpoint::Encoding::Numerical { values }) => {
                            w.as_f64().is_some_and(|y| numbers_agree(x, y, values.as_deref(), if sop.label == ck.output.label { Some(ck.output.tolerance) } else { None }, num_tol))
                        }
                        _ => verify::decoded_atom(&raspc_runtime::Decoded::Value(g.clone())).py_eq(w),
                    })
            });
            if agrees == Some(false) && first_divergence.is_none() {
                first_divergence = Some((stage.clone(), sop.label.clone()));
            }
            report.push((stage.clone(), sop.label.clone(), values, expected.cloned(), agrees, ambiguous));
        }
    }
    // The readout, compared as `verify` compares (numbers within the checkpoint's tolerance).
    {
        let values: Vec<serde_json::Value> = readout.iter().map(raspc_runtime::Decoded::to_json).collect();
        let agrees = output_reference.as_ref().map(|want| want.len() == readout.len() && readout.iter().zip(want).all(|(g, w)| verify::agrees(g, w, ck.output.tolerance)));
        if agrees == Some(false) && first_divergence.is_none() {
            first_divergence = Some(("the readout".into(), ck.output.label.clone()));
        }
        report.push(("the readout".into(), ck.output.label.clone(), values, output_reference, agrees, vec![]));
    }
    if json {
        let rows: Vec<serde_json::Value> = report
            .iter()
            .map(|(stage, label, values, expected, agrees, ambiguous)| {
                serde_json::json!({
                    "stage": stage, "sop": label, "values": values,
                    "expected": expected.as_ref().map(|e| e.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>()),
                    "agrees": agrees, "not_one_hot": ambiguous,
                })
            })
            .collect();
        let fd = first_divergence.as_ref().map(|(s, l)| serde_json::json!({ "stage": s, "sop": l }));
        let _ = writeln!(out, "{}", serde_json::json!({ "trace": rows, "first_divergence": fd }));
        return if first_divergence.is_some() { Err(Failure::Silent) } else { Ok(()) };
    }
    let mut last_stage = String::new();
    for (stage, label, values, expected, agrees, ambiguous) in &report {
        if *stage != last_stage {
            let _ = writeln!(out, "{stage}:");
            last_stage = stage.clone();
        }
        // A number the residual stream held in f32 prints as that f32 (0.2, not 0.20000000298023224).
        let shown: Vec<String> = values
            .iter()
            .map(|v| match v.as_f64() {
                Some(x) if v.is_f64() && x.is_finite() && f64::from(x as f32) == x => format!("{:?}", x as f32),
                // A multi-hot entry's set of values.
                _ if v.is_array() => {
                    format!("{{{}}}", v.as_array().into_iter().flatten().map(|a| verify::decoded_atom(&raspc_runtime::Decoded::Value(a.clone())).repr()).collect::<Vec<_>>().join(", "))
                }
                _ => verify::decoded_atom(&raspc_runtime::Decoded::Value(v.clone())).repr(),
            })
            .collect();
        let mark = match (agrees, expected) {
            (Some(true), _) => "  (= interpreter)".to_string(),
            (Some(false), Some(e)) => {
                let first = first_divergence.as_ref().is_some_and(|(s, l)| s == stage && l == label);
                format!("  (interpreter: [{}]){}", e.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "), if first { "  <-- first divergence" } else { "" })
            }
            _ => String::new(),
        };
        let blur = match (ambiguous.is_empty(), values.first().is_some_and(serde_json::Value::is_array)) {
            (true, _) => String::new(),
            (false, true) => format!("  (dims not 0 or 1 at positions {ambiguous:?}: shown as those above 1/2)"),
            (false, false) => format!("  (not one-hot at positions {ambiguous:?}: shown by its largest dim)"),
        };
        let _ = writeln!(out, "{}", crate::inspect::printable(&format!("  {label} = [{}]{blur}{mark}", shown.join(", "))));
    }
    // (The readout, the last row, is compared too, and said so, but is not an s-op.)
    let compared = report.iter().filter(|r| r.4.is_some() && r.0 != "the readout").count();
    let readout_compared = report.last().is_some_and(|r| r.4.is_some() && r.0 == "the readout");
    if let (Some(p), 0) = (program, compared) {
        return Err(format!("trace: nothing was compared: no s-op of the model is named in `{}`{}", p.display(), entry.map(|e| format!(" (--entry {e})")).unwrap_or_default()).into());
    }
    if program.is_some() {
        match &first_divergence {
            None => {
                let and_readout = if readout_compared { ", and the readout" } else { "" };
                let _ = writeln!(out, "trace: every s-op agrees with the interpreter ({compared} compared{and_readout})");
            }
            Some((s, l)) => {
                let _ = writeln!(out, "trace: first divergence at `{}` after {s}", crate::inspect::printable(l));
            }
        }
    }
    // Like `verify`, a divergence from the interpreter is a failure (exit status 1).
    if first_divergence.is_some() {
        return Err(Failure::Silent);
    }
    Ok(())
}

/// How far a one-hot slot's dims may be from 1 and 0 under hard attention before the slot
/// holds no one value (a compiled one-hot is exact up to f32 rounding; a tied mean of several
/// values is at most 1/2).
const ONE_HOT_SLACK: f32 = 0.25;

/// Whether the number `x` the model holds for an s-op is the interpreter's `y`. With the
/// s-op's values listed, as `run` decodes the output: `x` and `y` have the same nearest listed
/// value, both within the output's tolerance (the output) or half the gap to the next listed
/// value (other s-ops). Without a list: within the output's tolerance, or 1e-3
/// relative for other s-ops of a token model (whose checkpoints state no tolerance for them),
/// or `real_tol`, the certified bound of a real-valued model.
fn numbers_agree(x: f64, y: f64, values: Option<&[serde_json::Value]>, out_tol: Option<f64>, real_tol: f64) -> bool {
    let mut listed: Vec<f64> = values.unwrap_or_default().iter().filter_map(|v| v.as_f64().or_else(|| v.as_bool().map(f64::from))).collect();
    listed.sort_by(f64::total_cmp);
    listed.dedup();
    if listed.is_empty() || real_tol > 0.0 {
        return (x - y).abs() <= out_tol.unwrap_or(1e-3 * y.abs().max(1.0)).max(real_tol);
    }
    let nearest = |x: f64| {
        let i = listed.partition_point(|&v| v < x);
        [i.checked_sub(1), Some(i).filter(|&i| i < listed.len())].into_iter().flatten().min_by(|&a, &b| (listed[a] - x).abs().total_cmp(&(listed[b] - x).abs()))
    };
    let (Some(k), Some(ky)) = (nearest(x), nearest(y)) else { return false };
    let gap = [k.checked_sub(1).map(|j| listed[k] - listed[j]), listed.get(k + 1).map(|v| v - listed[k])].into_iter().flatten().fold(f64::INFINITY, f64::min);
    let tol = out_tol.unwrap_or(gap / 2.0);
    // The interpreter's float may be another rounding of a listed number (0.44999999999999996
    // for 0.45): both snap to the same listed value.
    k == ky && (x - listed[k]).abs() <= tol && (y - listed[k]).abs() <= tol
}

#[cfg(test)]
mod tests {
    use super::numbers_agree;
    use serde_json::json;

    /// The rule `run` decodes with: a neighbouring listed value is a divergence however close
    /// in relative terms (f32 holds 20000001 as 20000000), another rounding of the same listed
    /// number is not.
    #[test]
    fn a_number_agrees_only_when_it_snaps_to_the_interpreters_value() {
        let big = [json!(2), json!(10000008), json!(20000000), json!(20000001)];
        assert!(!numbers_agree(20000000.0, 20000001.0, Some(&big), None, 0.0));
        assert!(!numbers_agree(20000000.0, 20000001.0, Some(&big), Some(0.5), 0.0));
        assert!(numbers_agree(20000001.0, 20000001.0, Some(&big), None, 0.0));
        // 0.45 computed as 0.9 / 2 and as 0.15 * 3: the list holds one of them.
        let (a, b) = (0.9f64 / 2.0, 0.15f64 * 3.0);
        assert_ne!(a, b);
        let means = [json!(0.25), json!(a), json!(0.5)];
        assert!(numbers_agree(f64::from(b as f32), b, Some(&means), None, 0.0));
        assert!(!numbers_agree(0.5, b, Some(&means), None, 0.0));
        // Without a list: the output's tolerance, else 1e-3 relative.
        assert!(numbers_agree(1.0004, 1.0, None, Some(0.001), 0.0));
        assert!(!numbers_agree(1.0004, 1.0, None, Some(0.0001), 0.0));
        assert!(numbers_agree(1000.9, 1000.0, None, None, 0.0));
        assert!(!numbers_agree(1002.0, 1000.0, None, None, 0.0));
    }
}
