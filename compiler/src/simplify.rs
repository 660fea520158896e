//! Algebraic rewrites applied before lowering. Each preserves the interpreter's value on every
//! input the interpreter accepts (the compiled model is verified against the original graph).
//!
//! * `aggregate(s, a, d1) ± aggregate(s, b, d2)` = `aggregate(s, a ± b, d1 ± d2)`: the mean over
//!   one selected set is linear. One head instead of two, and the result keeps the values'
//!   common denominator (so `balance < 0` needs one step, not a comparison of two means).
//! * `aggregate(s, a, d) * c` (and `c * ...`, `... / c`) = `aggregate(s, a * c, d * c)`.
//! * `aggregate(s, a, d1) op aggregate(s, b, d2)` (a comparison, integer values and defaults) =
//!   `aggregate(s, a - b, d1 - d2) op 0`: one head and a sign test, not a map over every pair.
//! * `selector_width(A or B)` = `selector_width(A) + selector_width(B)` when A and B can never
//!   select the same key: each has an `and`-conjunct comparing the same keys and queries with
//!   exclusive comparisons (`<` vs `==`, ...). Two small heads instead of a one-hot over every
//!   combination of the s-ops A and B compare (the sort tie-break `k < q or (k == q and i < j)`).
//! * `select(x + y, x + y, <)` (also `<=`, `>`, `>=`) where y's values span less than the smallest
//!   gap between x's values is the lexicographic comparison `select(x, x, <) or (select(x, x, ==)
//!   and select(y, y, <))` (Tracr's sort keys `key + i/max_seq_len`): with the rewrite above, two
//!   widths replace a one-hot over every (x, y) pair. Needs value sets, so it runs after `infer`.
//! * A comparison of an integer with `±u + (integers)`, `u` a mean of integers (a fraction with
//!   a denominator up to max-len), in a map or a select, becomes a comparison with `floor(u)` or
//!   `ceil(u)` (and "u is an integer" for `==`, `!=`): see `grid_compare`. Needs value sets
//!   and intervals of what the comparison reads after earlier rewrites (`Facts`).
//! * `aggregate(s, v, d) * f` with `s` comparing functions of `indices` and `length` and `f` such
//!   a function equal to `λ·count(i, l)` on every grid pair (i, l) (`count` the keys `s` selects
//!   there; `f(i, l) = 0` where it selects none) is the counted sum `λ·Σ v` over the selected
//!   keys: `Σ_a λ·a·selector_width(s and select(v, a, ==))` over the (at most
//!   [`MAX_WIDTH_TERMS`]) nonzero values `a` of `v` (integers, and λ an integer). The mean of a whole-input indicator times
//!   `length` is one width head. Counted sums whose `f` is a function of `indices` alone keep the
//!   product with positions of docs/compiler.md. Needs value sets.

use crate::infer::{infer, infer_with_intervals, ValueSet};
use crate::numeric::{mean_grid, Grid, Iv};
use raspc_lang::ast::{BinOp, Cmp};
use raspc_lang::graph::{MapOp, Operand};
use raspc_lang::{atom, Atom, Graph, NodeId, NodeKind};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A rebuilt graph holding only what `root` depends on, rewritten; returns its root.
/// Falls back to the graph as given if a rewrite would grow it past the graph size limit.
pub fn simplify(g: &Graph, root: NodeId, vocab: &[Atom], max_len: usize, pinned: &[String]) -> (Graph, NodeId) {
    let (g, r, _, _) = simplify_choosing(g, root, vocab, max_len, false, pinned);
    (g, r)
}

/// [`simplify`], and for each rewritten node (of the returned graph) whose exact value the
/// interpreter's floating point misses on some input (`k/n·n` is 7.000000000000001 for 7/25·25),
/// the values the interpreter computes there instead. They belong to the node's value set: a
/// later map that tells them apart from the exact value is refused, as for any number computed
/// two ways (`compile::numeric_map`), instead of silently differing from the interpreter.
pub fn simplify_noting(g: &Graph, root: NodeId, vocab: &[Atom], max_len: usize) -> (Graph, NodeId, HashMap<NodeId, Vec<Atom>>) {
    let (g, r, inexact, _) = simplify_choosing(g, root, vocab, max_len, false, &[]);
    (g, r, inexact)
}

/// [`simplify_noting`]; with `every_grid`, every comparison with a mean of integers that
/// [`grid_compare`] can rewrite is rewritten (not only those whose enumeration would be too
/// large). Also says whether some such comparison was left as it was (so that the caller may
/// try both). The s-ops labelled as in `pinned` (those an `--encoding` names) are not folded
/// into a table of their readers ([`one_source_map`]): they keep a slot to encode.
pub fn simplify_choosing(g: &Graph, root: NodeId, vocab: &[Atom], max_len: usize, every_grid: bool, pinned: &[String]) -> (Graph, NodeId, HashMap<NodeId, Vec<Atom>>, bool) {
    let none = HashMap::new();
    let structural = Facts {
        sets: &none,
        vocab,
        max_len,
        new: Default::default(),
        inexact: Default::default(),
        structural: true,
        tables: Default::default(),
        old_tables: HashMap::new(),
        every_grid,
        grid_skipped: Default::default(),
        pinned,
        shared_selectors: Default::default(),
        pinned_node: Default::default(),
        fraction_ok: Default::default(),
    };
    let Some((g1, r1)) = rebuild(g, root, Some(&structural)) else { return (g.clone(), root, HashMap::new(), false) };
    let sets = infer(&g1, r1, vocab, max_len);
    let old_tables = structural.tables.into_inner().1;
    let facts = Facts {
        sets: &sets,
        vocab,
        max_len,
        new: Default::default(),
        inexact: Default::default(),
        structural: false,
        tables: Default::default(),
        old_tables,
        every_grid,
        grid_skipped: Default::default(),
        pinned,
        shared_selectors: Default::default(),
        pinned_node: Default::default(),
        fraction_ok: Default::default(),
    };
    match rebuild(&g1, r1, Some(&facts)) {
        Some((g2, r2)) => {
            let skipped = facts.grid_skipped.get();
            (g2, r2, facts.inexact.into_inner().1, skipped)
        }
        None => (g1, r1, HashMap::new(), false),
    }
}

/// What value analysis knows: the value sets of the graph being rebuilt (old ids), and, for
/// the rewrites that need facts about what they read *after* earlier rewrites, value sets and
/// intervals of the new graph, computed on demand for a node and its ancestors.
struct Facts<'a> {
    sets: &'a HashMap<NodeId, ValueSet>,
    vocab: &'a [Atom],
    max_len: usize,
    new: RefCell<(HashMap<NodeId, ValueSet>, HashMap<NodeId, Iv>)>,
    /// The interpreter's values a rewrite of a node misses (see [`simplify_noting`]): by the
    /// node being rebuilt (old id), then by the node that replaced it (new id).
    inexact: RefCell<Inexact>,
    /// The first pass: only the rewrites that need no value sets of the graph being rebuilt
    /// (`rewrite`, which asks for the new graph's).
    structural: bool,
    /// Mean tables (see [`MeanTable`]) of the aggregates a merge or a scaling built: the one
    /// for the node being rebuilt, then by new id.
    /// `Some(None)`: a merge or scaling whose table grew too large, which is then not tracked
    /// (nor is anything merged from it); a difference of means, or a sum of means of either sign,
    /// is then not merged at all (their floats can cancel far from S/c).
    tables: RefCell<(Option<Tracked>, HashMap<NodeId, Tracked>)>,
    /// The previous pass's tables, by the ids of the graph being rebuilt.
    old_tables: HashMap<NodeId, Tracked>,
    /// Rewrite every comparison [`grid_compare`] can, however few combinations it saves.
    every_grid: bool,
    /// Set when [`grid_compare`] left a comparison it could have rewritten.
    grid_skipped: std::cell::Cell<bool>,
    /// Labels of the s-ops an `--encoding` names (see [`simplify_choosing`]).
    pinned: &'a [String],
    /// Selectors of the new graph that something besides `selector_width` reads (an aggregate,
    /// another selector): their `or` stays one selector whatever its width becomes, so the width
    /// is not split by inclusion–exclusion (review rv24: up to 3.6 times larger).
    shared_selectors: RefCell<std::collections::HashSet<NodeId>>,
    /// The node being rebuilt is one an `--encoding` names: its width is not split (review
    /// rv24b: a categorical width rebuilt from seven widths was 721 times larger).
    pinned_node: std::cell::Cell<bool>,
    /// The node being rebuilt may become a mean as a fraction of widths ([`width_fraction`]):
    /// its widths are read by it alone, and it is the entry or read only by comparisons with
    /// constants (review rv28b: arithmetic on the mean, `frac * n` or `round(frac * 100)`,
    /// made models larger or met the interpreter's floats of a scaled mean and was refused; as
    /// an aggregate's values, `run` wrote 0 for 0.0).
    fraction_ok: std::cell::Cell<bool>,
}

/// The floats a rewrite misses: for the node being rebuilt, then by the node that replaced it.
type Inexact = (Vec<Atom>, HashMap<NodeId, Vec<Atom>>);

/// What the interpreter computes for a merged or scaled mean of integers, by key count c and
/// integer sum S of the merged values: (c, S, value), every value some input gives (`1/5 + 2/5`
/// is 0.6000000000000001 where the merged mean `3/5` is 0.6).
type MeanTable = Vec<(u32, i64, f64)>;

/// A merged or scaled mean's table, or None when it grew too large to track.
type Tracked = Option<Rc<MeanTable>>;

/// Entries a mean table may hold, and pairs a merge may combine (beyond them, the rewrite is
/// not tracked).
const MAX_TABLE: usize = 1 << 16;
const MAX_TABLE_WORK: usize = 1 << 21;

fn rebuild(g: &Graph, root: NodeId, facts: Option<&Facts>) -> Option<(Graph, NodeId)> {
    let mut out = Graph::new();
    out.reserve_labels_of(g);
    let mut map: HashMap<NodeId, NodeId> = HashMap::new();
    let order = g.ancestors(root);
    // Selectors something besides a width reads, directly or through the selectors built
    // from them (readers come after their operands: walked backwards).
    let mut read_otherwise = std::collections::HashSet::new();
    for &id in order.iter().rev() {
        let k = &g.node(id).kind;
        // (An `or` built of it shares it only if it is shared itself: it is split too; an `and`
        // or a `not` of it keeps its one-hot, review rv24b.)
        let shares = match k {
            NodeKind::SelectorWidth(_) => false,
            NodeKind::SelectOr(..) => read_otherwise.contains(&id),
            _ => true,
        };
        if shares {
            read_otherwise.extend(k.operands().into_iter().filter(|o| g.node(*o).kind.is_selector()));
        }
    }
    let mut users: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    for &id in &order {
        for o in g.node(id).kind.operands() {
            users.entry(o).or_default().push(id);
        }
    }
    for id in order {
        let node = g.node(id);
        let kind = node.kind.remap(&|x| map[&x]);
        let lex = facts.filter(|f| !f.structural).and_then(|f| {
            lexicographic(g, id, f.sets, &map, &mut out, node.span)
                .or_else(|| grid_compare(g, id, f, &map, &mut out, node.span))
                .or_else(|| counted_widths(g, id, f, &map, &mut out, node.span, &mut f.inexact.borrow_mut().0))
        });
        let kind = lex.or_else(|| facts.filter(|f| !f.structural).and_then(|f| one_source_map(g, id, f, &map, &out))).unwrap_or(kind);
        // After `grid_compare` too (`m > indices` becomes `ceil(m) > indices`, still 10,000
        // combinations at max-len 100).
        let kind = facts.filter(|f| !f.structural).and_then(|f| difference_compare(&kind, f, &mut out, node.span)).unwrap_or(kind);
        if let Some(f) = facts {
            f.tables.borrow_mut().0 = None;
        }
        if let Some(f) = facts {
            f.pinned_node.set(f.pinned.contains(&node.label));
            let only_here = |x: NodeId| users.get(&x).is_some_and(|u| u.iter().all(|&r| r == id));
            let read_plainly = users.get(&id).is_none_or(|u| {
                u.iter().all(|&r| match &g.node(r).kind {
                    NodeKind::Map { op: MapOp::Binary(BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), args } => {
                        args.iter().all(|a| matches!(a, Operand::Const(_)) || *a == Operand::Sop(id))
                    }
                    _ => false,
                })
            });
            let widths = matches!(&node.kind, NodeKind::Map { op: MapOp::Binary(BinOp::Div), args } if args.iter().all(|a| matches!(a, Operand::Sop(x) if only_here(*x) || matches!(g.node(*x).kind, NodeKind::Length))));
            f.fraction_ok.set(widths && read_plainly);
        }
        let kind = rewrite(&mut out, &kind, node.span, facts).unwrap_or(kind);
        let new = out.add_labelled(kind, node.span, &node.label, node.named)?;
        if out.node(new).library.is_none() && node.library.is_some() {
            out.set_origin(new, node.span, node.library.clone());
        }
        if let (None, Some(call)) = (out.node(new).called_at, node.called_at) {
            out.set_called_at(new, call);
        }
        map.insert(id, new);
        if let Some(f) = facts
            && node.kind.is_selector()
            && read_otherwise.contains(&id)
        {
            f.shared_selectors.borrow_mut().insert(new);
        }
        if let Some(f) = facts {
            // A mean table built here, or carried from the previous pass for an aggregate that
            // stays one: its values the exact mean misses join the node's values.
            let mut tables = f.tables.borrow_mut();
            let table = tables.0.take().or_else(|| f.old_tables.get(&id).filter(|_| matches!(out.node(new).kind, NodeKind::Aggregate { .. })).cloned());
            if let Some(t) = table {
                // Too large to track what the interpreter computes: the node is marked as one
                // whose floats may miss S/c (with none listed), so that lowering reads it only
                // where rounding cannot matter (helper z3: `mean(x + 1) - mean(x) < 1` past
                // max-len 18 compiled on the exact values, 19 of 200 inputs wrong).
                if t.is_none() {
                    f.inexact.borrow_mut().1.entry(new).or_default();
                }
                if let Some(t) = &t {
                    let mut missed: Vec<Atom> = t.iter().filter(|&&(c, sum, v)| v != sum as f64 / f64::from(c)).map(|&(_, _, v)| Atom::Float(v)).collect();
                    missed.sort_by(|a, b| a.as_f64().unwrap_or(0.0).total_cmp(&b.as_f64().unwrap_or(0.0)));
                    missed.dedup();
                    f.inexact.borrow_mut().0.extend(missed);
                }
                tables.1.insert(new, t);
            }
            drop(tables);
            let mut inexact = f.inexact.borrow_mut();
            if !inexact.0.is_empty() {
                let values = std::mem::take(&mut inexact.0);
                inexact.1.insert(new, values);
            }
        }
    }
    let r = map[&root];
    Some((out, r))
}

/// The most values a map of several s-ops that are all functions of one s-op is tabulated over
/// ([`one_source_map`]).
const ONE_SOURCE_VALUES: usize = 4096;

/// A map of several s-ops that are all maps (chains of one-operand maps) of one s-op `x`, at
/// least one through an operation that is not affine (`x - x % 10`, the floor-division idiom;
/// `x * (x > 3)`), as a lookup table over `x`'s values, each entry what the interpreter computes
/// for that value. Value inference then sees one function of `x` instead of independent
/// operands (helper w23: `q = (x - x % 10) / 10` took 80 values instead of 8, and a second
/// floor division of a number built from `q` was refused as unbounded), and lowering reads
/// one slot. Only where `x`'s values are exactly what the interpreter computes: a finite set,
/// at most [`ONE_SOURCE_VALUES`], of integers, strings and booleans, or of floats with no mean
/// among what `x` is computed from (a mean's float depends on the order of its sum), and
/// every entry computed without an error (the table reads each value as exactly that atom:
/// `0` and `0.0` may give `0` and `0.0`). Affine combinations (`x + 2 * x`) stay arithmetic: lowering adds them in
/// sum slots, without a table.
fn one_source_map(g: &Graph, id: NodeId, f: &Facts, map: &HashMap<NodeId, NodeId>, out: &Graph) -> Option<NodeKind> {
    let NodeKind::Map { op, args } = &g.node(id).kind else { return None };
    if args.iter().filter(|a| matches!(a, Operand::Sop(_))).count() < 2 {
        return None;
    }
    // Follows one-operand maps down to the s-op they are computed from; says whether one of
    // them is not affine.
    let source = |mut n: NodeId| -> (NodeId, bool) {
        let mut bent = false;
        loop {
            match &g.node(n).kind {
                // (An s-op an `--encoding` names stays an s-op of its own, review rv23: `r =
                // x % 10` with `--encoding r=categorical` was folded into `(x - r) / 10`'s table
                // and the override silently did nothing.)
                NodeKind::Map { op, args } if args.iter().filter(|a| matches!(a, Operand::Sop(_))).count() == 1 && !f.pinned.contains(&g.node(n).label) => {
                    let affine = match op {
                        MapOp::Neg | MapOp::Pos => true,
                        MapOp::Binary(BinOp::Add | BinOp::Sub) => true,
                        MapOp::Binary(BinOp::Mul) => true,
                        MapOp::Binary(BinOp::Div) => matches!(args.get(1), Some(Operand::Const(_))),
                        _ => false,
                    };
                    bent |= !affine;
                    let Some(next) = args.iter().find_map(|a| match a {
                        Operand::Sop(s) => Some(*s),
                        Operand::Const(_) => None,
                    }) else {
                        return (n, bent);
                    };
                    n = next;
                }
                _ => return (n, bent),
            }
        }
    };
    let mut x = None;
    let mut bent = false;
    for a in args {
        if let Operand::Sop(s) = a {
            let (src, b) = source(*s);
            if x.is_some_and(|x| x != src) {
                return None;
            }
            x = Some(src);
            bent |= b;
        }
    }
    let x = x?;
    // (Maps of the input tokens are written by the embedding, and maps of positions computed at
    // compile time: a table over them would only add a one-hot of every token or position,
    // review rv23: `(x - x % 10) / 10` of 4,096 integer tokens went from 12 k parameters to
    // 18.5 M.)
    if !bent || matches!(g.node(x).kind, NodeKind::Tokens | NodeKind::Indices | NodeKind::Length | NodeKind::Const(_)) {
        return None;
    }
    // `x`'s values as the graph rebuilt so far knows them (earlier tables narrow them: a second
    // floor division of what the first gives), and none the interpreter computes otherwise
    // (a rewrite whose floats miss the interpreter's: the table would not list them).
    let nx = *map.get(&x)?;
    if f.inexact.borrow().1.contains_key(&nx) {
        return None;
    }
    f.learn(out, nx);
    let new = f.new.borrow();
    let Some(ValueSet::Finite(values)) = new.0.get(&nx) else { return None };
    if values.len() > ONE_SOURCE_VALUES {
        return None;
    }
    let floats = values.iter().any(|v| matches!(v, Atom::Float(_)));
    // (An aggregate that selects at most one key passes a value on: no mean.)
    let averaged = || g.ancestors(x).into_iter().any(|n| matches!(g.node(n).kind, NodeKind::Aggregate { sel, .. } if !crate::infer::selects_at_most_one(g, sel, f.max_len)));
    if floats && averaged() {
        return None;
    }
    // The value of node `n` (a map of `x`) when `x` holds `v`.
    fn value_at(g: &Graph, n: NodeId, x: NodeId, v: &Atom) -> Option<Atom> {
        if n == x {
            return Some(v.clone());
        }
        let NodeKind::Map { op, args } = &g.node(n).kind else { return None };
        crate::positional::apply_with(op, args, |s| value_at(g, s, x, v))
    }
    // Value sets hold 0.0 and -0.0 as one value (and the table's lookup matches either): both
    // must give the same result (review rv23: `(3 - round(x)) / (indicator(x > 4) + 2)` of a
    // -0.0 was left out of the table, and the model wrote 0). A NaN matches no key: no table.
    let mut table: Vec<(Atom, Atom)> = Vec::with_capacity(values.len());
    for v in values.iter() {
        let out = crate::positional::apply_with(op, args, |s| value_at(g, s, x, v))?;
        match v {
            Atom::Float(z) if z.is_nan() => return None,
            Atom::Float(z) if *z == 0.0 => {
                // (Results equal as value sets hold them: 0.0 - 0.0 and -0.0 - 0.0 give 0.0
                // and -0.0, one value.)
                let other = Atom::Float(-*z);
                if !crate::positional::apply_with(op, args, |s| value_at(g, s, x, &other)).is_some_and(|o| o.same_value(&out)) {
                    return None;
                }
            }
            _ => {}
        }
        table.push((v.clone(), out));
    }
    let outputs: std::collections::HashSet<&Atom> = table.iter().map(|(_, o)| o).collect();
    drop(new);
    // Only where it narrows what value inference sees: the operands taken as independent give
    // more results than the table (`indicator(tokens == "(") - indicator(tokens == ")")` gives
    // -1, 0 and 1 either way, and stays a sum the embedding writes).
    let mut operand_sets: Vec<Vec<Atom>> = vec![];
    for a in args {
        if let Operand::Sop(s) = a {
            let ns = *map.get(s)?;
            f.learn(out, ns);
            match f.new.borrow().0.get(&ns) {
                Some(ValueSet::Finite(set)) => operand_sets.push(set.iter().cloned().collect()),
                _ => return Some(NodeKind::Map { op: MapOp::Lookup(raspc_lang::graph::Table::Exact(table)), args: vec![Operand::Sop(nx)] }),
            }
        }
    }
    let combos = operand_sets.iter().try_fold(1usize, |p, s| p.checked_mul(s.len().max(1))).unwrap_or(usize::MAX);
    if combos <= 1 << 16 {
        let mut independent: std::collections::HashSet<Atom> = std::collections::HashSet::new();
        for k in 0..combos {
            let (mut rest, mut row) = (k, vec![]);
            for set in &operand_sets {
                row.push(set.get(rest % set.len().max(1))?.clone());
                rest /= set.len().max(1);
            }
            let mut row = row.into_iter();
            let full: Vec<Atom> = args
                .iter()
                .map(|a| match a {
                    Operand::Const(c) => Some(c.clone()),
                    Operand::Sop(_) => row.next(),
                })
                .collect::<Option<_>>()?;
            if let Ok(o) = raspc_lang::interp::apply_map(op, &full) {
                independent.insert(o);
            }
            if independent.len() > outputs.len() {
                break;
            }
        }
        if independent.len() <= outputs.len() {
            return None;
        }
    }
    Some(NodeKind::Map { op: MapOp::Lookup(raspc_lang::graph::Table::Exact(table)), args: vec![Operand::Sop(nx)] })
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

/// Most distinct nonzero values a counted sum is split into widths for (one head each): 32, so
/// that signed digits (18 values: the alternating digit sum) are split too (helper w23).
const MAX_WIDTH_TERMS: usize = 32;

/// `aggregate(s, v, d) * f` (either order) with `s` a positional selector and `f` a function of
/// `indices` and `length` equal to `λ·count(i, l)` at every grid pair (i, l), `count` the number
/// of keys `s` selects there: the mean times the count is `λ·Σ v` over the selected keys, which
/// is `Σ_a λ·a·selector_width(s and select(v, a, ==))` over the nonzero values `a` of `v`. Built
/// in `out`; `None` when the pattern does not hold, or when the index-only counted sum of
/// [`crate::numeric`] (a product with positions, cheaper for many values) applies.
fn counted_widths(g: &Graph, id: NodeId, f: &Facts, map: &HashMap<NodeId, NodeId>, out: &mut Graph, span: raspc_lang::Span, inexact: &mut Vec<Atom>) -> Option<NodeKind> {
    let (sets, max_len, tables) = (f.sets, f.max_len, &f.old_tables);
    let NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args } = &g.node(id).kind else { return None };
    let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return None };
    if crate::numeric::counted_sum_by_index(g, id, max_len) {
        return None;
    }
    let facts = f;
    for (m, f) in [(*a, *b), (*b, *a)] {
        let NodeKind::Aggregate { sel, values, default } = &g.node(m).kind else { continue };
        // `f` on the grid: a function of `indices` and `length`, or the width of a positional
        // selector (`aggregate(win, x) * selector_width(win)`, a window's sum: helper w29's
        // `round` of it was refused from max-len 14 over floats no input reaches).
        let positional = crate::positional::is_positional(g, f);
        let width_of = match g.node(f).kind {
            NodeKind::SelectorWidth(s2) if !positional => Some(s2),
            _ => None,
        };
        if !positional && width_of.is_none() {
            continue;
        }
        let Some(ValueSet::Finite(vs)) = sets.get(values) else { continue };
        // Integer values (and λ below): the sum is an integer, which the interpreter's
        // `mean * count` misses by rounding only, so `round` of it agrees exactly.
        if vs.iter().any(|a| !matches!(a, Atom::Int(_) | Atom::Float(_)) || a.as_f64().is_none_or(|x| x.fract() != 0.0)) {
            continue;
        }
        // A selector of the input times its own width: `Σ v` over the selected keys all the
        // same, at any count 0..=max-len (helper w31: the sum of the positions of the `a`s,
        // `round(aggregate(s, indices, 0) * selector_width(s))`, was refused from max-len 16).
        // A head per value against a mean and a product: the plan with it is a candidate
        // (`few_combinations`: the other plan may be smaller, an unrounded sum of positions at
        // max-len 16 is 5.5 k parameters in 2 layers, 43 k in 1 as widths).
        let of_input = crate::positional::grid_counts(g, *sel, max_len).is_none();
        let (counts, pairs) = match crate::positional::grid_counts(g, *sel, max_len) {
            Some(counts) => (counts, crate::positional::grid(max_len)),
            None if width_of == Some(*sel) && !few_combinations(facts, 0) => ((0..=max_len).collect(), vec![]),
            None => continue,
        };
        let fvals: Vec<Option<f64>> = match width_of {
            None => pairs.iter().map(|&(i, l)| crate::positional::eval_at(g, f, i, l).filter(|x| matches!(x, Atom::Int(_) | Atom::Float(_))).and_then(|x| x.as_f64())).collect(),
            Some(s2) if s2 == *sel => counts.iter().map(|&c| Some(c as f64)).collect(),
            Some(s2) => match crate::positional::grid_counts(g, s2, max_len) {
                Some(c2) => c2.into_iter().map(|c| Some(c as f64)).collect(),
                None => continue,
            },
        };
        // The default is read where no key is selected (then it must be a finite number; a
        // selector that always selects a key, like the library's `full_s`, never reads it).
        if counts.contains(&0) && !(matches!(default, Atom::Int(_) | Atom::Float(_)) && default.as_f64().is_some_and(f64::is_finite)) {
            continue;
        }
        let lambda = crate::numeric::count_multiple(fvals.iter().zip(&counts).map(|(&fv, &c)| (fv, c)));
        let Some(lambda) = lambda.filter(|&x| x != 0.0 && x.is_finite() && x.fract() == 0.0) else { continue };
        let mut nonzero: Vec<(f64, Atom)> = vs.iter().filter_map(|a| a.as_f64().filter(|&x| x != 0.0).map(|x| (x, a.clone()))).collect();
        nonzero.sort_by(|x, y| x.0.total_cmp(&y.0));
        nonzero.dedup_by(|x, y| x.0 == y.0);
        if nonzero.is_empty() {
            continue;
        }
        // Past that many values, a mean over every key times a multiple of `length` is one
        // mean head and a product with the length's one-hot (lowering's `positional_product`;
        // helper w25: the sum of widths `mean(hist) * length` was refused from max-len 33).
        if nonzero.len() > MAX_WIDTH_TERMS && !of_input && crate::numeric::counted_sum_parts(g, id, max_len).is_some() {
            // Its selector of every key (however written: `select(length, length, ==)`) is
            // the constant one, as in the widths below: no key group per position, and nothing
            // for `--causal` to refuse (review rv25).
            let constant = matches!(g.node(*sel).kind, NodeKind::Select { keys, queries, .. } if matches!(g.node(keys).kind, NodeKind::Const(_)) && matches!(g.node(queries).kind, NodeKind::Const(_)));
            if constant || !pairs.iter().zip(&counts).all(|(&(_, l), &c)| c as i64 == l) {
                continue;
            }
            let zero = out.add(NodeKind::Const(Atom::Int(0)), span)?;
            let every = out.add(NodeKind::Select { keys: zero, queries: zero, cmp: Cmp::Eq }, span)?;
            let mean = out.add(NodeKind::Aggregate { sel: every, values: map[values], default: default.clone() }, span)?;
            let args = if m == *a { vec![Operand::Sop(mean), Operand::Sop(map[&f])] } else { vec![Operand::Sop(map[&f]), Operand::Sop(mean)] };
            return Some(NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args });
        }
        if nonzero.len() > MAX_WIDTH_TERMS {
            continue;
        }
        // A selector that selects every key at every grid pair (however it is written: `a or
        // not a`, a token equal to itself or another position) is the constant full selector
        // (one key group, not one per token and position).
        let v = map[values];
        let s = if !of_input && pairs.iter().zip(&counts).all(|(&(_, l), &c)| c as i64 == l) {
            let zero = out.add(NodeKind::Const(Atom::Int(0)), span)?;
            out.add(NodeKind::Select { keys: zero, queries: zero, cmp: Cmp::Eq }, span)?
        } else {
            map[sel]
        };
        let mut terms: Vec<(NodeId, f64)> = vec![];
        for (x, atom) in &nonzero {
            let q = out.add(NodeKind::Const(atom.clone()), span)?;
            let pick = out.add(NodeKind::Select { keys: v, queries: q, cmp: Cmp::Eq }, span)?;
            terms.push((out.add(NodeKind::SelectAnd(s, pick), span)?, lambda * x));
        }
        // Where the interpreter's `(Σ/c)·f` is not the exact λ·Σ (c the count, f = λ·c at a grid
        // pair, Σ an integer sum of c values), its value joins the node's values.
        let (vmin, vmax) = nonzero.iter().fold((0.0f64, 0.0f64), |(lo, hi), (x, _)| (lo.min(*x), hi.max(*x)));
        let mut missed = std::collections::BTreeSet::new();
        let mut budget: usize = 1 << 22;
        // A merged or scaled mean: what the interpreter computes for each count and sum.
        let table = tables.get(&m).cloned().flatten().map(|t| by_count(&t));
        for (&fv, &c) in fvals.iter().zip(&counts) {
            let Some(fv) = fv.filter(|_| c > 0) else { continue };
            if let Some(by) = &table {
                for &(sum, x) in by.get(&(c as u32)).into_iter().flatten() {
                    let float = x * fv;
                    if float != lambda * sum as f64 {
                        missed.insert(float.to_bits());
                    }
                }
                continue;
            }
            if !crate::numeric::missed_counts(c as f64, fv, lambda, (vmin, vmax), &mut budget, &mut missed) {
                break;
            }
        }
        inexact.extend(missed.into_iter().map(|b| Atom::Float(f64::from_bits(b))));
        let weight = |k: f64| if k.fract() == 0.0 && k.abs() < 1e15 { Atom::Int(k as i64) } else { Atom::Float(k) };
        // λ·a·width, the width node added unless it is the whole result (which keeps the label).
        let term = |out: &mut Graph, both: NodeId, k: f64, last: bool| -> Option<NodeKind> {
            if k == 1.0 && last {
                return Some(NodeKind::SelectorWidth(both));
            }
            let w = out.add(NodeKind::SelectorWidth(both), span)?;
            Some(if k == 1.0 { out.node(w).kind.clone() } else { NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args: vec![Operand::Sop(w), Operand::Const(weight(k))] } })
        };
        let mut kind = term(out, terms[0].0, terms[0].1, terms.len() == 1)?;
        for &(both, k) in &terms[1..] {
            let acc = out.add(kind, span)?;
            let t = term(out, both, k, false)?;
            let t = out.add(t, span)?;
            kind = NodeKind::Map { op: MapOp::Binary(BinOp::Add), args: vec![Operand::Sop(acc), Operand::Sop(t)] };
        }
        return Some(kind);
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

pub(crate) fn exclusive(g: &Graph, a: NodeId, b: NodeId) -> bool {
    // An `or` is exclusive with what each side is (a three-way tie-break `A or (B and C) or
    // (B and D and E)`, review w24: 308 M parameters as one selector at max-len 16).
    if let NodeKind::SelectOr(a1, a2) = g.node(a).kind {
        return exclusive(g, a1, b) && exclusive(g, a2, b);
    }
    if let NodeKind::SelectOr(b1, b2) = g.node(b).kind {
        return exclusive(g, a, b1) && exclusive(g, a, b2);
    }
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

/// The largest one-hot (combinations of the s-ops one side of an `or` selector's selects
/// compare, keys or queries) a width is still computed with directly, not by
/// inclusion–exclusion.
const MAX_OR_ONE_HOT: usize = 16;

/// The sides of a selector's top-level `or`s (1 for a selector that is no `or`).
fn or_sides(g: &Graph, s: NodeId) -> usize {
    match g.node(s).kind {
        NodeKind::SelectOr(a, b) => or_sides(g, a) + or_sides(g, b),
        _ => 1,
    }
}

/// The combinations of values of the s-ops a selector's selects read on one side (keys or
/// queries, the larger), from the value sets of the new graph.
fn combined_values(g: &Graph, s: NodeId, f: &Facts) -> usize {
    fn operands(g: &Graph, s: NodeId, keys: &mut std::collections::BTreeSet<NodeId>, queries: &mut std::collections::BTreeSet<NodeId>) {
        match &g.node(s).kind {
            NodeKind::Select { keys: k, queries: q, .. } => {
                keys.insert(*k);
                queries.insert(*q);
            }
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                operands(g, *a, keys, queries);
                operands(g, *b, keys, queries);
            }
            NodeKind::SelectNot(a) => operands(g, *a, keys, queries),
            _ => {}
        }
    }
    let (mut keys, mut queries) = Default::default();
    operands(g, s, &mut keys, &mut queries);
    // Selects of positions only are a fixed pattern, one head with no one-hot at all.
    let positional = |x: NodeId| crate::positional::is_positional(g, x);
    if keys.iter().chain(&queries).all(|&x| positional(x)) {
        return 0;
    }
    // Functions of the positions (`indices`, `indices + 1`, `length - indices - 1`) are one
    // source of at most max-len values, not one each (review rv24: a window `i == j or i == j - 1`
    // was split into three widths, 86 k -> 131 k parameters). Likewise maps of one s-op
    // (`tokens < "b"` beside `tokens`: review rv24b) count as that s-op once.
    let source = |mut x: NodeId| {
        while let Some(only) = g.node(x).kind.sole_operand() {
            x = only;
        }
        x
    };
    let product = |xs: &std::collections::BTreeSet<NodeId>| {
        let (pos, other): (Vec<NodeId>, Vec<NodeId>) = xs.iter().partition(|&&x| positional(x));
        let start = if pos.is_empty() { 1 } else { f.max_len.max(1) };
        let sources: std::collections::BTreeSet<NodeId> = other.iter().map(|&x| source(x)).collect();
        // One source is read through its own one-hot, no tuples (review rv24b: `tokens >= ..
        // or (tokens < "m") > ..` split into three widths was twice as large).
        if sources.len() + usize::from(!pos.is_empty()) < 2 {
            return 0;
        }
        sources.iter().fold(start, |p, &x| {
            f.learn(g, x);
            p.saturating_mul(f.size(x))
        })
    };
    product(&keys).max(product(&queries))
}

/// `a and b` with `and` distributed over the `or`s of either side (`(x or y) and b` is `(x and b)
/// or (y and b)`), so that its width splits again.
fn and_of(out: &mut Graph, a: NodeId, b: NodeId, span: raspc_lang::Span) -> Option<NodeId> {
    if let NodeKind::SelectOr(a1, a2) = out.node(a).kind {
        let (x, y) = (and_of(out, a1, b, span)?, and_of(out, a2, b, span)?);
        return out.add(NodeKind::SelectOr(x, y), span);
    }
    if let NodeKind::SelectOr(b1, b2) = out.node(b).kind {
        let (x, y) = (and_of(out, a, b1, span)?, and_of(out, a, b2, span)?);
        return out.add(NodeKind::SelectOr(x, y), span);
    }
    out.add(NodeKind::SelectAnd(a, b), span)
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

fn rewrite(out: &mut Graph, kind: &NodeKind, span: raspc_lang::Span, facts: Option<&Facts>) -> Option<NodeKind> {
    // The width of `select(indices, indices, <=)` (the keys up to the query: a prefix) is
    // `indices + 1` (helper w26: a one-hot of max-len + 1 values, 19.6 M parameters where
    // `indices + 1` gave 2,992 in a prefix sum), a view of `indices` for every reader. (`>=`,
    // `>` and `!=` would be arithmetic on `length`, which costs a layer and, read through a
    // one-hot, up to 11x the parameters: review rv26; `<` and `==`, `indices` and 1, would
    // lose the user's name for the width.)
    if let NodeKind::SelectorWidth(sel) = kind
        && let NodeKind::Select { keys, queries, cmp: Cmp::Le } = out.node(*sel).kind.clone()
        && keys == queries
        && matches!(out.node(keys).kind, NodeKind::Indices)
    {
        return Some(NodeKind::Map { op: MapOp::Binary(BinOp::Add), args: vec![Operand::Sop(keys), Operand::Const(Atom::Int(1))] });
    }
    if let NodeKind::SelectorWidth(sel) = kind
        && let NodeKind::SelectOr(a, b) = out.node(*sel).kind.clone()
        && compares_several(out, *sel)
    {
        let overlap = if exclusive(out, a, b) {
            None
        } else {
            let f = facts.filter(|f| !f.structural)?;
            if f.shared_selectors.borrow().contains(sel) || f.pinned_node.get() || or_sides(out, *sel) > 3 || combined_values(out, *sel, f) <= MAX_OR_ONE_HOT {
                return None;
            }
            Some(and_of(out, a, b, span)?)
        };
        // (Each side split again where it is itself such an `or`.)
        let width = |out: &mut Graph, s: NodeId| {
            let k = NodeKind::SelectorWidth(s);
            let k = rewrite(out, &k, span, facts).unwrap_or(k);
            out.add(k, span)
        };
        let (wa, wb) = (width(out, a)?, width(out, b)?);
        let sum = NodeKind::Map { op: MapOp::Binary(BinOp::Add), args: vec![Operand::Sop(wa), Operand::Sop(wb)] };
        let Some(both) = overlap else { return Some(sum) };
        let wab = width(out, both)?;
        let sum = out.add(sum, span)?;
        return Some(NodeKind::Map { op: MapOp::Binary(BinOp::Sub), args: vec![Operand::Sop(sum), Operand::Sop(wab)] });
    }
    let NodeKind::Map { op: MapOp::Binary(op), args } = kind else { return None };
    if let Some(k) = facts.and_then(|f| scaled_compare(out, f, *op, args, span)) {
        return Some(k);
    }
    if let (BinOp::Div, [Operand::Sop(w1), Operand::Sop(w2)], Some(f)) = (op, args.as_slice(), facts)
        && f.fraction_ok.get()
        && let Some(k) = width_fraction(out, *w1, *w2, f, span)
    {
        return Some(k);
    }
    // `x + x` is `x * 2`, exactly in floating point, and a mean doubled is a mean (below).
    if let (BinOp::Add, [Operand::Sop(a), Operand::Sop(b)]) = (op, args.as_slice())
        && a == b
    {
        let doubled = NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args: vec![Operand::Sop(*a), Operand::Const(Atom::Int(2))] };
        return rewrite(out, &doubled, span, facts).or(Some(doubled));
    }
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
            if s1 != s2 || !integral_values(facts, out, &[v1, v2]) {
                return None;
            }
            let default = atom::binary(*op, &d1, &d2).ok()?;
            if let (Some(f), Operand::Sop(ma), Operand::Sop(mb)) = (facts, a, b) {
                // Untracked, the interpreter's floats of `fa - fb` can be far from the merged
                // mean's S/c: large values cancel to 0.9999999999997726 where S/c·c is 1 (helper
                // g11: `(fa - fb) * (indices + 1) == 1` over values near 1000 compiled on S/c, 640
                // of 1092 inputs wrong). Such a difference (or a sum of means of either sign)
                // then stays a map, which computes it as the interpreter does (or is refused); a
                // sum of means of one sign cannot cancel and is merged untracked as before (a sum
                // of 150 means is one head).
                let table = merged_table(f, out, *ma, *mb, if *op == BinOp::Sub { -1 } else { 1 });
                if table.is_none() && !(*op == BinOp::Add && one_sign(f, out, &[v1, v2])) {
                    return None;
                }
                f.tables.borrow_mut().0 = Some(table.map(Rc::new));
            }
            let values = out.add(NodeKind::Map { op: MapOp::Binary(*op), args: vec![Operand::Sop(v1), Operand::Sop(v2)] }, span)?;
            Some(NodeKind::Aggregate { sel: s1, values, default })
        }
        // Only integer scalings: the interpreter's `mean / 3` or `mean * 0.1` rounds where the
        // scaled mean does not ((3/5)/3 is 0.19999999999999998), and those floats are not
        // tracked; the map over the mean computes them exactly as the interpreter does.
        (BinOp::Mul, [a, Operand::Const(c)]) | (BinOp::Mul, [Operand::Const(c), a]) if numeric(c) && c.as_f64().is_some_and(|k| k.fract() == 0.0 && k.abs() < 1e6) => {
            let (s, v, d) = agg(a)?;
            if !integral_values(facts, out, &[v]) {
                return None;
            }
            let default = atom::binary(*op, &d, c).ok()?;
            // `mean * k` for an integer k: the interpreter scales the mean (0.1 · 3 is
            // 0.30000000000000004 where the mean of 3s gives 0.3). Scaling by a power of two is
            // exact (the rounded S/c times 2^j is the rounded S·2^j/c), so such a mean stays a
            // plain mean of its new values, untracked: a table of every (count, sum) would be
            // refused as too large at max-len 64 and the mean then kept off the integer grid
            // (helper a19: `2 * apos < length` refused at max-len 64).
            let exact = c.as_f64().is_some_and(|k| k != 0.0 && (k.abs() as u64).is_power_of_two());
            if let (Some(f), Some(k), Operand::Sop(m), false) = (facts, c.as_f64(), a, exact) {
                let table = mean_table(f, out, *m).map(|t| t.iter().map(|&(n, sum, x)| (n, sum * k as i64, x * k)).collect::<MeanTable>());
                f.tables.borrow_mut().0 = Some(table.map(Rc::new));
            }
            let values = out.add(NodeKind::Map { op: MapOp::Binary(*op), args: vec![Operand::Sop(v), Operand::Const(c.clone())] }, span)?;
            Some(NodeKind::Aggregate { sel: s, values, default })
        }
        // `mean(s, a) op mean(s, b)` = `mean(s, a - b) op 0` for integer values: over one
        // selected set both means divide by the same count, so the difference of the sums has
        // the comparison's sign (the interpreter's two quotients are at least 1/count apart
        // when they differ, far beyond rounding); with no key selected, the defaults compare
        // as their difference does. One mean and a sign test instead of a map over every pair
        // of fractions (`frac_a > frac_b` at max-len 64: refused, over 8,192 pairs).
        (BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, [a, b]) if facts.is_some() => {
            let ((s1, v1, d1), (s2, v2, d2)) = (agg(a)?, agg(b)?);
            if s1 != s2 || !integral_values(facts, out, &[v1, v2]) || !(matches!(d1, Atom::Int(_)) && matches!(d2, Atom::Int(_))) {
                return None;
            }
            // Only two plain means (one division each, which keeps the order of the sums): a
            // merged or scaled one (`fa + fb`, `3 * fa`) is the interpreter's sum or product of
            // rounded quotients, which can land on either side of an exact tie (0.1 + 0.2 >
            // 0.3); its table of floats stays with its own comparison (helper s: `fa + fb > fc`
            // and `fa * 3 == fb * 2` compiled exactly, and differed from the interpreter).
            // (One whose table is exact, `fa * 2` or `fa + fa`, is a plain mean of its sums.)
            let built = |o: &Operand| matches!(o, Operand::Sop(m) if facts.is_some_and(|f| f.tables.borrow().1.get(m).is_some_and(|t| t.as_ref().is_none_or(|t| t.iter().any(|&(c, sum, v)| v != sum as f64 / f64::from(c))))));
            if built(a) || built(b) {
                return None;
            }
            let default = atom::binary(BinOp::Sub, &d1, &d2).ok()?;
            let values = out.add(NodeKind::Map { op: MapOp::Binary(BinOp::Sub), args: vec![Operand::Sop(v1), Operand::Sop(v2)] }, span)?;
            let merged = out.add(NodeKind::Aggregate { sel: s1, values, default }, span)?;
            Some(NodeKind::Map { op: MapOp::Binary(*op), args: vec![Operand::Sop(merged), Operand::Const(Atom::Int(0))] })
        }
        _ => None,
    }
}

/// `selector_width(s and t) / selector_width(s)`, where t compares the keys with a constant
/// (`select(tokens, "a", ==)`) and s selects at least the query itself (`select(indices,
/// indices, <=)`, whose width is `indices + 1` by then; `select(tokens, tokens, ==)`): the
/// fraction of s's keys t selects, which is the mean over s of t's test as 1.0 or 0.0, one
/// head (the ratio of two widths was a lookup over both: 1,089 units at max-len 32). Also
/// `selector_width(t) / length`, a mean over every key. The interpreter's quotient of the two
/// counts is its mean's sum over the count, the same float; s never selects no key, so the
/// default is never read (0.0: not a value of another type).
fn width_fraction(out: &mut Graph, w1: NodeId, w2: NodeId, f: &Facts, span: raspc_lang::Span) -> Option<NodeKind> {
    let NodeKind::SelectorWidth(a) = out.node(w1).kind else { return None };
    let prefix =
        |out: &Graph, s: NodeId| matches!(out.node(s).kind, NodeKind::Select { keys, queries, cmp: Cmp::Le } if keys == queries && matches!(out.node(keys).kind, NodeKind::Indices));
    let counts = |out: &Graph, s: NodeId| match &out.node(w2).kind {
        NodeKind::SelectorWidth(s2) => *s2 == s,
        NodeKind::Map { op: MapOp::Binary(BinOp::Add), args } => {
            prefix(out, s) && matches!(args.as_slice(), [Operand::Sop(i), Operand::Const(Atom::Int(1))] if matches!(out.node(*i).kind, NodeKind::Indices))
        }
        _ => false,
    };
    let selects_itself = |out: &Graph, s: NodeId| matches!(out.node(s).kind, NodeKind::Select { keys, queries, cmp: Cmp::Eq | Cmp::Le | Cmp::Ge } if keys == queries && crate::positional::self_equal(out, keys));
    let key_test = |out: &Graph, t: NodeId| match out.node(t).kind {
        NodeKind::Select { keys, queries, cmp } => match &out.node(queries).kind {
            NodeKind::Const(c) => Some((keys, c.clone(), cmp)),
            _ => None,
        },
        _ => None,
    };
    let (s, (x, c, cmp)) = match out.node(a).kind {
        NodeKind::SelectAnd(p, q) => {
            [(p, q), (q, p)].into_iter().find_map(|(s, t)| if counts(out, s) && selects_itself(out, s) { key_test(out, t).map(|k| (Some(s), k)) } else { None })?
        }
        _ if matches!(out.node(w2).kind, NodeKind::Length) => (None, key_test(out, a)?),
        _ => return None,
    };
    f.learn(out, x);
    let xs: Vec<Atom> = match f.new.borrow().0.get(&x) {
        Some(ValueSet::Finite(v)) if v.len() <= ONE_SOURCE_VALUES => v.iter().cloned().collect(),
        _ => return None,
    };
    // (A key the comparison rejects, a string against a number: the interpreter's error, left
    // to the widths.)
    let mut table = Vec::with_capacity(xs.len());
    for v in xs {
        let hit = Atom::compare(&v, cmp, &c).ok()?;
        table.push((v, Atom::Float(if hit { 1.0 } else { 0.0 })));
    }
    let values = out.add(NodeKind::Map { op: MapOp::Lookup(raspc_lang::graph::Table::Exact(table)), args: vec![Operand::Sop(x)] }, span)?;
    let sel = match s {
        Some(s) => s,
        None => {
            let zero = out.add(NodeKind::Const(Atom::Int(0)), span)?;
            out.add(NodeKind::Select { keys: zero, queries: zero, cmp: Cmp::Eq }, span)?
        }
    };
    Some(NodeKind::Aggregate { sel, values, default: Atom::Float(0.0) })
}

/// `a op b / c` as `a * c op b` (and `a / c op b` as `a op b * c`) for an integer constant c
/// that is a power of two, where value analysis bounds both sides' numbers (finite, no strings)
/// so that |a·c| and |b| stay within 2^52: dividing and multiplying such numbers by c is then
/// exact in floating point (an integer's division rounds past 2^53, a product of large integers
/// overflows: review rv19), so the comparison is the same on every value, and a mean compared
/// with an integer s-op is what the integer grid rewrites ([`grid_compare`]; helper a19: `apos <
/// length / 2` was refused from max-len 16 while `2 * apos < length` compiled).
fn scaled_compare(out: &mut Graph, f: &Facts, op: BinOp, args: &[Operand], span: raspc_lang::Span) -> Option<NodeKind> {
    const LIMIT: f64 = 4503599627370496.0; // 2^52
    let bounded = |out: &Graph, o: &Operand, scale: f64| -> bool {
        match o {
            Operand::Const(v) => matches!(v, Atom::Int(_) | Atom::Float(_)) && v.as_f64().is_some_and(|x| x.is_finite() && x.abs() * scale <= LIMIT),
            Operand::Sop(id) => {
                f.learn(out, *id);
                f.new.borrow().1.get(id).is_some_and(|iv| iv.lo.is_finite() && iv.hi.is_finite() && iv.lo.abs().max(iv.hi.abs()) * scale <= LIMIT)
            }
        }
    };
    if !matches!(op, BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge) {
        return None;
    }
    let [a, b] = args else { return None };
    // `x / c` with c a power of two: (x, c).
    let halved = |o: &Operand| -> Option<(NodeId, Atom)> {
        let Operand::Sop(id) = o else { return None };
        let NodeKind::Map { op: MapOp::Binary(BinOp::Div), args } = &out.node(*id).kind else { return None };
        let [Operand::Sop(x), Operand::Const(c @ Atom::Int(k))] = args.as_slice() else { return None };
        ((2..=1 << 20).contains(k) && (*k as u64).is_power_of_two()).then(|| (*x, c.clone()))
    };
    let scale = |out: &mut Graph, o: &Operand, c: &Atom| -> Option<Operand> {
        match o {
            Operand::Const(v) if numeric(v) => atom::binary(BinOp::Mul, v, c).ok().map(Operand::Const),
            Operand::Const(_) => None,
            Operand::Sop(s) => Some(Operand::Sop(out.add(NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args: vec![Operand::Sop(*s), Operand::Const(c.clone())] }, span)?)),
        }
    };
    let fits = |out: &Graph, other: &Operand, x: NodeId, c: &Atom| bounded(out, other, c.as_f64().unwrap_or(f64::INFINITY)) && bounded(out, &Operand::Sop(x), 1.0);
    let args = if let Some((x, c)) = halved(b).filter(|(x, c)| fits(out, a, *x, c)) {
        vec![scale(out, a, &c)?, Operand::Sop(x)]
    } else if let Some((x, c)) = halved(a).filter(|(x, c)| fits(out, b, *x, c)) {
        vec![Operand::Sop(x), scale(out, b, &c)?]
    } else {
        return None;
    };
    Some(NodeKind::Map { op: MapOp::Binary(op), args })
}

/// The mean table of the aggregate `m` of the new graph: one a merge or scaling built, or, for a
/// mean of integers, (c, S, S/c) for every count c and sum S its values allow.
fn mean_table(f: &Facts, out: &Graph, m: NodeId) -> Option<Rc<MeanTable>> {
    if let Some(t) = f.tables.borrow().1.get(&m) {
        return t.clone();
    }
    let NodeKind::Aggregate { values, .. } = &out.node(m).kind else { return None };
    f.learn(out, *values);
    let (lo, hi) = match f.new.borrow().0.get(values) {
        Some(ValueSet::Finite(set)) => set.iter().try_fold((0i64, 0i64), |(lo, hi), a| {
            let x = a.as_f64().filter(|x| x.fract() == 0.0 && x.abs() < 1e9)? as i64;
            Some((lo.min(x), hi.max(x)))
        })?,
        _ => return None,
    };
    let mut t = vec![];
    for c in 1..=f.max_len as i64 {
        for sum in lo * c..=hi * c {
            t.push((c as u32, sum, sum as f64 / c as f64));
            if t.len() > MAX_TABLE {
                return None;
            }
        }
    }
    Some(Rc::new(t))
}

/// A mean table's (sum, value) pairs by key count.
fn by_count(t: &MeanTable) -> HashMap<u32, Vec<(i64, f64)>> {
    let mut by: HashMap<u32, Vec<(i64, f64)>> = HashMap::new();
    for &(c, sum, x) in t {
        by.entry(c).or_default().push((sum, x));
    }
    by
}

/// The table of `a + sign·b` (sign ±1) for two means over one selector: per count c, every pair
/// of their sums (`x - y` is `x + (-1)·y` exactly in floating point).
fn merged_table(f: &Facts, out: &Graph, a: NodeId, b: NodeId, sign: i64) -> Option<MeanTable> {
    let (ta, tb) = (mean_table(f, out, a)?, mean_table(f, out, b)?);
    let by_count = by_count(&tb);
    let work: usize = ta.iter().map(|(c, _, _)| by_count.get(c).map_or(0, Vec::len)).sum();
    if work > MAX_TABLE_WORK {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let mut t = vec![];
    for &(c, s1, x1) in ta.iter() {
        for &(s2, x2) in by_count.get(&c).into_iter().flatten() {
            let entry = (c, s1 + sign * s2, x1 + sign as f64 * x2);
            if seen.insert((entry.0, entry.1, entry.2.to_bits())) {
                t.push(entry);
                if t.len() > MAX_TABLE {
                    return None;
                }
            }
        }
    }
    Some(t)
}

/// Whether every value of the s-ops `ids` of the new graph is an integer (or a boolean). A mean
/// of other floats depends on the order the interpreter adds them in (0.4 + 0.2 + 0.3 + 0.1 is
/// 1.0000000000000002), which a merged or scaled mean would not reproduce: such means keep
/// their own heads, whose value sets carry the alternatives (`compile::numeric_map`). Without
/// value analysis (no `facts`), true.
/// Whether the values of every s-op in `ids` are all >= 0, or all <= 0 (a sum of their means
/// then rounds relative to itself, with no cancellation).
fn one_sign(f: &Facts, out: &Graph, ids: &[NodeId]) -> bool {
    let mut signs = ids.iter().map(|&id| {
        f.learn(out, id);
        match f.new.borrow().0.get(&id) {
            Some(ValueSet::Finite(set)) => {
                let xs: Vec<f64> = set.iter().filter_map(Atom::as_f64).collect();
                if xs.len() != set.len() {
                    None
                } else if xs.iter().all(|&x| x >= 0.0) {
                    Some(1)
                } else if xs.iter().all(|&x| x <= 0.0) {
                    Some(-1)
                } else {
                    None
                }
            }
            _ => None,
        }
    });
    let first = signs.next().flatten();
    first.is_some() && signs.all(|s| s == first)
}

fn integral_values(facts: Option<&Facts>, out: &Graph, ids: &[NodeId]) -> bool {
    let Some(f) = facts else { return true };
    ids.iter().all(|&id| {
        f.learn(out, id);
        match f.new.borrow().0.get(&id) {
            Some(ValueSet::Finite(set)) => set.iter().all(|a| integral(a) || matches!(a, Atom::Bool(_))),
            _ => false,
        }
    })
}

// ---- comparisons with means of integers -----------------------------------------------------

/// An integral number atom (not a boolean or a string).
fn integral(a: &Atom) -> bool {
    match a {
        Atom::Int(_) => true,
        Atom::Float(x) => x.fract() == 0.0 && x.abs() < 1e15,
        _ => false,
    }
}

impl Facts<'_> {
    /// Value analysis of `id` in the new graph `out` (and of its ancestors), computed once.
    fn learn(&self, out: &Graph, id: NodeId) {
        if self.new.borrow().0.contains_key(&id) {
            return;
        }
        let (sets, ivs) = infer_with_intervals(out, id, self.vocab, self.max_len);
        let mut new = self.new.borrow_mut();
        new.0.extend(sets);
        new.1.extend(ivs);
    }

    /// Every value of `x` (a node of the new graph) is an integer (and none is a boolean).
    fn int_valued(&self, out: &Graph, x: NodeId) -> bool {
        self.learn(out, x);
        let new = self.new.borrow();
        new.1.get(&x).is_some_and(|iv| iv.int)
            && match new.0.get(&x) {
                Some(ValueSet::Finite(s)) => s.iter().all(|a| matches!(a, Atom::Int(_) | Atom::Float(_))),
                _ => true,
            }
    }

    /// Number of values of `x` (new graph, already analysed); `usize::MAX` when unbounded.
    fn size(&self, x: NodeId) -> usize {
        match self.new.borrow().0.get(&x) {
            Some(ValueSet::Finite(s)) => s.len().max(1),
            _ => usize::MAX,
        }
    }

    /// `x` (new graph) is a mean of integers that need not be an integer ([`mean_grid`]).
    fn grid(&self, out: &Graph, x: NodeId) -> Option<Grid> {
        if !matches!(out.node(x).kind, NodeKind::Aggregate { .. }) {
            return None;
        }
        // A merged or scaled mean is the interpreter's sum or product of rounded quotients: where
        // that misses S/c (`mean(x + 1) - mean(x)` is 0.9999999999999998 at 8/3 - 5/3), or where
        // it was not tracked, its floor is not the staircase of S/c (helper s: `m0 - m1 < 1`
        // compiled as a floor test, false where the interpreter says true).
        match self.tables.borrow().1.get(&x) {
            Some(None) => return None,
            Some(Some(t)) if t.iter().any(|&(c, sum, v)| v != sum as f64 / f64::from(c)) => return None,
            _ => {}
        }
        self.learn(out, x);
        let new = self.new.borrow();
        mean_grid(out, x, &new.0, &new.1, self.max_len)
    }
}

/// `e` is `±u + (integers)` through `+`, `-` and negation, with `u` a mean of integers
/// ([`mean_grid`]) and the other terms integer-valued and independent of `u`: returns `u` (an
/// old id), the sign of `u` in `e`, and the product of the other s-op terms' numbers of values
/// (1 when there are none). Facts are those of the new graph (`map` takes old ids there), so
/// earlier rewrites count.
fn affine_mean(g: &Graph, e: NodeId, f: &Facts, map: &HashMap<NodeId, NodeId>, out: &Graph) -> Option<(NodeId, f64, usize)> {
    if f.grid(out, map[&e]).is_some() {
        return Some((e, 1.0, 1));
    }
    let free = |o: &Operand, u: NodeId| -> Option<usize> {
        match o {
            Operand::Const(c) => integral(c).then_some(1),
            Operand::Sop(s) => (f.int_valued(out, map[s]) && !g.ancestors(*s).contains(&u)).then(|| f.size(map[s])),
        }
    };
    let NodeKind::Map { op, args } = &g.node(e).kind else { return None };
    match (op, args.as_slice()) {
        (MapOp::Neg, [Operand::Sop(a)]) => affine_mean(g, *a, f, map, out).map(|(u, s, o)| (u, -s, o)),
        (MapOp::Pos, [Operand::Sop(a)]) => affine_mean(g, *a, f, map, out),
        (MapOp::Binary(op @ (BinOp::Add | BinOp::Sub)), [x, y]) => {
            if let Operand::Sop(a) = x
                && let Some((u, s, o)) = affine_mean(g, *a, f, map, out)
                && let Some(other) = free(y, u)
            {
                return Some((u, s, o.saturating_mul(other)));
            }
            if let Operand::Sop(b) = y
                && let Some((u, s, o)) = affine_mean(g, *b, f, map, out)
                && let Some(other) = free(x, u)
            {
                return Some((u, if *op == BinOp::Sub { -s } else { s }, o.saturating_mul(other)));
            }
            None
        }
        _ => None,
    }
}

/// `e` (old ids) with the mean `u` replaced by `r` (a new id), built in `out`.
fn substitute(g: &Graph, e: NodeId, u: NodeId, r: NodeId, map: &HashMap<NodeId, NodeId>, out: &mut Graph, span: raspc_lang::Span) -> Option<NodeId> {
    if e == u {
        return Some(r);
    }
    let NodeKind::Map { op, args } = &g.node(e).kind else { return None };
    let mut new_args = vec![];
    for a in args {
        new_args.push(match a {
            Operand::Const(c) => Operand::Const(c.clone()),
            Operand::Sop(s) if *s == u || g.ancestors(*s).contains(&u) => Operand::Sop(substitute(g, *s, u, r, map, out, span)?),
            Operand::Sop(s) => Operand::Sop(map[s]),
        });
    }
    out.add(NodeKind::Map { op: op.clone(), args: new_args }, span)
}

/// `floor(u)`, `ceil(u)` and `u == floor(u)` of a mean `u` (new id) whose values lie in
/// `[lo, hi]`, from `int` (which truncates): `floor(u) = int(u + L) - L` with `u + L >= 0`,
/// `ceil(u) = H - int(H - u)` with `H - u >= 0`.
fn floor_ceil_isint(u: NodeId, lo: f64, hi: f64, out: &mut Graph, span: raspc_lang::Span) -> Option<(NodeId, NodeId, NodeId)> {
    let int = |out: &mut Graph, x: NodeId| out.add(NodeKind::Map { op: MapOp::Convert(raspc_lang::graph::Convert::Int), args: vec![Operand::Sop(x)] }, span);
    let bin = |out: &mut Graph, op: BinOp, a: Operand, b: Operand| out.add(NodeKind::Map { op: MapOp::Binary(op), args: vec![a, b] }, span);
    let l = -(lo.floor() as i64);
    let floor = if l <= 0 {
        int(out, u)?
    } else {
        let shifted = bin(out, BinOp::Add, Operand::Sop(u), Operand::Const(Atom::Int(l)))?;
        let t = int(out, shifted)?;
        bin(out, BinOp::Sub, Operand::Sop(t), Operand::Const(Atom::Int(l)))?
    };
    let h = hi.ceil() as i64;
    let rest = bin(out, BinOp::Sub, Operand::Const(Atom::Int(h)), Operand::Sop(u))?;
    let t = int(out, rest)?;
    let ceil = bin(out, BinOp::Sub, Operand::Const(Atom::Int(h)), Operand::Sop(t))?;
    // `u == round(u)` (not `u == floor`: a map of `u` alone, whatever else reads `floor`).
    let rounded = out.add(NodeKind::Map { op: MapOp::Round, args: vec![Operand::Sop(u)] }, span)?;
    let isint = bin(out, BinOp::Eq, Operand::Sop(u), Operand::Sop(rounded))?;
    Some((floor, ceil, isint))
}

/// The comparison `X op E` seen from the integer side X: the mirror of `E op X`.
fn mirror(c: Cmp) -> Cmp {
    match c {
        Cmp::Lt => Cmp::Gt,
        Cmp::Gt => Cmp::Lt,
        Cmp::Le => Cmp::Ge,
        Cmp::Ge => Cmp::Le,
        c => c,
    }
}

/// Few enough combinations for one MLP to enumerate: the rewrite is left out of this pass, and
/// `grid_skipped` says so, so that `compile` also plans the program with it (`every_grid`) and
/// keeps the smaller plan (helper w22: `prefix_mean > overall_mean` over `ab` at max-len 16
/// enumerated 267,666 parameters in 3 layers; its difference is 3,125 in 1).
fn few_combinations(f: &Facts, combos: usize) -> bool {
    if combos > crate::lower::MAX_COMBINATIONS || f.every_grid {
        return false;
    }
    f.grid_skipped.set(true);
    true
}

/// A comparison `a op b` (a node kind of the new graph) of two integer-valued s-ops whose value
/// combinations are too many for one MLP ([`crate::lower::MAX_COMBINATIONS`]) while their difference takes few values,
/// rewritten as `(a - b) op 0`: the difference is a sum the heads and MLPs add for free, and the
/// comparison a staircase over its range. For integers (exact in f64 below 2^50) `a - b op 0`
/// holds exactly when `a op b` does. (`m > indices` at max-len 100: 10,000 combinations, 199
/// differences.) Also two means over different selectors (below).
fn difference_compare(kind: &NodeKind, f: &Facts, out: &mut Graph, span: raspc_lang::Span) -> Option<NodeKind> {
    let NodeKind::Map { op: MapOp::Binary(cmp @ (BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)), args } = kind else { return None };
    let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return None };
    let (a, b) = (*a, *b);
    let range = |x: NodeId| -> Option<(f64, f64)> {
        if !f.int_valued(out, x) {
            return None;
        }
        let new = f.new.borrow();
        let Some(ValueSet::Finite(s)) = new.0.get(&x) else { return None };
        let v: Vec<f64> = s.iter().map(|a| a.as_f64()).collect::<Option<_>>()?;
        let (lo, hi) = (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        (lo.is_finite() && hi.is_finite() && lo.abs().max(hi.abs()) < (1u64 << 50) as f64).then_some((lo, hi))
    };
    match (range(a), range(b)) {
        (Some((alo, ahi)), Some((blo, bhi))) => {
            let combos = f.size(a).saturating_mul(f.size(b));
            let differences = (ahi - blo) - (alo - bhi) + 1.0;
            if differences > crate::infer::MAX_VALUES as f64 || few_combinations(f, combos) {
                return None;
            }
        }
        // Two numbers, at least one not known to be an integer (two means over different
        // selectors, a mean against `length`): for floats x op y exactly when x - y op 0
        // (subtraction rounds to 0 only for equal numbers, and keeps the sign; both within 2^50,
        // integers subtract exactly too), and a difference compared with a constant is a
        // staircase stepping only next to it (`lower::threshold_points`). (Helper a20:
        // `prefix_mean >= overall` over digits was refused from max-len 8, more than 8192
        // combinations.)
        _ => {
            let sel = |x: NodeId| match &out.node(x).kind {
                NodeKind::Aggregate { sel, default: Atom::Int(_) | Atom::Float(_), .. } => Some(*sel),
                _ => None,
            };
            let bounded = |x: NodeId| {
                f.learn(out, x);
                f.new.borrow().1.get(&x).is_some_and(|iv| iv.lo.is_finite() && iv.hi.is_finite() && iv.lo.abs().max(iv.hi.abs()) < (1u64 << 50) as f64)
            };
            // (Two means over one selector merge into one mean instead: `rewrite`. Any other
            // pair of bounded numbers too, review w24: `2 * sep_pos + 1 == length`, a mean of
            // indices against the length, was refused at max-len 64 while its difference
            // compared with 0 compiled.)
            if matches!((sel(a), sel(b)), (Some(x), Some(y)) if x == y) || !bounded(a) || !bounded(b) || few_combinations(f, f.size(a).saturating_mul(f.size(b))) {
                return None;
            }
        }
    }
    let diff = out.add(NodeKind::Map { op: MapOp::Binary(BinOp::Sub), args: vec![Operand::Sop(a), Operand::Sop(b)] }, span)?;
    Some(NodeKind::Map { op: MapOp::Binary(*cmp), args: vec![Operand::Sop(diff), Operand::Const(Atom::Int(0))] })
}

/// A comparison of an integer-valued `X` with `E = ±u + P` (`u` a mean of integers, `P`
/// integer-valued; see [`affine_mean`]), in a map (`X > E`) or a select, rewritten into
/// comparisons of integers (docs/compiler.md): for integers X and real E,
/// `X < E ⇔ X < ceil(E)`, `X <= E ⇔ X <= floor(E)` (and mirrored), `X == E ⇔ isint(u) and
/// X == floor(E)`, `X != E ⇔ not isint(u) or X != floor(E)`; `floor(±u + P)` is `P ± floor(u)`
/// or `P ± ceil(u)`. `floor(u)` takes at most max-len + 1 values and is an exact staircase of
/// `u` (a value below an integer m is at most m - 1/max-len), so neither side needs `u`'s
/// values enumerated. Done when lowering would otherwise enumerate more than
/// [`crate::lower::MAX_COMBINATIONS`] combinations of `u`'s values with the other s-ops the
/// comparison reads (or `u` has too many values to enumerate at all); below that, one MLP over
/// the combinations is as small and one layer shallower.
fn grid_compare(g: &Graph, id: NodeId, f: &Facts, map: &HashMap<NodeId, NodeId>, out: &mut Graph, span: raspc_lang::Span) -> Option<NodeKind> {
    // (X, E, op of `X op E`, E is the second operand / the query side).
    let (pairs, cmp_of): (Vec<(Operand, NodeId, Cmp, bool)>, Cmp) = match &g.node(id).kind {
        NodeKind::Map { op: MapOp::Binary(b @ (BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)), args } => {
            let c = match b {
                BinOp::Eq => Cmp::Eq,
                BinOp::Lt => Cmp::Lt,
                BinOp::Le => Cmp::Le,
                BinOp::Gt => Cmp::Gt,
                _ => Cmp::Ge,
            };
            let [a, b] = args.as_slice() else { return None };
            let mut v = vec![];
            if let Operand::Sop(e) = b {
                v.push((a.clone(), *e, c, true));
            }
            if let Operand::Sop(e) = a {
                v.push((b.clone(), *e, mirror(c), false));
            }
            (v, c)
        }
        NodeKind::Select { keys, queries, cmp } => (vec![(Operand::Sop(*keys), *queries, *cmp, true), (Operand::Sop(*queries), *keys, mirror(*cmp), false)], *cmp),
        _ => return None,
    };
    let is_select = matches!(g.node(id).kind, NodeKind::Select { .. });
    for (x, e, op, e_second) in pairs {
        let Some((u, sign, others)) = affine_mean(g, e, f, map, out) else { continue };
        let x_ok = match &x {
            Operand::Const(c) => integral(c),
            Operand::Sop(s) => f.int_valued(out, map[s]) && !g.ancestors(*s).contains(&u),
        };
        let grid = f.grid(out, map[&u])?;
        // What lowering would enumerate instead: E's values over u's and the other terms'
        // (a select reads E on its own side), times X's for a map.
        let x_size = match &x {
            Operand::Sop(s) if !is_select => f.size(map[s]),
            _ => 1,
        };
        let combos = f.size(map[&u]).saturating_mul(others).saturating_mul(x_size);
        if !x_ok {
            continue;
        }
        if combos <= crate::lower::MAX_COMBINATIONS && !f.every_grid {
            f.grid_skipped.set(true);
            continue;
        }
        let (floor_u, ceil_u, isint) = floor_ceil_isint(map[&u], grid.lo, grid.hi, out, span)?;
        let (floor_e, ceil_e) = if sign > 0.0 { (floor_u, ceil_u) } else { (ceil_u, floor_u) };
        let replaced = match op {
            Cmp::Lt | Cmp::Ge => ceil_e,
            _ => floor_e,
        };
        let e_new = substitute(g, e, u, replaced, map, out, span)?;
        let x_new = match &x {
            Operand::Const(c) => Operand::Const(c.clone()),
            Operand::Sop(s) => Operand::Sop(map[s]),
        };
        if !is_select {
            let ordered = if e_second { vec![x_new, Operand::Sop(e_new)] } else { vec![Operand::Sop(e_new), x_new] };
            let NodeKind::Map { op: m, .. } = &g.node(id).kind else { return None };
            let cmp_node = NodeKind::Map { op: m.clone(), args: ordered };
            if op != Cmp::Eq {
                return Some(cmp_node);
            }
            // (The comparison added here is no node being rebuilt: it gets `difference_compare`
            // itself, review w24: `2 * sep_pos + 1 == length` at max-len 64 compared 8,256
            // combinations of `floor(E)` and `length`.)
            let cmp_node = difference_compare(&cmp_node, f, out, span).unwrap_or(cmp_node);
            let eq = out.add(cmp_node, span)?;
            return Some(NodeKind::Map { op: MapOp::Binary(BinOp::And), args: vec![Operand::Sop(isint), Operand::Sop(eq)] });
        }
        let Operand::Sop(x_new) = x_new else { return None };
        let (keys, queries) = if e_second { (x_new, e_new) } else { (e_new, x_new) };
        let main = NodeKind::Select { keys, queries, cmp: cmp_of };
        // `isint(u)` on E's side, compared with a constant on X's.
        let cond = |out: &mut Graph, want: bool| -> Option<NodeId> {
            let c = out.add(NodeKind::Const(Atom::Bool(want)), span)?;
            let (k, q) = if e_second { (c, isint) } else { (isint, c) };
            out.add(NodeKind::Select { keys: k, queries: q, cmp: Cmp::Eq }, span)
        };
        return match op {
            Cmp::Eq => {
                let m = out.add(main, span)?;
                let c = cond(out, true)?;
                Some(NodeKind::SelectAnd(m, c))
            }
            Cmp::Ne => {
                let m = out.add(main, span)?;
                let c = cond(out, false)?;
                Some(NodeKind::SelectOr(m, c))
            }
            _ => Some(main),
        };
    }
    None
}
