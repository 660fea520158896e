//! Algebraic rewrites applied before lowering. Each preserves the interpreter's value on every
//! input the interpreter accepts (the compiled model is verified against the original graph).
//!
//! * `aggregate(s, a, d1) ± aggregate(s, b, d2)` = `aggregate(s, a ± b, d1 ± d2)`: the mean over
//!   one selected set is linear. One head instead of two, and the result keeps the values'
//!   common denominator (so `balance < 0` needs one step, not a comparison of two means).
//! * `aggregate(s, a, d) * c` (and `c * ...`, `... / c`) = `aggregate(s, a * c, d * c)`.
//! * `selector_width(A or B)` = `selector_width(A) + selector_width(B)` when A and B can never
//!   select the same key: each has an `and`-conjunct comparing the same keys and queries with
//!   exclusive comparisons (`<` vs `==`, ...). Two small heads instead of a one-hot over every
//!   combination of the s-ops A and B compare (the sort tie-break `k < q or (k == q and i < j)`).
//! * `select(x + y, x + y, <)` (also `<=`, `>`, `>=`) where y's values span less than the smallest
//!   gap between x's values is the lexicographic comparison `select(x, x, <) or (select(x, x, ==)
//!   and select(y, y, <))` (Tracr's sort keys `key + i/max_seq_len`): with the rewrite above, two
//!   widths replace a one-hot over every (x, y) pair. Needs value sets, so it runs after `infer`.

use crate::infer::{infer, ValueSet};
use raspc_lang::ast::{BinOp, Cmp};
use raspc_lang::graph::{MapOp, Operand};
use raspc_lang::{atom, Atom, Graph, NodeId, NodeKind};
use std::collections::HashMap;

/// A rebuilt graph holding only what `root` depends on, rewritten; returns its root.
/// Falls back to the graph as given if a rewrite would grow it past the graph size limit.
pub fn simplify(g: &Graph, root: NodeId, vocab: &[Atom], max_len: usize) -> (Graph, NodeId) {
    let Some((g1, r1)) = rebuild(g, root, None) else { return (g.clone(), root) };
    let sets = infer(&g1, r1, vocab, max_len);
    rebuild(&g1, r1, Some(&sets)).unwrap_or((g1, r1))
}

fn rebuild(g: &Graph, root: NodeId, sets: Option<&HashMap<NodeId, ValueSet>>) -> Option<(Graph, NodeId)> {
    let mut out = Graph::new();
    let mut map: HashMap<NodeId, NodeId> = HashMap::new();
    for id in g.ancestors(root) {
        let node = g.node(id);
        let kind = node.kind.remap(&|x| map[&x]);
        let lex = sets.and_then(|s| lexicographic(g, id, s, &map, &mut out, node.span));
        let kind = lex.unwrap_or(kind);
        let kind = rewrite(&mut out, &kind, node.span).unwrap_or(kind);
        let new = out.add_labelled(kind, node.span, &node.label, node.named)?;
        map.insert(id, new);
    }
    let r = map[&root];
    Some((out, r))
}

/// Sorted distinct numbers of a finite, all-numeric value set.
fn numbers(sets: &HashMap<NodeId, ValueSet>, id: NodeId) -> Option<Vec<f64>> {
    let ValueSet::Finite(s) = sets.get(&id)? else { return None };
    let mut v: Vec<f64> = s.iter().map(|a| if a.is_str() { None } else { a.as_f64() }).collect::<Option<_>>()?;
    v.sort_by(f64::total_cmp);
    v.dedup();
    Some(v)
}

/// `select(x + y, x + y, cmp)` as a lexicographic comparison (see the module docs), built in
/// `out`; `None` when the pattern or the gap condition does not hold. Ids in `g` are old ones.
fn lexicographic(g: &Graph, id: NodeId, sets: &HashMap<NodeId, ValueSet>, map: &HashMap<NodeId, NodeId>, out: &mut Graph, span: raspc_lang::Span) -> Option<NodeKind> {
    let NodeKind::Select { keys, queries, cmp } = &g.node(id).kind else { return None };
    if keys != queries || matches!(cmp, Cmp::Eq | Cmp::Ne) {
        return None;
    }
    let NodeKind::Map { op: MapOp::Binary(BinOp::Add), args } = &g.node(*keys).kind else { return None };
    let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return None };
    for (x, y) in [(*a, *b), (*b, *a)] {
        let (xs, ys) = (numbers(sets, x)?, numbers(sets, y)?);
        let gap = xs.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
        let span_y = ys.last()? - ys.first()?;
        // Strictly inside the gap, with room for rounding.
        if span_y < gap * (1.0 - 1e-9) {
            let (nx, ny) = (map[&x], map[&y]);
            let strict = match cmp {
                Cmp::Lt | Cmp::Le => Cmp::Lt,
                _ => Cmp::Gt,
            };
            let first = out.add(NodeKind::Select { keys: nx, queries: nx, cmp: strict }, span)?;
            let tie = out.add(NodeKind::Select { keys: nx, queries: nx, cmp: Cmp::Eq }, span)?;
            let then = out.add(NodeKind::Select { keys: ny, queries: ny, cmp: *cmp }, span)?;
            let second = out.add(NodeKind::SelectAnd(tie, then), span)?;
            return Some(NodeKind::SelectOr(first, second));
        }
    }
    None
}

fn numeric(a: &Atom) -> bool {
    !a.is_str()
}

fn conjuncts(g: &Graph, s: NodeId, out: &mut Vec<NodeId>) {
    if let NodeKind::SelectAnd(a, b) = &g.node(s).kind {
        conjuncts(g, *a, out);
        conjuncts(g, *b, out);
    } else {
        out.push(s);
    }
}

/// True when no (key, query) pair can satisfy both comparisons of the same operands.
fn exclusive_cmps(a: Cmp, b: Cmp) -> bool {
    use Cmp::*;
    let pair = |x, y| (a == x && b == y) || (a == y && b == x);
    pair(Lt, Eq) || pair(Lt, Ge) || pair(Lt, Gt) || pair(Gt, Eq) || pair(Gt, Le) || pair(Eq, Ne)
}

fn exclusive(g: &Graph, a: NodeId, b: NodeId) -> bool {
    let (mut ca, mut cb) = (vec![], vec![]);
    conjuncts(g, a, &mut ca);
    conjuncts(g, b, &mut cb);
    ca.iter().any(|&x| {
        cb.iter().any(|&y| match (&g.node(x).kind, &g.node(y).kind) {
            (NodeKind::Select { keys: k1, queries: q1, cmp: c1 }, NodeKind::Select { keys: k2, queries: q2, cmp: c2 }) => k1 == k2 && q1 == q2 && exclusive_cmps(*c1, *c2),
            _ => false,
        })
    })
}

/// True when a selector's selects compare more than one pair of s-ops (so one score term
/// would need a one-hot over their combinations).
fn compares_several(g: &Graph, s: NodeId) -> bool {
    fn pairs(g: &Graph, s: NodeId, out: &mut std::collections::BTreeSet<(NodeId, NodeId)>) {
        match &g.node(s).kind {
            NodeKind::Select { keys, queries, .. } => {
                out.insert((*keys, *queries));
            }
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                pairs(g, *a, out);
                pairs(g, *b, out);
            }
            NodeKind::SelectNot(a) => pairs(g, *a, out),
            _ => {}
        }
    }
    let mut p = std::collections::BTreeSet::new();
    pairs(g, s, &mut p);
    p.len() > 1
}

fn rewrite(out: &mut Graph, kind: &NodeKind, span: raspc_lang::Span) -> Option<NodeKind> {
    if let NodeKind::SelectorWidth(sel) = kind
        && let NodeKind::SelectOr(a, b) = out.node(*sel).kind.clone()
        && compares_several(out, *sel)
        && exclusive(out, a, b)
    {
        let wa = out.add(NodeKind::SelectorWidth(a), span)?;
        let wb = out.add(NodeKind::SelectorWidth(b), span)?;
        return Some(NodeKind::Map { op: MapOp::Binary(BinOp::Add), args: vec![Operand::Sop(wa), Operand::Sop(wb)] });
    }
    let NodeKind::Map { op: MapOp::Binary(op), args } = kind else { return None };
    let agg = |n: &Operand| match n {
        Operand::Sop(id) => match &out.node(*id).kind {
            NodeKind::Aggregate { sel, values, default } if numeric(default) => Some((*sel, *values, default.clone())),
            _ => None,
        },
        Operand::Const(_) => None,
    };
    match (op, args.as_slice()) {
        (BinOp::Add | BinOp::Sub, [a, b]) => {
            let ((s1, v1, d1), (s2, v2, d2)) = (agg(a)?, agg(b)?);
            if s1 != s2 {
                return None;
            }
            let default = atom::binary(*op, &d1, &d2).ok()?;
            let values = out.add(NodeKind::Map { op: MapOp::Binary(*op), args: vec![Operand::Sop(v1), Operand::Sop(v2)] }, span)?;
            Some(NodeKind::Aggregate { sel: s1, values, default })
        }
        (BinOp::Mul | BinOp::Div, [a, Operand::Const(c)]) | (BinOp::Mul, [Operand::Const(c), a]) if numeric(c) => {
            let (s, v, d) = agg(a)?;
            let default = atom::binary(*op, &d, c).ok()?;
            let values = out.add(NodeKind::Map { op: MapOp::Binary(*op), args: vec![Operand::Sop(v), Operand::Const(c.clone())] }, span)?;
            Some(NodeKind::Aggregate { sel: s, values, default })
        }
        _ => None,
    }
}
