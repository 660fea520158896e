//! `length` in real-valued programs: s-ops that depend on it are known per (index, length) pair
//! of [`crate::positional::grid`] at compile time. One head computes 1/(length+1) (as the
//! finite-set lowering's `length` head does), and an MLP reading it and a one-hot of the
//! position writes a grid value where a block needs it: as a number (`length ^ 0.5`,
//! `length / 3` in arithmetic), or as the query side of a head whose selection depends on the
//! length (`select(indices, (indices % n) * n + ..., ==)`, `select(indices, n, <)`).

use super::*;
use crate::positional::{grid_mlp, pair_index};

/// Whether a query selects a key after itself: such a key is missing from shorter inputs, so
/// values counted over the selected keys (widths, known aggregates) depend on the length.
pub(super) fn looks_ahead(m: &[Vec<u32>]) -> bool {
    m.iter().enumerate().any(|(q, r)| r.last().is_some_and(|&k| k as usize > q))
}

/// The number of keys each query selects among those of an input of length l, per grid pair
/// (q, l); rows `m` are ascending.
pub(super) fn grid_counts(m: &[Vec<u32>], n: usize) -> Vec<Option<Atom>> {
    crate::positional::grid(n).iter().map(|&(q, l)| Some(Atom::Int(m[q as usize].partition_point(|&k| (k as i64) < l) as i64))).collect()
}

/// The most cells [`RealLowerer::grid_rows`] tabulates: (query, length) pairs times keys.
const MAX_GRID_CELLS: u128 = 1 << 27;

impl RealLowerer<'_> {
    /// A grid value, or a positional one when it is the same at every length a position exists.
    pub(super) fn grid_val(&self, t: Vec<Option<Atom>>) -> Val {
        let n = self.n;
        let mut pos = Vec::with_capacity(n);
        for i in 0..n {
            let first = &t[pair_index(i, i + 1)];
            if (i + 2..=n).any(|l| &t[pair_index(i, l)] != first) {
                return Val::Grid(t);
            }
            pos.push(first.clone());
        }
        Val::Pos(pos)
    }

    /// The value of a positional or grid s-op at position `i` of an input of length `l`.
    fn at(&self, x: NodeId, i: usize, l: usize) -> Option<Atom> {
        match self.vals.get(&x)? {
            Val::Pos(v) => v.get(i)?.clone(),
            Val::Grid(t) => t.get(pair_index(i, l))?.clone(),
            Val::Real(_) => None,
        }
    }

    fn is_grid(&self, x: NodeId) -> bool {
        matches!(self.vals.get(&x), Some(Val::Grid(_)))
    }

    /// A map whose operands are positional, at least one depending on `length`.
    pub(super) fn grid_map(&self, op: &MapOp, args: &[Operand]) -> Option<Val> {
        let sops: Vec<NodeId> = args.iter().filter_map(|a| if let Operand::Sop(s) = a { Some(*s) } else { None }).collect();
        if !sops.iter().any(|&s| self.is_grid(s)) || !sops.iter().all(|s| matches!(self.vals.get(s), Some(Val::Pos(_) | Val::Grid(_)))) {
            return None;
        }
        let pairs = crate::positional::grid(self.n);
        let t = pairs
            .iter()
            .map(|&(i, l)| {
                let mut row = Vec::with_capacity(args.len());
                for a in args {
                    row.push(match a {
                        Operand::Const(c) => c.clone(),
                        Operand::Sop(s) => self.at(*s, i as usize, l as usize)?,
                    });
                }
                raspc_lang::interp::apply_map(op, &row).ok()
            })
            .collect();
        Some(self.grid_val(t))
    }

    /// The `select` leaves of a selector tree.
    fn leaves(&self, sel: NodeId, out: &mut Vec<NodeId>) {
        match &self.g.node(sel).kind {
            NodeKind::Select { .. } => out.push(sel),
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                self.leaves(*a, out);
                self.leaves(*b, out);
            }
            NodeKind::SelectNot(a) => self.leaves(*a, out),
            _ => {}
        }
    }

    pub(super) fn grid_selector(&self, sel: NodeId) -> bool {
        let mut ls = vec![];
        self.leaves(sel, &mut ls);
        ls.iter().any(|&l| matches!(self.g.node(l).kind, NodeKind::Select { keys, queries, .. } if self.is_grid(keys) || self.is_grid(queries)))
    }

    fn sel_at(&self, sel: NodeId, k: usize, q: usize, l: usize) -> bool {
        match &self.g.node(sel).kind {
            NodeKind::Select { keys, queries, cmp } => match (self.at(*keys, k, l), self.at(*queries, q, l)) {
                (Some(a), Some(b)) => Atom::compare(&a, *cmp, &b).unwrap_or(false),
                _ => false,
            },
            NodeKind::SelectAnd(a, b) => self.sel_at(*a, k, q, l) && self.sel_at(*b, k, q, l),
            NodeKind::SelectOr(a, b) => self.sel_at(*a, k, q, l) || self.sel_at(*b, k, q, l),
            NodeKind::SelectNot(a) => !self.sel_at(*a, k, q, l),
            _ => false,
        }
    }

    /// Selection rows per grid pair (q, l), over keys 0..max_len (false from l on: those keys
    /// do not exist).
    pub(super) fn grid_rows(&self, sel: NodeId) -> Result<Vec<Vec<bool>>, Diagnostic> {
        let mut ls = vec![];
        self.leaves(sel, &mut ls);
        for &leaf in &ls {
            if let NodeKind::Select { keys, queries, .. } = self.g.node(leaf).kind {
                for x in [keys, queries] {
                    if !matches!(self.vals.get(&x), Some(Val::Pos(_) | Val::Grid(_))) {
                        // The usual diagnostic for a selector on input numbers.
                        self.side(leaf, x)?;
                    }
                }
            }
        }
        let n = self.n;
        // Every (query, length) pair by every key, refused before the work past 2^27 cells (at
        // max-len 1024, 5.4e8: 93 s and 5 GB before a refusal for the lengths' precision;
        // helper b19).
        let cells = (n as u128) * (n as u128 + 1) / 2 * n as u128;
        if cells > MAX_GRID_CELLS {
            return Err(self
                .err(sel, format!("this selector depends on `length`, and is tabulated for every (query, length) pair and key: {cells} cells at --max-len {n}, over {MAX_GRID_CELLS}"))
                .with_label("a selector that depends on the length")
                .with_note("a smaller --max-len (644 or less) fits"));
        }
        Ok(crate::positional::grid(n).iter().map(|&(q, l)| (0..n).map(|k| k < l as usize && self.sel_at(sel, k, q as usize, l as usize)).collect()).collect())
    }

    /// Aggregates under a selector that depends on `length`, and aggregates of positional
    /// values in programs that use `length` (computed over the keys that exist at each length).
    /// None: not such an aggregate.
    pub(super) fn grid_aggregate(&mut self, id: NodeId, label: &str, sel: NodeId, values: NodeId, default: &Atom, is_max: bool) -> Result<Option<Val>, Diagnostic> {
        let known = matches!(self.vals.get(&values), Some(Val::Pos(_) | Val::Grid(_)));
        if !self.grid_selector(sel) && !(known && (self.is_grid(values) || !self.grid.pairs.is_empty() || looks_ahead(&self.selector(sel)?))) {
            return Ok(None);
        }
        let rows = self.grid_rows(sel)?;
        let pairs = crate::positional::grid(self.n);
        if known {
            let d = atom_f64(default).unwrap_or(0.0);
            let mut t = Vec::with_capacity(pairs.len());
            for (&(_, l), row) in pairs.iter().zip(&rows) {
                let mut picked = vec![];
                for (k, _) in row.iter().enumerate().filter(|(_, b)| **b) {
                    match self.at(values, k, l as usize).as_ref().and_then(atom_f64) {
                        Some(x) => picked.push(x),
                        None => {
                            return Err(self
                                .err(values, format!("{} has no number at index {k} (length {l})", crate::names::describe(self.g, values)))
                                .with_label("averaged here")
                                .with_note("with real inputs, averaged values must be numbers"));
                        }
                    }
                }
                t.push(Some(Atom::Float(if picked.is_empty() {
                    d
                } else if is_max {
                    picked.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                } else {
                    picked.iter().sum::<f64>() / picked.len() as f64
                })));
            }
            return Ok(Some(self.grid_val(t)));
        }
        if atom_f64(default) != Some(0.0) {
            return Err(self.err(id, format!("the default of a real aggregate must be 0, got {}", default.repr())).with_label("here"));
        }
        let vex = self.ex_of(values)?;
        let v = self.affine_or_resident(&vex, &self.g.node(values).label.clone())?;
        // The head takes each row as the ascending list of the keys it selects.
        let lists: Vec<Vec<u32>> = rows.iter().map(|r| r.iter().enumerate().filter(|&(_, &b)| b).map(|(k, _)| k as u32).collect()).collect();
        let s = self.head(id, label, sel, &lists, &v, is_max, Some(&pairs))?;
        Ok(Some(Val::Real(Ex::Leaf(s))))
    }

    /// Numbers of a grid value (0 where it is undefined: the interpreter rejects every input of
    /// that length, so no input reads it).
    pub(super) fn grid_numbers(&self, id: NodeId, v: &[Option<Atom>]) -> Result<Vec<f64>, Diagnostic> {
        v.iter()
            .map(|a| match a {
                None => Ok(0.0),
                Some(a) => atom_f64(a).ok_or_else(|| {
                    self.err(id, format!("{} is not a number", crate::names::describe(self.g, id)))
                        .with_label("used as a number with real inputs")
                        .with_note("with real inputs, values computed from positions and `length` must be numbers where they meet the input")
                }),
            })
            .collect()
    }

    /// The position one-hot (positional) and the 1/(length+1) head, made once.
    fn grid_inputs(&mut self) -> (SlotId, SlotId) {
        if let Some(x) = self.grid_inputs {
            return x;
        }
        let n = self.n;
        let onehot = self.new_slot("position".into(), SlotEnc::Cat((0..n as i64).map(Atom::Int).collect()));
        for i in 0..n {
            let mut v = vec![0.0; n + 1];
            v[i + 1] = 1.0;
            self.positional.push(EmbedRow { slot: onehot, dim: i, values: v });
        }
        // Every key ties at score 0; BOS alone prefers itself, so its own value (1) is known.
        let inverse = SlotId(self.slots.len());
        self.slots.push(Slot { label: "length:inverse".into(), enc: SlotEnc::Num { points: None }, at_bos: vec![1.0], multi_hot: false });
        let err = Err2::gamma(n + 2, true);
        self.res.insert(inverse, Res { iv: Iv { lo: 1.0 / (n as f64 + 1.0), hi: 1.0 }, err });
        let head = Head {
            width: 1,
            q: vec![In::new(BOS, 0, 0, 1.0)],
            k: vec![In::new(BOS, 0, 0, 1.0)],
            v: vec![In::new(BOS, 0, 0, 1.0)],
            o: vec![Out::new(0, inverse, 0, 1.0)],
            gap: 1.0,
            qk_terms: 0,
        };
        self.push_block(BlockKind::Head(head), inverse, "length:inverse = 1/(1 + length)".into());
        self.grid_inputs = Some((onehot, inverse));
        (onehot, inverse)
    }

    /// A slot holding `table[p]` at grid pair p (dims of `enc`), written by one MLP; with the
    /// certified error of its values.
    pub(super) fn grid_table_slot(&mut self, id: NodeId, label: &str, enc: SlotEnc, table: &[Vec<f64>]) -> Result<(SlotId, Err2), Diagnostic> {
        let (onehot, inverse) = self.grid_inputs();
        let pairs = crate::positional::grid(self.n);
        // The ramps are flat within w/2 of every grid point: the head's error must stay inside
        // (decided before the MLP is built).
        let x_err = self.res[&inverse].err.max();
        let min_w = crate::positional::grid_min_w(self.n, &pairs, table);
        if min_w.is_finite() && x_err >= min_w / 4.0 {
            return Err(self
                .err(id, format!("{} depends on `length`, which cannot be told apart exactly at --max-len {}", crate::names::describe(self.g, id), self.n))
                .with_label("a function of the length")
                .with_note("a smaller --max-len keeps the lengths apart"));
        }
        let out = self.new_slot(label.to_string(), enc);
        let gm = grid_mlp(onehot, inverse, self.n, &pairs, table, out);
        // Each unit: a 3-term dot product (weights rounded to f32); then the sum of the units.
        let err = Err2::gamma(3, false) * gm.pre + Err2::gamma(gm.units + 1, false) * gm.sum;
        if matches!(self.slots[out].enc, SlotEnc::Cat(_)) && err.max() >= 1.0 / 16.0 {
            return Err(self
                .err(id, format!("the selection of {} depends on `length` too finely to compute exactly at --max-len {}", crate::names::describe(self.g, id), self.n))
                .with_label("a selector that depends on the length")
                .with_note("a smaller --max-len keeps the lengths apart"));
        }
        self.push_block(BlockKind::Mlp(gm.mlp), out, format!("{label} = table over (index, length)"));
        Ok((out, err))
    }

    /// A numerical slot holding a grid value (cached by its values).
    pub(super) fn grid_slot(&mut self, id: NodeId, label: &str, nums: &[f64]) -> Result<SlotId, Diagnostic> {
        let key: Vec<u64> = nums.iter().map(|x| x.to_bits()).collect();
        if let Some(&s) = self.grid_cache.get(&key) {
            return Ok(s);
        }
        let table: Vec<Vec<f64>> = nums.iter().map(|&x| vec![x]).collect();
        let (s, err) = self.grid_table_slot(id, label, SlotEnc::Num { points: None }, &table)?;
        let lo = nums.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = nums.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        self.res.insert(s, Res { iv: Iv { lo, hi }, err });
        // Exactly 0 at a position whose values are all 0 (it gets no unit).
        let n = self.n;
        self.zero.insert(s, (0..n).map(|i| (i + 1..=n).all(|l| nums[pair_index(i, l)] == 0.0)).collect());
        self.grid_cache.insert(key, s);
        Ok(s)
    }
}
