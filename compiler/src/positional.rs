//! Positional s-ops: functions of `indices` and `length` only (through maps and constants).
//!
//! On an input of length l the positions are 0..l, so such an s-op takes its values on the
//! grid of pairs (i, l) with 0 <= i < l <= max_len: at most max_len·(max_len+1)/2 values,
//! whatever arithmetic builds it (`length^0.5`, `%`, `/`, `round`). Value inference evaluates
//! it on that grid instead of combining the value sets of its operands (which would pair every
//! index with every length and every intermediate value with every other), and lowering gives
//! no hidden unit to the pairs with i >= l, which no input reaches.

use crate::plan::SlotId;
use raspc_lang::ast::{BinOp, Cmp};
use raspc_lang::graph::{Convert, MapOp, Operand};
use raspc_lang::interp::apply_map;
use raspc_lang::{Atom, Graph, NodeId, NodeKind};
use std::collections::HashMap;

/// Past this max-len value inference tables no widths (their cost grows as max-len³).
pub const WIDTH_GRID_MAX_LEN: usize = 256;

/// The grid pairs (i, l) in a fixed order: by l, then i.
pub fn grid(max_len: usize) -> Vec<(i64, i64)> {
    (1..=max_len as i64).flat_map(|l| (0..l).map(move |i| (i, l))).collect()
}

/// Values of positional s-ops on the grid, by node (None where the map fails: the interpreter
/// rejects every input of that length at that position).
#[derive(Debug)]
pub struct Tables {
    pub pairs: Vec<(i64, i64)>,
    pub values: HashMap<NodeId, Vec<Option<Atom>>>,
}

impl Tables {
    /// Tables for every positional s-op among `nodes` (which must be in topological order, as
    /// `Graph::ancestors` returns them). `indices`, `length` and constants are positional; a map
    /// is when all of its operands are.
    pub fn new(graph: &Graph, nodes: &[NodeId], max_len: usize) -> Tables {
        Tables::build(graph, nodes, max_len, false)
    }

    /// [`Tables::new`], also with the widths of selectors of positional s-ops (up to max-len
    /// [`WIDTH_GRID_MAX_LEN`]) and the maps that read them, and with maps of `indices` alone.
    /// For value inference: `indices - indices % 2` takes the even indices, not every
    /// difference of an index and a remainder, and the width of `select(indices * 2 + 2,
    /// length, <=)` (half the length) 0..=max_len/2, not 0..=max_len (helper w28: 12.6 times
    /// the parameters).
    pub fn with_widths(graph: &Graph, nodes: &[NodeId], max_len: usize) -> Tables {
        Tables::build(graph, nodes, max_len, max_len <= WIDTH_GRID_MAX_LEN)
    }

    fn build(graph: &Graph, nodes: &[NodeId], max_len: usize, widths: bool) -> Tables {
        // Without `length`, maps of `indices` alone are as well served by their value sets,
        // unless one reads two s-ops (`indices - indices % 2`) or a width may be positional:
        // inference, which runs many times, builds no grid otherwise.
        let needed = |id: &NodeId| match &graph.node(*id).kind {
            NodeKind::Length => true,
            NodeKind::SelectorWidth(sel) => widths && matches!(graph.node(*sel).kind, NodeKind::Select { .. }),
            NodeKind::Map { args, .. } => widths && args.iter().filter(|a| matches!(a, Operand::Sop(_))).count() >= 2,
            _ => false,
        };
        if !nodes.iter().any(needed) {
            return Tables { pairs: vec![], values: HashMap::new() };
        }
        let mut t = Tables { pairs: grid(max_len), values: HashMap::new() };
        for &id in nodes {
            let table: Vec<Option<Atom>> = match &graph.node(id).kind {
                NodeKind::Indices => t.pairs.iter().map(|&(i, _)| Some(Atom::Int(i))).collect(),
                NodeKind::Length => t.pairs.iter().map(|&(_, l)| Some(Atom::Int(l))).collect(),
                NodeKind::Const(a) => vec![Some(a.clone()); t.pairs.len()],
                // (Of one select: the simplifier's counted sums split `aggregate(all, 100000 *
                // indices) * length` into widths of `and`s, each 0 or 1 on the grid; their sum
                // then became a short list, and its difference with a whole-input mean times
                // `length`, whose listed values pair every length with every mean, a list
                // with values f32 cannot tell apart: refused, where the interval compiled.)
                NodeKind::SelectorWidth(sel) if widths && matches!(graph.node(*sel).kind, NodeKind::Select { .. }) => {
                    let Some(table) = t.width_table(graph, *sel) else { continue };
                    table
                }
                NodeKind::Map { op, args } => {
                    if !args.iter().all(|a| match a {
                        Operand::Sop(s) => t.values.contains_key(s),
                        Operand::Const(_) => true,
                    }) {
                        continue;
                    }
                    (0..t.pairs.len())
                        .map(|p| {
                            let mut row = Vec::with_capacity(args.len());
                            for a in args {
                                row.push(match a {
                                    Operand::Const(c) => c.clone(),
                                    Operand::Sop(s) => t.values[s][p].clone()?,
                                });
                            }
                            apply_map(op, &row).ok()
                        })
                        .collect()
                }
                _ => continue,
            };
            t.values.insert(id, table);
        }
        t
    }

    /// The number of keys the select `sel` selects at every grid pair, when it compares tabled
    /// s-ops (each pair's count over the keys of its length: max-len³/6 comparisons).
    fn width_table(&self, graph: &Graph, sel: NodeId) -> Option<Vec<Option<Atom>>> {
        let NodeKind::Select { keys, queries, cmp } = &graph.node(sel).kind else { return None };
        let (kt, qt) = (self.values.get(keys)?, self.values.get(queries)?);
        // Numbers (as `indices` and its arithmetic give) are counted by binary search over the
        // sorted keys (max-len 256: 8 widths took 22 s compared one by one).
        let number = |a: &Option<Atom>| match a {
            Some(Atom::Int(x)) if x.unsigned_abs() < 1 << 53 => Some(*x as f64),
            Some(Atom::Float(x)) if !x.is_nan() => Some(*x),
            _ => None,
        };
        let mut out = Vec::with_capacity(self.pairs.len());
        let mut start = 0;
        // (The pairs of length l are the l after those of the shorter lengths.)
        while start < self.pairs.len() {
            let l = self.pairs[start].1 as usize;
            let (ks, qs) = (&kt[start..start + l], &qt[start..start + l]);
            match (ks.iter().map(number).collect::<Option<Vec<f64>>>(), qs.iter().map(number).collect::<Option<Vec<f64>>>()) {
                (Some(mut sorted), Some(qn)) => {
                    sorted.sort_by(f64::total_cmp);
                    let n = sorted.len();
                    out.extend(qn.into_iter().map(|q| {
                        let below = sorted.partition_point(|&k| k < q);
                        let up_to = sorted.partition_point(|&k| k <= q);
                        match cmp {
                            Cmp::Lt => below,
                            Cmp::Le => up_to,
                            Cmp::Gt => n - up_to,
                            Cmp::Ge => n - below,
                            Cmp::Eq => up_to - below,
                            Cmp::Ne => n - (up_to - below),
                        }
                    }));
                }
                _ => out.extend(qs.iter().map(|q| q.as_ref().map_or(0, |q| ks.iter().filter(|k| k.as_ref().is_some_and(|k| Atom::compare(k, *cmp, q).unwrap_or(false))).count()))),
            }
            start += l;
        }
        Some(out.into_iter().map(|c| Some(Atom::Int(c as i64))).collect())
    }

    /// True when `id` is a map of `indices` and `length` that depends on both (or on `length`
    /// through arithmetic): the s-ops whose value sets the grid sharpens.
    pub fn is_positional_map(&self, graph: &Graph, id: NodeId) -> bool {
        self.values.contains_key(&id) && matches!(graph.node(id).kind, NodeKind::Map { .. })
    }
}

/// False for a combination of leaf values no input reaches: an index at or beyond the length.
/// `env` gives leaf values by node; only `indices` and `length` leaves are looked at.
pub fn reachable(graph: &Graph, env: &HashMap<NodeId, Atom>) -> bool {
    let mut index = None;
    let mut length = None;
    for (id, a) in env {
        match graph.node(*id).kind {
            NodeKind::Indices => index = a.as_f64(),
            NodeKind::Length => length = a.as_f64(),
            _ => {}
        }
    }
    match (index, length) {
        (Some(i), Some(l)) => i < l,
        _ => true,
    }
}

/// An MLP that writes, at a position i of an input of length l, the vector `table[p]` of the grid
/// pair p = (i, l) into the dims of slot `out`, reading a one-hot of the position (`onehot`,
/// dim i for position i) and the number 1/(l+1) (`inverse`, which a head computes: the length
/// head of docs/compiler.md).
///
/// For each position i, the values over l = max_len, ..., i+1 form a staircase in
/// x = 1/(l+1): a constant unit `relu(e_i)` writes the value at l = max_len, and each change
/// between neighbouring lengths is an up-ramp `relu(s + 1/2 - M(1 - e_i)) - relu(s - 1/2 - M(1 - e_i))`,
/// s = (x - t)/w (t the midpoint of the two points, w half their gap), gated off by M = max|s| + 1
/// at every other position and at BOS. Lengths the position does not exist at (l <= i) cost
/// nothing. Exact at every grid point while x is off by less than w/2 (s by less than 1/2).
#[derive(Debug)]
pub struct GridMlp {
    pub mlp: crate::plan::Mlp,
    /// Rounding bound factors, maximised over the grid pairs: `pre` is Σ over the ramps that are
    /// on at the pair of |Δ|·Σ|pre-activation terms| (each ramp's two units), `sum` the summed
    /// magnitude of the units' outputs, and `units` the number of units per position.
    pub pre: f64,
    pub sum: f64,
    pub units: usize,
}

pub fn grid_mlp(onehot: SlotId, inverse: SlotId, max_len: usize, pairs: &[(i64, i64)], table: &[Vec<f64>], out: SlotId) -> GridMlp {
    use crate::plan::{In, Mlp, Out};
    let dims = table.first().map_or(0, Vec::len);
    let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
    let (mut pre, mut sum, mut units_max) = (0.0f64, 0.0f64, 0usize);
    let x_of = |l: i64| 1.0 / (l as f64 + 1.0);
    let (x_lo, x_hi) = (x_of(max_len as i64), 1.0);
    for i in 0..max_len as i64 {
        // Lengths from max_len down to i+1: x ascending.
        let rows: Vec<(i64, &Vec<f64>)> = (i + 1..=max_len as i64)
            .rev()
            .filter_map(|l| {
                let p = pair_index(i as usize, l as usize);
                (pairs.get(p) == Some(&(i, l))).then(|| (l, &table[p]))
            })
            .collect();
        let Some(&(_, base)) = rows.first() else { continue };
        let base_mag: f64 = base.iter().map(|v| v.abs()).sum();
        let mut units = 0usize;
        if base_mag != 0.0 {
            let c = mlp.hidden;
            mlp.hidden += 1;
            units += 1;
            mlp.w_in.push(In::new(onehot, i as usize, c, 1.0));
            mlp.b_in.push(0.0);
            for (d, &v) in base.iter().enumerate() {
                if v != 0.0 {
                    mlp.w_out.push(Out::new(c, out, d, v));
                }
            }
        }
        // (t, w, M, Σ|Δ|) of each ramp, for the bounds below.
        let mut ramps: Vec<(f64, f64, f64, f64)> = vec![];
        for pair in rows.windows(2) {
            let ((l0, v0), (l1, v1)) = (pair[0], pair[1]);
            let delta: Vec<f64> = (0..dims).map(|d| v1[d] - v0[d]).collect();
            if delta.iter().all(|&x| x == 0.0) {
                continue;
            }
            let (p0, p1) = (x_of(l0), x_of(l1));
            let t = (p0 + p1) / 2.0;
            let w = (p1 - p0) / 2.0;
            let big = ((x_hi - t).abs().max((t - x_lo).abs()) / w + 1.0).ceil();
            for (shift, sign) in [(0.5, 1.0), (-0.5, -1.0)] {
                let c = mlp.hidden;
                mlp.hidden += 1;
                units += 1;
                mlp.w_in.push(In::new(inverse, 0, c, 1.0 / w));
                mlp.w_in.push(In::new(onehot, i as usize, c, big));
                mlp.b_in.push(-t / w + shift - big);
                for (d, &x) in delta.iter().enumerate() {
                    if x != 0.0 {
                        mlp.w_out.push(Out::new(c, out, d, sign * x));
                    }
                }
            }
            ramps.push((t, w, big, delta.iter().map(|x| x.abs()).sum()));
        }
        // At a grid point x, a ramp with t > x is off (both units at most -1/2, exactly 0); one
        // with t < x has both units on, their difference exactly 1 up to rounding.
        for &(l, _) in &rows {
            let x = x_of(l);
            let (mut p, mut s) = (0.0, base_mag);
            for &(t, w, big, d) in ramps.iter().filter(|r| r.0 < x) {
                p += d * 2.0 * (x / w + big + t / w + big + 0.5);
                s += d * 2.0 * (x - t) / w;
            }
            pre = pre.max(p);
            sum = sum.max(s);
        }
        units_max = units_max.max(units);
    }
    GridMlp { mlp, pre, sum, units: units_max }
}

/// The smallest half-gap w of a ramp of the MLP [`grid_mlp`] would build (x must be within w/4
/// of its exact value), without building it (the MLP and its bounds cost O(max-len³) at worst:
/// 111 s and 5 GB at max-len 1024 before a refusal that this decides in a moment; helper b19).
pub fn grid_min_w(max_len: usize, pairs: &[(i64, i64)], table: &[Vec<f64>]) -> f64 {
    let x_of = |l: i64| 1.0 / (l as f64 + 1.0);
    let mut min_w = f64::INFINITY;
    for i in 0..max_len as i64 {
        let mut prev: Option<(i64, &Vec<f64>)> = None;
        for l in (i + 1..=max_len as i64).rev() {
            let p = pair_index(i as usize, l as usize);
            if pairs.get(p) != Some(&(i, l)) {
                continue;
            }
            // (A step wherever `grid_mlp` makes one: some difference is not exactly 0.)
            if let Some((l0, v0)) = prev
                && v0.iter().zip(&table[p]).any(|(a, b)| b - a != 0.0)
            {
                min_w = min_w.min((x_of(l) - x_of(l0)) / 2.0);
            }
            prev = Some((l, &table[p]));
        }
    }
    min_w
}

/// Index of the pair (i, l) in [`grid`]'s order.
pub fn pair_index(i: usize, l: usize) -> usize {
    l * (l - 1) / 2 + i
}

/// A per-position fact from per-row facts: rows are positions (`ctx` None) or grid pairs, and a
/// position has the fact when every pair at it does.
pub fn per_position(n: usize, ctx: Option<&[(i64, i64)]>, rows: &[bool]) -> Vec<bool> {
    match ctx {
        None => rows.to_vec(),
        Some(pairs) => {
            let mut out = vec![true; n];
            for (&(q, _), &b) in pairs.iter().zip(rows) {
                if let Some(o) = out.get_mut(q as usize) {
                    *o &= b;
                }
            }
            out
        }
    }
}

/// Value at grid pair (i, l) of a function of `indices` and `length` (None: not such a
/// function, or the map fails there).
pub fn eval_at(graph: &Graph, x: NodeId, i: i64, l: i64) -> Option<Atom> {
    // Each map once: an s-op that reads one value several times, again and again (`x = x if
    // x > 3 else x + 1` in a loop), is a DAG whose tree is exponential (helper d13: 16
    // iterations took 27 s, 18 never finished).
    fn go(graph: &Graph, x: NodeId, i: i64, l: i64, memo: &mut HashMap<NodeId, Option<Atom>>) -> Option<Atom> {
        match &graph.node(x).kind {
            NodeKind::Indices => Some(Atom::Int(i)),
            NodeKind::Length => Some(Atom::Int(l)),
            NodeKind::Const(a) => Some(a.clone()),
            NodeKind::Map { op, args } => {
                if let Some(v) = memo.get(&x) {
                    return v.clone();
                }
                let v = apply_with(op, args, |s| go(graph, s, i, l, memo));
                memo.insert(x, v.clone());
                v
            }
            _ => None,
        }
    }
    go(graph, x, i, l, &mut HashMap::new())
}

/// A map applied to its operands, each s-op operand's value given by `value` (None when one
/// has none, or the map fails).
pub fn apply_with(op: &MapOp, args: &[Operand], mut value: impl FnMut(NodeId) -> Option<Atom>) -> Option<Atom> {
    let mut row = Vec::with_capacity(args.len());
    for a in args {
        row.push(match a {
            Operand::Const(c) => c.clone(),
            Operand::Sop(s) => value(*s)?,
        });
    }
    apply_map(op, &row).ok()
}

/// True when `x` is a function of `indices`, `length` and constants only.
pub fn is_positional(graph: &Graph, x: NodeId) -> bool {
    // Each node once: over a DAG of shared operands the tree is exponential (review rv18).
    fn go(graph: &Graph, x: NodeId, memo: &mut HashMap<NodeId, bool>) -> bool {
        if let Some(&b) = memo.get(&x) {
            return b;
        }
        let b = match &graph.node(x).kind {
            NodeKind::Indices | NodeKind::Length | NodeKind::Const(_) => true,
            NodeKind::Map { args, .. } => args.iter().all(|a| match a {
                Operand::Const(_) => true,
                Operand::Sop(s) => go(graph, *s, memo),
            }),
            _ => false,
        };
        memo.insert(x, b);
        b
    }
    go(graph, x, &mut HashMap::new())
}

/// Does a selector built from selects of positional s-ops select key `k` for query `q` on an
/// input of length `l`? None when it is not such a selector.
pub fn selects_at(graph: &Graph, sel: NodeId, k: i64, q: i64, l: i64) -> Option<bool> {
    Some(match &graph.node(sel).kind {
        NodeKind::Select { keys, queries, cmp } => {
            if !is_positional(graph, *keys) || !is_positional(graph, *queries) {
                // An s-op compared with itself decides the diagonal whatever the input when
                // its values equal themselves (the library's `select(tokens, tokens, ==) or
                // ...` full selectors); elsewhere it depends on the input.
                if keys == queries && k == q && self_equal(graph, *keys) {
                    return Some(matches!(cmp, Cmp::Eq | Cmp::Le | Cmp::Ge));
                }
                return None;
            }
            match (eval_at(graph, *keys, k, l), eval_at(graph, *queries, q, l)) {
                (Some(a), Some(b)) => Atom::compare(&a, *cmp, &b).unwrap_or(false),
                _ => false,
            }
        }
        // `select(a, b, c) or select(a, b, not c)` selects every key (and `and`, none).
        NodeKind::SelectOr(x, y) | NodeKind::SelectAnd(x, y) if complementary(graph, *x, *y) => matches!(graph.node(sel).kind, NodeKind::SelectOr(..)),
        // Three-valued: one decided side can decide an `and` (false) or an `or` (true).
        NodeKind::SelectAnd(x, y) => {
            let a = selects_at(graph, *x, k, q, l);
            a != Some(false) && selects_at(graph, *y, k, q, l)? && a?
        }
        NodeKind::SelectOr(x, y) => {
            let a = selects_at(graph, *x, k, q, l);
            a == Some(true) || selects_at(graph, *y, k, q, l)? || a?
        }
        NodeKind::SelectNot(a) => !selects_at(graph, *a, k, q, l)?,
        _ => return None,
    })
}

/// Are `x` and `y` selects of the same keys and queries with opposite comparisons? `==` and
/// `!=` always are; `<` and `>=` (or `>` and `<=`) when neither side can be NaN.
fn complementary(graph: &Graph, x: NodeId, y: NodeId) -> bool {
    // `s or not s`, any selector s (helper w26: `select(tokens, tokens, ==) or not select(tokens,
    // tokens, ==)` was not seen to select every key; six other spellings were).
    if matches!(graph.node(y).kind, NodeKind::SelectNot(n) if n == x) || matches!(graph.node(x).kind, NodeKind::SelectNot(n) if n == y) {
        return true;
    }
    let (NodeKind::Select { keys: k1, queries: q1, cmp: c1 }, NodeKind::Select { keys: k2, queries: q2, cmp: c2 }) = (&graph.node(x).kind, &graph.node(y).kind) else {
        return false;
    };
    if (k1, q1) != (k2, q2) {
        return false;
    }
    let ordered = || self_equal(graph, *k1) && self_equal(graph, *q1);
    match (c1, c2) {
        (Cmp::Eq, Cmp::Ne) | (Cmp::Ne, Cmp::Eq) => true,
        (Cmp::Lt, Cmp::Ge) | (Cmp::Ge, Cmp::Lt) | (Cmp::Gt, Cmp::Le) | (Cmp::Le, Cmp::Gt) => ordered(),
        _ => false,
    }
}

/// Is `x == x` at every position of every input? For the tokens (JSON strings and numbers:
/// never NaN) and for maps whose results are strings, integers or booleans whatever they read
/// (not `and`/`or`, which return an operand, nor arithmetic, which can make NaN).
pub(crate) fn self_equal(graph: &Graph, x: NodeId) -> bool {
    match &graph.node(x).kind {
        NodeKind::Tokens | NodeKind::Indices | NodeKind::Length => true,
        NodeKind::Map { op, .. } => matches!(
            op,
            MapOp::Convert(Convert::Str | Convert::Int | Convert::Bool)
                | MapOp::Indicator
                | MapOp::Not
                | MapOp::In(_)
                | MapOp::Binary(BinOp::Eq | BinOp::Le | BinOp::Ge | BinOp::Lt | BinOp::Gt)
        ),
        _ => false,
    }
}

/// Number of keys a positional selector selects at every grid pair (query i, length l), in
/// [`grid`]'s order; None when it is not positional.
pub fn grid_counts(graph: &Graph, sel: NodeId, max_len: usize) -> Option<Vec<usize>> {
    let mut out = Vec::with_capacity(max_len * (max_len + 1) / 2);
    for (q, l) in grid(max_len) {
        let mut c = 0;
        for k in 0..l {
            c += selects_at(graph, sel, k, q, l)? as usize;
        }
        out.push(c);
    }
    Some(out)
}

/// Up to this max-len [`width_bound`] counts a positional part of a selector on the grid.
pub const WIDTH_BOUND_MAX_LEN: usize = 64;

/// At most how many keys `sel` selects at any position of any input up to `max_len`: the
/// largest count, over every length l, query q and key k < l, of the keys that the positional
/// parts of `sel` do not rule out ([`selects_at`]'s three values: a select of positional s-ops
/// decides, another select does not, except an s-op compared with itself on the diagonal; `and`,
/// `or` and `not` combine them). A width over a window (`select(indices, indices, <=) and
/// select(indices, indices - 3, >) and select(tokens, "a", ==)`) takes 0..=3, not 0..=max-len
/// (helper w30: 17 values at max-len 16, 7.8 times the parameters of the same count by a mean).
/// A bound under 2, or over half of max-len, is not used (below).
pub fn width_bound(graph: &Graph, sel: NodeId, max_len: usize) -> usize {
    if max_len > WIDTH_BOUND_MAX_LEN {
        return max_len;
    }
    // Offsets of each length's block of (query, key) cells.
    let mut offset = vec![0usize; max_len + 2];
    for l in 1..=max_len {
        offset[l + 1] = offset[l] + l * l;
    }
    let cells = offset[max_len + 1];
    let mut memo = HashMap::new();
    let Some(t) = decided(graph, sel, max_len, cells, &mut memo) else { return max_len };
    let mut most = 0;
    for l in 1..=max_len {
        for q in 0..l {
            let row = &t[offset[l] + q * l..offset[l] + (q + 1) * l];
            most = most.max(row.iter().filter(|c| **c != Some(false)).count());
        }
    }
    // A width of at most one key stays 0..=max-len: the simplifier's counted sums split a mean
    // times `length` into widths of `all and select(x, c, ==)`, and listed as 0 and 1 their
    // weighted sums took half-integers no input reaches, which the interpreter's floats then
    // straddled (`round((length * mean(2 * indices - length) - length) / 2)` was refused). So
    // does one of more than half of max-len: a strict order's max-len - 1 made the sum of two
    // such widths 32 x 32 = 1,024 combinations at max-len 32, enumerated where 33 x 33 was
    // added in a sum slot (review rv30b: the library sort 53,399 parameters, then 226,571).
    if most < 2 || most * 2 > max_len {
        max_len
    } else {
        most
    }
}

/// [`selects_at`] at every cell (length, query, key) up to max-len, in that order (`width_bound`
/// finds each length's block by its offset); None when nothing about `sel` is decided (every cell unknown).
fn decided(graph: &Graph, sel: NodeId, max_len: usize, cells: usize, memo: &mut HashMap<NodeId, Option<std::rc::Rc<Vec<Option<bool>>>>>) -> Option<std::rc::Rc<Vec<Option<bool>>>> {
    if let Some(t) = memo.get(&sel) {
        return t.clone();
    }
    let t = match &graph.node(sel).kind {
        NodeKind::Select { keys, queries, cmp } if is_positional(graph, *keys) && is_positional(graph, *queries) => {
            let mut t = Vec::with_capacity(cells);
            for l in 1..=max_len as i64 {
                let kv: Vec<Option<Atom>> = (0..l).map(|k| eval_at(graph, *keys, k, l)).collect();
                let qv: Vec<Option<Atom>> = (0..l).map(|q| eval_at(graph, *queries, q, l)).collect();
                for q in &qv {
                    for k in &kv {
                        t.push(Some(match (k, q) {
                            (Some(a), Some(b)) => Atom::compare(a, *cmp, b).unwrap_or(false),
                            _ => false,
                        }));
                    }
                }
            }
            Some(t)
        }
        NodeKind::Select { keys, queries, cmp } if keys == queries && self_equal(graph, *keys) => {
            let on = matches!(cmp, Cmp::Eq | Cmp::Le | Cmp::Ge);
            let mut t = Vec::with_capacity(cells);
            for l in 1..=max_len {
                for q in 0..l {
                    t.extend((0..l).map(|k| if k == q { Some(on) } else { None }));
                }
            }
            Some(t)
        }
        NodeKind::SelectOr(x, y) | NodeKind::SelectAnd(x, y) if complementary(graph, *x, *y) => Some(vec![Some(matches!(graph.node(sel).kind, NodeKind::SelectOr(..))); cells]),
        NodeKind::SelectAnd(x, y) | NodeKind::SelectOr(x, y) => {
            let and = matches!(graph.node(sel).kind, NodeKind::SelectAnd(..));
            let (a, b) = (decided(graph, *x, max_len, cells, memo), decided(graph, *y, max_len, cells, memo));
            match (a, b) {
                (None, None) => None,
                (a, b) => {
                    let cell = |t: &Option<std::rc::Rc<Vec<Option<bool>>>>, i: usize| t.as_ref().and_then(|t| t[i]);
                    Some(
                        (0..cells)
                            .map(|i| match (cell(&a, i), cell(&b, i)) {
                                (Some(p), _) | (_, Some(p)) if p != and => Some(p),
                                (Some(p), Some(_)) => Some(p),
                                _ => None,
                            })
                            .collect(),
                    )
                }
            }
        }
        NodeKind::SelectNot(x) => decided(graph, *x, max_len, cells, memo).map(|t| t.iter().map(|c| c.map(|b| !b)).collect()),
        _ => None,
    }
    .map(std::rc::Rc::new);
    memo.insert(sel, t.clone());
    t
}
