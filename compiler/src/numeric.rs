//! Numeric value analysis beside the finite value sets of [`crate::infer`]: an interval per
//! numerical s-op, with the fact "every value is an integer", and two facts about selectors.
//!
//! * **Intervals.** Finite sets give their hull; means give the hull of their values and
//!   default; `+ - *` by constants or of two s-ops, `-x`, `round` use interval arithmetic.
//!   An s-op whose set is too large to enumerate but is known to hold integers in a range of at
//!   most [`crate::infer::MAX_VALUES`] gets that range as its finite set (sums of counts).
//! * **Counted sums.** `aggregate(s, v, d) * f(indices)` where `s` compares functions of
//!   `indices`, selects only keys at or before the query, and selects exactly `f(i)/λ` keys at
//!   query `i` (for a constant λ, whatever the length) is `λ·Σ v` over the selected keys: the
//!   counting idiom `aggregate(select(indices, indices, <=), v) * (indices + 1)`. Its values are
//!   integers when `v`'s and λ are.
//! * **Uniform s-ops and single keys.** An s-op is *uniform* when it has the same value at every
//!   position of an input (constants, `length`, aggregates and widths whose selector's queries are
//!   uniform, maps of uniform s-ops). `select(F(indices, u..), q, ==)` with `F` injective in
//!   `indices` for every value of the uniform `u..` selects at most one key (the reference's
//!   `select(indices + length - plus, indices, ==)`).

use crate::infer::{AtomSet, ValueSet, MAX_VALUES};
use raspc_lang::ast::{BinOp, Cmp};
use raspc_lang::graph::{MapOp, Operand};
use raspc_lang::interp::apply_map;
use raspc_lang::{Atom, Graph, NodeId, NodeKind};
use std::collections::HashMap;

/// The type of the atoms the interpreter produces for a numerical s-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Int,
    Float,
    Mixed,
}

/// An interval holding every value of an s-op; `int`: every value is an integer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iv {
    pub lo: f64,
    pub hi: f64,
    pub int: bool,
    pub ty: Ty,
}

impl Iv {
    fn join_ty(a: Ty, b: Ty) -> Ty {
        match (a, b) {
            (Ty::Int, Ty::Int) => Ty::Int,
            (Ty::Float, Ty::Float) | (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Ty::Float,
            _ => Ty::Mixed,
        }
    }
    fn finite(&self) -> bool {
        self.lo.is_finite() && self.hi.is_finite()
    }
}

/// The hull of a finite set of numbers (None when it holds strings or nothing).
pub fn of_set(s: &AtomSet) -> Option<Iv> {
    let (mut lo, mut hi, mut int) = (f64::INFINITY, f64::NEG_INFINITY, true);
    let (mut ints, mut floats) = (false, false);
    for a in s.iter() {
        if a.is_str() {
            return None;
        }
        let x = a.as_f64()?;
        lo = lo.min(x);
        hi = hi.max(x);
        int &= x.fract() == 0.0;
        match a {
            Atom::Float(_) => floats = true,
            _ => ints = true,
        }
    }
    if s.is_empty() {
        return None;
    }
    let ty = match (ints, floats) {
        (true, false) => Ty::Int,
        (false, true) => Ty::Float,
        _ => Ty::Mixed,
    };
    Some(Iv { lo, hi, int, ty })
}

fn const_iv(a: &Atom) -> Option<Iv> {
    let mut s = AtomSet::default();
    s.insert(a.clone());
    of_set(&s)
}

fn operand_iv(o: &Operand, ivs: &HashMap<NodeId, Iv>) -> Option<Iv> {
    match o {
        Operand::Const(c) => const_iv(c),
        Operand::Sop(s) => ivs.get(s).copied(),
    }
}

/// Interval of `id`, given its value set and its operands' intervals.
pub fn interval(g: &Graph, id: NodeId, set: &ValueSet, ivs: &HashMap<NodeId, Iv>, max_len: usize) -> Option<Iv> {
    if let Some(iv) = counted_sum(g, id, set, ivs, max_len) {
        return Some(iv);
    }
    if let ValueSet::Finite(s) = set {
        return of_set(s);
    }
    match &g.node(id).kind {
        NodeKind::Aggregate { values, default, .. } => {
            let (v, d) = (ivs.get(values)?, const_iv(default)?);
            Some(Iv { lo: v.lo.min(d.lo), hi: v.hi.max(d.hi), int: false, ty: Ty::Mixed })
        }
        NodeKind::Map { op, args } => {
            let iv = map_iv(op, args, ivs);
            // A sum of weighted widths of disjoint parts of one selector (what a counted sum
            // becomes in simplify's `counted_widths`) counts each key once: at most max-len
            // keys, however many terms (helper w25: `round(mean(hist) * length)` was refused at
            // max-len 24, its terms' 24^k combinations taken as possible).
            match (iv, width_sum_iv(g, id, max_len)) {
                (Some(a), Some(b)) => Some(Iv { lo: a.lo.max(b.lo), hi: a.hi.min(b.hi), int: a.int || b.int, ty: a.ty }),
                (a, b) => a.or(b),
            }
        }
        _ => None,
    }
}

/// `Σ_j k_j · selector_width(s and select(v, a_j, ==))` over distinct constants `a_j` (one `s`
/// and one `v`): the parts select disjoint keys, so at most max-len of them in all, and the sum
/// lies between max-len times the smallest (or 0) and max-len times the largest weight (or 0).
fn width_sum_iv(g: &Graph, id: NodeId, max_len: usize) -> Option<Iv> {
    fn terms(g: &Graph, id: NodeId, k: f64, out: &mut Vec<(f64, NodeId)>) -> Option<()> {
        match &g.node(id).kind {
            NodeKind::Map { op: MapOp::Binary(BinOp::Add), args } => {
                for a in args {
                    let Operand::Sop(x) = a else { return None };
                    terms(g, *x, k, out)?;
                }
                Some(())
            }
            NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args } => match args.as_slice() {
                [Operand::Sop(x), Operand::Const(c)] | [Operand::Const(c), Operand::Sop(x)] if !c.is_str() && !matches!(c, Atom::Bool(_)) => terms(g, *x, k * c.as_f64()?, out),
                _ => None,
            },
            NodeKind::SelectorWidth(sel) => {
                out.push((k, *sel));
                Some(())
            }
            _ => None,
        }
    }
    if !matches!(g.node(id).kind, NodeKind::Map { op: MapOp::Binary(BinOp::Add), .. }) {
        return None;
    }
    let mut ts = vec![];
    terms(g, id, 1.0, &mut ts)?;
    let mut shared: Option<(NodeId, NodeId)> = None;
    let mut picked: Vec<Atom> = vec![];
    for &(_, sel) in &ts {
        let NodeKind::SelectAnd(s, pick) = g.node(sel).kind else { return None };
        let NodeKind::Select { keys: v, queries: q, cmp: Cmp::Eq } = g.node(pick).kind else { return None };
        let NodeKind::Const(a) = &g.node(q).kind else { return None };
        // (Disjoint: no key equals two constants Python tells apart; 1, 1.0 and True are one.)
        if shared.get_or_insert((s, v)) != &(s, v) || picked.iter().any(|b| b.key() == a.key()) {
            return None;
        }
        picked.push(a.clone());
    }
    let n = max_len as f64;
    let lo = ts.iter().map(|t| t.0).fold(0.0f64, f64::min) * n;
    let hi = ts.iter().map(|t| t.0).fold(0.0f64, f64::max) * n;
    let int = ts.iter().all(|t| t.0.fract() == 0.0);
    (lo.is_finite() && hi.is_finite()).then_some(Iv { lo, hi, int, ty: if int { Ty::Int } else { Ty::Mixed } })
}

fn map_iv(op: &MapOp, args: &[Operand], ivs: &HashMap<NodeId, Iv>) -> Option<Iv> {
    let a = operand_iv(args.first()?, ivs)?;
    let iv = match op {
        MapOp::Neg => Iv { lo: -a.hi, hi: -a.lo, ..a },
        MapOp::Pos => a,
        MapOp::Round => Iv { lo: a.lo.round(), hi: a.hi.round(), int: true, ty: Ty::Int },
        // `int(x)` truncates towards zero.
        MapOp::Convert(raspc_lang::graph::Convert::Int) => Iv { lo: a.lo.trunc(), hi: a.hi.trunc(), int: true, ty: Ty::Int },
        MapOp::Binary(op) => {
            let b = operand_iv(args.get(1)?, ivs)?;
            let ty = Iv::join_ty(a.ty, b.ty);
            match op {
                BinOp::Add => Iv { lo: a.lo + b.lo, hi: a.hi + b.hi, int: a.int && b.int, ty },
                BinOp::Sub => Iv { lo: a.lo - b.hi, hi: a.hi - b.lo, int: a.int && b.int, ty },
                BinOp::Mul => {
                    let p = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi];
                    let lo = p.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    Iv { lo, hi, int: a.int && b.int, ty }
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    (iv.finite() && !iv.lo.is_nan()).then_some(iv)
}

/// The integers of an interval as a finite set of atoms of its type (None when not integer or
/// too many).
pub fn int_set(iv: &Iv) -> Option<ValueSet> {
    if !iv.int || !iv.finite() || iv.hi - iv.lo + 1.0 > MAX_VALUES as f64 {
        return None;
    }
    let mut s = AtomSet::default();
    let (lo, hi) = (iv.lo.ceil() as i64, iv.hi.floor() as i64);
    for k in lo..=hi {
        if iv.ty != Ty::Float {
            s.insert(Atom::Int(k));
        }
        if iv.ty != Ty::Int {
            s.insert(Atom::Float(k as f64));
        }
        if s.len() > MAX_VALUES {
            return None;
        }
    }
    Some(ValueSet::Finite(s))
}

// ---- counted sums -------------------------------------------------------------------------

/// Value of a function of `indices` at index `i` (None: not such a function, or it fails).
fn index_value(g: &Graph, x: NodeId, i: i64) -> Option<Atom> {
    eval_with(g, x, i, &HashMap::new())
}

fn is_index_function(g: &Graph, x: NodeId) -> bool {
    match &g.node(x).kind {
        NodeKind::Indices | NodeKind::Const(_) => true,
        NodeKind::Map { args, .. } => args.iter().all(|a| match a {
            Operand::Const(_) => true,
            Operand::Sop(s) => is_index_function(g, *s),
        }),
        _ => false,
    }
}

/// Does a selector built from selects of functions of `indices` select key `k` for query `q`?
/// None when it is not such a selector.
fn positional_selects(g: &Graph, sel: NodeId, k: i64, q: i64) -> Option<bool> {
    Some(match &g.node(sel).kind {
        NodeKind::Select { keys, queries, cmp } => {
            if !is_index_function(g, *keys) || !is_index_function(g, *queries) {
                return None;
            }
            match (index_value(g, *keys, k), index_value(g, *queries, q)) {
                (Some(a), Some(b)) => Atom::compare(&a, *cmp, &b).unwrap_or(false),
                _ => false,
            }
        }
        NodeKind::SelectAnd(a, b) => positional_selects(g, *a, k, q)? && positional_selects(g, *b, k, q)?,
        NodeKind::SelectOr(a, b) => positional_selects(g, *a, k, q)? || positional_selects(g, *b, k, q)?,
        NodeKind::SelectNot(a) => !positional_selects(g, *a, k, q)?,
        _ => return None,
    })
}

/// Number of keys a positional, backward-looking selector selects at each query 0..max_len
/// (then independent of the length); None otherwise.
pub fn backward_counts(g: &Graph, sel: NodeId, max_len: usize) -> Option<Vec<usize>> {
    let n = max_len as i64;
    let mut counts = vec![];
    for q in 0..n {
        let mut c = 0;
        for k in 0..n {
            if positional_selects(g, sel, k, q)? {
                if k > q {
                    return None;
                }
                c += 1;
            }
        }
        counts.push(c);
    }
    Some(counts)
}

/// True when `x` is a function of `length` (and constants) that reads `length`.
fn is_length_function(g: &Graph, x: NodeId) -> bool {
    fn go(g: &Graph, x: NodeId, reads: &mut bool) -> bool {
        match &g.node(x).kind {
            NodeKind::Length => {
                *reads = true;
                true
            }
            NodeKind::Const(_) => true,
            NodeKind::Map { args, .. } => args.iter().all(|a| match a {
                Operand::Const(_) => true,
                Operand::Sop(s) => go(g, *s, reads),
            }),
            _ => false,
        }
    }
    let mut reads = false;
    go(g, x, &mut reads) && reads
}

/// Longest max-len at which [`situations`] checks that a selector selects every key (a check
/// of every key at every query and length).
const EVERY_KEY_CHECK_MAX_LEN: usize = 256;

/// What a counted sum counts in each situation a query can be in: the number of keys `sel`
/// selects and f's value. At each query index for a backward positional selector and f a
/// function of `indices`; at each length for a selector of every key and f a function of
/// `length` (the mean over the whole input times a multiple of its length: helper w25, the
/// sum of widths `mean(hist) * length`). None otherwise.
fn situations(g: &Graph, sel: NodeId, f: NodeId, max_len: usize) -> Option<Vec<(usize, Option<Atom>)>> {
    if is_index_function(g, f) {
        let counts = backward_counts(g, sel, max_len)?;
        return Some(counts.into_iter().enumerate().map(|(i, c)| (c, index_value(g, f, i as i64))).collect());
    }
    if !is_length_function(g, f) || max_len > EVERY_KEY_CHECK_MAX_LEN || !selects_every_key(g, sel, max_len) {
        return None;
    }
    Some((1..=max_len as i64).map(|l| (l as usize, crate::positional::eval_at(g, f, 0, l))).collect())
}

thread_local! {
    /// [`selects_every_key`]'s answers by the selector's text and max-len (review rv25: asked
    /// again and again, the check took 50 s at max-len 256).
    static EVERY_KEY: std::cell::RefCell<HashMap<(String, usize), bool>> = std::cell::RefCell::new(HashMap::new());
}

/// Does `sel` select every key at every query and length up to max-len (checked at each)?
fn selects_every_key(g: &Graph, sel: NodeId, max_len: usize) -> bool {
    // The selector's whole expression is the key: what it selects depends on nothing else.
    fn text(g: &Graph, x: NodeId, out: &mut String, budget: &mut usize) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let kind = &g.node(x).kind;
        out.push_str(&format!("{:?}(", std::mem::discriminant(kind)));
        match kind {
            NodeKind::Const(a) => out.push_str(&format!("{a:?}")),
            NodeKind::Select { cmp, .. } => out.push_str(&format!("{cmp:?}")),
            NodeKind::Aggregate { default, .. } | NodeKind::AggregateMax { default, .. } => out.push_str(&format!("{default:?}")),
            _ => {}
        }
        // A map's operands in their order, constants in place (`x - 1` is not `1 - x`).
        if let NodeKind::Map { op, args } = kind {
            out.push_str(&format!("{op:?}"));
            for a in args {
                out.push(',');
                match a {
                    Operand::Const(c) => out.push_str(&format!("{c:?}")),
                    Operand::Sop(o) => {
                        if !text(g, *o, out, budget) {
                            return false;
                        }
                    }
                }
            }
        } else {
            for o in kind.operands() {
                out.push(',');
                if !text(g, o, out, budget) {
                    return false;
                }
            }
        }
        out.push(')');
        true
    }
    let mut key = String::new();
    let cached = text(g, sel, &mut key, &mut 256);
    if cached && let Some(b) = EVERY_KEY.with(|m| m.borrow().get(&(key.clone(), max_len)).copied()) {
        return b;
    }
    let every = crate::positional::grid(max_len).into_iter().all(|(q, l)| (0..l).all(|k| crate::positional::selects_at(g, sel, k, q, l) == Some(true)));
    if cached {
        EVERY_KEY.with(|m| m.borrow_mut().insert((key, max_len), every));
    }
    every
}

/// A number that is not a string.
fn num(a: Option<Atom>) -> Option<f64> {
    a.and_then(|x| if x.is_str() { None } else { x.as_f64() })
}

/// The parts of a counted sum `aggregate(sel, values, default) * f`: (sel, values, λ) with f =
/// λ·count in every [`situations`] (f of `indices` under a backward positional selector, or of
/// `length` under a selector of every key).
pub fn counted_sum_parts(g: &Graph, id: NodeId, max_len: usize) -> Option<(NodeId, NodeId, f64)> {
    let NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args } = &g.node(id).kind else { return None };
    let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return None };
    for (m, f) in [(*a, *b), (*b, *a)] {
        let NodeKind::Aggregate { sel, values, default } = &g.node(m).kind else { continue };
        if default.is_str() {
            continue;
        }
        let Some(sits) = situations(g, *sel, f, max_len) else { continue };
        if let Some(lambda) = count_multiple(sits.into_iter().map(|(c, fv)| (num(fv), c))) {
            return Some((*sel, *values, lambda));
        }
    }
    None
}

/// [`counted_sum_parts`] where `id`'s value set is taken as a counted sum's: always for a
/// factor of `indices`; for a whole-input mean times `length` only where its values (`set`,
/// enumerated) cannot be listed, since the list holds the interpreter's own floats, which a
/// reader may need apart (review rv25b: a half-integer rounded, booleans beside integers).
pub fn counted_sum_here(g: &Graph, id: NodeId, set: &ValueSet, max_len: usize) -> Option<(NodeId, NodeId, f64)> {
    counted_sum_parts(g, id, max_len).filter(|_| *set == ValueSet::Unbounded || index_factor(g, id))
}

/// True when the map `id` has an operand, not an aggregate, that is a function of `indices`.
fn index_factor(g: &Graph, id: NodeId) -> bool {
    let NodeKind::Map { args, .. } = &g.node(id).kind else { return false };
    args.iter().any(|a| matches!(a, Operand::Sop(x) if !matches!(g.node(*x).kind, NodeKind::Aggregate { .. }) && is_index_function(g, *x)))
}

/// A counted sum ([`counted_sum_parts`]) whose factor is a function of `indices` (the form
/// lowered as a product with positions).
pub fn counted_sum_by_index(g: &Graph, id: NodeId, max_len: usize) -> bool {
    index_factor(g, id) && counted_sum_parts(g, id, max_len).is_some()
}

/// The floats the interpreter computes for a counted sum `aggregate(sel, v) * f(indices)` where
/// they are not the exact λ·Σv (`(Σ/c)·f` with Σ an integer sum of c values: 15/22·22 is
/// 14.999999999999998): they belong to its value set beside the integers, so that a map telling
/// them apart is refused (`compile::numeric_map`). `parts` are [`counted_sum_parts`]'s, `values`
/// the values v takes; empty unless they are integers.
pub fn counted_sum_floats(g: &Graph, id: NodeId, max_len: usize, (sel, _, lambda): (NodeId, NodeId, f64), values: &[Atom]) -> Vec<Atom> {
    let NodeKind::Map { args, .. } = &g.node(id).kind else { return vec![] };
    let Some(f) = args.iter().find_map(|a| match a {
        Operand::Sop(x) if !matches!(g.node(*x).kind, NodeKind::Aggregate { .. }) => Some(*x),
        _ => None,
    }) else {
        return vec![];
    };
    let Some(nums) = values.iter().map(|a| a.as_f64().filter(|x| x.fract() == 0.0 && !a.is_str())).collect::<Option<Vec<f64>>>() else { return vec![] };
    let (vmin, vmax) = nums.iter().fold((0.0f64, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let Some(sits) = situations(g, sel, f, max_len) else { return vec![] };
    let mut out = std::collections::BTreeSet::new();
    let mut budget: usize = 1 << 22;
    for (c, fv) in sits {
        let Some(fv) = num(fv) else { continue };
        if c == 0 {
            continue;
        }
        if !missed_counts(c as f64, fv, lambda, (vmin, vmax), &mut budget, &mut out) {
            break;
        }
    }
    out.into_iter().map(|b| Atom::Float(f64::from_bits(b))).collect()
}

/// A counted sum `mean * f` ([`counted_sum_parts`]) whose mean may also be one of `extra` (the
/// floats the interpreter computes for a merged mean, `fa - fb`, where they miss S/c): every
/// product `x * f(i)` that is not an integer, over the positions i where x can occur (a
/// superset of what occurs). When the mean's values (`values`) are all integers, its every
/// float at a position with c keys is S/c up to rounding for an integer S, so x is paired only
/// with the positions whose count c makes x·c an integer up to 1e-9 relative (a float of the
/// mean at 6 keys, -1/6, is not the mean at 3 keys: `(fa - fb) * (indices + 1)` never computes
/// -1/6·3); otherwise with every position.
pub fn counted_sum_extra_floats(
    g: &Graph,
    id: NodeId,
    max_len: usize,
    (sel, _, _): (NodeId, NodeId, f64),
    values: &[Atom],
    extra: &std::collections::HashMap<NodeId, Vec<Atom>>,
) -> Vec<Atom> {
    let NodeKind::Map { op: MapOp::Binary(BinOp::Mul), args } = &g.node(id).kind else { return vec![] };
    let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return vec![] };
    let integer_values = !values.is_empty() && values.iter().all(|a| !a.is_str() && a.as_f64().is_some_and(|x| x.fract() == 0.0));
    let can_occur = |x: f64, c: usize| {
        if !integer_values {
            return true;
        }
        let xc = x * c as f64;
        (xc - xc.round()).abs() <= 1e-9 * xc.abs().max(1.0)
    };
    let mut out = std::collections::BTreeSet::new();
    for (m, f) in [(*a, *b), (*b, *a)] {
        let (NodeKind::Aggregate { .. }, Some(more)) = (&g.node(m).kind, extra.get(&m)) else { continue };
        let Some(sits) = situations(g, sel, f, max_len) else { continue };
        let xs: Vec<f64> = more.iter().filter(|a| !a.is_str()).filter_map(Atom::as_f64).collect();
        for (c, fv) in sits {
            let Some(fv) = num(fv) else { continue };
            for &x in xs.iter().filter(|&&x| can_occur(x, c)) {
                // (Multiplication is commutative in floating point too.)
                let p = x * fv;
                if p.fract() != 0.0 {
                    out.insert(p.to_bits());
                }
            }
        }
    }
    out.into_iter().map(|b| Atom::Float(f64::from_bits(b))).collect()
}

/// The values of `a ± b` for two counted sums ([`counted_sum_parts`]) of integer values,
/// taken together at each query position (both are computed there, each over its own keys)
/// instead of as independent operands: the paper's Dyck-1 `(indices + 1) * frac_open -
/// (indices + 1) * frac_close` pairs 7.000000000000001 (k/n·n at one position) with 7 (at
/// another) when taken apart, a difference of 8.9e-16 that no input gives, and a comparison
/// with 0 was refused (helper w22, from max-len 22). Each position contributes the exact
/// λ·S₁ ± λ·S₂ (what the model computes) and the interpreter's own atom for `(S₁/c₁)·f₁(i) ±
/// (S₂/c₂)·f₂(i)` (a float `k.0` beside the integer `k`; one key's value passed on, not a mean),
/// over every pair of integer sums (S₁, S₂) the values allow (a superset of what occurs). None when the operands are not such sums, a mean may hold other floats
/// (`extra`), or the pairs pass a budget.
pub fn counted_sum_pair(g: &Graph, op: &MapOp, args: &[Operand], sets: &HashMap<NodeId, ValueSet>, extra: &HashMap<NodeId, Vec<Atom>>, max_len: usize) -> Option<ValueSet> {
    let MapOp::Binary(bin @ (BinOp::Add | BinOp::Sub)) = op else { return None };
    let [Operand::Sop(a), Operand::Sop(b)] = args else { return None };
    if a == b {
        return None;
    }
    // Per operand: counts by query, the factor by query, the value range and the default.
    struct Side {
        counts: Vec<usize>,
        f: Vec<Option<Atom>>,
        range: (i64, i64),
        /// The values themselves (what one selected key passes on).
        values: Vec<Atom>,
        default: Atom,
        lambda: f64,
    }
    let side = |id: NodeId| -> Option<Side> {
        let (sel, values, lambda) = counted_sum_parts(g, id, max_len)?;
        let NodeKind::Map { args, .. } = &g.node(id).kind else { return None };
        let (mean, f) = match args.as_slice() {
            [Operand::Sop(x), Operand::Sop(y)] if matches!(g.node(*x).kind, NodeKind::Aggregate { .. }) && !matches!(g.node(*y).kind, NodeKind::Aggregate { .. }) => (*x, *y),
            [Operand::Sop(y), Operand::Sop(x)] if matches!(g.node(*x).kind, NodeKind::Aggregate { .. }) => (*x, *y),
            _ => return None,
        };
        if extra.contains_key(&mean) || extra.contains_key(&id) {
            return None;
        }
        let NodeKind::Aggregate { default, .. } = &g.node(mean).kind else { return None };
        let ValueSet::Finite(vs) = sets.get(&values)? else { return None };
        let mut range: Option<(i64, i64)> = None;
        for v in vs.iter() {
            let x = match v {
                Atom::Int(x) => *x,
                Atom::Bool(b) => i64::from(*b),
                _ => return None,
            };
            range = Some(range.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
        }
        let (lo, hi) = range?;
        if lo.unsigned_abs() > 1 << 20 || hi.unsigned_abs() > 1 << 20 || lambda.fract() != 0.0 {
            return None;
        }
        Some(Side {
            counts: backward_counts(g, sel, max_len)?,
            f: (0..max_len as i64).map(|i| index_value(g, f, i)).collect(),
            range: (lo, hi),
            values: vs.iter().cloned().collect(),
            default: default.clone(),
            lambda,
        })
    };
    let (sa, sb) = (side(*a)?, side(*b)?);
    // The pairs to try, before trying them.
    let mut work: usize = 0;
    for i in 0..max_len {
        let span = |s: &Side| (s.counts[i] as i64 * (s.range.1 - s.range.0) + 1).max(1) as usize;
        work = work.saturating_add(span(&sa).saturating_mul(span(&sb)));
    }
    if work > 1 << 22 {
        return None;
    }
    // A side's (exact, interpreter's) values at query i for each integer sum.
    let terms = |s: &Side, i: usize| -> Option<Vec<(i64, Atom)>> {
        let f = s.f[i].clone()?;
        let c = s.counts[i];
        if c == 0 {
            // No key: the default times f(i), which is 0 there.
            let v = apply_map(&MapOp::Binary(BinOp::Mul), &[s.default.clone(), f]).ok()?;
            return Some(vec![(0, v)]);
        }
        if c == 1 {
            // One key: the interpreter passes its value on (an int or a bool), no mean (review
            // rv24: taken as a float, the types were wrong both ways).
            return s.values.iter().map(|v| Some(((s.lambda * v.as_f64()?) as i64, apply_map(&MapOp::Binary(BinOp::Mul), &[v.clone(), f.clone()]).ok()?))).collect();
        }
        let (lo, hi) = (s.range.0 * c as i64, s.range.1 * c as i64);
        (lo..=hi).map(|sum| Some(((s.lambda * sum as f64) as i64, apply_map(&MapOp::Binary(BinOp::Mul), &[Atom::Float(sum as f64 / c as f64), f.clone()]).ok()?))).collect()
    };
    let mut set = AtomSet::default();
    for i in 0..max_len {
        let (Some(ta), Some(tb)) = (terms(&sa, i), terms(&sb, i)) else { continue };
        for (ea, fa) in &ta {
            for (eb, fb) in &tb {
                let exact = if *bin == BinOp::Add { ea + eb } else { ea - eb };
                // The exact count (what the model computes) and the interpreter's own atom, its
                // type kept: `k.0` beside `k` (review rv24: a categorical difference had no dim
                // for the 0.0 the interpreter computes, and the model wrote garbage).
                set.insert(Atom::Int(exact));
                set.insert(apply_map(op, &[fa.clone(), fb.clone()]).ok()?);
                if set.len() > MAX_VALUES {
                    return Some(ValueSet::Unbounded);
                }
            }
        }
    }
    Some(ValueSet::Finite(set))
}

/// For a count `c` of keys with integer values in `[vmin, vmax]` and the factor `fv` = λ·c: adds
/// to `out` (as bits) every `(Σ/c)·fv` the interpreter computes that is not the exact λ·Σ, over
/// the integer sums Σ the values allow. False when that would pass `budget` (sums tried).
pub(crate) fn missed_counts(c: f64, fv: f64, lambda: f64, (vmin, vmax): (f64, f64), budget: &mut usize, out: &mut std::collections::BTreeSet<u64>) -> bool {
    let (lo, hi) = ((vmin * c).round() as i64, (vmax * c).round() as i64);
    *budget = budget.saturating_sub((hi - lo + 1).max(0) as usize);
    if *budget == 0 {
        return false;
    }
    for sum in lo..=hi {
        let float = (sum as f64 / c) * fv;
        if float != lambda * sum as f64 {
            out.insert(float.to_bits());
        }
    }
    true
}

/// The λ with f = λ·c at every point of `points` (pairs of f, None where it has no number, and
/// a key count c; f must be 0 where c is 0), equal up to 1e-12 relative; 0 when every c is 0.
/// None when some f is missing or no single λ fits.
pub(crate) fn count_multiple(points: impl IntoIterator<Item = (Option<f64>, usize)>) -> Option<f64> {
    let mut lambda: Option<f64> = None;
    for (f, c) in points {
        let f = f?;
        if c == 0 {
            if f != 0.0 {
                return None;
            }
            continue;
        }
        let l = f / c as f64;
        match lambda {
            None => lambda = Some(l),
            Some(x) if (x - l).abs() > 1e-12 * x.abs().max(1.0) => return None,
            Some(_) => {}
        }
    }
    Some(lambda.unwrap_or(0.0))
}

/// Interval of a counted sum (see the module docs).
fn counted_sum(g: &Graph, id: NodeId, set: &ValueSet, ivs: &HashMap<NodeId, Iv>, max_len: usize) -> Option<Iv> {
    let (sel, values, lambda) = counted_sum_here(g, id, set, max_len)?;
    let v = ivs.get(&values)?;
    let NodeKind::Map { args, .. } = &g.node(id).kind else { return None };
    let f = args.iter().find_map(|a| match a {
        Operand::Sop(x) if !matches!(g.node(*x).kind, NodeKind::Aggregate { .. }) => Some(*x),
        _ => None,
    })?;
    let counts: Vec<usize> = situations(g, sel, f, max_len)?.into_iter().map(|(c, _)| c).collect();
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for &c in &counts {
        let c = c as f64;
        for x in [lambda * c * v.lo, lambda * c * v.hi] {
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    Some(Iv { lo, hi, int: v.int && lambda.fract() == 0.0, ty: Ty::Mixed })
}

// ---- uniform s-ops ------------------------------------------------------------------------

fn selector_queries(g: &Graph, sel: NodeId, out: &mut Vec<NodeId>) {
    match &g.node(sel).kind {
        NodeKind::Select { queries, .. } => out.push(*queries),
        NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
            selector_queries(g, *a, out);
            selector_queries(g, *b, out);
        }
        NodeKind::SelectNot(a) => selector_queries(g, *a, out),
        _ => {}
    }
}

/// True when `x` has the same value at every position of any one input.
pub fn uniform(g: &Graph, x: NodeId) -> bool {
    // Each node once (a DAG of shared operands is an exponential tree: review rv18).
    fn go(g: &Graph, x: NodeId, memo: &mut HashMap<NodeId, bool>) -> bool {
        if let Some(&b) = memo.get(&x) {
            return b;
        }
        let b = match &g.node(x).kind {
            NodeKind::Const(_) | NodeKind::Length => true,
            NodeKind::Tokens | NodeKind::Indices => false,
            NodeKind::Map { args, .. } => args.iter().all(|a| match a {
                Operand::Const(_) => true,
                Operand::Sop(s) => go(g, *s, memo),
            }),
            NodeKind::Aggregate { sel, .. } | NodeKind::AggregateMax { sel, .. } | NodeKind::SelectorWidth(sel) => {
                let mut qs = vec![];
                selector_queries(g, *sel, &mut qs);
                qs.iter().all(|&q| go(g, q, memo))
            }
            _ => false,
        };
        memo.insert(x, b);
        b
    }
    go(g, x, &mut HashMap::new())
}

/// Splits `x` into a function of `indices` and uniform s-ops: the uniform leaves (None when
/// `x` is not such a function).
fn uniform_leaves(g: &Graph, x: NodeId, out: &mut Vec<NodeId>) -> bool {
    uniform_leaves_seen(g, x, out, &mut HashMap::new())
}

/// [`uniform_leaves`], each node once (`seen`: its answer).
fn uniform_leaves_seen(g: &Graph, x: NodeId, out: &mut Vec<NodeId>, seen: &mut HashMap<NodeId, bool>) -> bool {
    if let Some(&b) = seen.get(&x) {
        return b;
    }
    let b = uniform_leaves_once(g, x, out, seen);
    seen.insert(x, b);
    b
}

fn uniform_leaves_once(g: &Graph, x: NodeId, out: &mut Vec<NodeId>, seen: &mut HashMap<NodeId, bool>) -> bool {
    if uniform(g, x) {
        if !out.contains(&x) {
            out.push(x);
        }
        return true;
    }
    match &g.node(x).kind {
        NodeKind::Indices => true,
        NodeKind::Map { args, .. } => args.iter().all(|a| match a {
            Operand::Const(_) => true,
            Operand::Sop(s) => uniform_leaves_seen(g, *s, out, seen),
        }),
        _ => false,
    }
}

/// Value of a function of `indices` (and of the s-ops `env` fixes) at index `i`.
fn eval_with(g: &Graph, x: NodeId, i: i64, env: &HashMap<NodeId, Atom>) -> Option<Atom> {
    // Each map once (memo): see `uniform`.
    fn go(g: &Graph, x: NodeId, i: i64, env: &HashMap<NodeId, Atom>, memo: &mut HashMap<NodeId, Option<Atom>>) -> Option<Atom> {
        if let Some(a) = env.get(&x) {
            return Some(a.clone());
        }
        match &g.node(x).kind {
            NodeKind::Indices => Some(Atom::Int(i)),
            NodeKind::Const(a) => Some(a.clone()),
            NodeKind::Map { op, args } => {
                if let Some(v) = memo.get(&x) {
                    return v.clone();
                }
                let mut row = vec![];
                let mut ok = true;
                for a in args {
                    match a {
                        Operand::Const(c) => row.push(c.clone()),
                        Operand::Sop(s) => match go(g, *s, i, env, memo) {
                            Some(v) => row.push(v),
                            None => {
                                ok = false;
                                break;
                            }
                        },
                    }
                }
                let v = if ok { apply_map(op, &row).ok() } else { None };
                memo.insert(x, v.clone());
                v
            }
            _ => None,
        }
    }
    go(g, x, i, env, &mut HashMap::new())
}

/// `select(keys, _, ==)` with `keys` an injective function of `indices` for every value of the
/// uniform s-ops it also reads: at most one key per query.
pub fn injective_keys(g: &Graph, sel: NodeId, sets: &HashMap<NodeId, ValueSet>, max_len: usize) -> bool {
    match &g.node(sel).kind {
        NodeKind::SelectAnd(a, b) => injective_keys(g, *a, sets, max_len) || injective_keys(g, *b, sets, max_len),
        NodeKind::Select { keys, cmp: Cmp::Eq, .. } => {
            let mut leaves = vec![];
            if !uniform_leaves(g, *keys, &mut leaves) || leaves.contains(keys) {
                return false;
            }
            let mut choices: Vec<Vec<Atom>> = vec![];
            for l in &leaves {
                match sets.get(l) {
                    Some(ValueSet::Finite(s)) => choices.push(s.iter().cloned().collect()),
                    _ => return false,
                }
            }
            let total = choices.iter().fold(1usize, |p, c| p.saturating_mul(c.len().max(1))).saturating_mul(max_len);
            if total > MAX_VALUES * 64 {
                return false;
            }
            let mut idx = vec![0usize; choices.len()];
            loop {
                let env: HashMap<NodeId, Atom> = leaves.iter().zip(&idx).zip(&choices).filter_map(|((l, &i), c)| c.get(i).map(|a| (*l, a.clone()))).collect();
                let mut seen = std::collections::BTreeSet::new();
                for i in 0..max_len as i64 {
                    if let Some(v) = eval_with(g, *keys, i, &env)
                        && !seen.insert(match v.as_f64() {
                            Some(x) if !v.is_str() => format!("{}", x.to_bits()),
                            _ => v.repr(),
                        })
                    {
                        return false;
                    }
                }
                let mut k = 0;
                loop {
                    if k == idx.len() {
                        return true;
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
        _ => false,
    }
}

// ---- means on a grid of fractions -----------------------------------------------------------

/// The values of a mean of integers: every value is `k/q` with `1 <= q <= den`, in `[lo, hi]`.
/// Such a set has too many values to enumerate at large max-len (every fraction with
/// denominator up to max-len), but its values are never closer to an integer `m` than `1/den`
/// unless they equal it, which is what comparisons with integers need ([`crate::simplify`]
/// rewrites those into comparisons of `floor`, `ceil` and "is an integer"; lowering builds
/// their staircases over [`Grid::points`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub den: u32,
    pub lo: f64,
    pub hi: f64,
}

/// Largest grid lowering enumerates (points, before compression to the steps of a map).
pub const MAX_GRID_POINTS: usize = 1 << 20;

impl Grid {
    /// Every fraction `k/q` (`q <= den`) in `[lo, hi]`, ascending, each once, with the atoms the
    /// interpreter may give it (an integer as `Int` and as `Float`: a single key's value or the
    /// default, and a mean). None when there would be more than [`MAX_GRID_POINTS`].
    pub fn points(&self) -> Option<(Vec<f64>, Vec<Vec<Atom>>)> {
        let (lo, hi) = (self.lo.ceil() as i64 - 1, self.hi.floor() as i64 + 1);
        let count = (hi - lo + 1) as f64 * (self.den as f64).powi(2);
        if !(count.is_finite() && count <= 2.0 * MAX_GRID_POINTS as f64) {
            return None;
        }
        let mut fr: Vec<(i64, i64)> = vec![];
        for q in 1..=self.den as i64 {
            for k in lo * q..=hi * q {
                let x = k as f64 / q as f64;
                if x >= self.lo && x <= self.hi && gcd(k.unsigned_abs(), q as u64) == 1 {
                    fr.push((k, q));
                }
            }
        }
        if fr.len() > MAX_GRID_POINTS {
            return None;
        }
        // Exact order of fractions: k1·q2 vs k2·q1.
        fr.sort_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)));
        let points = fr.iter().map(|&(k, q)| k as f64 / q as f64).collect();
        let groups = fr.iter().map(|&(k, q)| if q == 1 { vec![Atom::Int(k), Atom::Float(k as f64)] } else { vec![Atom::Float(k as f64 / q as f64)] }).collect();
        Some((points, groups))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `id` is a mean of integers that may not be an integer: an aggregate of integer values with
/// an integer default, whose selector may pick several keys (at most max-len, so every mean is
/// a fraction with denominator at most max-len).
pub fn mean_grid(g: &Graph, id: NodeId, sets: &HashMap<NodeId, ValueSet>, ivs: &HashMap<NodeId, Iv>, max_len: usize) -> Option<Grid> {
    let NodeKind::Aggregate { values, default, .. } = &g.node(id).kind else { return None };
    let iv = ivs.get(&id)?;
    if iv.int || !iv.finite() || max_len < 2 {
        return None;
    }
    let d = match default {
        Atom::Int(k) => *k as f64,
        Atom::Float(x) if x.fract() == 0.0 => *x,
        _ => return None,
    };
    let v = ivs.get(values)?;
    if !v.int || !v.finite() || d.abs() > 1e12 || v.lo.abs().max(v.hi.abs()) > 1e12 {
        return None;
    }
    // Values the interpreter refuses to average (strings, all booleans) never give a mean.
    if let Some(ValueSet::Finite(s)) = sets.get(values)
        && s.iter().any(|a| matches!(a, Atom::Str(_) | Atom::Bool(_)))
    {
        return None;
    }
    Some(Grid { den: max_len as u32, lo: iv.lo, hi: iv.hi })
}
