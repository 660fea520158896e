//! Chains of conditionals on one categorical s-op, lowered as one MLP.
//!
//! A host loop that picks one of several values by a condition on one s-op
//!
//! ```text
//! res = 0;
//! for v in range(16) { res = c(v) if indices == v else res; }
//! ```
//!
//! builds a chain `res_k = c_k if indices == k else res_(k-1)`. Lowered one conditional at a
//! time, each link reads the one before through a lookup: a layer per link (helper w29:
//! 10 layers, 317 k parameters at max-len 16). But every condition reads the same one-hot, so at
//! each of its values p the chain picks one branch, known in advance: the outermost link whose
//! condition holds at p, or the innermost `else`. One MLP writes that branch at each p, with
//! the units of a single conditional (`affine.rs`, `one_hot_conditional`).
//!
//! A link whose only user is the next link of such a chain is not lowered on its own: it waits
//! ([`Link`]), and the last link lowers the whole chain. A waiting link whose user turns out
//! not to continue it (another condition, a branch that is not simple) is lowered then, as it
//! would have been.

use super::affine::{number, product_units, products_resolve};
use super::*;
use raspc_lang::graph::MapOp;

/// A chain takes at most this many units in its MLP. Past it each link is lowered on its own,
/// a layer per link; this is 8 times the limit of a lookup because that is worse (review
/// rv30a: 96 links on `indices` at max-len 91 took 8,372 units, and as links 97 layers and
/// 364 M parameters).
const CHAIN_MAX_UNITS: usize = 8 * MAX_COMBINATIONS;

/// What a chain writes where one branch is chosen.
#[derive(Clone, Debug)]
pub(super) enum Arm {
    /// A constant.
    Const(Atom),
    /// A categorical slot, and the branch's value at each of its dims (None: none).
    Cat(SlotId, Vec<Option<Atom>>),
    /// `k·x + b` of a numerical slot x, with x's interval.
    Num(SlotId, Iv, f64, f64),
}

/// The `else` of a link: the link before it, or the chain's last branch.
#[derive(Clone, Debug)]
pub(super) enum Otherwise {
    Link(NodeId),
    Arm(Arm),
}

/// `then if cond else otherwise`, with `cond` a function of one categorical slot.
#[derive(Clone, Debug)]
pub(super) struct Link {
    /// The slot the condition reads, and the condition's truth at each of its dims.
    cond: SlotId,
    truth: Vec<bool>,
    then: Arm,
    otherwise: Otherwise,
}

/// What [`Lowerer::case_chain`] did with a node.
pub(super) enum Chain {
    /// Not a chain of two links or more: lower it as before.
    No,
    /// Its user lowers it with the rest of the chain.
    Waiting,
    /// The whole chain, in this slot.
    Lowered(SlotId),
}

impl Lowerer<'_> {
    /// The branch `a` of a conditional, when it is a constant, a categorical slot (or a map of
    /// one), or affine in one numerical slot.
    fn arm(&self, a: &Operand) -> Option<Arm> {
        let x = match a {
            Operand::Const(k) => return Some(Arm::Const(k.clone())),
            Operand::Sop(x) => *x,
        };
        if self.links.contains_key(&x) {
            return None;
        }
        match self.rep.get(&x)? {
            Rep::Slot(s) => match &self.slots[*s].enc {
                SlotEnc::Cat(v) if !self.cat_alts.contains_key(s) => Some(Arm::Cat(*s, v.iter().cloned().map(Some).collect())),
                SlotEnc::Cat(_) => None,
                SlotEnc::Num { .. } => Some(Arm::Num(*s, *self.ivs.get(&x)?, 1.0, 0.0)),
            },
            Rep::Inline => match self.leaf_list(x)[..] {
                [] => Some(Arm::Const(self.eval_inline(x, &HashMap::new())?)),
                [leaf] => {
                    let Some(Rep::Slot(ls)) = self.rep.get(&leaf) else { return None };
                    match &self.slots[*ls].enc {
                        SlotEnc::Cat(v) if !self.cat_alts.contains_key(ls) => Some(Arm::Cat(*ls, v.iter().map(|a| self.eval_inline(x, &HashMap::from([(leaf, a.clone())]))).collect())),
                        SlotEnc::Cat(_) => None,
                        SlotEnc::Num { .. } => {
                            let (l, k, b) = self.affine_coefficients(x)?;
                            (l == leaf && k.is_finite() && b.is_finite()).then_some(Arm::Num(*ls, *self.ivs.get(&leaf)?, k, b))
                        }
                    }
                }
                _ => None,
            },
        }
    }

    /// The categorical slot a condition reads and its truth at each dim, when it reads one.
    fn condition(&self, c: NodeId) -> Option<(SlotId, Vec<bool>)> {
        let [leaf] = self.leaf_list(c)[..] else { return None };
        let Some(&Rep::Slot(s)) = self.rep.get(&leaf) else { return None };
        let SlotEnc::Cat(vals) = &self.slots[s].enc else { return None };
        if self.cat_alts.contains_key(&s) {
            return None;
        }
        let truth = vals.iter().map(|v| self.eval_inline(c, &HashMap::from([(leaf, v.clone())])).map(|a| a.truthy())).collect::<Option<Vec<bool>>>()?;
        Some((s, truth))
    }

    /// The waiting links of the chain ending at `id`, outermost first.
    fn chain_nodes(&self, id: NodeId) -> Vec<NodeId> {
        let mut nodes = vec![];
        let mut at = Some(id);
        while let Some((x, l)) = at.and_then(|x| self.links.get(&x).map(|l| (x, l))) {
            nodes.push(x);
            at = match l.otherwise {
                Otherwise::Link(y) => Some(y),
                Otherwise::Arm(_) => None,
            };
        }
        nodes
    }

    /// A conditional: waits for its user, lowers the chain it ends, or is not part of one.
    pub(super) fn case_chain(&mut self, id: NodeId) -> Result<Chain, Diagnostic> {
        let NodeKind::Map { op: MapOp::Ternary, args } = self.g.node(id).kind.clone() else { return Ok(Chain::No) };
        let [t, Operand::Sop(c), e] = &args[..] else { return Ok(Chain::No) };
        let label = self.label(id);
        let plain = !self.opts.numerical.contains(label) && !self.opts.categorical.contains(label) && !self.inexact_nodes.contains(&id);
        let cond = if plain { self.condition(*c) } else { None };
        // A waiting `else` this conditional does not continue is lowered now.
        if let Operand::Sop(x) = e
            && let Some(l) = self.links.get(x)
            && cond.as_ref().is_none_or(|(s, _)| *s != l.cond)
        {
            self.flush(*x)?;
        }
        let Some((cond, truth)) = cond else { return Ok(Chain::No) };
        let Some(then) = self.arm(t) else {
            if let Operand::Sop(x) = e
                && self.links.contains_key(x)
            {
                self.flush(*x)?;
            }
            return Ok(Chain::No);
        };
        let otherwise = match e {
            Operand::Sop(x) if self.links.contains_key(x) => Otherwise::Link(*x),
            _ => match self.arm(e) {
                Some(a) => Otherwise::Arm(a),
                None => return Ok(Chain::No),
            },
        };
        let users = self.users_of(id);
        let continued = match users[..] {
            [u] if id != self.root => matches!(&self.g.node(u).kind, NodeKind::Map { op: MapOp::Ternary, args }
                if args[2] == Operand::Sop(id) && args[0] != Operand::Sop(id) && args[1] != Operand::Sop(id)),
            _ => false,
        };
        let linked = matches!(otherwise, Otherwise::Link(_));
        self.links.insert(id, Link { cond, truth, then, otherwise });
        if continued {
            self.set_rep(id, Rep::Inline);
            return Ok(Chain::Waiting);
        }
        if !linked {
            self.links.remove(&id);
            return Ok(Chain::No);
        }
        let chained = self.large_chain(id)?;
        match chained {
            Some(s) => Ok(Chain::Lowered(s)),
            None => {
                // Few combinations, too large as one MLP, or not exact in f32: each link as
                // before.
                let Some(Link { otherwise: Otherwise::Link(x), .. }) = self.links.remove(&id) else { return Err(self.internal(id, "a chain lost its link")) };
                self.flush_plainly(x)?;
                Ok(Chain::No)
            }
        }
    }

    /// Lowers a waiting chain ending at `x` whose user does not continue it.
    fn flush(&mut self, x: NodeId) -> Result<(), Diagnostic> {
        if let Some(s) = self.large_chain(x)? {
            self.set_rep(x, Rep::Slot(s));
            return Ok(());
        }
        self.flush_plainly(x)
    }

    /// [`Self::lower_chain`] for a chain of two links or more whose inputs combine to more
    /// than [`MAX_COMBINATIONS`] values. One whose inputs combine to fewer stays inline, as
    /// each of its links would (`n = table[key] if t == key else n` over `tokens` is a map of
    /// `tokens` that its reader's lookup fuses: as a chain it was an MLP more, 11 % more
    /// parameters in `idioms/long_add_ref.rasp`).
    fn large_chain(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let leaves = self.leaf_list(id);
        let combinations = self.combinations(&leaves);
        // (A number among them is made one-hot by the lookup: review rv30a, `-m * 3 + 1` of a
        // mean per link, 9 layers and 37.6 M parameters as links, 1 layer and 3,550 as a chain.)
        let number = leaves.iter().any(|l| self.is_num_slot(*l));
        if self.chain_nodes(id).len() < 2 || (combinations <= MAX_COMBINATIONS && !number) {
            return Ok(None);
        }
        self.lower_chain(id)
    }

    /// Lowers each link of a waiting chain on its own, the innermost first.
    fn flush_plainly(&mut self, x: NodeId) -> Result<(), Diagnostic> {
        let nodes = self.chain_nodes(x);
        for y in &nodes {
            self.links.remove(y);
        }
        for y in nodes.into_iter().rev() {
            self.lower_map_plain(y)?;
        }
        Ok(())
    }

    /// One MLP for the chain ending at `id`: at each dim of the conditions' slot, the branch
    /// the chain picks there. None when that would take more than [`CHAIN_MAX_UNITS`] units,
    /// or its products would not resolve the output's values in f32.
    fn lower_chain(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let nodes = self.chain_nodes(id);
        let links: Vec<Link> = nodes.iter().map(|x| self.links[x].clone()).collect();
        let Some(Otherwise::Arm(base)) = links.last().map(|l| l.otherwise.clone()) else { return Err(self.internal(id, "a chain's link is missing")) };
        let cs = links[0].cond;
        // (Every link reads the same one-hot: a link is only made with an `else` on its own.)
        if links.iter().any(|l| l.cond != cs) {
            return Ok(None);
        }
        let dims = self.slots[cs].enc.dims();
        let chosen: Vec<&Arm> = (0..dims).map(|p| links.iter().find(|l| l.truth[p]).map_or(&base, |l| &l.then)).collect();
        let count: usize = chosen
            .iter()
            .map(|a| match a {
                Arm::Const(_) => 1,
                Arm::Cat(_, v) => v.iter().flatten().count(),
                Arm::Num(..) => 3,
            })
            .sum();
        if count > CHAIN_MAX_UNITS {
            return Ok(None);
        }
        let Ok(vals) = self.finite(id) else { return Ok(None) };
        let label = self.label(id).to_string();
        let numeric = chosen.iter().any(|a| matches!(a, Arm::Num(..)));
        // Units before the slot: (p, the branch's slot and dim that must be on too, output
        // dim, weight); products `k·x + b` of numbers by p.
        let mut units = vec![];
        let mut products = vec![];
        for (p, a) in chosen.iter().enumerate() {
            match a {
                Arm::Num(xs, iv, k, b) => {
                    products.push((p, *xs, *iv, *k));
                    if *b != 0.0 {
                        units.push((p, None, 0, *b));
                    }
                }
                Arm::Const(a) => match (numeric, number(a)) {
                    (true, Some(k)) if k.is_finite() => units.push((p, None, 0, k)),
                    (true, _) => return Ok(None),
                    (false, _) => match index_of(&vals, a) {
                        Some(o) => units.push((p, None, o, 1.0)),
                        None => return Ok(None),
                    },
                },
                Arm::Cat(bs, values) => {
                    for (v, a) in values.iter().enumerate() {
                        let Some(a) = a else { continue };
                        // (The condition's own slot: on at p only.)
                        if *bs == cs && v != p {
                            continue;
                        }
                        let also = (*bs != cs).then_some((*bs, v));
                        match (numeric, number(a)) {
                            (true, Some(k)) if k.is_finite() => units.push((p, also, 0, k)),
                            (true, _) => return Ok(None),
                            (false, _) => match index_of(&vals, a) {
                                Some(o) => units.push((p, also, o, 1.0)),
                                None => return Ok(None),
                            },
                        }
                    }
                }
            }
        }
        units.retain(|u| u.3 != 0.0);
        let pg = if numeric { points_of(&vals) } else { None };
        if numeric && !products_resolve(pg.as_ref().map(|p| &p.0[..]), products.iter().map(|p| (p.3, p.2))) {
            return Ok(None);
        }
        let out = if numeric {
            self.new_slot(label.clone(), SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![0.0])
        } else {
            self.new_slot(label.clone(), SlotEnc::Cat(vals.clone()), vec![0.0; vals.len()])
        };
        if let Some((_, groups)) = pg {
            self.num_atoms.insert(out, groups);
        }
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        for (p, xs, iv, k) in products {
            product_units(&mut mlp, (xs, iv), (cs, p), k, out);
        }
        for (p, also, o, w) in units {
            let u = mlp.hidden;
            mlp.hidden += 1;
            mlp.w_in.push(In::new(cs, p, u, 2.0));
            match also {
                // Both on: `relu(2·[c = p] + 2·[b = v] - 3)`, tolerating a leak under 1/2.
                Some((bs, v)) => {
                    mlp.w_in.push(In::new(bs, v, u, 2.0));
                    mlp.b_in.push(-3.0);
                }
                None => mlp.b_in.push(-1.0),
            }
            mlp.w_out.push(Out::new(u, out, o, w));
        }
        let what = format!("{label} = a chain of {} conditionals on {}", links.len(), self.slots[cs].label);
        self.push_block(BlockKind::Mlp(mlp), out, what);
        // The chain is lowered: its links wait no more (review rv30a: a later conditional on
        // another s-op took them for its own, read their truth at its own one-hot's dims, and
        // gave wrong results or panicked).
        for x in &nodes {
            self.links.remove(x);
        }
        Ok(Some(out))
    }
}
