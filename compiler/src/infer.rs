//! Value-set inference: for a fixed vocabulary and maximum length, the finite set of values every
//! s-op can take (or `Unbounded` when the set would be too large to enumerate).
//!
//! Takes a [`Graph`], the vocabulary (the atoms `tokens_asis` may hold) and `max_len`; produces
//! one [`ValueSet`] per s-op node (selectors get none). Guarantee, tested against the
//! interpreter on exhaustive inputs: every value the interpreter computes at a node on an input
//! drawn from the vocabulary with length <= `max_len` is in that node's set (floats within 1e-9 relative:
//! a mean's last bit depends on summation order). Inputs for which the
//! interpreter fails are not covered (their values do not exist).
//!
//! Maps of `indices` and `length` only take their values on the grid of (index, length) pairs
//! with index < length ([`crate::positional`]), and are evaluated there.

use crate::numeric::Iv;
use raspc_lang::ast::Cmp;
use raspc_lang::graph::{MapOp, Operand};
use raspc_lang::interp::apply_map;
use raspc_lang::{Atom, Graph, NodeId, NodeKind};
use std::collections::{BTreeMap, HashMap};

/// Largest set enumerated; beyond it a node is `Unbounded`. One more than the largest --max-len
/// (4096), so that a `selector_width` (every count from 0 to max-len) is enumerable at any length.
pub const MAX_VALUES: usize = 4097;

/// A set of atoms in a deterministic order (by type, then value).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AtomSet(BTreeMap<(u8, raspc_lang::atom::AtomKey), Atom>);

impl AtomSet {
    pub fn insert(&mut self, a: Atom) {
        let tag = match a {
            Atom::Bool(_) => 0,
            Atom::Int(_) => 1,
            Atom::Float(_) => 2,
            Atom::Str(_) => 3,
        };
        self.0.insert((tag, a.key()), a);
    }
    /// Membership; floats match within 1e-9 relative, since a mean's last bit depends on the
    /// order its values were summed in.
    pub fn contains(&self, a: &Atom) -> bool {
        self.0.values().any(|b| match (a, b) {
            (Atom::Float(x), Atom::Float(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
            _ => b == a,
        })
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Atom> {
        self.0.values()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ValueSet {
    Finite(AtomSet),
    /// Too many values to enumerate (more than [`MAX_VALUES`]).
    Unbounded,
}

impl ValueSet {
    pub fn contains(&self, a: &Atom) -> bool {
        match self {
            ValueSet::Finite(s) => s.contains(a),
            ValueSet::Unbounded => true,
        }
    }
}

/// The value set of every s-op `root` depends on.
pub fn infer(graph: &Graph, root: NodeId, vocab: &[Atom], max_len: usize) -> HashMap<NodeId, ValueSet> {
    infer_with_intervals(graph, root, vocab, max_len).0
}

/// [`infer`], with the interval of every numerical s-op ([`crate::numeric`]); an s-op too large
/// to enumerate but known to hold integers of a small range gets that range as its set.
pub fn infer_with_intervals(graph: &Graph, root: NodeId, vocab: &[Atom], max_len: usize) -> (HashMap<NodeId, ValueSet>, HashMap<NodeId, Iv>) {
    infer_seeded(graph, root, vocab, max_len, &HashMap::new())
}

/// [`infer_with_intervals`] with `extra` values joining a node's set as soon as it is computed,
/// so that everything computed from it sees them: the floats the interpreter computes for a
/// merged mean (`fa - fb` is 0.19999999999999996 at 3/5 - 2/5) reach a counted sum of it
/// (`(indices + 1) * (fa - fb)` is 0.9999999999999998 there), which a map or a select
/// comparing it with 1 must then tell apart or refuse (helper z2: `net == 1` and
/// `select(net, net, ==)` compiled on the exact values, 10 and 44 of 363 inputs wrong).
pub fn infer_seeded(graph: &Graph, root: NodeId, vocab: &[Atom], max_len: usize, extra: &HashMap<NodeId, Vec<Atom>>) -> (HashMap<NodeId, ValueSet>, HashMap<NodeId, Iv>) {
    let mut out: HashMap<NodeId, ValueSet> = HashMap::new();
    let mut ivs: HashMap<NodeId, Iv> = HashMap::new();
    // The selectors of each sum of widths (through `+`) met so far, for
    // [`exclusive_width_sum_cap`]: built from its operands' (a long chain of sums is walked once).
    let mut width_sums: HashMap<NodeId, Vec<(NodeId, f64)>> = HashMap::new();
    let finite = |atoms: Vec<Atom>| {
        let mut s = AtomSet::default();
        for a in atoms {
            s.insert(a);
        }
        if s.len() > MAX_VALUES {
            ValueSet::Unbounded
        } else {
            ValueSet::Finite(s)
        }
    };
    let n = max_len.max(1) as i64;
    let order = graph.ancestors(root);
    // Functions of `indices` and `length`: evaluated on the (index, length) grid.
    let grid = crate::positional::Tables::with_widths(graph, &order, max_len.max(1));
    for id in order {
        if grid.is_positional_map(graph, id) {
            let set = finite(grid.values[&id].iter().flatten().cloned().collect());
            if let ValueSet::Finite(s) = &set
                && let Some(iv) = crate::numeric::of_set(s)
            {
                ivs.insert(id, iv);
            }
            out.insert(id, set);
            continue;
        }
        let set = match &graph.node(id).kind {
            NodeKind::Tokens => finite(vocab.to_vec()),
            NodeKind::Indices => finite((0..n).map(Atom::Int).collect()),
            NodeKind::Length => finite((1..=n).map(Atom::Int).collect()),
            // A width of positional s-ops: the counts it takes on the grid.
            NodeKind::SelectorWidth(_) if grid.values.contains_key(&id) => finite(grid.values[&id].iter().flatten().cloned().collect()),
            // (At most as many as a positional part of it selects: a window's few keys.)
            NodeKind::SelectorWidth(sel) => finite((0..=crate::positional::width_bound(graph, *sel, max_len.max(1)) as i64).map(Atom::Int).collect()),
            NodeKind::Const(a) => finite(vec![a.clone()]),
            NodeKind::Map { op, args } => {
                let set = crate::numeric::counted_sum_pair(graph, op, args, &out, extra, max_len).unwrap_or_else(|| map_set(op, args, &out));
                // A sum of widths of selectors that never select one key together is the width
                // of their `or`: at most `length` (the library sort's tie-broken place took
                // 0..2·max-len). Widths scaled by constants too (the simplifier's `Σ d·w_d` for
                // `round(mean(tokens_int) * length)`): the sum lies between the least and the
                // largest coefficient (or 0) times that (helper w31: a digit sum listed 0..720
                // at max-len 16 where 0..144 occur, and dividing it back was refused).
                let scaled_width = |x: NodeId| -> Option<Vec<(NodeId, f64)>> {
                    match &graph.node(x).kind {
                        NodeKind::SelectorWidth(s) => Some(vec![(*s, 1.0)]),
                        NodeKind::Map { op: MapOp::Binary(raspc_lang::ast::BinOp::Mul), args } => match args.as_slice() {
                            [Operand::Sop(w), Operand::Const(c)] | [Operand::Const(c), Operand::Sop(w)] => match (&graph.node(*w).kind, c) {
                                (NodeKind::SelectorWidth(s), Atom::Int(_) | Atom::Float(_)) => c.as_f64().filter(|k| k.is_finite()).map(|k| vec![(*s, k)]),
                                _ => None,
                            },
                            _ => None,
                        },
                        _ => width_sums.get(&x).cloned(),
                    }
                };
                let terms = match (op, args.as_slice()) {
                    (MapOp::Binary(raspc_lang::ast::BinOp::Add), [Operand::Sop(a), Operand::Sop(b)]) => scaled_width(*a).zip(scaled_width(*b)).map(|(mut l, r)| {
                        l.extend(r);
                        l
                    }),
                    _ => None,
                };
                // (At most a few terms: the pairwise test is quadratic.)
                let cap = terms.filter(|t| t.len() <= MAX_WIDTH_SUM_TERMS).and_then(|t| {
                    let sels: Vec<NodeId> = t.iter().map(|(s, _)| *s).collect();
                    let cap = exclusive_width_sum_cap(graph, &sels, max_len);
                    let (lo, hi) = t.iter().fold((0.0f64, 0.0f64), |(lo, hi), (_, c)| (lo.min(*c), hi.max(*c)));
                    let ints = t.iter().all(|(_, c)| c.fract() == 0.0);
                    width_sums.insert(id, t);
                    cap.map(|cap| (lo * cap as f64, hi * cap as f64, ints))
                });
                match (cap, set) {
                    // (With fractional weights the interpreter's sum may round past the bound
                    // computed here: 0.3·1 + 0.3·5 is 1.8, 0.3·6 is 1.7999999999999998; review
                    // rv31a. A margin far above f64 rounding, far below any gap of its values.)
                    (Some((lo, hi, ints)), ValueSet::Finite(s)) => {
                        let margin = if ints { 0.0 } else { 1e-9 * lo.abs().max(hi.abs()).max(1.0) };
                        finite(s.iter().filter(|a| a.as_f64().is_some_and(|x| lo - margin <= x && x <= hi + margin)).cloned().collect())
                    }
                    (Some((lo, hi, true)), ValueSet::Unbounded) if hi - lo <= MAX_VALUES as f64 => finite((lo as i64..=hi as i64).map(Atom::Int).collect()),
                    (_, set) => set,
                }
            }
            NodeKind::Aggregate { sel, values, default } => match &out[values] {
                ValueSet::Unbounded => ValueSet::Unbounded,
                // At most one key selected: the default or one of the values, never a mean.
                ValueSet::Finite(vs) if selects_at_most_one_with(graph, *sel, max_len, &out) => aggregate_set(vs, default, 1),
                // Every selected key holds the same value: that value (a float when it is the
                // mean of several), never a fraction between values.
                // (The interpreter's mean of k copies, `(v + ... + v) / k`: not v for every float,
                // three copies of 0.1 give 0.10000000000000002; review rv31a.)
                ValueSet::Finite(vs) if selected_keys_agree(graph, *sel, *values, &out) => match aggregate_set(vs, default, 1) {
                    ValueSet::Finite(mut set) => {
                        for v in vs.iter().filter(|a| !a.is_str()) {
                            for k in 2..=max_len.max(1) {
                                set.insert(Atom::Float(raspc_lang::interp::python_mean(&vec![v; k])));
                            }
                        }
                        if set.len() > MAX_VALUES {
                            aggregate_set(vs, default, max_len)
                        } else {
                            ValueSet::Finite(set)
                        }
                    }
                    other => other,
                },
                ValueSet::Finite(vs) => aggregate_set(vs, default, max_len),
            },
            NodeKind::AggregateMax { values, default, .. } => match &out[values] {
                ValueSet::Unbounded => ValueSet::Unbounded,
                ValueSet::Finite(vs) => aggregate_set(vs, default, 1),
            },
            _ => continue, // selectors
        };
        let iv = crate::numeric::interval(graph, id, &set, &ivs, max_len);
        // Integer facts narrow (counted sums) or bound (sums too large to enumerate) the set.
        let parts = crate::numeric::counted_sum_here(graph, id, &set, max_len);
        let counted = parts.is_some();
        let set = match iv.as_ref().and_then(crate::numeric::int_set) {
            Some(ValueSet::Finite(mut ints)) if counted => {
                // The interpreter's floats where they miss the exact count stay possible values.
                if let Some(parts) = parts
                    && let Some(ValueSet::Finite(vs)) = out.get(&parts.1)
                {
                    let vs: Vec<Atom> = vs.iter().cloned().collect();
                    for a in crate::numeric::counted_sum_floats(graph, id, max_len, parts, &vs) {
                        ints.insert(a);
                    }
                    for a in crate::numeric::counted_sum_extra_floats(graph, id, max_len, parts, &vs, extra) {
                        ints.insert(a);
                    }
                }
                ValueSet::Finite(ints)
            }
            Some(ints) if counted || set == ValueSet::Unbounded => ints,
            _ => set,
        };
        if let Some(iv) = iv {
            ivs.insert(id, iv);
        }
        let set = match (set, extra.get(&id)) {
            (ValueSet::Finite(mut s), Some(more)) => {
                // (Joined whatever the count: they are the exact values' own floats, which
                // lowering groups with them, not values of their own.)
                more.iter().for_each(|a| {
                    s.insert(a.clone());
                });
                ValueSet::Finite(s)
            }
            (set, _) => set,
        };
        out.insert(id, set);
    }
    (out, ivs)
}

/// Whether every key `sel` selects (for any one query) holds the same value of `values`: a
/// conjunct `select(x, q, ==)`, or `select(f, True, ==)` with f true exactly where no key has a
/// larger x (`not has_focus(select(x, x, >))`, the argmax idiom; or a smaller one), and `values`
/// a function of x alone. Only where x's values are all of one type, so that equal values are
/// the same atom (helper w30: the mean over the argmax of a prefix balance was a mean of any
/// fraction, refused for precision from max-len 32).
fn selected_keys_agree(graph: &Graph, sel: NodeId, values: NodeId, sets: &HashMap<NodeId, ValueSet>) -> bool {
    fn function_of(g: &Graph, y: NodeId, x: NodeId, depth: usize) -> bool {
        y == x
            || depth < 16
                && match &g.node(y).kind {
                    NodeKind::Map { args, .. } => args.iter().all(|a| match a {
                        Operand::Sop(s) => function_of(g, *s, x, depth + 1),
                        Operand::Const(_) => true,
                    }),
                    NodeKind::Const(_) => true,
                    _ => false,
                }
    }
    // The selector of `f` when f is true exactly where it selects no key.
    fn selects_none(g: &Graph, f: NodeId) -> Option<NodeId> {
        let zero = |a: &Operand| matches!(a, Operand::Const(c) if c.as_f64() == Some(0.0) && !c.is_str());
        let focus = |x: NodeId| match g.node(x).kind {
            NodeKind::SelectorWidth(s) => Some(s),
            NodeKind::Aggregate { sel, values, ref default } if default.as_f64() == Some(0.0) && !default.is_str() => match &g.node(values).kind {
                NodeKind::Const(c) if !c.is_str() && c.as_f64().is_some_and(|v| v > 0.0) => Some(sel),
                _ => None,
            },
            _ => None,
        };
        match &g.node(f).kind {
            NodeKind::Map { op: MapOp::Not, args } => match args.as_slice() {
                [Operand::Sop(h)] => match &g.node(*h).kind {
                    NodeKind::Map { op: MapOp::Binary(raspc_lang::ast::BinOp::Gt), args } => match args.as_slice() {
                        [Operand::Sop(a), z] if zero(z) => focus(*a),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            },
            NodeKind::Map { op: MapOp::Binary(raspc_lang::ast::BinOp::Eq), args } => match args.as_slice() {
                [Operand::Sop(a), z] | [z, Operand::Sop(a)] if zero(z) => focus(*a),
                _ => None,
            },
            _ => None,
        }
    }
    let one_type = |x: NodeId| match sets.get(&x) {
        Some(ValueSet::Finite(s)) => {
            let tag = |a: &Atom| std::mem::discriminant(a);
            let mut it = s.iter();
            it.next().is_none_or(|first| it.all(|a| tag(a) == tag(first)))
        }
        _ => false,
    };
    let mut parts = vec![];
    conjuncts(graph, sel, &mut parts);
    parts.into_iter().any(|p| match graph.node(p).kind {
        NodeKind::Select { keys, cmp: Cmp::Eq, .. } if function_of(graph, values, keys, 0) && one_type(keys) => true,
        NodeKind::Select { keys, queries, cmp: Cmp::Eq } => {
            matches!(graph.node(queries).kind, NodeKind::Const(Atom::Bool(true)))
                && selects_none(graph, keys).and_then(|s| strict_self_compare(graph, s)).is_some_and(|x| function_of(graph, values, x, 0) && one_type(x))
        }
        _ => false,
    })
}

/// [`selects_at_most_one`], or `==` on keys injective in `indices` for every value of the
/// uniform s-ops they also read ([`crate::numeric::injective_keys`]).
pub fn selects_at_most_one_with(graph: &Graph, sel: NodeId, max_len: usize, sets: &HashMap<NodeId, ValueSet>) -> bool {
    selects_at_most_one(graph, sel, max_len) || crate::numeric::injective_keys(graph, sel, sets, max_len)
}

/// [`selects_at_most_one_with`] without the rank form: the selections lowering stores one-hot
/// (an aggregate of numbers selected by a rank stays numerical; see [`selects_at_most_one_by_index`]).
pub fn selects_one_by_position(graph: &Graph, sel: NodeId, max_len: usize, sets: &HashMap<NodeId, ValueSet>) -> bool {
    selects_at_most_one_by_index(graph, sel, max_len) || crate::numeric::injective_keys(graph, sel, sets, max_len)
}

/// If `x` is a function of `indices` alone, its value at each index 0..max_len (None where the
/// function fails).
pub fn index_function(graph: &Graph, x: NodeId, max_len: usize) -> Option<Vec<Option<Atom>>> {
    // Each map once per index (memo): a value read several times again and again is a DAG
    // whose tree is exponential (helper d13, review rv18).
    type Memo = HashMap<NodeId, Option<Option<Atom>>>;
    fn go(g: &Graph, x: NodeId, i: i64, memo: &mut Memo) -> Option<Option<Atom>> {
        match &g.node(x).kind {
            NodeKind::Indices => Some(Some(Atom::Int(i))),
            NodeKind::Const(a) => Some(Some(a.clone())),
            NodeKind::Map { op, args } => {
                if let Some(v) = memo.get(&x) {
                    return v.clone();
                }
                let v = (|| {
                    let mut row = vec![];
                    for a in args {
                        row.push(match a {
                            Operand::Const(c) => c.clone(),
                            Operand::Sop(s) => match go(g, *s, i, memo)? {
                                Some(v) => v,
                                None => return Some(None),
                            },
                        });
                    }
                    Some(apply_map(op, &row).ok())
                })();
                memo.insert(x, v.clone());
                v
            }
            _ => None,
        }
    }
    (0..max_len as i64).map(|i| go(graph, x, i, &mut Memo::new())).collect()
}

/// True when the selector provably selects at most one key per query: `==` on keys that differ
/// at every position of every input (an injective function of `indices`, or a rank: see
/// [`is_rank`]), possibly `and`-ed with anything.
pub fn selects_at_most_one(graph: &Graph, sel: NodeId, max_len: usize) -> bool {
    at_most_one(graph, sel, max_len, true)
}

/// [`selects_at_most_one`] by the first form only (`==` on an injective function of `indices`).
/// Lowering stores such aggregates one-hot; aggregates of numbers that select one key by a rank
/// stay numerical (one dim; their value sets, which have no means, keep them cheap).
pub fn selects_at_most_one_by_index(graph: &Graph, sel: NodeId, max_len: usize) -> bool {
    at_most_one(graph, sel, max_len, false)
}

fn at_most_one(graph: &Graph, sel: NodeId, max_len: usize, ranks: bool) -> bool {
    if ranks && filtered_rank_select(graph, sel, max_len) {
        return true;
    }
    match &graph.node(sel).kind {
        NodeKind::SelectAnd(a, b) => at_most_one(graph, *a, max_len, ranks) || at_most_one(graph, *b, max_len, ranks),
        NodeKind::Select { keys, cmp: Cmp::Eq, .. } => injective_in_indices(graph, *keys, max_len) || (ranks && is_rank(graph, *keys, max_len)),
        _ => false,
    }
}

/// `x` is a function of `indices` alone that takes a different value at every index.
fn injective_in_indices(graph: &Graph, x: NodeId, max_len: usize) -> bool {
    let Some(f) = index_function(graph, x, max_len) else { return false };
    let mut seen = std::collections::BTreeSet::new();
    f.iter().all(|v| v.as_ref().is_some_and(|a| seen.insert(a.key())))
}

fn conjuncts(graph: &Graph, s: NodeId, out: &mut Vec<NodeId>) {
    if let NodeKind::SelectAnd(a, b) = graph.node(s).kind {
        conjuncts(graph, a, out);
        conjuncts(graph, b, out);
    } else {
        out.push(s);
    }
}

/// `select(r, q, ==) and F1 and ...` where `r = selector_width(O and F1 and ...)` with `O` an
/// order of the positions (`select(f, f, <=)`, or `<`, `>=`, `>`, f injective in `indices`) and
/// each `Fi` a test of the key alone (`select(c, CONST, op)`) or of its class (`select(a, a,
/// ==)`, a never-NaN `a`): `r` counts the keys passing the tests up to each position, so it
/// differs between any two positions that pass them (and are of one class), and the outer
/// selector keeps only those (the previous occurrence of the query's token:
/// `select(tokens, tokens, ==) and select(c, c - 1, ==)`). At most one key (the corpus's long addition finds the
/// nearest lower column that is not 9 this way).
fn filtered_rank_select(graph: &Graph, sel: NodeId, max_len: usize) -> bool {
    let mut outer = vec![];
    conjuncts(graph, sel, &mut outer);
    outer.iter().any(|&c| {
        let NodeKind::Select { keys, cmp: Cmp::Eq, .. } = graph.node(c).kind else { return false };
        let NodeKind::SelectorWidth(w) = graph.node(keys).kind else { return false };
        let mut inner = vec![];
        conjuncts(graph, w, &mut inner);
        let is_order = |s: NodeId| matches!(graph.node(s).kind, NodeKind::Select { keys, queries, cmp: Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge } if keys == queries && injective_in_indices(graph, keys, max_len));
        // A test of the key alone, or a class test `select(a, a, ==)` (a key in the query's
        // class): every key the outer selector keeps is then in the query's class, and `r`
        // counts earlier keys of that class, so it still differs between any two of them.
        let key_test = |s: NodeId| match graph.node(s).kind {
            NodeKind::Select { queries, .. } if matches!(graph.node(queries).kind, NodeKind::Const(_)) => true,
            NodeKind::Select { keys, queries, cmp: Cmp::Eq } => keys == queries && crate::positional::self_equal(graph, keys),
            _ => false,
        };
        inner.iter().filter(|&&s| is_order(s)).count() == 1 && inner.iter().all(|&s| is_order(s) || (key_test(s) && outer.iter().any(|&o| same_key_test(graph, s, o))))
    })
}

/// Two tests of the key alone, `select(f(x), c1, op1)` and `select(g(x), c2, op2)`, that pass
/// the same keys: one node, or maps of one boolean s-op x (a comparison or a `not`, met going
/// down both keys through maps of one s-op) that agree at True and at False (helper w31: a count of `select(indicator(d), 1, ==)` beside the filter
/// `select(d, True, ==)` was not seen as a rank, and the nearest such key became a mean: 4.7 M
/// parameters where the same program with `d` in both took 14 k).
fn same_key_test(graph: &Graph, a: NodeId, b: NodeId) -> bool {
    if a == b {
        return true;
    }
    let test = |s: NodeId| match graph.node(s).kind {
        NodeKind::Select { keys, queries, cmp } => match &graph.node(queries).kind {
            NodeKind::Const(c) => Some((keys, c.clone(), cmp)),
            _ => None,
        },
        _ => None,
    };
    let boolean = |x: NodeId| {
        matches!(
            &graph.node(x).kind,
            NodeKind::Map {
                op: MapOp::Not
                    | MapOp::Binary(raspc_lang::ast::BinOp::Eq | raspc_lang::ast::BinOp::Lt | raspc_lang::ast::BinOp::Le | raspc_lang::ast::BinOp::Gt | raspc_lang::ast::BinOp::Ge),
                ..
            }
        )
    };
    // The boolean s-ops at or below `k` (through maps of one s-op), each with the maps from it
    // up to `k`.
    let bases = |mut k: NodeId| -> Vec<(NodeId, Vec<NodeId>)> {
        let (mut chain, mut out) = (vec![], vec![]);
        for _ in 0..8 {
            if boolean(k) {
                out.push((k, chain.clone()));
            }
            let NodeKind::Map { args, .. } = &graph.node(k).kind else { break };
            let sops: Vec<NodeId> = args.iter().filter_map(|a| if let Operand::Sop(x) = a { Some(*x) } else { None }).collect();
            let [x] = sops.as_slice() else { break };
            chain.push(k);
            k = *x;
        }
        out
    };
    let (Some((k1, c1, op1)), Some((k2, c2, op2))) = (test(a), test(b)) else { return false };
    let (b1, b2) = (bases(k1), bases(k2));
    let Some(((_, m1), (_, m2))) = b1.iter().find_map(|x| b2.iter().find(|y| y.0 == x.0).map(|y| (x, y))) else { return false };
    // The key's value at each map of the chain, from x's value up; None where a map fails.
    let value = |chain: &[NodeId], v: Atom| -> Option<Atom> {
        let mut cur = v;
        for &m in chain.iter().rev() {
            let NodeKind::Map { op, args } = &graph.node(m).kind else { return None };
            let row: Vec<Atom> = args
                .iter()
                .map(|a| match a {
                    Operand::Const(c) => c.clone(),
                    Operand::Sop(_) => cur.clone(),
                })
                .collect();
            cur = apply_map(op, &row).ok()?;
        }
        Some(cur)
    };
    [Atom::Bool(true), Atom::Bool(false)].into_iter().all(|v| {
        let pass = |chain: &[NodeId], c: &Atom, op: Cmp| value(chain, v.clone()).and_then(|k| Atom::compare(&k, op, c).ok());
        matches!((pass(m1, &c1, op1), pass(m2, &c2, op2)), (Some(p), Some(q)) if p == q)
    })
}

/// `x` is a rank: the number of positions that come before each position in a strict total
/// order of the positions, so its values at the positions of one input are all different.
/// Forms: `selector_width(S)` with S a strict total order, and the sum of widths the
/// simplifier makes of one, `selector_width(select(k, k, <)) + selector_width(select(k, k, ==)
/// and T)` (`>` for `<` too; T a strict total order): the rank of (k, T) in lexicographic order.
pub fn is_rank(graph: &Graph, x: NodeId, max_len: usize) -> bool {
    match &graph.node(x).kind {
        NodeKind::SelectorWidth(s) => strict_total_order(graph, *s, max_len),
        NodeKind::Map { op: MapOp::Binary(raspc_lang::ast::BinOp::Add), args } => match args.as_slice() {
            [Operand::Sop(a), Operand::Sop(b)] => {
                let width_of = |w: NodeId| match graph.node(w).kind {
                    NodeKind::SelectorWidth(s) => Some(s),
                    _ => None,
                };
                let (Some(sa), Some(sb)) = (width_of(*a), width_of(*b)) else { return false };
                lexicographic_parts(graph, sa, sb, max_len) || lexicographic_parts(graph, sb, sa, max_len)
            }
            _ => false,
        },
        _ => false,
    }
}

/// The most terms a sum of widths is checked for exclusive selectors over.
const MAX_WIDTH_SUM_TERMS: usize = 16;

/// For the selectors `sels` of a sum of widths (through `+`, at least two), no two of which can
/// select one key for one query ([`crate::simplify::exclusive`]): the most keys they select
/// together, max-len, or max-len - 1 when none selects the query's own position.
fn exclusive_width_sum_cap(graph: &Graph, sels: &[NodeId], max_len: usize) -> Option<i64> {
    // Never the key at the query's own position: a strict comparison of one s-op with itself
    // (false for every value, NaN too) or `!=` of one that equals itself.
    fn never_own(g: &Graph, s: NodeId) -> bool {
        match &g.node(s).kind {
            NodeKind::SelectOr(a, b) => never_own(g, *a) && never_own(g, *b),
            NodeKind::SelectAnd(a, b) => never_own(g, *a) || never_own(g, *b),
            NodeKind::Select { keys, queries, cmp: Cmp::Lt | Cmp::Gt } => keys == queries,
            NodeKind::Select { keys, queries, cmp: Cmp::Ne } => keys == queries && crate::positional::self_equal(g, *keys),
            _ => false,
        }
    }
    if sels.len() < 2 {
        return None;
    }
    for (i, &a) in sels.iter().enumerate() {
        if sels[i + 1..].iter().any(|&b| !crate::simplify::exclusive(graph, a, b) && !equal_to_different_constants(graph, a, b)) {
            return None;
        }
    }
    Some(max_len as i64 - i64::from(sels.iter().all(|&s| never_own(graph, s))))
}

/// Two selectors with conjuncts `select(k, c1, ==)` and `select(k, c2, ==)` on one key, with
/// different constants: a key equals at most one of them (helper w31: the widths of each digit
/// in a digit sum, `Σ d·w_d`, were not known to count different keys).
fn equal_to_different_constants(graph: &Graph, a: NodeId, b: NodeId) -> bool {
    let (mut ca, mut cb) = (vec![], vec![]);
    conjuncts(graph, a, &mut ca);
    conjuncts(graph, b, &mut cb);
    let eq_const = |s: NodeId| match graph.node(s).kind {
        NodeKind::Select { keys, queries, cmp: Cmp::Eq } => match &graph.node(queries).kind {
            NodeKind::Const(c) => Some((keys, c.clone())),
            _ => None,
        },
        _ => None,
    };
    // (Keys of the input, not of positions: the positional tables give those widths already,
    // and a tighter listing of a sum of positions' widths exposed the interpreter's floats of
    // a mean beside it, which a rougher interval had let through.)
    ca.iter()
        .filter_map(|&x| eq_const(x))
        .any(|(k1, c1)| !crate::positional::is_positional(graph, k1) && cb.iter().filter_map(|&y| eq_const(y)).any(|(k2, c2)| k1 == k2 && !c1.py_eq(&c2)))
}

/// `select(k, k, <)` (or `>`): the comparison of one s-op with itself, strict; returns k.
fn strict_self_compare(graph: &Graph, s: NodeId) -> Option<NodeId> {
    match graph.node(s).kind {
        NodeKind::Select { keys, queries, cmp: Cmp::Lt | Cmp::Gt } if keys == queries => Some(keys),
        _ => None,
    }
}

/// `first` = `select(k, k, <)` and `ties` = `select(k, k, ==) and T` (either order) with T a
/// strict total order of the positions.
fn lexicographic_parts(graph: &Graph, first: NodeId, ties: NodeId, max_len: usize) -> bool {
    let Some(k) = strict_self_compare(graph, first) else { return false };
    let NodeKind::SelectAnd(a, b) = graph.node(ties).kind else { return false };
    let equal_k = |s: NodeId| matches!(graph.node(s).kind, NodeKind::Select { keys, queries, cmp: Cmp::Eq } if keys == k && queries == k);
    (equal_k(a) && strict_total_order(graph, b, max_len)) || (equal_k(b) && strict_total_order(graph, a, max_len))
}

/// The selector is a strict total order of the positions (key j selected for query i exactly
/// when j comes before i): `select(f, f, <)` (or `>`) with f injective in `indices`, or the
/// lexicographic `select(k, k, <) or (select(k, k, ==) and T)` with T one.
fn strict_total_order(graph: &Graph, s: NodeId, max_len: usize) -> bool {
    match graph.node(s).kind {
        NodeKind::Select { keys, queries, cmp: Cmp::Lt | Cmp::Gt } if keys == queries => injective_in_indices(graph, keys, max_len),
        NodeKind::SelectOr(a, b) => lexicographic_parts(graph, a, b, max_len) || lexicographic_parts(graph, b, a, max_len),
        _ => false,
    }
}

/// A map whose result is always a boolean (comparisons, `not`, `and`/`or` on s-ops, `in`).
fn boolean_op(op: &MapOp) -> bool {
    use raspc_lang::ast::BinOp;
    matches!(
        op,
        MapOp::Not | MapOp::In(_) | MapOp::Convert(raspc_lang::graph::Convert::Bool) | MapOp::Binary(BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::And | BinOp::Or)
    )
}

fn map_set(op: &MapOp, args: &[Operand], sets: &HashMap<NodeId, ValueSet>) -> ValueSet {
    // `t if c else e` takes a value of t or of e: the union (of the branches c can pick), not
    // the image of every (t, c, e) combination, which passes the enumeration limit long
    // before the union does (`w if c else w`).
    if let (MapOp::Ternary, [t, c, e]) = (op, args) {
        let set = |a: &Operand| -> Option<Vec<Atom>> {
            match a {
                Operand::Const(x) => Some(vec![x.clone()]),
                Operand::Sop(n) => match &sets[n] {
                    ValueSet::Finite(s) => Some(s.iter().cloned().collect()),
                    ValueSet::Unbounded => None,
                },
            }
        };
        if let (Some(ts), Some(cs), Some(es)) = (set(t), set(c), set(e)) {
            // Which branches the condition's values pick (Python's truthiness, as the map applies it).
            let picks = |v: &Atom| apply_map(op, &[Atom::Bool(true), v.clone(), Atom::Bool(false)]).ok();
            let (mut yes, mut no) = (false, false);
            for v in &cs {
                match picks(v) {
                    Some(Atom::Bool(true)) => yes = true,
                    Some(_) => no = true,
                    None => {}
                }
            }
            let mut s = AtomSet::default();
            for v in ts.into_iter().filter(|_| yes).chain(es.into_iter().filter(|_| no)) {
                s.insert(v);
            }
            return if s.len() > MAX_VALUES { ValueSet::Unbounded } else { ValueSet::Finite(s) };
        }
    }
    match map_set_enumerated(op, args, sets) {
        // Too many inputs to enumerate, but the result is a boolean.
        ValueSet::Unbounded if boolean_op(op) => {
            let mut s = AtomSet::default();
            s.insert(Atom::Bool(false));
            s.insert(Atom::Bool(true));
            ValueSet::Finite(s)
        }
        s => s,
    }
}

fn map_set_enumerated(op: &MapOp, args: &[Operand], sets: &HashMap<NodeId, ValueSet>) -> ValueSet {
    // An s-op read twice holds one value at a position: `m - m` is 0, not every difference of
    // two of m's values (helper a6: `z = m - m` "can be 1 or 0.9999999999999998"). Each
    // distinct operand is enumerated once; `pick[i]` is argument i's.
    let mut distinct: Vec<&Operand> = vec![];
    let pick: Vec<usize> = args
        .iter()
        .map(|a| match a {
            Operand::Sop(_) => distinct.iter().position(|d| *d == a).unwrap_or_else(|| {
                distinct.push(a);
                distinct.len() - 1
            }),
            Operand::Const(_) => {
                distinct.push(a);
                distinct.len() - 1
            }
        })
        .collect();
    let mut choices: Vec<Vec<Atom>> = vec![];
    let mut product = 1usize;
    for a in distinct {
        let c: Vec<Atom> = match a {
            Operand::Const(c) => vec![c.clone()],
            Operand::Sop(n) => match &sets[n] {
                ValueSet::Finite(s) => s.iter().cloned().collect(),
                ValueSet::Unbounded => return ValueSet::Unbounded,
            },
        };
        product = product.saturating_mul(c.len().max(1));
        choices.push(c);
    }
    if product > MAX_VALUES * 16 {
        return ValueSet::Unbounded;
    }
    let mut s = AtomSet::default();
    let mut idx = vec![0usize; choices.len()];
    if choices.iter().any(|c| c.is_empty()) {
        return ValueSet::Finite(s);
    }
    loop {
        let row: Vec<Atom> = pick.iter().map(|&p| choices[p][idx[p]].clone()).collect();
        if let Ok(v) = apply_map(op, &row) {
            s.insert(v);
            if s.len() > MAX_VALUES {
                return ValueSet::Unbounded;
            }
        }
        let mut k = 0;
        loop {
            if k == idx.len() {
                return ValueSet::Finite(s);
            }
            idx[k] += 1;
            if idx[k] < choices[k].len() {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}

/// Default, any single value, and (for numbers) every mean of 2..=max_len values.
fn aggregate_set(values: &AtomSet, default: &Atom, max_len: usize) -> ValueSet {
    let mut s = AtomSet::default();
    s.insert(default.clone());
    for v in values.iter() {
        s.insert(v.clone());
    }
    let nums: Vec<f64> = values.iter().filter_map(|a| if a.is_str() { None } else { a.as_f64() }).collect();
    if nums.len() == values.len() && !nums.is_empty() {
        // Sums of exactly k values (with repetition), as exact f64 only when they are integers
        // or few; the mean is then computed as the interpreter does: sum / k.
        let mut sums: Vec<f64> = nums.clone();
        for k in 2..=max_len {
            let mut next: Vec<f64> = Vec::new();
            for s0 in &sums {
                for v in &nums {
                    next.push(s0 + v);
                }
            }
            next.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            next.dedup();
            if next.len() > MAX_VALUES {
                return ValueSet::Unbounded;
            }
            for x in &next {
                s.insert(Atom::Float(x / k as f64));
            }
            if s.len() > MAX_VALUES {
                return ValueSet::Unbounded;
            }
            sums = next;
        }
    }
    ValueSet::Finite(s)
}
