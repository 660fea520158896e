//! `raspc inspect`: what a checkpoint holds, layer by layer, in the residual basis's own names.

use raspc_checkpoint::{Checkpoint, Encoding, Tensor};
use std::fmt::Write;

/// A tensor the config requires, with the shape the config implies. A checkpoint read from a
/// file has every one (validated at load); this check makes the row/column arithmetic of
/// [`block`] and of `plot` safe for a `Checkpoint` built in memory too: an error, not a panic.
pub fn tensor<'a>(ck: &'a Checkpoint, name: &str) -> Result<&'a Tensor, String> {
    let t = ck.tensors.get(name).ok_or_else(|| format!("the checkpoint has no tensor `{name}`"))?;
    let want = ck.config.expected_tensors().remove(name).ok_or_else(|| format!("the config does not use a tensor `{name}`"))?;
    if t.shape != want || t.data.len() != want.iter().product::<usize>() {
        return Err(format!("tensor `{name}` has shape {:?} ({} values), expected {want:?}", t.shape, t.data.len()));
    }
    Ok(t)
}

/// Name of every residual dim: `tokens=a`, `indices=3`, `frac (numeric)`.
pub fn basis(ck: &Checkpoint) -> Vec<String> {
    let mut names = vec![String::from("?"); ck.config.d_model];
    for s in &ck.layout.sops {
        match &s.encoding {
            Encoding::Categorical { values } | Encoding::MultiHot { values } => {
                for (i, v) in values.iter().enumerate() {
                    // A string that could be read as another token (`"1"` next to `1`, `""`,
                    // `" "`) keeps its quotes; control characters are escaped (`printable`).
                    let shown = match v {
                        serde_json::Value::String(x) if x.is_empty() || x.trim() != x || x.parse::<serde_json::Value>().is_ok_and(|j| !j.is_string()) => printable(&v.to_string()),
                        serde_json::Value::String(x) => printable(x),
                        other => other.to_string(),
                    };
                    // Layout entries lie within d_model (validated at load); out of range is skipped.
                    if let Some(slot) = names.get_mut(s.offset + i) {
                        *slot = format!("{}={shown}", printable(&s.label));
                    }
                }
            }
            Encoding::Numerical { .. } => {
                if let Some(slot) = names.get_mut(s.offset) {
                    *slot = format!("{} (numeric)", printable(&s.label));
                }
            }
        }
    }
    names
}

fn counts(ck: &Checkpoint, prefix: &str) -> (usize, usize) {
    ck.tensors.iter().filter(|(k, _)| k.starts_with(prefix)).fold((0, 0), |(p, nz), (_, t)| (p + t.data.len(), nz + t.data.iter().filter(|x| **x != 0.0).count()))
}

/// Values of a categorical encoding listed in `inspect`'s text.
const MAX_LISTED: usize = 24;

fn kind_word(e: &Encoding) -> &'static str {
    match e {
        Encoding::Categorical { .. } => "categorical",
        Encoding::MultiHot { .. } => "multi_hot",
        Encoding::Numerical { .. } => "numerical",
    }
}

fn enc_text(e: &Encoding) -> String {
    match e {
        // A long list is cut (a 1,218-value slot made a 20 kB line); `inspect --json` has all.
        Encoding::Categorical { values } | Encoding::MultiHot { values } if values.len() > MAX_LISTED => {
            let head: Vec<String> = values[..MAX_LISTED - 1].iter().map(|v| v.to_string()).collect();
            format!("{} [{}, …, {}] ({} values)", kind_word(e), head.join(","), values[values.len() - 1], values.len())
        }
        Encoding::Categorical { values } | Encoding::MultiHot { values } => format!("{} {}", kind_word(e), serde_json::Value::Array(values.clone())),
        Encoding::Numerical { values: Some(v) } => format!("numerical ({} known values)", v.len()),
        Encoding::Numerical { values: None } => "numerical".into(),
    }
}

/// The summary: config, layout, every block.
pub fn summary(ck: &Checkpoint, json: bool) -> String {
    let c = &ck.config;
    if json {
        let layers: Vec<serde_json::Value> = c
            .layers
            .iter()
            .enumerate()
            .map(|(l, layer)| {
                let heads: Vec<serde_json::Value> = (layer.heads.iter().enumerate())
                    .map(|(h, d_head)| {
                        let (p, nz) = counts(ck, &format!("layers.{l}.attn.{h}."));
                        serde_json::json!({ "d_head": d_head, "info": layer.head_info.get(h), "params": p, "nonzero": nz })
                    })
                    .collect();
                let (p, nz) = counts(ck, &format!("layers.{l}.mlp."));
                serde_json::json!({
                    "heads": heads,
                    "mlp": layer.mlp.as_ref().map(|m| serde_json::json!({ "kind": m.kind, "hidden": m.hidden, "parts": layer.mlp_info, "params": p, "nonzero": nz })),
                })
            })
            .collect();
        let (p, nz) = counts(ck, "");
        return serde_json::json!({
            "config": { "d_model": c.d_model, "max_seq_len": c.max_seq_len, "causal": c.causal, "vocab": c.vocab, "bos_id": c.bos_id, "attention": c.attention, "readout_dims": c.readout_dims, "real_input": c.real_input },
            "layout": ck.layout.sops,
            "output": ck.output,
            "layers": layers,
            "params": p,
            "nonzero": nz,
            "program_hash": ck.program_hash,
            "compiler_version": ck.compiler_version,
        })
        .to_string()
            + "\n";
    }
    let mut s = String::new();
    let (p, nz) = counts(ck, "");
    let _ = writeln!(s, "raspc checkpoint, written by {} from {}", ck.compiler_version, ck.program_hash);
    let vocab: Vec<String> = c.vocab.iter().map(|v| if v.id == c.bos_id { format!("BOS={}", v.id) } else { format!("{}={}", v.token, v.id) }).collect();
    let _ = writeln!(s, "d_model {}, {} layers, max_seq_len {}, causal {}, params {p}, nonzero {nz}", c.d_model, c.layers.len(), c.max_seq_len, c.causal);
    let _ = writeln!(s, "vocabulary: {}", vocab.join(", "));
    // What a real-valued model's certified bound assumes of its inputs (helper f13: not shown).
    if let Some(r) = &c.real_input {
        let blocks: Vec<String> = r.blocks.iter().map(|b| format!("; [{}, {}] at positions {}..{}", b.lo, b.hi, b.start, b.end)).collect();
        let _ = writeln!(s, "real-valued input: numbers in [{}, {}]{}", r.lo, r.hi, blocks.concat());
    }
    let _ = writeln!(s, "attention: hard (tie tolerance {}), soft beta {}", c.attention.tie_tolerance, c.attention.soft_beta);
    let _ = writeln!(s, "output: {} ({})", ck.output.label, enc_text(&ck.output.encoding));
    let _ = writeln!(s, "\nresidual layout:");
    for sop in &ck.layout.sops {
        let parts = if sop.parts.is_empty() { String::new() } else { format!(", plus the parts at dims {:?}", sop.parts) };
        let _ = writeln!(s, "  {:>5}..{:<5} {:<24} {}{parts}", sop.offset, sop.offset + sop.encoding.dims(), sop.label, enc_text(&sop.encoding));
    }
    for (l, layer) in c.layers.iter().enumerate() {
        let _ = writeln!(s, "\nlayer {l}");
        for (h, d_head) in layer.heads.iter().enumerate() {
            let (p, nz) = counts(ck, &format!("layers.{l}.attn.{h}."));
            let _ = writeln!(s, "  head {h} (d_head {d_head}, params {p}, nonzero {nz})");
            if let Some(i) = layer.head_info.get(h) {
                let _ = writeln!(s, "    {}\n    reads {} -> writes {}", i.what, i.reads.join(", "), i.writes);
            }
        }
        if let Some(m) = &layer.mlp {
            let (p, nz) = counts(ck, &format!("layers.{l}.mlp."));
            let kind = match m.kind {
                raspc_checkpoint::MlpKind::Relu => "relu",
                raspc_checkpoint::MlpKind::Reglu => "reglu (gated)",
            };
            let _ = writeln!(s, "  mlp ({kind}, hidden {}, params {p}, nonzero {nz})", m.hidden);
            for i in &layer.mlp_info {
                let r = i.hidden.map(|[a, b]| format!("units {a}..{b}: ")).unwrap_or_default();
                let _ = writeln!(s, "    {r}{}\n      reads {} -> writes {}", i.what, i.reads.join(", "), i.writes);
            }
        }
    }
    s
}

/// A bias vector shown as one row named `bias`, with its own (1-D) shape.
fn bias(name: &str, t: &Tensor, cols: &[String], json: bool, width: Option<usize>) -> (String, serde_json::Value) {
    let n = t.data.len();
    let (text, mut value) = matrix(name, &Tensor { shape: vec![1, n], data: t.data.clone() }, &["bias".to_string()], cols, json, width);
    value["shape"] = serde_json::json!(t.shape);
    if let Some(o) = value.as_object_mut() {
        o.remove("row_indices");
    }
    (text.replacen(&format!("{name} [1, {n}]"), &format!("{name} [{n}]"), 1), value)
}

/// One matrix with labelled rows and columns; all-zero rows and columns are left out.
///
/// Index safety: `t` comes from [`tensor`] (shape checked against the config, data length the
/// product of the shape) and `rows`/`cols` have one label per row/column ([`basis`] is d_model
/// long, `cols` is built from the shape), so the indexing below is in range. With a `width`,
/// the text shows the columns in panels that fit it.
fn matrix(name: &str, t: &Tensor, rows: &[String], cols: &[String], json: bool, width: Option<usize>) -> (String, serde_json::Value) {
    let (r, c) = (t.shape[0], t.shape.get(1).copied().unwrap_or(1));
    let at = |i: usize, j: usize| t.data[i * c + j];
    let keep_r: Vec<usize> = (0..r).filter(|&i| (0..c).any(|j| at(i, j) != 0.0)).collect();
    let keep_c: Vec<usize> = (0..c).filter(|&j| (0..r).any(|i| at(i, j) != 0.0)).collect();
    // `shape` is the tensor's; `rows`/`cols` (and their indices into it) are the nonzero ones
    // that `values` holds: a consumer rebuilds the dense matrix from the indices.
    let value = serde_json::json!({
        "name": name,
        "shape": t.shape,
        "transposed": false,
        "nonzero_only": true,
        "row_indices": keep_r,
        "col_indices": keep_c,
        "rows": keep_r.iter().map(|&i| &rows[i]).collect::<Vec<_>>(),
        "cols": keep_c.iter().map(|&j| &cols[j]).collect::<Vec<_>>(),
        "values": keep_r.iter().map(|&i| keep_c.iter().map(|&j| at(i, j)).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    if json {
        return (String::new(), value);
    }
    let mut s = format!("{name} {:?} ({} of {} rows and {} of {} columns are nonzero)\n", t.shape, keep_r.len(), r, keep_c.len(), c);
    let w = keep_r.iter().map(|&i| rows[i].len()).max().unwrap_or(0).max(4);
    // Columns per panel: all of them, or as many 9-character cells as fit beside the labels.
    let per = width.map_or(keep_c.len(), |width| (width.saturating_sub(w) / 9).max(1)).max(1);
    let panels: Vec<&[usize]> = keep_c.chunks(per).collect();
    for (p, panel) in panels.iter().enumerate() {
        if panels.len() > 1 {
            let (first, last) = (&cols[panel[0]], &cols[panel[panel.len() - 1]]);
            let _ = writeln!(s, "-- nonzero columns {}..{} of {} ({first} .. {last}) --", p * per + 1, p * per + panel.len(), keep_c.len());
        }
        let _ = write!(s, "{:w$}", "");
        for &j in *panel {
            let _ = write!(s, " {:>8}", truncate(&cols[j], 8));
        }
        s.push('\n');
        for &i in &keep_r {
            let _ = write!(s, "{:w$}", rows[i]);
            for &j in *panel {
                let x = at(i, j);
                let _ = write!(s, " {:>8}", cell(x));
            }
            s.push('\n');
        }
    }
    (s, value)
}

/// An output map (`[cols, d_model]`) shown transposed, so that rows are residual dims with
/// readable names. The JSON keeps the tensor's own `name` and `shape` (so a script can look it
/// up in the file) with `"transposed": true`: its `values` are rows of residual dims (helper c19:
/// it was named `... (transposed)` with the shape reversed).
fn transposed_matrix(name: &str, t: &Tensor, rows: &[String], cols: &[String], json: bool, width: Option<usize>) -> (String, serde_json::Value) {
    let shown = transpose(t);
    let (text, mut value) = matrix(name, &shown, rows, cols, json, width);
    value["shape"] = serde_json::json!(t.shape);
    value["transposed"] = serde_json::json!(true);
    let text = text.replacen(&format!("{name} {:?}", shown.shape), &format!("{name} {:?}, transposed (rows: residual dims)", t.shape), 1);
    (text, value)
}

/// Output maps are shown transposed, so rows are always residual dims with readable names.
fn transpose(t: &Tensor) -> Tensor {
    let (r, c) = (t.shape[0], t.shape[1]);
    let mut data = vec![0f32; r * c];
    for i in 0..r {
        for j in 0..c {
            data[j * r + i] = t.data[i * c + j];
        }
    }
    Tensor { shape: vec![c, r], data }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// One head's or one MLP's matrices.
pub fn block(ck: &Checkpoint, layer: usize, head: Option<usize>, json: bool) -> Result<String, String> {
    block_in(ck, layer, head, json, None)
}

/// [`block`] for a person at a terminal `width` columns wide: a matrix wider than that is shown
/// in panels of columns, each within the width (JSON is unchanged).
pub fn block_for_terminal(ck: &Checkpoint, layer: usize, head: Option<usize>, json: bool, width: usize) -> Result<String, String> {
    block_in(ck, layer, head, json, Some(width))
}

fn block_in(ck: &Checkpoint, layer: usize, head: Option<usize>, json: bool, width: Option<usize>) -> Result<String, String> {
    let c = &ck.config;
    let lc = c.layers.get(layer).ok_or_else(|| {
        format!(
            "layer {layer} does not exist (the model has {})",
            match c.layers.len() {
                1 => "1 layer, layer 0".to_string(),
                n => format!("{n} layers, 0 to {}", n - 1),
            }
        )
    })?;
    let names = basis(ck);
    let mut text = String::new();
    let mut values = vec![];
    match head {
        Some(h) => {
            let dh = *lc.heads.get(h).ok_or_else(|| match lc.heads.len() {
                0 => format!("layer {layer} has no attention heads (its MLP: --mlp)"),
                k => format!("layer {layer} has no head {h} (it has {k}: 0 to {})", k - 1),
            })?;
            let cols: Vec<String> = (0..dh).map(|i| format!("c{i}")).collect();
            if let Some(i) = lc.head_info.get(h) {
                text += &format!("{}\n\n", i.what);
            }
            for w in ["w_q", "w_k", "w_v"] {
                let n = raspc_checkpoint::names::head(layer, h, w);
                let (s, v) = matrix(&n, tensor(ck, &n)?, &names, &cols, json, width);
                text += &s;
                text.push('\n');
                values.push(v);
            }
            let n = raspc_checkpoint::names::head(layer, h, "w_o");
            let (s, v) = transposed_matrix(&n, tensor(ck, &n)?, &names, &cols, json, width);
            text += &s;
            values.push(v);
        }
        None => {
            let m = lc.mlp.as_ref().ok_or_else(|| format!("layer {layer} has no MLP"))?;
            let cols: Vec<String> = (0..m.hidden).map(|i| format!("h{i}")).collect();
            for i in &lc.mlp_info {
                let [a, b] = i.hidden.unwrap_or([0, 0]);
                text += &format!("{} (units {a}..{b})\n", i.what);
            }
            text.push('\n');
            let mut parts: Vec<(&str, bool)> = vec![("w_in", false), ("b_in", false)];
            if m.kind == raspc_checkpoint::MlpKind::Reglu {
                parts.extend([("w_gate", false), ("b_gate", false)]);
            }
            parts.push(("w_out", true));
            for (i, (which, transposed)) in parts.into_iter().enumerate() {
                let n = raspc_checkpoint::names::mlp(layer, which);
                let t = tensor(ck, &n)?;
                let (s, v) = if transposed {
                    transposed_matrix(&n, t, &names, &cols, json, width)
                } else if t.shape.len() == 1 {
                    bias(&n, t, &cols, json, width)
                } else {
                    matrix(&n, t, &names, &cols, json, width)
                };
                text += &if i == 0 { s } else { format!("\n{s}") };
                values.push(v);
            }
            // The output bias adds into the residual stream: one row over its dims.
            let n = raspc_checkpoint::names::mlp(layer, "b_out");
            let t = tensor(ck, &n)?;
            let (s, v) = bias(&n, t, &names, json, width);
            text += &format!("\n{s}");
            values.push(v);
        }
    }
    if json {
        return Ok(serde_json::Value::Array(values).to_string() + "\n");
    }
    Ok(text)
}

/// A weight in an 8-character cell: `.` for exactly zero, three decimals (trailing zeros
/// trimmed) where that shows the value, else scientific notation (a nonzero weight never
/// prints as `0`, a huge one never overflows the cell).
fn cell(x: f32) -> String {
    if x == 0.0 {
        return ".".to_string();
    }
    let fixed = format!("{x:.3}");
    let fixed = fixed.trim_end_matches('0').trim_end_matches('.');
    if x.abs() >= 5e-3 && fixed.len() <= 8 {
        return fixed.to_string();
    }
    format!("{x:.1e}")
}

/// `s` with control characters (other than line breaks) escaped (`\u{1b}`): labels and
/// descriptions come from the checkpoint file, and an escape sequence in one must not reach
/// the terminal (or an SVG, where it is not even valid XML).
pub fn printable(s: &str) -> String {
    s.chars().map(|c| if hidden(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Characters a label must not carry to a terminal or a figure as they are: controls, and the
/// invisible format characters that reorder (bidirectional overrides) or hide text.
pub fn hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}')
}

/// [`printable`] line by line: the text's own line breaks stay.
pub fn printable_lines(s: &str) -> String {
    s.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

/// The checkpoint with every string it shows as text (labels, block descriptions, the program
/// hash and compiler version) made [`printable`], so that a line break in a label cannot start
/// a line of its own in `inspect`'s output.
pub fn with_printable_strings(mut ck: Checkpoint) -> Checkpoint {
    let fix = |s: &mut String| {
        if s.chars().any(hidden) {
            *s = printable(s);
        }
    };
    for sop in &mut ck.layout.sops {
        fix(&mut sop.label);
    }
    fix(&mut ck.output.label);
    fix(&mut ck.program_hash);
    fix(&mut ck.compiler_version);
    for layer in &mut ck.config.layers {
        for info in layer.head_info.iter_mut().chain(layer.mlp_info.iter_mut()) {
            fix(&mut info.what);
            fix(&mut info.writes);
            info.reads.iter_mut().for_each(fix);
        }
    }
    ck
}

/// The residual dims each stage writes, from its weights: `[embed, layer 0 attention, layer 0
/// MLP, layer 1 attention, ...]`, each `d_model` flags (the embeddings' tables; every head's
/// `w_o`; an MLP's `w_out` and `b_out`). `trace` and `plot` read who writes a slot from it.
pub(crate) fn stage_writes(ck: &Checkpoint) -> Vec<Vec<bool>> {
    let d = ck.config.d_model;
    let mut out = vec![vec![false; d]; 1 + 2 * ck.config.layers.len()];
    let mut mark = |stage: usize, name: &str| {
        if let Some(t) = ck.tensors.get(name)
            && d > 0
            && t.shape.last() == Some(&d)
        {
            for row in t.data.chunks(d) {
                for (w, &x) in out[stage].iter_mut().zip(row) {
                    *w |= x != 0.0;
                }
            }
        }
    };
    for name in [raspc_checkpoint::names::TOKEN_EMBEDDING, raspc_checkpoint::names::POSITION_EMBEDDING, raspc_checkpoint::names::VALUE_EMBEDDING] {
        mark(0, name);
    }
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for h in 0..layer.heads.len() {
            mark(1 + 2 * l, &raspc_checkpoint::names::head(l, h, "w_o"));
        }
        mark(2 + 2 * l, &raspc_checkpoint::names::mlp(l, "w_out"));
        mark(2 + 2 * l, &raspc_checkpoint::names::mlp(l, "b_out"));
    }
    out
}
