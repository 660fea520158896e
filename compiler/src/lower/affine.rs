//! Numerical s-ops as affine forms `Σ c·dim + c0` over *base* dims: numerical slots written by
//! heads and MLPs, categorical one-hots read through their value tables, the embeddings.
//!
//! A linear s-op (`a + b`, `a - b`, `c·a`, `a / c`, `-a`, or a map of one numerical s-op that is
//! affine on its finite set of values, like `round` of an integer) gets a one-dim *sum slot*
//! that no block computes: every block (or embedding) writing one of its base dims also writes
//! `c·` its contribution into the sum slot, and the residual stream adds them up. No MLP, one
//! dim, and the sum is ready as soon as its last part is.
//!
//! A product of a numerical s-op `x` with a function of `indices` `f` is one MLP with one or two
//! units per index value `p`: `relu(f(p)·x - R·(1 - [i = p]))` (and its mirror when `f(p)·x` can
//! be negative), exact for `|f(p)·x| <= R`. With the counted-sum value analysis
//! ([`crate::numeric`]) the counting idiom `aggregate(select(indices, indices, <=), v) *
//! (indices + 1)` has an integer set, and `round` of it is free.

use super::*;
use raspc_lang::ast::BinOp;
use raspc_lang::graph::MapOp;
use std::collections::BTreeMap;

/// An affine form over base dims: `(slot, dim) -> coefficient`, plus a constant.
#[derive(Clone, Debug, Default)]
pub(super) struct Lin {
    pub terms: BTreeMap<(SlotId, usize), f64>,
    pub c0: f64,
}

impl Lin {
    fn scale(mut self, k: f64) -> Lin {
        for c in self.terms.values_mut() {
            *c *= k;
        }
        self.c0 *= k;
        self
    }
    fn add(mut self, other: &Lin, k: f64) -> Lin {
        for (key, c) in &other.terms {
            *self.terms.entry(*key).or_insert(0.0) += k * c;
        }
        self.c0 += k * other.c0;
        self.terms.retain(|_, c| *c != 0.0);
        self
    }
}

pub(super) fn number(a: &Atom) -> Option<f64> {
    if a.is_str() {
        None
    } else {
        a.as_f64()
    }
}

impl Lowerer<'_> {
    /// The linear form of a sum, difference, negation or integer multiple of s-ops that have
    /// one (None otherwise).
    pub(super) fn lin_of_sum(&mut self, x: NodeId) -> Result<Option<Lin>, Diagnostic> {
        let NodeKind::Map { op, args } = self.g.node(x).kind.clone() else { return Ok(None) };
        // A part left inline as a sum of its own is linear the same way (helper w23: a digit sum
        // of 9 weighted widths at max-len 8, `((w1 + 2*w2) + 3*w3) + 4*w4`, enumerated its four
        // widths' 6,561 combinations: 839,855 parameters; 33,642 at max-len 16, added).
        let part = |lw: &mut Self, a: &Operand| -> Result<Option<Lin>, Diagnostic> {
            match a {
                Operand::Const(c) => Ok(number(c).map(|c0| Lin { terms: BTreeMap::new(), c0 })),
                Operand::Sop(s) => match lw.lin_of(*s)? {
                    None if matches!(lw.rep.get(s), Some(Rep::Inline)) => lw.lin_of_sum(*s),
                    l => Ok(l),
                },
            }
        };
        let int = |a: &Operand| matches!(a, Operand::Const(c) if number(c).is_some_and(|k| k.fract() == 0.0 && k.abs() <= 1e6));
        Ok(match (op, args.as_slice()) {
            (MapOp::Binary(b @ (BinOp::Add | BinOp::Sub)), [a, c]) => match (part(self, a)?, part(self, c)?) {
                (Some(x), Some(y)) => Some(x.add(&y, if b == BinOp::Add { 1.0 } else { -1.0 })),
                _ => None,
            },
            (MapOp::Binary(BinOp::Mul), [a, k]) | (MapOp::Binary(BinOp::Mul), [k, a]) if int(k) && matches!(a, Operand::Sop(_)) => {
                let Operand::Const(c) = k else { return Ok(None) };
                part(self, a)?.and_then(|l| number(c).map(|k| l.scale(k)))
            }
            (MapOp::Neg, [a]) => part(self, a)?.map(|l| l.scale(-1.0)),
            _ => None,
        })
    }

    /// The affine form of an s-op that has a slot, or is a view of one categorical slot, or is
    /// constant. None when it is none of these, or has non-numeric values.
    pub(super) fn lin_of(&mut self, x: NodeId) -> Result<Option<Lin>, Diagnostic> {
        let table = |vals: &[Option<Atom>], slot: SlotId| -> Option<Lin> {
            let mut l = Lin::default();
            for (d, v) in vals.iter().enumerate() {
                let c = match v {
                    Some(a) => number(a)?,
                    None => 0.0,
                };
                if c != 0.0 {
                    l.terms.insert((slot, d), c);
                }
            }
            Some(l)
        };
        match self.rep.get(&x).cloned() {
            Some(Rep::Slot(s)) => {
                if let Some(l) = self.sums.get(&s) {
                    return Ok(Some(l.clone()));
                }
                Ok(match self.slots[s].enc.clone() {
                    SlotEnc::Num { .. } => Some(Lin { terms: BTreeMap::from([((s, 0), 1.0)]), c0: 0.0 }),
                    SlotEnc::Cat(vals) => table(&vals.into_iter().map(Some).collect::<Vec<_>>(), s),
                })
            }
            Some(Rep::Inline) => {
                let leaves = self.leaf_list(x);
                if leaves.is_empty() {
                    return Ok(self.eval_inline(x, &HashMap::new()).as_ref().and_then(number).map(|c0| Lin { terms: BTreeMap::new(), c0 }));
                }
                if leaves.len() == 1
                    && let Some(Rep::Slot(s)) = self.rep.get(&leaves[0]).cloned()
                    && let SlotEnc::Cat(_) = self.slots[s].enc
                {
                    let v = self.view(x)?;
                    let vals = self.view_values(&v);
                    return Ok(table(&vals, v.slot));
                }
                Ok(None)
            }
            None => Ok(None),
        }
    }

    pub(super) fn is_num_slot(&self, x: NodeId) -> bool {
        matches!(self.rep.get(&x), Some(Rep::Slot(s)) if matches!(self.slots[*s].enc, SlotEnc::Num { .. }))
    }

    /// Users of every s-op (built on first use).
    pub(super) fn users_of(&mut self, id: NodeId) -> Vec<NodeId> {
        if self.users.is_empty() {
            for n in self.g.ancestors(self.root) {
                for o in self.g.node(n).kind.operands() {
                    self.users.entry(o).or_default().push(n);
                }
            }
        }
        self.users.get(&id).cloned().unwrap_or_default()
    }

    /// True when every user of `id` reads it as a number anyway: the output, linear maps
    /// (themselves read only as numbers), products with positions, `round`, numerical means.
    fn read_as_number(&mut self, id: NodeId, depth: usize) -> bool {
        if let Some(&known) = self.read_as_number.get(&id) {
            return known;
        }
        // Answers are kept, so a long chain of sums (`s0 + s1 + ... + s18`) is walked once; the
        // depth bound only keeps the recursion within the stack.
        if depth > 4096 {
            return false;
        }
        let users = self.users_of(id);
        let answer = if users.is_empty() {
            id == self.root
        } else {
            users.into_iter().all(|u| match &self.g.node(u).kind {
                NodeKind::Map { op: MapOp::Binary(BinOp::Add | BinOp::Sub) | MapOp::Neg | MapOp::Pos | MapOp::Round, .. } => self.read_as_number(u, depth + 1),
                NodeKind::Map { op: MapOp::Binary(BinOp::Mul | BinOp::Div), args } => {
                    args.iter().any(|a| matches!(a, Operand::Const(c) if number(c).is_some())) && self.read_as_number(u, depth + 1)
                }
                NodeKind::Aggregate { sel, values, .. } => *values == id && !crate::infer::selects_at_most_one_with(self.g, *sel, self.opts.max_len, &self.sets),
                _ => false,
            })
        };
        self.read_as_number.insert(id, answer);
        answer
    }

    /// Lowers a linear map, or a product with a function of `indices`, without enumeration.
    /// None: not such a map (or enumeration is as cheap); the caller lowers it as before.
    pub(super) fn affine_map(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let NodeKind::Map { op, args } = self.g.node(id).kind.clone() else { return Ok(None) };
        let label = self.label(id).to_string();
        if self.opts.categorical.contains(&label) {
            return Ok(None);
        }
        if let Some(ValueSet::Finite(s)) = self.sets.get(&id)
            && s.iter().any(|a| !matches!(a, Atom::Int(_) | Atom::Float(_)))
        {
            return Ok(None);
        }
        if let Some(s) = self.positional_product(id, &op, &args)? {
            return Ok(Some(s));
        }
        if let Some(s) = self.max_min(id, &op, &args)? {
            return Ok(Some(s));
        }
        if let Some(s) = self.one_hot_conditional(id, &op, &args)? {
            return Ok(Some(s));
        }
        let sop_leaves: Vec<NodeId> = args.iter().filter_map(|a| if let Operand::Sop(s) = a { Some(*s) } else { None }).collect();
        let mut leaves = BTreeSet::new();
        for s in &sop_leaves {
            self.leaves_of(*s, &mut leaves);
        }
        let any_num = leaves.iter().any(|l| self.is_num_slot(*l));
        // Linear operations.
        let operand = |lw: &mut Self, a: &Operand| -> Result<Option<Lin>, Diagnostic> {
            match a {
                Operand::Const(c) => Ok(number(c).map(|c0| Lin { terms: BTreeMap::new(), c0 })),
                Operand::Sop(s) => lw.lin_of(*s),
            }
        };
        let lin = match (&op, args.as_slice()) {
            (MapOp::Binary(b @ (BinOp::Add | BinOp::Sub)), [a, c]) if sop_leaves.len() == 2 => {
                let combos = self.combinations(&leaves);
                let enumerate_up_to = if self.opts.eager_sums { super::EAGER_SUM_COMBINATIONS } else { MAX_COMBINATIONS };
                if !(any_num || combos > enumerate_up_to || self.read_as_number(id, 0)) {
                    // Enumerated here; with eager sums it would not be (`compile` then tries).
                    self.eager_sums_differ |= combos > super::EAGER_SUM_COMBINATIONS;
                    return Ok(None);
                }
                // Beside a number, a map of several s-ops (`round(x * prev) + mean`) is computed
                // by its own MLP and read through its value table, instead of enumerating it
                // with the number's values, when the sum is read as a number (a reader that
                // needs it one-hot would add a layer after the sum) or cannot be enumerated.
                // Decided before any MLP is built: when the other side is not linear either,
                // the enumeration below takes the whole map.
                let (mut xa, mut xc) = (operand(self, a)?, operand(self, c)?);
                // With eager sums, a side left inline as a sum of its own few pairs (`w1 + 2*w2`)
                // is linear too when this sum has more combinations than that (helper e13:
                // `+ 3*w3` enumerated 17^3 combinations at max-len 16, 1.59 M parameters; 6 k
                // added in a sum slot).
                if self.opts.eager_sums && combos > super::EAGER_SUM_COMBINATIONS {
                    for (x, op) in [(&mut xa, a), (&mut xc, c)] {
                        if x.is_none()
                            && let Operand::Sop(s) = op
                            && matches!(self.rep.get(s), Some(Rep::Inline))
                        {
                            *x = self.lin_of_sum(*s)?;
                        }
                    }
                }
                let worth = any_num && (combos > MAX_COMBINATIONS || self.read_as_number(id, 0));
                // With eager sums (a second plan `compile` tries, kept when better by its `best`),
                // also a map of one numerical s-op, `floor(mean) - length`: its values
                // cannot be enumerated with the other side's, and one-hot it costs a unit per
                // value pair (idioms/bar_sum.rasp at max-len 64: 15.9 M parameters, 0.7 M so).
                let numeric_map = |lw: &Self, op: &Operand| matches!(op, Operand::Sop(s) if worth && matches!(lw.rep.get(s), Some(Rep::Inline)) && { let ls = lw.leaf_list(*s); ls.len() == 1 && lw.is_num_slot(ls[0]) });
                let eager = self.opts.eager_sums;
                if !eager && (numeric_map(self, a) || numeric_map(self, c)) {
                    self.eager_sums_differ = true;
                }
                let own_mlp = |lw: &Self, op: &Operand| {
                    matches!(op, Operand::Sop(s) if worth && matches!(lw.rep.get(s), Some(Rep::Inline)) && lw.leaf_list(*s).len() > 1) || (eager && numeric_map(lw, op))
                };
                if (xa.is_none() && !own_mlp(self, a)) || (xc.is_none() && !own_mlp(self, c)) {
                    // Enumerated beside a number here; eager sums may add it (a side left inline
                    // as a sum of its own is linear with eager sums, helper e13: at max-len 20,
                    // 21^3 combinations in two chained MLPs, a layer more; helper w24's word
                    // reversal at max-len 32 enumerated `mirror`, 3.26 M parameters, where 48
                    // added it, 0.28 M).
                    if !eager && combos > super::EAGER_SUM_COMBINATIONS {
                        self.eager_sums_differ = true;
                    }
                    return Ok(None);
                }
                let side = |lw: &mut Self, lin: Option<Lin>, op: &Operand| -> Result<Option<Lin>, Diagnostic> {
                    match (lin, op) {
                        (Some(l), _) => Ok(Some(l)),
                        (None, Operand::Sop(s)) => {
                            lw.view(*s)?;
                            lw.lin_of(*s)
                        }
                        (None, Operand::Const(_)) => Ok(None),
                    }
                };
                let (Some(x), Some(y)) = (side(self, xa, a)?, side(self, xc, c)?) else { return Ok(None) };
                x.add(&y, if *b == BinOp::Sub { -1.0 } else { 1.0 })
            }
            (MapOp::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul), [Operand::Sop(_), Operand::Const(_)] | [Operand::Const(_), Operand::Sop(_)])
            | (MapOp::Binary(BinOp::Div), [Operand::Sop(_), Operand::Const(_)])
            | (MapOp::Neg | MapOp::Pos, [Operand::Sop(_)])
                if any_num && self.read_as_number(id, 0) =>
            {
                let (x, k) = match args.as_slice() {
                    [Operand::Sop(s), Operand::Const(c)] | [Operand::Const(c), Operand::Sop(s)] => (*s, number(c)),
                    [Operand::Sop(s)] => (*s, Some(0.0)),
                    _ => return Ok(None),
                };
                let (Some(x), Some(k)) = (self.lin_of(x)?, k) else { return Ok(None) };
                match (&op, args.as_slice()) {
                    (MapOp::Neg, _) => x.scale(-1.0),
                    (MapOp::Pos, _) => x,
                    (MapOp::Binary(BinOp::Add), _) => Lin { c0: x.c0 + k, ..x },
                    (MapOp::Binary(BinOp::Sub), [Operand::Sop(_), _]) => Lin { c0: x.c0 - k, ..x },
                    (MapOp::Binary(BinOp::Sub), _) => x.scale(-1.0).add(&Lin { terms: BTreeMap::new(), c0: k }, 1.0),
                    (MapOp::Binary(BinOp::Mul), _) => x.scale(k),
                    (MapOp::Binary(BinOp::Div), _) if k != 0.0 => x.scale(1.0 / k),
                    _ => return Ok(None),
                }
            }
            // `round` of a counted sum of integers too large to list (the sum of widths
            // `round(mean(hist) * length)` at max-len 64: helper w25): the identity on its exact
            // value, which the interpreter's float misses by rounding only.
            (MapOp::Round, [Operand::Sop(x)])
                if matches!(self.sets.get(x), Some(ValueSet::Unbounded))
                    && self.ivs.get(x).is_some_and(|iv| iv.int)
                    && crate::numeric::counted_sum_parts(self.g, *x, self.opts.max_len).is_some() =>
            {
                let Some(l) = self.lin_of(*x)? else { return Ok(None) };
                l
            }
            _ => match self.affine_on_points(id)? {
                Some((l, identity)) if identity || self.read_as_number(id, 0) => l,
                _ => return Ok(None),
            },
        };
        Ok(Some(self.sum_slot(id, lin)))
    }

    /// A map of one numerical slot that is affine on the slot's finite set of values (`round` of
    /// an integer, `x * 2 + 1`, any map on one value): its affine form.
    /// Also says whether the map is the identity on those values.
    pub(super) fn affine_on_points(&mut self, id: NodeId) -> Result<Option<(Lin, bool)>, Diagnostic> {
        let Some((leaf, a, b)) = self.affine_coefficients(id) else { return Ok(None) };
        let Some(x) = self.lin_of(leaf)? else { return Ok(None) };
        Ok(Some((x.scale(a).add(&Lin { terms: BTreeMap::new(), c0: b }, 1.0), a == 1.0 && b == 0.0)))
    }

    /// For a map of one numerical slot that is affine on its points: that leaf and `(a, b)`
    /// with the map's value `a·x + b` at every value x of the leaf.
    pub(super) fn affine_coefficients(&self, id: NodeId) -> Option<(NodeId, f64, f64)> {
        let leaves = self.leaf_list(id);
        let [leaf] = leaves.as_slice() else { return None };
        let Some(Rep::Slot(ls)) = self.rep.get(leaf).cloned() else { return None };
        let SlotEnc::Num { points: Some(points) } = &self.slots[ls].enc else { return None };
        let groups = self.num_atoms.get(&ls).cloned().unwrap_or_else(|| points.iter().map(|p| vec![Atom::Float(*p)]).collect());
        let mut ys = vec![];
        for g in &groups {
            let mut y: Option<f64> = None;
            for a in g {
                match self.eval_inline(id, &HashMap::from([(*leaf, a.clone())])) {
                    Some(r @ (Atom::Int(_) | Atom::Float(_))) => {
                        let v = number(&r).unwrap_or(f64::NAN);
                        // (The floats of one number, `m * 3 - 1` of a mean reached two ways,
                        // give one number too.)
                        if y.is_some_and(|y| !super::same_up_to_rounding(y, v)) {
                            return None;
                        }
                        y = Some(v);
                    }
                    Some(_) => return None,
                    None => {}
                }
            }
            ys.push(y);
        }
        let known: Vec<(f64, f64)> = points.iter().zip(&ys).filter_map(|(p, y)| y.map(|y| (*p, y))).collect();
        let (a, b) = match known.as_slice() {
            [] => return None,
            [(_, y)] => (0.0, *y),
            [(p0, y0), .., (p1, y1)] => {
                let a = (y1 - y0) / (p1 - p0);
                (a, y0 - a * p0)
            }
        };
        if known.iter().any(|(p, y)| (a * p + b - y).abs() > 1e-9 * y.abs().max(1.0)) {
            return None;
        }
        Some((*leaf, a, b))
    }

    /// The numerical slot of `id` (points and atoms from its value set) holding `lin`: every
    /// writer of a base dim also writes into it.
    pub(super) fn sum_slot(&mut self, id: NodeId, lin: Lin) -> SlotId {
        let label = self.label(id).to_string();
        let pg = match self.sets.get(&id) {
            Some(ValueSet::Finite(s)) => points_of(&s.iter().cloned().collect::<Vec<_>>()),
            _ => None,
        };
        let at_bos: f64 = lin.terms.iter().map(|(&(s, d), c)| c * self.slots[s].at_bos.get(d).copied().unwrap_or(0.0)).sum();
        let out = self.new_slot(label, SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![at_bos]);
        if let Some((_, groups)) = pg {
            self.num_atoms.insert(out, groups);
        }
        let n = self.opts.max_len;
        let mut tok = vec![lin.c0; self.opts.vocab.len()];
        let mut pos = vec![0.0; n + 1];
        let mut extra: Vec<(BlockId, Out)> = vec![];
        for (&(s, d), &c) in &lin.terms {
            if s == TOK {
                tok.iter_mut().for_each(|t| *t += c);
                continue;
            }
            if Some(s) == self.tokens {
                for (i, a) in self.opts.vocab.iter().enumerate() {
                    tok[i] += c * match &self.slots[s].enc {
                        SlotEnc::Cat(vals) => (vals.get(d) == Some(a)) as u8 as f64,
                        SlotEnc::Num { .. } => number(a).unwrap_or(0.0),
                    };
                }
                continue;
            }
            if Some(s) == self.indices {
                for (p, v) in pos.iter_mut().enumerate().skip(1) {
                    *v += c * match &self.slots[s].enc {
                        SlotEnc::Cat(_) => (p - 1 == d) as u8 as f64,
                        SlotEnc::Num { .. } => (p - 1) as f64,
                    };
                }
                continue;
            }
            for EmbedRow { slot: ps, dim: pd, values: vals } in &self.positional {
                if (*ps, *pd) == (s, d) {
                    for (p, v) in pos.iter_mut().enumerate() {
                        *v += c * vals.get(p).copied().unwrap_or(0.0);
                    }
                }
            }
            for (b, block) in self.blocks.iter().enumerate() {
                let outs: &[Out] = match &block.kind {
                    BlockKind::Head(h) => &h.o,
                    BlockKind::Mlp(m) => &m.w_out,
                };
                for &Out { col, slot: ts, dim: td, w } in outs {
                    if (ts, td) == (s, d) {
                        extra.push((BlockId(b), Out::new(col, out, 0, w * c)));
                    }
                }
            }
        }
        for (b, e) in extra {
            match &mut self.blocks[b].kind {
                BlockKind::Head(h) => h.o.push(e),
                BlockKind::Mlp(m) => m.w_out.push(e),
            }
        }
        if tok.iter().any(|&t| t != 0.0) {
            self.token_values.push(EmbedRow { slot: out, dim: 0, values: tok });
        }
        if pos.iter().any(|&p| p != 0.0) {
            self.positional.push(EmbedRow { slot: out, dim: 0, values: pos });
        }
        self.sums.insert(out, lin);
        out
    }

    /// A one-hot slot that `f` is a function of, and f's value at each of its dims: `indices`
    /// (f a function of `indices`), `tokens` or another categorical s-op (x of many values), or
    /// `length` (f a function of `length`, in `id` = x·f a counted sum of integers too large to
    /// enumerate against the lengths: the mean over the whole input times its length, helper
    /// w25; elsewhere the lookup over (x, length) keeps the interpreter's exact floats, review
    /// rv25). None when none applies.
    fn one_hot_factor(&self, id: NodeId, x: NodeId, f: NodeId) -> Option<(SlotId, Vec<f64>)> {
        if let Some(is) = self.indices
            && matches!(self.slots[is].enc, SlotEnc::Cat(_))
            && let Some(fv) = self.index_function(f)
        {
            return Some((is, fv.iter().map(|v| v.as_ref().and_then(number)).collect::<Option<Vec<f64>>>()?));
        }
        // A function of `length` alone: its one leaf that is not a constant.
        let mut leaves = BTreeSet::new();
        self.leaves_of(f, &mut leaves);
        // A function of one other categorical s-op (`m * tokens_int`, `m * indicator(hist >
        // 2)`), where x has more than [`PRODUCT_MIN_VALUES`] values: the lookup over (x, f)
        // would first make x one-hot (the 1,198 means of `1 / hist` at max-len 7: 8.9 M
        // parameters), or take more combinations than one MLP enumerates (review rv27a:
        // `m * tokens_int` was refused, while `m * indices` compiled). A number with few values
        // keeps its exact table.
        if let [leaf] = leaves.iter().copied().collect::<Vec<_>>()[..]
            && !matches!(self.g.node(leaf).kind, NodeKind::Length | NodeKind::Indices)
            && let Some(&Rep::Slot(ls)) = self.rep.get(&leaf)
            && let SlotEnc::Cat(vals) = &self.slots[ls].enc
            && !self.cat_alts.contains_key(&ls)
            && self.domain_size(x) > PRODUCT_MIN_VALUES
        {
            let fv = vals.iter().map(|v| self.eval_inline(f, &HashMap::from([(leaf, v.clone())])).as_ref().and_then(number).filter(|k| k.is_finite()));
            return Some((ls, fv.collect::<Option<Vec<f64>>>()?));
        }
        let [len] = leaves.iter().copied().filter(|l| !matches!(self.g.node(*l).kind, NodeKind::Const(_))).collect::<Vec<_>>()[..] else { return None };
        if !matches!(self.g.node(len).kind, NodeKind::Length) || !crate::positional::is_positional(self.g, f) {
            return None;
        }
        let Some(Rep::Slot(ls)) = self.rep.get(&len) else { return None };
        let SlotEnc::Cat(vals) = &self.slots[*ls].enc else { return None };
        if self.opts.no_length_product {
            return None;
        }
        let (_, values, lambda) = crate::numeric::counted_sum_parts(self.g, id, self.opts.max_len)?;
        // (Integers only: a mean of booleans and integers, `True` beside 2, is left to the
        // lookup, review rv25b.)
        let integers = matches!(self.sets.get(&values), Some(ValueSet::Finite(vs)) if vs.iter().all(|a| matches!(a, Atom::Int(_))));
        let enumerable = self.domain_size(x).saturating_mul(vals.len()) <= super::MAX_COMBINATIONS && !matches!(self.sets.get(&id), Some(ValueSet::Unbounded));
        if !integers || lambda.fract() != 0.0 || enumerable {
            return None;
        }
        let fv = vals.iter().map(|l| match l {
            Atom::Int(l) => crate::positional::eval_at(self.g, f, 0, *l).as_ref().and_then(number),
            _ => None,
        });
        Some((*ls, fv.collect::<Option<Vec<f64>>>()?))
    }

    /// `x * f` (either order) with `x` numerical and `f` a function of `indices` or of
    /// `length` read from its one-hot ([`Self::one_hot_factor`]): one MLP, one or two units per
    /// value of the one-hot.
    fn positional_product(&mut self, id: NodeId, op: &MapOp, args: &[Operand]) -> Result<Option<SlotId>, Diagnostic> {
        let (MapOp::Binary(BinOp::Mul), [Operand::Sop(a), Operand::Sop(b)]) = (op, args) else { return Ok(None) };
        for (x, f) in [(*a, *b), (*b, *a)] {
            if !self.is_num_slot(x) {
                continue;
            }
            let Some((is, fv)) = self.one_hot_factor(id, x, f) else { continue };
            let Some(iv) = self.ivs.get(&x).copied() else { continue };
            let Rep::Slot(xs) = self.rep[&x] else { continue };
            let label = self.label(id).to_string();
            let pg = match self.sets.get(&id) {
                Some(ValueSet::Finite(s)) => points_of(&s.iter().cloned().collect::<Vec<_>>()),
                _ => None,
            };
            if !products_resolve(pg.as_ref().map(|p| &p.0[..]), fv.iter().map(|&k| (k, iv))) {
                continue;
            }
            let out = self.new_slot(label.clone(), SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![0.0]);
            if let Some((_, groups)) = pg {
                self.num_atoms.insert(out, groups);
            }
            let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
            for (p, &k) in fv.iter().enumerate() {
                product_units(&mut mlp, (xs, iv), (is, p), k, out);
            }
            self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = {} * {}", self.label(x), self.label(f)));
            return Ok(Some(out));
        }
        Ok(None)
    }

    /// `x if x > y else y` (`>=` alike), the library's `max(x, y)`, as `y + relu(x - y)`, and
    /// `x if x < y else y`, `min(x, y)`, as `y - relu(y - x)` (either branch order, with the
    /// comparison turned to match), where one of x and y is a number: one unit and an affine
    /// form, where the lookup gave the comparison an MLP of its own and the choice another, two
    /// layers (helper w30: `m if m > 0 else 0` and each `min` of a running minimum took two).
    fn max_min(&mut self, id: NodeId, op: &MapOp, args: &[Operand]) -> Result<Option<SlotId>, Diagnostic> {
        let (MapOp::Ternary, [t, Operand::Sop(c), e]) = (op, args) else { return Ok(None) };
        if self.opts.no_logic_threshold {
            return Ok(None);
        }
        let NodeKind::Map { op: MapOp::Binary(cmp @ (BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le)), args: cargs } = self.g.node(*c).kind.clone() else { return Ok(None) };
        let [p, q] = &cargs[..] else { return Ok(None) };
        if self.inexact_nodes.contains(&id) {
            return Ok(None);
        }
        // Numbers only (a boolean or a string compares otherwise), one of them numerical.
        let numbers = |lw: &Self, a: &Operand| match a {
            Operand::Const(k) => matches!(k, Atom::Int(_) | Atom::Float(_)) && number(k).is_some_and(f64::is_finite),
            Operand::Sop(s) => match lw.sets.get(s) {
                Some(ValueSet::Finite(v)) => v.iter().all(|a| match a {
                    Atom::Int(_) => true,
                    Atom::Float(x) => x.is_finite(),
                    _ => false,
                }),
                Some(ValueSet::Unbounded) => lw.ivs.contains_key(s),
                None => false,
            },
        };
        let numerical = |lw: &Self, a: &Operand| matches!(a, Operand::Sop(s) if lw.leaf_list(*s).iter().any(|l| lw.is_num_slot(*l)));
        if !numbers(self, t) || !numbers(self, e) || !(numerical(self, t) || numerical(self, e)) {
            return Ok(None);
        }
        // Affine forms, without building anything (a form that cannot be read so: not this).
        let form = |lw: &mut Self, a: &Operand| -> Option<Lin> {
            match a {
                Operand::Const(k) => number(k).map(|c0| Lin { terms: BTreeMap::new(), c0 }),
                Operand::Sop(s) => match lw.rep.get(s) {
                    Some(Rep::Slot(_)) => lw.lin_of(*s).ok().flatten(),
                    Some(Rep::Inline) => lw.lin_of(*s).ok().flatten().or_else(|| lw.lin_of_sum(*s).ok().flatten()),
                    None => None,
                },
            }
        };
        let (Some(lt), Some(le), Some(lp), Some(lq)) = (form(self, t), form(self, e), form(self, p), form(self, q)) else { return Ok(None) };
        // The condition compares `t - e` with 0, one way or the other (`m > 0`, `a < b`, the
        // simplifier's `a - b < 0`, `0 > b - a`).
        let d = lt.add(&le, -1.0);
        let l = lp.add(&lq, -1.0);
        let same = |a: &Lin, b: &Lin| {
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0);
            close(a.c0, b.c0) && a.terms.len() == b.terms.len() && a.terms.iter().all(|(k, x)| b.terms.get(k).is_some_and(|y| close(*x, *y)))
        };
        let greater = matches!(cmp, BinOp::Gt | BinOp::Ge);
        // Whether the conditional is the larger of t and e.
        let max = if same(&l, &d) {
            greater
        } else if same(&l, &d.clone().scale(-1.0)) {
            !greater
        } else {
            return Ok(None);
        };
        // max = e + relu(t - e); min = e - relu(e - t).
        let sign = if max { 1.0 } else { -1.0 };
        let d = d.scale(sign);
        let label = self.label(id).to_string();
        let r = self.new_slot(format!("{label}:relu"), SlotEnc::Num { points: None }, vec![0.0]);
        let mut mlp = Mlp { hidden: 1, w_in: vec![], b_in: vec![d.c0], w_out: vec![Out::new(0, r, 0, 1.0)], gate: None };
        for (&(s, dim), &w) in &d.terms {
            mlp.w_in.push(In::new(s, dim, 0, w));
        }
        self.logic_threshold_used = true;
        let word = if max { "max" } else { "min" };
        self.push_block(BlockKind::Mlp(mlp), r, format!("{label}:relu = relu of the difference in {word}({}, {})", self.operand_text(t), self.operand_text(e)));
        let mut terms = BTreeMap::new();
        terms.insert((r, 0), sign);
        Ok(Some(self.sum_slot(id, le.add(&Lin { terms, c0: 0.0 }, 1.0))))
    }

    fn operand_text(&self, a: &Operand) -> String {
        match a {
            Operand::Sop(x) => self.label(*x).to_string(),
            Operand::Const(k) => k.repr(),
        }
    }

    /// `t if c else e` with `c` a function of one categorical s-op alone (`tokens`, `indices`,
    /// a count), or a condition of 2 to 64 values given its own one-hot first, and each branch
    /// a number, a numeric constant, a count or a map of one categorical s-op, one of them a
    /// number with more values than [`PRODUCT_MIN_VALUES`]: at each value p of the one-hot,
    /// the branch c(p) picks, written by [`product_units`] (a constant by one unit
    /// `relu(2·[x = p] - 1)`, a count's value v by `relu(2·[x = p] + 2·[b = v] - 3)`). The
    /// lookup made the number one-hot first: `m if tokens == "b" else 0` of a mean of
    /// `1 / hist` at max-len 7 had d_model 1,220 and 8.9 M parameters (review rv27a).
    fn one_hot_conditional(&mut self, id: NodeId, op: &MapOp, args: &[Operand]) -> Result<Option<SlotId>, Diagnostic> {
        let (MapOp::Ternary, [t, Operand::Sop(c), e]) = (op, args) else { return Ok(None) };
        // A branch: a number, a constant, or a categorical s-op of numbers (a count) or a map
        // of one (its values at each of the s-op's).
        enum Branch {
            /// `k·x + b` of a numerical slot x (with its interval and number of values).
            Num(SlotId, Iv, usize, f64, f64),
            Const(f64),
            Cat(SlotId, Vec<f64>),
        }
        // An inline map affine on one number's values (`m * 2 + 1`): that number, scaled
        // (review of session 27: the simplifier's `aggregate(s, bal * 2) + 1` was one-hot,
        // 98 M parameters at max-len 16).
        let affine = |lw: &Self, a: &Operand| -> Option<Branch> {
            let Operand::Sop(x) = a else { return None };
            if !matches!(lw.rep.get(x), Some(Rep::Inline)) {
                return None;
            }
            let (leaf, k, b) = lw.affine_coefficients(*x)?;
            let Some(&Rep::Slot(ls)) = lw.rep.get(&leaf) else { return None };
            (k != 0.0 && k.is_finite() && b.is_finite()).then_some(Branch::Num(ls, *lw.ivs.get(&leaf)?, lw.domain_size(leaf), k, b))
        };
        let branch = |lw: &Self, a: &Operand| -> Option<Branch> {
            if let Some(b) = affine(lw, a) {
                return Some(b);
            }
            match a {
                Operand::Const(k) => number(k).filter(|k| k.is_finite()).map(Branch::Const),
                // An inline map of one categorical s-op (`(length - length % 2) / 2`): its
                // value at each of that s-op's values (helper w27: `first if found else h`).
                Operand::Sop(x) if matches!(lw.rep.get(x), Some(Rep::Inline)) => {
                    let mut leaves = BTreeSet::new();
                    lw.leaves_of(*x, &mut leaves);
                    let [leaf] = leaves.into_iter().collect::<Vec<_>>()[..] else { return None };
                    let Some(&Rep::Slot(ls)) = lw.rep.get(&leaf) else { return None };
                    let SlotEnc::Cat(v) = &lw.slots[ls].enc else { return None };
                    if v.len() > PRODUCT_MIN_VALUES || lw.cat_alts.contains_key(&ls) {
                        return None;
                    }
                    let values = v.iter().map(|a| lw.eval_inline(*x, &HashMap::from([(leaf, a.clone())])).and_then(|r| number(&r)).filter(|k| k.is_finite()));
                    Some(Branch::Cat(ls, values.collect::<Option<Vec<f64>>>()?))
                }
                Operand::Sop(x) => {
                    let Some(&Rep::Slot(xs)) = lw.rep.get(x) else { return None };
                    match &lw.slots[xs].enc {
                        SlotEnc::Num { .. } => Some(Branch::Num(xs, *lw.ivs.get(x)?, lw.domain_size(*x), 1.0, 0.0)),
                        SlotEnc::Cat(v) if v.len() <= PRODUCT_MIN_VALUES && !lw.cat_alts.contains_key(&xs) => {
                            Some(Branch::Cat(xs, v.iter().map(|a| number(a).filter(|k| k.is_finite())).collect::<Option<Vec<f64>>>()?))
                        }
                        SlotEnc::Cat(_) => None,
                    }
                }
            }
        };
        let (Some(tb), Some(eb)) = (branch(self, t), branch(self, e)) else { return Ok(None) };
        // A conditional with a branch affine in a number (not the number itself), nested as a
        // branch of another conditional, is left to the lookup as before: the outer one reads
        // its one-hot (review rv28a: as products, the outer one's output could not resolve
        // them and its lookup was refused at max-len 8, where the lookups compiled).
        let scaled = |b: &Branch| matches!(b, Branch::Num(_, _, _, k, b) if *k != 1.0 || *b != 0.0);
        if (scaled(&tb) || scaled(&eb))
            && self.users_of(id).into_iter().any(
                |u| matches!(&self.g.node(u).kind, NodeKind::Map { op: MapOp::Ternary, args } if matches!(&args[..], [x, _, y] if *x == Operand::Sop(id) || *y == Operand::Sop(id))),
            )
        {
            return Ok(None);
        }
        // Products for a number of many values; for one of a few, in the plan that asks for them
        // ([`super::Options::few_valued_products`]).
        let values = |b: &Branch| if let Branch::Num(_, _, n, _, _) = b { *n } else { 0 };
        let most = values(&tb).max(values(&eb));
        if most <= PRODUCT_MIN_VALUES {
            if most <= 2 {
                return Ok(None);
            }
            if !self.opts.few_valued_products {
                self.few_products_differ = true;
                return Ok(None);
            }
        }
        let label = self.label(id).to_string();
        let pg = match self.sets.get(&id) {
            Some(ValueSet::Finite(s)) => points_of(&s.iter().cloned().collect::<Vec<_>>()),
            _ => None,
        };
        let resolve = |truth: &mut dyn Iterator<Item = bool>| {
            let products = truth.filter_map(|holds| match if holds { &tb } else { &eb } {
                Branch::Num(_, iv, _, k, _) => Some((*k, *iv)),
                _ => None,
            });
            products_resolve(pg.as_ref().map(|p| &p.0[..]), products)
        };
        // The one-hot the condition reads (its one leaf: `tokens`, `indices`, a count...), and
        // its truth at each dim; a dim that stands for several floats is left to the lookup.
        let mut leaves = BTreeSet::new();
        self.leaves_of(*c, &mut leaves);
        let direct = match leaves.into_iter().collect::<Vec<_>>()[..] {
            [leaf] => match self.rep.get(&leaf) {
                Some(&Rep::Slot(is)) => match &self.slots[is].enc {
                    SlotEnc::Cat(vals) if !self.cat_alts.contains_key(&is) => {
                        let truth = vals.iter().map(|v| self.eval_inline(*c, &HashMap::from([(leaf, v.clone())])).map(|a| a.truthy())).collect::<Option<Vec<bool>>>();
                        let Some(truth) = truth else { return Ok(None) };
                        Some((is, truth))
                    }
                    SlotEnc::Cat(_) => return Ok(None),
                    SlotEnc::Num { .. } => None,
                },
                _ => None,
            },
            _ => None,
        };
        let (is, truth) = match direct {
            Some((is, truth)) => {
                if !resolve(&mut truth.iter().copied()) {
                    return Ok(None);
                }
                (is, truth)
            }
            // A condition that reduces numbers to a few values (`has_focus`: a mean of ones
            // `> 0`) gets its own one-hot first, as the lookup would give it (helper w27:
            // `first if found else h` was refused at max-len 16).
            None => {
                if !matches!(self.rep.get(c), Some(Rep::Inline)) || self.opts.numerical.contains(self.label(*c)) {
                    return Ok(None);
                }
                // (A condition of one value is left to the lookup, which folds it away: review
                // rv27d, a layer more for `x if False-always else y`.)
                let Ok(values) = self.finite(*c) else { return Ok(None) };
                if values.len() < 2 || values.len() > PRODUCT_MIN_VALUES || !resolve(&mut values.iter().map(Atom::truthy)) {
                    return Ok(None);
                }
                // A condition that cannot stand on its own (`m > 0.5` of a mean whose floats
                // straddle 0.5, where both branches give 0.5: `max(m, 0.5)`) is left to the
                // lookup of the whole conditional (review rv27d: it was refused).
                let Ok(is) = self.materialise(*c) else { return Ok(None) };
                self.set_rep(*c, Rep::Slot(is));
                let SlotEnc::Cat(vals) = &self.slots[is].enc else { return Err(self.internal(*c, "a condition's one-hot is not categorical")) };
                // (A dim standing for several floats: the lookup checks them.)
                if self.cat_alts.contains_key(&is) {
                    return Ok(None);
                }
                let truth = vals.iter().map(Atom::truthy).collect();
                (is, truth)
            }
        };
        let out = self.new_slot(label.clone(), SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![0.0]);
        if let Some((_, groups)) = pg {
            self.num_atoms.insert(out, groups);
        }
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        for (p, &holds) in truth.iter().enumerate() {
            match if holds { &tb } else { &eb } {
                Branch::Num(xs, iv, _, k, b) => {
                    product_units(&mut mlp, (*xs, *iv), (is, p), *k, out);
                    if *b != 0.0 {
                        let u = mlp.hidden;
                        mlp.hidden += 1;
                        mlp.w_in.push(In::new(is, p, u, 2.0));
                        mlp.b_in.push(-1.0);
                        mlp.w_out.push(Out::new(u, out, 0, *b));
                    }
                }
                Branch::Const(k) if *k != 0.0 => {
                    let u = mlp.hidden;
                    mlp.hidden += 1;
                    mlp.w_in.push(In::new(is, p, u, 2.0));
                    mlp.b_in.push(-1.0);
                    mlp.w_out.push(Out::new(u, out, 0, *k));
                }
                Branch::Const(_) => {}
                // Both dims on: `relu(2·[c = p] + 2·[b = v] - 3)`, writing v (the same slot
                // twice: on only where p is v).
                Branch::Cat(bs, values) => {
                    for (v, &k) in values.iter().enumerate().filter(|(_, k)| **k != 0.0) {
                        let u = mlp.hidden;
                        mlp.hidden += 1;
                        mlp.w_in.push(In::new(is, p, u, 2.0));
                        mlp.w_in.push(In::new(*bs, v, u, 2.0));
                        mlp.b_in.push(-3.0);
                        mlp.w_out.push(Out::new(u, out, 0, k));
                    }
                }
            }
        }
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = {} if {} else {}", self.operand_text(t), self.label(*c), self.operand_text(e)));
        Ok(Some(out))
    }
}

/// A number needs more values than this before a product with a function of `tokens` (or a
/// conditional on one) is an MLP of products rather than a lookup over the number's one-hot.
pub(super) const PRODUCT_MIN_VALUES: usize = 64;

/// R of [`product_units`] for `k·x`: 1.5 times the bound of `|k·x|` from x's interval, plus 1.
fn product_reach(k: f64, iv: Iv) -> f64 {
    (k.abs() * iv.lo.abs().max(iv.hi.abs()) * 1.5 + 1.0).ceil()
}

/// Whether product units for these `(k, interval of x)` keep their f32 rounding under a quarter
/// of the smallest gap between the output's values (`points`; none listed: the slot's error
/// is estimated where it is read, `emit::slot_error`). A unit adds about R to `k·x` and takes it
/// away again, so it rounds at R's magnitude, not at the result's: `-1000000 if indices == 0
/// else m` (m a mean of `1 / hist`) came out in steps of 0.125, 1/3 as 0.375 (review rv27b).
/// Bounded by 8 ulps of the unit's summed magnitudes (`2R + |k·x|`), as `slot_error` does.
pub(super) fn products_resolve(points: Option<&[f64]>, units: impl Iterator<Item = (f64, Iv)>) -> bool {
    let Some(p) = points.filter(|p| p.len() > 1) else { return true };
    let gap = p.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    let worst = units.filter(|(k, _)| *k != 0.0).map(|(k, iv)| 8.0 * f32::EPSILON as f64 * (2.0 * product_reach(k, iv) + k.abs() * iv.lo.abs().max(iv.hi.abs()))).fold(0.0, f64::max);
    worst < gap / 4.0
}

/// `k·x` where the one-hot dim `(is, p)` is on, 0 where it is off: `relu(±k·x - R·(1 - [is = p]))`,
/// one unit per sign `k·x` can take, exact in exact arithmetic for `|k·x| <= R` (R: [`product_reach`]);
/// in f32 it rounds at R's magnitude ([`products_resolve`] says whether the output tolerates that).
pub(super) fn product_units(mlp: &mut Mlp, (xs, iv): (SlotId, Iv), (is, p): (SlotId, usize), k: f64, out: SlotId) {
    if k == 0.0 {
        return;
    }
    // R: at least |k·x| with room for the input's rounding.
    let r = product_reach(k, iv);
    for sign in [1.0, -1.0] {
        let (lo, hi) = (sign * k * iv.lo, sign * k * iv.hi);
        if lo.max(hi) <= 0.0 {
            continue;
        }
        let c = mlp.hidden;
        mlp.hidden += 1;
        mlp.w_in.push(In::new(xs, 0, c, sign * k));
        mlp.w_in.push(In::new(is, p, c, r));
        mlp.b_in.push(-r);
        mlp.w_out.push(Out::new(c, out, 0, sign));
    }
}
