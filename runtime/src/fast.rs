//! The CPU forward pass that [`Model`](crate::Model) uses by default on the CPU: plain Rust
//! loops over the checkpoint's nonzero weights, one sequence at a time, no tensor library.
//!
//! Compiled checkpoints are very sparse (0.2–7 % of the weights are nonzero) and so is their
//! residual stream (one-hot encodings), so every product here skips zeros on both sides:
//!
//! - every weight matrix is stored as compressed rows (input dim -> its nonzero outputs), and
//!   `x · W` visits only the rows whose input is nonzero;
//! - a head keeps only the query/key dims that both `W_Q` and `W_K` use, and the value dims that
//!   both `W_V` and `W_O` use (the others add exact zeros); keys are stored transposed, so a
//!   query's scores are one `axpy` over the keys per nonzero query dim (a one-hot query selects
//!   one row of key scores: a lookup);
//! - keys are written sparsely and also listed by dim (which keys a nonzero weight reaches in
//!   each query/key dim); a hard-attention query with at most 4 nonzero dims (an `==` head on
//!   one-hot encodings, with or without a BOS dim) whose dims list at most half the visible keys
//!   scores only those keys, every other key getting the same all-zero-key score, so it costs
//!   its matches, not a scan of the key row (it falls back to the scan when that score ties the
//!   maximum);
//! - hard attention sums the values of the kept keys only (usually one: an index lookup);
//! - a head whose `W_Q` and `W_K` read only dims that no earlier block (nor the value
//!   embedding) writes has scores that depend on the embeddings alone, found at load
//!   ([`HeadKind`]): if those dims have no position embedding (non-causal models), the scores
//!   are a `[vocab, vocab]` table and every query with the same token gets the same attention
//!   row, computed once per token and sequence (`length`, `histogram`, `count`, `sort`'s
//!   widths); if every token but BOS embeds them alike, then in a sequence with BOS at position
//!   0 only the kept keys depend on the positions alone: computed once per length as key
//!   intervals per query and cached (`shift_by`, `frac_prevs`' `<=` on indices), a long interval
//!   summed as a difference of prefix sums of the values (O(1) per query instead of O(len));
//!   other sequences (BOS elsewhere) take the general path, and so do heads past 512
//!   positions whose queries have more than 512 distinct vectors (each distinct one scans the
//!   key row once); a pattern that keeps one key per query (U's gathers) reads that key's value
//!   vector directly;
//! - MLP hidden units that are zero after the ReLU are skipped in `W_out`;
//! - units that are one-input piecewise-linear functions of a common linear form (U's exp and
//!   reciprocal) are evaluated as groups: a binary search among their breakpoints and one
//!   `a·z + b` per output dim ([`pl`]);
//! - an MLP is a function of the dims it reads: its output for an input seen before in the
//!   forward pass is looked up instead of computed (the last 4 distinct inputs are compared
//!   first, then a hash map), while inputs repeat often enough.
//!
//! The arithmetic is the candle path's, term for term: the same products in the same precision
//! (f32, or f64 on the stored f32 weights), `max - tie_tolerance` thresholds, `1/count` weights,
//! `exp(β·(s - max))` softmax, biases added after the sums. Only the order in which the nonzero
//! terms of a sum are added may differ (zeros are skipped), so results agree with the candle path
//! to rounding (`tests/tests/fast_runtime.rs` states the tolerance); prefix sums change the
//! order of a long mean's terms, within the same bound, and the piecewise-linear groups round
//! once where the units round each (see [`pl`]). The large buffers are sized once and kept for
//! the next call, never allocated per operation. Long batches are split over threads when the work pays
//! for them (see [`FastModel::forward`]).

mod pl;

use crate::{Attention, RuntimeError};
use raspc_checkpoint::{Checkpoint, CheckpointError, MlpKind};
use std::ops::{Add, AddAssign, Div, Mul, Sub};

/// The arithmetic of a forward pass: f32 or f64.
pub trait Real: Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + AddAssign + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    /// The largest finite value, as an f64.
    const MAX: f64;
    fn from_f32(x: f32) -> Self;
    fn from_f64(x: f64) -> Self;
    fn from_usize(x: usize) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn is_finite(self) -> bool;
    /// The bit pattern (memo keys).
    fn bits(self) -> u64;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const MAX: f64 = f32::MAX as f64;
    fn from_f32(x: f32) -> f32 {
        x
    }
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn from_usize(x: usize) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const MAX: f64 = f64::MAX;
    fn from_f32(x: f32) -> f64 {
        x as f64
    }
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn from_usize(x: usize) -> f64 {
        x as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// A matrix stored by rows, nonzeros only. Row `i` of the original `[rows, cols]` matrix is
/// `col[start..end]` / `val[start..end]` for the entry `(i, start, end)` of `nz_rows`; rows
/// without a nonzero are not listed.
#[derive(Debug, Clone)]
struct Sparse<T> {
    cols: usize,
    nz_rows: Vec<(u32, u32, u32)>,
    col: Vec<u32>,
    val: Vec<T>,
}

impl<T: Real> Sparse<T> {
    /// From a row-major `[rows, cols]` matrix, keeping only the columns `keep` (renumbered in
    /// order) when given.
    fn new(data: &[f32], rows: usize, cols: usize, keep: Option<&[usize]>) -> Sparse<T> {
        let all: Vec<usize>;
        let keep = match keep {
            Some(k) => k,
            None => {
                all = (0..cols).collect();
                &all
            }
        };
        let (mut nz_rows, mut col, mut val) = (vec![], vec![], vec![]);
        for r in 0..rows {
            let start = col.len();
            // `data` has rows * cols entries (shapes are validated at load).
            let row = &data[r * cols..(r + 1) * cols];
            for (new, &c) in keep.iter().enumerate() {
                if row[c] != 0.0 {
                    col.push(new as u32);
                    val.push(T::from_f32(row[c]));
                }
            }
            if col.len() > start {
                nz_rows.push((r as u32, start as u32, col.len() as u32));
            }
        }
        Sparse { cols: keep.len(), nz_rows, col, val }
    }

    /// `out += x · W` (out has `cols` entries), visiting only nonzero inputs.
    #[inline(always)]
    fn accumulate(&self, x: &[T], out: &mut [T]) {
        for &(r, s, e) in &self.nz_rows {
            let xi = x[r as usize];
            if xi != T::ZERO {
                let (s, e) = (s as usize, e as usize);
                for (&c, &w) in self.col[s..e].iter().zip(&self.val[s..e]) {
                    out[c as usize] += xi * w;
                }
            }
        }
    }

    fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Sets `marks[c]` for every column `c` a nonzero weight reaches.
    fn mark(&self, marks: &mut [bool]) {
        for &c in &self.col {
            marks[c as usize] = true;
        }
    }

    /// Renumbers the rows (`perm[old] = new`), keeping their order: `accumulate` adds the same
    /// products in the same order.
    fn renumber_rows(&mut self, perm: &[u32]) {
        for (r, _, _) in &mut self.nz_rows {
            *r = perm[*r as usize];
        }
    }

    /// Renumbers the columns (`perm[old] = new`; `cols` stays the width).
    fn renumber_cols(&mut self, perm: &[u32]) {
        for c in &mut self.col {
            *c = perm[*c as usize];
        }
    }
}

/// `perm[old] = new` applied to a list of dims, which is then sorted.
fn renumber_sorted(dims: &mut [u32], perm: &[u32]) {
    for r in dims.iter_mut() {
        *r = perm[*r as usize];
    }
    dims.sort_unstable();
}

/// The rows of a row-major `[rows, d]` array with their columns renumbered (`perm[old] = new`).
fn renumber_dense<T: Copy>(data: &mut [T], d: usize, perm: &[u32]) {
    let mut row = Vec::with_capacity(d);
    for chunk in data.chunks_mut(d.max(1)) {
        row.clear();
        row.extend_from_slice(chunk);
        for (old, &v) in row.iter().enumerate() {
            chunk[perm[old] as usize] = v;
        }
    }
}

/// Which columns of a `[rows, cols]` row-major matrix hold a nonzero.
fn used_cols(data: &[f32], rows: usize, cols: usize) -> Vec<bool> {
    let mut used = vec![false; cols];
    for r in 0..rows {
        for (c, u) in used.iter_mut().enumerate() {
            *u |= data[r * cols + c] != 0.0;
        }
    }
    used
}

/// Which rows of a `[rows, cols]` row-major matrix hold a nonzero.
fn used_rows(data: &[f32], rows: usize, cols: usize) -> Vec<bool> {
    (0..rows).map(|r| data[r * cols..(r + 1) * cols].iter().any(|&w| w != 0.0)).collect()
}

#[derive(Debug, Clone)]
struct Head<T> {
    /// `x -> q` over the score dims both W_Q and W_K use.
    q: Sparse<T>,
    /// `x -> k`, same dims.
    k: Sparse<T>,
    /// `x -> v` over the value dims both W_V and W_O use.
    v: Sparse<T>,
    /// `v -> residual`.
    o: Sparse<T>,
    /// What the scores depend on (decides the hard-attention path).
    kind: HeadKind<T>,
    /// A [`HeadKind::Token`] head's score table is finite (true for the other kinds, whose
    /// scores are checked as they are computed).
    scores_finite: bool,
    /// A [`HeadKind::General`] head of a non-causal model whose queries read only dims that
    /// hold `token + position` (its keys read written dims): per length, each query's first
    /// query with the same query vector (in a sequence with BOS at position 0 only), made on
    /// first use. A query with the same vector as an earlier one gets its output.
    queries: Option<PerLength<Vec<u32>>>,
    /// A [`HeadKind::General`] head some of whose key dims read only dims holding
    /// `token + position`: those keys, per length, made on first use ([`StaticKeys`]).
    static_keys: Option<StaticKeys<T>>,
}

/// Keys `(key dim, key, value)`.
type KeyEntries<T> = [(u32, u32, T)];

/// The key dims of a row head that are functions of the positions alone (in a sequence with BOS
/// at position 0 only): every row of W_K reaching them reads a dim no block writes and every
/// token but BOS embeds alike.
#[derive(Debug, Clone)]
struct StaticKeys<T> {
    /// The rows of `k` reaching some other key dim (read from the residual stream each pass).
    rows: Vec<(u32, u32, u32)>,
    /// The rows of `k` reaching only static key dims.
    fixed: Vec<(u32, u32, u32)>,
    /// Per length, the nonzero static keys `(key dim, key, value)` in increasing key order.
    per: PerLength<Vec<(u32, u32, T)>>,
}

/// What a head's scores depend on, found at load from the dims `W_Q` and `W_K` read: dims that
/// no earlier block writes (nor the value embedding) hold `token embedding + position
/// embedding`, so scores over them are a function of the tokens or the positions alone.
#[derive(Debug, Clone)]
enum HeadKind<T> {
    /// Scores depend on the whole residual stream: one row per query.
    General,
    /// Every dim read has a zero position embedding (non-causal models): the score of a query
    /// with token `a` for a key with token `b` is `scores[a * vocab + b]`, so every query with the
    /// same token gets the same attention row (computed once per token and sequence).
    Token { scores: Vec<T> },
    /// Every dim read has the same token embedding for every id but BOS: in a sequence with BOS
    /// at position 0 and nowhere else the scores depend on the positions alone, and so do the
    /// keys each query keeps. Per length, computed on first use: `patterns` (see
    /// [`FastModel::position_pattern`]; `over_rows`: lengths whose pattern was left to the row
    /// scan once for having too many distinct rows).
    Position { patterns: PerLength<Option<Pattern<T>>>, over_rows: PerLength<()> },
}

/// How many lengths [`PerLength`] allocates at a time.
const LENGTH_CHUNK: usize = 256;

/// Values per sequence length `0..=max`, each computed on first use. The lengths come in
/// chunks of [`LENGTH_CHUNK`], allocated when one of their lengths is first asked for: a model
/// runs at a few lengths, and a slot per length for every position head of a long model was
/// most of the fast backend's memory (U at 64³: 449 heads × 12,289 lengths × 112 bytes, about
/// 0.5 GB of its 1.8 GB peak, before any pattern).
#[derive(Debug, Clone)]
pub(crate) struct PerLength<V> {
    max: usize,
    chunks: Vec<std::sync::OnceLock<Box<[std::sync::OnceLock<V>]>>>,
}

impl<V> PerLength<V> {
    fn new(max: usize) -> PerLength<V> {
        PerLength { max, chunks: (0..max / LENGTH_CHUNK + 1).map(|_| std::sync::OnceLock::new()).collect() }
    }
    /// The cell of length `t` (its chunk allocated now if need be); None past `max`.
    fn slot(&self, t: usize) -> Option<&std::sync::OnceLock<V>> {
        if t > self.max {
            return None;
        }
        let chunk = self.chunks.get(t / LENGTH_CHUNK)?.get_or_init(|| (0..LENGTH_CHUNK).map(|_| std::sync::OnceLock::new()).collect());
        Some(&chunk[t % LENGTH_CHUNK])
    }
    /// The value of length `t`, if computed (allocates nothing).
    fn get(&self, t: usize) -> Option<&V> {
        if t > self.max {
            return None;
        }
        self.chunks.get(t / LENGTH_CHUNK)?.get()?[t % LENGTH_CHUNK].get()
    }
}

/// The keys each query of a [`HeadKind::Position`] head keeps under hard attention, at one
/// length: query `i` averages, with weight `w[i]`, the keys of the intervals
/// `spans[ptr[i]..ptr[i + 1]]` (increasing, disjoint `start..end`).
#[derive(Debug, Clone)]
struct Pattern<T> {
    w: Vec<T>,
    ptr: Vec<u32>,
    spans: Vec<(u32, u32)>,
    /// When every query keeps exactly one key (gathers): that key, per query.
    single: Option<Vec<u32>>,
    /// The same queries split by key: `(query, key)` for keys past position 0, and the queries
    /// keeping key 0 (BOS: most queries of a gather outside its block, whose value there is
    /// usually zero, so they are skipped at once).
    keyed: Option<Keyed>,
    /// Every weight is finite (some query keeps no key when its scores are NaN).
    finite: bool,
}

/// A gather's queries by key: `(query, key)` for keys past position 0, and the queries of key 0.
type Keyed = (Vec<(u32, u32)>, Vec<u32>);

/// A query's score for one key, as the row scan adds it up: the first nonzero query dim's
/// product, then the others in increasing dim order (0 without nonzero query dims).
#[inline]
fn score_of<T: Real>(qnz: &[(usize, T)], k: impl Fn(usize) -> T) -> T {
    match qnz.split_first() {
        None => T::ZERO,
        Some((&(c, qc), rest)) => {
            let mut s = qc * k(c);
            for &(c, qc) in rest {
                s += qc * k(c);
            }
            s
        }
    }
}

/// The scores of the first `s.len()` keys for a query with nonzero dims `qnz`, from keys
/// transposed (`kt[c * t + j]`), as [`score_of`] adds them up: the first nonzero dim's product,
/// then the others in increasing dim order (all zeros without nonzero dims).
fn scan_scores<T: Real>(qnz: &[(usize, T)], kt: &[T], t: usize, s: &mut [T]) {
    let n = s.len();
    match qnz.split_first() {
        None => s.fill(T::ZERO),
        Some((&(c, qc), rest)) => {
            for (sj, &kv) in s.iter_mut().zip(&kt[c * t..c * t + n]) {
                *sj = qc * kv;
            }
            for &(c, qc) in rest {
                for (sj, &kv) in s.iter_mut().zip(&kt[c * t..c * t + n]) {
                    *sj += qc * kv;
                }
            }
        }
    }
}

/// The largest score of a row (the first one when none is larger: NaN scores never win).
fn row_max<T: Real>(s: &[T]) -> T {
    let mut max = s[0];
    for &sj in s {
        if sj > max {
            max = sj;
        }
    }
    max
}

/// The most entries a [`HeadKind::Token`] head's score table holds (vocab², 2^22: 32 MB in f64,
/// a vocabulary of 2,048 tokens); a larger vocabulary keeps the general path.
const MAX_TOKEN_TABLE: usize = 1 << 22;

/// The score table of a [`HeadKind::Token`] head: `[vocab, vocab]`, query token by key token,
/// each score computed as the row scan computes it from that token's embedding.
fn token_scores<T: Real>(h: &Head<T>, embed_token: &[f32], embed_pos: &[f32], d: usize, vocab: usize) -> Vec<T> {
    let dq = h.q.cols;
    let (mut qs, mut ks) = (vec![T::ZERO; vocab * dq], vec![T::ZERO; vocab * dq]);
    for a in 0..vocab {
        // The position embedding is zero on every dim read; added as the forward pass adds it.
        let x: Vec<T> = (0..d).map(|r| T::from_f32(embed_token[a * d + r]) + T::from_f32(embed_pos[r])).collect();
        h.q.accumulate(&x, &mut qs[a * dq..(a + 1) * dq]);
        h.k.accumulate(&x, &mut ks[a * dq..(a + 1) * dq]);
    }
    let mut scores = Vec::with_capacity(vocab * vocab);
    for a in 0..vocab {
        let qnz: Vec<(usize, T)> = qs[a * dq..(a + 1) * dq].iter().enumerate().filter(|&(_, &q)| q != T::ZERO).map(|(c, &q)| (c, q)).collect();
        for b in 0..vocab {
            scores.push(score_of(&qnz, |c| ks[b * dq + c]));
        }
    }
    scores
}

/// A memo stays on for at least this many misses (then only while it hits at least as often as
/// it misses): a batch of categorical sequences can see a few hundred distinct MLP inputs, each
/// many times.
const MEMO_TRIAL: usize = 512;
/// Positions per block of [`FastModel::mlp_columns`].
const BLOCK: usize = 32;

/// MLP inputs remembered per sequence without hashing (see [`FastModel::mlp`]).
const RECENT: usize = 4;

/// A [`Pattern`] scores every distinct query row against every key once (O(distinct · t)),
/// while the general path answers one-key queries from the key lists in O(matches). Up to this
/// length a pattern is always computed; past it only while its queries have at most
/// [`PATTERN_MAX_ROWS`] distinct rows (U's gather heads: a few hundred at most, whatever the
/// length), so a one-off pattern never costs more than a few hundred row scans; and only while
/// it keeps at most `4t + 64` key intervals in all (copied rows included).
const PATTERN_MAX_LEN: usize = 512;
const PATTERN_MAX_ROWS: usize = 512;

/// From this length on, a layer's missing patterns are computed on several threads.
const PATTERN_PARALLEL_LEN: usize = 256;

/// Remembered rows up to this many are searched in order, not by hash.
const SHARE_LINEAR: usize = 16;

/// Indexes the last row of `qent` by its hash once there are more than [`SHARE_LINEAR`] (all of
/// them when the count passes it).
fn remember(qmap: &mut std::collections::HashMap<u64, u32, std::hash::BuildHasherDefault<Fx>>, qent: &[(u32, u32, u32, u64)], hash: u64) {
    let n = qent.len();
    if n == SHARE_LINEAR + 1 {
        for (i, e) in qent.iter().enumerate() {
            qmap.entry(e.3).or_insert(i as u32);
        }
    } else if n > SHARE_LINEAR {
        qmap.entry(hash).or_insert(n as u32 - 1);
    }
}

/// Most distinct query rows a general head remembers per sequence (their attention outputs).
const SHARE_MAX_ROWS: usize = 1024;

/// Intervals longer than this are summed from prefix sums of the values.
const SHORT_SPAN: u32 = 8;

#[derive(Debug, Clone)]
struct Mlp<T> {
    /// Residual dims W_in or W_gate read (the MLP is a function of these alone).
    in_rows: Vec<u32>,
    /// Residual dims W_out or b_out write (the others receive exact zeros).
    out_cols: Vec<u32>,
    /// Every hidden unit.
    units: Units<T>,
    /// Piecewise-linear groups of units ([`pl`]) and the units in none of them.
    pl: Option<(pl::Part<T>, Units<T>)>,
    b_out: Vec<T>,
}

/// Some hidden units of an MLP, renumbered `0..len`.
#[derive(Debug, Clone)]
struct Units<T> {
    w_in: Sparse<T>,
    b_in: Vec<T>,
    /// Units whose bias is positive (ReLU MLPs: the only units besides those a nonzero input
    /// reaches that can be nonzero).
    pos_bias: Vec<u32>,
    /// Unit -> its range in `w_out`'s `col`/`val` (length hidden + 1).
    out_ptr: Vec<u32>,
    gate: Option<(Sparse<T>, Vec<T>)>,
    w_out: Sparse<T>,
    /// Gated units by unit, for [`FastModel::mlp_columns`] (None for ReLU units).
    columns: Option<Columns<T>>,
}

/// Gated units stored by unit: the residual dims they read (`dims`, increasing) and, per unit
/// `u`, its input and gate weights `(index into dims, weight)` in increasing dim order
/// (`ent[ptr[u]..ptr[u + 1]]`, `gent[gptr[u]..gptr[u + 1]]`): the order in which the
/// row-by-row pass adds them, so both give the same sums.
#[derive(Debug, Clone)]
struct Columns<T> {
    dims: Vec<u32>,
    ptr: Vec<u32>,
    ent: Vec<(u32, T)>,
    gptr: Vec<u32>,
    gent: Vec<(u32, T)>,
    /// Per entry of `w_out.col`, where that dim stands in the MLP's `out_cols`
    /// ([`Units::index_outputs`]).
    out_at: Vec<u32>,
    /// Per unit, Σ |gate weight| (f64): with every input within `m` in magnitude, the gate's
    /// sum is within `gsum · m` (plus its rounding), so a unit whose pre-activation is
    /// relu(b_in) = 0 may be skipped only when that stays finite (review rv22: a gate weight
    /// of 1e35 overflowed to ∞, 0·∞ = NaN, and a skipped unit gave 0).
    gsum: Vec<f64>,
}

impl<T: Real> Columns<T> {
    /// From the row-stored input and gate matrices of `units` units.
    fn new(w_in: &Sparse<T>, gate: &Sparse<T>, units: usize) -> Columns<T> {
        let mut dims: Vec<u32> = w_in.nz_rows.iter().chain(&gate.nz_rows).map(|&(r, _, _)| r).collect();
        dims.sort_unstable();
        dims.dedup();
        let by_unit = |m: &Sparse<T>| {
            let mut per: Vec<Vec<(u32, T)>> = vec![vec![]; units];
            for &(r, s, e) in &m.nz_rows {
                // `dims` holds every row listed here.
                let k = dims.partition_point(|&x| x < r) as u32;
                for (&c, &w) in m.col[s as usize..e as usize].iter().zip(&m.val[s as usize..e as usize]) {
                    per[c as usize].push((k, w));
                }
            }
            let mut ptr = vec![0u32];
            let mut ent = vec![];
            for p in per {
                ent.extend(p);
                ptr.push(ent.len() as u32);
            }
            (ptr, ent)
        };
        let (ptr, ent) = by_unit(w_in);
        let (gptr, gent) = by_unit(gate);
        let gsum = (0..units).map(|u| gent[gptr[u] as usize..gptr[u + 1] as usize].iter().map(|&(_, w)| w.to_f64().abs()).sum()).collect();
        Columns { dims, ptr, ent, gptr, gent, out_at: vec![], gsum }
    }
}

impl<T: Real> Columns<T> {
    /// Renumbers the residual dims (`perm[old] = new`): `dims` sorted again and the units'
    /// entries pointed at their dims' new places, each unit's entries kept in their order (the
    /// order of its sums).
    fn renumber(&mut self, perm: &[u32]) {
        let mut order: Vec<u32> = (0..self.dims.len() as u32).collect();
        order.sort_unstable_by_key(|&k| perm[self.dims[k as usize] as usize]);
        let mut at = vec![0u32; self.dims.len()];
        for (new, &old) in order.iter().enumerate() {
            at[old as usize] = new as u32;
        }
        self.dims = order.iter().map(|&k| perm[self.dims[k as usize] as usize]).collect();
        for (k, _) in self.ent.iter_mut().chain(&mut self.gent) {
            *k = at[*k as usize];
        }
    }
}

impl<T: Real> Units<T> {
    /// Records where each written dim stands in `out_cols` (increasing, holding them).
    fn index_outputs(&mut self, out_cols: &[u32]) {
        if let Some(c) = &mut self.columns {
            c.out_at = self.w_out.col.iter().map(|o| out_cols.partition_point(|x| x < o) as u32).collect();
        }
    }

    fn renumber(&mut self, perm: &[u32]) {
        self.w_in.renumber_rows(perm);
        if let Some((g, _)) = &mut self.gate {
            g.renumber_rows(perm);
        }
        self.w_out.renumber_cols(perm);
        if let Some(c) = &mut self.columns {
            c.renumber(perm);
        }
    }

    /// The units `keep` (every unit when None) of an MLP.
    fn new(w: &pl::Weights, keep: Option<&[usize]>) -> Units<T> {
        let (d, hid) = (w.d, w.hid);
        let all: Vec<usize> = match keep {
            Some(k) => k.to_vec(),
            None => (0..hid).collect(),
        };
        let out_rows: Vec<f32> = all.iter().flat_map(|&u| w.w_out[u * d..(u + 1) * d].iter().copied()).collect();
        let w_out = Sparse::new(&out_rows, all.len(), d, None);
        let mut out_ptr = vec![0u32; all.len() + 1];
        for &(r, _, e) in &w_out.nz_rows {
            out_ptr[r as usize + 1] = e;
        }
        for u in 0..all.len() {
            out_ptr[u + 1] = out_ptr[u + 1].max(out_ptr[u]);
        }
        let w_in = Sparse::new(w.w_in, d, hid, Some(&all));
        let gate: Option<(Sparse<T>, Vec<T>)> = w.gate.map(|(wg, bg)| (Sparse::new(wg, d, hid, Some(&all)), all.iter().map(|&u| T::from_f32(bg[u])).collect()));
        Units {
            columns: gate.as_ref().map(|(g, _)| Columns::new(&w_in, g, all.len())),
            w_in,
            b_in: all.iter().map(|&u| T::from_f32(w.b_in[u])).collect(),
            pos_bias: all.iter().enumerate().filter(|&(_, &u)| w.b_in[u] > 0.0).map(|(i, _)| i as u32).collect(),
            out_ptr,
            gate,
            w_out,
        }
    }

    fn work(&self) -> usize {
        self.w_in.nnz() + self.w_out.nnz() + self.b_in.len() + self.gate.as_ref().map_or(0, |g| g.0.nnz())
    }
}

#[derive(Debug, Clone)]
struct Layer<T> {
    /// Residual dims some head's W_O writes.
    attn_cols: Vec<u32>,
    /// No head of the layer reads a dim one of them writes (compiled layers write fresh
    /// slots): position heads add their output to the residual stream directly.
    direct: bool,
    heads: Vec<Head<T>>,
    mlp: Option<Mlp<T>>,
}

/// A checkpoint prepared for the CPU forward pass in precision `T`.
#[derive(Debug, Clone)]
pub struct FastModel<T> {
    d: usize,
    /// The residual dims' places in a row: `perm[checkpoint dim] = place` ([`Self::relayout`]);
    /// None when they are in the checkpoint's order.
    perm: Option<Vec<u32>>,
    vocab: usize,
    max_positions: usize,
    causal: bool,
    tie_tolerance: T,
    beta: T,
    bos: u32,
    embed_token: Vec<T>,
    embed_pos: Vec<T>,
    /// The position embedding by nonzero dims when it is sparse (the other dims hold zeros).
    pos_dims: Option<SparseRows<T>>,
    embed_value: Option<Vec<T>>,
    /// Per token id, the dims its embedding is nonzero in.
    token_dims: Vec<Vec<u32>>,
    /// The value embedding's nonzero dims.
    value_dims: Vec<(u32, T)>,
    /// Workspaces of earlier forward passes, reused: allocating and zeroing U-sized buffers
    /// costs more than the rest of a forward pass.
    pool: Pool<T>,
    layers: Vec<Layer<T>>,
    readout: Sparse<T>,
    /// Nonzero weights visited per position (an estimate of the work; decides threading).
    work_per_position: usize,
    /// Heads that may score a full row per query (hard attention: the [`HeadKind::General`] ones).
    row_heads: usize,
    /// Most threads a batch may use (0: `available_parallelism`).
    threads: usize,
    /// Gated MLPs may run by blocks of positions ([`FastModel::set_mlp_columns`]).
    mlp_columns: bool,
    /// Some MLP has units that may run by blocks (which read `Workspace::nzb`, kept only then).
    track: bool,
    /// Row heads may use their per-length caches ([`Self::set_head_caches`]).
    head_caches: bool,
    /// Per block of [`BLOCK`] positions, the dims some position's embedding is nonzero in
    /// (`dims[ptr[b]..ptr[b + 1]]`): the marks the embeddings start from.
    pos_marks: (Vec<u32>, Vec<u32>),
}

impl<T: Real> Workspace<T> {
    /// Memos as a forward pass starts them: on where the MLP reads few enough dims, empty.
    fn reset_memo(&mut self, m: &FastModel<T>) {
        // A memo switched off stays off in later calls, but is tried again every 64th call
        // (inputs that rarely repeated in one batch may repeat in another).
        self.calls = self.calls.wrapping_add(1);
        if self.calls.is_multiple_of(64) {
            self.memo_off.fill(false);
        }
        self.memo = m
            .layers
            .iter()
            .zip(&self.memo_off)
            .map(|(l, &off)| Memo { on: !off && l.mlp.as_ref().is_some_and(|m| m.in_rows.len() <= 4096), hits: 0, misses: 0, map: Default::default(), keys: vec![], arena: vec![] })
            .collect();
    }
}

/// Workspaces kept for the next forward pass (a clone of the model starts with none).
struct Pool<T>(std::sync::Mutex<Vec<Workspace<T>>>);

impl<T> Clone for Pool<T> {
    fn clone(&self) -> Pool<T> {
        Pool(Default::default())
    }
}

impl<T> std::fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

/// Per-thread buffers of a forward pass, sized once (for sequences of up to `len` positions).
struct Workspace<T> {
    len: usize,
    x: Vec<T>,
    /// The attention sublayer's output; zero outside the columns being written.
    delta: Vec<T>,
    q: Vec<T>,
    /// Keys transposed: `[dims][positions]`.
    kt: Vec<T>,
    v: Vec<T>,
    /// Keys by dim: `(dim, key)` pairs a nonzero weight reaches, then as `kcol` ranges `kptr`.
    kent: Vec<(u32, u32)>,
    kptr: Vec<u32>,
    kcol: Vec<u32>,
    kstamp: Vec<u32>,
    /// The keys a query's nonzero dims list.
    union: Vec<u32>,
    /// Keys whose value vector is not all zeros.
    vkeys: Vec<u32>,
    scores: Vec<T>,
    qnz: Vec<(usize, T)>,
    /// Token heads: key tokens' counts, which query tokens have their row, and the rows.
    cnt: Vec<u32>,
    done: Vec<bool>,
    tok_out: Vec<T>,
    /// Position heads: prefix sums of the values, `[t + 1, dv]`.
    pre: Vec<T>,
    outv: Vec<T>,
    hidden: Vec<T>,
    gate: Vec<T>,
    /// ReLU MLPs: the units a position reaches, and which are listed.
    active: Vec<u32>,
    mark: Vec<bool>,
    /// MLP output; zero outside the columns being written.
    tmp: Vec<T>,
    /// The linear forms of an MLP's piecewise-linear groups at one position.
    zs: Vec<f64>,
    key: Vec<u64>,
    memo: Vec<Memo<T>>,
    /// Per layer: an earlier pass switched its memo off (it starts off).
    memo_off: Vec<bool>,
    /// Calls that used this workspace.
    calls: u64,
    /// [`FastModel::mlp_columns`]: a block's inputs `[dims][BLOCK]` and outputs `[BLOCK][d]`
    /// (zeros between uses).
    xin: Vec<T>,
    /// Per block of [`BLOCK`] positions and residual dim: whether some position of the block
    /// may hold a nonzero there (`nzb[block * d + dim]`; every write of a nonzero sets it,
    /// cleared when a sequence starts). The column MLP reads only the dims set.
    nzb: Vec<bool>,
    /// The sequence being run has BOS at position 0 and nowhere else.
    bos_only: bool,
    /// ... and its dims that hold `token + position` hold just that: no number of a
    /// real-valued input is NaN or infinite in this precision (such a number reaches every dim
    /// of its row), so the row heads' per-length caches apply.
    static_ok: bool,
    /// The piecewise-linear groups' last `z` and values ([`pl::Part::eval_block`]).
    pl_last: Vec<(u64, Vec<T>)>,
    /// `nzb` is kept in this pass (the model has block MLPs).
    track: bool,
    tmpblk: Vec<T>,
    /// Per dim of `xin`: nonzero somewhere in the block.
    nzdim: Vec<bool>,
    /// Per head and sequence: the query keys seen (`qkeys` ranges) and their value sums
    /// (`qouts`): queries with the same nonzero query dims get the same attention row.
    qkeys: Vec<u64>,
    qent: Vec<(u32, u32, u32, u64)>,
    qouts: Vec<T>,
    /// Per query, where its output starts in `qouts` (the first query of each vector).
    qslot: Vec<u32>,
    /// Hash of a query key -> its index in `qent`.
    qmap: std::collections::HashMap<u64, u32, std::hash::BuildHasherDefault<Fx>>,
    /// This layer's value columns of one-key gathers that sum several residual dims: the
    /// value projection (dim, weight) and each position's value.
    vcols: Vec<ValueColumn<T>>,
}

/// Rows by their nonzero entries: row `i`'s `(column, value)` pairs are `.1[.0[i]..(.0[i + 1])]`.
type SparseRows<T> = (Vec<u32>, Vec<(u32, T)>);

/// A value projection `(residual dim, weight)`, the value it gives at each position, and
/// whether that value has been computed yet.
type ValueColumn<T> = (Vec<(u32, T)>, Vec<T>, Vec<bool>);

/// The outputs an MLP produced for the inputs seen so far in this forward pass: the MLP is a
/// pure function of the residual dims it reads, so an input seen before (same bits) gets the
/// same output back without recomputing (categorical programs see few distinct inputs).
/// Switched off for the rest of the pass when inputs rarely repeat.
struct Memo<T> {
    on: bool,
    hits: usize,
    misses: usize,
    /// Hash of an input key (the nonzero read dims and their bits) -> the key's range in
    /// `keys` and the output's range in `arena`. A different key with the same hash is
    /// computed, not remembered.
    map: std::collections::HashMap<u64, [u32; 4], std::hash::BuildHasherDefault<Fx>>,
    keys: Vec<u64>,
    /// `(residual dim, what the MLP adds to it)`.
    arena: Vec<(u32, T)>,
}

/// A small multiplicative hash for memo keys (std's SipHash costs more than many MLPs here).
#[derive(Default)]
struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Slice equality without a call to `memcmp` (keys here are a few words long).
#[inline]
fn same(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// The machine's parallelism, asked once (asking costs system calls).
fn parallelism() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn tensor<'a>(ck: &'a Checkpoint, name: &str) -> Result<&'a raspc_checkpoint::Tensor, RuntimeError> {
    ck.tensors.get(name).ok_or_else(|| CheckpointError::MissingTensor(name.to_string()).into())
}

impl<T: Real> FastModel<T> {
    /// Prepares a checkpoint (validated by the caller: every tensor has its config shape).
    pub fn new(ck: &Checkpoint) -> Result<FastModel<T>, RuntimeError> {
        let c = &ck.config;
        let d = c.d_model;
        let conv = |v: &[f32]| v.iter().map(|&x| T::from_f32(x)).collect::<Vec<T>>();
        // Embeddings without -0 (`-0 + 0` is `+0`): a row is built from the position embedding
        // plus the token's nonzero dims, which then equals `token + position` bit for bit.
        let conv0 = |v: &[f32]| v.iter().map(|&x| T::from_f32(x) + T::ZERO).collect::<Vec<T>>();
        let embed_token = &tensor(ck, raspc_checkpoint::names::TOKEN_EMBEDDING)?.data;
        let embed_pos = &tensor(ck, raspc_checkpoint::names::POSITION_EMBEDDING)?.data;
        let embed_value = match c.real_input {
            Some(_) => Some(&tensor(ck, raspc_checkpoint::names::VALUE_EMBEDDING)?.data),
            None => None,
        };
        let (vocab, positions, bos) = (c.vocab.len(), c.max_seq_len + 1, c.bos_id);
        // Dims some block of an earlier layer (or the value embedding) writes.
        let mut written: Vec<bool> = (0..d).map(|r| embed_value.is_some_and(|ev| ev[r] != 0.0)).collect();
        let token_only = |r: usize| (0..positions).all(|p| embed_pos[p * d + r] == 0.0);
        let position_only = |r: usize| {
            let mut non_bos = (0..vocab).filter(|&i| i != bos).map(|i| embed_token[i * d + r].to_bits());
            let first = non_bos.next();
            non_bos.all(|b| Some(b) == first)
        };
        let mut layers = vec![];
        let mut work = 0;
        let mut row_heads = 0;
        for (l, lc) in c.layers.iter().enumerate() {
            let mut heads = vec![];
            for (h, &dh) in lc.heads.iter().enumerate() {
                let n = |w: &str| raspc_checkpoint::names::head(l, h, w);
                let (wq, wk, wv, wo) = (tensor(ck, &n("w_q"))?, tensor(ck, &n("w_k"))?, tensor(ck, &n("w_v"))?, tensor(ck, &n("w_o"))?);
                let (uq, uk, uv) = (used_cols(&wq.data, d, dh), used_cols(&wk.data, d, dh), used_cols(&wv.data, d, dh));
                let uo = used_rows(&wo.data, dh, d);
                let score_dims: Vec<usize> = (0..dh).filter(|&i| uq[i] && uk[i]).collect();
                let value_dims: Vec<usize> = (0..dh).filter(|&i| uv[i] && uo[i]).collect();
                let o_rows: Vec<f32> = value_dims.iter().flat_map(|&r| wo.data[r * d..(r + 1) * d].iter().copied()).collect();
                let mut head = Head {
                    q: Sparse::new(&wq.data, d, dh, Some(&score_dims)),
                    k: Sparse::new(&wk.data, d, dh, Some(&score_dims)),
                    v: Sparse::new(&wv.data, d, dh, Some(&value_dims)),
                    o: Sparse::new(&o_rows, value_dims.len(), d, None),
                    kind: HeadKind::General,
                    scores_finite: true,
                    queries: None,
                    static_keys: None,
                };
                let reads: Vec<usize> = head.q.nz_rows.iter().chain(&head.k.nz_rows).map(|&(r, _, _)| r as usize).collect();
                if reads.iter().all(|&r| !written[r]) {
                    // (A table of vocab² scores only while it is small: a 65,536-token
                    // vocabulary, within the budgets, asked for 17 GB at load; helper b19.)
                    if !c.causal && vocab.saturating_mul(vocab) <= MAX_TOKEN_TABLE && reads.iter().all(|&r| token_only(r)) {
                        let scores = token_scores(&head, embed_token, embed_pos, d, vocab);
                        head.scores_finite = scores.iter().all(|s: &T| s.is_finite());
                        head.kind = HeadKind::Token { scores };
                    } else if reads.iter().all(|&r| position_only(r)) {
                        head.kind = HeadKind::Position { patterns: PerLength::new(positions), over_rows: PerLength::new(positions) };
                    }
                }
                if matches!(head.kind, HeadKind::General) && !c.causal && head.q.nz_rows.iter().all(|&(r, _, _)| !written[r as usize] && position_only(r as usize)) {
                    head.queries = Some(PerLength::new(positions));
                }
                if matches!(head.kind, HeadKind::General) {
                    // Key dims all of whose rows are static, and the rows reaching only those.
                    // (A static row that also reaches another dim is read each pass, so the
                    // static dims it reaches are not static either: until nothing changes.)
                    let cols_of = |s0: u32, e: u32| &head.k.col[s0 as usize..e as usize];
                    let mut fixed_row: Vec<bool> = head.k.nz_rows.iter().map(|&(r, _, _)| !written[r as usize] && position_only(r as usize)).collect();
                    let mut fixed_dim = vec![true; head.k.cols];
                    loop {
                        for (&(_, s0, e), _) in head.k.nz_rows.iter().zip(&fixed_row).filter(|(_, f)| !**f) {
                            for &c in cols_of(s0, e) {
                                fixed_dim[c as usize] = false;
                            }
                        }
                        let mut changed = false;
                        for (&(_, s0, e), f) in head.k.nz_rows.iter().zip(fixed_row.iter_mut()) {
                            if *f && !cols_of(s0, e).iter().all(|&c| fixed_dim[c as usize]) {
                                *f = false;
                                changed = true;
                            }
                        }
                        if !changed {
                            break;
                        }
                    }
                    let pick = |keep: bool| head.k.nz_rows.iter().zip(&fixed_row).filter(|&(_, &f)| f == keep).map(|(&r, _)| r).collect::<Vec<_>>();
                    let (fixed, rows) = (pick(true), pick(false));
                    if !fixed.is_empty() {
                        head.static_keys = Some(StaticKeys { rows, fixed, per: PerLength::new(positions) });
                    }
                }
                work += head.v.nnz() + head.o.nnz();
                if matches!(head.kind, HeadKind::General) {
                    // Queries and keys, and a score row per query (O(t) more per position).
                    work += head.q.nnz() + head.k.nnz();
                    row_heads += 1;
                }
                heads.push(head);
            }
            // Dims this layer's heads write (the MLP reads them after the heads).
            let mut head_writes = vec![false; d];
            for h in &heads {
                for &c in &h.o.col {
                    head_writes[c as usize] = true;
                }
            }
            let mlp = match &lc.mlp {
                Some(mc) => {
                    let n = |w: &str| raspc_checkpoint::names::mlp(l, w);
                    let hid = mc.hidden;
                    let (wi, bin, wout, bout) = (tensor(ck, &n("w_in"))?, tensor(ck, &n("b_in"))?, tensor(ck, &n("w_out"))?, tensor(ck, &n("b_out"))?);
                    let gate = match mc.kind {
                        MlpKind::Reglu => Some((&tensor(ck, &n("w_gate"))?.data[..], &tensor(ck, &n("b_gate"))?.data[..])),
                        MlpKind::Relu => None,
                    };
                    let mut reads = used_rows(&wi.data, d, hid);
                    if let Some((wg, _)) = gate {
                        for (r, u) in used_rows(wg, d, hid).into_iter().enumerate() {
                            reads[r] |= u;
                        }
                    }
                    let writes = used_cols(&wout.data, hid, d);
                    let w = pl::Weights { d, hid, w_in: &wi.data, b_in: &bin.data, gate, w_out: &wout.data };
                    // Constant dims: no block writes them and every non-BOS position holds the
                    // same value there (as the forward pass adds it up: token + position).
                    let konst: Vec<(u32, T)> = (0..d)
                        .filter(|&r| {
                            reads[r] && !written[r] && !head_writes[r] && position_only(r) && (2..positions).all(|p| embed_pos[p * d + r].to_bits() == embed_pos[d + r].to_bits())
                        })
                        .filter_map(|r| (0..vocab).find(|&i| i != bos).map(|i| (r as u32, (T::from_f32(embed_token[i * d + r]) + T::ZERO) + (T::from_f32(embed_pos[d + r]) + T::ZERO))))
                        .collect();
                    let units = Units::new(&w, None);
                    let pl = pl::Part::find(&w, &konst).map(|part| {
                        let rest = Units::new(&w, Some(&part.rest));
                        (part, rest)
                    });
                    work += match &pl {
                        Some((part, rest)) => rest.work() + part.groups.len() * 16,
                        None => units.work(),
                    };
                    Some(Mlp {
                        in_rows: (0..d).filter(|&r| reads[r]).map(|r| r as u32).collect(),
                        out_cols: (0..d).filter(|&c| writes[c] || bout.data[c] != 0.0).map(|c| c as u32).collect(),
                        units,
                        pl,
                        b_out: conv(&bout.data),
                    })
                }
                None => None,
            };
            let mut writes = vec![false; d];
            for h in &heads {
                for &c in &h.o.col {
                    writes[c as usize] = true;
                }
            }
            let attn_cols = (0..d).filter(|&c| writes[c]).map(|c| c as u32).collect();
            if let Some(m) = &mlp {
                for &c in &m.out_cols {
                    writes[c as usize] = true;
                }
            }
            for (w, &n) in written.iter_mut().zip(&writes) {
                *w |= n;
            }
            let direct = !heads.iter().any(|h| h.q.nz_rows.iter().chain(&h.k.nz_rows).chain(&h.v.nz_rows).any(|&(r, _, _)| head_writes[r as usize]));
            layers.push(Layer { attn_cols, direct, heads, mlp });
        }
        let ro = tensor(ck, raspc_checkpoint::names::READOUT)?;
        let readout = Sparse::new(&ro.data, d, c.readout_dims, None);
        work += readout.nnz() + d;
        let mut model = FastModel {
            d,
            perm: None,
            vocab: c.vocab.len(),
            max_positions: c.max_seq_len + 1,
            causal: c.causal,
            tie_tolerance: T::from_f64(c.attention.tie_tolerance),
            beta: T::from_f64(c.attention.soft_beta),
            bos: bos as u32,
            token_dims: (0..vocab).map(|i| (0..d).filter(|&r| embed_token[i * d + r] != 0.0).map(|r| r as u32).collect()).collect(),
            value_dims: embed_value.map_or(vec![], |ev| (0..d).filter(|&r| ev[r] != 0.0).map(|r| (r as u32, T::from_f32(ev[r]))).collect()),
            embed_token: conv0(embed_token),
            pos_dims: {
                // Rows of the position embedding by their nonzero dims, where that saves work
                // (U: a few dims of hundreds).
                let nnz = embed_pos.iter().filter(|&&v| v != 0.0).count();
                (nnz * 4 <= embed_pos.len()).then(|| {
                    let mut ptr = vec![0u32];
                    let mut ent = vec![];
                    for row in embed_pos.chunks(d.max(1)) {
                        ent.extend(row.iter().enumerate().filter(|&(_, &v)| v != 0.0).map(|(r, &v)| (r as u32, T::from_f32(v) + T::ZERO)));
                        ptr.push(ent.len() as u32);
                    }
                    (ptr, ent)
                })
            },
            embed_pos: conv0(embed_pos),
            embed_value: embed_value.map(|ev| conv(ev)),
            pool: Pool(Default::default()),
            layers,
            readout,
            work_per_position: work,
            row_heads,
            threads: 0,
            mlp_columns: true,
            track: false,
            head_caches: true,
            pos_marks: (vec![], vec![]),
        };
        model.track = model.layers.iter().filter_map(|l| l.mlp.as_ref()).any(|m| m.units.columns.is_some() || m.pl.as_ref().is_some_and(|(_, rest)| rest.columns.is_some()));
        model.relayout();
        model.pos_marks = {
            let (mut ptr, mut dims) = (vec![0u32], vec![]);
            for block in model.embed_pos.chunks(BLOCK * d.max(1)) {
                let mut any = vec![false; d];
                for row in block.chunks(d.max(1)) {
                    for (a, &v) in any.iter_mut().zip(row) {
                        *a |= v != T::ZERO;
                    }
                }
                dims.extend((0..d).filter(|&r| any[r]).map(|r| r as u32));
                ptr.push(dims.len() as u32);
            }
            (ptr, dims)
        };
        for m in model.layers.iter_mut().filter_map(|l| l.mlp.as_mut()) {
            m.units.index_outputs(&m.out_cols);
            if let Some((part, rest)) = &mut m.pl {
                part.index_outputs(&m.out_cols);
                rest.index_outputs(&m.out_cols);
            }
        }
        Ok(model)
    }

    /// Renumbers the residual dims so that the dims each MLP reads lie side by side in a row,
    /// and within those the dims one block writes: a block of positions then reads a few cache
    /// lines per row instead of most of the row (U at 32³: 161 input dims spread over a row of
    /// 1,011). Every sum keeps its order, so the numbers are the same bits; `trace` gives the
    /// rows back in the checkpoint's numbering.
    fn relayout(&mut self) {
        const NONE: usize = usize::MAX;
        let d = self.d;
        let (mut read, mut writer) = (vec![NONE; d], vec![NONE; d]);
        for (l, layer) in self.layers.iter().enumerate() {
            for &c in &layer.attn_cols {
                writer[c as usize] = writer[c as usize].min(2 * l);
            }
            for h in &layer.heads {
                // (Token and position heads read their query and key dims only while their
                // patterns are made, once per length.)
                let qk = matches!(h.kind, HeadKind::General).then_some(h.q.nz_rows.iter().chain(&h.k.nz_rows));
                for &(r, _, _) in h.v.nz_rows.iter().chain(qk.into_iter().flatten()) {
                    read[r as usize] = read[r as usize].min(2 * l);
                }
            }
            if let Some(m) = &layer.mlp {
                for &r in &m.in_rows {
                    read[r as usize] = read[r as usize].min(2 * l + 1);
                }
                for &c in &m.out_cols {
                    writer[c as usize] = writer[c as usize].min(2 * l + 1);
                }
            }
        }
        let mut order: Vec<usize> = (0..d).collect();
        order.sort_by_key(|&r| (read[r], writer[r], r));
        if order.iter().enumerate().all(|(i, &r)| i == r) {
            return;
        }
        let mut perm = vec![0u32; d];
        for (new, &old) in order.iter().enumerate() {
            perm[old] = new as u32;
        }
        let perm = &perm[..];
        renumber_dense(&mut self.embed_token, d, perm);
        renumber_dense(&mut self.embed_pos, d, perm);
        if let Some(ev) = &mut self.embed_value {
            renumber_dense(ev, d, perm);
        }
        if let Some((_, ent)) = &mut self.pos_dims {
            for (r, _) in ent.iter_mut() {
                *r = perm[*r as usize];
            }
        }
        for dims in &mut self.token_dims {
            renumber_sorted(dims, perm);
        }
        for (r, _) in &mut self.value_dims {
            *r = perm[*r as usize];
        }
        for layer in &mut self.layers {
            renumber_sorted(&mut layer.attn_cols, perm);
            for h in &mut layer.heads {
                h.q.renumber_rows(perm);
                h.k.renumber_rows(perm);
                if let Some(sk) = &mut h.static_keys {
                    for (r, _, _) in sk.rows.iter_mut().chain(&mut sk.fixed) {
                        *r = perm[*r as usize];
                    }
                }
                h.v.renumber_rows(perm);
                h.o.renumber_cols(perm);
            }
            if let Some(m) = &mut layer.mlp {
                renumber_sorted(&mut m.in_rows, perm);
                renumber_sorted(&mut m.out_cols, perm);
                renumber_dense(&mut m.b_out, d, perm);
                m.units.renumber(perm);
                if let Some((part, rest)) = &mut m.pl {
                    part.renumber(perm);
                    rest.renumber(perm);
                }
            }
        }
        self.readout.renumber_rows(perm);
        self.perm = Some(perm.to_vec());
    }

    /// The most threads a call may use ([`set_threads`](Self::set_threads), 0: every core).
    fn max_threads(&self) -> usize {
        if self.threads == 0 {
            parallelism()
        } else {
            self.threads
        }
    }

    /// Caps the threads a batch may use (0: as many as `available_parallelism`; 1: the calling
    /// thread only).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads;
    }

    /// Whether gated MLPs may run by blocks of positions ([`Self::mlp_columns`]; on by
    /// default). Off, every position takes the row path: tests compare the two.
    #[doc(hidden)]
    pub fn set_mlp_columns(&mut self, on: bool) {
        self.mlp_columns = on;
    }

    /// Whether row heads may use their per-length caches of shared queries and static keys
    /// ([`Head::queries`], [`Head::static_keys`]; on by default). Off, every query and key is
    /// read from the residual stream: the same bits, which tests check.
    #[doc(hidden)]
    pub fn set_head_caches(&mut self, on: bool) {
        self.head_caches = on;
    }

    /// How many position heads have their pattern cached at length `t` (BOS included), and how
    /// many of them were left to the row scan once there ([`Self::position_pattern`]; tests).
    #[doc(hidden)]
    pub fn patterns_cached(&self, t: usize) -> (usize, usize) {
        let heads = self.layers.iter().flat_map(|l| &l.heads);
        heads.fold((0, 0), |(c, o), h| match &h.kind {
            HeadKind::Position { patterns, over_rows } => (c + patterns.get(t).is_some_and(|p| p.is_some()) as usize, o + over_rows.get(t).is_some() as usize),
            _ => (c, o),
        })
    }

    /// The path each head's hard attention takes, by layer: "token", "position" or "rows" (see
    /// [`HeadKind`]; tests check that the structured paths are found).
    #[doc(hidden)]
    pub fn head_kinds(&self) -> Vec<Vec<&'static str>> {
        let kind = |h: &Head<T>| match h.kind {
            HeadKind::General => "rows",
            HeadKind::Token { .. } => "token",
            HeadKind::Position { .. } => "position",
        };
        self.layers.iter().map(|l| l.heads.iter().map(kind).collect()).collect()
    }

    /// The key each query of head `head` of layer `layer` keeps under hard attention, at length
    /// `t` (BOS included), when the head is a [`HeadKind::Position`] head whose every query keeps
    /// exactly one key and whose scores are finite: the candle backend then reads that key's
    /// value row instead of scoring `[t, t]` (the same numbers: `1·v` plus exact zeros is `v`).
    /// Valid for sequences with BOS at position 0 and nowhere else. Computed once per length
    /// (the pattern the fast path itself uses).
    pub fn single_keys(&self, layer: usize, head: usize, t: usize) -> Option<&[u32]> {
        let h = self.layers.get(layer)?.heads.get(head)?;
        match &h.kind {
            HeadKind::Position { patterns, over_rows } => {
                let p = self.position_pattern(h, patterns, over_rows, t)?;
                if p.finite {
                    p.single.as_deref()
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Computes the position heads' patterns at length `t` that are not cached yet, each layer's
    /// on several threads, from [`PATTERN_PARALLEL_LEN`] on (what [`Self::single_keys`] would
    /// otherwise compute one by one).
    pub fn prepare_lookups(&self, t: usize) {
        if t < PATTERN_PARALLEL_LEN {
            return;
        }
        for layer in &self.layers {
            self.prepare_patterns(layer, t);
        }
    }

    /// Whether `ids` has BOS at position 0 and nowhere else (what [`Self::single_keys`] needs).
    pub fn bos_first_only(&self, ids: &[u32]) -> bool {
        ids.first() == Some(&self.bos) && !ids[1..].contains(&self.bos)
    }

    /// Per layer, the MLP's units evaluated as piecewise-linear groups ([`pl`]) and all its units
    /// (tests check that the groups are found).
    #[doc(hidden)]
    pub fn mlp_groups(&self) -> Vec<(usize, usize)> {
        self.layers.iter().map(|l| l.mlp.as_ref().map_or((0, 0), |m| (m.pl.as_ref().map_or(0, |(p, _)| p.grouped()), m.units.b_in.len()))).collect()
    }

    /// Row heads with a per-length cache of shared queries ([`Head::queries`]), and with static
    /// key dims ([`Head::static_keys`]).
    #[doc(hidden)]
    pub fn row_head_caches(&self) -> (usize, usize) {
        let heads = || self.layers.iter().flat_map(|l| &l.heads);
        (heads().filter(|h| h.queries.is_some()).count(), heads().filter(|h| h.static_keys.is_some()).count())
    }

    /// Width of one readout row.
    pub fn readout_dims(&self) -> usize {
        self.readout.cols
    }

    fn workspace(&self, t: usize) -> Workspace<T> {
        let mut ws = self.fresh_workspace(t);
        ws.reset_memo(self);
        ws
    }

    fn fresh_workspace(&self, t: usize) -> Workspace<T> {
        let d = self.d;
        let mut dq = 0;
        let mut dv = 0;
        let mut hid = 0;
        for l in &self.layers {
            for h in &l.heads {
                dq = dq.max(h.q.cols);
                dv = dv.max(h.v.cols);
            }
            if let Some(m) = &l.mlp {
                hid = hid.max(m.units.b_in.len());
            }
        }
        Workspace {
            len: t,
            x: vec![T::ZERO; t * d],
            delta: vec![T::ZERO; t * d],
            q: vec![T::ZERO; dq],
            kt: vec![T::ZERO; dq * t],
            v: vec![T::ZERO; t * dv],
            kstamp: vec![0; dq],
            kptr: vec![0; dq + 1],
            kent: vec![],
            kcol: vec![],
            union: vec![],
            vkeys: Vec::with_capacity(t),
            scores: vec![T::ZERO; t],
            qnz: Vec::with_capacity(dq),
            cnt: vec![0; self.vocab],
            done: vec![false; self.vocab],
            tok_out: vec![T::ZERO; self.vocab * dv],
            pre: vec![],
            outv: vec![T::ZERO; dv],
            hidden: vec![T::ZERO; hid],
            gate: vec![T::ZERO; hid],
            active: Vec::with_capacity(hid),
            mark: vec![false; hid],
            tmp: vec![T::ZERO; d],
            zs: vec![],
            key: vec![],
            qkeys: vec![],
            qent: vec![],
            qouts: vec![],
            qslot: vec![0; t],
            qmap: Default::default(),
            vcols: vec![],
            memo: vec![],
            memo_off: vec![false; self.layers.len()],
            calls: 0,
            xin: vec![],
            nzb: vec![false; t.div_ceil(BLOCK) * d],
            bos_only: false,
            static_ok: false,
            pl_last: vec![],
            track: false,
            tmpblk: vec![],
            nzdim: vec![],
        }
    }

    /// Runs a batch of equal-length id sequences (BOS first; `values`: for real-valued
    /// checkpoints, each sequence's numbers without BOS). Returns the readout, row-major
    /// `[batch, len, readout_dims]`. With `check_finite`, the first stage that produces a NaN or
    /// infinity is named in the error (the same stages as the candle path).
    ///
    /// Batches whose work (sequences x positions x nonzero weights) exceeds about 2^23
    /// multiply-adds are split over up to `available_parallelism` threads (see
    /// [`set_threads`](Self::set_threads)); smaller ones run on the calling thread (a thread
    /// costs more than they do). The estimate counts every nonzero weight, although memo hits
    /// and the token/position heads skip most of them: batches estimated at 2^21-2^23 take
    /// well under a millisecond, where a second thread bought no wall-clock time on the shared
    /// 2-core machine and cost a third more CPU time (docs/benchmarks.md).
    pub fn forward(&self, batch: &[Vec<u32>], values: Option<&[Vec<f64>]>, attention: Attention, check_finite: bool) -> Result<Vec<T>, RuntimeError> {
        let b = batch.len();
        let t = batch.first().map_or(0, Vec::len);
        if let Some(bad) = batch.iter().find(|s| s.len() != t) {
            return Err(RuntimeError::Ragged(format!("{} vs {}", t, bad.len())));
        }
        if t == 0 || t > self.max_positions {
            return Err(RuntimeError::TooLong { len: t.saturating_sub(1), max: self.max_positions - 1 });
        }
        if let Some(&id) = batch.iter().flatten().find(|&&id| id as usize >= self.vocab) {
            return Err(RuntimeError::BadId { id, vocab: self.vocab });
        }
        if let Some(vals) = values
            && (vals.len() != b || vals.iter().any(|v| v.len() + 1 != t))
        {
            return Err(RuntimeError::Ragged(format!("{} number sequences for {b} sequences of {t} positions", vals.len())));
        }
        let r = self.readout.cols;
        let mut out = vec![T::ZERO; b * t * r];
        let work = b.saturating_mul(t).saturating_mul(self.work_per_position + t * if attention == Attention::Hard { self.row_heads } else { self.layers.len() });
        let threads = if work > (1 << 23) && b > 1 { self.max_threads().min(b) } else { 1 };
        let run_chunk = |seqs: std::ops::Range<usize>, out: &mut [T]| -> Result<(), RuntimeError> {
            // The smallest kept workspace that fits.
            let pooled = self.pool.0.lock().ok().and_then(|mut p| (0..p.len()).filter(|&i| p[i].len >= t).min_by_key(|&i| p[i].len).map(|i| p.swap_remove(i)));
            let mut ws = match pooled {
                Some(mut ws) => {
                    ws.reset_memo(self);
                    ws
                }
                None => self.workspace(t),
            };
            for (i, s) in seqs.enumerate() {
                let vals = values.map(|v| v[s].as_slice());
                // On an error the buffers may hold partial sums: that workspace is dropped.
                self.sequence(&batch[s], vals, attention, check_finite, &mut ws, &mut out[i * t * r..(i + 1) * t * r], None)?;
            }
            if let Ok(mut p) = self.pool.0.lock() {
                if p.len() < parallelism() {
                    p.push(ws);
                } else if let Some(i) = (0..p.len()).filter(|&i| p[i].len < ws.len).min_by_key(|&i| p[i].len) {
                    // Full: a longer workspace replaces the shortest.
                    p[i] = ws;
                }
            }
            Ok(())
        };
        if threads <= 1 {
            run_chunk(0..b, &mut out)?;
        } else {
            let per = b.div_ceil(threads);
            std::thread::scope(|sc| {
                let handles: Vec<_> = out
                    .chunks_mut(per * t * r)
                    .enumerate()
                    .map(|(i, chunk)| {
                        let range = i * per..((i + 1) * per).min(b);
                        sc.spawn(move || run_chunk(range, chunk))
                    })
                    .collect();
                handles.into_iter().try_for_each(|h| h.join().map_err(|_| RuntimeError::Device("a forward-pass thread failed".into()))?)
            })?;
        }
        Ok(out)
    }

    /// One id sequence (BOS first) through the model, returning the residual stream
    /// (`[t · d_model]`, row-major) after the embeddings and after every sublayer, named as
    /// [`Model::trace`](crate::Model::trace) names them. Errors as [`forward`](Self::forward).
    pub fn trace(&self, ids: &[u32], values: Option<&[f64]>, attention: Attention) -> Result<Vec<(String, Vec<T>)>, RuntimeError> {
        let t = ids.len();
        if t == 0 || t > self.max_positions {
            return Err(RuntimeError::TooLong { len: t.saturating_sub(1), max: self.max_positions - 1 });
        }
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(RuntimeError::BadId { id, vocab: self.vocab });
        }
        if values.is_some_and(|v| v.len() + 1 != t) {
            return Err(RuntimeError::Ragged(format!("{} numbers for {t} positions", values.map_or(0, <[f64]>::len) + 1)));
        }
        let mut ws = self.workspace(t);
        let mut out = vec![T::ZERO; t * self.readout.cols];
        let mut states = vec![];
        // Checked as `forward` checks: scores or weights past f32 decode to nothing meaningful
        // even where the residual stream stays finite (plain `trace` printed them, exit 0:
        // helper b21).
        self.sequence(ids, values, attention, true, &mut ws, &mut out, Some(&mut states))?;
        Ok(states)
    }

    /// One sequence through the whole model; writes `[t, readout_dims]` into `out` (and, when
    /// `trace` is given, the residual stream after the embeddings and every sublayer).
    #[allow(clippy::too_many_arguments)]
    fn sequence(
        &self,
        ids: &[u32],
        values: Option<&[f64]>,
        attention: Attention,
        check: bool,
        ws: &mut Workspace<T>,
        out: &mut [T],
        mut trace: Option<&mut Vec<(String, Vec<T>)>>,
    ) -> Result<(), RuntimeError> {
        let d = self.d;
        let t = ids.len();
        let perm = self.perm.as_deref();
        let mut record = |name: &dyn Fn() -> String, x: &[T]| {
            if let Some(tr) = trace.as_deref_mut() {
                // Rows in the checkpoint's numbering of the dims.
                let rows = match perm {
                    Some(perm) => x.chunks(d).flat_map(|row| perm.iter().map(|&at| row[at as usize])).collect(),
                    None => x.to_vec(),
                };
                tr.push((name(), rows));
            }
        };
        let finite = |xs: &[T], stage: &dyn Fn() -> String| -> Result<(), RuntimeError> {
            if check && xs.iter().any(|x| !x.is_finite()) {
                return Err(RuntimeError::NonFiniteActivation { stage: stage() });
            }
            Ok(())
        };
        ws.bos_only = self.bos_first_only(ids);
        let nonfinite = self.embed_value.is_some() && values.is_some_and(|vals| vals.iter().any(|&v| !T::from_f64(v).is_finite()));
        ws.static_ok = self.head_caches && ws.bos_only && !nonfinite;
        let track = self.mlp_columns && self.track;
        ws.track = track;
        let x = &mut ws.x[..t * d];
        for (p, &id) in ids.iter().enumerate() {
            // id < vocab and p < max_positions were checked by `forward`. The row is
            // `token + position`: the position's row plus the token's nonzero dims.
            let tok = &self.embed_token[id as usize * d..(id as usize + 1) * d];
            let row = &mut x[p * d..(p + 1) * d];
            match &self.pos_dims {
                Some((ptr, ent)) => {
                    row.fill(T::ZERO);
                    for &(r, v) in &ent[ptr[p] as usize..ptr[p + 1] as usize] {
                        row[r as usize] = v;
                    }
                }
                None => row.copy_from_slice(&self.embed_pos[p * d..(p + 1) * d]),
            }
            for &r in &self.token_dims[id as usize] {
                let r = r as usize;
                row[r] += tok[r];
            }
            if values.is_some() && self.embed_value.is_some() {
                // BOS (position 0) carries no number; the other dims add exact zeros.
                let v = if p == 0 { T::ZERO } else { values.map_or(T::ZERO, |vals| T::from_f64(vals[p - 1])) };
                if v.is_finite() {
                    for &(r, e) in &self.value_dims {
                        row[r as usize] += v * e;
                    }
                } else if let Some(ev) = &self.embed_value {
                    // NaN or ±inf times the zero dims is NaN, as the candle path computes it.
                    for (o, &e) in row.iter_mut().zip(ev) {
                        *o += v * e;
                    }
                }
            }
        }
        if track {
            // The marks of the embeddings: the dims each row was given.
            let nzb = &mut ws.nzb[..t.div_ceil(BLOCK) * d];
            nzb.fill(false);
            for (blk, marks) in nzb.chunks_mut(d.max(1)).enumerate() {
                // (A block's last positions may lie past the sequence: more marks, still true.)
                let (ptr, dims) = &self.pos_marks;
                for &r in &dims[ptr[blk] as usize..ptr[blk + 1] as usize] {
                    marks[r as usize] = true;
                }
            }
            for (p, &id) in ids.iter().enumerate() {
                let marks = &mut nzb[p / BLOCK * d..(p / BLOCK + 1) * d];
                for &r in &self.token_dims[id as usize] {
                    marks[r as usize] = true;
                }
                if values.is_some() && self.embed_value.is_some() {
                    for &(r, _) in &self.value_dims {
                        marks[r as usize] = true;
                    }
                    // (A number that is not finite in this precision reached every dim.)
                    if values.is_some_and(|vals| p > 0 && !T::from_f64(vals[p - 1]).is_finite()) {
                        marks.fill(true);
                    }
                }
            }
        }
        finite(x, &|| "the embeddings".into())?;
        record(&|| "embed".into(), x);
        for (l, layer) in self.layers.iter().enumerate() {
            ws.vcols.clear();
            if !layer.heads.is_empty() {
                if attention == Attention::Hard && t >= PATTERN_PARALLEL_LEN && ws.bos_only {
                    self.prepare_patterns(layer, t);
                }
                let mut delta = false;
                for h in &layer.heads {
                    delta |= self.head(h, ids, attention, check, l, layer.direct, ws)?;
                }
                // x += delta on the written columns; delta back to zeros.
                for p in (0..t).filter(|_| delta) {
                    let (xr, dr) = (&mut ws.x[p * d..(p + 1) * d], &mut ws.delta[p * d..(p + 1) * d]);
                    for &c in &layer.attn_cols {
                        let c = c as usize;
                        xr[c] += dr[c];
                        if track && dr[c] != T::ZERO {
                            ws.nzb[p / BLOCK * d + c] = true;
                        }
                        dr[c] = T::ZERO;
                    }
                }
                finite(&ws.x[..t * d], &|| format!("layer {l} attention"))?;
            }
            record(&|| format!("layer {l} attention"), &ws.x[..t * d]);
            if let Some(m) = &layer.mlp {
                self.mlp(m, t, values.is_some(), check, l, ws)?;
                finite(&ws.x[..t * d], &|| format!("layer {l} mlp"))?;
            }
            record(&|| format!("layer {l} mlp"), &ws.x[..t * d]);
        }
        let r = self.readout.cols;
        for p in 0..t {
            let o = &mut out[p * r..(p + 1) * r];
            self.readout.accumulate(&ws.x[p * d..(p + 1) * d], o);
        }
        finite(out, &|| "the readout".into())
    }

    /// One MLP over one sequence: `x += W_out·(ReLU(W_in·x + b_in) [⊙ (W_gate·x + b_gate)]) + b_out`,
    /// row by row, through the memo.
    fn mlp(&self, m: &Mlp<T>, t: usize, real: bool, check: bool, l: usize, ws: &mut Workspace<T>) -> Result<(), RuntimeError> {
        let d = self.d;
        // The memo entries of the last few distinct inputs (categorical sequences cycle through a
        // few: checked before hashing), replaced round-robin.
        let mut recent: [Option<[u32; 4]>; RECENT] = [None; RECENT];
        let mut next = 0;
        // Gated units go column by column over blocks of positions for real-valued inputs
        // (whose values rarely repeat: U) and once the memo is off; ReLU units stay on the
        // row path, which skips the units no nonzero input reaches.
        let columns = match &m.pl {
            Some((part, rest)) => rest.columns.as_ref().map(|c| (rest, Some(part), c)),
            None => m.units.columns.as_ref().map(|c| (&m.units, None, c)),
        };
        for p in 0..t {
            if let Some((u, part, cols)) = columns
                && self.mlp_columns
                && (real || !ws.memo[l].on)
            {
                return self.mlp_columns(m, u, part, cols, p..t, check, l, ws);
            }
            let xp = &ws.x[p * d..(p + 1) * d];
            let memo = &mut ws.memo[l];
            let (mut hash, mut collision) = (0, false);
            if memo.on {
                ws.key.clear();
                for &r in &m.in_rows {
                    let v = xp[r as usize];
                    if v != T::ZERO {
                        ws.key.push(r as u64);
                        ws.key.push(v.bits());
                    }
                }
                let seen = recent.iter().position(|e| matches!(*e, Some([ks, ke, _, _]) if same(&memo.keys[ks as usize..ke as usize], &ws.key)));
                let found = match seen {
                    Some(at) => recent[at],
                    None => {
                        let mut fx = Fx(0);
                        for &k in &ws.key {
                            std::hash::Hasher::write_u64(&mut fx, k);
                        }
                        hash = fx.0;
                        match memo.map.get(&hash) {
                            Some(&entry @ [ks, ke, _, _]) if same(&memo.keys[ks as usize..ke as usize], &ws.key) => Some(entry),
                            Some(_) => {
                                collision = true;
                                None
                            }
                            None => None,
                        }
                    }
                };
                if seen.is_none() && found.is_some() {
                    recent[next % RECENT] = found;
                    next += 1;
                }
                if let Some([_, _, s, e]) = found {
                    memo.hits += 1;
                    let xr = &mut ws.x[p * d..(p + 1) * d];
                    for &(c, v) in &memo.arena[s as usize..e as usize] {
                        xr[c as usize] += v;
                        if ws.track {
                            ws.nzb[p / BLOCK * d + c as usize] = true;
                        }
                    }
                    continue;
                }
                memo.misses += 1;
            }
            // Piecewise-linear groups where they apply, then the other units one by one.
            let u = match &m.pl {
                Some((part, rest)) if part.eval(xp, &mut ws.tmp[..d], &mut ws.zs) => rest,
                _ => &m.units,
            };
            if u.gate.is_none() {
                // ReLU: only units a nonzero input reaches, or with a positive bias, can fire;
                // the others are ReLU(0 + b) = 0 and are skipped. Each unit's sum runs in input
                // order as before; the units' outputs are added in the order they were reached.
                let (hidden, mark, active) = (&mut ws.hidden, &mut ws.mark, &mut ws.active);
                active.clear();
                for &(r, s0, e) in &u.w_in.nz_rows {
                    let xi = xp[r as usize];
                    if xi != T::ZERO {
                        let (s0, e) = (s0 as usize, e as usize);
                        for (&c, &w) in u.w_in.col[s0..e].iter().zip(&u.w_in.val[s0..e]) {
                            let c = c as usize;
                            if !mark[c] {
                                mark[c] = true;
                                active.push(c as u32);
                            }
                            hidden[c] += xi * w;
                        }
                    }
                }
                for &c in &u.pos_bias {
                    if !mark[c as usize] {
                        mark[c as usize] = true;
                        active.push(c);
                    }
                }
                let tmp = &mut ws.tmp[..d];
                let mut bad = false;
                for &c in active.iter() {
                    let c = c as usize;
                    let h = hidden[c] + u.b_in[c];
                    bad |= !h.is_finite();
                    hidden[c] = T::ZERO;
                    mark[c] = false;
                    if h > T::ZERO {
                        let (s0, e) = (u.out_ptr[c] as usize, u.out_ptr[c + 1] as usize);
                        for (&o, &w) in u.w_out.col[s0..e].iter().zip(&u.w_out.val[s0..e]) {
                            tmp[o as usize] += h * w;
                        }
                    }
                }
                if check && bad {
                    return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} mlp (hidden units)") });
                }
            } else {
                self.dense_hidden(u, p, check, l, ws)?;
            }
            let memo = &mut ws.memo[l];
            let start = memo.arena.len();
            let tmp = &mut ws.tmp[..d];
            let xr = &mut ws.x[p * d..(p + 1) * d];
            for &c in &m.out_cols {
                let c = c as usize;
                let add = tmp[c] + m.b_out[c];
                tmp[c] = T::ZERO;
                xr[c] += add;
                if ws.track && add != T::ZERO {
                    ws.nzb[p / BLOCK * d + c] = true;
                }
                if memo.on && add != T::ZERO {
                    memo.arena.push((c as u32, add));
                }
            }
            if memo.on {
                if memo.misses >= MEMO_TRIAL && memo.hits < memo.misses {
                    // Inputs rarely repeat here: stop remembering, in later passes too.
                    memo.on = false;
                    ws.memo_off[l] = true;
                    memo.map = Default::default();
                    memo.keys = vec![];
                    memo.arena = vec![];
                } else if !collision {
                    let ks = memo.keys.len() as u32;
                    memo.keys.extend_from_slice(&ws.key);
                    let entry = [ks, memo.keys.len() as u32, start as u32, memo.arena.len() as u32];
                    memo.map.insert(hash, entry);
                    recent[next % RECENT] = Some(entry);
                    next += 1;
                }
            }
        }
        Ok(())
    }

    /// The positions `range` of one MLP whose gated units are `u` (the units outside the
    /// piecewise-linear groups of `part`, or every unit), by blocks of [`BLOCK`] positions:
    /// each unit's pre-activation, gate and output for a whole block at a time. Every sum
    /// adds the same terms in the same order as the row path ([`Self::dense_hidden`]), so the
    /// results are the same but for the sign of zeros (this path also adds the exact zeros
    /// the row path skips). Positions where `part` does not apply take the row path.
    #[allow(clippy::too_many_arguments)]
    fn mlp_columns(
        &self,
        m: &Mlp<T>,
        u: &Units<T>,
        part: Option<&pl::Part<T>>,
        cols: &Columns<T>,
        range: std::ops::Range<usize>,
        check: bool,
        l: usize,
        ws: &mut Workspace<T>,
    ) -> Result<(), RuntimeError> {
        let d = self.d;
        let nd = cols.dims.len();
        let Some((_, b_gate)) = &u.gate else { return Err(RuntimeError::Device("internal error: column MLP without a gate".into())) };
        ws.xin.resize(nd * BLOCK, T::ZERO);
        let nout = m.out_cols.len();
        ws.tmpblk.resize(nout * BLOCK, T::ZERO);
        let bout_zero = m.out_cols.iter().all(|&c| m.b_out[c as usize] == T::ZERO);
        ws.pl_last.clear();
        for p0 in range.clone().step_by(BLOCK) {
            let nb = BLOCK.min(range.end - p0);
            let mut ok = [true; BLOCK];
            for (b, okb) in ok.iter_mut().enumerate().take(nb) {
                let p = p0 + b;
                if let Some(part) = part {
                    *okb = part.eval_block(&ws.x[p * d..(p + 1) * d], &mut ws.tmpblk, b, &mut ws.zs, &mut ws.pl_last);
                }
                if !*okb {
                    // Every unit, one by one (BOS, a non-finite linear form).
                    self.dense_hidden(&m.units, p, check, l, ws)?;
                    let (tmp, xr) = (&mut ws.tmp[..d], &mut ws.x[p * d..(p + 1) * d]);
                    let marks = &mut ws.nzb[p / BLOCK * d..(p / BLOCK + 1) * d];
                    for &c in &m.out_cols {
                        let c = c as usize;
                        let add = tmp[c] + m.b_out[c];
                        xr[c] += add;
                        marks[c] |= add != T::ZERO;
                        tmp[c] = T::ZERO;
                    }
                }
            }
            let Workspace { x, xin, tmpblk, nzdim, nzb, .. } = &mut *ws;
            // The dims some position of the block may hold a nonzero in (the marks of the one
            // or two blocks of `nzb` the positions fall in); the others are zeros.
            // Dims that are zero at every position of the block: a unit reading only those
            // (and no positive bias) is relu(b_in) = 0 there and, its gate being finite (every
            // input is), adds exact zeros, so it is skipped.
            // (The gathered dims in one pass: which are nonzero, whether all are finite, and
            // the largest magnitude, which bounds the gates; a NaN makes `finite` false, so
            // `xmax` need not see it.)
            let (m0, m1) = (p0 / BLOCK, (p0 + nb - 1) / BLOCK);
            nzdim.clear();
            let (mut finite, mut xmax) = (true, 0.0f64);
            for (k, &r) in cols.dims.iter().enumerate() {
                let r = r as usize;
                let column = &mut xin[k * BLOCK..k * BLOCK + nb];
                let mut nonzero = false;
                if nzb[m0 * d + r] || nzb[m1 * d + r] {
                    for (b, xv) in column.iter_mut().enumerate() {
                        let v = x[(p0 + b) * d + r];
                        *xv = v;
                        nonzero |= v != T::ZERO;
                        finite &= v.is_finite();
                        let a = v.to_f64().abs();
                        if a > xmax {
                            xmax = a;
                        }
                    }
                } else {
                    column.fill(T::ZERO);
                }
                nzdim.push(nonzero);
            }
            let (mut h, mut g) = ([T::ZERO; BLOCK], [T::ZERO; BLOCK]);
            let (h, g) = (&mut h[..nb], &mut g[..nb]);
            // Whether `tmpblk` may hold a nonzero (the groups of `part`, or a unit evaluated).
            let mut written = part.is_some();
            for (c, (&bias, &bg)) in u.b_in.iter().zip(b_gate).enumerate() {
                let ins = &cols.ent[cols.ptr[c] as usize..cols.ptr[c + 1] as usize];
                // (The gate's sum and bias, with room for rounding, stay finite: 0·g is 0.)
                let gate_finite = cols.gsum[c] * xmax * 2.0 + bg.to_f64().abs() * 2.0 < T::MAX;
                if finite && gate_finite && bias <= T::ZERO && !ins.iter().any(|&(k, _)| nzdim[k as usize]) {
                    continue;
                }
                written = true;
                h.fill(T::ZERO);
                for &(k, w) in ins {
                    let k = k as usize * BLOCK;
                    for (hb, &xv) in h.iter_mut().zip(&xin[k..k + nb]) {
                        *hb += xv * w;
                    }
                }
                for hb in h.iter_mut() {
                    *hb += bias;
                }
                if check && h.iter().zip(&ok).any(|(hb, &o)| o && !hb.is_finite()) {
                    return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} mlp (hidden units)") });
                }
                for hb in h.iter_mut() {
                    if (*hb).partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
                        *hb = T::ZERO;
                    }
                }
                g.fill(T::ZERO);
                for &(k, w) in &cols.gent[cols.gptr[c] as usize..cols.gptr[c + 1] as usize] {
                    let k = k as usize * BLOCK;
                    for (gb, &xv) in g.iter_mut().zip(&xin[k..k + nb]) {
                        *gb += xv * w;
                    }
                }
                for (hb, &gb) in h.iter_mut().zip(g.iter()) {
                    *hb = *hb * (gb + bg);
                }
                let (s0, e) = (u.out_ptr[c] as usize, u.out_ptr[c + 1] as usize);
                for (&k, &w) in cols.out_at[s0..e].iter().zip(&u.w_out.val[s0..e]) {
                    let k = k as usize * BLOCK;
                    for (o, &hb) in tmpblk[k..k + nb].iter_mut().zip(h.iter()) {
                        *o += hb * w;
                    }
                }
            }
            if !written && bout_zero {
                // Adding +0 to every written dim (x never holds -0) changes nothing.
                continue;
            }
            for (k, &c) in m.out_cols.iter().enumerate() {
                let c = c as usize;
                for (b, (&okb, tr)) in ok.iter().zip(&mut tmpblk[k * BLOCK..k * BLOCK + nb]).enumerate() {
                    if okb {
                        let add = *tr + m.b_out[c];
                        x[(p0 + b) * d + c] += add;
                        nzb[(p0 + b) / BLOCK * d + c] |= add != T::ZERO;
                    }
                    *tr = T::ZERO;
                }
            }
        }
        Ok(())
    }

    /// The hidden units of one position, every unit computed (gated MLPs): adds `W_out · h` to
    /// `ws.tmp`.
    fn dense_hidden(&self, m: &Units<T>, p: usize, check: bool, l: usize, ws: &mut Workspace<T>) -> Result<(), RuntimeError> {
        let d = self.d;
        let hid = m.b_in.len();
        let xp = &ws.x[p * d..(p + 1) * d];
        {
            // `hidden` is all zeros between uses (the ReLU path relies on it).
            let hidden = &mut ws.hidden[..hid];
            m.w_in.accumulate(xp, hidden);
            for (h, &b) in hidden.iter_mut().zip(&m.b_in) {
                *h += b;
            }
            if check && hidden.iter().any(|h| !h.is_finite()) {
                hidden.fill(T::ZERO);
                return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} mlp (hidden units)") });
            }
            for h in hidden.iter_mut() {
                if (*h).partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
                    *h = T::ZERO;
                }
            }
            if let Some((wg, bg)) = &m.gate {
                let g = &mut ws.gate[..hid];
                g.fill(T::ZERO);
                wg.accumulate(xp, g);
                for ((h, &gv), &b) in hidden.iter_mut().zip(g.iter()).zip(bg) {
                    *h = *h * (gv + b);
                }
            }
            m.w_out.accumulate(hidden, &mut ws.tmp[..d]);
            hidden.fill(T::ZERO);
        }
        Ok(())
    }

    /// One head over the sequence `ids`: adds its output to `ws.delta`.
    /// `direct`: the layer's heads write no dim any of them reads, so the position heads may add
    /// their output to the residual stream at once. Returns whether `ws.delta` was written.
    #[allow(clippy::too_many_arguments)]
    fn head(&self, h: &Head<T>, ids: &[u32], attention: Attention, check: bool, l: usize, direct: bool, ws: &mut Workspace<T>) -> Result<bool, RuntimeError> {
        let t = ids.len();
        if attention == Attention::Hard {
            match &h.kind {
                HeadKind::Token { scores } => {
                    // Scores past f32 (or NaN) keep keys that mean nothing: refused, as soft
                    // attention's weights are (helper d6: an overflowing head decoded [1, 1, 1]).
                    // Only the entries of the tokens this input holds (review: one overflowing
                    // token refused every input, where candle ran those without it).
                    if check && !h.scores_finite {
                        let vocab = self.vocab;
                        let mut present = vec![false; vocab];
                        for &id in ids {
                            present[id as usize] = true;
                        }
                        let bad = (0..vocab).filter(|&a| present[a]).any(|a| (0..vocab).any(|b| present[b] && !scores[a * vocab + b].is_finite()));
                        if bad {
                            return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} attention (attention scores)") });
                        }
                    }
                    self.values(h, t, ws);
                    self.head_token(h, scores, ids, ws);
                    return Ok(true);
                }
                HeadKind::Position { patterns, over_rows } if ws.bos_only => {
                    if let Some(pattern) = self.position_pattern(h, patterns, over_rows, t) {
                        if check && !pattern.finite {
                            return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} attention (attention weights)") });
                        }
                        if let (Some(single), Some(keyed)) = (&pattern.single, &pattern.keyed) {
                            self.head_single(h, single.len(), keyed, direct, ws);
                            return Ok(!direct);
                        }
                        self.values(h, t, ws);
                        self.head_position(h, pattern, t, direct, ws);
                        return Ok(!direct);
                    }
                }
                _ => {}
            }
        }
        let reps = match &h.queries {
            Some(per) if ws.static_ok => per.slot(t).map(|slot| slot.get_or_init(|| self.query_reps(h, t)).as_slice()),
            _ => None,
        };
        let keys = match &h.static_keys {
            Some(sk) if ws.static_ok => sk.per.slot(t).map(|slot| (sk, slot.get_or_init(|| self.static_keys(h, sk, t)).as_slice())),
            _ => None,
        };
        self.head_rows(h, t, attention, check, l, reps, keys, ws)?;
        Ok(true)
    }

    /// The value vectors of the `t` positions into `ws.v` (`[t, dv]`), and in `ws.vkeys` the
    /// positions whose value vector is not all zeros.
    fn values(&self, h: &Head<T>, t: usize, ws: &mut Workspace<T>) {
        let (d, dv) = (self.d, h.v.cols);
        let x = &ws.x[..t * d];
        let v = &mut ws.v[..t * dv];
        v.fill(T::ZERO);
        ws.vkeys.clear();
        for j in 0..t {
            let vj = &mut v[j * dv..(j + 1) * dv];
            h.v.accumulate(&x[j * d..(j + 1) * d], vj);
            if vj.iter().any(|&a| a != T::ZERO) {
                ws.vkeys.push(j as u32);
            }
        }
    }

    /// Hard attention of a [`HeadKind::Token`] head (non-causal): one attention row per distinct
    /// query token, from the key tokens' counts. Same threshold, count, weight and summation
    /// order (the keys with nonzero values, in order) as the row scan, so the same bits.
    fn head_token(&self, h: &Head<T>, scores: &[T], ids: &[u32], ws: &mut Workspace<T>) {
        let (d, dv, vocab) = (self.d, h.v.cols, self.vocab);
        let t = ids.len();
        let cnt = &mut ws.cnt[..vocab];
        cnt.fill(0);
        for &id in ids {
            cnt[id as usize] += 1;
        }
        let done = &mut ws.done[..vocab];
        done.fill(false);
        let v = &ws.v[..t * dv];
        for (i, &a) in ids.iter().enumerate() {
            let a = a as usize;
            let out = &mut ws.tok_out[a * dv..(a + 1) * dv];
            if !done[a] {
                done[a] = true;
                let row = &scores[a * vocab..(a + 1) * vocab];
                let mut max = row[ids[0] as usize];
                for (&s, &n) in row.iter().zip(cnt.iter()) {
                    if n > 0 && s > max {
                        max = s;
                    }
                }
                let thr = max - self.tie_tolerance;
                let count: u32 = row.iter().zip(cnt.iter()).filter(|&(&s, _)| s >= thr).map(|(_, &n)| n).sum();
                let w = T::ONE / T::from_usize(count as usize);
                out.fill(T::ZERO);
                for &j in &ws.vkeys {
                    let j = j as usize;
                    if row[ids[j] as usize] >= thr {
                        for (o, &vv) in out.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                            *o += w * vv;
                        }
                    }
                }
            }
            h.o.accumulate(out, &mut ws.delta[i * d..(i + 1) * d]);
        }
    }

    /// The keys each query keeps at length `t` in a [`HeadKind::Position`] head, from a sequence
    /// with BOS at position 0 and any other token elsewhere (the dims read do not tell the other
    /// tokens apart), with the row scan's scores, maximum and threshold. `Some(None)` when the
    /// pattern would not be much smaller than a dense one (or no token but BOS exists); None,
    /// only without `full`, when past [`PATTERN_MAX_LEN`] it has more than [`PATTERN_MAX_ROWS`]
    /// distinct rows ([`Self::position_pattern`] decides when to build it in full).
    fn pattern(&self, h: &Head<T>, t: usize, full: bool) -> Option<Option<Pattern<T>>> {
        let (d, dq) = (self.d, h.q.cols);
        let Some(other) = self.non_bos() else { return Some(None) };
        // Only the dims the head reads matter: one residual row, those dims rewritten per position.
        let mut reads: Vec<usize> = h.q.nz_rows.iter().chain(&h.k.nz_rows).map(|&(r, _, _)| r as usize).collect();
        reads.sort_unstable();
        reads.dedup();
        let mut x = vec![T::ZERO; d];
        let set = |p: usize, x: &mut [T]| {
            for &r in &reads {
                x[r] = self.embedded(other, p, r);
            }
        };
        // Keys transposed (`kt[c * t + j]`): a row's scores are one pass over the keys per
        // nonzero query dim.
        let mut kt = vec![T::ZERO; t * dq];
        let mut kj = vec![T::ZERO; dq];
        for j in 0..t {
            set(j, &mut x);
            kj.fill(T::ZERO);
            h.k.accumulate(&x, &mut kj);
            for (c, &v) in kj.iter().enumerate() {
                kt[c * t + j] = v;
            }
        }
        let (mut w, mut ptr, mut spans) = (Vec::with_capacity(t), vec![0u32], vec![]);
        let mut q = vec![T::ZERO; dq];
        let mut s = vec![T::ZERO; t];
        // Queries with the same nonzero dims (and, causal, the same visible keys) keep the same
        // keys: their spans are copied instead of scanning the row again.
        let mut seen: std::collections::HashMap<Vec<u64>, (u32, u32, T), std::hash::BuildHasherDefault<Fx>> = Default::default();
        let mut scores_finite = true;
        let mut key = vec![];
        let mut qnz: Vec<(usize, T)> = Vec::with_capacity(dq);
        for i in 0..t {
            let visible = if self.causal { i + 1 } else { t };
            q.fill(T::ZERO);
            set(i, &mut x);
            h.q.accumulate(&x, &mut q);
            qnz.clear();
            qnz.extend(q.iter().enumerate().filter(|&(_, &qc)| qc != T::ZERO).map(|(c, &qc)| (c, qc)));
            key.clear();
            key.push(visible as u64);
            for &(c, qc) in &qnz {
                key.push(c as u64);
                key.push(qc.bits());
            }
            if let Some(&(a, b, wi)) = seen.get(&key) {
                spans.extend_from_within(a as usize..b as usize);
                if spans.len() > 4 * t + 64 {
                    return Some(None);
                }
                w.push(wi);
                ptr.push(spans.len() as u32);
                continue;
            }
            if !full && t > PATTERN_MAX_LEN && seen.len() >= PATTERN_MAX_ROWS {
                // Long and irregular: scanning every distinct row costs more than the key lists
                // (this once; see `position_pattern`).
                return None;
            }
            scan_scores(&qnz, &kt, t, &mut s[..visible]);
            scores_finite &= s[..visible].iter().all(|x| x.is_finite());
            let max = row_max(&s[..visible]);
            let thr = max - self.tie_tolerance;
            let mut count = 0;
            let mut j = 0;
            let start = spans.len();
            while j < visible {
                if s[j] >= thr {
                    let start = j;
                    while j < visible && s[j] >= thr {
                        j += 1;
                    }
                    count += j - start;
                    spans.push((start as u32, j as u32));
                } else {
                    j += 1;
                }
            }
            if spans.len() > 4 * t + 64 {
                return Some(None);
            }
            let wi = T::ONE / T::from_usize(count);
            seen.insert(key.clone(), (start as u32, spans.len() as u32, wi));
            w.push(wi);
            ptr.push(spans.len() as u32);
        }
        let single = (ptr.windows(2).all(|p| p[1] == p[0] + 1) && spans.iter().all(|&(a, b)| b == a + 1)).then(|| spans.iter().map(|&(a, _)| a).collect());
        let finite = scores_finite && w.iter().all(|x: &T| x.is_finite());
        let keyed = single.as_ref().map(|s: &Vec<u32>| {
            let pairs = s.iter().enumerate().filter(|&(_, &j)| j != 0).map(|(i, &j)| (i as u32, j)).collect();
            let first = s.iter().enumerate().filter(|&(_, &j)| j == 0).map(|(i, _)| i as u32).collect();
            (pairs, first)
        });
        Some(Some(Pattern { w, ptr, spans, single, keyed, finite }))
    }

    /// A position head's pattern at length `t`: cached, or computed now (None: the head is
    /// scanned row by row at this length, [`Self::head_rows`], or dense in candle). Past
    /// [`PATTERN_MAX_LEN`], a pattern with more than [`PATTERN_MAX_ROWS`] distinct rows is given
    /// up the first time it is asked for (that call scans rows instead, about the same work
    /// once) and computed in full the next time. It is kept only when every query keeps one key
    /// (a transpose, a gather of each position's own key): the row scan then computes `0 + 1·v`,
    /// which is v, so switching paths changes no bit, and a length that recurs (a batch,
    /// repeated runs, `simulate`'s trials) costs a lookup per query instead of a scan of every
    /// key. Otherwise (means; long intervals are summed as prefix differences, which round
    /// differently; review helper-139) the row scan stays, so a sequence's output does not
    /// depend on what ran before it.
    fn position_pattern<'a>(&'a self, h: &Head<T>, patterns: &'a PerLength<Option<Pattern<T>>>, over_rows: &PerLength<()>, t: usize) -> Option<&'a Pattern<T>> {
        let slot = patterns.slot(t)?;
        if let Some(p) = slot.get() {
            return p.as_ref();
        }
        let full = over_rows.get(t).is_some();
        match self.pattern(h, t, full) {
            Some(built) => slot.get_or_init(|| if full { built.filter(|p| p.single.is_some()) } else { built }).as_ref(),
            None => {
                if let Some(flag) = over_rows.slot(t) {
                    let _ = flag.set(());
                }
                None
            }
        }
    }

    /// Computes the patterns at length `t` that the layer's position heads lack, on up to
    /// `available_parallelism` threads (each pattern is the same whichever thread makes it).
    fn prepare_patterns(&self, layer: &Layer<T>, t: usize) {
        let missing: Vec<&Head<T>> = layer.heads.iter().filter(|h| matches!(&h.kind, HeadKind::Position { patterns, .. } if patterns.get(t).is_none())).collect();
        let threads = self.max_threads().min(missing.len());
        if threads < 2 {
            return;
        }
        std::thread::scope(|sc| {
            for chunk in missing.chunks(missing.len().div_ceil(threads)) {
                sc.spawn(move || {
                    for h in chunk {
                        if let HeadKind::Position { patterns, over_rows } = &h.kind {
                            self.position_pattern(h, patterns, over_rows, t);
                        }
                    }
                });
            }
        });
    }

    /// Hard attention of a [`HeadKind::Position`] head whose queries each keep one key `single[i]`
    /// (weight 1): the key's value vector, computed where it is read (the row scan's `0 + 1·v`
    /// is `v`, so the same bits).
    fn head_single(&self, h: &Head<T>, t: usize, keyed: &Keyed, direct: bool, ws: &mut Workspace<T>) {
        let (d, dv) = (self.d, h.v.cols);
        let (pairs, first) = keyed;
        // Every (query, key), the queries of key 0 only when its value may be nonzero (a value of
        // exact zeros adds nothing: every path below skips it). The queries' outputs do not
        // depend on each other, so the order is free.
        let all = |key0: bool| pairs.iter().copied().chain(first.iter().filter(move |_| key0).map(|&i| (i, 0)));
        if let ([(r, _, _)], [vw], [(_, _, _)], [c], [ow]) = (&h.v.nz_rows[..], &h.v.val[..], &h.o.nz_rows[..], &h.o.col[..], &h.o.val[..]) {
            // One value dim read from one residual dim, written to one: a scalar gather (the
            // same products and zero tests as the general loop).
            let (r, c) = (*r as usize, *c as usize);
            for (i, j) in all(ws.x[r] != T::ZERO) {
                let (i, j) = (i as usize, j as usize);
                let xj = ws.x[j * d + r];
                if xj != T::ZERO {
                    let v = T::ZERO + xj * *vw;
                    if v != T::ZERO {
                        let to = if direct { &mut ws.x } else { &mut ws.delta };
                        to[i * d + c] += v * *ow;
                        if ws.track {
                            ws.nzb[i / BLOCK * d + c] = true;
                        }
                    }
                }
            }
            return;
        }
        if let (1, [(_, _, _)], [c], [ow]) = (dv, &h.o.nz_rows[..], &h.o.col[..], &h.o.val[..]) {
            // One value dim summed from a few residual dims (a value stored as partial sums),
            // written to one: the same sum, in the same order, as the general loop below. Heads
            // of one layer with the same value projection (every gather of one value) share
            // the column of values, computed once per layer (the layer's heads write no dim
            // they read when `direct`, and otherwise only `delta`, so it stays valid).
            let c = *c as usize;
            let taps: Vec<(u32, T)> = h.v.nz_rows.iter().map(|&(r, s0, _)| (r, h.v.val[s0 as usize])).collect();
            let at = match ws.vcols.iter().position(|(k, _, _)| *k == taps) {
                Some(at) => at,
                None => {
                    ws.vcols.push((taps, vec![T::ZERO; t], vec![false; t]));
                    ws.vcols.len() - 1
                }
            };
            // The value of key `j`, computed on first use.
            let value = |x: &[T], col: &mut ValueColumn<T>, j: usize| {
                let (taps, vals, have) = col;
                if !have[j] {
                    let xr = &x[j * d..(j + 1) * d];
                    let mut v = T::ZERO;
                    for &(r, w) in taps.iter() {
                        let xi = xr[r as usize];
                        if xi != T::ZERO {
                            v += xi * w;
                        }
                    }
                    vals[j] = v;
                    have[j] = true;
                }
                vals[j]
            };
            let key0 = value(&ws.x, &mut ws.vcols[at], 0) != T::ZERO;
            for (i, j) in all(key0) {
                let v = value(&ws.x, &mut ws.vcols[at], j as usize);
                if v != T::ZERO {
                    let i = i as usize;
                    let to = if direct { &mut ws.x } else { &mut ws.delta };
                    to[i * d + c] += v * *ow;
                    if ws.track {
                        ws.nzb[i / BLOCK * d + c] = true;
                    }
                }
            }
            return;
        }
        let outv = &mut ws.outv[..dv];
        outv.fill(T::ZERO);
        h.v.accumulate(&ws.x[..d], outv);
        let key0 = outv.iter().any(|&o| o != T::ZERO);
        for (i, j) in all(key0) {
            let (i, j) = (i as usize, j as usize);
            outv.fill(T::ZERO);
            h.v.accumulate(&ws.x[j * d..(j + 1) * d], outv);
            let to = if direct { &mut ws.x } else { &mut ws.delta };
            h.o.accumulate(outv, &mut to[i * d..(i + 1) * d]);
            if ws.track && direct && outv.iter().any(|&o| o != T::ZERO) {
                h.o.mark(&mut ws.nzb[i / BLOCK * d..(i / BLOCK + 1) * d]);
            }
        }
    }

    /// Hard attention of a [`HeadKind::Position`] head from its pattern: each query averages the
    /// values of its intervals of keys, short ones summed key by key (as the row scan sums them),
    /// long ones as a difference of prefix sums (O(1) per interval).
    fn head_position(&self, h: &Head<T>, pattern: &Pattern<T>, t: usize, direct: bool, ws: &mut Workspace<T>) {
        let (d, dv) = (self.d, h.v.cols);
        let v = &ws.v[..t * dv];
        let mut prefix = false;
        let outv = &mut ws.outv[..dv];
        for i in 0..t {
            let w = pattern.w[i];
            outv.fill(T::ZERO);
            for &(a, b) in &pattern.spans[pattern.ptr[i] as usize..pattern.ptr[i + 1] as usize] {
                if b - a <= SHORT_SPAN {
                    for j in a as usize..b as usize {
                        for (o, &vv) in outv.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                            *o += w * vv;
                        }
                    }
                } else {
                    let pre = &mut ws.pre;
                    if !prefix {
                        // pre[j * dv + c]: the sum of the values of keys 0..j in dim c.
                        prefix = true;
                        pre.clear();
                        pre.resize((t + 1) * dv, T::ZERO);
                        for j in 0..t {
                            for c in 0..dv {
                                pre[(j + 1) * dv + c] = pre[j * dv + c] + v[j * dv + c];
                            }
                        }
                    }
                    let (a, b) = (a as usize, b as usize);
                    for (c, o) in outv.iter_mut().enumerate() {
                        *o += w * (pre[b * dv + c] - pre[a * dv + c]);
                    }
                }
            }
            h.o.accumulate(outv, &mut (if direct { &mut ws.x } else { &mut ws.delta })[i * d..(i + 1) * d]);
            if ws.track && direct && outv.iter().any(|&o| o != T::ZERO) {
                h.o.mark(&mut ws.nzb[i / BLOCK * d..(i / BLOCK + 1) * d]);
            }
        }
    }

    /// One head over one sequence, one score row per query (any head, hard or soft attention).
    /// The first token id that is not BOS.
    fn non_bos(&self) -> Option<usize> {
        (0..self.vocab).find(|&i| i != self.bos as usize)
    }

    /// Dim `r` of position `p`'s row in a sequence with BOS at position 0 and token `other`
    /// everywhere else: `token + position`, the same bits as the forward pass's embeddings.
    fn embedded(&self, other: usize, p: usize, r: usize) -> T {
        let id = if p == 0 { self.bos as usize } else { other };
        self.embed_token[id * self.d + r] + self.embed_pos[p * self.d + r]
    }

    /// For a head with [`Head::queries`], at length `t`: each query's first query with the same
    /// nonzero query entries (the test the row path's sharing makes), from the rows
    /// `token + position` of a sequence with BOS at position 0 only.
    fn query_reps(&self, h: &Head<T>, t: usize) -> Vec<u32> {
        let other = self.non_bos().unwrap_or(self.bos as usize);
        let mut x = vec![T::ZERO; self.d];
        let mut q = vec![T::ZERO; h.q.cols];
        let mut first: std::collections::HashMap<Vec<(u32, u64)>, u32> = Default::default();
        (0..t)
            .map(|p| {
                for &(r, _, _) in &h.q.nz_rows {
                    x[r as usize] = self.embedded(other, p, r as usize);
                }
                q.fill(T::ZERO);
                h.q.accumulate(&x, &mut q);
                let key: Vec<(u32, u64)> = q.iter().enumerate().filter(|&(_, &qc)| qc != T::ZERO).map(|(c, &qc)| (c as u32, qc.bits())).collect();
                *first.entry(key).or_insert(p as u32)
            })
            .collect()
    }

    /// For a head with [`Head::static_keys`], at length `t`: the nonzero keys of its static key
    /// dims, summed as the row path sums them, from the rows `token + position` of a sequence
    /// with BOS at position 0 only.
    fn static_keys(&self, h: &Head<T>, sk: &StaticKeys<T>, t: usize) -> Vec<(u32, u32, T)> {
        let other = self.non_bos().unwrap_or(self.bos as usize);
        let mut kj = vec![T::ZERO; h.k.cols];
        let mut out = vec![];
        for j in 0..t {
            kj.fill(T::ZERO);
            let mut hit = vec![];
            for &(r, s0, e) in &sk.fixed {
                let xi = self.embedded(other, j, r as usize);
                if xi != T::ZERO {
                    let (s0, e) = (s0 as usize, e as usize);
                    for (&c, &w) in h.k.col[s0..e].iter().zip(&h.k.val[s0..e]) {
                        if !hit.contains(&c) {
                            hit.push(c);
                        }
                        kj[c as usize] += xi * w;
                    }
                }
            }
            out.extend(hit.into_iter().map(|c| (c, j as u32, kj[c as usize])));
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn head_rows(
        &self,
        h: &Head<T>,
        t: usize,
        attention: Attention,
        check: bool,
        l: usize,
        reps: Option<&[u32]>,
        keys: Option<(&StaticKeys<T>, &KeyEntries<T>)>,
        ws: &mut Workspace<T>,
    ) -> Result<(), RuntimeError> {
        let d = self.d;
        let (dq, dv) = (h.q.cols, h.v.cols);
        let x = &ws.x[..t * d];
        // Keys, transposed: kt[c * t + j], written sparsely (`kt` is all zeros between heads),
        // and by dim: `kcol[kptr[c]..kptr[c + 1]]` lists in increasing order the keys `j` a
        // nonzero weight reaches in dim `c` (every other key has kt[c * t + j] = 0). Static key
        // dims come from `keys` (no other row reaches them, so they are the same sums).
        let kt = &mut ws.kt[..dq * t];
        ws.kent.clear();
        let stamp = &mut ws.kstamp[..dq];
        stamp.fill(0);
        let krows = keys.map_or(&h.k.nz_rows[..], |(sk, _)| &sk.rows[..]);
        for j in 0..t {
            let xj = &x[j * d..(j + 1) * d];
            for &(r, s0, e) in krows {
                let xi = xj[r as usize];
                if xi != T::ZERO {
                    let (s0, e) = (s0 as usize, e as usize);
                    for (&c, &w) in h.k.col[s0..e].iter().zip(&h.k.val[s0..e]) {
                        let c = c as usize;
                        kt[c * t + j] += xi * w;
                        if stamp[c] != j as u32 + 1 {
                            stamp[c] = j as u32 + 1;
                            ws.kent.push((c as u32, j as u32));
                        }
                    }
                }
            }
        }
        if let Some((_, fixed)) = keys {
            for &(c, j, v) in fixed {
                kt[c as usize * t + j as usize] = v;
                ws.kent.push((c, j));
            }
        }
        let kptr = &mut ws.kptr[..dq + 1];
        kptr.fill(0);
        for &(c, _) in &ws.kent {
            kptr[c as usize + 1] += 1;
        }
        for c in 0..dq {
            kptr[c + 1] += kptr[c];
        }
        ws.kcol.resize(ws.kent.len(), 0);
        stamp.copy_from_slice(&kptr[..dq]);
        for &(c, j) in &ws.kent {
            ws.kcol[stamp[c as usize] as usize] = j;
            stamp[c as usize] += 1;
        }
        self.values(h, t, ws);
        let x = &ws.x[..t * d];
        let kt = &mut ws.kt[..dq * t];
        let q = &mut ws.q[..dq];
        let v = &ws.v[..t * dv];
        ws.qkeys.clear();
        ws.qent.clear();
        ws.qouts.clear();
        ws.qmap.clear();
        // Causal rows see different keys: no sharing between queries there. (Known shared
        // queries, `reps`, need no search.)
        let mut share = !self.causal && reps.is_none();
        let mut hits = 0;
        for i in 0..t {
            if let Some(reps) = reps {
                let first = reps[i] as usize;
                if first != i {
                    let o = ws.qslot[first] as usize;
                    h.o.accumulate(&ws.qouts[o..o + dv], &mut ws.delta[i * d..(i + 1) * d]);
                    continue;
                }
                ws.qslot[i] = ws.qouts.len() as u32;
            }
            let visible = if self.causal { i + 1 } else { t };
            q.fill(T::ZERO);
            h.q.accumulate(&x[i * d..(i + 1) * d], q);
            ws.qnz.clear();
            ws.qnz.extend(q.iter().enumerate().filter(|&(_, &qc)| qc != T::ZERO).map(|(c, &qc)| (c, qc)));
            let mut hash = None;
            if share {
                let key_start = ws.qkeys.len();
                let mut fx = Fx(0);
                for &(c, qc) in &ws.qnz {
                    ws.qkeys.push(c as u64);
                    ws.qkeys.push(qc.bits());
                    std::hash::Hasher::write_u64(&mut fx, c as u64);
                    std::hash::Hasher::write_u64(&mut fx, qc.bits());
                }
                let (keys, new) = ws.qkeys.split_at(key_start);
                // A few rows are searched in order; past that, by hash.
                let found = if ws.qent.len() <= SHARE_LINEAR { ws.qent.iter().find(|e| e.3 == fx.0).copied() } else { ws.qmap.get(&fx.0).map(|&e| ws.qent[e as usize]) };
                match found {
                    Some((a, b, o, _)) if same(&keys[a as usize..b as usize], new) => {
                        hits += 1;
                        ws.qkeys.truncate(key_start);
                        h.o.accumulate(&ws.qouts[o as usize..o as usize + dv], &mut ws.delta[i * d..(i + 1) * d]);
                        continue;
                    }
                    // Another key with the same hash: this one is computed, not remembered.
                    Some(_) => ws.qkeys.truncate(key_start),
                    None if ws.qent.len() >= SHARE_MAX_ROWS || (ws.qent.len() >= 6 && hits * 2 < ws.qent.len()) => {
                        // Queries rarely repeat in this head: stop looking.
                        share = false;
                    }
                    None => {
                        hash = Some(fx.0);
                        ws.qent.push((key_start as u32, ws.qkeys.len() as u32, ws.qouts.len() as u32, fx.0));
                    }
                }
            }
            let outv = &mut ws.outv[..dv];
            if attention == Attention::Hard && !ws.qnz.is_empty() && ws.qnz.len() <= 4 && ws.qnz.iter().all(|&(_, qc)| qc.is_finite()) {
                // Few nonzero query dims (an `==` head on one-hot encodings, maybe with a BOS
                // dim): only the keys listed under them can score other than 0.
                ws.union.clear();
                for &(c, _) in &ws.qnz {
                    let list = &ws.kcol[ws.kptr[c] as usize..ws.kptr[c + 1] as usize];
                    ws.union.extend_from_slice(&list[..list.partition_point(|&j| (j as usize) < visible)]);
                }
                if ws.union.len() * 2 <= visible {
                    ws.union.sort_unstable();
                    ws.union.dedup();
                    let qnz = &ws.qnz;
                    let score = |j: usize| {
                        let mut sj = qnz[0].1 * kt[qnz[0].0 * t + j];
                        for &(c, qc) in &qnz[1..] {
                            sj += qc * kt[c * t + j];
                        }
                        sj
                    };
                    let mut zero = qnz[0].1 * T::ZERO;
                    for &(_, qc) in &qnz[1..] {
                        zero += qc * T::ZERO;
                    }
                    if lookup(&ws.union, visible, score, zero, self.tie_tolerance, v, dv, outv) {
                        if let Some(hash) = hash {
                            remember(&mut ws.qmap, &ws.qent, hash);
                            ws.qouts.extend_from_slice(outv);
                        } else if reps.is_some() {
                            ws.qouts.extend_from_slice(outv);
                        }
                        h.o.accumulate(outv, &mut ws.delta[i * d..(i + 1) * d]);
                        continue;
                    }
                }
            }
            let s = &mut ws.scores[..visible];
            // Keys listed under the query's nonzero dims (the others add exact zeros there).
            let listed: usize = ws.qnz.iter().map(|&(c, _)| ws.kcol[ws.kptr[c] as usize..ws.kptr[c + 1] as usize].partition_point(|&j| (j as usize) < visible)).sum();
            let sparse = ws.qnz.len() >= 2 && listed * 2 < visible * ws.qnz.len() && ws.qnz.iter().all(|&(_, qc)| qc.is_finite());
            if sparse {
                // Per dim, over its listed keys: the same sums as the scan, less the exact zeros
                // (in the same dim order).
                s.fill(T::ZERO);
                for &(c, qc) in &ws.qnz {
                    for &j in &ws.kcol[ws.kptr[c] as usize..ws.kptr[c + 1] as usize] {
                        let j = j as usize;
                        if j >= visible {
                            break;
                        }
                        s[j] += qc * kt[c * t + j];
                    }
                }
            } else {
                scan_scores(&ws.qnz, kt, t, s);
            }
            let max = row_max(s);
            outv.fill(T::ZERO);
            // Keys with an all-zero value vector add exact zeros: only `vkeys` are summed.
            match attention {
                Attention::Hard => {
                    if check && s.iter().any(|x| !x.is_finite()) {
                        return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} attention (attention scores)") });
                    }
                    let thr = max - self.tie_tolerance;
                    let count = s.iter().filter(|&&sj| sj >= thr).count();
                    let w = T::ONE / T::from_usize(count);
                    if check && !w.is_finite() {
                        return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} attention (attention weights)") });
                    }
                    for &j in ws.vkeys.iter().take_while(|&&j| (j as usize) < visible) {
                        let j = j as usize;
                        if s[j] >= thr {
                            for (o, &vv) in outv.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                                *o += w * vv;
                            }
                        }
                    }
                }
                Attention::Soft => {
                    let mut sum = T::ZERO;
                    for sj in s.iter_mut() {
                        *sj = ((*sj - max) * self.beta).exp();
                        sum += *sj;
                    }
                    if check && s.iter().any(|&e| !(e / sum).is_finite()) {
                        return Err(RuntimeError::NonFiniteActivation { stage: format!("layer {l} attention (attention weights)") });
                    }
                    for &j in ws.vkeys.iter().take_while(|&&j| (j as usize) < visible) {
                        let j = j as usize;
                        let w = s[j] / sum;
                        for (o, &vv) in outv.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                            *o += w * vv;
                        }
                    }
                }
            }
            if let Some(hash) = hash {
                remember(&mut ws.qmap, &ws.qent, hash);
                ws.qouts.extend_from_slice(outv);
            } else if reps.is_some() {
                ws.qouts.extend_from_slice(outv);
            }
            h.o.accumulate(outv, &mut ws.delta[i * d..(i + 1) * d]);
        }
        for &(c, j) in &ws.kent {
            kt[c as usize * t + j as usize] = T::ZERO;
        }
        Ok(())
    }
}

/// Hard attention from the keys `list` (visible, increasing, fewer than `visible`) that can
/// score other than `zero` (the score of every other key); `score(j)` is key `j`'s score,
/// computed as the row scan computes it. Sets `outv` to the average of the selected keys' values
/// and returns true, with the same threshold, count and summation order as the row scan; returns
/// false (the caller scans the row) when keys off the list are selected too (`zero` ties the
/// maximum).
#[inline]
#[allow(clippy::too_many_arguments)]
fn lookup<T: Real>(list: &[u32], visible: usize, score: impl Fn(usize) -> T, zero: T, tol: T, v: &[T], dv: usize, outv: &mut [T]) -> bool {
    let mut max = zero;
    for &j in list {
        let sj = score(j as usize);
        if !sj.is_finite() {
            // The general path refuses it (or keeps it, unchecked).
            return false;
        }
        if sj > max {
            max = sj;
        }
    }
    let thr = max - tol;
    if list.len() < visible && zero >= thr {
        return false;
    }
    let count = list.iter().filter(|&&j| score(j as usize) >= thr).count();
    let w = T::ONE / T::from_usize(count);
    outv.fill(T::ZERO);
    for &j in list {
        let j = j as usize;
        if score(j) >= thr {
            for (o, &vv) in outv.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                *o += w * vv;
            }
        }
    }
    true
}

impl<T: Real> FastModel<T> {
    #[doc(hidden)]
    pub fn describe(&self) -> String {
        let mut s = format!("d {} vocab {} pos {} causal {} readout nnz {} cols {}\n", self.d, self.vocab, self.max_positions, self.causal, self.readout.nnz(), self.readout.cols);
        for (l, layer) in self.layers.iter().enumerate() {
            for (h, hd) in layer.heads.iter().enumerate() {
                s += &format!(
                    "L{l} head{h}: dq {} q nnz {} rows {} | k nnz {} rows {} | dv {} v nnz {} rows {} | o nnz {}\n",
                    hd.q.cols,
                    hd.q.nnz(),
                    hd.q.nz_rows.len(),
                    hd.k.nnz(),
                    hd.k.nz_rows.len(),
                    hd.v.cols,
                    hd.v.nnz(),
                    hd.v.nz_rows.len(),
                    hd.o.nnz()
                );
            }
            if let Some(m) = &layer.mlp {
                s += &format!(
                    "L{l} mlp: in_rows {} hidden {} out_cols {} w_in nnz {} w_out nnz {} gate {} pos_bias {}\n",
                    m.in_rows.len(),
                    m.units.b_in.len(),
                    m.out_cols.len(),
                    m.units.w_in.nnz(),
                    m.units.w_out.nnz(),
                    m.units.gate.is_some(),
                    m.units.pos_bias.len()
                );
                if let Some((part, _)) = &m.pl {
                    s += &format!("L{l} mlp: {} piecewise-linear groups of {} units\n", part.groups.len(), part.grouped());
                }
            }
        }
        s
    }
}
