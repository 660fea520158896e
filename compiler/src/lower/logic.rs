//! Long `and`s and `or`s of booleans, lowered as one threshold over their terms.
//!
//! A host loop that narrows a flag step by step (`run = run and (shift(tokens, k) == tokens)`)
//! builds a chain of `and`s. Where each step's flag has a slot of its own (a selector reads it),
//! the next step reads it through a lookup, a layer per step (helper w29: 16 layers for 15
//! steps). But an `and` of m booleans is 1 exactly when all m are: with each term's truth a sum
//! of one-hot dims (0 or 1), `relu(2·S - (2m - 1))` of their sum S is the `and`, and
//! `relu(2·S) - relu(2·S - 1)` the `or`. So the `and` at step k reads the k terms directly, one
//! MLP after the deepest of them.

use super::*;
use raspc_lang::ast::BinOp;
use raspc_lang::graph::MapOp;

/// At most this many terms in one threshold.
const MAX_TERMS: usize = 256;

impl Lowerer<'_> {
    /// The operands of the same operator under `id`, gathered through nested `and`s (or `or`s)
    /// of booleans; whether one of those nested nodes has a slot of its own.
    fn logic_terms(&self, id: NodeId, op: BinOp) -> Option<(Vec<NodeId>, bool)> {
        let mut terms = vec![];
        let mut through_slot = false;
        let mut stack = vec![id];
        let mut seen = BTreeSet::new();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            let nested = match &self.g.node(x).kind {
                NodeKind::Map { op: MapOp::Binary(o), args } if *o == op && args.len() == 2 && self.boolean(x) => args
                    .iter()
                    .map(|a| match a {
                        Operand::Sop(s) => Some(*s),
                        Operand::Const(_) => None,
                    })
                    .collect::<Option<Vec<NodeId>>>(),
                _ => None,
            };
            match nested {
                Some(args) => {
                    if x != id && matches!(self.rep.get(&x), Some(Rep::Slot(_))) {
                        through_slot = true;
                    }
                    stack.extend(args.into_iter().rev());
                }
                _ => {
                    if !self.boolean(x) {
                        return None;
                    }
                    terms.push(x);
                }
            }
            if terms.len() > MAX_TERMS {
                return None;
            }
        }
        Some((terms, through_slot))
    }

    /// Whether every value `id` can take is a boolean.
    fn boolean(&self, id: NodeId) -> bool {
        matches!(self.sets.get(&id), Some(ValueSet::Finite(s)) if !s.is_empty() && s.iter().all(|a| matches!(a, Atom::Bool(_))))
    }

    /// The one-hot dims where a boolean s-op is true: of its slot, or of the one slot an inline
    /// map of it reads. None: it needs a slot of its own first.
    fn truth_dims(&self, t: NodeId) -> Option<(SlotId, Vec<usize>)> {
        let dims = |s: SlotId, truth: &dyn Fn(&Atom) -> Option<bool>| -> Option<(SlotId, Vec<usize>)> {
            let SlotEnc::Cat(vals) = &self.slots[s].enc else { return None };
            if self.cat_alts.contains_key(&s) {
                return None;
            }
            let mut on = vec![];
            for (d, v) in vals.iter().enumerate() {
                if truth(v)? {
                    on.push(d);
                }
            }
            Some((s, on))
        };
        match self.rep.get(&t)? {
            Rep::Slot(s) => dims(*s, &|a| Some(a.truthy())),
            Rep::Inline => {
                let [leaf] = self.leaf_list(t)[..] else { return None };
                let Some(&Rep::Slot(s)) = self.rep.get(&leaf) else { return None };
                dims(s, &|a| self.eval_inline(t, &HashMap::from([(leaf, a.clone())])).map(|r| r.truthy()))
            }
        }
    }

    /// `a and b and ...` (or `or`) of three booleans or more, when the plain lowering would
    /// read a nested one's slot (a layer per nesting) or enumerate too many combinations: one
    /// MLP over the terms' one-hots, each term with a slot of its own first when it has none.
    pub(super) fn logic_threshold(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let NodeKind::Map { op: MapOp::Binary(op @ (BinOp::And | BinOp::Or)), .. } = self.g.node(id).kind.clone() else { return Ok(None) };
        let label = self.label(id).to_string();
        if self.opts.no_logic_threshold || self.opts.numerical.contains(&label) || self.opts.categorical.contains(&label) || self.inexact_nodes.contains(&id) || !self.boolean(id) {
            return Ok(None);
        }
        let Some((terms, through_slot)) = self.logic_terms(id, op) else { return Ok(None) };
        if terms.len() < 3 {
            return Ok(None);
        }
        let Ok(vals) = self.finite(id) else { return Ok(None) };
        if vals.len() != 2 {
            return Ok(None);
        }
        if !through_slot {
            let mut leaves = BTreeSet::new();
            for t in &terms {
                self.leaves_of(*t, &mut leaves);
            }
            if self.combinations(&leaves) <= MAX_COMBINATIONS {
                return Ok(None);
            }
        }
        // Each term's truth as one-hot dims; a term that needs its own slot gets it (an MLP per
        // term, all in one layer when their inputs are). A term that cannot have a one-hot (a
        // slot of its own stored as a number: `--encoding T=numerical`, review rv30b) leaves the
        // node to the lookup.
        let needs_slot = |lw: &Self, t: NodeId| lw.truth_dims(t).is_none();
        if terms.iter().any(|&t| {
            needs_slot(self, t)
                && (!matches!(self.rep.get(&t), Some(Rep::Inline)) || self.opts.numerical.contains(self.label(t)) || !matches!(self.sets.get(&t), Some(ValueSet::Finite(_))))
        }) {
            return Ok(None);
        }
        let mut reads = vec![];
        for &t in &terms {
            if needs_slot(self, t) {
                let s = self.materialise(t)?;
                self.set_rep(t, Rep::Slot(s));
            }
            match self.truth_dims(t) {
                Some(r) => reads.push(r),
                None => return Ok(None),
            }
        }
        self.logic_threshold_used = true;
        let m = terms.len() as f64;
        let (f, t) = match (index_of(&vals, &Atom::Bool(false)), index_of(&vals, &Atom::Bool(true))) {
            (Some(f), Some(t)) => (f, t),
            _ => return Ok(None),
        };
        let out = self.new_slot(label.clone(), SlotEnc::Cat(vals.clone()), vec![0.0; vals.len()]);
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        // A unit `relu(c·S + k·tok + b)` writing `w` to the output's dim `o`.
        let mut unit = |c: f64, k: f64, b: f64, o: usize, w: f64| {
            let u = mlp.hidden;
            mlp.hidden += 1;
            for (s, dims) in &reads {
                for &d in dims {
                    mlp.w_in.push(In::new(*s, d, u, c));
                }
            }
            if k != 0.0 {
                mlp.w_in.push(In::new(TOK, 0, u, k));
            }
            mlp.b_in.push(b);
            mlp.w_out.push(Out::new(u, out, o, w));
        };
        // S counts the true terms (0..m on exact one-hots; a leak under 1/2 in S changes
        // nothing). At the BOS position every one-hot is 0, and so is every unit.
        match op {
            BinOp::And => {
                // True: S = m. False: S <= m - 1, `clamp(2m - 2S, 0, 1)`.
                unit(2.0, 0.0, -(2.0 * m - 1.0), t, 1.0);
                unit(-2.0, 2.0 * m, 0.0, f, 1.0);
                unit(-2.0, 2.0 * m - 1.0, 0.0, f, -1.0);
            }
            _ => {
                // True: S >= 1, `clamp(2S, 0, 1)`. False: S = 0.
                unit(2.0, 0.0, 0.0, t, 1.0);
                unit(2.0, 0.0, -1.0, t, -1.0);
                unit(-2.0, 1.0, 0.0, f, 1.0);
            }
        }
        let word = if op == BinOp::And { "and" } else { "or" };
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = {word} of {} terms", terms.len()));
        Ok(Some(out))
    }
}
