//! Piecewise-linear groups of MLP units: the structured MLP path of the CPU forward pass.
//!
//! Compiled real-valued programs (U above all) spend most of their hidden units on one-input
//! piecewise-linear functions: exp and 1/x interpolated over thousands of breakpoints, each unit
//! `relu(α_u·z + β_u)` of one linear form `z` of the residual stream, with a constant gate. At a
//! position where every *constant* dim (one no block writes, with the same embedding at every
//! non-BOS position: a "1" dim) holds its usual value, such a group adds to each of its output
//! columns `o` the piecewise-linear function
//!
//! `F_o(z) = Σ_u g_u·w_out[u, o]·relu(α_u·z + β_u)`,
//!
//! which is affine between consecutive breakpoints `-β_u / α_u`. At load the breakpoints are
//! sorted and each piece's slope and intercept summed (compensated sums in f64); a position
//! then costs one binary search and one `a·z + b` per column instead of a product per unit.
//!
//! The value differs from a unit-by-unit evaluation only by rounding: it is `F_o` at the rounded
//! `z`, from the piece's slope and intercept (compensated f64 sums of the units' terms) in f64,
//! then rounded to the model's precision: off from `F_o(z)` by about `ε₆₄·(|a·z| + |b|)` plus
//! that last rounding. Every unit's pre-activation `α_u·z + β_u` carries at least the rounding
//! of `z` scaled by `|α_u|` in a unit-by-unit evaluation, and each unit's terms are charged
//! their own rounding, so this error is within what the compiler's certificate charges for
//! those units (it bounds each unit's dot product and the output sum separately). (With foreign
//! weights, a unit whose pre-activation would overflow the model's precision while `z` does not
//! is evaluated in f64 here, so the result may be finite where a unit-by-unit pass overflows.) Positions where a constant dim differs (BOS, a
//! sequence without BOS first) or where some `z` is not finite take the unit-by-unit path.

use super::Real;
use std::collections::HashMap;

/// Groups with fewer units stay on the unit-by-unit path (a search costs more than they do).
const MIN_UNITS: usize = 16;
/// Groups writing more columns stay there too (pieces × columns coefficients each).
const MAX_COLS: usize = 64;

/// A Neumaier-compensated running sum.
#[derive(Clone, Copy, Default)]
struct Sum {
    s: f64,
    c: f64,
}

impl Sum {
    fn add(&mut self, x: f64) {
        let t = self.s + x;
        self.c += if self.s.abs() >= x.abs() { (self.s - t) + x } else { (x - t) + self.s };
        self.s = t;
    }
    fn value(self) -> f64 {
        self.s + self.c
    }
}

/// A unit of a group: slope α in `z`, intercept β, and its output weights (dim, weight·gate).
type Term = (f64, f64, Vec<(u32, f64)>);

/// One group: the units that are functions of the same linear form.
#[derive(Debug, Clone)]
pub(super) struct Group<T> {
    /// `z = Σ v_r·x_r` (residual dim, weight), summed in dim order in the model's precision.
    v: Vec<(u32, T)>,
    /// The units' breakpoints in `z`, increasing.
    breaks: Vec<f64>,
    /// The residual dims the group writes.
    cols: Vec<u32>,
    /// Where each of `cols` stands in the MLP's list of written dims ([`Part::index_outputs`]).
    at: Vec<u32>,
    /// Piece `k` (the `z` with exactly `k` breakpoints below them) and column `i`:
    /// `ab[k * cols.len() + i] = (a, b)`, the column gets `a·z + b`.
    ab: Vec<(f64, f64)>,
}

/// The piecewise-linear groups of one MLP.
#[derive(Debug, Clone)]
pub(super) struct Part<T> {
    /// Constant dims (the caller passes those the MLP reads) and the value they hold at every
    /// non-BOS position.
    konst: Vec<(u32, T)>,
    pub(super) groups: Vec<Group<T>>,
    /// The hidden units in no group (increasing), evaluated unit by unit.
    pub(super) rest: Vec<usize>,
}

/// An MLP's weights as the checkpoint stores them (row-major, `[d, hid]` in, `[hid, d]` out).
pub(super) struct Weights<'a> {
    pub d: usize,
    pub hid: usize,
    pub w_in: &'a [f32],
    pub b_in: &'a [f32],
    /// `(w_gate, b_gate)` of a gated (ReGLU) MLP: unit = relu(in)·gate.
    pub gate: Option<(&'a [f32], &'a [f32])>,
    pub w_out: &'a [f32],
}

impl<T: Real> Part<T> {
    /// The groups of an MLP, given its constant dims (`konst`: dim and its usual value); None
    /// when no group has [`MIN_UNITS`] units.
    pub(super) fn find(w: &Weights, konst: &[(u32, T)]) -> Option<Part<T>> {
        let (d, hid) = (w.d, w.hid);
        if hid == 0 {
            return None;
        }
        let mut usual: Vec<Option<f64>> = vec![None; d];
        for &(r, y) in konst {
            usual[r as usize] = Some(y.to_f64());
        }
        // Per unit: its non-constant inputs, its bias with the constant inputs folded in, and
        // its gate (None when it reads a non-constant dim).
        let mut inputs: Vec<Vec<(u32, f32)>> = vec![vec![]; hid];
        let mut bias: Vec<Sum> = w.b_in.iter().map(|&b| Sum { s: b as f64, c: 0.0 }).collect();
        for (r, (row, y)) in w.w_in.chunks_exact(hid).zip(&usual).enumerate() {
            for (u, &wv) in row.iter().enumerate() {
                if wv != 0.0 {
                    match y {
                        Some(y) => bias[u].add(wv as f64 * y),
                        None => inputs[u].push((r as u32, wv)),
                    }
                }
            }
        }
        let mut gate: Vec<Option<Sum>> = match w.gate {
            Some((_, bg)) => bg.iter().map(|&b| Some(Sum { s: b as f64, c: 0.0 })).collect(),
            None => vec![Some(Sum { s: 1.0, c: 0.0 }); hid],
        };
        if let Some((wg, _)) = w.gate {
            for r in 0..d {
                for (u, &wv) in wg[r * hid..(r + 1) * hid].iter().enumerate() {
                    if wv != 0.0 {
                        match (usual[r], gate[u].as_mut()) {
                            (Some(y), Some(g)) => g.add(wv as f64 * y),
                            _ => gate[u] = None,
                        }
                    }
                }
            }
        }
        // Units whose inputs are proportional have the same key: each weight over the first
        // one (the same real quotient rounds to the same f64).
        let mut index: HashMap<Vec<(u32, u64)>, usize> = HashMap::new();
        let mut members: Vec<Vec<usize>> = vec![];
        for u in 0..hid {
            let Some(&(_, first)) = inputs[u].first() else { continue };
            if gate[u].is_none() {
                continue;
            }
            let key: Vec<(u32, u64)> = inputs[u].iter().map(|&(r, wv)| (r, (wv as f64 / first as f64).to_bits())).collect();
            let g = *index.entry(key).or_insert_with(|| {
                members.push(vec![]);
                members.len() - 1
            });
            members[g].push(u);
        }
        let mut grouped = vec![false; hid];
        let mut groups = vec![];
        for units in members.into_iter().filter(|m| m.len() >= MIN_UNITS) {
            let lead = &inputs[units[0]];
            let v0 = lead[0].1 as f64;
            // Per unit: slope α in z, intercept β, and its output weights (gate folded in).
            let mut terms: Vec<Term> = vec![];
            let mut cols: Vec<u32> = vec![];
            for &u in &units {
                let alpha = inputs[u][0].1 as f64 / v0;
                let g = gate[u].map_or(1.0, Sum::value);
                let outs: Vec<(u32, f64)> = (0..d).filter(|&c| w.w_out[u * d + c] != 0.0).map(|c| (c as u32, w.w_out[u * d + c] as f64 * g)).collect();
                cols.extend(outs.iter().map(|&(c, _)| c));
                terms.push((alpha, bias[u].value(), outs));
            }
            cols.sort_unstable();
            cols.dedup();
            if cols.len() > MAX_COLS {
                continue;
            }
            let mut order: Vec<usize> = (0..terms.len()).collect();
            let brk = |i: usize| -terms[i].1 / terms[i].0;
            order.sort_by(|&a, &b| brk(a).total_cmp(&brk(b)).then(a.cmp(&b)));
            let (n, nc) = (order.len(), cols.len());
            let mut ab = vec![(0.0, 0.0); (n + 1) * nc];
            for (i, &c) in cols.iter().enumerate() {
                let coef = |t: usize| terms[t].2.iter().find(|&&(o, _)| o == c).map_or(0.0, |&(_, w)| w);
                // Units with α < 0 are active below their breakpoint: suffix sums.
                let mut neg = vec![(0.0, 0.0); n + 1];
                let (mut na, mut nb) = (Sum::default(), Sum::default());
                for k in (0..n).rev() {
                    let t = order[k];
                    if terms[t].0 < 0.0 {
                        na.add(coef(t) * terms[t].0);
                        nb.add(coef(t) * terms[t].1);
                    }
                    neg[k] = (na.value(), nb.value());
                }
                // Units with α > 0 are active above it: prefix sums.
                let (mut pa, mut pb) = (Sum::default(), Sum::default());
                for k in 0..=n {
                    ab[k * nc + i] = (pa.value() + neg[k].0, pb.value() + neg[k].1);
                    if k < n {
                        let t = order[k];
                        if terms[t].0 > 0.0 {
                            pa.add(coef(t) * terms[t].0);
                            pb.add(coef(t) * terms[t].1);
                        }
                    }
                }
            }
            for &u in &units {
                grouped[u] = true;
            }
            groups.push(Group { v: lead.iter().map(|&(r, wv)| (r, T::from_f32(wv))).collect(), breaks: order.iter().map(|&t| brk(t)).collect(), at: vec![], cols, ab });
        }
        if groups.is_empty() {
            return None;
        }
        Some(Part { konst: konst.to_vec(), groups, rest: (0..hid).filter(|&u| !grouped[u]).collect() })
    }

    /// Adds every group's output at a position with residual row `x` to `out`. False (nothing
    /// added) when a constant dim differs from its usual value or some `z` is not finite: the
    /// caller then evaluates every unit.
    #[inline]
    pub(super) fn eval(&self, x: &[T], out: &mut [T], zs: &mut Vec<f64>) -> bool {
        if !self.eval_z(x, zs) {
            return false;
        }
        for (g, &z) in self.groups.iter().zip(zs.iter()) {
            let k = g.breaks.partition_point(|&b| b < z);
            let nc = g.cols.len();
            for (&c, &(a, b)) in g.cols.iter().zip(&g.ab[k * nc..(k + 1) * nc]) {
                out[c as usize] += T::from_f64(a * z + b);
            }
        }
        true
    }

    /// [`Self::eval`] into the block `out[k * BLOCK + b]` of the MLP's written dims (`k` the
    /// dim's place in its list, [`Self::index_outputs`]), for position `b` of the block. `last`
    /// keeps each group's last `z` (its bits; NaN, which no finite `z` is, at first) and the
    /// values it gave: a position with the same `z` (U's exp and reciprocal outside their block:
    /// most positions) adds them again, the same numbers, without the search. Cleared by the
    /// caller for each MLP.
    #[inline]
    pub(super) fn eval_block(&self, x: &[T], out: &mut [T], b: usize, zs: &mut Vec<f64>, last: &mut Vec<(u64, Vec<T>)>) -> bool {
        if !self.eval_z(x, zs) {
            return false;
        }
        if last.len() != self.groups.len() {
            last.clear();
            last.resize(self.groups.len(), (f64::NAN.to_bits(), vec![]));
        }
        for ((g, &z), (zb, vals)) in self.groups.iter().zip(zs.iter()).zip(last.iter_mut()) {
            if *zb != z.to_bits() {
                let k = g.breaks.partition_point(|&b| b < z);
                let nc = g.cols.len();
                vals.clear();
                vals.extend(g.ab[k * nc..(k + 1) * nc].iter().map(|&(a, b)| T::from_f64(a * z + b)));
                *zb = z.to_bits();
            }
            for (&at, &v) in g.at.iter().zip(vals.iter()) {
                out[at as usize * super::BLOCK + b] += v;
            }
        }
        true
    }

    /// Each group's `z` into `zs`; false when a constant dim differs from its usual value or
    /// some `z` is not finite.
    #[inline]
    fn eval_z(&self, x: &[T], zs: &mut Vec<f64>) -> bool {
        if !self.konst.iter().all(|&(r, y)| x[r as usize].bits() == y.bits()) {
            return false;
        }
        zs.clear();
        for g in &self.groups {
            let mut z = T::ZERO;
            for &(r, wv) in &g.v {
                z += x[r as usize] * wv;
            }
            if !z.is_finite() {
                return false;
            }
            zs.push(z.to_f64());
        }
        true
    }

    /// Records where each group's written dims stand in `out_cols` (increasing, holding them).
    pub(super) fn index_outputs(&mut self, out_cols: &[u32]) {
        for g in &mut self.groups {
            g.at = g.cols.iter().map(|c| out_cols.partition_point(|x| x < c) as u32).collect();
        }
    }

    /// Renumbers the residual dims read and written (`perm[old] = new`), keeping every sum's order.
    pub(super) fn renumber(&mut self, perm: &[u32]) {
        for (r, _) in &mut self.konst {
            *r = perm[*r as usize];
        }
        for g in &mut self.groups {
            for (r, _) in &mut g.v {
                *r = perm[*r as usize];
            }
            for c in &mut g.cols {
                *c = perm[*c as usize];
            }
        }
    }

    /// Units in groups.
    pub(super) fn grouped(&self) -> usize {
        self.groups.iter().map(|g| g.breaks.len()).sum()
    }
}
