//! Text forms of the compiler's intermediate stages, for `raspc dump --stage` (and the golden
//! tests that pin them): the value sets of `infer`, the plan of `lower`, the schedule of `emit`.
//! Deterministic: the same program and options print the same text.

use crate::emit::Schedule;
use crate::infer::ValueSet;
use crate::numeric::Iv;
use crate::plan::{BlockKind, Plan, SlotEnc, SlotId};
use raspc_lang::{Graph, NodeId};
use std::collections::HashMap;
use std::fmt::Write;

/// At most this many values of a set are printed; the rest are counted.
const SHOWN: usize = 12;

fn atoms<'a>(values: impl ExactSizeIterator<Item = &'a raspc_lang::Atom>) -> String {
    let n = values.len();
    let mut s: Vec<String> = values.take(SHOWN).map(|a| a.repr()).collect();
    if n > SHOWN {
        s.push(format!("... ({n} values)"));
    }
    format!("[{}]", s.join(", "))
}

/// One line per s-op the root depends on, in graph order: `label: {values}` or `unbounded`
/// (with what is known of the values: a mean of integers is a fraction with a bounded
/// denominator, other numbers have an interval).
pub fn values(graph: &Graph, root: NodeId, sets: &HashMap<NodeId, ValueSet>, ivs: &HashMap<NodeId, Iv>, max_len: usize) -> String {
    let mut out = String::new();
    for id in graph.ancestors(root) {
        let Some(set) = sets.get(&id) else { continue };
        let label = &graph.node(id).label;
        match set {
            ValueSet::Finite(s) => writeln!(out, "{label}: {} {}", s.len(), atoms(s.iter().collect::<Vec<_>>().into_iter())).unwrap(),
            ValueSet::Unbounded => match (crate::numeric::mean_grid(graph, id, sets, ivs, max_len), ivs.get(&id)) {
                (Some(g), _) => writeln!(out, "{label}: unbounded (fractions k/q, q <= {}, in [{}, {}])", g.den, g.lo, g.hi).unwrap(),
                (None, Some(iv)) => writeln!(out, "{label}: unbounded ({} in [{}, {}])", if iv.int { "integers" } else { "numbers" }, iv.lo, iv.hi).unwrap(),
                (None, None) => writeln!(out, "{label}: unbounded").unwrap(),
            },
        }
    }
    out
}

/// Slots (encoding, dims) and blocks (kind, size, reads, writes, nonzero weights).
pub fn plan(p: &Plan) -> String {
    let mut out = String::new();
    writeln!(out, "slots:").unwrap();
    for (i, s) in p.slots.iter().enumerate() {
        let enc = match &s.enc {
            SlotEnc::Cat(v) => format!("categorical {}", atoms(v.iter())),
            SlotEnc::Num { points: Some(pts) } => format!("numerical ({} known values)", pts.len()),
            SlotEnc::Num { points: None } => "numerical".to_string(),
        };
        writeln!(out, "  s{i} {}: {enc}", s.label).unwrap();
    }
    writeln!(out, "blocks:").unwrap();
    for (b, block) in p.blocks.iter().enumerate() {
        let reads: Vec<String> = block.reads.iter().map(|&r| format!("s{r}")).collect();
        let (kind, weights) = match &block.kind {
            BlockKind::Head(h) => (format!("head width {} gap {}", h.width, h.gap), h.q.len() + h.k.len() + h.v.len() + h.o.len()),
            BlockKind::Mlp(m) => {
                let gate = m.gate.as_ref().map_or(0, |g| g.w.len());
                (format!("mlp{} hidden {}", if m.gate.is_some() { " (gated)" } else { "" }, m.hidden), m.w_in.len() + m.w_out.len() + gate)
            }
        };
        let outs = match &block.kind {
            BlockKind::Head(h) => &h.o,
            BlockKind::Mlp(m) => &m.w_out,
        };
        let sums: std::collections::BTreeSet<SlotId> = outs.iter().map(|o| o.slot).filter(|&t| t != block.writes).collect();
        let adds: String = sums.iter().map(|t| format!(" + s{t}")).collect();
        writeln!(out, "  b{b} {kind}, {weights} weights: reads [{}] -> s{}{adds}  # {}", reads.join(", "), block.writes, block.what).unwrap();
    }
    let view = match &p.output.values {
        Some(v) => format!(" as {}", atoms(v.iter())),
        None => String::new(),
    };
    writeln!(out, "output: s{} `{}`{view}", p.output.slot, p.output_label).unwrap();
    out
}

/// Layers (the blocks of each attention and MLP sublayer) and the residual layout.
pub fn schedule(p: &Plan, s: &Schedule) -> String {
    let mut out = String::new();
    writeln!(out, "layers {}, d_model {}", s.layers, s.d_model).unwrap();
    for l in 0..s.layers {
        for (sub, name) in [(2 * l, "attention"), (2 * l + 1, "mlp")] {
            let blocks: Vec<String> = s.time.iter().filter(|&(_, &t)| t == sub).map(|(&b, _)| format!("b{b} {}", p.slots[p.blocks[b].writes].label)).collect();
            if !blocks.is_empty() {
                writeln!(out, "  layer {l} {name}: {}", blocks.join(", ")).unwrap();
            }
        }
    }
    writeln!(out, "residual:").unwrap();
    for (&slot, &off) in &s.offset {
        let sl = &p.slots[slot];
        writeln!(out, "  {off}..{} {}", off + sl.enc.dims(), sl.label).unwrap();
    }
    out
}
