//! `raspc export --to onnx`: a checkpoint as an ONNX graph (opset 17) that ONNX Runtime and
//! other ONNX tools run unchanged.
//!
//! Inputs: `tokens` (int64 `[batch, seq]`, token ids with BOS first, as `raspc run` encodes
//! them), `key_mask` (float `[batch, seq]`: 1 for a real position, 0 for padding; padded keys
//! are never attended to) and, for real-valued checkpoints, `values` (float `[batch, seq]`: the
//! input numbers; what it holds at BOS or padding is not read). Output: `readout` (float `[batch, seq, readout_dims]`), decoded as
//! docs/checkpoint-format.md says. Attention is fixed at export: soft (softmax(β·scores)) or
//! hard (an average over the keys within the tie tolerance of the row maximum, computed as a
//! mask of the row maximum). The protobuf is written here directly (no ONNX library).

use raspc_checkpoint::{Checkpoint, MlpKind};
use raspc_runtime::Attention;

const OPSET: u64 = 17;
const IR_VERSION: u64 = 8;
const FLOAT: u64 = 1;
const INT64: u64 = 7;
const BOOL: u64 = 9;

/// A protobuf message under construction.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }
    fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.key(field, 0);
        self.varint(v as u64);
        self
    }
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }
    fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

enum Attr {
    Int(i64),
    Ints(Vec<i64>),
}

/// The graph being built: nodes, initializers, and a counter for fresh value names.
#[derive(Default)]
struct Graph {
    nodes: Vec<Msg>,
    /// Initializers by name (only those some node reads are written).
    inits: Vec<(String, Msg)>,
    used: std::collections::BTreeSet<String>,
    next: usize,
}

impl Graph {
    fn fresh(&mut self, hint: &str) -> String {
        self.next += 1;
        format!("{hint}_{}", self.next)
    }

    fn node(&mut self, op: &str, inputs: &[&str], attrs: &[(&str, Attr)], hint: &str) -> String {
        let out = self.fresh(hint);
        let mut n = Msg::default();
        for i in inputs {
            n.str(1, i);
            self.used.insert(i.to_string());
        }
        n.str(2, &out);
        n.str(3, &out);
        n.str(4, op);
        for (name, a) in attrs {
            let mut m = Msg::default();
            m.str(1, name);
            match a {
                Attr::Int(v) => {
                    m.int(3, *v);
                    m.int(20, 2);
                }
                Attr::Ints(vs) => {
                    for v in vs {
                        m.int(8, *v);
                    }
                    m.int(20, 7);
                }
            }
            n.msg(5, &m);
        }
        self.nodes.push(n);
        out
    }

    fn init(&mut self, name: &str, dtype: u64, dims: &[usize], raw: Vec<u8>) -> String {
        let mut t = Msg::default();
        for &d in dims {
            t.int(1, d as i64);
        }
        t.int(2, dtype as i64);
        t.str(8, name);
        t.bytes(9, &raw);
        self.inits.push((name.to_string(), t));
        name.to_string()
    }

    fn floats(&mut self, name: &str, dims: &[usize], data: &[f32]) -> String {
        self.init(name, FLOAT, dims, data.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn ints(&mut self, name: &str, data: &[i64]) -> String {
        self.init(name, INT64, &[data.len()], data.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

fn value_info(name: &str, elem: u64, dims: &[Result<usize, &str>]) -> Msg {
    let mut shape = Msg::default();
    for d in dims {
        let mut dim = Msg::default();
        match d {
            Ok(v) => dim.int(1, *v as i64),
            Err(p) => dim.str(2, p),
        };
        shape.msg(1, &dim);
    }
    let mut tensor = Msg::default();
    tensor.int(1, elem as i64).msg(2, &shape);
    let mut ty = Msg::default();
    ty.msg(1, &tensor);
    let mut vi = Msg::default();
    vi.str(1, name).msg(2, &ty);
    vi
}

/// The ONNX model (protobuf bytes) computing `ck`'s readout with the given attention.
pub fn export(ck: &Checkpoint, attention: Attention) -> Result<Vec<u8>, String> {
    ck.validate().map_err(|e| e.to_string())?;
    let c = &ck.config;
    let mut g = Graph::default();
    let tensor = |name: &str| -> Result<&raspc_checkpoint::Tensor, String> { ck.tensors.get(name).ok_or_else(|| format!("tensor `{name}` is missing")) };
    let weight = |g: &mut Graph, name: &str| -> Result<String, String> {
        let t = tensor(name)?;
        Ok(g.floats(&format!("weight.{name}"), &t.shape, &t.data))
    };
    let one = g.ints("const.one", &[1]);
    let two = g.ints("const.two", &[2]);
    let zero = g.ints("const.zero", &[0]);
    let axis2 = g.ints("const.axis2", &[2]);
    let half = g.floats("const.half", &[], &[0.5]);
    let neg_inf = g.floats("const.neg_inf", &[], &[f32::NEG_INFINITY]);
    let (tol, beta) = match attention {
        Attention::Hard => (g.floats("const.tie_tolerance", &[], &[c.attention.tie_tolerance as f32]), String::new()),
        Attention::Soft => (String::new(), g.floats("const.soft_beta", &[], &[c.attention.soft_beta as f32])),
    };

    // Embeddings.
    let shp = g.node("Shape", &["tokens"], &[], "shape");
    let t_len = g.node("Slice", &[&shp, &one, &two], &[], "seq_len");
    let tok_emb = weight(&mut g, raspc_checkpoint::names::TOKEN_EMBEDDING)?;
    let pos_emb = weight(&mut g, raspc_checkpoint::names::POSITION_EMBEDDING)?;
    let xt = g.node("Gather", &[&tok_emb, "tokens"], &[("axis", Attr::Int(0))], "embed_tokens");
    let xp = g.node("Slice", &[&pos_emb, &zero, &t_len, &zero], &[], "embed_positions");
    let mut x = g.node("Add", &[&xt, &xp], &[], "embed");
    if c.real_input.is_some() {
        let ev = weight(&mut g, raspc_checkpoint::names::VALUE_EMBEDDING)?;
        // Numbers count at the input's positions only: BOS (and padding, which has BOS's id)
        // adds nothing, whatever `values` holds there (helper b13: a 1 at column 0 moved a
        // real-valued model's outputs by 2, its tolerance 7e-7).
        let bos = g.ints("const.bos_id", &[c.bos_id as i64]);
        let is_bos = g.node("Equal", &["tokens", &bos], &[], "is_bos");
        let is_input = g.node("Not", &[&is_bos], &[], "is_input");
        let input_f = g.node("Cast", &[&is_input], &[("to", Attr::Int(FLOAT as i64))], "is_input_f");
        let counted = g.node("Mul", &["values", &input_f], &[], "values_counted");
        let col = g.node("Unsqueeze", &[&counted, &axis2], &[], "values_col");
        let xv = g.node("Mul", &[&col, &ev], &[], "embed_values");
        x = g.node("Add", &[&x, &xv], &[], "embed");
    }

    // Which keys each query sees: [batch, 1, seq] from the key mask, and by position if causal.
    let km = g.node("Unsqueeze", &["key_mask", &one], &[], "key_mask_row");
    let mut visible = g.node("Greater", &[&km, &half], &[], "key_visible");
    if c.causal {
        let n = c.max_seq_len + 1;
        let tril: Vec<u8> = (0..n).flat_map(|q| (0..n).map(move |k| (k <= q) as u8)).collect();
        let tril = g.init("const.causal", BOOL, &[n, n], tril);
        let axes01 = g.ints("const.axes01", &[0, 1]);
        let zz = g.ints("const.zero_zero", &[0, 0]);
        let tt = g.node("Concat", &[&t_len, &t_len], &[("axis", Attr::Int(0))], "seq_len_2");
        let m = g.node("Slice", &[&tril, &zz, &tt, &axes01], &[], "causal_mask");
        visible = g.node("And", &[&visible, &m], &[], "visible");
    }

    for (l, layer) in c.layers.iter().enumerate() {
        let mut delta: Option<String> = None;
        for h in 0..layer.heads.len() {
            let n = |w: &str| raspc_checkpoint::names::head(l, h, w);
            let (wq, wk, wv, wo) = (weight(&mut g, &n("w_q"))?, weight(&mut g, &n("w_k"))?, weight(&mut g, &n("w_v"))?, weight(&mut g, &n("w_o"))?);
            let p = format!("l{l}h{h}");
            let q = g.node("MatMul", &[&x, &wq], &[], &format!("{p}_q"));
            let k = g.node("MatMul", &[&x, &wk], &[], &format!("{p}_k"));
            let v = g.node("MatMul", &[&x, &wv], &[], &format!("{p}_v"));
            let kt = g.node("Transpose", &[&k], &[("perm", Attr::Ints(vec![0, 2, 1]))], &format!("{p}_kt"));
            let s = g.node("MatMul", &[&q, &kt], &[], &format!("{p}_scores"));
            let s = g.node("Where", &[&visible, &s, &neg_inf], &[], &format!("{p}_scores_masked"));
            let mx = g.node("ReduceMax", &[&s], &[("axes", Attr::Ints(vec![2])), ("keepdims", Attr::Int(1))], &format!("{p}_max"));
            let w = match attention {
                Attention::Hard => {
                    let thr = g.node("Sub", &[&mx, &tol], &[], &format!("{p}_threshold"));
                    let keep = g.node("GreaterOrEqual", &[&s, &thr], &[], &format!("{p}_keep"));
                    g.node("Cast", &[&keep], &[("to", Attr::Int(FLOAT as i64))], &format!("{p}_keepf"))
                }
                Attention::Soft => {
                    let z = g.node("Sub", &[&s, &mx], &[], &format!("{p}_shifted"));
                    let z = g.node("Mul", &[&z, &beta], &[], &format!("{p}_scaled"));
                    g.node("Exp", &[&z], &[], &format!("{p}_exp"))
                }
            };
            let sum = g.node("ReduceSum", &[&w, &axis2], &[("keepdims", Attr::Int(1))], &format!("{p}_sum"));
            let w = g.node("Div", &[&w, &sum], &[], &format!("{p}_pattern"));
            let z = g.node("MatMul", &[&w, &v], &[], &format!("{p}_z"));
            let out = g.node("MatMul", &[&z, &wo], &[], &format!("{p}_out"));
            delta = Some(match delta {
                None => out,
                Some(acc) => g.node("Add", &[&acc, &out], &[], &format!("l{l}_attn")),
            });
        }
        if let Some(dx) = delta {
            x = g.node("Add", &[&x, &dx], &[], &format!("l{l}_resid_mid"));
        }
        if let Some(mlp) = &layer.mlp {
            let n = |w: &str| raspc_checkpoint::names::mlp(l, w);
            let (w_in, b_in, w_out, b_out) = (weight(&mut g, &n("w_in"))?, weight(&mut g, &n("b_in"))?, weight(&mut g, &n("w_out"))?, weight(&mut g, &n("b_out"))?);
            let pre = g.node("MatMul", &[&x, &w_in], &[], &format!("l{l}_mlp_pre"));
            let pre = g.node("Add", &[&pre, &b_in], &[], &format!("l{l}_mlp_pre"));
            let mut hid = g.node("Relu", &[&pre], &[], &format!("l{l}_mlp_post"));
            if mlp.kind == MlpKind::Reglu {
                let (wg, bg) = (weight(&mut g, &n("w_gate"))?, weight(&mut g, &n("b_gate"))?);
                let gate = g.node("MatMul", &[&x, &wg], &[], &format!("l{l}_mlp_gate"));
                let gate = g.node("Add", &[&gate, &bg], &[], &format!("l{l}_mlp_gate"));
                hid = g.node("Mul", &[&hid, &gate], &[], &format!("l{l}_mlp_gated"));
            }
            let o = g.node("MatMul", &[&hid, &w_out], &[], &format!("l{l}_mlp_out"));
            let o = g.node("Add", &[&o, &b_out], &[], &format!("l{l}_mlp_out"));
            x = g.node("Add", &[&x, &o], &[], &format!("l{l}_resid_post"));
        }
    }
    let ro = weight(&mut g, raspc_checkpoint::names::READOUT)?;
    let y = g.node("MatMul", &[&x, &ro], &[], "readout_value");
    // The graph's output is named `readout`.
    let mut id = Msg::default();
    id.str(1, &y).str(2, "readout").str(3, "readout").str(4, "Identity");
    g.nodes.push(id);

    let mut graph = Msg::default();
    for n in &g.nodes {
        graph.msg(1, n);
    }
    graph.str(2, "raspc");
    for (name, t) in &g.inits {
        if g.used.contains(name) {
            graph.msg(5, t);
        }
    }
    let dyn2 = [Err("batch"), Err("seq")];
    graph.msg(11, &value_info("tokens", INT64, &dyn2));
    graph.msg(11, &value_info("key_mask", FLOAT, &dyn2));
    if c.real_input.is_some() {
        graph.msg(11, &value_info("values", FLOAT, &dyn2));
    }
    graph.msg(12, &value_info("readout", FLOAT, &[Err("batch"), Err("seq"), Ok(c.readout_dims)]));

    let mut opset = Msg::default();
    opset.str(1, "").int(2, OPSET as i64);
    let mut model = Msg::default();
    model.int(1, IR_VERSION as i64).str(2, "raspc").str(3, env!("CARGO_PKG_VERSION")).msg(7, &graph).msg(8, &opset);
    // What building the inputs and decoding the readout need, so that the ONNX file stands on
    // its own (docs/checkpoint-format.md, "ONNX export"): JSON as in the checkpoint's metadata.
    let json = |v: serde_json::Value| v.to_string();
    let mut props: Vec<(&str, String)> = vec![
        ("raspc_attention", (if attention == Attention::Hard { "hard" } else { "soft" }).to_string()),
        ("raspc_vocab", json(serde_json::to_value(&c.vocab).map_err(|e| e.to_string())?)),
        ("raspc_bos_id", c.bos_id.to_string()),
        ("raspc_max_seq_len", c.max_seq_len.to_string()),
        ("raspc_causal", c.causal.to_string()),
        ("raspc_output", json(serde_json::to_value(&ck.output).map_err(|e| e.to_string())?)),
        ("raspc_program_hash", ck.program_hash.clone()),
    ];
    if let Some(r) = &c.real_input {
        props.push(("raspc_real_input", json(serde_json::to_value(r).map_err(|e| e.to_string())?)));
    }
    for (k, v) in props {
        let mut meta = Msg::default();
        meta.str(1, k).str(2, &v);
        model.msg(14, &meta);
    }
    Ok(model.0)
}

/// The `raspc_program_hash` an ONNX file raspc wrote declares (the last such metadata entry:
/// field 1, the key, then field 2, the value, each length-prefixed), or None.
pub(crate) fn program_of(bytes: &[u8]) -> Option<String> {
    let key = b"\x0a\x12raspc_program_hash\x12";
    let at = bytes.windows(key.len()).rposition(|w| w == key)? + key.len();
    let (mut len, mut shift, mut i) = (0usize, 0u32, at);
    loop {
        let b = *bytes.get(i)?;
        len |= usize::from(b & 0x7f).checked_shl(shift)?;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    String::from_utf8(bytes.get(i..i.checked_add(len)?)?.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn varints_encode_as_protobuf_does() {
        let mut m = super::Msg::default();
        m.varint(300);
        assert_eq!(m.0, vec![0xac, 0x02]);
        let mut m = super::Msg::default();
        m.int(1, -1);
        assert_eq!(m.0.len(), 11);
    }
}
