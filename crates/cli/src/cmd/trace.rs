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
    let model = raspc_runtime::Model::new(ck.clone(), &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?;
    let mut tokens = parse_tokens("--input", input)?;
    let json_tokens = tokens.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    let states = if model.is_real() {
        let values = model.encode_real(&json_tokens).map_err(|e| e.to_string())?;
        // The interpreter sees the same numbers as floats (tokens_float).
        tokens = values.iter().map(|&v| raspc_lang::Atom::Float(v)).collect();
        model.trace_real(&values, attention_of(attention)).map_err(|e| e.to_string())?
    } else {
        let ids = model.encode(&json_tokens).map_err(|e| e.to_string())?;
        model.trace(&ids, attention_of(attention)).map_err(|e| e.to_string())?
    };
    // Real-valued models: an s-op agrees within the certified bound of the output (the bound of
    // the last s-op; earlier ones are certified tighter).
    let num_tol = if model.is_real() { ck.output.tolerance } else { 0.0 };
    // The interpreter's value of every named s-op, when the program is given.
    let mut reference: std::collections::HashMap<String, Vec<raspc_lang::Atom>> = std::collections::HashMap::new();
    if let Some(p) = program {
        let session = load(p, err, color)?;
        let (_, root) = session.entry(entry)?;
        let all = raspc_lang::interp::evaluate_all(&session.graph, root, &tokens).map_err(|e| format!("the interpreter rejects this input: {}: {}", e.label, e.message))?;
        for (id, v) in all {
            if let raspc_lang::Value::Seq(s) = v {
                reference.insert(session.graph.node(id).label.clone(), s);
            }
        }
    }
    // Which stage writes each slot.
    let mut written_at: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for i in &layer.head_info {
            written_at.insert(i.writes.clone(), format!("layer {l} attention"));
        }
        for i in &layer.mlp_info {
            written_at.insert(i.writes.clone(), format!("layer {l} mlp"));
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
            let values: Vec<serde_json::Value> = x
                .iter()
                .skip(1)
                .map(|row| match &sop.encoding {
                    raspc_checkpoint::Encoding::Categorical { values } => {
                        let dims = row.get(sop.offset..sop.offset.saturating_add(values.len())).unwrap_or_default();
                        let best = dims.iter().enumerate().fold(None, |b: Option<(usize, f32)>, (i, &x)| if b.is_none_or(|(_, y)| x > y) { Some((i, x)) } else { b });
                        best.and_then(|(i, _)| values.get(i)).cloned().unwrap_or_default()
                    }
                    raspc_checkpoint::Encoding::Numerical { .. } => sop.number(row).map_or(serde_json::Value::Null, |x| serde_json::json!(x)),
                })
                .collect();
            let expected = reference.get(&sop.label);
            let agrees = expected.map(|e| {
                e.len() == values.len()
                    && e.iter().zip(&values).all(|(w, g)| match (g.as_f64(), &sop.encoding) {
                        (Some(x), raspc_checkpoint::Encoding::Numerical { .. }) => w.as_f64().is_some_and(|y| (x - y).abs() <= (1e-3 * y.abs().max(1.0)).max(num_tol)),
                        _ => verify::decoded_atom(&raspc_runtime::Decoded::Value(g.clone())).py_eq(w),
                    })
            });
            if agrees == Some(false) && first_divergence.is_none() {
                first_divergence = Some((stage.clone(), sop.label.clone()));
            }
            report.push((stage.clone(), sop.label.clone(), values, expected.cloned(), agrees));
        }
    }
    if json {
        let rows: Vec<serde_json::Value> = report
            .iter()
            .map(|(stage, label, values, expected, agrees)| {
                serde_json::json!({
                    "stage": stage, "sop": label, "values": values,
                    "expected": expected.as_ref().map(|e| e.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>()),
                    "agrees": agrees,
                })
            })
            .collect();
        let fd = first_divergence.as_ref().map(|(s, l)| serde_json::json!({ "stage": s, "sop": l }));
        let _ = writeln!(out, "{}", serde_json::json!({ "trace": rows, "first_divergence": fd }));
        return Ok(());
    }
    let mut last_stage = String::new();
    for (stage, label, values, expected, agrees) in &report {
        if *stage != last_stage {
            let _ = writeln!(out, "{stage}:");
            last_stage = stage.clone();
        }
        let shown: Vec<String> = values.iter().map(|v| verify::decoded_atom(&raspc_runtime::Decoded::Value(v.clone())).repr()).collect();
        let mark = match (agrees, expected) {
            (Some(true), _) => "  (= interpreter)".to_string(),
            (Some(false), Some(e)) => {
                let first = first_divergence.as_ref().is_some_and(|(s, l)| s == stage && l == label);
                format!("  (interpreter: [{}]){}", e.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "), if first { "  <-- first divergence" } else { "" })
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "  {label} = [{}]{mark}", shown.join(", "));
    }
    if program.is_some() {
        match &first_divergence {
            None => {
                let _ = writeln!(out, "trace: every s-op agrees with the interpreter");
            }
            Some((s, l)) => {
                let _ = writeln!(out, "trace: first divergence at `{l}` after {s}");
            }
        }
    }
    Ok(())
}
