//! Scheduling, residual allocation, the soft-attention β, and emission of the checkpoint.

use crate::plan::*;
use raspc_checkpoint as ck;
use raspc_lang::Atom;
use std::collections::{BTreeMap, HashMap};

/// Most integers listed as the values of a numerical output known only as an integer range.
pub const MAX_INT_OUTPUTS: usize = 1 << 16;

/// Where each live block runs and where each live slot lives.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Per live block: its sublayer index (2l = attention of layer l, 2l+1 = MLP of layer l).
    pub time: BTreeMap<BlockId, usize>,
    pub layers: usize,
    /// Offset of each live slot.
    pub offset: BTreeMap<SlotId, usize>,
    pub d_model: usize,
    /// Per slot: the largest magnitude its values can have ([`magnitudes`]).
    pub mags: Vec<f64>,
    /// [`head_rounding`] of each slot asked for, computed once: every head writing into many
    /// sum slots asks for each of them, and each answer walks every head writing that slot
    /// (fuzzer fz23: a 5-statement program spent 40 s there).
    rounding: std::cell::RefCell<std::collections::HashMap<SlotId, (Option<f64>, f64)>>,
}

/// Keeps the blocks the output depends on and places each as early as its inputs allow
/// (as-soon-as-possible list scheduling: the depth is the longest chain of blocks, which no
/// schedule can beat). Heads of a layer run in parallel; MLPs of a layer are concatenated.
pub fn schedule(plan: &Plan) -> Schedule {
    let mut live = vec![false; plan.slots.len()];
    live[BOS.0] = true;
    live[TOK.0] = true;
    live[plan.output.slot.0] = true;
    let mut live_blocks = vec![false; plan.blocks.len()];
    for (b, block) in plan.blocks.iter().enumerate().rev() {
        if written(block).any(|s| live[s.0]) {
            live_blocks[b] = true;
            for &r in &block.reads {
                live[r.0] = true;
            }
        }
    }
    // Ready time of each slot: -1 for embeddings.
    let mut ready: Vec<i64> = vec![-1; plan.slots.len()];
    let mut time = BTreeMap::new();
    for (b, block) in plan.blocks.iter().enumerate() {
        if !live_blocks[b] {
            continue;
        }
        let after = block.reads.iter().map(|&r| ready[r.0]).max().unwrap_or(-1);
        let parity = match block.kind {
            BlockKind::Head(_) => 0,
            BlockKind::Mlp(_) => 1,
        };
        let mut t = after + 1;
        if t.rem_euclid(2) != parity {
            t += 1;
        }
        for s in written(block) {
            ready[s.0] = ready[s.0].max(t);
        }
        time.insert(BlockId(b), t as usize);
    }
    let layers = time.values().map(|t| t / 2 + 1).max().unwrap_or(0);
    let mut offset = BTreeMap::new();
    let mut d = 0;
    for (s, slot) in plan.slots.iter().enumerate() {
        if live[s] {
            offset.insert(SlotId(s), d);
            d += slot.enc.dims();
        }
    }
    let mags = magnitudes(plan, &time);
    Schedule { time, layers, offset, d_model: d, mags, rounding: Default::default() }
}

/// The largest magnitude each slot's values can have: 1 for a one-hot slot, the largest listed
/// value of a numerical slot with a finite set; otherwise what its writers can put there, in
/// block order (embeddings, the real input's bounds, a head's largest averaged value times its
/// output weight, an MLP unit's largest pre-activation times its gate and output weight; sum
/// slots add their writers), and at least 1. (It was 1 for every numerical slot without a
/// finite set: a mean of means of 1e8 got a budget of 1e-3 and a tolerance 24,000 times too
/// small, helper c6.)
fn magnitudes(plan: &Plan, time: &BTreeMap<BlockId, usize>) -> Vec<f64> {
    let listed = |s: &Slot| match &s.enc {
        SlotEnc::Num { points: Some(p) } if !p.is_empty() => Some(p.iter().fold(0.0f64, |m, x| m.max(x.abs()))),
        SlotEnc::Num { .. } => None,
        SlotEnc::Cat(_) => Some(1.0),
    };
    let mut acc = vec![0.0f64; plan.slots.len()];
    for EmbedRow { slot, values, .. } in plan.token_values.iter().chain(&plan.positional) {
        acc[slot.0] += values.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    }
    if let Some(r) = &plan.real_input {
        let widest = r.blocks.iter().fold(r.lo.abs().max(r.hi.abs()), |m, b| m.max(b.2.abs()).max(b.3.abs()));
        acc[r.slot.0] += widest;
    }
    for (&s, &(_, m)) in &plan.grid_reads {
        acc[s.0] = acc[s.0].max(m.abs());
    }
    let mag = |acc: &[f64], s: SlotId| listed(&plan.slots[s]).unwrap_or(acc[s.0].max(1.0));
    for &b in time.keys() {
        match &plan.blocks[b].kind {
            BlockKind::Head(h) => {
                let vmax = value_magnitude(|s| mag(&acc, s), h);
                for o in &h.o {
                    acc[o.slot.0] += o.w.abs() * vmax;
                }
            }
            BlockKind::Mlp(m) => {
                let mut pre: Vec<f64> = m.b_in.iter().map(|b| b.abs()).collect();
                pre.resize(m.hidden.max(pre.len()), 0.0);
                for i in &m.w_in {
                    if let Some(p) = pre.get_mut(i.col) {
                        *p += i.w.abs() * mag(&acc, i.slot);
                    }
                }
                if let Some(g) = &m.gate {
                    let mut gate: Vec<f64> = g.b.iter().map(|b| b.abs()).collect();
                    gate.resize(pre.len().max(gate.len()), 0.0);
                    for i in &g.w {
                        if let Some(p) = gate.get_mut(i.col) {
                            *p += i.w.abs() * mag(&acc, i.slot);
                        }
                    }
                    for (p, g) in pre.iter_mut().zip(&gate) {
                        *p *= g;
                    }
                }
                for o in &m.w_out {
                    acc[o.slot.0] += o.w.abs() * pre.get(o.col).copied().unwrap_or(0.0);
                }
            }
        }
    }
    (0..plan.slots.len()).map(|i| mag(&acc, SlotId(i))).collect()
}

/// Every slot a block writes: its own, and the sum slots it also writes into.
fn written(block: &Block) -> impl Iterator<Item = SlotId> + '_ {
    let outs: &[Out] = match &block.kind {
        BlockKind::Head(h) => &h.o,
        BlockKind::Mlp(m) => &m.w_out,
    };
    std::iter::once(block.writes).chain(outs.iter().map(|e| e.slot).filter(move |&s| s != block.writes))
}

/// Soft-attention inverse temperature derived from the construction (docs/compiler.md).
///
/// For a head whose attended keys score at least `gap` above every other key, softmax(β·s)
/// puts at most `(N+1)·exp(-β·gap)` weight on unattended keys, moving the output by at most
/// twice that times the largest value it carries. Scores of tied keys can also differ by the
/// small errors of upstream soft heads, which reweights them by at most `exp(2β·δ)`. β is the
/// smallest value (on a 2% grid) at which both effects stay under each head's budget: 1/20 of a
/// one-hot dim for categorical outputs; 1/8 of the smallest gap between possible values for
/// numerical ones (readers of those tolerate 1/4).
/// The largest magnitude a head's value vectors carry (a numerical slot's largest point times its
/// weight; 1 for one-hot dims).
fn head_vmax(sched: &Schedule, h: &crate::plan::Head) -> f64 {
    value_magnitude(|s| sched.mags[s.0], h)
}

/// The largest magnitude of a head's value vector, per column: the sum over the slots it reads
/// there of each slot's largest |w|·magnitude (one dim of a one-hot slot is nonzero at a time;
/// a real-valued head's value may add several slots in one column: review), the largest column.
fn value_magnitude(mag: impl Fn(SlotId) -> f64, h: &crate::plan::Head) -> f64 {
    let mut per: BTreeMap<(usize, SlotId), f64> = BTreeMap::new();
    for &In { slot, col, w, .. } in &h.v {
        let e = per.entry((col, slot)).or_default();
        *e = e.max(w.abs() * mag(slot));
    }
    let mut cols: BTreeMap<usize, f64> = BTreeMap::new();
    for ((col, _), m) in per {
        *cols.entry(col).or_default() += m;
    }
    cols.values().copied().fold(1e-12f64, f64::max)
}

/// A head's mean rounds in f32 by at most about this many ulps (f32::EPSILON) of the largest
/// value it averages: its c ≤ max_len + 1 terms w·v each round, and their sum, in any order,
/// by at most u·Σ|partial sums| ≤ u·(c + 1)/2·max|v| (u = EPSILON/2), plus the weight 1/c's own
/// rounding; never less than the 8 ulps charged before (helper e7: a mean of 113 values near
/// 2^20 was 27 ulps off, 0.85 of a tolerance that charged 8); 8 for a width's mean ([`bos_only`]).
/// `of_mean`: relative to the mean itself, for one-signed terms (every partial sum is at most
/// the mean, so a chain of c additions rounds by at most u·c·|mean|).
fn mean_ulps(plan: &Plan, h: &crate::plan::Head, of_mean: bool) -> f64 {
    let c = (plan.max_len + 1) as f64;
    if bos_only(h) {
        8.0
    } else if of_mean {
        (c / 2.0 + 2.0).max(8.0)
    } else {
        ((c + 1.0) / 4.0 + 2.0).max(8.0)
    }
}

/// A head whose values read the BOS dim alone (a width's 1/(w+1)): one term of its mean is
/// nonzero, and adding exact zeros does not round.
fn bos_only(h: &crate::plan::Head) -> bool {
    h.v.iter().all(|i| i.slot == BOS)
}

/// Error budget of a numerical head output without a finite set of values: 1e-3 relative to the
/// largest value it averages (soft attention's β is derived to stay within it; f32 rounding of
/// a mean of at most max-len + 1 values is far below it).
pub fn numeric_budget(vmax: f64) -> f64 {
    1e-3 * vmax.max(1.0)
}

/// The error a head's output may have under soft attention: 1/20 of a one-hot dim, 1/8 of the
/// smallest gap of a numerical output's values (or 1e-3 of what it averages when they are not
/// known), tightened for the sum slots it also writes into and for MLP units that read it scaled.
fn head_budget(plan: &Plan, sched: &Schedule, b: BlockId, h: &crate::plan::Head) -> f64 {
    let vmax = head_vmax(sched, h);
    let mut budget = match &plan.slots[plan.blocks[b].writes].enc {
        SlotEnc::Cat(_) => 0.05,
        SlotEnc::Num { points: Some(p) } if p.len() > 1 => min_gap(p) / 8.0,
        SlotEnc::Num { .. } => numeric_budget(vmax),
    };
    // Read by staircases over a grid of its possible values (means of integers).
    if let Some(&(gap, _)) = plan.grid_reads.get(&plan.blocks[b].writes) {
        budget = budget.min(gap / 8.0);
    }
    // Sum slots it also writes into: its share of their budget, scaled by its weight (an
    // integer output known only as a range has gap 1).
    for &Out { slot: t, w, .. } in &h.o {
        let gap = match &plan.slots[t].enc {
            SlotEnc::Num { points: Some(p) } if p.len() > 1 => Some(min_gap(p)),
            _ if t == plan.output.slot && plan.output_ints.is_some() => Some(1.0),
            _ => None,
        };
        if t != plan.blocks[b].writes
            && let Some(gap) = gap
        {
            let writers = head_writers(plan, sched, t).max(1) as f64;
            budget = budget.min(gap / 8.0 / writers / w.abs().max(1e-12));
        }
        // Read by staircases over some of its values (a sum of means compared with a constant,
        // `lower::threshold_points`): half of what f32 rounding leaves of a quarter of the gap
        // (`precision_problem` has checked that something is left), shared by its writers.
        if t != plan.blocks[b].writes
            && gap.is_none()
            && let Some(&(g, mag)) = plan.grid_reads.get(&t)
        {
            let room = g / 4.0 - 4.0 * f32::EPSILON as f64 * mag - head_rounding(plan, sched, t).1;
            let writers = head_writers(plan, sched, t).max(1) as f64;
            budget = budget.min((room / 2.0).max(f64::MIN_POSITIVE) / writers / w.abs().max(1e-12));
        }
    }
    // MLP units reading its output scaled (products with positions), or writing a number
    // scaled (a lookup unit of a one-hot dim passes the dim's error on times the number it
    // writes: fuzzing found 23.4385 for 23.4375 under soft attention, review rv23): the error
    // they pass on must stay within a quarter of their output's gap.
    let own = plan.blocks[b].writes;
    let one_hot = matches!(plan.slots[own].enc, SlotEnc::Cat(_));
    for &m in sched.time.keys() {
        if let BlockKind::Mlp(mlp) = &plan.blocks[m].kind {
            for &In { slot: r, col, w, .. } in &mlp.w_in {
                if r != own {
                    continue;
                }
                for &Out { col: c, slot: t, w: wo, .. } in &mlp.w_out {
                    let scale = w.abs() * if one_hot { wo.abs() } else { 1.0 };
                    if c == col
                        && scale > 1.0
                        && let SlotEnc::Num { points: Some(p) } = &plan.slots[t].enc
                        && p.len() > 1
                    {
                        budget = budget.min(min_gap(p) / 8.0 / scale);
                    }
                }
            }
        }
    }
    budget
}

/// How much an error in what an MLP reads can grow in what it writes, per layer: a lookup unit
/// adds up the one-hot dims of its inputs (two for a map of two s-ops), so a soft head's small
/// error roughly doubles through each MLP after it (measured: a chain of 24 shift-and-add layers
/// went wrong under soft attention with β derived per head alone).
const LAYER_GROWTH: f64 = 2.0;

pub fn derive_beta(plan: &Plan, sched: &Schedule, max_len: usize) -> f64 {
    let n = (max_len + 1) as f64;
    // Per layer, how much its MLP can grow an error: a lookup unit adds the errors of every
    // s-op it reads (at least LAYER_GROWTH; helper c6: maps of 8 shifted copies, 12 layers
    // deep, decoded wrong under soft attention in f64 with a growth of 2 assumed).
    let mut growth = vec![LAYER_GROWTH; sched.layers];
    for (&b, &t) in &sched.time {
        if let BlockKind::Mlp(m) = &plan.blocks[b].kind {
            let mut read: HashMap<usize, Vec<SlotId>> = HashMap::new();
            for i in m.w_in.iter().chain(m.gate.iter().flat_map(|g| &g.w)) {
                let r = read.entry(i.col).or_default();
                if i.slot > TOK && !r.contains(&i.slot) {
                    r.push(i.slot);
                }
            }
            let fan_in = read.values().map(Vec::len).max().unwrap_or(0) as f64;
            growth[t / 2] = growth[t / 2].max(fan_in);
        }
    }
    let mut heads = vec![];
    for (&b, &t) in &sched.time {
        if let BlockKind::Head(h) = &plan.blocks[b].kind {
            let vmax = head_vmax(sched, h);
            // The MLPs before this head's layer grow the errors it reads; those from its layer
            // on grow the error it leaves.
            let before: f64 = growth[..t / 2].iter().product();
            let after: f64 = growth[t / 2..].iter().product();
            let budget = head_budget(plan, sched, b, h) / after;
            heads.push((h.gap, vmax, budget, h.qk_terms.max(1) as f64, before));
        }
    }
    if heads.is_empty() {
        return 1.0;
    }
    let min_gap_all = heads.iter().map(|h| h.0).fold(f64::INFINITY, f64::min);
    let mut beta = 1.0f64;
    while beta < 1e4 {
        // Largest one-hot error any soft head leaves behind.
        let eps_cat = 2.0 * n * (-beta * min_gap_all).exp();
        let ok = heads.iter().all(|&(gap, vmax, budget, terms, grown)| {
            let leak = 2.0 * vmax * n * (-beta * gap).exp();
            let tilt = vmax * ((2.0 * beta * 2.0 * eps_cat * grown * terms).exp() - 1.0);
            leak + tilt <= budget
        });
        if ok {
            break;
        }
        beta *= 1.02;
    }
    (beta * 1000.0).ceil() / 1000.0
}

/// Number of live heads writing into slot `t`.
fn head_writers(plan: &Plan, sched: &Schedule, t: SlotId) -> usize {
    heads_writing(plan, sched, t).count()
}

/// The live heads that write into slot `s`.
fn heads_writing<'a>(plan: &'a Plan, sched: &'a Schedule, s: SlotId) -> impl Iterator<Item = &'a crate::plan::Head> + 'a {
    sched.time.keys().filter_map(move |&b| match &plan.blocks[b].kind {
        BlockKind::Head(h) if h.o.iter().any(|o| o.slot == s) => Some(h),
        _ => None,
    })
}

/// An estimate of the f32 (and soft attention) error of a numerical slot without a finite set:
/// heads contribute the budget β is derived for (relative to what they average), MLP units the
/// rounding of their pre-activations (8 ulps of the summed magnitudes) plus the error of what
/// they read when that has no finite set, each times the weight it is written with.
fn slot_error(plan: &Plan, sched: &Schedule, s: SlotId, depth: usize) -> f64 {
    slot_error_memo(plan, sched, s, depth, &mut std::collections::HashMap::new())
}

/// [`slot_error`] with each slot's error computed once (the plan is a DAG, but the same slot is
/// reached along many paths: without the memo the walk is exponential in the depth).
fn slot_error_memo(plan: &Plan, sched: &Schedule, s: SlotId, depth: usize, memo: &mut std::collections::HashMap<SlotId, f64>) -> f64 {
    if let Some(&e) = memo.get(&s) {
        return e;
    }
    // An MLP reads inputs with a finite set of values exactly (staircases and one-hot units are
    // built to tolerate their errors); a head averages a number as it is, listed or not (its
    // error passes on: review). `averaged`: read by a head.
    let mut read_err = |t: SlotId, averaged: bool| -> f64 {
        match &plan.slots[t].enc {
            SlotEnc::Cat(_) => 0.0,
            SlotEnc::Num { points: Some(_) } if !averaged => 0.0,
            SlotEnc::Num { .. } if depth < 8 => slot_error_memo(plan, sched, t, depth + 1, memo),
            // Past the depth followed: as large as the value itself (review: a fixed 1.0 was on
            // scale only while every such slot was taken to be at most 1).
            SlotEnc::Num { .. } => sched.mags[t.0],
        }
    };
    let u = f32::EPSILON as f64;
    let mut e = 0.0;
    for &b in sched.time.keys() {
        match &plan.blocks[b].kind {
            BlockKind::Head(h) => {
                for &Out { slot: t, w, .. } in &h.o {
                    if t == s {
                        // A mean of values each off by at most e is off by at most e.
                        let read = h.v.iter().map(|i| i.w.abs() * read_err(i.slot, true)).fold(0.0f64, f64::max);
                        let vmax = head_vmax(sched, h);
                        e += w.abs() * (head_budget(plan, sched, b, h) + mean_ulps(plan, h, false) * u * vmax + read);
                    }
                }
            }
            BlockKind::Mlp(m) => {
                for &Out { col: c, slot: t, w, .. } in &m.w_out {
                    if t != s {
                        continue;
                    }
                    let (mut mag, mut err) = (m.b_in.get(c).map_or(0.0, |b| b.abs()), 0.0);
                    for &In { slot: r, col, w: wi, .. } in &m.w_in {
                        if col == c {
                            mag += wi.abs() * sched.mags[r.0];
                            err += wi.abs() * read_err(r, false);
                        }
                    }
                    e += w.abs() * (err + 8.0 * u * mag);
                }
            }
        }
    }
    memo.insert(s, e);
    e
}

/// The first numerical slot without a finite set of values that staircases read over a grid of
/// its values (steps across gaps of at least `gap`, each tolerating a quarter of it) and whose
/// error (soft attention's budgets, the f32 rounding of the blocks that write it and of what
/// they read) may exceed that quarter. (Slots with a finite set of values: their heads' budgets
/// are derived from the gaps of that set, and f32 is checked by [`precision_problem`].) A plan
/// with one is not emitted: the compiler keeps another plan, or refuses (helper w23: two sums
/// of 16 selector widths each, weighted 1..16, written straight into their difference: the
/// f32 rounding of 32 staircase MLPs' outputs, times the weights, is bounded by 43, not 1/4).
pub fn staircase_problem(plan: &Plan, sched: &Schedule) -> Option<PrecisionProblem> {
    plan.grid_reads.iter().filter(|(s, _)| !matches!(plan.slots[**s].enc, SlotEnc::Num { points: Some(_) })).find_map(|(&s, &(gap, magnitude))| {
        let error = slot_error(plan, sched, s, 0);
        (error.is_nan() || error > gap / 4.0).then(|| PrecisionProblem { slot: s, label: plan.slots[s].label.clone(), gap, tol: gap / 4.0, error, magnitude })
    })
}

/// A numerical slot whose values f32 cannot tell apart: the slot, the gap its readers must
/// resolve, the f32 error it may carry and its largest value.
#[derive(Clone, Debug)]
pub struct PrecisionProblem {
    pub slot: SlotId,
    pub label: String,
    pub gap: f64,
    /// The error the readers tolerate: half the gap (the output), a quarter (staircases).
    pub tol: f64,
    pub error: f64,
    pub magnitude: f64,
}

/// What no β changes is f32: the value itself, the sum of its parts and the readout round (a
/// few u·|v|, v the values either side of a step), and a head's mean rounds its sum (about
/// 8u·max|value| per head). Per slot: whether one head writes it whose averaged terms all have
/// one sign (its mean is no larger than the values it averages, so its rounding scales with
/// the value at the step, not the largest value anywhere), and the heads' rounding at the
/// largest values.
fn head_rounding(plan: &Plan, sched: &Schedule, s: SlotId) -> (Option<f64>, f64) {
    if let Some(&r) = sched.rounding.borrow().get(&s) {
        return r;
    }
    let r = head_rounding_of(plan, sched, s);
    sched.rounding.borrow_mut().insert(s, r);
    r
}

/// [`head_rounding`], computed.
fn head_rounding_of(plan: &Plan, sched: &Schedule, s: SlotId) -> (Option<f64>, f64) {
    let u = f32::EPSILON as f64;
    let writers: Vec<&crate::plan::Head> = heads_writing(plan, sched, s).collect();
    let terms = |h: &crate::plan::Head| -> Vec<f64> {
        h.v.iter()
            .flat_map(|&In { slot, w, .. }| match &plan.slots[slot].enc {
                SlotEnc::Num { points: Some(p) } => p.iter().map(|x| w * x).collect::<Vec<_>>(),
                SlotEnc::Cat(_) => vec![w],
                SlotEnc::Num { points: None } => vec![f64::NAN],
            })
            .collect()
    };
    // One head of one-signed terms: its rounding in ulps of the mean itself ([`mean_ulps`]).
    let one_signed = match writers.as_slice() {
        [h] if {
            let t = terms(h);
            t.iter().all(|&x| x >= 0.0) || t.iter().all(|&x| x <= 0.0)
        } =>
        {
            Some(mean_ulps(plan, h, true))
        }
        _ => None,
    };
    let at_largest = writers.iter().map(|h| h.o.iter().filter(|o| o.slot == s).map(|o| o.w.abs() * mean_ulps(plan, h, false) * u * head_vmax(sched, h)).sum::<f64>()).sum();
    (one_signed, at_largest)
}

/// The heads' share of the output's f32 error at a value of magnitude `mag`, given the output
/// slot's [`head_rounding`]: at the value itself when one head writes it from one-signed terms,
/// else at the largest values the heads average.
fn heads_error((one_signed, at_largest): (Option<f64>, f64), mag: f64) -> f64 {
    match one_signed {
        Some(ulps) => ulps * f32::EPSILON as f64 * mag,
        None => at_largest,
    }
}

/// The largest f32 error of an output with listed values (at its largest value): the
/// checkpoint's tolerance is at least this, so that `run` snaps a large value that f32 holds
/// to within less than the gap to its neighbours, though not within half the smallest gap
/// anywhere (0 and 1 beside 10000000; [`precision_problem`] checks each pair at its own
/// magnitude).
pub fn output_rounding(plan: &Plan, sched: &Schedule) -> f64 {
    match &plan.output.points {
        Some(p) if p.len() > 1 => {
            // What `precision_problem` charges at the largest value: a few u·|v| for the value
            // and the readout, plus the heads' rounding.
            let mag = p.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            4.0 * f32::EPSILON as f64 * mag + heads_error(head_rounding(plan, sched, plan.output.slot), mag) + scaled_means_rounding(plan, sched)
        }
        _ => 0.0,
    }
}

/// The rounding of head means that an MLP writing the output reads at weight at most 1 (not a
/// staircase's step, which reads at 1/width and absorbs it) and writes scaled: a mean's f32
/// rounding (about 8u·max|value|, more under soft attention, whose weights are rounded too)
/// times the unit's output weight (helper s: a prefix count `m * (indices + 1) - 1` at max-len
/// 64 was 3.05e-5 off under soft attention, against a tolerance of 3.0e-5 that counted the
/// output's own rounding only).
fn scaled_means_rounding(plan: &Plan, sched: &Schedule) -> f64 {
    let u = f32::EPSILON as f64;
    // The ulps of the largest mean of a head writing r (None: no head writes it).
    let head_written = |r: SlotId| heads_writing(plan, sched, r).map(|h| mean_ulps(plan, h, false)).reduce(f64::max);
    let mut worst = 0.0f64;
    for &b in sched.time.keys() {
        let BlockKind::Mlp(m) = &plan.blocks[b].kind else { continue };
        for &Out { col: c, slot: t, w, .. } in &m.w_out {
            if t != plan.output.slot {
                continue;
            }
            let mut e = 0.0;
            for &In { slot: r, col, w: wi, .. } in &m.w_in {
                if col == c
                    && wi.abs() <= 1.0
                    && let SlotEnc::Num { points: Some(p) } = &plan.slots[r].enc
                    && let Some(ulps) = head_written(r)
                {
                    e += wi.abs() * ulps * u * p.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                }
            }
            worst = worst.max(w.abs() * e);
        }
    }
    worst
}

/// The first numerical slot, the output or one a staircase reads, whose values lie closer
/// together than f32 holds them: the residual stream, the weights and the readout are f32, so a
/// value `v` is held to within a few `u·|v|` (u = 2^-23: the value, the sum of its parts, the
/// readout), plus the rounding of the means heads write into it. (Soft attention's budgets are
/// not charged: β is derived from the same gaps, and lookups are built to tolerate them.) The
/// output decodes to the nearest listed value, so each pair of neighbours is checked at its own
/// magnitude (the checkpoint's tolerance covers the largest rounding: [`output_rounding`]); a
/// staircase steps across a quarter of its gap. `indices * 10000000 + tokens_int` (7.0e7 + 1 is 7.0e7 in f32) or
/// the mean of the floats 0.1 and 0.1000001 would otherwise compile to a model that gives a
/// neighbouring value.
pub fn precision_problem(plan: &Plan, sched: &Schedule) -> Option<PrecisionProblem> {
    let u = f32::EPSILON as f64;
    let magnitude = |s: SlotId| match &plan.slots[s].enc {
        SlotEnc::Num { points: Some(p) } => p.iter().fold(0.0f64, |m, x| m.max(x.abs())),
        SlotEnc::Num { .. } => plan.grid_reads.get(&s).map_or(0.0, |g| g.1),
        SlotEnc::Cat(_) => 0.0,
    };
    let head_rounding = |s: SlotId| head_rounding(plan, sched, s);
    let problem = |s: SlotId, gap: f64, tol: f64, mag: f64, heads: f64| -> Option<PrecisionProblem> {
        let error = 4.0 * u * mag + heads;
        (error.is_nan() || error >= tol).then(|| PrecisionProblem { slot: s, label: plan.slots[s].label.clone(), gap, tol, error, magnitude: mag })
    };
    let out = &plan.output;
    if out.values.is_none() && plan.output_bound.is_none() {
        match (&out.points, plan.output_ints) {
            // Each pair of neighbouring values at its own magnitude (1/6 apart near 1 is fine
            // beside 100000).
            (Some(p), _) if p.len() > 1 => {
                let rounding = head_rounding(out.slot);
                let found = p.windows(2).find_map(|w| {
                    let (gap, mag) = (w[1] - w[0], w[0].abs().max(w[1].abs()));
                    problem(out.slot, gap, gap / 2.0, mag, heads_error(rounding, mag))
                });
                if found.is_some() {
                    return found;
                }
            }
            // At the largest integer (the slot lists no values: `magnitude` alone read 0 there and
            // the refusal said "at magnitude 0": review rv20).
            (_, Some((lo, hi))) => {
                if let Some(found) = problem(out.slot, 1.0, 0.5, magnitude(out.slot).max(lo.abs()).max(hi.abs()), head_rounding(out.slot).1) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    plan.grid_reads.iter().find_map(|(&s, &(gap, _))| problem(s, gap, gap / 4.0, magnitude(s), head_rounding(s).1))
}

fn min_gap(p: &[f64]) -> f64 {
    p.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min)
}

/// Everything emission needs besides the plan.
#[derive(Clone, Debug)]
pub struct EmitInputs<'a> {
    pub vocab: &'a [Atom],
    pub max_len: usize,
    pub causal: bool,
    pub program_hash: String,
}

fn enc_json(slot: &crate::plan::Slot, values_json: Option<Vec<serde_json::Value>>) -> ck::Encoding {
    match &slot.enc {
        SlotEnc::Cat(v) if slot.multi_hot => ck::Encoding::MultiHot { values: v.iter().map(Atom::to_json).collect() },
        SlotEnc::Cat(v) => ck::Encoding::Categorical { values: v.iter().map(Atom::to_json).collect() },
        SlotEnc::Num { .. } => ck::Encoding::Numerical { values: values_json },
    }
}

/// Builds the checkpoint: dense tensors, config, layout, output spec.
/// Fails only on a broken invariant of the plan (a value missing from its own slot).
pub fn emit(plan: &Plan, sched: &Schedule, inp: &EmitInputs) -> Result<ck::Checkpoint, String> {
    let num_values = &plan.num_values;
    let d = sched.d_model;
    let off = |s: SlotId| sched.offset[&s];
    let bos_dim = off(BOS);
    // Residual rows a block reads, with BOS compensation: readers see zeros at BOS.
    let dense_in = |entries: &[In], cols: usize| -> Vec<f32> {
        let mut m = vec![0f64; d * cols];
        for &In { slot: s, dim: i, col: c, w } in entries {
            m[(off(s) + i) * cols + c] += w;
            if let Some(&z) = plan.slots[s].at_bos.get(i)
                && z != 0.0
            {
                m[bos_dim * cols + c] -= z * w;
            }
        }
        m.into_iter().map(|x| x as f32).collect()
    };
    let dense_out = |entries: &[Out], cols: usize| -> Vec<f32> {
        let mut m = vec![0f64; cols * d];
        for &Out { col: c, slot: s, dim: i, w } in entries {
            // Sum slots nobody reads are not allocated.
            if let Some(&o) = sched.offset.get(&s) {
                m[c * d + o + i] += w;
            }
        }
        m.into_iter().map(|x| x as f32).collect()
    };
    let mut tensors = BTreeMap::new();
    let mut layers = vec![];
    for l in 0..sched.layers {
        if crate::cancel::cancelled() {
            return Err(crate::cancel::INTERRUPTED.to_string());
        }
        let mut heads = vec![];
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        let (mut head_info, mut mlp_info) = (vec![], vec![]);
        let info = |b: BlockId, hidden: Option<[usize; 2]>| {
            let block = &plan.blocks[b];
            // The slot it writes into: its own, or, when its own is folded into a sum slot and
            // not allocated (`d = a - b`: a's head writes d directly), the first allocated one.
            let writes = written(block).find(|s| sched.offset.contains_key(s)).unwrap_or(block.writes);
            let mut reads: Vec<String> = block.reads.iter().map(|&r| plan.slots[r].label.clone()).collect();
            // The BOS dim is read by every MLP (it switches each unit off at BOS, below) and by
            // a head reading a slot that is nonzero at BOS (its compensation, above): said so, as
            // the weights show (helper e10: MLPs' reads left it out, heads' did not).
            let ins: Vec<&In> = match &block.kind {
                BlockKind::Head(h) => h.q.iter().chain(&h.k).chain(&h.v).collect(),
                BlockKind::Mlp(_) => vec![],
            };
            let mlp = matches!(block.kind, BlockKind::Mlp(_));
            if !block.reads.contains(&BOS) && (mlp || ins.iter().any(|e| plan.slots[e.slot].at_bos.get(e.dim).is_some_and(|&z| z != 0.0))) {
                reads.insert(0, plan.slots[BOS].label.clone());
            }
            ck::BlockInfo { what: block.what.clone(), reads, writes: plan.slots[writes].label.clone(), hidden }
        };
        for (&b, &t) in &sched.time {
            match &plan.blocks[b].kind {
                BlockKind::Head(h) if t == 2 * l => {
                    heads.push(h);
                    head_info.push(info(b, None));
                }
                BlockKind::Mlp(m) if t == 2 * l + 1 => {
                    let base = mlp.hidden;
                    mlp_info.push(info(b, Some([base, base + m.hidden])));
                    mlp.w_in.extend(m.w_in.iter().map(|&e| In { col: e.col + base, ..e }));
                    mlp.w_out.extend(m.w_out.iter().map(|&e| Out { col: e.col + base, ..e }));
                    mlp.b_in.extend(&m.b_in);
                    // Gated layers: plain units get the constant gate 1.
                    if m.gate.is_some() || mlp.gate.is_some() {
                        let g = mlp.gate.get_or_insert_with(|| Gate { w: vec![], b: vec![1.0; base] });
                        match &m.gate {
                            Some(mg) => {
                                g.w.extend(mg.w.iter().map(|&e| In { col: e.col + base, ..e }));
                                g.b.extend(&mg.b);
                            }
                            None => g.b.extend(std::iter::repeat_n(1.0, m.hidden)),
                        }
                    }
                    mlp.hidden += m.hidden;
                }
                _ => {}
            }
        }
        for (h, head) in heads.iter().enumerate() {
            let dh = head.width;
            for (name, entries) in [("w_q", &head.q), ("w_k", &head.k), ("w_v", &head.v)] {
                tensors.insert(ck::names::head(l, h, name), ck::Tensor { shape: vec![d, dh], data: dense_in(entries, dh) });
            }
            tensors.insert(ck::names::head(l, h, "w_o"), ck::Tensor { shape: vec![dh, d], data: dense_out(&head.o, dh) });
        }
        let mlp_cfg = if mlp.hidden > 0 {
            let hdn = mlp.hidden;
            let mut w_in = dense_in(&mlp.w_in, hdn);
            // Every hidden unit is off at BOS: inputs read zero there, so the pre-activation is
            // the bias; push it below zero through the BOS dim.
            for (c, &b) in mlp.b_in.iter().enumerate() {
                w_in[bos_dim * hdn + c] -= (b.max(0.0) + 1.0) as f32;
            }
            tensors.insert(ck::names::mlp(l, "w_in"), ck::Tensor { shape: vec![d, hdn], data: w_in });
            tensors.insert(ck::names::mlp(l, "b_in"), ck::Tensor { shape: vec![hdn], data: mlp.b_in.iter().map(|&x| x as f32).collect() });
            tensors.insert(ck::names::mlp(l, "w_out"), ck::Tensor { shape: vec![hdn, d], data: dense_out(&mlp.w_out, hdn) });
            tensors.insert(ck::names::mlp(l, "b_out"), ck::Tensor::zeros(&[d]));
            let kind = match &mlp.gate {
                Some(g) => {
                    tensors.insert(ck::names::mlp(l, "w_gate"), ck::Tensor { shape: vec![d, hdn], data: dense_in(&g.w, hdn) });
                    tensors.insert(ck::names::mlp(l, "b_gate"), ck::Tensor { shape: vec![hdn], data: g.b.iter().map(|&x| x as f32).collect() });
                    ck::MlpKind::Reglu
                }
                None => ck::MlpKind::Relu,
            };
            Some(ck::MlpConfig { kind, hidden: hdn })
        } else {
            None
        };
        layers.push(ck::LayerConfig { heads: heads.iter().map(|h| h.width).collect(), mlp: mlp_cfg, head_info, mlp_info });
    }
    // Embeddings: id 0 is BOS; ids 1.. are the vocabulary in the order given (real-valued
    // inputs: one token, whose number is added along `embed.value`).
    let real_vocab = [Atom::Str("<real>".into())];
    let vocab: &[Atom] = if plan.real_input.is_some() { &real_vocab } else { inp.vocab };
    let vsize = vocab.len() + 1;
    let mut tok = vec![0f32; vsize * d];
    tok[bos_dim] = 1.0;
    for (i, a) in vocab.iter().enumerate() {
        let row = (i + 1) * d;
        tok[row + off(TOK)] = 1.0;
        if plan.real_input.is_some() {
            continue;
        }
        if let Some(ts) = plan.tokens
            && let Some(&o) = sched.offset.get(&ts)
        {
            match &plan.slots[ts].enc {
                SlotEnc::Cat(vals) => {
                    let j = vals.iter().position(|v| v == a).ok_or_else(|| format!("token {} is missing from the token slot", a.repr()))?;
                    tok[row + o + j] = 1.0;
                }
                SlotEnc::Num { .. } => tok[row + o] = a.as_f64().unwrap_or(0.0) as f32,
            }
        }
    }
    for EmbedRow { slot, dim, values } in &plan.token_values {
        if let Some(&o) = sched.offset.get(slot) {
            for (i, &v) in values.iter().enumerate().take(vocab.len()) {
                tok[(i + 1) * d + o + dim] += v as f32;
            }
        }
    }
    tensors.insert(ck::names::TOKEN_EMBEDDING.into(), ck::Tensor { shape: vec![vsize, d], data: tok });
    let mut pos = vec![0f32; (inp.max_len + 1) * d];
    if let Some(is) = plan.indices
        && let Some(&o) = sched.offset.get(&is)
    {
        for p in 1..=inp.max_len {
            match &plan.slots[is].enc {
                SlotEnc::Cat(_) => pos[p * d + o + p - 1] = 1.0,
                SlotEnc::Num { .. } => pos[p * d + o] = (p - 1) as f32,
            }
        }
    }
    for EmbedRow { slot, dim, values } in &plan.positional {
        if let Some(&o) = sched.offset.get(slot) {
            for (p, &v) in values.iter().enumerate().take(inp.max_len + 1) {
                pos[p * d + o + dim] = v as f32;
            }
        }
    }
    tensors.insert(ck::names::POSITION_EMBEDDING.into(), ck::Tensor { shape: vec![inp.max_len + 1, d], data: pos });
    let real_input = plan.real_input.as_ref().map(|RealInput { slot, lo, hi, blocks }| {
        let mut v = vec![0f32; d];
        if let Some(&o) = sched.offset.get(slot) {
            v[o] = 1.0;
        }
        tensors.insert(ck::names::VALUE_EMBEDDING.into(), ck::Tensor { shape: vec![d], data: v });
        ck::RealInput { lo: *lo, hi: *hi, blocks: blocks.iter().map(|&(start, end, lo, hi)| ck::RealBlock { start, end, lo, hi }).collect() }
    });
    // Readout.
    let out = &plan.output;
    let o = off(out.slot);
    let (readout_dims, readout, out_enc, tolerance) = match (&out.values, &out.map) {
        (Some(values), Some(map)) => {
            let k = values.len();
            let mut r = vec![0f32; d * k];
            for (i, v) in map.iter().enumerate() {
                if let Some(v) = v {
                    // (As value sets hold them: 0.0 and -0.0 are one value, fuzzer fz23:
                    // `tokens_float * 0` over [-1, 1] was an internal error.)
                    let j = values.iter().position(|x| x.same_value(v)).ok_or_else(|| format!("output value {} is missing from the readout", v.repr()))?;
                    r[(o + i) * k + j] = 1.0;
                }
            }
            (k, r, ck::Encoding::Categorical { values: values.iter().map(Atom::to_json).collect() }, 0.0)
        }
        _ => {
            let mut r = vec![0f32; d];
            r[o] = 1.0;
            // A head writing the output without a finite value set: the budget β was derived
            // for, relative to the values it averages (not a fixed 1e-3, which f32 rounding of
            // large means exceeds).
            let head_budget = sched.time.keys().find_map(|&b| match &plan.blocks[b].kind {
                BlockKind::Head(h) if plan.blocks[b].writes == out.slot => Some(numeric_budget(head_vmax(sched, h))),
                _ => None,
            });
            let (tol, values) = match (&out.points, plan.output_bound, plan.output_ints) {
                (_, Some(b), _) => (b, None),
                // Half the smallest gap, or f32's rounding at the largest value if more (each
                // value is held to within less than half the gap to its neighbours: checked).
                (Some(p), _, _) if p.len() > 1 => ((min_gap(p) / 2.0).max(output_rounding(plan, sched)), None),
                // Integers: within 1/2 the nearest integer is the value, listed when there are at
                // most 2^16 of them. As for listed integers, `precision_problem` checks f32 rounding
                // of the output at its largest (which keeps it below about 2^20) and the MLP units'
                // own rounding is not charged; past 2^16 the tolerance was the derived error, which
                // charges every unit's worst rounding at once: 0.5 at max-len 58 jumped to 27,440 at
                // 59 for a weighted count, whose outputs are exact.
                // The values the value set lists come first: whole floats stay floats (fuzzer
                // fz23: `length / length` is 1.0, and `run` printed 1).
                (_, _, Some((lo, hi))) => (
                    0.5,
                    num_values.get(&out.slot).cloned().or_else(|| (hi - lo < MAX_INT_OUTPUTS as f64).then(|| (lo as i64..=hi as i64).map(serde_json::Value::from).collect::<Vec<_>>())),
                ),
                _ => (head_budget.unwrap_or(0.0).max(slot_error(plan, sched, out.slot, 0)).max(1e-6), None),
            };
            (1, r, enc_json(&plan.slots[out.slot], values.or_else(|| num_values.get(&out.slot).cloned())), tol)
        }
    };
    tensors.insert(ck::names::READOUT.into(), ck::Tensor { shape: vec![d, readout_dims], data: readout });
    let layout = ck::Layout {
        sops: sched
            .offset
            .iter()
            .map(|(&s, &offset)| ck::SopLayout {
                label: plan.slots[s].label.clone(),
                offset,
                encoding: enc_json(&plan.slots[s], num_values.get(&s).cloned()),
                parts: plan.parts.get(&s).map(|p| p.iter().filter_map(|t| sched.offset.get(t).copied()).collect()).unwrap_or_default(),
            })
            .collect(),
    };
    let mut vocab_entries = vec![ck::VocabEntry { token: serde_json::Value::Null, id: 0 }];
    vocab_entries.extend(vocab.iter().enumerate().map(|(i, a)| ck::VocabEntry { token: a.to_json(), id: i + 1 }));
    let beta = derive_beta(plan, sched, inp.max_len);
    if let Some(p) = staircase_problem(plan, sched) {
        return Err(format!("`{}` may be off by {:e}, more than a quarter of the gap {:e} its staircases step across", p.label, p.error, p.gap));
    }
    let min_gap_heads = sched
        .time
        .keys()
        .filter_map(|&b| match &plan.blocks[b].kind {
            BlockKind::Head(h) => Some(h.gap),
            _ => None,
        })
        .fold(1.0f64, f64::min);
    let config = ck::ModelConfig {
        d_model: d,
        layers,
        vocab: vocab_entries,
        bos_id: 0,
        max_seq_len: inp.max_len,
        causal: inp.causal,
        attention: ck::AttentionConfig { semantics: ck::AttentionSemantics::Hard, tie_tolerance: min_gap_heads / 4.0, soft_beta: beta },
        readout_dims,
        real_input,
    };
    let output = ck::OutputSpec { label: plan.output_label.clone(), encoding: out_enc, tolerance };
    Ok(ck::Checkpoint { config, layout, output, program_hash: inp.program_hash.clone(), compiler_version: format!("raspc {}", env!("CARGO_PKG_VERSION")), tensors })
}
