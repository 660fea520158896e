//! Lowering of real-valued programs: the input is a sequence of numbers in declared bounds
//! (`--input-bounds LO,HI`), and the compiler certifies how far the network can be from the
//! program (docs/compiler.md, "Real-valued programs").
//!
//! * **Positional values** (functions of `indices` alone, selectors between them, widths and
//!   aggregates of them) are computed at compile time and written into the position embedding:
//!   index arithmetic costs no layer.
//! * **Real s-ops** are symbolic expressions over *resident* slots (the input number, positional
//!   numbers, head and MLP outputs). An affine expression costs nothing: readers read the
//!   combination. Anything else is materialised by one MLP as an affine part plus *terms*: a
//!   unary function of one affine form (piecewise linear on the interval inference derives,
//!   knots placed by interval second derivatives, breakpoints of comparisons exact), or a
//!   product of two affine forms (gated units compute it exactly; ReLU units use
//!   `ab = p² - q²` with two piecewise-linear squares). Operands that are not affine are
//!   materialised first, one MLP earlier.
//! * **Aggregates** of a positional selector are one head: `==` selectors on integer positions
//!   score `-Σ (f(k) - g(q))²` (0 selected, ≤ -1 otherwise); others score through one-hot key
//!   groups. `aggregate_max` scores `c·v` on selected keys and `-M` elsewhere, so the hard
//!   row maximum is exactly the largest value (to f32 resolution).
//! * **Error bounds**: every resident carries the interval of its exact value and a bound on
//!   |computed - exact|, propagated through affine forms (Σ|c|e), unary terms (Lipschitz·e +
//!   interpolation error), products (|a|e_b + |b|e_a + e_a e_b) and heads, plus f32 rounding
//!   (γ_n = n·u/(1 - n·u) of the summed magnitudes).

mod grid;
mod relative;
use grid::{grid_counts, looks_ahead};

use crate::plan::*;
use raspc_lang::ast::{BinOp, Cmp};
use raspc_lang::graph::{Convert, MapOp, Operand};
use raspc_lang::{Atom, Diagnostic, Graph, NodeId, NodeKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How MLPs compute products and piecewise-linear functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MlpMode {
    /// ReLU units only: products through piecewise-linear squares (certified error).
    #[default]
    Relu,
    /// Gated ReGLU units: products exact; other functions piecewise linear.
    Gated,
}

/// Options of a real-valued compile.
#[derive(Clone, Debug)]
pub struct RealOptions {
    /// Every input number lies in [lo, hi].
    pub lo: f64,
    pub hi: f64,
    /// Narrower bounds for blocks of positions: `(start, end, lo, hi)` for token positions
    /// `start..end` (each within [lo, hi] above). Heads that read only such a block see its bounds.
    pub blocks: Vec<(usize, usize, f64, f64)>,
    pub mlp: MlpMode,
    /// Interpolation error per piecewise-linear function; None: chosen per function to
    /// minimise its certified error (interpolation plus f32 rounding of the units' sum).
    pub pl_error: Option<f64>,
    /// Every input number is an f32 number, so an f32 forward pass reads it exactly (the f32
    /// certificate then charges no rounding of the inputs; an f64 pass never does).
    pub f32_inputs: bool,
    /// Blocks of positions whose input numbers are integer multiples of a power of two:
    /// `(start, end, e)`, every input at token positions `start..end` is `j·2^e` for an integer
    /// j (and within its bounds, at most 2^(e+24) in magnitude: an f32 number). Products and
    /// sums of such numbers that stay within 24 bits are exact in any order, and the
    /// certificate charges them nothing (docs/compiler.md, "Exact sums on a grid").
    pub grids: Vec<(usize, usize, i32)>,
}

/// Interval and certified error of one materialised s-op.
#[derive(Clone, Debug, PartialEq)]
pub struct SopBound {
    pub label: String,
    pub lo: f64,
    pub hi: f64,
    /// Bound on |network value - program value| at every position, evaluated in f32.
    pub err: f64,
    /// The same, evaluated in f64 (weights as stored, in f32).
    pub err_f64: f64,
}

/// What a real-valued compile certifies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub sops: Vec<SopBound>,
    /// Certified bound on the output's error, evaluated in f32.
    pub output_bound: f64,
    /// The same, evaluated in f64.
    pub output_bound_f64: f64,
}

impl Report {
    /// A warning when the certified f32 bound is at least a tenth of the output's largest
    /// magnitude: a check within it says little about the model (a long chain of products can
    /// certify 1e5 for values in [-1, 1]).
    pub fn loose_bound_warning(&self) -> Option<String> {
        self.loose_bound_warning_seen(None)
    }

    /// [`Self::loose_bound_warning`], also against the largest output the program gave on
    /// sampled inputs (`seen`: that value and the number of inputs): the certified interval of
    /// the output can be far wider than what it takes (a softmax in [0, 1] certified within 1.9
    /// at max-len 12, its interval up to 20: helper a20).
    pub fn loose_bound_warning_seen(&self, seen: Option<(f64, usize)>) -> Option<String> {
        let out = self.sops.last()?;
        let scale = out.lo.abs().max(out.hi.abs());
        let tail = "a model within it may still be far from the program; `raspc compile --bounds` shows where the bound grows (intervals and errors per s-op)";
        // (An output that is always 0 has nothing to compare the bound with.)
        if scale > 0.0 && self.output_bound >= 0.1 * scale {
            return Some(format!(
                "warning: the certified bound {:.3e} is {:.0}% of the output's largest magnitude ({:.3e}): {tail}",
                self.output_bound,
                100.0 * self.output_bound / scale,
                scale
            ));
        }
        let (m, n) = seen.filter(|&(m, _)| m > 0.0 && self.output_bound >= 0.1 * m)?;
        Some(format!(
            "warning: the certified bound {:.3e} is {:.0}% of the largest output the program gives on {n} sampled inputs ({m:.3e}; the certified range of the output reaches {scale:.3e}): {tail}",
            self.output_bound,
            100.0 * self.output_bound / m,
        ))
    }
}

/// f32 unit roundoff.
const U32: f64 = 5.960_464_477_539_063e-8;

/// f64 unit roundoff.
const U64: f64 = 1.1102230246251565e-16;

fn f32_down(x: f64) -> f64 {
    let f = x as f32;
    if (f as f64) <= x {
        f as f64
    } else {
        f.next_down() as f64
    }
}

fn f32_up(x: f64) -> f64 {
    let f = x as f32;
    if (f as f64) >= x {
        f as f64
    } else {
        f.next_up() as f64
    }
}

fn f32_exact(w: f64) -> bool {
    (w as f32) as f64 == w
}

/// The exponent e of the coarsest grid `j·2^e` (j an integer) that holds x: `i32::MAX` for 0,
/// None for non-finite x or one finer than 2^-200.
fn grid_exp(x: f64) -> Option<i32> {
    if x == 0.0 {
        return Some(i32::MAX);
    }
    if !x.is_finite() {
        return None;
    }
    let mut e = x.abs().log2().floor() as i32;
    while (x * 2f64.powi(-e)).fract() != 0.0 {
        e -= 1;
        if e < -200 {
            return None;
        }
    }
    Some(e)
}

/// j when |c| = 2^j: multiplying by c is exact (within f32's exponent range).
fn pow2_exp(c: f64) -> Option<i32> {
    let j = c.abs().log2().round();
    ((-100.0..=100.0).contains(&j) && c.abs() == j.exp2()).then_some(j as i32)
}

/// Whether numbers on the grid 2^g whose magnitudes sum to at most `mag` are f32 numbers, with
/// every partial sum of them: at most 2^(g+24), and within f32's range (the grid no finer than
/// its smallest subnormal step 2^-149, the sum below 2^126).
fn grid_fits(g: i32, mag: f64) -> bool {
    g == i32::MAX || (g >= -149 && mag <= (f64::from(g) + 24.0).exp2() && mag <= 2f64.powi(126))
}

fn gamma_u(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    nu / (1.0 - nu)
}

/// Rounding of a sum of nonzero terms whose computed values are bounded by `mags`, in any
/// summation order: `u·(1 + γ_k)·Σ_i m_(i)·c_i` with the bounds sorted in decreasing order and
/// `c = (k-1, k-1, k-2, ..., 1)` (k terms), about half of `γ_{k-1}·Σ m` for equal bounds.
///
/// Proof: the computed sum is a binary tree of k leaves; each of its k - 1 additions rounds once,
/// by at most u·|its computed value|, and that error reaches the root unchanged (later additions
/// add it exactly). A node's computed value is at most `(1+u)^k` times the sum of the bounds of
/// the leaves below it, so the total is at most `u(1+γ_k)·Σ_leaves m_l·depth_l` (depth: the
/// additions above the leaf). Internal nodes whose subtree holds at least s leaves form a
/// subtree of i nodes; it has i + 1 hanging children, two of them (below one of its lowest
/// nodes) together holding at least s leaves and the other i - 1 at least one each, so
/// `k ≥ s + i - 1`: the i-th largest subtree size is at most `k - i + 1`, a chain's. So the sum
/// of the j largest depths, `Σ_nodes min(j, size)`, is at most the chain's for every j; with
/// the bounds paired in decreasing order (rearrangement) and decreasing (Abel summation), the
/// chain's depths `c` give the largest `Σ m·depth`. A term bounded by 0 is an exact zero
/// (adds no rounding).
fn chain_err(mags: &[f64], u: f64) -> f64 {
    let mut m: Vec<f64> = mags.iter().copied().filter(|&x| x > 0.0).collect();
    m.sort_by(|a, b| b.total_cmp(a));
    let k = m.len();
    if k < 2 {
        return 0.0;
    }
    let s: f64 = m.iter().enumerate().map(|(i, x)| x * (k - i.max(1)) as f64).sum();
    u * (1.0 + gamma_u(k, u)) * s
}

/// [`chain_err`] under both arithmetics (bounds per arithmetic).
fn chain_err2(mags: &[Err2]) -> Err2 {
    let (a, b): (Vec<f64>, Vec<f64>) = mags.iter().map(|e| (e.f32, e.f64)).unzip();
    Err2 { f32: chain_err(&a, U32), f64: chain_err(&b, U64) }
}

/// Keeps, per arithmetic, the smaller of two valid `(error, magnitude)` bounds.
fn keep_smaller(best: &mut Option<(Err2, Err2)>, e: Err2, p: Err2) {
    *best = Some(match *best {
        None => (e, p),
        Some((be, bp)) => (min2(be, e), min2(bp, p)),
    });
}

fn min2(a: Err2, b: Err2) -> Err2 {
    Err2 { f32: a.f32.min(b.f32), f64: a.f64.min(b.f64) }
}

/// An error bound under each arithmetic the certificate covers: f32, and f64 on the stored f32
/// weights. The network never depends on it; only the bounds do.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Err2 {
    f32: f64,
    f64: f64,
}

impl Err2 {
    fn both(x: f64) -> Err2 {
        Err2 { f32: x, f64: x }
    }
    /// The larger of the two: what decides the network (domains, scales) covers both.
    fn max(self) -> f64 {
        self.f32.max(self.f64)
    }
    /// Rounding of an n-term dot product relative to Σ|terms|; `exact_weights` when every weight
    /// is exactly an f32 (storing it loses nothing).
    fn gamma(n: usize, exact_weights: bool) -> Err2 {
        Err2 { f32: gamma_u(n + 1, U32), f64: if exact_weights { 0.0 } else { 2.0 * U32 } + gamma_u(n + 1, U64) }
    }
    /// Rounding of a sum of `terms` numbers relative to Σ|terms|, when the terms themselves are
    /// exact (inputs times weights ±1, or an exact bias): only the additions between nonzero
    /// terms round, at most `terms - 1` on any path of any summation order (adding an exact
    /// zero, as the products of zero weights are, does not round), so `γ_{terms-1}`.
    fn gamma_sum(terms: usize) -> Err2 {
        Err2 { f32: gamma_u(terms.saturating_sub(1), U32), f64: gamma_u(terms.saturating_sub(1), U64) }
    }
}

impl std::ops::Add for Err2 {
    type Output = Err2;
    fn add(self, o: Err2) -> Err2 {
        Err2 { f32: self.f32 + o.f32, f64: self.f64 + o.f64 }
    }
}

impl std::ops::AddAssign for Err2 {
    fn add_assign(&mut self, o: Err2) {
        *self = *self + o;
    }
}

impl std::ops::Sub for Err2 {
    type Output = Err2;
    fn sub(self, o: Err2) -> Err2 {
        Err2 { f32: self.f32 - o.f32, f64: self.f64 - o.f64 }
    }
}

impl std::ops::Mul for Err2 {
    type Output = Err2;
    fn mul(self, o: Err2) -> Err2 {
        Err2 { f32: self.f32 * o.f32, f64: self.f64 * o.f64 }
    }
}

impl std::ops::Mul<f64> for Err2 {
    type Output = Err2;
    fn mul(self, w: f64) -> Err2 {
        Err2 { f32: self.f32 * w, f64: self.f64 * w }
    }
}

impl std::ops::Mul<Err2> for f64 {
    type Output = Err2;
    fn mul(self, e: Err2) -> Err2 {
        e * self
    }
}

impl std::iter::Sum for Err2 {
    fn sum<I: Iterator<Item = Err2>>(it: I) -> Err2 {
        it.fold(Err2::default(), |a, b| a + b)
    }
}

/// Most knots one piecewise-linear function may use.
const MAX_KNOTS: usize = 200_000;
/// Most key groups a group-scored head may use.
const MAX_GROUPS: usize = 2048;
/// The fewest terms a head's value needs before it is written as partial sums
/// ([`RealLowerer::blocked_resident`]).
const BLOCK_MIN_TERMS: usize = 9;
/// The fewest units an exp or reciprocal block needs before it writes partial sums ([`Group`]).
const GROUP_MIN_UNITS: usize = 16;

// ---- intervals and jets -------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iv {
    pub lo: f64,
    pub hi: f64,
}

impl Iv {
    fn pt(x: f64) -> Iv {
        Iv { lo: x, hi: x }
    }
    fn new(a: f64, b: f64) -> Iv {
        Iv { lo: a.min(b), hi: a.max(b) }
    }
    fn add(self, o: Iv) -> Iv {
        Iv { lo: self.lo + o.lo, hi: self.hi + o.hi }
    }
    fn neg(self) -> Iv {
        Iv { lo: -self.hi, hi: -self.lo }
    }
    fn scale(self, c: f64) -> Iv {
        Iv::new(self.lo * c, self.hi * c)
    }
    fn mul(self, o: Iv) -> Iv {
        let p = [self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi];
        Iv { lo: p.iter().cloned().fold(f64::INFINITY, f64::min), hi: p.iter().cloned().fold(f64::NEG_INFINITY, f64::max) }
    }
    fn hull(self, o: Iv) -> Iv {
        Iv { lo: self.lo.min(o.lo), hi: self.hi.max(o.hi) }
    }
    fn mag(self) -> f64 {
        self.lo.abs().max(self.hi.abs())
    }
    fn contains_zero(self) -> bool {
        self.lo <= 0.0 && self.hi >= 0.0
    }
    fn recip(self) -> Option<Iv> {
        if self.contains_zero() {
            None
        } else {
            Some(Iv::new(1.0 / self.lo, 1.0 / self.hi))
        }
    }
    fn exp(self) -> Iv {
        Iv { lo: self.lo.exp(), hi: self.hi.exp() }
    }
    /// `x^n` over the interval (n ≥ 0): even powers are never negative, odd ones monotone.
    fn powi(self, n: i32) -> Iv {
        match n {
            0 => Iv::pt(1.0),
            _ if n % 2 == 1 => Iv { lo: self.lo.powi(n), hi: self.hi.powi(n) },
            _ if self.contains_zero() => Iv { lo: 0.0, hi: self.mag().powi(n) },
            _ => Iv::new(self.lo.powi(n), self.hi.powi(n)),
        }
    }
    fn sq(self) -> Iv {
        if self.contains_zero() {
            Iv { lo: 0.0, hi: self.mag() * self.mag() }
        } else {
            self.mul(self)
        }
    }
}

/// A unary function of `u`, as the compiler approximates it.
#[derive(Clone, Debug, PartialEq)]
pub enum F {
    /// `a·u + b`
    Lin(f64, f64),
    C(f64),
    Add(Box<F>, Box<F>),
    Mul(Box<F>, Box<F>),
    Div(Box<F>, Box<F>),
    Neg(Box<F>),
    Exp(Box<F>),
    /// `x ^ p` for a constant p (x > 0 unless p is a small natural number).
    Pow(Box<F>, f64),
    /// 1 or 0.
    Cmp(Box<F>, BinOp, Box<F>),
    /// then, cond, otherwise
    Ter(Box<F>, Box<F>, Box<F>),
}

fn cmp_holds(a: f64, op: BinOp, b: f64) -> bool {
    match op {
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Gt => a > b,
        BinOp::Ge => a >= b,
        BinOp::Eq => a == b,
        _ => false,
    }
}

impl F {
    pub fn eval(&self, u: f64) -> f64 {
        match self {
            F::Lin(a, b) => a * u + b,
            F::C(c) => *c,
            F::Add(x, y) => x.eval(u) + y.eval(u),
            F::Mul(x, y) => x.eval(u) * y.eval(u),
            F::Div(x, y) => x.eval(u) / y.eval(u),
            F::Neg(x) => -x.eval(u),
            F::Exp(x) => x.eval(u).exp(),
            F::Pow(x, p) => x.eval(u).powf(*p),
            F::Cmp(x, op, y) => cmp_holds(x.eval(u), *op, y.eval(u)) as i64 as f64,
            F::Ter(t, c, e) => {
                if c.eval(u) != 0.0 {
                    t.eval(u)
                } else {
                    e.eval(u)
                }
            }
        }
    }

    /// Constant between the flips of its comparisons.
    fn piecewise_const(&self) -> bool {
        match self {
            F::Lin(a, _) => *a == 0.0,
            F::C(_) | F::Cmp(..) => true,
            F::Add(x, y) | F::Mul(x, y) | F::Div(x, y) => x.piecewise_const() && y.piecewise_const(),
            F::Neg(x) | F::Exp(x) | F::Pow(x, _) => x.piecewise_const(),
            F::Ter(t, _, e) => t.piecewise_const() && e.piecewise_const(),
        }
    }

    /// Affine between the flips of its comparisons (what [`Self::affine_at`] reads).
    fn piecewise_affine(&self) -> bool {
        match self {
            F::Lin(..) | F::C(_) | F::Cmp(..) => true,
            F::Add(x, y) => x.piecewise_affine() && y.piecewise_affine(),
            F::Neg(x) => x.piecewise_affine(),
            F::Mul(x, y) => (x.piecewise_const() && y.piecewise_affine()) || (y.piecewise_const() && x.piecewise_affine()),
            F::Div(x, y) => y.piecewise_const() && x.piecewise_affine(),
            F::Exp(x) | F::Pow(x, _) => x.piecewise_const(),
            F::Ter(t, _, e) => t.piecewise_affine() && e.piecewise_affine(),
        }
    }

    /// Whether every comparison inside compares piecewise-affine sides ([`Self::breakpoints`]
    /// finds where such a comparison flips; a comparison of `x*x - 0.5` with 0 it cannot).
    fn comparisons_affine(&self) -> bool {
        match self {
            F::Lin(..) | F::C(_) => true,
            F::Cmp(x, _, y) => x.piecewise_affine() && y.piecewise_affine() && x.comparisons_affine() && y.comparisons_affine(),
            F::Add(x, y) | F::Mul(x, y) | F::Div(x, y) => x.comparisons_affine() && y.comparisons_affine(),
            F::Neg(x) | F::Exp(x) | F::Pow(x, _) => x.comparisons_affine(),
            F::Ter(t, c, e) => t.comparisons_affine() && c.comparisons_affine() && e.comparisons_affine(),
        }
    }

    /// Points of `[lo, hi]` where a comparison inside flips. A comparison's sides must be
    /// affine between the breakpoints of the sides themselves (piecewise affine: `max(x, 0)`
    /// compared again, a clamp of a clamp); between two of those points, where the sides are
    /// `a1·u + b1` and `a2·u + b2`, it flips at most once.
    fn breakpoints(&self, lo: f64, hi: f64, out: &mut Vec<f64>) -> Result<(), String> {
        match self {
            F::Lin(..) | F::C(_) => {}
            F::Add(x, y) | F::Mul(x, y) | F::Div(x, y) => {
                x.breakpoints(lo, hi, out)?;
                y.breakpoints(lo, hi, out)?;
            }
            F::Neg(x) | F::Exp(x) | F::Pow(x, _) => x.breakpoints(lo, hi, out)?,
            F::Cmp(x, _, y) => {
                let mut inner = vec![];
                x.breakpoints(lo, hi, &mut inner)?;
                y.breakpoints(lo, hi, &mut inner)?;
                inner.retain(|&b| b > lo && b < hi);
                inner.extend([lo, hi]);
                inner.sort_by(f64::total_cmp);
                inner.dedup();
                for w in inner.windows(2) {
                    let mid = 0.5 * (w[0] + w[1]);
                    let (a1, b1) = x.affine_at(mid).ok_or("a comparison between non-affine functions of a real value")?;
                    let (a2, b2) = y.affine_at(mid).ok_or("a comparison between non-affine functions of a real value")?;
                    if a1 != a2 {
                        let t = (b2 - b1) / (a1 - a2);
                        if t >= w[0] && t <= w[1] {
                            out.push(t);
                        }
                    }
                }
                out.extend(inner);
            }
            F::Ter(t, c, e) => {
                t.breakpoints(lo, hi, out)?;
                c.breakpoints(lo, hi, out)?;
                e.breakpoints(lo, hi, out)?;
            }
        }
        Ok(())
    }

    /// `(a, b)` with `self = a·u + b` on the piece (between breakpoints) that holds `mid`, when
    /// the function is affine there.
    fn affine_at(&self, mid: f64) -> Option<(f64, f64)> {
        match self {
            F::Lin(a, b) => Some((*a, *b)),
            F::C(c) => Some((0.0, *c)),
            F::Cmp(..) => Some((0.0, self.eval(mid))),
            F::Add(x, y) => {
                let ((a1, b1), (a2, b2)) = (x.affine_at(mid)?, y.affine_at(mid)?);
                Some((a1 + a2, b1 + b2))
            }
            F::Neg(x) => x.affine_at(mid).map(|(a, b)| (-a, -b)),
            F::Mul(x, y) => {
                let ((a1, b1), (a2, b2)) = (x.affine_at(mid)?, y.affine_at(mid)?);
                match (a1 == 0.0, a2 == 0.0) {
                    (true, _) => Some((b1 * a2, b1 * b2)),
                    (_, true) => Some((a1 * b2, b1 * b2)),
                    _ => None,
                }
            }
            F::Div(x, y) => match (x.affine_at(mid)?, y.affine_at(mid)?) {
                ((a1, b1), (a2, b2)) if a2 == 0.0 && b2 != 0.0 => Some((a1 / b2, b1 / b2)),
                _ => None,
            },
            F::Ter(t, c, e) => {
                if c.eval(mid) != 0.0 {
                    t.affine_at(mid)
                } else {
                    e.affine_at(mid)
                }
            }
            // Constant where their argument is.
            F::Exp(x) | F::Pow(x, _) => match x.affine_at(mid)? {
                (0.0, _) => Some((0.0, self.eval(mid))),
                _ => None,
            },
        }
    }

    /// Value, first and second derivative over `[lo, hi]`, with comparisons decided at `mid`
    /// (no comparison flips strictly inside the segment).
    fn jet(&self, x: Iv, mid: f64) -> Result<[Iv; 3], String> {
        let z = Iv::pt(0.0);
        Ok(match self {
            F::Lin(a, b) => [x.scale(*a).add(Iv::pt(*b)), Iv::pt(*a), z],
            F::C(c) => [Iv::pt(*c), z, z],
            F::Add(p, q) => {
                let (p, q) = (p.jet(x, mid)?, q.jet(x, mid)?);
                [p[0].add(q[0]), p[1].add(q[1]), p[2].add(q[2])]
            }
            F::Neg(p) => {
                let p = p.jet(x, mid)?;
                [p[0].neg(), p[1].neg(), p[2].neg()]
            }
            // A square is never negative (and its interval is not the product's).
            F::Mul(p, q) if p == q => {
                let p = p.jet(x, mid)?;
                [p[0].sq(), p[1].mul(p[0]).scale(2.0), p[1].sq().add(p[0].mul(p[2])).scale(2.0)]
            }
            F::Mul(p, q) => {
                let (p, q) = (p.jet(x, mid)?, q.jet(x, mid)?);
                [p[0].mul(q[0]), p[1].mul(q[0]).add(p[0].mul(q[1])), p[2].mul(q[0]).add(p[1].mul(q[1]).scale(2.0)).add(p[0].mul(q[2]))]
            }
            F::Div(p, q) => {
                let (p, q) = (p.jet(x, mid)?, q.jet(x, mid)?);
                let r = q[0].recip().ok_or("a division by an interval that contains 0")?;
                let r2 = r.sq();
                let rj = [r, q[1].neg().mul(r2), q[2].neg().mul(r2).add(q[1].sq().mul(r2).mul(r).scale(2.0))];
                [p[0].mul(rj[0]), p[1].mul(rj[0]).add(p[0].mul(rj[1])), p[2].mul(rj[0]).add(p[1].mul(rj[1]).scale(2.0)).add(p[0].mul(rj[2]))]
            }
            F::Exp(p) => {
                let p = p.jet(x, mid)?;
                let e = p[0].exp();
                if !e.hi.is_finite() {
                    return Err("exp overflows on this interval".into());
                }
                [e, e.mul(p[1]), e.mul(p[2].add(p[1].sq()))]
            }
            // A positive integer power is defined for every sign.
            F::Pow(p, k) if *k >= 1.0 && k.fract() == 0.0 && *k <= 64.0 => {
                let p = p.jet(x, mid)?;
                let n = *k as i32;
                let d1 = p[0].powi(n - 1).scale(*k);
                let d2 = if n >= 2 { p[0].powi(n - 2).scale(k * (k - 1.0)) } else { z };
                [p[0].powi(n), d1.mul(p[1]), d2.mul(p[1].sq()).add(d1.mul(p[2]))]
            }
            F::Pow(p, k) => {
                let p = p.jet(x, mid)?;
                if p[0].lo <= 0.0 {
                    let how = if p[0].hi > 0.0 && *k > 0.0 {
                        format!(" (its slope is unbounded at 0: keep the argument above 0, as in `(x + 0.001) ^ {k}`, or give input bounds that keep it there, with room for rounding)")
                    } else {
                        String::new()
                    };
                    return Err(format!("x^{k} of a value that can be <= 0{how}"));
                }
                let pw = |e: f64| Iv::new(p[0].lo.powf(e), p[0].hi.powf(e));
                let d1 = pw(k - 1.0).scale(*k);
                let d2 = pw(k - 2.0).scale(k * (k - 1.0));
                [pw(*k), d1.mul(p[1]), d2.mul(p[1].sq()).add(d1.mul(p[2]))]
            }
            F::Cmp(..) => [Iv::pt(self.eval(mid)), z, z],
            F::Ter(t, c, e) => {
                if c.eval(mid) != 0.0 {
                    t.jet(x, mid)?
                } else {
                    e.jet(x, mid)?
                }
            }
        })
    }
}

/// A piecewise-linear interpolant: knots, values, and what it certifies.
#[derive(Clone, Debug)]
pub struct Pl {
    pub knots: Vec<f64>,
    pub values: Vec<f64>,
    /// Interpolation error bound over the domain.
    pub err: f64,
    /// Bound on |f'| over the domain.
    pub lipschitz: f64,
    /// Interval of f over the domain.
    pub range: Iv,
    /// Per segment `[knots[i], knots[i + 1]]`: its certified interpolation error and the
    /// interval of f on it (what the relative error analysis, `real/relative.rs`, divides by).
    pub segs: Vec<(f64, Iv)>,
}

/// Interpolates `f` on `[lo, hi]` within `eps`, subdividing segments until the interval bound
/// on the second derivative certifies it.
pub fn build_pl(f: &F, lo: f64, hi: f64, eps: f64) -> Result<Pl, String> {
    build_pl_with(f, lo, hi, &|_| eps)
}

/// [`build_pl`] with a target per segment: `target(interval of f on the segment)` (a relative
/// target `max(ρ·min|f|, α)` needs few knots where |f| is small).
pub fn build_pl_with(f: &F, lo: f64, hi: f64, target: &dyn Fn(Iv) -> f64) -> Result<Pl, String> {
    let mut cuts = vec![lo, hi];
    let mut bps = vec![];
    f.breakpoints(lo, hi, &mut bps)?;
    cuts.extend(bps.into_iter().filter(|&b| b > lo && b < hi));
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    if cuts.len() < 2 {
        return Err(format!("the domain [{lo}, {hi}] is empty or a single point"));
    }
    // A jump at a breakpoint cannot be interpolated. One below the test's threshold (equal
    // branches up to rounding) is charged to every segment's error: the interpolant is
    // continuous, so near the breakpoint it misses one side by the jump (helper h8: `x if x >
    // 0.0000005 else 0` on [-1e-6, 1e-6] jumped by 5e-7 and was certified to 1e-12).
    let mut jump = 0.0f64;
    for (i, &b) in cuts.iter().enumerate().take(cuts.len() - 1).skip(1) {
        let h = 1e-9 * (1.0 + b.abs());
        let (l, r) = (f.eval(b - h), f.eval(b + h));
        // The jump: where f is affine on both neighbouring pieces, the difference of their
        // limits at b (0 for a kink such as relu's); otherwise probed closer in, plus what f's
        // steepest slope there can change over the probe's width.
        // The value at b itself is a knot of the interpolant: it must agree with both limits
        // (`1 if x > 0 else (1 if x < 0 else 0)` dips to 0 at one point: review rv9).
        let fb = f.eval(b);
        let (lim_l, lim_r, near) = match (f.affine_at(0.5 * (cuts[i - 1] + b)), f.affine_at(0.5 * (b + cuts[i + 1]))) {
            (Some((al, cl)), Some((ar, cr))) => {
                let (ll, rr) = (al * b + cl, ar * b + cr);
                (ll, rr, (ll - rr).abs().max((fb - ll).abs()).max((fb - rr).abs()))
            }
            _ => {
                // Each side's slope from a one-sided jet; a side where f is not bounded (a
                // branch undefined past b) cannot have its jump measured: refused, not skipped.
                let h2 = h * 1e-4;
                let side = |a: f64, z: f64| f.jet(Iv { lo: a, hi: z }, 0.5 * (a + z)).map_or(f64::INFINITY, |j| j[1].mag());
                let slope = side(b - h, b - h2 * 0.5).max(side(b + h2 * 0.5, b + h));
                let (ll, rr) = (f.eval(b - h2), f.eval(b + h2));
                let d = (ll - rr).abs().max((fb - ll).abs()).max((fb - rr).abs()) + 2.0 * h2 * slope;
                (ll, rr, d)
            }
        };
        if !near.is_finite() {
            return Err(format!("the function's slope is unbounded at {b} (a piecewise-linear MLP cannot be certified there): keep its argument away from {b}, as in `(x + 0.001) ^ 0.5` for a square root"));
        }
        jump = jump.max(near);
        if (l - r).abs() > 1e-6 * (1.0 + l.abs().max(r.abs())) || (fb - lim_l).abs().max((fb - lim_r).abs()) > 1e-6 * (1.0 + fb.abs().max(lim_l.abs()).max(lim_r.abs())) {
            // Continuous but steep (`max(x, 0) ^ 0.5` at 0): closer in, the difference shrinks.
            let h2 = h * 1e-4;
            let (l2, r2) = (f.eval(b - h2), f.eval(b + h2));
            if (l2 - r2).abs() < 0.1 * (l - r).abs() {
                return Err(format!("the function's slope is unbounded at {b} (a piecewise-linear MLP cannot be certified there): keep its argument away from {b}, as in `(x + 0.001) ^ 0.5` for a square root"));
            }
            return Err(format!("the function jumps at {b} (a step cannot be computed by a continuous MLP)"));
        }
    }
    let mut knots = vec![lo];
    let (mut err, mut lip) = (0.0f64, 0.0f64);
    let mut range = Iv::pt(f.eval(lo));
    let mut segs = vec![];
    for w in cuts.windows(2) {
        let mut stack = vec![(w[0], w[1])];
        while let Some((a, b)) = stack.pop() {
            // Knots are f32 values (stored exactly) whenever one lies strictly inside.
            let mid = 0.5 * (a + b);
            let m32 = (mid as f32) as f64;
            let mid = if m32 > a && m32 < b { m32 } else { mid };
            let j = f.jet(Iv { lo: a, hi: b }, mid)?;
            let width = b - a;
            let e = if width == 0.0 { 0.0 } else { width * width / 8.0 * j[2].mag() };
            if !(e.is_finite() && j[1].mag().is_finite()) {
                return Err(format!("the function is not bounded near {mid}"));
            }
            if e > target(j[0]) && width > 1e-12 * (1.0 + mid.abs()) {
                // Left half last, so it is handled first: knots stay in order.
                stack.push((mid, b));
                stack.push((a, mid));
                continue;
            }
            err = err.max(e);
            lip = lip.max(j[1].mag());
            range = range.hull(j[0]);
            segs.push((e, j[0]));
            knots.push(b);
            if knots.len() > MAX_KNOTS {
                return Err(format!("more than {MAX_KNOTS} pieces would be needed for error {:e}", target(j[0])));
            }
        }
    }
    if jump > 0.0 {
        err += jump;
        for seg in &mut segs {
            seg.0 += jump;
        }
    }
    let values = knots.iter().map(|&t| f.eval(t)).collect();
    Ok(Pl { knots, values, err, lipschitz: lip, range, segs })
}

/// The interpolant as ReLU units around the split knot that keeps the summed magnitudes
/// smallest: `f(t_j) + Σ coef·relu(±(u - t))`. Returns (f(t_j), units `(dir, t, coef)`, a bound
/// on Σ|coef·relu(..)| over the domain).
pub fn split_basis(pl: &Pl) -> (f64, Vec<(f64, f64, f64)>, f64) {
    let (t, y) = (&pl.knots, &pl.values);
    let k = t.len();
    let (lo, hi) = (t[0], t[k - 1]);
    let slope: Vec<f64> = (0..k - 1).map(|i| (y[i + 1] - y[i]) / (t[i + 1] - t[i])).collect();
    // Slope change at interior knot i (1..k-1).
    let ds = |i: usize| slope[i] - slope[i - 1];
    // mag(j) = |y_j| + |s_R|(hi - t_j) + |s_L|(t_j - lo) + Σ_{i>j}|ds_i|(hi - t_i) + Σ_{i<j}|ds_i|(t_i - lo)
    let mut right = vec![0.0; k + 1];
    for i in (1..k - 1).rev() {
        right[i] = right[i + 1] + ds(i).abs() * (hi - t[i]);
    }
    let mut best = (f64::INFINITY, 0usize);
    let mut left = 0.0;
    for j in 0..k {
        let sr = if j + 1 < k { slope[j].abs() * (hi - t[j]) } else { 0.0 };
        let sl = if j > 0 { slope[j - 1].abs() * (t[j] - lo) } else { 0.0 };
        let m = y[j].abs() + sr + sl + right[j + 1] + left;
        if m < best.0 {
            best = (m, j);
        }
        if j >= 1 && j < k - 1 {
            left += ds(j).abs() * (t[j] - lo);
        }
    }
    let j = best.1;
    let mut units = vec![];
    if j + 1 < k && slope[j] != 0.0 {
        units.push((1.0, t[j], slope[j]));
    }
    if j > 0 && slope[j - 1] != 0.0 {
        units.push((-1.0, t[j], -slope[j - 1]));
    }
    for (i, &ti) in t.iter().enumerate().take(k - 1).skip(1) {
        let d = ds(i);
        if d == 0.0 || i == j {
            continue;
        }
        units.push((if i > j { 1.0 } else { -1.0 }, ti, d));
    }
    (y[j], units, best.0)
}

// ---- expressions over residents -----------------------------------------------------------

/// A real s-op as an expression over resident slots.
#[derive(Clone, Debug)]
enum Ex {
    Leaf(SlotId),
    C(f64),
    Add(Box<Ex>, Box<Ex>),
    Mul(Box<Ex>, Box<Ex>),
    Div(Box<Ex>, Box<Ex>),
    Neg(Box<Ex>),
    Pow(Box<Ex>, Box<Ex>),
    Cmp(Box<Ex>, BinOp, Box<Ex>),
    Ter(Box<Ex>, Box<Ex>, Box<Ex>),
}

fn bx(e: Ex) -> Box<Ex> {
    Box::new(e)
}

/// Operations one real-valued expression may hold (see the refusal in `lower_node`).
const MAX_EXPRESSION_NODES: usize = 1 << 20;

impl Ex {
    /// Its number of nodes, counted up to `cap` (past it the count stops: a tree can be far
    /// larger than memory would hold, if it shares subtrees).
    fn size(&self, cap: usize) -> usize {
        let mut n = 0;
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            n += 1;
            if n >= cap {
                return n;
            }
            stack.extend(e.children());
        }
        n
    }

    /// Its operands, in order.
    fn children(&self) -> Vec<&Ex> {
        match self {
            Ex::Add(a, b) | Ex::Mul(a, b) | Ex::Div(a, b) | Ex::Pow(a, b) | Ex::Cmp(a, _, b) => vec![a, b],
            Ex::Neg(a) => vec![a],
            Ex::Ter(a, b, c) => vec![a, b, c],
            Ex::Leaf(_) | Ex::C(_) => vec![],
        }
    }

    /// It and every expression inside it, outermost first.
    fn walk(&self) -> Vec<&Ex> {
        let mut out = vec![self];
        let mut i = 0;
        while i < out.len() {
            let next = out[i].children();
            out.extend(next);
            i += 1;
        }
        out
    }
}

/// An affine form `Σ c_s · slot_s + k`, with bounds on how far its coefficients, folded in f64
/// from the program's constants, may be from the exact ones (`dc`, `dk`; helper f11: `x + 1 +
/// 2^53 - 2^53` folded to `x`, 1 off, certified 1e-6, and a step whose branches' constants
/// cancelled that way compiled as continuous).
#[derive(Clone, Debug, Default)]
struct Aff {
    c: BTreeMap<SlotId, f64>,
    k: f64,
    /// `|exact c_s - c_s| <= dc[s]`, also for slots whose stored coefficient folded to 0.
    dc: BTreeMap<SlotId, f64>,
    /// `|exact k - k| <= dk`.
    dk: f64,
}

/// Two affine forms are the same computation when their stored coefficients are (what the
/// model computes); their fold bounds are charged wherever they are read.
impl PartialEq for Aff {
    fn eq(&self, o: &Aff) -> bool {
        self.c == o.c && self.k == o.k
    }
}

/// The exact rounding error of `a + b` in f64 (Knuth's TwoSum).
fn sum_err(a: f64, b: f64) -> f64 {
    let s = a + b;
    let bb = s - a;
    ((a - (s - bb)) + (b - bb)).abs()
}

/// A bound on `|exact - computed|` of `acc + w·c` where `|exact w - w| <= dw`, `|exact c - c|
/// <= d`, and `acc` carries `dacc`: the product's and the sum's exact rounding errors (an exact
/// fold adds nothing) plus the carried ones.
fn fold_err(acc: f64, dacc: f64, w: f64, dw: f64, c: f64, d: f64) -> (f64, f64) {
    let p = w * c;
    let p_err = w.mul_add(c, -p).abs();
    let sum = acc + p;
    let e = dacc + w.abs() * d + dw * (c.abs() + d) + p_err + sum_err(acc, p);
    // (Bounds are rounded up by a few ulps of themselves.)
    (sum, if e > 0.0 { e * (1.0 + 4.0 * U64) } else { 0.0 })
}

/// A bound on `|1/y (in f64) - 1/y|`: `|w·y - 1| / |y|`, exact through fma.
fn recip_err(y: f64) -> f64 {
    let w = 1.0 / y;
    w.mul_add(y, -1.0).abs() / y.abs() * (1.0 + 8.0 * U64)
}

impl Aff {
    fn leaf(s: SlotId) -> Aff {
        Aff { c: BTreeMap::from([(s, 1.0)]), ..Aff::default() }
    }
    fn konst(k: f64) -> Aff {
        Aff { k, ..Aff::default() }
    }
    fn add(self, o: &Aff, w: f64) -> Aff {
        self.add_inexact(o, w, 0.0)
    }
    /// `self + w·o` where the weight w is within `dw` of its exact value.
    fn add_inexact(mut self, o: &Aff, w: f64, dw: f64) -> Aff {
        let slots: std::collections::BTreeSet<SlotId> = o.c.keys().chain(o.dc.keys()).copied().collect();
        for s in slots {
            let (c, d) = (o.c.get(&s).copied().unwrap_or(0.0), o.dc.get(&s).copied().unwrap_or(0.0));
            let (acc, dacc) = (self.c.get(&s).copied().unwrap_or(0.0), self.dc.get(&s).copied().unwrap_or(0.0));
            let (sum, e) = fold_err(acc, dacc, w, dw, c, d);
            self.c.insert(s, sum);
            if e > 0.0 {
                self.dc.insert(s, e);
            }
        }
        self.c.retain(|_, c| *c != 0.0);
        let (k, dk) = fold_err(self.k, self.dk, w, dw, o.k, o.dk);
        (self.k, self.dk) = (k, dk);
        self
    }
    fn scale(&self, w: f64) -> Aff {
        Aff::default().add(self, w)
    }
    /// `w·self` with `w` within `dw` of its exact value.
    fn scale_inexact(&self, w: f64, dw: f64) -> Aff {
        Aff::default().add_inexact(self, w, dw)
    }
    /// Whether its constants folded exactly (no fold bound): what the special exact paths
    /// (relative bounds, positional values, the ratio certificate) read is then the program's.
    fn exact(&self) -> bool {
        self.dk == 0.0 && self.dc.is_empty()
    }
    /// `self · y` for a constant form y (its own fold bound included).
    fn scale_by(&self, y: &Aff) -> Aff {
        self.scale_inexact(y.k, y.dk)
    }

    fn is_const(&self) -> bool {
        self.c.is_empty()
    }
    /// `(λ, rest)` with `self = λ·(s - m) + rest` and rest free of m and of s's slots, when self
    /// holds m with coefficient -λ and every slot of s with λ times its coefficient.
    fn split_max(&self, m: SlotId, s: &Aff) -> Option<(f64, Aff)> {
        let lam = -*self.c.get(&m)?;
        if lam == 0.0 || s.c.contains_key(&m) || !s.c.iter().all(|(x, &c)| self.c.get(x) == Some(&(lam * c))) {
            return None;
        }
        let mut rest = self.clone();
        rest.c.remove(&m);
        for x in s.c.keys() {
            rest.c.remove(x);
        }
        rest.k -= lam * s.k;
        Some((lam, rest))
    }
    /// `self = λ·u + κ`?
    fn in_direction(&self, u: &Aff) -> Option<(f64, f64)> {
        if self.c.len() != u.c.len() {
            return None;
        }
        let (&s0, &c0) = u.c.iter().next()?;
        let lam = self.c.get(&s0)? / c0;
        for (s, &c) in &u.c {
            let mine = *self.c.get(s)?;
            if (mine - lam * c).abs() > 1e-12 * mine.abs().max(1.0) {
                return None;
            }
        }
        Some((lam, self.k - lam * u.k))
    }
}

/// One nonlinear piece of an MLP.
#[derive(Clone, Debug)]
enum Term {
    Unary(Aff, F),
    Prod(Aff, Aff),
    /// `u²`, half of a ReLU-mode product (its interval is the product's).
    Square(Aff),
}

/// Known facts about a resident slot's values at non-BOS positions.
#[derive(Clone, Copy, Debug)]
struct Res {
    iv: Iv,
    err: Err2,
}

/// What a node is, for this lowering.
#[derive(Clone, Debug)]
enum Val {
    /// Known per token position at compile time (None: undefined there).
    Pos(Vec<Option<Atom>>),
    /// Known per (index, length) pair of [`crate::positional::grid`] (depends on `length`).
    Grid(Vec<Option<Atom>>),
    Real(Ex),
}

struct RealLowerer<'a> {
    g: &'a Graph,
    n: usize,
    opts: &'a RealOptions,
    slots: Vec<Slot>,
    blocks: Vec<Block>,
    res: HashMap<SlotId, Res>,
    vals: HashMap<NodeId, Val>,
    positional: Vec<EmbedRow>,
    pos_cache: HashMap<Vec<u64>, SlotId>,
    mat_cache: HashMap<String, SlotId>,
    /// Per MLP slot, the part of its certified error that is its inputs' errors carried through
    /// (the rest is its own: interpolation and rounding), where the MLP's bound splits so
    /// ([`Self::tighten`] replaces that part by a sharper one).
    carried: HashMap<SlotId, Err2>,
    /// The node each conditional expression was written by (by its printed form), to point at
    /// a step where it is, not where it is read.
    ter_origin: HashMap<String, NodeId>,
    /// The node each division was written by, by its denominator's printed form: a reciprocal
    /// that cannot be approximated is lowered where the quotient is read, and the error points
    /// at the division too.
    div_origin: HashMap<String, NodeId>,
    input: Option<SlotId>,
    report: Vec<SopBound>,
    /// Positional slots: value at each token position.
    pos_vals: HashMap<SlotId, Vec<f64>>,
    /// Per slot, the token positions where its exact value is known to be 0.
    zero: HashMap<SlotId, Vec<bool>>,
    /// `m -> s`: m is a maximum of the affine form s over keys that always include the position
    /// itself (or m and s are both 0 there), so s - m <= 0 exactly.
    max_of: HashMap<SlotId, Aff>,
    /// Sums written as several partial-sum slots ([`Self::blocked_resident`]), by expression.
    blk_cache: HashMap<String, Aff>,
    /// Set by [`Self::blocked_resident`] for the next [`Self::mlp`]: a block that is one unary
    /// term of exp or a reciprocal writes its units as partial sums ([`Group`]).
    group_next: bool,
    /// Grouped unary blocks, by the slot of their first group.
    groups: HashMap<SlotId, Group>,
    /// Source of the node being lowered (for diagnostics raised deep inside).
    span: raspc_lang::span::Span,
    /// Bounds of the input number at each token position.
    input_iv: Vec<Iv>,
    /// The grid of the input number at each token position (`RealOptions::grids`).
    input_grid: Vec<Option<i32>>,
    /// `z -> d`: z is an MLP slot computing the two-slot difference `d` (weights ±1, no
    /// constant), masked by a positional 0/1 factor that is 1 wherever d can be nonzero: its
    /// computed value is `d'·(1 + δ)`, |δ| ≤ u, d' the difference of the computed slots.
    diff_of: HashMap<SlotId, Aff>,
    /// Heads, per token position: the query selects no key there (the head writes an exact 0).
    no_key: HashMap<SlotId, Vec<bool>>,
    /// Sums split by [`Self::blocked_resident`] into an exact part and the rest: each part by
    /// its expression, as the slots that hold it ([`Self::canon`] reads them there).
    part_cache: HashMap<String, Aff>,
    /// Slots whose computed value equals the program's exactly at every token position, in f32
    /// and f64 evaluation, and is an integer multiple of 2^e (e the value; `Res::err` is 0).
    exact_grid: HashMap<SlotId, i32>,
    /// Values of the s-ops that depend on `length` over the (index, length) grid, and the slots
    /// that compute them (position one-hot, 1/(length+1)); see [`crate::positional`].
    grid: crate::positional::Tables,
    grid_inputs: Option<(SlotId, SlotId)>,
    grid_cache: HashMap<Vec<u64>, SlotId>,
    /// Relative error bounds of some residents (`real/relative.rs`), on top of `res[..].err`.
    rel: HashMap<SlotId, relative::Rel>,
    /// Heads (mean or one-key gathers) of a value that has relative bounds.
    head_info: HashMap<SlotId, HeadInfo>,
    /// MLPs that are `Σ_j gather_j(E)·b_j` for one E with relative bounds.
    wsum: HashMap<SlotId, WSum>,
    /// One-term unary MLPs of a nonnegative function: argument, `sup x·f(x)` and `sup f` (x ≥ 0).
    unary_info: HashMap<SlotId, (Aff, f64, f64)>,
    /// Maxima `m = aggregate_max(sel, s)` of an affine form s, and one-key gathers of them that
    /// read, for every query, a key whose row is the query's own: s, each query's row (the
    /// keys the maximum takes), and the error beyond s's, split into the part that may differ
    /// between the queries of one row and the part common to the row.
    max_info: HashMap<SlotId, MaxInfo>,
    /// Relative bounds against a row-shifted reference (`relative::Shifted`).
    shifted: HashMap<SlotId, relative::Shifted>,
    /// One-term unary MLPs `k / max(x, θ)`-like: θ such that f(x) = k/x for x ≥ θ.
    homogeneous: HashMap<SlotId, f64>,
    /// Exp blocks with row-shifted bounds, those bounds split into the part every reader shares
    /// and the part each reader's own sum of the block's partial sums adds
    /// (`relative::SharedWeights`), index by index.
    split: HashMap<SlotId, (relative::Rel, relative::Rel)>,
    /// Heads in `head_info`: their own rounding relative to the mean of |value| they read.
    head_round: HashMap<SlotId, Err2>,
    /// `k / max(x, θ)`-like unary blocks: what it takes to bound them again for another input.
    unary_data: HashMap<SlotId, UnaryData>,
}

/// A one-term unary block `w·f(u)` as [`relative::unary`] reads it.
#[derive(Clone, Debug)]
struct UnaryData {
    pl: Pl,
    units: Vec<(f64, f64, f64)>,
    w: f64,
    c0: f64,
    pre: relative::Pre,
    groups: Option<(usize, usize)>,
    /// f(y) = k/y for y ≥ θ.
    k: f64,
}

/// The rounding of a unary block's output sum relative to Σ|unit outputs| when at most `active`
/// units are nonzero ([`relative::unary`]'s `sum_gamma`): the units, the constant unit and the
/// residual add (`Err2::gamma(k)` = γ_{k+1}); grouped ([`Group`]), at most `per` units (and the
/// constant) in each partial sum, each rounding like γ of its own units relative to its own
/// magnitude (together at most the window's Σ|unit|), then a reader adds the `n` partial sums:
/// γ_n of at most that again.
fn unary_sum_gamma(groups: Option<(usize, usize)>, c0: f64, active: usize) -> Err2 {
    match groups {
        None => Err2::gamma(active + (c0 != 0.0) as usize, false),
        Some((per, n)) => Err2::gamma(active.min(per) + 1, false) + Err2::gamma(n, true),
    }
}

/// A unary block `w·f(u)` whose K units write G ≈ √K partial sums (`slots`, the first owned
/// by the block, the others sum slots only it writes), so that the f32 sum of its units rounds
/// like `γ_{K/G}` within a group and `γ_G` when a reader adds the groups, not like `γ_K`
/// (docs/compiler.md, "Grouped exp"). The value is the sum of the slots; `iv` is its interval
/// (each slot has its own, wider in sum). Exact value of slot g ≥ 1: its units at the exact
/// argument; of slot 0: its units and the constant there, plus the interpolation error, so the
/// slots' errors add up to the block's.
#[derive(Clone, Debug)]
struct Group {
    slots: Vec<SlotId>,
    iv: Iv,
    /// The error of the slots' sum: the block's, as if it were one slot (its Lipschitz bound
    /// is the interpolant's, not the sum of the groups'), with the groups' own sums' rounding.
    err: Err2,
}

/// See [`RealLowerer::max_info`].
#[derive(Clone, Debug)]
struct MaxInfo {
    value: Aff,
    rows: Vec<Vec<u32>>,
    /// `|m'_q - max_{k∈rows[q]} s'_k - c_r| ≤ own` with `|c_r| ≤ common` one number per row r
    /// (s' the exact value of the computed affine form).
    own: Err2,
    common: Err2,
}

/// A head whose value is one slot with relative bounds, read with weight 1.
#[derive(Clone, Debug)]
enum HeadInfo {
    /// Every query selects at most one key (u32::MAX: none).
    Gather { value: SlotId, key: Vec<u32> },
    /// A mean over the selected keys of each query.
    Mean { value: SlotId, rows: Vec<Vec<u32>> },
}

/// `Σ_j a_j·b_j` with each a_j a one-key gather of `e` (the heads `gathers`): per index of
/// `e`'s relative bounds, `(κ, λ)` of [`relative::weighted_sum`]; `m` bounds |b_j|, `b_iv`
/// is the hull of the b_j.
#[derive(Clone, Debug)]
struct WSum {
    e: SlotId,
    gathers: Vec<SlotId>,
    kl: Vec<(Err2, Err2)>,
    /// The same from the gathers' shifted bounds (`relative::Shifted`), when they have them.
    kl_shift: Option<Vec<(Err2, Err2)>>,
    m: f64,
    b_iv: Iv,
    /// The b's largest error, and the products' and the block sum's rounding relative to
    /// |a'_j| ([`relative::weighted_sum`]'s e_b and q).
    eb: Err2,
    q: Err2,
}

/// Lowers a real-valued program. Returns the plan and the certified bounds (for f32 and for
/// f64 evaluation of the same weights).
pub fn lower(g: &Graph, root: NodeId, max_len: usize, opts: &RealOptions) -> Result<(Plan, Report), Vec<Diagnostic>> {
    let mut lw = RealLowerer {
        g,
        n: max_len,
        opts,
        slots: vec![],
        blocks: vec![],
        res: HashMap::new(),
        vals: HashMap::new(),
        positional: vec![],
        pos_cache: HashMap::new(),
        mat_cache: HashMap::new(),
        carried: HashMap::new(),
        ter_origin: HashMap::new(),
        div_origin: HashMap::new(),
        input: None,
        report: vec![],
        pos_vals: HashMap::new(),
        zero: HashMap::new(),
        max_of: HashMap::new(),
        blk_cache: HashMap::new(),
        group_next: false,
        groups: HashMap::new(),
        span: g.node(root).span,
        input_iv: vec![Iv { lo: opts.lo, hi: opts.hi }; max_len],
        input_grid: vec![None; max_len],
        exact_grid: HashMap::new(),
        diff_of: HashMap::new(),
        no_key: HashMap::new(),
        part_cache: HashMap::new(),
        grid: crate::positional::Tables::new(g, &g.ancestors(root), max_len),
        grid_inputs: None,
        grid_cache: HashMap::new(),
        rel: HashMap::new(),
        head_info: HashMap::new(),
        wsum: HashMap::new(),
        unary_info: HashMap::new(),
        max_info: HashMap::new(),
        shifted: HashMap::new(),
        homogeneous: HashMap::new(),
        split: HashMap::new(),
        head_round: HashMap::new(),
        unary_data: HashMap::new(),
    };
    lw.slots.push(Slot { label: "<bos>".into(), enc: SlotEnc::Cat(vec![Atom::Bool(true)]), at_bos: vec![], multi_hot: false });
    lw.slots.push(Slot { label: "<tok>".into(), enc: SlotEnc::Cat(vec![Atom::Bool(true)]), at_bos: vec![], multi_hot: false });
    let node = g.node(root);
    if node.kind.is_selector() {
        return Err(vec![Diagnostic::error("compile::entry", format!("`{}` is a selector; only s-ops can be compiled", node.label), node.span).with_label("a selector")]);
    }
    if !(opts.lo.is_finite() && opts.hi.is_finite() && opts.lo <= opts.hi) {
        return Err(vec![Diagnostic::error("compile::bounds", format!("input bounds [{}, {}] are not a finite interval", opts.lo, opts.hi), node.span).with_label("compiled here")]);
    }
    for &(start, end, lo, hi) in &opts.blocks {
        if !(start < end && end <= max_len && lo.is_finite() && hi.is_finite() && lo <= hi && lo >= opts.lo && hi <= opts.hi) {
            return Err(vec![Diagnostic::error(
                "compile::bounds",
                format!("block bounds [{lo}, {hi}] at positions {start}..{end} must be a finite interval inside [{}, {}] and within --max-len {max_len}", opts.lo, opts.hi),
                node.span,
            )
            .with_label("compiled here")]);
        }
        for iv in &mut lw.input_iv[start..end] {
            *iv = Iv { lo, hi };
        }
    }
    for &(start, end, e) in &opts.grids {
        let fits = start < end && end <= max_len && (-149..=100).contains(&e) && lw.input_iv[start..end].iter().all(|iv| grid_fits(e, iv.mag()));
        if !fits {
            return Err(vec![Diagnostic::error(
                "compile::bounds",
                format!("a grid 2^{e} at positions {start}..{end} must lie within --max-len {max_len} and hold only f32 numbers within the block's bounds (at most 2^(e+24))"),
                node.span,
            )
            .with_label("compiled here")]);
        }
        for g in &mut lw.input_grid[start..end] {
            *g = Some(e);
        }
    }
    if let Some(e) = opts.pl_error
        && !(e > 0.0 && e.is_finite())
    {
        return Err(vec![Diagnostic::error("compile::bounds", format!("the piecewise-linear error must be > 0, got {e}"), node.span).with_label("compiled here")]);
    }
    let mut diags = vec![];
    for id in g.ancestors(root) {
        if crate::cancel::cancelled() {
            return Err(vec![Diagnostic::error("compile::interrupted", crate::cancel::INTERRUPTED, node.span)]);
        }
        if g.node(id).kind.is_selector() {
            continue;
        }
        if g.node(id).kind.operands().iter().any(|o| !g.node(*o).kind.is_selector() && !lw.vals.contains_key(o)) {
            continue; // an operand failed: reported already
        }
        match lw.lower_node(id) {
            Ok(v) => {
                lw.vals.insert(id, v);
            }
            Err(d) => diags.push(d),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    lw.span = node.span;
    let Some(root_val) = lw.vals.get(&root).cloned() else {
        return Err(vec![Diagnostic::error("compile::internal", format!("internal error: `{}` was not lowered", node.label), node.span)]);
    };
    let out_slot = match root_val {
        Val::Real(ex) => lw.resident(&ex, &node.label).map_err(|d| vec![d])?,
        Val::Pos(_) | Val::Grid(_) => {
            return Err(vec![Diagnostic::error("compile::real", format!("`{}` does not depend on the input numbers", node.label), node.span)
                .with_label("a function of positions only")
                .with_note("with --input-bounds the compiled s-op must read the input (tokens_float)")]);
        }
    };
    let Some(&r) = lw.res.get(&out_slot) else {
        return Err(vec![Diagnostic::error("compile::internal", format!("internal error: `{}` has no bounds", node.label), node.span)]);
    };
    // Values past f32's range make the forward pass overflow (a gated `x * x` on ±1e20): refused,
    // not certified. (A quarter of the largest f32 leaves room for the sums holding them.)
    let limit = f64::from(f32::MAX) / 4.0;
    let mut too_big: Vec<(&str, f64)> = lw
        .res
        .iter()
        .filter(|(_, r)| r.iv.lo.is_nan() || r.iv.hi.is_nan() || r.iv.lo.abs() > limit || r.iv.hi.abs() > limit)
        .map(|(s, r)| (lw.slots[s.0].label.as_str(), if r.iv.lo.is_nan() || r.iv.hi.is_nan() { f64::NAN } else { r.iv.lo.abs().max(r.iv.hi.abs()) }))
        .collect();
    too_big.sort_by(|a, b| a.0.cmp(b.0));
    if let Some(&(label, m)) = too_big.first() {
        return Err(vec![Diagnostic::error(
            "compile::too_large",
            format!("`{label}` reaches {m:.3e}, past a quarter of f32's range (8.5e37, room for the sums that hold it)"),
            node.span,
        )
        .with_label("compiled here")
        .with_note("the model computes in f32: tighter --input-bounds keep its values in range")]);
    }
    // Each f32 rounding may also lose up to half the spacing of f32's subnormal numbers (2^-150)
    // when a value falls below the normal range (1.2e-38): one such term per unit, head and
    // layer output, which the relative rounding bounds above do not cover (a gated `x * x` on
    // ±1e-20 was 7e-46 from 1e-40, against a bound of 3e-47).
    let roundings = lw
        .blocks
        .iter()
        .map(|b| match &b.kind {
            crate::plan::BlockKind::Mlp(m) => m.hidden + 1,
            crate::plan::BlockKind::Head(_) => 2,
        })
        .sum::<usize>()
        + 1;
    let bound = Err2 { f32: r.err.f32 + roundings as f64 * 2f64.powi(-150), f64: r.err.f64 + roundings as f64 * 2f64.powi(-1074) };
    if !lw.report.iter().any(|r| r.label == node.label) {
        lw.report.push(SopBound { label: node.label.clone(), lo: r.iv.lo, hi: r.iv.hi, err: bound.f32, err_f64: bound.f64 });
    }
    let plan = Plan {
        slots: lw.slots,
        blocks: lw.blocks,
        tokens: lw.input,
        indices: None,
        output: OutputView { slot: out_slot, map: None, values: None, points: None },
        num_values: BTreeMap::new(),
        output_label: node.label.clone(),
        positional: lw.positional,
        token_values: vec![],
        real_input: lw.input.map(|slot| RealInput { slot, lo: opts.lo, hi: opts.hi, blocks: opts.blocks.clone() }),
        output_bound: Some(bound.f32),
        output_ints: None,
        grid_reads: BTreeMap::new(),
        parts: lw.groups.values().map(|g| (g.slots[0], g.slots[1..].to_vec())).collect(),
        max_len,
    };
    Ok((plan, Report { sops: lw.report, output_bound: bound.f32, output_bound_f64: bound.f64 }))
}

fn atom_f64(a: &Atom) -> Option<f64> {
    match a {
        Atom::Bool(b) => Some(*b as i64 as f64),
        other => other.as_f64(),
    }
}

/// What Python `==` compares an atom by: equal atoms have equal keys (ints, bools and
/// integral floats as integers; other floats by bits; NaN equals nothing).
#[derive(Clone, PartialEq, Eq, Hash)]
enum EqKey {
    I(i64),
    F(u64),
    S(String),
}

fn eq_key(a: &Atom) -> Option<EqKey> {
    Some(match a {
        Atom::Int(i) => EqKey::I(*i),
        Atom::Bool(b) => EqKey::I(*b as i64),
        Atom::Float(f) if f.is_nan() => return None,
        Atom::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => EqKey::I(*f as i64),
        Atom::Float(f) => EqKey::F(f.to_bits()),
        Atom::Str(s) => EqKey::S(s.clone()),
    })
}

impl RealLowerer<'_> {
    fn err(&self, id: NodeId, msg: impl Into<String>) -> Diagnostic {
        crate::names::error(self.g, id, "compile::real", msg.into())
    }

    fn new_slot(&mut self, label: String, enc: SlotEnc) -> SlotId {
        let d = enc.dims();
        self.slots.push(Slot { label, enc, at_bos: vec![0.0; d], multi_hot: false });
        SlotId(self.slots.len() - 1)
    }

    fn push_block(&mut self, kind: BlockKind, writes: SlotId, what: String) {
        let mut reads: Vec<SlotId> = match &kind {
            BlockKind::Head(h) => h.q.iter().chain(&h.k).chain(&h.v).map(|e| e.slot).collect(),
            BlockKind::Mlp(m) => m.w_in.iter().chain(m.gate.iter().flat_map(|g| g.w.iter())).map(|e| e.slot).collect(),
        };
        reads.sort();
        reads.dedup();
        self.blocks.push(Block { kind, reads, writes, what });
    }

    /// A numerical slot the position embedding fills (cached by its values).
    fn pos_slot(&mut self, label: &str, values: &[f64]) -> SlotId {
        let key: Vec<u64> = values.iter().map(|x| x.to_bits()).collect();
        if let Some(&s) = self.pos_cache.get(&key) {
            return s;
        }
        let s = self.new_slot(label.to_string(), SlotEnc::Num { points: None });
        let mut v = vec![0.0];
        v.extend_from_slice(values);
        self.positional.push(EmbedRow { slot: s, dim: 0, values: v });
        let lo = values.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        // The embedding stores each value in f32, whatever precision evaluates it.
        let stored = values.iter().map(|&v| (v - f64::from(v as f32)).abs()).fold(0.0f64, f64::max);
        self.res.insert(s, Res { iv: Iv { lo, hi }, err: Err2::both(stored) });
        self.pos_vals.insert(s, values.to_vec());
        self.zero.insert(s, values.iter().map(|&v| v == 0.0).collect());
        self.pos_cache.insert(key, s);
        s
    }

    fn pos_numbers(&self, id: NodeId, v: &[Option<Atom>]) -> Result<Vec<f64>, Diagnostic> {
        v.iter()
            .enumerate()
            .map(|(i, a)| {
                a.as_ref()
                    .and_then(atom_f64)
                    .ok_or_else(|| self.err(id, format!("`{}` has no number at index {i}", self.g.node(id).label)).with_label("used as a number with real inputs"))
            })
            .collect()
    }

    fn ex_of(&mut self, id: NodeId) -> Result<Ex, Diagnostic> {
        match self.vals.get(&id).cloned().ok_or_else(|| self.err(id, "internal error: read before it was lowered"))? {
            Val::Real(e) => Ok(self.canon(e)),
            Val::Pos(v) => {
                let nums = self.pos_numbers(id, &v)?;
                if nums.windows(2).all(|w| w[0] == w[1]) {
                    return Ok(Ex::C(nums.first().copied().unwrap_or(0.0)));
                }
                let label = self.g.node(id).label.clone();
                Ok(Ex::Leaf(self.pos_slot(&label, &nums)))
            }
            Val::Grid(v) => {
                let nums = self.grid_numbers(id, &v)?;
                if nums.windows(2).all(|w| w[0] == w[1]) {
                    return Ok(Ex::C(nums.first().copied().unwrap_or(0.0)));
                }
                let label = self.g.node(id).label.clone();
                Ok(Ex::Leaf(self.grid_slot(id, &label, &nums)?))
            }
        }
    }

    /// Replaces subexpressions that already have a slot by that slot.
    fn canon(&self, e: Ex) -> Ex {
        if self.mat_cache.is_empty() || matches!(e, Ex::Leaf(_) | Ex::C(_)) {
            return e;
        }
        let key = format!("{e:?}");
        if let Some(&s) = self.mat_cache.get(&key) {
            return Ex::Leaf(s);
        }
        if let Some(a) = self.part_cache.get(&key) {
            return Self::aff_ex(a);
        }
        let c = |x: Box<Ex>| bx(self.canon(*x));
        match e {
            Ex::Add(a, b) => Ex::Add(c(a), c(b)),
            Ex::Mul(a, b) => Ex::Mul(c(a), c(b)),
            Ex::Div(a, b) => Ex::Div(c(a), c(b)),
            Ex::Neg(a) => Ex::Neg(c(a)),
            Ex::Pow(a, b) => Ex::Pow(c(a), c(b)),
            Ex::Cmp(a, op, b) => Ex::Cmp(c(a), op, c(b)),
            Ex::Ter(a, b, d) => Ex::Ter(c(a), c(b), c(d)),
            other => other,
        }
    }

    /// `a` as an expression of its slots.
    fn aff_ex(a: &Aff) -> Ex {
        let sum = a.c.iter().fold(None, |acc: Option<Ex>, (&s, &w)| {
            let t = if w == 1.0 { Ex::Leaf(s) } else { Ex::Mul(bx(Ex::C(w)), bx(Ex::Leaf(s))) };
            Some(match acc {
                None => t,
                Some(x) => Ex::Add(bx(x), bx(t)),
            })
        });
        match sum {
            None => Ex::C(a.k),
            Some(e) if a.k != 0.0 => Ex::Add(bx(e), bx(Ex::C(a.k))),
            Some(e) => e,
        }
    }

    /// The condition of `t if c else e` as an expression worth 0 or 1.
    fn condition_ex(&mut self, id: NodeId, c: &Operand) -> Result<Ex, Diagnostic> {
        match c {
            Operand::Const(a) => Ok(Ex::C(if a.truthy() { 1.0 } else { 0.0 })),
            Operand::Sop(n) => match self.vals.get(n).cloned() {
                Some(Val::Pos(v)) if v.iter().all(|a| matches!(a, Some(Atom::Bool(_)) | None)) => self.operand_ex(c),
                Some(Val::Pos(v) | Val::Grid(v)) => {
                    let grid = matches!(self.vals.get(n), Some(Val::Grid(_)));
                    let nums: Vec<f64> = v.iter().map(|a| if a.as_ref().is_some_and(Atom::truthy) { 1.0 } else { 0.0 }).collect();
                    if nums.windows(2).all(|w| w[0] == w[1]) {
                        return Ok(Ex::C(nums.first().copied().unwrap_or(0.0)));
                    }
                    let label = format!("{}:truth", self.g.node(*n).label);
                    Ok(Ex::Leaf(if grid { self.grid_slot(*n, &label, &nums)? } else { self.pos_slot(&label, &nums) }))
                }
                Some(Val::Real(ex)) if matches!(ex, Ex::Cmp(..)) => Ok(self.canon(ex)),
                Some(Val::Real(_)) => {
                    Err(self.err(id, format!("{} reads a real value as a condition (true where it is not 0)", crate::names::describe(self.g, id))).with_label("a step at 0").with_note(
                        "a real value's truth jumps at 0, which no continuous MLP computes: compare it instead (`x if x > 0 else 0.5`, whose branches must agree at the threshold)",
                    ))
                }
                None => self.operand_ex(c),
            },
        }
    }

    fn operand_ex(&mut self, o: &Operand) -> Result<Ex, Diagnostic> {
        match o {
            Operand::Sop(n) => self.ex_of(*n),
            Operand::Const(a) => Ok(Ex::C(atom_f64(a).unwrap_or(f64::NAN))),
        }
    }

    fn lower_node(&mut self, id: NodeId) -> Result<Val, Diagnostic> {
        let node = self.g.node(id);
        let label = node.label.clone();
        self.span = crate::names::place(self.g, id);
        // Functions of `indices` alone are positional (maps of positional operands below).
        match &node.kind {
            NodeKind::Indices => return Ok(Val::Pos((0..self.n).map(|i| Some(Atom::Int(i as i64))).collect())),
            NodeKind::Const(a) => return Ok(Val::Pos(vec![Some(a.clone()); self.n])),
            _ => {}
        }
        if let Some(t) = self.grid.values.get(&id) {
            return Ok(self.grid_val(t.clone()));
        }
        Ok(match node.kind.clone() {
            NodeKind::Tokens => {
                let s = self.new_slot(label.clone(), SlotEnc::Num { points: None });
                let m = self.opts.lo.abs().max(self.opts.hi.abs());
                // The number is rounded to f32 for an f32 forward pass only (unless it is one).
                let err = Err2 { f32: if self.opts.f32_inputs { 0.0 } else { U32 * m }, f64: 0.0 };
                self.res.insert(s, Res { iv: Iv { lo: self.opts.lo, hi: self.opts.hi }, err });
                self.input = Some(s);
                Val::Real(Ex::Leaf(s))
            }
            // `index_function` above returns these as positional values.
            NodeKind::Indices | NodeKind::Const(_) => return Err(self.err(id, "internal error: a positional s-op was not computed at compile time").with_label("here")),
            // `length` and its maps are grid values (above).
            NodeKind::Length => return Err(self.err(id, "internal error: `length` was not computed on the grid").with_label("here")),
            NodeKind::Map { op, args } => {
                if args.iter().all(|a| match a {
                    Operand::Sop(s) => matches!(self.vals[s], Val::Pos(_)),
                    Operand::Const(_) => true,
                }) {
                    // A function of positional values: positional too.
                    let mut out = vec![];
                    for i in 0..self.n {
                        let mut row = vec![];
                        let mut ok = true;
                        for a in &args {
                            match a {
                                Operand::Const(c) => row.push(c.clone()),
                                Operand::Sop(s) => match &self.vals[s] {
                                    Val::Pos(v) => match &v[i] {
                                        Some(x) => row.push(x.clone()),
                                        None => ok = false,
                                    },
                                    Val::Real(_) | Val::Grid(_) => ok = false,
                                },
                            }
                        }
                        out.push(if ok { raspc_lang::interp::apply_map(&op, &row).ok() } else { None });
                    }
                    return Ok(Val::Pos(out));
                }
                if let Some(v) = self.grid_map(&op, &args) {
                    return Ok(v);
                }
                let mut xs = vec![];
                for (i, a) in args.iter().enumerate() {
                    // A conditional's condition is its truth, 0 or 1: a positional number (`x if
                    // indices else 0.5`) as `indices != 0` (it was used as the weight of
                    // `e + c·(t - e)`: 4.49 off, certified 1e-5; helper v), a real value refused
                    // (its truth jumps at 0).
                    if matches!(op, MapOp::Ternary) && i == 1 {
                        xs.push(self.condition_ex(id, a)?);
                        continue;
                    }
                    xs.push(self.operand_ex(a)?);
                }
                let ex = match (&op, xs.as_slice()) {
                    (MapOp::Convert(Convert::Float) | MapOp::Pos, [x]) => x.clone(),
                    (MapOp::Neg, [x]) => Ex::Neg(bx(x.clone())),
                    (MapOp::Binary(b), [x, y]) => {
                        let (x, y) = (bx(x.clone()), bx(y.clone()));
                        match b {
                            BinOp::Add => Ex::Add(x, y),
                            BinOp::Sub => Ex::Add(x, bx(Ex::Neg(y))),
                            BinOp::Mul => Ex::Mul(x, y),
                            BinOp::Div => {
                                self.div_origin.entry(format!("{y:?}")).or_insert(id);
                                Ex::Div(x, y)
                            }
                            BinOp::Pow => Ex::Pow(x, y),
                            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                                // Sides equal up to rounding (`x + 0.1 + 0.2 > x + 0.3`): the
                                // interpreter's answer depends on how each side rounds, input by
                                // input, where the compiler sees one constant (helper v: folded to
                                // 0, the interpreter said 5 on 61% of inputs).
                                if let (Some(la), Some(ra)) = (Self::affine(&x), Self::affine(&y)) {
                                    let u = la.clone().add(&ra, -1.0);
                                    let mag = self.aff_iv(&la).mag() + self.aff_iv(&ra).mag();
                                    // The interpreter rounds each operation of each side, up to
                                    // u·(what it reaches): a long chain drifts further (helper
                                    // rv: 1000 additions of 0.1 passed a fixed 64u and folded).
                                    let slack = 2.0 * (Self::ops(&x) + Self::ops(&y) + 32) as f64 * U64 * (1.0 + mag);
                                    let tie = u.is_const() && u.k.abs() <= slack && Self::commuted_key(&x) != Self::commuted_key(&y);
                                    // Harmless where every use is a conditional whose branches
                                    // agree up to rounding (`max(x + 0.1 + 0.2, x + 0.3)`; `x if
                                    // ... else x`): whichever the interpreter picks, the value is
                                    // the same to within its own rounding (helper z3).
                                    let harmless = || {
                                        let users = self.g.users(id);
                                        !users.is_empty()
                                            && users.iter().all(|&n| match &self.g.node(n).kind {
                                                NodeKind::Map { op: MapOp::Ternary, args } if matches!(args.get(1), Some(Operand::Sop(c)) if *c == id) => {
                                                    let branch = |o: &Operand| match o {
                                                        Operand::Const(a) => atom_f64(a).map(Aff::konst),
                                                        Operand::Sop(b) => match self.vals.get(b) {
                                                            Some(Val::Real(e)) => Self::affine(e),
                                                            _ => None,
                                                        },
                                                    };
                                                    match (args.first().and_then(branch), args.get(2).and_then(branch)) {
                                                        (Some(ta), Some(ea)) => {
                                                            let d = ta.clone().add(&ea, -1.0);
                                                            d.is_const() && d.k.abs() <= slack * (1.0 + self.aff_iv(&ta).mag() + self.aff_iv(&ea).mag()) / (1.0 + mag)
                                                        }
                                                        _ => false,
                                                    }
                                                }
                                                _ => false,
                                            })
                                    };
                                    if tie && !harmless() {
                                        return Err(self
                                            .err(id, format!("the two sides of {} are equal up to rounding", crate::names::describe(self.g, id)))
                                            .with_label("this comparison")
                                            .with_note("the interpreter computes each side in floating point, so which is larger changes from input to input by rounding alone; a model cannot reproduce that: compare with a margin, or write the sides the same way"));
                                    }
                                }
                                Ex::Cmp(x, *b, y)
                            }
                            // Equality is true at single points: a step whatever it chooses
                            // between (helper d10: the note offered "comparisons inside `a if
                            // cond else b`" for an `==` that was inside one).
                            BinOp::Eq => {
                                return Err(self
                                    .err(id, format!("`{}` on real values is not supported", b.symbol()))
                                    .with_label("here")
                                    .with_note("equality of real values holds at single points: a step, which a continuous MLP cannot compute; `<`, `<=`, `>`, `>=` inside `a if cond else b` compile where both branches agree at the threshold (max, min, relu), and over a finite set of numbers (--vocab or --input-grid) `==` compiles"));
                            }
                            other => {
                                return Err(self
                                    .err(id, format!("`{}` on real values is not supported", other.symbol()))
                                    .with_label("here")
                                    .with_note("real values support + - * / ^, comparisons inside `a if cond else b`, and aggregates"));
                            }
                        }
                    }
                    (MapOp::Ternary, [t, c, e]) => {
                        let ter = Ex::Ter(bx(t.clone()), bx(c.clone()), bx(e.clone()));
                        self.ter_origin.entry(format!("{ter:?}")).or_insert(id);
                        ter
                    }
                    _ => {
                        // A conversion of the input is a built-in s-op, placed where the program
                        // reads it: name it (helper b10: "to_int of a real value", under an
                        // aggregate in a function body, never said `tokens_int`).
                        let input_conversion = matches!(op, MapOp::Convert(_)) && args.iter().any(|a| matches!(a, Operand::Sop(x) if matches!(self.g.node(*x).kind, NodeKind::Tokens)));
                        let what = if input_conversion && self.g.node(id).named {
                            // (In the program's words: `int(x)` of each input, not `to_int`; helper ed25.)
                            let name = op.name();
                            let python = match name.as_str() {
                                "to_int" => "int(x)",
                                "to_float" => "float(x)",
                                "to_str" => "str(x)",
                                other => other,
                            };
                            format!("`{}` ({python} of each input number)", self.g.node(id).label)
                        } else {
                            format!("{} of a real value", op.name())
                        };
                        let mut d = self
                            .err(id, format!("{what} is not supported"))
                            .with_label(if input_conversion { "read here" } else { "here" })
                            .with_note("real values support + - * / ^, comparisons inside `a if cond else b`, and aggregates");
                        if input_conversion && op.name() != "to_str" && op.name() != "to_float" {
                            d = d.with_note("with --input-bounds the inputs are real numbers: read them as `tokens_float` (an integer program compiles over a finite set with --vocab or --input-grid)");
                        }
                        if op.name() == "to_str" {
                            // `tokens` is `tokens_str`: a real-valued program reads the numbers.
                            d = d.with_note("`tokens` reads each input as a string; with --input-bounds the inputs are numbers: read them as `tokens_float` (or compile over a finite set with --vocab or --input-grid)");
                        }
                        return Err(d);
                    }
                };
                // An expression is a tree over the values it reads: one read several times, again
                // and again (`x = (x + x) * 0.5` in a loop), doubles it each time (helper d13:
                // 24 rounds took 10 GB). Past a budget it is refused, naming the s-op.
                let nodes = ex.size(MAX_EXPRESSION_NODES + 1);
                if nodes > MAX_EXPRESSION_NODES {
                    return Err(self.err(id, format!("{} grows to more than {MAX_EXPRESSION_NODES} operations", crate::names::describe(self.g, id))).with_label("built here").with_note(
                        "a value read several times by an s-op that is read several times again grows as a tree, not a list (each read copies it); a real-valued program computes such a chain as written: simplify it (`(x + x) * 0.5` is `x`), or round it through --input-grid",
                    ));
                }
                Val::Real(ex)
            }
            NodeKind::Aggregate { sel, values, default } | NodeKind::AggregateMax { sel, values, default } => {
                let is_max = matches!(node.kind, NodeKind::AggregateMax { .. });
                if let Some(v) = self.grid_aggregate(id, &label, sel, values, &default, is_max)? {
                    return Ok(v);
                }
                let m = self.selector(sel)?;
                // A selector that selects no key for any query (`select(indices, indices, <)` at
                // max-len 1): the default everywhere. (A head would have nothing to rank keys
                // below BOS with, and `aggregate_max` gave the largest value of all keys.)
                if m.iter().all(Vec::is_empty) {
                    let d = atom_f64(&default).ok_or_else(|| self.err(id, format!("the default of a real aggregate must be a number, got {}", default.repr())).with_label("here"))?;
                    return Ok(Val::Pos(vec![Some(Atom::Float(d)); m.len()]));
                }
                if let Some(Val::Pos(v)) = self.vals.get(&values).cloned() {
                    // Everything known: the aggregate is positional too.
                    let nums = self.pos_numbers(values, &v)?;
                    let d = atom_f64(&default).unwrap_or(0.0);
                    let out = m
                        .iter()
                        .map(|row| {
                            let picked: Vec<f64> = row.iter().map(|&k| nums[k as usize]).collect();
                            Some(Atom::Float(if picked.is_empty() {
                                d
                            } else if is_max {
                                picked.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                            } else {
                                picked.iter().sum::<f64>() / picked.len() as f64
                            }))
                        })
                        .collect();
                    return Ok(Val::Pos(out));
                }
                if atom_f64(&default) != Some(0.0) {
                    return Err(self.err(id, format!("the default of a real aggregate must be 0, got {}", default.repr())).with_label("here"));
                }
                let vex = self.ex_of(values)?;
                let v = self.blocked_resident(&vex, &self.g.node(values).label.clone())?;
                if Self::affine(&vex).is_none() {
                    // Later readers of the value read the slots just written.
                    self.vals.insert(values, Val::Real(Self::aff_ex(&v)));
                }
                let s = self.head(id, &label, sel, &m, &v, is_max, None)?;
                Val::Real(Ex::Leaf(s))
            }
            // In programs with `length`, and for selectors that look ahead, counted on the grid:
            // only the keys of the input's length exist.
            NodeKind::SelectorWidth(sel) => {
                if !self.grid.pairs.is_empty() || self.grid_selector(sel) {
                    let rows = self.grid_rows(sel)?;
                    return Ok(self.grid_val(rows.iter().map(|r| Some(Atom::Int(r.iter().filter(|&&b| b).count() as i64))).collect()));
                }
                let m = self.selector(sel)?;
                if looks_ahead(&m) {
                    return Ok(self.grid_val(grid_counts(&m, self.n)));
                }
                Val::Pos(m.iter().map(|r| Some(Atom::Int(r.len() as i64))).collect())
            }
            NodeKind::Select { .. } | NodeKind::SelectAnd(..) | NodeKind::SelectOr(..) | NodeKind::SelectNot(_) => {
                return Err(self.err(id, "not supported with real inputs").with_label("here"));
            }
        })
    }

    // ---- selectors and heads -----------------------------------------------------------

    /// The selected keys of each query (ascending) of a selector between positional s-ops.
    /// `==` leaves are matched through a value -> keys map, `and`/`or` merge sorted lists, so a
    /// selector of `==` leaves costs O(positions + selected pairs), not positions².
    fn selector(&self, sel: NodeId) -> Result<Vec<Vec<u32>>, Diagnostic> {
        let mut sides = HashMap::new();
        self.collect_sides(sel, &mut sides)?;
        Ok(self.sel_rows(sel, &sides))
    }

    #[allow(clippy::type_complexity)]
    fn sel_rows(&self, sel: NodeId, sides: &HashMap<NodeId, (Vec<Option<Atom>>, Vec<Option<Atom>>)>) -> Vec<Vec<u32>> {
        match &self.g.node(sel).kind {
            NodeKind::Select { cmp: Cmp::Eq, .. } => {
                let (kv, qv) = &sides[&sel];
                let mut keys_of: HashMap<EqKey, Vec<u32>> = HashMap::new();
                for (k, a) in kv.iter().enumerate() {
                    if let Some(key) = a.as_ref().and_then(eq_key) {
                        keys_of.entry(key).or_default().push(k as u32);
                    }
                }
                return qv.iter().map(|a| a.as_ref().and_then(eq_key).and_then(|key| keys_of.get(&key).cloned()).unwrap_or_default()).collect();
            }
            NodeKind::SelectAnd(a, b) => {
                let (x, y) = (self.sel_rows(*a, sides), self.sel_rows(*b, sides));
                return x.iter().zip(&y).map(|(r, s)| r.iter().filter(|k| s.binary_search(k).is_ok()).copied().collect()).collect();
            }
            NodeKind::SelectOr(a, b) => {
                let (x, y) = (self.sel_rows(*a, sides), self.sel_rows(*b, sides));
                return x
                    .into_iter()
                    .zip(y)
                    .map(|(mut r, s)| {
                        r.extend(s);
                        r.sort_unstable();
                        r.dedup();
                        r
                    })
                    .collect();
            }
            _ => {}
        }
        let n = self.n;
        (0..n).map(|q| (0..n).filter(|&k| self.eval_sel(sel, k, q, sides)).map(|k| k as u32).collect()).collect()
    }

    #[allow(clippy::type_complexity)]
    fn collect_sides(&self, sel: NodeId, out: &mut HashMap<NodeId, (Vec<Option<Atom>>, Vec<Option<Atom>>)>) -> Result<(), Diagnostic> {
        match &self.g.node(sel).kind {
            NodeKind::Select { keys, queries, .. } => {
                out.insert(sel, (self.side(sel, *keys)?, self.side(sel, *queries)?));
            }
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                self.collect_sides(*a, out)?;
                self.collect_sides(*b, out)?;
            }
            NodeKind::SelectNot(a) => self.collect_sides(*a, out)?,
            _ => {}
        }
        Ok(())
    }

    fn side(&self, sel: NodeId, x: NodeId) -> Result<Vec<Option<Atom>>, Diagnostic> {
        match self.vals.get(&x) {
            Some(Val::Pos(v)) => Ok(v.clone()),
            Some(Val::Grid(_)) => {
                Err(self.err(sel, format!("internal error: this selector compares `{}`, which depends on `length`, by position", self.g.node(x).label)).with_label("here"))
            }
            _ => Err(self
                .err(sel, format!("this selector compares `{}`, which depends on the input numbers", self.g.node(x).label))
                .with_label("selectors must compare positions")
                .with_note("with real inputs, selects compare functions of indices; the largest real value is `aggregate_max`")),
        }
    }

    #[allow(clippy::type_complexity)]
    fn eval_sel(&self, sel: NodeId, k: usize, q: usize, sides: &HashMap<NodeId, (Vec<Option<Atom>>, Vec<Option<Atom>>)>) -> bool {
        match &self.g.node(sel).kind {
            NodeKind::Select { cmp, .. } => {
                let (kv, qv) = &sides[&sel];
                match (&kv[k], &qv[q]) {
                    (Some(a), Some(b)) => Atom::compare(a, *cmp, b).unwrap_or(false),
                    _ => false,
                }
            }
            NodeKind::SelectAnd(a, b) => self.eval_sel(*a, k, q, sides) && self.eval_sel(*b, k, q, sides),
            NodeKind::SelectOr(a, b) => self.eval_sel(*a, k, q, sides) || self.eval_sel(*b, k, q, sides),
            NodeKind::SelectNot(a) => !self.eval_sel(*a, k, q, sides),
            _ => false,
        }
    }

    /// `==` leaves of an `and` tree with integer positions: `(key values, query values)`, each
    /// within ±1024 (so every score term is an integer an f32 holds exactly). A leaf whose
    /// values span more is split into two digits, `v - lo = hi·B + lo'` with B² covering the
    /// span: equal values have equal digits, and unequal ones differ in a digit by at least 1.
    fn quadratic_leaves(&self, sel: NodeId, out: &mut Vec<(Vec<f64>, Vec<f64>)>) -> bool {
        match &self.g.node(sel).kind {
            NodeKind::SelectAnd(a, b) => self.quadratic_leaves(*a, out) && self.quadratic_leaves(*b, out),
            NodeKind::Select { keys, queries, cmp: Cmp::Eq } => {
                let (Ok(kv), Ok(qv)) = (self.side(sel, *keys), self.side(sel, *queries)) else { return false };
                // Integer values (inner None: undefined there, never matches); None: not integers.
                let int = |v: &[Option<Atom>]| -> Option<Vec<Option<f64>>> {
                    v.iter()
                        .map(|a| match a.as_ref().map(atom_f64) {
                            Some(Some(x)) if x.fract() == 0.0 && x.abs() <= 1e15 => Some(Some(x)),
                            Some(Some(_)) => None,
                            _ => Some(None),
                        })
                        .collect()
                };
                let (Some(k), Some(q)) = (int(&kv), int(&qv)) else { return false };
                let defined = || k.iter().chain(&q).flatten().copied();
                let (lo, hi) = defined().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
                // Undefined positions: a far-away sentinel (keys and queries apart).
                let fill = |v: &[Option<f64>], f: &dyn Fn(f64) -> f64, sentinel: f64| -> Vec<f64> { v.iter().map(|x| x.map_or(sentinel, f)).collect() };
                if lo > hi || (lo >= -1024.0 && hi <= 1024.0) {
                    out.push((fill(&k, &|x| x, -3000.0), fill(&q, &|x| x, -6000.0)));
                    return true;
                }
                let base = ((hi - lo + 1.0).sqrt().ceil()).max(2.0);
                if base > 1024.0 {
                    return false;
                }
                let high = |x: f64| ((x - lo) / base).floor();
                let low = |x: f64| (x - lo) - base * ((x - lo) / base).floor();
                out.push((fill(&k, &high, -3000.0), fill(&q, &high, -6000.0)));
                out.push((fill(&k, &low, 0.0), fill(&q, &low, 0.0)));
                true
            }
            _ => false,
        }
    }

    /// One hard-attention head writing a new numerical slot: the mean (or the maximum) of the
    /// affine form `v` over the keys `m[q]` selects; 0 where none is.
    #[allow(clippy::too_many_arguments)]
    fn head(&mut self, id: NodeId, label: &str, sel: NodeId, m: &[Vec<u32>], v: &Aff, is_max: bool, ctx: Option<&[(i64, i64)]>) -> Result<SlotId, Diagnostic> {
        // The values of the keys some query selects (per-position bounds of the input and
        // positional values; other slots' intervals).
        let mut selected = vec![false; self.n];
        for &k in m.iter().flatten() {
            selected[k as usize] = true;
        }
        let vi = (0..self.n).filter(|&k| selected[k]).map(|k| self.key_iv(v, k)).reduce(Iv::hull).unwrap_or(Iv::pt(0.0));
        let widest = m.iter().map(Vec::len).max().unwrap_or(0);
        // A gather (every query keeps at most one key, below) of a value that is exact on a
        // grid at every key a query selects ([`Self::grid_dot`]: its projection adds exactly)
        // writes that key's value exactly: no error, and the output is on the coarsest grid.
        let exact_keys: Option<Vec<i32>> =
            if !is_max && ctx.is_none() && widest <= 1 { (0..self.n).filter(|&k| selected[k]).map(|k| self.grid_dot(v, v.k, Some(k)).map(|g| g.0)).collect() } else { None };
        let ve = if exact_keys.is_some() { Err2::default() } else { self.aff_err(v) };
        // (Floored so the max head's score scale stays a finite f32.)
        let vmag = vi.mag().max(1e-3);
        // A query may select nothing: at max-len, or (rows by position) at a shorter length
        // where every key it selects lies past the input's end.
        let none = match ctx {
            Some(_) => m.iter().any(|r| r.is_empty()),
            None => m.iter().enumerate().any(|(q, r)| r.first().is_none_or(|&k| k as usize > q)),
        };
        // Value path: one dot product with nnz terms, then a mean of `widest` values.
        // Value path: the projection (a dot product), then the mean of the kept keys. A query
        // keeps at most one key when each selects at most one (the selected key scores at least
        // the gap above every other, BOS included): its weight is 1/1 and the output is that
        // key's value exactly (the output weight is 1, and the head's slot is 0 before it).
        let mean_gamma = Self::mean_gamma(widest);
        let value_fp = if exact_keys.is_some() { Err2::default() } else { self.dot_err(v, v.k, self.aff_mag(v)) + mean_gamma * (Err2::both(vmag) + ve) };
        let (mut q, mut k): (Vec<In>, Vec<In>) = (vec![], vec![]);
        let mut col = 0;
        let mut quad = vec![];
        // Score scale: 1 for means; for the maximum, -M on unselected keys and c·v on selected.
        let (scale, c) = if is_max {
            let c = (2f64.powi(40) / vmag).log2().floor().exp2();
            let big = (4.0 * c * vmag + 4.0).log2().ceil().exp2();
            (big, c)
        } else {
            (1.0, 0.0)
        };
        let mut err = ve + value_fp;
        if !is_max && ctx.is_none() && self.quadratic_leaves(sel, &mut quad) {
            // -Σ (f(k) - g(q))² = Σ 2 f g - f² - g².
            let mut fsq = vec![];
            let mut gsq = vec![];
            for (j, (f, g)) in quad.iter().enumerate() {
                let fs = self.pos_slot(&format!("{label}.key{j}"), f);
                let gs = self.pos_slot(&format!("{label}.query{j}"), g);
                q.push(In::new(gs, 0, col, 2.0));
                k.push(In::new(fs, 0, col, 1.0));
                col += 1;
                fsq.push(self.pos_slot(&format!("{label}.key{j}^2"), &f.iter().map(|x| x * x).collect::<Vec<_>>()));
                gsq.push(self.pos_slot(&format!("{label}.query{j}^2"), &g.iter().map(|x| x * x).collect::<Vec<_>>()));
            }
            q.push(In::new(TOK, 0, col, -1.0));
            k.extend(fsq.iter().map(|&s| In::new(s, 0, col, 1.0)));
            col += 1;
            q.extend(gsq.iter().map(|&s| In::new(s, 0, col, -1.0)));
            k.push(In::new(TOK, 0, col, 1.0));
            col += 1;
        } else {
            // Key groups: keys selected by the same queries.
            let mut columns: Vec<Vec<u32>> = vec![vec![]; self.n];
            for (qi, row) in m.iter().enumerate() {
                for &k in row {
                    columns[k as usize].push(qi as u32);
                }
            }
            let mut groups: Vec<Vec<u32>> = vec![];
            let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
            let mut group_of = vec![0usize; self.n];
            for (key, column) in columns.into_iter().enumerate() {
                group_of[key] = *index.entry(column.clone()).or_insert_with(|| {
                    groups.push(column);
                    groups.len() - 1
                });
            }
            if groups.len() > MAX_GROUPS {
                return Err(self.err(id, format!("this selector splits the keys into {} groups (at most {MAX_GROUPS})", groups.len())).with_label("too irregular for one head"));
            }
            let r = groups.len();
            let kg = self.new_slot(format!("{label}.keygroup"), SlotEnc::Cat((0..r).map(|i| Atom::Int(i as i64)).collect()));
            let qn = match ctx {
                // Rows are (index, length) pairs: an MLP writes which groups a query leaves out.
                Some(_) => {
                    let table: Vec<Vec<f64>> = (0..m.len()).map(|p| groups.iter().map(|g| if g.binary_search(&(p as u32)).is_ok() { 0.0 } else { 1.0 }).collect()).collect();
                    self.grid_table_slot(id, &format!("{label}.unselected"), SlotEnc::Cat((0..r).map(|i| Atom::Int(i as i64)).collect()), &table)?.0
                }
                None => self.new_slot(format!("{label}.unselected"), SlotEnc::Cat((0..r).map(|i| Atom::Int(i as i64)).collect())),
            };
            // A 1 for each group the query leaves out: a set, not one value.
            self.slots[qn.0].multi_hot = true;
            for (gi, group) in groups.iter().enumerate() {
                let mut kv = vec![0.0; self.n + 1];
                for (key, &g) in group_of.iter().enumerate() {
                    if g == gi {
                        kv[key + 1] = 1.0;
                    }
                }
                self.positional.push(EmbedRow { slot: kg, dim: gi, values: kv });
                if ctx.is_none() {
                    let mut qv = vec![1.0; self.n + 1];
                    qv[0] = 0.0;
                    for &qi in group {
                        qv[qi as usize + 1] = 0.0;
                    }
                    self.positional.push(EmbedRow { slot: qn, dim: gi, values: qv });
                }
                q.push(In::new(qn, gi, col, -scale));
                k.push(In::new(kg, gi, col, 1.0));
                col += 1;
            }
        }
        // BOS: wins for a query with no selected key (-scale/2 beats every unselected key),
        // and BOS attends to itself.
        q.push(In::new(TOK, 0, col, -scale / 2.0));
        k.push(In::new(BOS, 0, col, 1.0));
        col += 1;
        q.push(In::new(BOS, 0, col, scale));
        k.push(In::new(BOS, 0, col, 1.0));
        col += 1;
        q.push(In::new(BOS, 0, col, -scale));
        k.push(In::new(TOK, 0, col, 1.0));
        col += 1;
        if is_max {
            q.push(In::new(TOK, 0, col, 1.0));
            for (&s, &w) in &v.c {
                k.push(In::new(s, 0, col, c * w));
            }
            if v.k != 0.0 {
                k.push(In::new(TOK, 0, col, c * v.k));
            }
            col += 1;
            // Keys within the tie tolerance (1/8) or a rounding of the largest score of the
            // maximum are averaged in.
            if ctx.is_none() && v.k == 0.0 && v.c.len() == 1 && v.c.values().all(|&w| w.abs() == 1.0) {
                // Exact scores: a selected key's score is c·v' exactly (c·(±1) is a power of
                // two, and every other product of its row is an exact zero: its own group's
                // query dim is 0, the other groups' key dims are 0, BOS dims are 0 off BOS), and
                // unselected keys and BOS score below -2c·max|v| < every selected key. So the
                // kept keys are the selected ones with c·v'_k ≥ fl(c·M' - 1/8) ≥ c·M' - 1/8 -
                // u·|c·M' - 1/8|: v'_k ≥ M' - (1/8)(1 + u)/c - u·|M'|, M' the largest selected v'.
                let e = |u: f64| 0.125 * (1.0 + u) / c + u * vmag;
                err += Err2 { f32: e(U32) + U32 * ve.f32, f64: e(U64) + U64 * ve.f64 };
            } else {
                // A key's score column is the projection c·v' (c a power of two: exactly c times
                // the value projection's rounding, `dot_err`): a kept key's v' may sit below the
                // largest by twice that beyond the tolerance.
                let projection = self.dot_err(v, v.k, self.aff_mag(v)) * 2.0;
                err += Err2 { f32: (0.125 + 8.0 * U32 * scale) / c, f64: (0.125 + 8.0 * U64 * scale) / c } + projection;
            }
        }
        let vv: Vec<In> = v.c.iter().map(|(&s, &w)| In::new(s, 0, 0, w)).chain((v.k != 0.0).then_some(In::new(TOK, 0, 0, v.k))).collect();
        let out = self.new_slot(label.to_string(), SlotEnc::Num { points: None });
        let iv = if none { vi.hull(Iv::pt(0.0)) } else { vi };
        self.res.insert(out, Res { iv, err });
        if let Some(g) = exact_keys.and_then(|gs| gs.into_iter().min())
            && err == Err2::default()
            && g != i32::MAX
        {
            self.exact_grid.insert(out, g);
        }
        // Relative bounds pass through means of a nonnegative value (`relative::through_mean`).
        // A grouped block's sum ([`Group`]) counts as its value: its relative bounds already
        // charge the value projection's sum of the groups.
        let group = self.group_of(v);
        if !is_max && ctx.is_none() && v.k == 0.0 && v.exact() && (group.is_some() || (v.c.len() == 1 && v.c.values().all(|&w| w == 1.0))) && vi.lo >= 0.0 {
            let value = group.or_else(|| v.c.keys().next().copied()).unwrap_or(SlotId(usize::MAX));
            if let Some(r) = self.rel.get(&value) {
                // (Relative to the mean of |v'|, not to max|v'|: a mean of c values of different
                // sizes can round like γ_{c-1} of it, so the full factor.)
                let projection = if group.is_some() { Err2::default() } else { Self::dot_gamma(v, v.k) };
                let g = projection + if widest <= 1 { Err2::default() } else { Err2::gamma(widest + 2, true) };
                self.rel.insert(out, relative::through_mean(r, g));
                self.head_round.insert(out, g);
                if let Some(sh) = self.shifted.get(&value) {
                    let sh = relative::Shifted { rel: relative::through_mean(&sh.rel, g), ..sh.clone() };
                    self.shifted.insert(out, sh);
                }
                let info = if m.iter().all(|r| r.len() <= 1) {
                    HeadInfo::Gather { value, key: m.iter().map(|r| r.first().copied().unwrap_or(u32::MAX)).collect() }
                } else {
                    HeadInfo::Mean { value, rows: m.to_vec() }
                };
                self.head_info.insert(out, info);
            }
        }
        // Exact zeros: queries with no selected key read the default 0.
        if ctx.is_none() {
            self.no_key.insert(out, m.iter().map(Vec::is_empty).collect());
        }
        let vz = self.aff_zero(v);
        let zero_rows: Vec<bool> = m.iter().map(|r| r.iter().all(|&k| vz[k as usize])).collect();
        self.zero.insert(out, crate::positional::per_position(self.n, ctx, &zero_rows));
        if is_max && v.k == 0.0 && !v.c.is_empty() {
            let zs = vz;
            let selects_itself = |r: &Vec<u32>, q: usize| r.binary_search(&(q as u32)).is_ok();
            let covers: Vec<bool> = match ctx {
                Some(pairs) => pairs.iter().zip(m).map(|(&(q, _), r)| selects_itself(r, q as usize) || (r.is_empty() && zs[q as usize])).collect(),
                None => (0..self.n).map(|q| selects_itself(&m[q], q) || (m[q].is_empty() && zs[q])).collect(),
            };
            if crate::positional::per_position(self.n, ctx, &covers).iter().all(|&b| b) {
                self.max_of.insert(out, v.clone());
            }
            if ctx.is_none() {
                self.max_info.insert(out, MaxInfo { value: v.clone(), rows: m.to_vec(), own: err - ve, common: Err2::default() });
            }
        }
        // A one-key gather of such a maximum that reads, at every query, the maximum of the
        // query's own row, from one key per row (a row's representative, at or before the
        // query): the maximum head's own error at that key is one number for the whole row, so
        // it becomes common to the row (`MaxInfo::common`); only the gather's rounding may differ
        // between queries. A query that reads nothing must have an empty row (both are 0 there).
        // (The key is never after the query: on a shorter input a key past its end would be
        // missing while the query's row still has keys.)
        if !is_max
            && ctx.is_none()
            && v.k == 0.0
            && v.c.len() == 1
            && v.c.values().all(|&w| w == 1.0)
            && m.iter().all(|r| r.len() <= 1)
            && let Some(info) = v.c.keys().next().and_then(|s| self.max_info.get(s)).cloned()
        {
            let mut rep: HashMap<&[u32], u32> = HashMap::new();
            let consistent = m.iter().enumerate().all(|(q, r)| match r.first() {
                None => info.rows[q].is_empty(),
                Some(&k) => k as usize <= q && !info.rows[q].is_empty() && info.rows[k as usize] == info.rows[q] && *rep.entry(&info.rows[q]).or_insert(k) == k,
            });
            if consistent {
                let src = v.c.keys().next().copied().unwrap_or(SlotId(usize::MAX));
                if let Some(s) = self.max_of.get(&src).cloned() {
                    self.max_of.insert(out, s);
                }
                self.max_info.insert(out, MaxInfo { value: info.value.clone(), rows: info.rows.clone(), own: err - ve, common: info.own + info.common });
            }
        }
        self.report.push(SopBound { label: label.to_string(), lo: iv.lo, hi: iv.hi, err: err.f32, err_f64: err.f64 });
        let head = Head { width: col, q, k, v: vv, o: vec![Out::new(0, out, 0, 1.0)], gap: 0.5, qk_terms: 1 };
        let what = format!("{label} = {}({}, {})", if is_max { "aggregate_max" } else { "aggregate" }, self.g.node(sel).label, self.describe(v));
        self.push_block(BlockKind::Head(head), out, what);
        Ok(out)
    }

    fn describe(&self, a: &Aff) -> String {
        if let Some(g) = self.group_of(a) {
            return format!("{} (its {} partial sums)", self.slots[g].label, self.groups[&g].slots.len());
        }
        let mut parts: Vec<String> = a.c.iter().map(|(&s, &w)| if w == 1.0 { self.slots[s].label.clone() } else { format!("{w}·{}", self.slots[s].label) }).collect();
        if a.k != 0.0 || parts.is_empty() {
            parts.push(format!("{}", a.k));
        }
        parts.join(" + ")
    }

    // ---- affine forms ------------------------------------------------------------------

    /// `a` less every grouped block ([`Group`]) it holds whole with one weight, and the
    /// interval those blocks contribute (their values', not the sum of their slots').
    fn ungroup(&self, a: &Aff) -> (Aff, Iv) {
        let mut rest = a.clone();
        let mut iv = Iv::pt(0.0);
        if self.groups.is_empty() || a.c.len() < 2 {
            return (rest, iv);
        }
        for g in self.groups.values() {
            let Some(&w) = a.c.get(&g.slots[0]) else { continue };
            if g.slots.iter().all(|s| a.c.get(s) == Some(&w)) {
                for s in &g.slots {
                    rest.c.remove(s);
                }
                iv = iv.add(g.iv.scale(w));
            }
        }
        (rest, iv)
    }

    /// The grouped block ([`Group`]) whose sum `a` is (weight 1), by its first slot.
    fn group_of(&self, a: &Aff) -> Option<SlotId> {
        let first = a.c.keys().next()?;
        let g = self.groups.get(first)?;
        (a.k == 0.0 && a.c.len() == g.slots.len() && g.slots.iter().all(|s| a.c.get(s) == Some(&1.0))).then_some(*first)
    }

    /// The interval of a slot's value, or of a grouped block's by its first slot.
    fn value_iv(&self, s: SlotId) -> Iv {
        self.groups.get(&s).map_or(self.res[&s].iv, |g| g.iv)
    }

    /// How far the program's exact affine form may be from `a`'s stored coefficients, at any
    /// value of its slots ([`Aff::dc`], [`Aff::dk`]): 0 when its constants folded exactly.
    fn fold_slack(&self, a: &Aff) -> f64 {
        a.dk + a.dc.iter().map(|(s, d)| d * self.res.get(s).map_or(f64::INFINITY, |r| r.iv.mag() + r.err.f32.max(r.err.f64))).sum::<f64>()
    }

    fn aff_iv(&self, a: &Aff) -> Iv {
        let (ra, giv) = self.ungroup(a);
        let slack = self.fold_slack(a);
        let naive = ra.c.iter().fold(Iv::pt(ra.k), |acc, (s, &w)| acc.add(self.res[s].iv.scale(w))).add(giv).add(Iv::new(-slack, slack));
        // λ(s - m) <= 0 when m is a maximum that covers s.
        for (&m, s) in &self.max_of {
            if let Some((lam, rest)) = a.split_max(m, s)
                && lam > 0.0
            {
                let r = self.aff_iv(&rest);
                return Iv { lo: naive.lo, hi: naive.hi.min(r.hi + slack) };
            }
        }
        // A materialised difference z = d ([`Self::diff_of`]; exactly, at every position): the
        // form with d in place of z may be bounded better (by a maximum, above).
        for (z, &c) in &a.c {
            if let Some(d) = self.diff_of.get(z)
                && !d.c.keys().any(|s| self.diff_of.contains_key(s))
            {
                let mut rest = a.clone();
                rest.c.remove(z);
                let sub = self.aff_iv(&rest.add(d, c));
                let (lo, hi) = (naive.lo.max(sub.lo), naive.hi.min(sub.hi));
                if lo <= hi {
                    return Iv { lo, hi };
                }
            }
        }
        naive
    }

    /// Token positions where the affine form is exactly 0.
    fn aff_zero(&self, a: &Aff) -> Vec<bool> {
        (0..self.n).map(|q| a.k == 0.0 && a.c.keys().all(|s| self.zero.get(s).is_some_and(|z| z[q]))).collect()
    }
    /// The interval of `a` at token position `k`.
    fn key_iv(&self, a: &Aff, k: usize) -> Iv {
        let slack = self.fold_slack(a);
        let (a, giv) = self.ungroup(a);
        a.c.iter().fold(Iv::pt(a.k).add(giv).add(Iv::new(-slack, slack)), |acc, (s, &w)| {
            let iv = if Some(*s) == self.input {
                self.input_iv[k]
            } else if let Some(p) = self.pos_vals.get(s) {
                Iv::pt(p[k])
            } else {
                self.res[s].iv
            };
            acc.add(iv.scale(w))
        })
    }

    fn aff_err(&self, a: &Aff) -> Err2 {
        // A grouped block held whole: its sum's error (`Group::err`).
        let (rest, _) = self.ungroup(a);
        let grouped: Err2 = if rest.c.len() == a.c.len() {
            Err2::default()
        } else {
            self.groups.values().filter_map(|g| a.c.get(&g.slots[0]).filter(|&&w| g.slots.iter().all(|s| a.c.get(s) == Some(&w))).map(|w| w.abs() * g.err)).sum()
        };
        grouped + rest.c.iter().map(|(s, w)| w.abs() * self.res[s].err).sum::<Err2>() + Err2::both(self.fold_slack(a))
    }
    /// Σ|c|·max|x| + |k|: the magnitude its dot product rounds against.
    /// (Per arithmetic: the computed values deviate by that arithmetic's errors.)
    fn aff_mag(&self, a: &Aff) -> Err2 {
        a.c.iter().map(|(s, w)| w.abs() * (Err2::both(self.res[s].iv.mag()) + self.res[s].err)).sum::<Err2>() + Err2::both(a.k.abs())
    }

    fn affine(ex: &Ex) -> Option<Aff> {
        Some(match ex {
            Ex::Leaf(s) => Aff::leaf(*s),
            Ex::C(c) => Aff::konst(*c),
            Ex::Add(a, b) => Self::affine(a)?.add(&Self::affine(b)?, 1.0),
            Ex::Neg(a) => Self::affine(a)?.scale(-1.0),
            Ex::Mul(a, b) => {
                let (x, y) = (Self::affine(a)?, Self::affine(b)?);
                if x.is_const() {
                    y.scale_by(&x)
                } else if y.is_const() {
                    x.scale_by(&y)
                } else {
                    return None;
                }
            }
            Ex::Div(a, b) => {
                let (x, y) = (Self::affine(a)?, Self::affine(b)?);
                // (A denominator within its own fold bound of 0 is no constant to divide by.)
                if y.is_const() && y.k.abs() > 2.0 * y.dk && y.k != 0.0 {
                    // 1/y moves by at most dk / (|y| (|y| - dk)) as y moves within its bound.
                    let dw = recip_err(y.k) + y.dk / (y.k.abs() * (y.k.abs() - y.dk)) * (1.0 + 8.0 * U64);
                    x.scale_inexact(1.0 / y.k, dw)
                } else {
                    return None;
                }
            }
            Ex::Pow(a, b) => {
                let (x, y) = (Self::affine(a)?, Self::affine(b)?);
                if x.is_const() && y.is_const() {
                    let v = x.k.powf(y.k);
                    // powf is within an ulp or two; a folded base or exponent moves it by at most
                    // its bound times the power's slope over the bound (a base within its bound
                    // of 0 is refused: the slope may be unbounded there).
                    let mut dk = 4.0 * U64 * v.abs();
                    if x.dk > 0.0 {
                        if x.k.abs() <= 2.0 * x.dk {
                            return None;
                        }
                        // (The slope |y|·b^(y-1) is largest at an end of the base's range.)
                        let (lo, hi) = (x.k.abs() - x.dk, x.k.abs() + x.dk);
                        let slope = y.k.abs() * lo.powf(y.k - 1.0).max(hi.powf(y.k - 1.0));
                        dk += 2.0 * slope * x.dk;
                    }
                    if y.dk > 0.0 {
                        // |d/dy x^y| = |ln x|·x^y, largest at an end of [y - dy, y + dy] (a
                        // negative base with a folded exponent is refused: x^y jumps in sign).
                        if x.k <= 0.0 {
                            return None;
                        }
                        let top = x.k.powf(y.k - y.dk).max(x.k.powf(y.k + y.dk));
                        dk += 2.0 * x.k.ln().abs() * top * y.dk;
                    }
                    if !(v.is_finite() && dk.is_finite()) {
                        return None;
                    }
                    Aff { k: v, dk, ..Aff::default() }
                } else {
                    return None;
                }
            }
            _ => return None,
        })
    }

    /// The interval of the product `a·b`: a square (`x * x`, `x ^ 2`) is never negative.
    fn prod_iv(&self, a: &Aff, b: &Aff) -> Iv {
        if a == b {
            self.aff_iv(a).sq()
        } else {
            self.aff_iv(a).mul(self.aff_iv(b))
        }
    }

    /// The affine form of `ex`, materialising it when it is not affine.
    fn affine_or_resident(&mut self, ex: &Ex, label: &str) -> Result<Aff, Diagnostic> {
        match Self::affine(ex) {
            Some(a) => Ok(a),
            None => Ok(Aff::leaf(self.resident(ex, label)?)),
        }
    }

    /// `ex` as an affine form of slots, like [`Self::affine_or_resident`], except that a sum of
    /// k ≥ 9 terms is written as B = ⌈√k⌉ slots (one MLP each, the same layer) of about k/B
    /// terms, returned as their sum. Every reader then adds the B partial sums in its own
    /// projection: a worst-case rounding of about (k/B + B)·u·Σ|terms| instead of k·u·Σ|terms|
    /// (docs/compiler.md, "Blocked sums").
    fn blocked_resident(&mut self, ex: &Ex, label: &str) -> Result<Aff, Diagnostic> {
        if let Some(a) = Self::affine(ex) {
            return Ok(a);
        }
        let key = format!("{ex:?}");
        if let Some(a) = self.blk_cache.get(&key) {
            return Ok(a.clone());
        }
        if let Some(&s) = self.mat_cache.get(&key) {
            return Ok(Aff::leaf(s));
        }
        let (aff, terms) = self.decompose(ex, label).map_err(|d| self.locate_step(d, ex))?;
        let k = terms.len();
        // The products that are exact on a grid and fit it together (`RealOptions::grids`: the
        // scores' high part of U on a split input) get one slot of their own, exact; the others
        // are blocked as below. (Mixed into the partial sums, every exact product would share
        // its partial sum's rounding.)
        // (Without declared grids there are none: no pass over the terms.)
        type Terms = Vec<(f64, Term)>;
        let (exact, inexact): (Terms, Terms) =
            if self.opts.grids.is_empty() { (vec![], vec![]) } else { terms.iter().cloned().partition(|(w, t)| matches!(t, Term::Prod(a, b) if self.grid_prod(a, b, *w).is_some())) };
        let split = !exact.is_empty() && !inexact.is_empty() && self.grid_terms(&Aff::default(), &exact).is_some();
        // (An exact sum on a grid rounds nowhere: one slot, which its readers add as one term.)
        if (k < BLOCK_MIN_TERMS && !split) || self.grid_terms(&aff, &terms).is_some() {
            // One term of exp or a reciprocal: its units write partial sums ([`Group`]).
            self.group_next =
                aff.is_const() && aff.k == 0.0 && matches!(terms.as_slice(), [(_, Term::Unary(_, f))] if relative::exp_rate(f).is_some() || relative::reciprocal_above(f).is_some());
            let s = self.mlp(label, &aff, &terms).map_err(|d| self.locate_step(d, ex))?;
            self.group_next = false;
            if let Some(g) = self.groups.get(&s) {
                let sum = g.slots.iter().fold(Aff::default(), |a, &x| a.add(&Aff::leaf(x), 1.0));
                self.blk_cache.insert(key, sum.clone());
                return Ok(sum);
            }
            self.tighten(s, ex);
            self.mat_cache.insert(key, s);
            return Ok(Aff::leaf(s));
        }
        let mut out = Aff::default();
        let mut aff = aff;
        let mut terms = terms;
        let mut b = (k as f64).sqrt().ceil() as usize;
        let mut exact_slot = None;
        if split {
            let s = self.mlp(&format!("{label}.exact"), &Aff::default(), &exact)?;
            out = out.add(&Aff::leaf(s), 1.0);
            exact_slot = Some((s, exact.len()));
            terms = inexact;
            // The rest's k terms round within B partial sums at about k/(2B) times their total
            // size R, and a reader adding the B partial sums pays about B·R more when it adds
            // them to a small number (the split U's exp adds them to the exact part less the row
            // maximum, computed first: `universal_split`): B = √(k/2) balances the two. (A reader
            // adding them to the exact part itself pays B times its size; U's one such reader,
            // the row maximum, has an error common to the row, which cancels.)
            b = ((terms.len() as f64 / 2.0).sqrt().ceil() as usize).max(1);
        }
        let k = terms.len();
        if k < BLOCK_MIN_TERMS || b <= 1 {
            let s = self.mlp(&format!("{label}.part0"), &aff, &terms)?;
            out = out.add(&Aff::leaf(s), 1.0);
        } else {
            let per = k.div_ceil(b);
            for (i, chunk) in terms.chunks(per).enumerate() {
                let part = if i == 0 { std::mem::take(&mut aff) } else { Aff::default() };
                let s = self.mlp(&format!("{label}.part{i}"), &part, chunk)?;
                out = out.add(&Aff::leaf(s), 1.0);
            }
        }
        // A sum of two s-ops, the exact one first (`s = sh + sc`): each is now held by slots
        // too, which later readers of either find ([`Self::canon`]).
        if let (Some((slot, n_exact)), Ex::Add(ea, eb)) = (exact_slot, ex) {
            let (aa, ta) = self.decompose(ea, label)?;
            if aa.is_const() && aa.k == 0.0 && aa.exact() && ta.len() == n_exact && self.grid_terms(&aa, &ta).is_some() {
                self.mat_cache.insert(format!("{ea:?}"), slot);
                let mut rest = out.clone();
                rest.c.remove(&slot);
                self.part_cache.insert(format!("{eb:?}"), rest);
            }
        }
        self.blk_cache.insert(key, out.clone());
        Ok(out)
    }

    /// Writes `ex` into a slot of its own (one MLP), unless it already is one.
    fn resident(&mut self, ex: &Ex, label: &str) -> Result<SlotId, Diagnostic> {
        if let Ex::Leaf(s) = ex {
            return Ok(*s);
        }
        let key = format!("{ex:?}");
        if let Some(&s) = self.mat_cache.get(&key) {
            return Ok(s);
        }
        let (aff, terms) = self.decompose(ex, label).map_err(|d| self.locate_step(d, ex))?;
        let s = self.mlp(label, &aff, &terms).map_err(|d| self.locate_step(d, ex))?;
        self.tighten(s, ex);
        self.mat_cache.insert(key, s);
        Ok(s)
    }

    /// A refusal of a step ("the function jumps") about `ex`: points also at the conditional
    /// that makes it, when `ex` holds one written by another s-op (`f = 1 if d < 0 else 0;` read
    /// by `prog = f * 2` was reported at `prog` only).
    fn locate_step(&self, d: Diagnostic, ex: &Ex) -> Diagnostic {
        if !d.message.contains("jumps") || d.labels.len() > 1 {
            return d;
        }
        let found: Vec<&Ex> = ex.walk().into_iter().filter(|e| matches!(e, Ex::Ter(..))).collect();
        // The first conditional (outermost first) whose branches need not agree at its threshold.
        let step = found.into_iter().find_map(|t| {
            let Ex::Ter(th, c, el) = t else { return None };
            let agrees = match (c.as_ref(), Self::affine(th), Self::affine(el)) {
                (Ex::Cmp(l, _, r), Some(ta), Some(ea)) => match (Self::affine(l), Self::affine(r)) {
                    (Some(la), Some(ra)) => {
                        let (u, diff) = (la.add(&ra, -1.0), ta.add(&ea, -1.0));
                        Self::agrees_at_threshold(&diff, &u)
                    }
                    _ => false,
                },
                _ => false,
            };
            if agrees {
                return None;
            }
            self.ter_origin.get(&format!("{t:?}")).copied()
        });
        match step {
            Some(n) if crate::names::place(self.g, n) != d.labels.first().map_or(self.span, |l| l.span) => {
                d.with_secondary(crate::names::place(self.g, n), format!("the step: {}'s branches differ where its condition flips", crate::names::describe(self.g, n)))
            }
            _ => d,
        }
    }

    /// The interval of `ex`'s value from its parts, where that says more than the sum of the
    /// MLP's terms does: a conditional is one of its branches (`a if a > b else b` lies in
    /// the hull of a and b, where its lowering `b + relu(a - b)` gives b + [0, hi(a) - lo(b)];
    /// a positional choice `e + c·(t - e)` likewise). None where it has nothing to say.
    fn ex_iv(&self, ex: &Ex) -> Option<Iv> {
        let parts = self.ex_iv_parts(ex);
        match (parts, self.pl_range(ex)) {
            (Some(a), Some(b)) if a.lo.max(b.lo) <= a.hi.min(b.hi) => Some(Iv { lo: a.lo.max(b.lo), hi: a.hi.min(b.hi) }),
            (Some(a), _) => Some(a),
            (None, b) => b,
        }
    }

    fn ex_iv_parts(&self, ex: &Ex) -> Option<Iv> {
        Some(match ex {
            Ex::Leaf(s) => self.value_iv(*s),
            Ex::C(c) => Iv::pt(*c),
            Ex::Add(a, b) => self.ex_iv(a)?.add(self.ex_iv(b)?),
            Ex::Neg(a) => self.ex_iv(a)?.neg(),
            Ex::Mul(a, b) if format!("{a:?}") == format!("{b:?}") => self.ex_iv(a)?.sq(),
            Ex::Mul(a, b) => self.ex_iv(a)?.mul(self.ex_iv(b)?),
            Ex::Cmp(..) => Iv { lo: 0.0, hi: 1.0 },
            Ex::Ter(t, _, e) => self.ex_iv(t)?.hull(self.ex_iv(e)?),
            Ex::Div(..) | Ex::Pow(..) => return None,
        })
    }

    /// The exact range of `ex` over the box of its leaves' intervals, when `ex` is a continuous
    /// piecewise-linear function of at most two slots: sums, constant multiples, and
    /// conditionals `t if A op B else e` with t, e, A and B affine and t - e a multiple of A - B
    /// (max, min, relu: the branches agree where the condition flips). Such a function is linear
    /// on each cell that the lines A = B cut the box into, so its extremes lie on a vertex: a
    /// corner of the box, where a line meets the box's edge, or where two lines meet.
    /// (`partner + relu(x - partner)` is max(x, partner): this gives the hull of the two, where
    /// adding the parts' intervals gives partner + [0, hi(x) - lo(partner)].)
    fn pl_range(&self, ex: &Ex) -> Option<Iv> {
        fn walk(ex: &Ex, lines: &mut Vec<Aff>, leaves: &mut BTreeSet<SlotId>) -> Option<()> {
            if let Some(a) = RealLowerer::affine(ex) {
                leaves.extend(a.c.keys().copied());
                return Some(());
            }
            match ex {
                Ex::Add(a, b) => {
                    walk(a, lines, leaves)?;
                    walk(b, lines, leaves)
                }
                Ex::Neg(a) => walk(a, lines, leaves),
                Ex::Mul(a, b) | Ex::Div(a, b) if RealLowerer::affine(b).is_some_and(|c| c.is_const()) => walk(a, lines, leaves),
                Ex::Mul(a, b) if RealLowerer::affine(a).is_some_and(|c| c.is_const()) => walk(b, lines, leaves),
                Ex::Ter(t, c, e) => {
                    let Ex::Cmp(l, _, r) = c.as_ref() else { return None };
                    let (ta, ea, la, ra) = (RealLowerer::affine(t)?, RealLowerer::affine(e)?, RealLowerer::affine(l)?, RealLowerer::affine(r)?);
                    let u = la.add(&ra, -1.0);
                    let diff = ta.clone().add(&ea, -1.0);
                    if !RealLowerer::agrees_at_threshold(&diff, &u) {
                        return None;
                    }
                    for a in [&ta, &ea, &u] {
                        leaves.extend(a.c.keys().copied());
                    }
                    if !u.is_const() {
                        lines.push(u);
                    }
                    Some(())
                }
                _ => None,
            }
        }
        fn eval(ex: &Ex, at: &BTreeMap<SlotId, f64>) -> f64 {
            match ex {
                Ex::Leaf(s) => at[s],
                Ex::C(c) => *c,
                Ex::Add(a, b) => eval(a, at) + eval(b, at),
                Ex::Neg(a) => -eval(a, at),
                Ex::Mul(a, b) => eval(a, at) * eval(b, at),
                Ex::Div(a, b) => eval(a, at) / eval(b, at),
                Ex::Cmp(a, op, b) => cmp_holds(eval(a, at), *op, eval(b, at)) as i64 as f64,
                Ex::Ter(t, c, e) => {
                    if eval(c, at) != 0.0 {
                        eval(t, at)
                    } else {
                        eval(e, at)
                    }
                }
                Ex::Pow(a, b) => eval(a, at).powf(eval(b, at)),
            }
        }
        let (mut lines, mut leaves) = (vec![], BTreeSet::new());
        walk(ex, &mut lines, &mut leaves)?;
        // Every leaf the expression reads (a leaf whose coefficients cancel too).
        leaves.extend(ex.walk().into_iter().filter_map(|e| match e {
            Ex::Leaf(s) => Some(*s),
            _ => None,
        }));
        let leaves: Vec<SlotId> = leaves.into_iter().collect();
        if leaves.is_empty() || leaves.len() > 2 || lines.is_empty() {
            return None;
        }
        let ivs: Vec<Iv> = leaves.iter().map(|&s| self.value_iv(s)).collect();
        if ivs.iter().any(|iv| !(iv.lo.is_finite() && iv.hi.is_finite())) {
            return None;
        }
        // Points as coordinates along the leaves (a second coordinate 0 when there is one leaf).
        let coef = |a: &Aff, i: usize| leaves.get(i).and_then(|s| a.c.get(s)).copied().unwrap_or(0.0);
        let (x0, x1) = (ivs[0], ivs.get(1).copied().unwrap_or(Iv::pt(0.0)));
        let mut pts: Vec<(f64, f64)> = vec![(x0.lo, x1.lo), (x0.lo, x1.hi), (x0.hi, x1.lo), (x0.hi, x1.hi)];
        for (i, l) in lines.iter().enumerate() {
            let (a, b, k) = (coef(l, 0), coef(l, 1), l.k);
            // a·x + b·y + k = 0 on the box's edges.
            for y in [x1.lo, x1.hi] {
                if a != 0.0 {
                    pts.push((-(b * y + k) / a, y));
                }
            }
            for x in [x0.lo, x0.hi] {
                if b != 0.0 {
                    pts.push((x, -(a * x + k) / b));
                }
            }
            for m in &lines[i + 1..] {
                let (c, d, j) = (coef(m, 0), coef(m, 1), m.k);
                let det = a * d - b * c;
                if det != 0.0 {
                    pts.push(((b * j - d * k) / det, (c * k - a * j) / det));
                }
            }
        }
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for (x, y) in pts {
            if !(x.is_finite() && y.is_finite()) {
                return None;
            }
            let at: BTreeMap<SlotId, f64> = leaves.iter().zip([x.clamp(x0.lo, x0.hi), y.clamp(x1.lo, x1.hi)]).map(|(&s, v)| (s, v)).collect();
            let v = eval(ex, &at);
            lo = lo.min(v);
            hi = hi.max(v);
        }
        // The vertices are computed in f64: widen by their rounding (relative to the values).
        let slack = 1e-12 * (1.0 + lo.abs().max(hi.abs()));
        (lo.is_finite() && hi.is_finite()).then_some(Iv { lo: lo - slack, hi: hi + slack })
    }

    /// A bound on how far `ex` moves when each leaf moves by at most its certified error, where
    /// `ex` is built from sums, constant multiples and conditionals that pick one of two
    /// branches: a conditional `t if A op B else e` whose branches agree where it flips (t - e
    /// a multiple of A - B: max, min, relu), or whose condition is a position's 0/1. Such an
    /// `ex` is continuous and affine on each cell the conditions cut the inputs into, so between
    /// an input and its perturbed value it moves by at most the largest, over the cells, of
    /// Σ|slope of a leaf|·error of the leaf: `p + relu(x - p)` (max) moves by max(e_x, e_p),
    /// where adding its parts' moves gives e_x + 2e_p. Every choice of branches is tried (a
    /// superset of the cells; at most 2^10). None otherwise.
    fn carried_err(&self, ex: &Ex) -> Option<Err2> {
        /// The affine form of `ex` on the cell where the i-th conditional (in walking order)
        /// takes its `then` branch exactly when `pick[i]`; counts the conditionals in `idx`.
        fn cell(me: &RealLowerer, ex: &Ex, pick: &[bool], idx: &mut usize) -> Option<Aff> {
            if let Some(a) = RealLowerer::affine(ex) {
                return Some(a);
            }
            let konst = |e: &Ex| RealLowerer::affine(e).filter(Aff::is_const).map(|c| c.k);
            Some(match ex {
                Ex::Add(a, b) => cell(me, a, pick, idx)?.add(&cell(me, b, pick, idx)?, 1.0),
                Ex::Neg(a) => cell(me, a, pick, idx)?.scale(-1.0),
                Ex::Mul(a, b) if konst(b).is_some() => cell(me, a, pick, idx)?.scale(konst(b)?),
                Ex::Mul(a, b) if konst(a).is_some() => cell(me, b, pick, idx)?.scale(konst(a)?),
                Ex::Div(a, b) if konst(b).is_some_and(|c| c != 0.0) => cell(me, a, pick, idx)?.scale(1.0 / konst(b)?),
                Ex::Ter(t, c, e) => {
                    let continuous = match c.as_ref() {
                        Ex::Cmp(l, _, r) => {
                            let (ta, ea, la, ra) = (RealLowerer::affine(t)?, RealLowerer::affine(e)?, RealLowerer::affine(l)?, RealLowerer::affine(r)?);
                            let u = la.add(&ra, -1.0);
                            let diff = ta.add(&ea, -1.0);
                            RealLowerer::agrees_at_threshold(&diff, &u)
                        }
                        // A position's own 0/1, stored exactly: the same for both inputs.
                        Ex::Leaf(s) => me.pos_vals.get(s).is_some_and(|v| v.iter().all(|&x| x == 0.0 || x == 1.0)) && me.res[s].err == Err2::default(),
                        _ => false,
                    };
                    if !continuous {
                        return None;
                    }
                    let i = *idx;
                    *idx += 1;
                    let (ct, ce) = (cell(me, t, pick, idx)?, cell(me, e, pick, idx)?);
                    if pick.get(i).copied().unwrap_or(false) {
                        ct
                    } else {
                        ce
                    }
                }
                _ => return None,
            })
        }
        let mut k = 0;
        cell(self, ex, &[], &mut k)?;
        if k > 10 {
            return None;
        }
        let mut worst = Err2::default();
        for bits in 0..(1u32 << k) {
            let pick: Vec<bool> = (0..k).map(|i| bits >> i & 1 == 1).collect();
            let a = cell(self, ex, &pick, &mut 0)?;
            let e = a.c.iter().map(|(s, w)| w.abs() * self.res[s].err).sum::<Err2>();
            worst = Err2 { f32: worst.f32.max(e.f32), f64: worst.f64.max(e.f64) };
        }
        Some(worst)
    }

    /// Narrows the interval of slot `s` (just written for `ex`) to what `ex`'s parts allow,
    /// widened by the slot's certified error (the interval bounds the program's value; the
    /// network's is within the error of it).
    fn tighten(&mut self, s: SlotId, ex: &Ex) {
        if self.groups.contains_key(&s) || !Self::has_ter(ex) {
            return;
        }
        // The sharper bound reads `ex` as written, without the fold bounds of its affine parts
        // (helper rv12: a softmax numerator `num + 2^53 + 1 - 2^53` was certified to 8e-5, 1.07
        // off): such an expression keeps the bound its blocks charged.
        if ex.walk().iter().any(|e| Self::affine(e).is_some_and(|a| !a.exact())) {
            return;
        }
        // The error first: the MLP's own part, plus the inputs' errors as `ex` carries them.
        // (Read through the slots the MLP reads: a subexpression it materialised first, with
        // that slot's own rounding, is one leaf here too.)
        let read = self.canon(ex.clone());
        let sharp = self.carried.get(&s).copied().zip(self.carried_err(&read));
        let tight = self.ex_iv(ex);
        let Some(r) = self.res.get_mut(&s) else { return };
        if let Some((charged, sharp)) = sharp {
            let own = r.err - charged;
            let better = own + sharp;
            if own.f32 >= 0.0 && own.f64 >= 0.0 && better.f32 <= r.err.f32 && better.f64 <= r.err.f64 {
                r.err = better;
            }
        }
        if let Some(tight) = tight {
            let e = r.err.max();
            let (lo, hi) = (r.iv.lo.max(tight.lo - e), r.iv.hi.min(tight.hi + e));
            if lo <= hi {
                r.iv = Iv { lo, hi };
            }
        }
        // The report shows what the slot now holds.
        let (r, label) = (*r, &self.slots[s.0].label);
        if let Some(b) = self.report.iter_mut().rev().find(|b| &b.label == label) {
            (b.lo, b.hi, b.err, b.err_f64) = (r.iv.lo, r.iv.hi, r.err.f32, r.err.f64);
        }
    }

    fn has_ter(ex: &Ex) -> bool {
        ex.walk().iter().any(|e| matches!(e, Ex::Ter(..)))
    }

    /// `ex = aff + Σ w·term`, materialising operands that must be affine.
    fn decompose(&mut self, ex: &Ex, label: &str) -> Result<(Aff, Vec<(f64, Term)>), Diagnostic> {
        if let Some(a) = Self::affine(ex) {
            return Ok((a, vec![]));
        }
        match ex {
            Ex::Add(a, b) => {
                let (x, mut tx) = self.decompose(a, label)?;
                let (y, ty) = self.decompose(b, label)?;
                tx.extend(ty);
                return Ok((x.add(&y, 1.0), tx));
            }
            Ex::Neg(a) => {
                let (x, tx) = self.decompose(a, label)?;
                return Ok((x.scale(-1.0), tx.into_iter().map(|(w, t)| (-w, t)).collect()));
            }
            Ex::Mul(a, b) => {
                for (p, o) in [(a, b), (b, a)] {
                    // (A constant that folded inexactly is a factor of a product, whose error
                    // charges its bound; helper rv12.)
                    if let Some(c) = Self::affine(p).filter(|c| c.is_const() && c.exact()) {
                        let (x, tx) = self.decompose(o, label)?;
                        return Ok((x.scale(c.k), tx.into_iter().map(|(w, t)| (w * c.k, t)).collect()));
                    }
                }
                let x = self.affine_or_resident(a, &format!("{label}.lhs"))?;
                let y = self.affine_or_resident(b, &format!("{label}.rhs"))?;
                return Ok((Aff::default(), vec![(1.0, Term::Prod(x, y))]));
            }
            Ex::Div(a, b) => {
                if let Some(c) = Self::affine(b).filter(|c| c.is_const() && c.exact() && c.k != 0.0) {
                    let (x, tx) = self.decompose(a, label)?;
                    // (The terms' weights w/c round once each, relative to themselves: the
                    // weights' f32 storage already charges more.)
                    return Ok((x.scale_inexact(1.0 / c.k, recip_err(c.k)), tx.into_iter().map(|(w, t)| (w / c.k, t)).collect()));
                }
                if let Some((u, f)) = Self::unary(ex) {
                    return Ok((Aff::default(), vec![(1.0, Term::Unary(u, f))]));
                }
                // a / b = a · (1/b), the reciprocal one MLP earlier.
                let x = self.affine_or_resident(a, &format!("{label}.num"))?;
                // A denominator that is neither affine nor along one direction (a product, say)
                // gets its slot first: the reciprocal is then a unary function of it (not this
                // same case again, which recursed without end).
                let recip = Ex::Div(bx(Ex::C(1.0)), b.clone());
                let den = if Self::affine(b).is_some() || Self::unary(&recip).is_some() { b.clone() } else { bx(Ex::Leaf(self.resident(b, &format!("{label}.den"))?)) };
                // (Gated: its units write partial sums the product adds, [`Group`], when there are
                // many. ReLU products square their inputs, so there one slot costs less.)
                let recip = Ex::Div(bx(Ex::C(1.0)), den);
                let r = if self.opts.mlp == MlpMode::Gated {
                    self.blocked_resident(&recip, &format!("{label}.recip"))
                } else {
                    self.resident(&recip, &format!("{label}.recip")).map(Aff::leaf)
                };
                // (Helper d10: an unapproximable reciprocal was shown only where the quotient
                // is read, two lines below the division.)
                let r = r.map_err(|d| match self.div_origin.get(&format!("{b:?}")) {
                    Some(&n) if d.labels.len() == 1 && crate::names::place(self.g, n) != d.labels[0].span => {
                        d.with_secondary(crate::names::place(self.g, n), format!("the division: {}", crate::names::describe(self.g, n)))
                    }
                    _ => d,
                })?;
                return Ok((Aff::default(), vec![(1.0, Term::Prod(x, r))]));
            }
            _ => {}
        }
        // A condition that is a constant whose constants folded inexactly (`x + 0.1 + 0.2 > x +
        // 0.3`): decided by the stored constant, the branch it picks, plus, where the exact one
        // may decide the other way, the distance to the other branch.
        if let Ex::Ter(t, c, e) = ex
            && let Ex::Cmp(l, op, r) = c.as_ref()
            && let (Some(la), Some(ra), Some(ta), Some(ea)) = (Self::affine(l), Self::affine(r), Self::affine(t), Self::affine(e))
        {
            let u = la.add(&ra, -1.0);
            if u.is_const() && u.dk > 0.0 {
                let holds = cmp_holds(u.k, *op, 0.0);
                let apart = ta.clone().add(&ea, -1.0);
                let (mut pick, _) = if holds { (ta, ea) } else { (ea, ta) };
                if u.k.abs() <= u.dk || matches!(op, BinOp::Eq) {
                    pick.dk += self.aff_iv(&apart).mag();
                }
                return Ok((pick, vec![]));
            }
        }
        if let Some((u, f)) = Self::unary(ex) {
            return Ok((Aff::default(), vec![(1.0, Term::Unary(u, f))]));
        }
        if let Some(t) = self.unary_of_masked(ex, label)? {
            return Ok((Aff::default(), vec![(1.0, t)]));
        }
        if let Some((ea, term)) = Self::continuous_ter(ex) {
            return Ok((ea, vec![(1.0, term)]));
        }
        if let Ex::Ter(t, c, e) = ex {
            // A positional (or otherwise materialised) condition: e + c·(t - e).
            if let Some(ca) = Self::affine(c) {
                let ta = self.affine_or_resident(t, &format!("{label}.then"))?;
                let ea = self.affine_or_resident(e, &format!("{label}.else"))?;
                return Ok((ea.clone(), vec![(1.0, Term::Prod(ca, ta.add(&ea, -1.0)))]));
            }
        }
        // Polynomial arguments of nonlinear operations get slots of their own first.
        let prepared = self.prepare(ex, label)?;
        if let Some((u, f)) = Self::unary(&prepared) {
            return Ok((Aff::default(), vec![(1.0, Term::Unary(u, f))]));
        }
        // Materialise the non-affine operands, then it must be a function of one affine form.
        let simplified = self.materialise_children(&prepared, label)?;
        if let Some((u, f)) = Self::unary(&simplified) {
            return Ok((Aff::default(), vec![(1.0, Term::Unary(u, f))]));
        }
        // A max of non-affine sides (`x*p if x*p > p else p`), now of their slots.
        if let Some((ea, term)) = Self::continuous_ter(&simplified) {
            return Ok((ea, vec![(1.0, term)]));
        }
        // A conditional of materialised sides whose branches differ where it flips: a step.
        if let Ex::Ter(t, c, e) = &simplified
            && let (Some(ta), Some(ea), Ex::Cmp(l, _, r)) = (Self::affine(t), Self::affine(e), c.as_ref())
            && let (Some(la), Some(ra)) = (Self::affine(l), Self::affine(r))
            && !la.clone().add(&ra, -1.0).is_const()
            && ta != ea
        {
            return Err(self.locate_step(
                Diagnostic::error("compile::real", format!("`{label}` jumps where its condition flips (a step cannot be computed by a continuous MLP)"), self.span)
                    .with_note("a conditional must agree at its threshold (both branches equal there) to be continuous"),
                ex,
            ));
        }
        Err(Diagnostic::error("compile::real", format!("`{label}` combines several real values in a way no single MLP computes"), self.span)
            .with_note("supported: sums, products, quotients, powers with a constant base or exponent, and `a if x op y else b` whose branches differ by a multiple of x - y"))
    }

    /// `F(u)` for `ex` once the conditionals on a positional (affine) condition that are
    /// summands of its sums get slots of their own (one MLP each, `e + c·(t - e)`): e.g. the
    /// exp of `(s_h - m if inside else 0) + s_c`, an exp of one affine form of that slot and
    /// s_c's partial sums, where otherwise the whole sum became one slot (its affine part added
    /// again through identity units) and the certificate could not see the difference
    /// ([`Self::diff_of`]). None, with nothing materialised, when that does not make `ex` unary.
    fn unary_of_masked(&mut self, ex: &Ex, label: &str) -> Result<Option<Term>, Diagnostic> {
        // The conditionals on an affine condition that are summands of a sum whose other
        // summands are affine, once each (by their commuted form, as `substitute` matches).
        fn masked(ex: &Ex, out: &mut Vec<Ex>) {
            fn summands<'e>(e: &'e Ex, out: &mut Vec<&'e Ex>) {
                match e {
                    Ex::Add(a, b) => {
                        summands(a, out);
                        summands(b, out);
                    }
                    Ex::Neg(a) => summands(a, out),
                    other => out.push(other),
                }
            }
            let is_masked = |e: &Ex| matches!(e, Ex::Ter(_, c, _) if RealLowerer::affine(c).is_some());
            if matches!(ex, Ex::Add(..) | Ex::Neg(..)) && RealLowerer::affine(ex).is_none() {
                let mut parts = vec![];
                summands(ex, &mut parts);
                if parts.iter().all(|e| RealLowerer::affine(e).is_some() || is_masked(e)) {
                    for e in parts.into_iter().filter(|e| is_masked(e)) {
                        let key = RealLowerer::commuted_key(e);
                        if !out.iter().any(|x| RealLowerer::commuted_key(x) == key) {
                            out.push(e.clone());
                        }
                    }
                    return;
                }
            }
            for c in ex.children() {
                masked(c, out);
            }
        }
        if ex.size(4096) >= 4096 {
            return Ok(None);
        }
        let mut subs = vec![];
        masked(ex, &mut subs);
        // Each as a placeholder leaf first: whether that makes `ex` unary, before anything is
        // materialised.
        let placeholder = |i: usize| SlotId(usize::MAX - i);
        let lifted = subs.iter().enumerate().fold(ex.clone(), |e, (i, m)| Self::substitute(&e, &Self::commuted_key(m), &Ex::Leaf(placeholder(i))));
        if subs.is_empty() || Self::unary(&lifted).is_none() {
            return Ok(None);
        }
        let mut placed = lifted;
        for (i, e) in subs.iter().enumerate() {
            let s = self.resident(e, &format!("{label}.masked{i}"))?;
            placed = Self::substitute(&placed, &Self::commuted_key(&Ex::Leaf(placeholder(i))), &Ex::Leaf(s));
        }
        Ok(Self::unary(&placed).map(|(u, f)| Term::Unary(u, f)))
    }

    /// Whether `t if A op B else e`, with `diff` = t - e and `u` = A - B, is continuous: its
    /// branches are equal, or differ by a multiple of A - B (max, min, relu), so they agree
    /// where the condition flips.
    fn agrees_at_threshold(diff: &Aff, u: &Aff) -> bool {
        diff.is_const() && diff.k == 0.0 || !u.is_const() && diff.in_direction(u).is_some_and(|(_, k)| k.abs() <= 1e-12 * (1.0 + diff.k.abs()))
    }

    /// The number of arithmetic operations in `ex` (each rounds once in the interpreter).
    fn ops(ex: &Ex) -> usize {
        ex.walk().iter().filter(|e| matches!(e, Ex::Add(..) | Ex::Mul(..) | Ex::Div(..) | Ex::Pow(..) | Ex::Cmp(..))).count()
    }

    /// `ex` printed with the operands of each `+` and `*` in a fixed order: two expressions with
    /// the same key compute the same float in any IEEE arithmetic (`x + 1` and `1 + x`; both
    /// operations are commutative, exactly), so comparing them is no tie by rounding (helper z3:
    /// `max(x + 1, 1 + x)` was refused).
    fn commuted_key(ex: &Ex) -> String {
        match ex {
            Ex::Add(a, b) | Ex::Mul(a, b) => {
                let (mut p, mut q) = (Self::commuted_key(a), Self::commuted_key(b));
                if p > q {
                    std::mem::swap(&mut p, &mut q);
                }
                format!("{}({p},{q})", if matches!(ex, Ex::Add(..)) { "add" } else { "mul" })
            }
            Ex::Neg(a) => format!("neg({})", Self::commuted_key(a)),
            Ex::Div(a, b) => format!("div({},{})", Self::commuted_key(a), Self::commuted_key(b)),
            Ex::Pow(a, b) => format!("pow({},{})", Self::commuted_key(a), Self::commuted_key(b)),
            Ex::Cmp(a, op, b) => format!("cmp{op:?}({},{})", Self::commuted_key(a), Self::commuted_key(b)),
            Ex::Ter(a, b, c) => format!("ter({},{},{})", Self::commuted_key(a), Self::commuted_key(b), Self::commuted_key(c)),
            Ex::Leaf(s) => format!("s{}", s.0),
            Ex::C(c) => format!("c{}", c.to_bits()),
        }
    }

    /// `t if A op B else e` with t, e, A, B affine and t - e a multiple of A - B (max, min, relu,
    /// leaky relu): e + G(A - B), as the affine part and one unary term.
    fn continuous_ter(ex: &Ex) -> Option<(Aff, Term)> {
        let Ex::Ter(t, c, e) = ex else { return None };
        let (Some(ta), Some(ea), Ex::Cmp(l, op, r)) = (Self::affine(t), Self::affine(e), c.as_ref()) else { return None };
        let (la, ra) = (Self::affine(l)?, Self::affine(r)?);
        let u = la.add(&ra, -1.0);
        let diff = ta.clone().add(&ea, -1.0);
        if u.is_const() {
            return None;
        }
        let (lam, kap) = diff.in_direction(&u).or_else(|| diff.is_const().then_some((0.0, diff.k)))?;
        let f = F::Ter(Box::new(F::Lin(lam, kap)), Box::new(F::Cmp(Box::new(F::Lin(1.0, 0.0)), *op, Box::new(F::C(0.0)))), Box::new(F::C(0.0)));
        // The branches' fold bounds: the exact e + [cond]·(t - e) is within |δe| + |δt - δe| of
        // the stored one, so e carries 2·δe + δt (a jump hidden by a fold is charged whole).
        let mut ea = ea;
        for s in ta.dc.keys().chain(ea.dc.clone().keys()).copied().collect::<std::collections::BTreeSet<_>>() {
            let d = 2.0 * ea.dc.get(&s).copied().unwrap_or(0.0) + ta.dc.get(&s).copied().unwrap_or(0.0);
            ea.dc.insert(s, d);
        }
        ea.dk = 2.0 * ea.dk + ta.dk;
        Some((ea, Term::Unary(u, f)))
    }

    fn is_poly(ex: &Ex) -> bool {
        match ex {
            Ex::Leaf(_) | Ex::C(_) => true,
            Ex::Add(a, b) | Ex::Mul(a, b) => Self::is_poly(a) && Self::is_poly(b),
            Ex::Neg(a) => Self::is_poly(a),
            _ => false,
        }
    }

    /// Gives every non-affine polynomial argument of a nonlinear operation a slot.
    fn prepare(&mut self, ex: &Ex, label: &str) -> Result<Ex, Diagnostic> {
        let arg = |me: &mut Self, e: &Ex| -> Result<Box<Ex>, Diagnostic> {
            let p = me.prepare(e, label)?;
            Ok(bx(if Self::affine(&p).is_none() && Self::is_poly(&p) { Ex::Leaf(me.resident(&p, &format!("{label}.arg"))?) } else { p }))
        };
        Ok(match ex {
            Ex::Add(a, b) => Ex::Add(bx(self.prepare(a, label)?), bx(self.prepare(b, label)?)),
            Ex::Neg(a) => Ex::Neg(bx(self.prepare(a, label)?)),
            Ex::Mul(a, b) => Ex::Mul(bx(self.prepare(a, label)?), bx(self.prepare(b, label)?)),
            Ex::Div(a, b) => Ex::Div(arg(self, a)?, arg(self, b)?),
            Ex::Pow(a, b) => Ex::Pow(arg(self, a)?, arg(self, b)?),
            Ex::Cmp(a, op, b) => Ex::Cmp(arg(self, a)?, *op, arg(self, b)?),
            Ex::Ter(a, b, c) => {
                let cond = arg(self, b)?;
                let (a, c) = match cond.as_ref() {
                    Ex::Cmp(l, _, r) => Self::share_condition(a, b, c, (l, r)),
                    _ => (a.as_ref().clone(), c.as_ref().clone()),
                };
                Ex::Ter(arg(self, &a)?, cond, arg(self, &c)?)
            }
            other => other.clone(),
        })
    }

    /// `ex` with every subexpression that computes `from` (by [`Self::commuted_key`]) replaced
    /// by `to`.
    fn substitute(ex: &Ex, from: &str, to: &Ex) -> Ex {
        if Self::commuted_key(ex) == from {
            return to.clone();
        }
        let s = |e: &Ex| bx(Self::substitute(e, from, to));
        match ex {
            Ex::Add(a, b) => Ex::Add(s(a), s(b)),
            Ex::Mul(a, b) => Ex::Mul(s(a), s(b)),
            Ex::Div(a, b) => Ex::Div(s(a), s(b)),
            Ex::Pow(a, b) => Ex::Pow(s(a), s(b)),
            Ex::Cmp(a, op, b) => Ex::Cmp(s(a), *op, s(b)),
            Ex::Ter(a, b, c) => Ex::Ter(s(a), s(b), s(c)),
            Ex::Neg(a) => Ex::Neg(s(a)),
            Ex::Leaf(_) | Ex::C(_) => ex.clone(),
        }
    }

    /// The branches of `t if l op r else e` with every non-affine side of the condition they
    /// contain replaced by what the condition now reads (`sides`: l and r as they are read):
    /// `m * 2 if m > 0 else m` of an inline max `m` is then `2·M if M > 0 else M` of its slot M,
    /// continuous (helper h8: refused as jumping, since `m * 2` got a slot of its own and its
    /// branches no longer differed by a multiple of M).
    fn share_condition(t: &Ex, cond: &Ex, e: &Ex, sides: (&Ex, &Ex)) -> (Ex, Ex) {
        let (mut t, mut e) = (t.clone(), e.clone());
        if let Ex::Cmp(l, _, r) = cond {
            for (orig, now) in [(l.as_ref(), sides.0), (r.as_ref(), sides.1)] {
                if Self::affine(orig).is_none() && !matches!(orig, Ex::Leaf(_)) {
                    let key = Self::commuted_key(orig);
                    t = Self::substitute(&t, &key, now);
                    e = Self::substitute(&e, &key, now);
                }
            }
        }
        (t, e)
    }

    fn materialise_children(&mut self, ex: &Ex, label: &str) -> Result<Ex, Diagnostic> {
        let m = |e: &Ex, me: &mut Self| -> Result<Box<Ex>, Diagnostic> {
            Ok(bx(match Self::affine(e) {
                Some(_) => e.clone(),
                None => Ex::Leaf(me.resident(e, &format!("{label}.arg"))?),
            }))
        };
        Ok(match ex {
            Ex::Pow(a, b) => Ex::Pow(m(a, self)?, m(b, self)?),
            Ex::Cmp(a, op, b) => Ex::Cmp(m(a, self)?, *op, m(b, self)?),
            // A condition stays a comparison, of materialised sides: materialised itself it is a
            // 0/1 step (`relu(m)` of an inline max `m` was refused as jumping at 0; helper v).
            Ex::Ter(a, b, c) => match b.as_ref() {
                Ex::Cmp(l, op, r) => {
                    let (ls, rs) = (m(l, self)?, m(r, self)?);
                    let (a, c) = Self::share_condition(a, b, c, (&ls, &rs));
                    Ex::Ter(m(&a, self)?, bx(Ex::Cmp(ls, *op, rs)), m(&c, self)?)
                }
                _ => Ex::Ter(m(a, self)?, m(b, self)?, m(c, self)?),
            },
            Ex::Div(a, b) => Ex::Div(m(a, self)?, m(b, self)?),
            Ex::Mul(a, b) => Ex::Mul(m(a, self)?, m(b, self)?),
            other => other.clone(),
        })
    }

    /// `ex` as `F(u)` for one affine form `u`, when every affine piece of it lies along `u`.
    fn unary(ex: &Ex) -> Option<(Aff, F)> {
        fn pieces(ex: &Ex, out: &mut Vec<Aff>) {
            if let Some(a) = RealLowerer::affine(ex) {
                out.push(a);
                return;
            }
            match ex {
                Ex::Add(a, b) | Ex::Mul(a, b) | Ex::Div(a, b) | Ex::Pow(a, b) | Ex::Cmp(a, _, b) => {
                    pieces(a, out);
                    pieces(b, out);
                }
                Ex::Neg(a) => pieces(a, out),
                Ex::Ter(a, b, c) => {
                    pieces(a, out);
                    pieces(b, out);
                    pieces(c, out);
                }
                Ex::Leaf(_) | Ex::C(_) => {}
            }
        }
        let mut ps = vec![];
        pieces(ex, &mut ps);
        let u = ps.iter().find(|a| !a.is_const())?.clone();
        // F is built from the stored coefficients, each piece as a multiple of u as stored: where
        // a piece's constants (or u's, when other pieces are read through it) folded inexactly,
        // the exact pieces are not those multiples, and F would drop the fold bound (helper f11:
        // `x*2 + 1 + 2^53 - 2^53 if x > 0 else x` became a continuous F, a step of 1 certified
        // to 2e-6). Such an expression is lowered piece by piece instead, where the bounds are
        // charged. A function of u alone keeps u's bound as its argument's error.
        let slack = |p: &Aff| !p.exact();
        let same = |p: &Aff| *p == u && p.dc == u.dc && p.dk == u.dk;
        if ps.iter().any(|p| if p.is_const() { slack(p) } else { !same(p) && (slack(p) || slack(&u)) }) {
            return None;
        }
        fn build(ex: &Ex, u: &Aff) -> Option<F> {
            if let Some(a) = RealLowerer::affine(ex) {
                return Some(if a.is_const() {
                    F::C(a.k)
                } else {
                    let (l, k) = a.in_direction(u)?;
                    F::Lin(l, k)
                });
            }
            let b = |e: &Ex| build(e, u).map(Box::new);
            Some(match ex {
                Ex::Add(x, y) => F::Add(b(x)?, b(y)?),
                Ex::Mul(x, y) => F::Mul(b(x)?, b(y)?),
                Ex::Div(x, y) => F::Div(b(x)?, b(y)?),
                Ex::Neg(x) => F::Neg(b(x)?),
                Ex::Pow(x, y) => {
                    let (bx_, by) = (build(x, u)?, build(y, u)?);
                    match (bx_, by) {
                        (F::C(base), e) if base > 0.0 => F::Exp(Box::new(F::Mul(Box::new(F::C(base.ln())), Box::new(e)))),
                        // By squaring (x^4 = x²·x², x^3 = x²·x): the squares' intervals are
                        // never negative ([`F::jet`]).
                        (x, F::C(p)) if p.fract() == 0.0 && (0.0..=8.0).contains(&p) => {
                            fn power(x: &F, n: u32) -> F {
                                match n {
                                    0 => F::C(1.0),
                                    1 => x.clone(),
                                    _ if n.is_multiple_of(2) => {
                                        let h = power(x, n / 2);
                                        F::Mul(Box::new(h.clone()), Box::new(h))
                                    }
                                    _ => F::Mul(Box::new(power(x, n - 1)), Box::new(x.clone())),
                                }
                            }
                            power(&x, p as u32)
                        }
                        (x, F::C(p)) => F::Pow(Box::new(x), p),
                        _ => return None,
                    }
                }
                Ex::Cmp(x, op, y) => F::Cmp(b(x)?, *op, b(y)?),
                // Only a comparison decides a conditional of `u` here: a condition that is a
                // value of its own (a positional 0/1) is not a continuous function's threshold
                // (`x * 0 if indices % 2 == 0 else 1` read it as "nonzero on all of [0, 1]" and
                // compiled to 0); [`RealLowerer::decompose`] writes it as e + c·(t - e).
                Ex::Ter(t, c, e) if matches!(c.as_ref(), Ex::Cmp(..)) => F::Ter(b(t)?, b(c)?, b(e)?),
                Ex::Ter(..) => return None,
                // Leaves and constants are caught by the affine case before this match.
                Ex::Leaf(_) | Ex::C(_) => return None,
            })
        }
        let f = build(ex, &u)?;
        // A comparison of non-affine sides (`relu(x*x - 0.5)`) is not one function's
        // threshold here: its sides get slots first ([`Self::prepare`]), then it is a function of
        // them (helper h8: refused as "a comparison between non-affine functions").
        f.comparisons_affine().then_some((u, f))
    }

    // ---- MLPs ----------------------------------------------------------------------------

    fn aff_exact(a: &Aff) -> bool {
        f32_exact(a.k) && a.c.values().all(|&w| f32_exact(w))
    }

    /// Whether the dot product `a + bias` adds exact terms: inputs with weights ±1 and an f32 bias.
    fn exact_terms(a: &Aff, bias: f64) -> bool {
        a.c.values().all(|w| w.abs() == 1.0) && f32_exact(bias)
    }

    /// Rounding, relative to `aff_mag(a) + |bias|`, of computing `Σ c·x + bias` (a unit's
    /// pre-activation, or a head's value projection with the constant as a term on the
    /// constant dim): when every coefficient is ±1 and the bias an f32, every term is exact
    /// and only the additions round ([`Err2::gamma_sum`]); otherwise products and stored
    /// weights round too.
    fn dot_gamma(a: &Aff, bias: f64) -> Err2 {
        if Self::exact_terms(a, bias) {
            Err2::gamma_sum(a.c.len() + (bias != 0.0) as usize)
        } else {
            Err2::gamma(a.c.len() + 2, Self::aff_exact(a) && f32_exact(bias))
        }
    }

    /// The grid and magnitude of slot `s` when its value is exact on a grid (`exact_grid`, or
    /// the input at token position `key`, or at every position when `key` is None).
    fn slot_grid(&self, s: SlotId, key: Option<usize>) -> Option<(i32, f64)> {
        if Some(s) == self.input {
            return match key {
                Some(k) => Some((self.input_grid[k]?, self.input_iv[k].mag())),
                None => Some((self.input_grid.iter().copied().collect::<Option<Vec<i32>>>()?.into_iter().min()?, self.res[&s].iv.mag())),
            };
        }
        Some((*self.exact_grid.get(&s)?, self.res.get(&s)?.iv.mag()))
    }

    /// When the dot product `a + bias` adds terms that are all exact multiples of 2^g (slots
    /// exact on grids, weights ±2^j, the bias on the grid) whose magnitudes sum to at most
    /// 2^(g+24): then every partial sum, in any order, is an f32 number, so the dot product is
    /// exact. Returns g and that sum (`i32::MAX` when every term is 0). `key`: the token
    /// position the input slot is read at (a head's value projection), None for any.
    fn grid_dot(&self, a: &Aff, bias: f64, key: Option<usize>) -> Option<(i32, f64)> {
        if a.dk != 0.0 || !a.dc.is_empty() || !f32_exact(bias) {
            return None;
        }
        let (mut g, mut mag) = (grid_exp(bias)?, bias.abs());
        for (&s, &c) in &a.c {
            let j = pow2_exp(c)?;
            let (gs, m) = self.slot_grid(s, key)?;
            if gs != i32::MAX {
                g = g.min(gs + j);
            }
            mag += c.abs() * m;
        }
        grid_fits(g, mag).then_some((g, mag))
    }

    /// A gated unit pair's product `w·a·b` when both pre-activations are exact on grids
    /// ([`Self::grid_dot`]), w = ±2^j and the product fits 24 bits on the grid g_a + g_b + j:
    /// then it is exact. Returns its grid and magnitude bound.
    fn grid_prod(&self, a: &Aff, b: &Aff, w: f64) -> Option<(i32, f64)> {
        if self.opts.mlp != MlpMode::Gated {
            return None;
        }
        let ((ga, ma), (gb, mb), j) = (self.grid_dot(a, a.k, None)?, self.grid_dot(b, b.k, None)?, pow2_exp(w)?);
        if ga == i32::MAX || gb == i32::MAX {
            return Some((i32::MAX, 0.0));
        }
        // (The unit's product relu(a)·b before its output weight must be an f32 number too.)
        let (g, mag) = (ga + gb + j, ma * mb * w.abs());
        (grid_fits(g, mag) && grid_fits(ga + gb, ma * mb)).then_some((g, mag))
    }

    /// When an MLP `aff + Σ w·term` is a sum of exact products on grids ([`Self::grid_prod`])
    /// and a constant on the grid, within 24 bits together: its output is exact. Its grid and
    /// the magnitudes' sum.
    fn grid_terms(&self, aff: &Aff, terms: &[(f64, Term)]) -> Option<(i32, f64)> {
        if !aff.is_const() || aff.dk != 0.0 || !f32_exact(aff.k) {
            return None;
        }
        let (mut g, mut mag) = (grid_exp(aff.k)?, aff.k.abs());
        for (w, t) in terms {
            let Term::Prod(a, b) = t else { return None };
            let (gt, mt) = self.grid_prod(a, b, *w)?;
            g = g.min(gt);
            mag += mt;
        }
        grid_fits(g, mag).then_some((g, mag))
    }

    /// Rounding of the dot product `a + bias` (the bias one more term), given `base`, the
    /// magnitude [`Self::dot_gamma`] is relative to: the smaller of that and, when every term
    /// is exact (weights ±1, an f32 bias), [`chain_err`] of the terms' bounds; 0 when the terms
    /// are exact on a grid that holds their sum ([`Self::grid_dot`]).
    fn dot_err(&self, a: &Aff, bias: f64, base: Err2) -> Err2 {
        if self.grid_dot(a, bias, None).is_some() {
            return Err2::default();
        }
        let g = Self::dot_gamma(a, bias) * base;
        if !Self::exact_terms(a, bias) {
            return g;
        }
        let mut mags: Vec<Err2> = a.c.keys().map(|s| Err2::both(self.res[s].iv.mag()) + self.res[s].err).collect();
        mags.push(Err2::both(bias.abs()));
        min2(g, chain_err2(&mags))
    }

    /// Rounding of a head's mean of at most `widest` kept keys' values, relative to V = max|value|.
    /// One key: exact (weight 1/1). c ≥ 2 keys: the weights are `w = fl(1/c)`, the terms
    /// `t_k = fl(w·v_k)` with `|t_k| ≤ (1+u)²V/c`, and any summation tree of them rounds by at most
    /// `u·Σ_nodes |node| ≤ u(1+u)^c·max|t|·Σ_leaves depth`, `Σ depth ≤ (c-1)(c+2)/2` (a chain is the
    /// worst tree): about `u·V·(c+1)/2`, plus `2u·V` for w and the products, so
    /// `γ_{⌈(c+1)/2⌉+3}·V` (one more u·V covers the (1+u)^{c+2} factors). Half of `γ_{c+2}`, which
    /// charges every addition at the full |sum|. (Keys not kept add exact zeros.) Relative to
    /// max|v| only: against the mean of |v| (`relative::through_mean`) the full γ stays.
    fn mean_gamma(widest: usize) -> Err2 {
        if widest <= 1 {
            return Err2::default();
        }
        let k = (widest + 1).div_ceil(2) + 3;
        Err2 { f32: gamma_u(k, U32), f64: gamma_u(k, U64) }
    }

    /// Rounding of a gated unit's product `relu(p)·g` (one rounding) times its output weight
    /// `w`, relative to |p·g·w|: exact output weights ±2^k add nothing.
    fn prod_gamma(w: f64) -> Err2 {
        if pow2_exp(w).is_some() {
            Err2::gamma_sum(2)
        } else {
            Err2::gamma(2, f32_exact(w))
        }
    }

    /// The interpolant of `f` on [lo, hi]: at the requested error, or (auto) at the error among
    /// 1e-2, 2.5e-3, ... chosen as below.
    fn choose_pl(&self, f: &F, lo: f64, hi: f64) -> Result<Pl, String> {
        if let Some(e) = self.opts.pl_error {
            return build_pl(f, lo, hi, e);
        }
        // exp and reciprocals (the softmax's): a relative target `max(ρ·|f|, ρ/1024)`, the ρ
        // that minimises 8ρ + γ_{units} (interpolation against the f32 rounding of summing the
        // units, every one of which can be active: `relative::unary`; the interpolation error is
        // weighted 8x because it is what a run actually sees, the rounding a worst case). Far fewer knots than an
        // absolute target fine enough near f's largest values, and relative error everywhere
        // but the far tail (which the relative bounds charge absolutely, times the row length).
        if relative::exp_rate(f).is_some() || relative::reciprocal_above(f).is_some() {
            let mut cands: Vec<(f64, Pl)> = vec![];
            let mut rho = 1e-3;
            while rho > 1e-7 {
                let floor = rho / 1024.0;
                let pl = build_pl_with(f, lo, hi, &|fv: Iv| {
                    if fv.lo > 0.0 {
                        (rho * fv.lo).max(floor)
                    } else if fv.hi < 0.0 {
                        (-rho * fv.hi).max(floor)
                    } else {
                        floor
                    }
                })?;
                let score = 8.0 * rho + gamma_u(pl.knots.len() + 2, U32);
                cands.push((score, pl));
                rho /= 2.0;
            }
            let best = cands.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
            if let Some((_, pl)) = cands.into_iter().find(|c| c.0 <= best) {
                return Ok(pl);
            }
        }
        // The interpolant (targets 1e-2, 1e-2/4, ...) minimising 8x its interpolation error
        // (what runs see, weighted as for exp above) plus the f32 rounding of summing its K
        // units, γ_(K+2)·Σ|terms|. Finer targets add units and with them rounding: past the
        // best, the sum only grows (`x * x` in ReLU mode on [-1, 1.5]: 2049 units and an f32
        // bound of 4.0e-4 when refined down to f32's storage cost, 513 and 1.1e-4 now).
        let mut eps = 1e-2;
        let mut best: Option<(f64, Pl)> = None;
        let mut worse = 0;
        for _ in 0..14 {
            let pl = match build_pl(f, lo, hi, eps) {
                Ok(pl) => pl,
                Err(e) => return best.map(|b| b.1).ok_or(e),
            };
            let (_, _, mag) = split_basis(&pl);
            let score = 8.0 * pl.err + gamma_u(pl.knots.len() + 2, U32) * mag;
            if best.as_ref().is_none_or(|b| score < b.0) {
                best = Some((score, pl));
                worse = 0;
            } else {
                worse += 1;
                if worse == 2 {
                    break;
                }
            }
            eps /= 4.0;
        }
        best.map(|b| b.1).ok_or_else(|| "no interpolant".to_string())
    }

    /// `d` when the gated block `aff + terms` is `p·d` ([`Self::diff_of`]): one product of weight
    /// 1 of a positional 0/1 factor p and a difference d of two slots (weights ±1, no constant)
    /// that is exactly 0 wherever p is 0. Its units compute relu(p)·fl(d) and relu(-p)·(-fl(d)),
    /// exact but for fl(d), one addition of two exact terms: d'(1 + δ), |δ| ≤ u.
    fn masked_difference(&self, aff: &Aff, terms: &[(f64, Term)]) -> Option<Aff> {
        if self.opts.mlp != MlpMode::Gated || !aff.is_const() || aff.k != 0.0 || aff.dk != 0.0 {
            return None;
        }
        let [(w, Term::Prod(a, b))] = terms else { return None };
        if *w != 1.0 {
            return None;
        }
        // (A condition true at every position folds to the constant 1.)
        // p computed exactly: weights ±1 on positional slots whose stored values are f32
        // numbers (so its 0s and 1s are exact).
        let mask = |p: &Aff| {
            if p.is_const() && p.k == 1.0 && p.exact() {
                return Some(vec![1.0; self.n]);
            }
            let exact = Self::exact_terms(p, p.k) && p.c.keys().all(|s| self.pos_vals.get(s).is_some_and(|v| v.iter().all(|&x| f32_exact(x))));
            self.positional_values(p).filter(|v| exact && v.iter().all(|&x| x == 0.0 || x == 1.0))
        };
        let (p, d) = match mask(a) {
            Some(p) => (p, b),
            None => (mask(b)?, a),
        };
        let two = d.c.len() == 2 && d.c.values().all(|c| c.abs() == 1.0) && d.k == 0.0 && d.exact() && d.dk == 0.0;
        // Where p is 0, d' must be 0 as computed (z' = 0 there): each slot of d computes its exact
        // value (error 0), or is a head that selects no key there (it writes an exact 0).
        let computed_zero = |q: usize| {
            d.c.keys().all(|s| self.res.get(s).is_some_and(|r| r.err == Err2::default()) && self.zero.get(s).is_some_and(|z| z[q]) || self.no_key.get(s).is_some_and(|z| z[q]))
        };
        (two && p.iter().enumerate().all(|(q, &pv)| pv == 1.0 || computed_zero(q))).then(|| d.clone())
    }

    /// When `a` reads only positional slots and takes at most 16 values: its value per position.
    fn positional_values(&self, a: &Aff) -> Option<Vec<f64>> {
        // (Its values are the stored coefficients': a form whose constants folded inexactly
        // takes the general path, which charges the fold; helper rv12.)
        if a.is_const() || !a.exact() || !a.c.keys().all(|s| self.pos_vals.contains_key(s)) {
            return None;
        }
        let vals: Vec<f64> = (0..self.n).map(|p| a.c.iter().map(|(s, c)| c * self.pos_vals[s][p]).sum::<f64>() + a.k).collect();
        let mut d = vals.clone();
        d.sort_by(f64::total_cmp);
        d.dedup();
        (d.len() <= 16).then_some(vals)
    }

    /// Relative bounds of a one-term unary block `out = w·f(u)` (`relative::unary`), and, for a
    /// nonnegative f, what the ratio certificate needs of it.
    #[allow(clippy::too_many_arguments)]
    fn relative_unary(&mut self, out: SlotId, f: &F, pl: &Pl, units: &[(f64, f64, f64)], w: f64, c0: f64, u: &Aff, groups: Option<(usize, usize)>) {
        // The argument's relative bounds: u = c·s with s's, or only its absolute error.
        let input: relative::Rel = match (u.c.len(), u.c.iter().next()) {
            (1, Some((s, &c))) if u.k == 0.0 && u.exact() && self.rel.contains_key(s) => self.rel[s].iter().map(|&(r, a)| (r, a * c.abs())).collect(),
            _ => vec![(Err2::default(), self.aff_err(u))],
        };
        // Every unit's pre-activation `dir·(u - t)` rounds like its dot product (the largest
        // factor over the units); the output sums the units active in a window, the constant
        // unit and the residual add (`Err2::gamma(k)` = γ_{k+1}).
        // (As a factor of `mag + |t|`: [`Self::dot_err`] over that magnitude.)
        let mag = self.aff_mag(u);
        let pre_gamma = units.iter().fold(Err2::default(), |g, &(dir, t, _)| {
            let base = mag + Err2::both(t.abs());
            let e = self.dot_err(u, dir * (u.k - t), base);
            let x = Err2 { f32: if base.f32 > 0.0 { e.f32 / base.f32 } else { 0.0 }, f64: if base.f64 > 0.0 { e.f64 / base.f64 } else { 0.0 } };
            Err2 { f32: g.f32.max(x.f32), f64: g.f64.max(x.f64) }
        });
        // With weights ±1 and f32 biases every pre-activation adds u's slots and its bias exactly
        // as written ([`Self::dot_err`]'s chain case): K = slots + 1 exact terms.
        let exact = units.iter().all(|&(dir, t, _)| Self::exact_terms(u, dir * (u.k - t)));
        // The largest single term (a materialised difference carrying the cancellation).
        let big =
            u.c.iter().map(|(s, &c)| c.abs() * (Err2::both(self.res[s].iv.mag()) + self.res[s].err)).fold(Err2::default(), |a, b| Err2 { f32: a.f32.max(b.f32), f64: a.f64.max(b.f64) });
        let pre = relative::Pre { gamma: pre_gamma, mag, terms: exact.then_some(u.c.len() + 1), big };
        let sum_gamma = |active: usize| unary_sum_gamma(groups, c0, active);
        let rel = relative::unary(pl, units, w, c0, &input, &pre, &sum_gamma);
        self.rel.insert(out, rel);
        let (lo, hi) = (pl.knots[0], pl.knots[pl.knots.len() - 1]);
        // Row-shifted bounds (`relative::Shifted`): an exp of λ(s - m) + k with m a maximum of s
        // with exact scores...
        let find = |v: &Aff| {
            v.c.keys().find_map(|&m| {
                let info = self.max_info.get(&m)?;
                let (lam, rest) = v.split_max(m, &info.value)?;
                (rest.c.is_empty() && v.exact()).then(|| (m, lam, info.clone()))
            })
        };
        // Or u = c·z + r with z a materialised difference d ([`Self::diff_of`]) such that
        // c·d + r = λ(s - m) + k: the argument as the program states it, read with z's own
        // rounding (below).
        let mut via_diff: Option<(Aff, Err2)> = None;
        let mut found = find(u);
        if found.is_none() {
            for (&z, &c) in &u.c {
                let Some(d) = self.diff_of.get(&z) else { continue };
                let mut rest = u.clone();
                rest.c.remove(&z);
                let sub = rest.clone().add(d, c);
                if let Some(hit) = find(&sub) {
                    via_diff = Some((sub, self.aff_mag(&rest)));
                    found = Some(hit);
                    break;
                }
            }
        }
        if let (Some((rate, x_max)), Some((m, lam, info))) = (relative::exp_rate(f), found)
            && w > 0.0
        {
            // The argument's error against the reference u - λD_r (D_r the row's common shift,
            // |D_r| ≤ e_s + common): |λ|·(e_s + own).
            let es = self.aff_err(&info.value);
            // The reference arguments u - λD lie within |λ|·(e_s + common) of u's exact range.
            // Where the common part is too large for that (it must keep them below the clamp),
            // it is charged per key instead, as an error of the head's own (valid too: the
            // common number is bounded like any other).
            let iv = self.aff_iv(via_diff.as_ref().map_or(u, |v| &v.0));
            let fits = |shift: Err2| {
                let d = lam.abs() * shift.max();
                iv.lo - d >= lo && iv.hi + d <= hi.min(x_max)
            };
            let split = [(info.own, es + info.common), (info.own + info.common, es)].into_iter().find(|&(_, shift)| fits(shift));
            if let Some((own, shift)) = split {
                let moved = lam.abs() * (es + own);
                // Through a materialised difference: u' = c·d'(1 + δ) + r', and c·d' = u'_d - r'
                // with u'_d the argument from the computed slots, within `moved` of the
                // reference x: the rounding |c·d'·δ| ≤ u·(|x| + moved + |r'|), relative to x.
                let input = match &via_diff {
                    None => vec![(Err2::default(), moved)],
                    Some((_, rest_mag)) => {
                        let u1 = Err2 { f32: U32, f64: U64 };
                        vec![(u1, moved + u1 * (moved + *rest_mag))]
                    }
                };
                let rel = relative::unary(pl, units, w, c0, &input, &pre, &sum_gamma);
                // The same split into what every reader shares (the block's stored output, or its
                // partial sums) and what each reader's own sum of the partial sums adds.
                let split = match groups {
                    Some((per, n)) => (
                        relative::unary(pl, units, w, c0, &input, &pre, &|a| Err2::gamma(a.min(per) + 1, false)),
                        relative::unary_sum_only(pl, units, w, c0, &input, &pre, &|_| Err2::gamma(n, true)),
                    ),
                    None => (rel.clone(), vec![(Err2::default(), Err2::default())]),
                };
                self.split.insert(out, split);
                self.shifted.insert(out, relative::Shifted { rel, max: m, log_c: (rate * lam).abs() * shift, floor: w * f.eval(u.k) });
            }
        }
        // ... or a unary of c·t, t with shifted bounds (references within e^{±log_c} of exact).
        if let (1, Some((t, &c))) = (u.c.len(), u.c.iter().next())
            && u.k == 0.0
            && u.exact()
            && let Some(sh) = self.shifted.get(t).cloned()
        {
            let iv = self.aff_iv(u);
            let (cmin, cmax) = ((-sh.log_c.max()).exp(), sh.log_c.max().exp());
            let ends = [iv.lo * cmin, iv.lo * cmax, iv.hi * cmin, iv.hi * cmax];
            if ends.iter().all(|&x| x >= lo && x <= hi) {
                let input: relative::Rel = sh.rel.iter().map(|&(r, a)| (r, a * c.abs())).collect();
                let rel = relative::unary(pl, units, w, c0, &input, &pre, &sum_gamma);
                self.shifted.insert(out, relative::Shifted { rel, ..sh });
            }
        }
        if let Some(theta) = relative::reciprocal_above(f) {
            self.homogeneous.insert(out, theta);
            if let F::Div(num, _) = f
                && let F::C(k) = num.as_ref()
            {
                let data = UnaryData { pl: pl.clone(), units: units.to_vec(), w, c0, pre, groups, k: w * k };
                self.unary_data.insert(out, data);
            }
        }
        if w == 1.0
            && let Some((phi, sup)) = relative::nonneg_profile(pl)
        {
            self.unary_info.insert(out, (u.clone(), phi, sup));
        }
    }

    /// Records `out = Σ_j a_j·b_j` (all terms products with weight 1, every a_j a one-key gather
    /// of one value E with relative bounds) for the ratio certificate (`relative::weighted_sum`).
    fn weighted_sum(&mut self, out: SlotId, terms: &[(f64, Term)], active: usize) {
        let mut e = None;
        let mut gathers = vec![];
        let (mut mm, mut eb, mut q) = (0.0f64, Err2::default(), Err2::default());
        let mut b_iv: Option<Iv> = None;
        let gamma_h = Err2::gamma(active, true);
        let one = Err2::both(1.0);
        for (w, t) in terms {
            let Term::Prod(x, y) = t else { return };
            if *w != 1.0 {
                return;
            }
            let leaf = |a: &Aff| -> Option<SlotId> { (a.k == 0.0 && a.exact() && a.c.len() == 1 && a.c.values().all(|&c| c == 1.0)).then(|| a.c.keys().next().copied()).flatten() };
            let gather_of = |a: &Aff| -> Option<(SlotId, SlotId)> {
                let s = leaf(a)?;
                match self.head_info.get(&s)? {
                    HeadInfo::Gather { value, .. } => Some((s, *value)),
                    HeadInfo::Mean { .. } => None,
                }
            };
            let Some(((g, value), a, b)) = gather_of(x).map(|g| (g, x, y)).or_else(|| gather_of(y).map(|g| (g, y, x))) else { return };
            if *e.get_or_insert(value) != value {
                return;
            }
            gathers.push(g);
            let (bi, be, bmag) = (self.aff_iv(b), self.aff_err(b), self.aff_mag(b));
            let (ga, gb, g2) = (Self::dot_gamma(a, a.k), Self::dot_gamma(b, b.k), Self::prod_gamma(*w));
            let mb = Err2::both(bi.mag()) + be;
            let grow = (one + ga) * (one + g2);
            let r_b = mb * (grow - one) + gb * bmag * grow;
            mm = mm.max(bi.mag());
            eb = Err2 { f32: eb.f32.max(be.f32), f64: eb.f64.max(be.f64) };
            let qj = r_b + gamma_h * (mb + r_b);
            q = Err2 { f32: q.f32.max(qj.f32), f64: q.f64.max(qj.f64) };
            b_iv = Some(b_iv.map_or(bi, |v| v.hull(bi)));
        }
        let (Some(e), Some(b_iv)) = (e, b_iv) else { return };
        let lists: Vec<&relative::Rel> = gathers.iter().filter_map(|g| self.rel.get(g)).collect();
        let Some(p) = lists.first().map(|l| l.len()) else { return };
        if lists.len() != gathers.len() || lists.iter().any(|l| l.len() != p) {
            return;
        }
        let combine = |lists: &[&relative::Rel]| -> Vec<(Err2, Err2)> {
            (0..p)
                .map(|i| {
                    let (mut rho, mut alpha) = (Err2::default(), Err2::default());
                    for l in lists {
                        rho = Err2 { f32: rho.f32.max(l[i].0.f32), f64: rho.f64.max(l[i].0.f64) };
                        alpha = Err2 { f32: alpha.f32.max(l[i].1.f32), f64: alpha.f64.max(l[i].1.f64) };
                    }
                    relative::weighted_sum(rho, alpha, mm, eb, q, gathers.len())
                })
                .collect()
        };
        let kl = combine(&lists);
        // Against the shifted reference (`relative::Shifted`): the gathers of E all carry it, one
        // row structure; the same weighted-sum argument holds for the references C_r·E_j ≥ 0.
        let shifted: Vec<&relative::Shifted> = gathers.iter().filter_map(|g| self.shifted.get(g)).collect();
        let kl_shift = (shifted.len() == gathers.len() && shifted.iter().all(|x| x.max == shifted[0].max && x.rel.len() == p))
            .then(|| combine(&shifted.iter().map(|x| &x.rel).collect::<Vec<_>>()));
        self.wsum.insert(out, WSum { e, gathers, kl, kl_shift, m: mm, b_iv, eb, q });
    }

    /// `N·r` with N a [`WSum`] over gathers of E and `r = f(c·t)` a nonnegative unary of a mean
    /// head t of the same E whose keys, at every position, are exactly the gathered keys and
    /// number c (or none): a softmax-weighted mean, certified by [`relative::Ratio`] (on a
    /// shorter input, keys past its end drop out of both alike, and c·t ≥ Σ_j a_j). Returns
    /// (error before the product's own rounding, bound on |N'r'|, interval of N·r).
    fn ratio(&self, a: &Aff, b: &Aff, w: f64) -> Option<(Err2, Err2, Iv)> {
        let leaf = |a: &Aff| -> Option<SlotId> { (a.k == 0.0 && a.exact() && a.c.len() == 1 && a.c.values().all(|&c| c == 1.0)).then(|| a.c.keys().next().copied()).flatten() };
        if w != 1.0 {
            return None;
        }
        // r may be a grouped block (the sum of its partial sums), keyed by its first slot.
        let (x, y) = (leaf(a).or_else(|| self.group_of(a))?, leaf(b).or_else(|| self.group_of(b))?);
        let (ws, r) = if self.wsum.contains_key(&x) { (&self.wsum[&x], y) } else { (self.wsum.get(&y)?, x) };
        let (u, phi, f_sup) = self.unary_info.get(&r)?;
        let (&t, &c) = u.c.iter().next()?;
        if u.c.len() != 1 || u.k != 0.0 || c <= 0.0 {
            return None;
        }
        let (value, rows): (SlotId, Vec<Vec<u32>>) = match self.head_info.get(&t)? {
            HeadInfo::Mean { value, rows } => (*value, rows.clone()),
            // (Every query keeps one key or none, as in a softmax over rows of one entry, n = 1:
            // a mean over one key.)
            HeadInfo::Gather { value, key } => (*value, key.iter().map(|&k| if k == u32::MAX { vec![] } else { vec![k] }).collect()),
        };
        if value != ws.e {
            return None;
        }
        // Per position: the gathered keys (as a multiset) are the mean's keys, c of them or none.
        let keys: Vec<&Vec<u32>> = ws
            .gathers
            .iter()
            .map(|g| match self.head_info.get(g) {
                Some(HeadInfo::Gather { key, .. }) => Some(key),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let mut got = vec![];
        for (q, row) in rows.iter().enumerate() {
            if !(row.is_empty() || row.len() as f64 == c) {
                return None;
            }
            got.clear();
            got.extend(keys.iter().map(|k| k[q]).filter(|&k| k != u32::MAX));
            got.sort_unstable();
            if got != *row {
                return None;
            }
        }
        let (rr, rt) = (self.rel.get(&r)?, self.rel.get(&t)?);
        if rr.len() != ws.kl.len() || rt.len() != ws.kl.len() {
            return None;
        }
        let s_max = c * self.value_iv(ws.e).hi.max(0.0);
        let mut best: Option<(Err2, Err2)> = None;
        for (i, &(kappa, lambda)) in ws.kl.iter().enumerate() {
            let (e, p) = relative::Ratio { kappa, lambda, sigma: rr[i].0, alpha_r: rr[i].1, m: ws.m, s_max, phi: *phi, f_sup: *f_sup }.bound();
            keep_smaller(&mut best, e, p);
        }
        // The same against the row-shifted reference (`relative::Shifted`): valid when every key
        // read at a position lies in one row of the maximum head and that row is exactly the keys
        // read, and f(y) = k/y from the smallest shifted argument on.
        if let (Some(kl), Some(sr), Some(st), Some(sg), Some(&theta)) =
            (ws.kl_shift.as_ref(), self.shifted.get(&r), self.shifted.get(&t), ws.gathers.first().and_then(|g| self.shifted.get(g)), self.homogeneous.get(&r))
            && sr.max == st.max
            && sr.max == sg.max
            && sr.rel.len() == kl.len()
            && let Some(info) = self.max_info.get(&sr.max)
            && (-sr.log_c.max()).exp() * sr.floor >= theta
            && rows.iter().all(|row| row.iter().all(|&j| info.rows.get(j as usize) == Some(row)))
        {
            let grow = sr.log_c.max().exp();
            for (i, &(kappa, lambda)) in kl.iter().enumerate() {
                let (e, p) = relative::Ratio { kappa, lambda, sigma: sr.rel[i].0, alpha_r: sr.rel[i].1, m: ws.m, s_max: s_max * grow, phi: *phi, f_sup: *f_sup }.bound();
                keep_smaller(&mut best, e, p);
            }
        }
        // The weights' shared error taken once (`relative::SharedWeights`): against the row-shifted
        // reference of E, under the same conditions, with r bounded again against the mean of
        // what E's block stored.
        if ws.kl_shift.is_some()
            && let (Some(se), Some((shared, reader)), Some(ud), Some(&g_mean), Some(&theta)) =
                (self.shifted.get(&ws.e), self.split.get(&ws.e), self.unary_data.get(&r), self.head_round.get(&t), self.homogeneous.get(&r))
            && ws.gathers.iter().all(|g| self.shifted.get(g).is_some_and(|x| x.max == se.max))
            && let Some(info) = self.max_info.get(&se.max)
            && rows.iter().all(|row| row.iter().all(|&j| info.rows.get(j as usize) == Some(row)))
            && let Some(g_gather) = ws.gathers.iter().map(|g| self.head_round.get(g).copied()).collect::<Option<Vec<Err2>>>()
        {
            let g_gather = g_gather.iter().fold(Err2::default(), |a, &b| Err2 { f32: a.f32.max(b.f32), f64: a.f64.max(b.f64) });
            let (grow, shrink) = (se.log_c.max().exp(), (-se.log_c.max()).exp());
            let (knot_lo, knot_hi) = (ud.pl.knots[0], ud.pl.knots[ud.pl.knots.len() - 1]);
            let r_max = self.value_iv(ws.e).hi.max(0.0) * grow;
            for &sh in shared {
                for &rd in reader {
                    let sw = relative::SharedWeights {
                        shared: sh,
                        reader: rd,
                        g_gather,
                        g_mean,
                        terms: ws.gathers.len(),
                        s_min: shrink * se.floor,
                        s_max: s_max * grow,
                        m: ws.m,
                        e_b: ws.eb,
                        q: ws.q,
                        k: ud.k,
                        phi: *phi,
                        f_sup: *f_sup,
                    };
                    let Some((x_lo, x_hi)) = sw.x_range(c, r_max) else { continue };
                    if x_lo < knot_lo || x_hi > knot_hi {
                        continue;
                    }
                    let (rho_t, alpha_t) = sw.mean();
                    let input = vec![(rho_t, alpha_t * c)];
                    let own = relative::unary(&ud.pl, &ud.units, ud.w, ud.c0, &input, &ud.pre, &|a| unary_sum_gamma(ud.groups, ud.c0, a));
                    for (sigma, alpha_r) in own {
                        if let Some((e, p)) = sw.bound(sigma, alpha_r, theta) {
                            keep_smaller(&mut best, e, p);
                        }
                    }
                }
            }
        }
        let (e, p) = best?;
        let iv = Iv { lo: (phi * ws.b_iv.lo).min(0.0), hi: (phi * ws.b_iv.hi).max(0.0) };
        Some((e, p, iv))
    }

    /// One MLP block computing `aff + Σ w·term` into a new slot, with its certified bounds.
    fn mlp(&mut self, label: &str, aff: &Aff, terms: &[(f64, Term)]) -> Result<SlotId, Diagnostic> {
        let gated = self.opts.mlp == MlpMode::Gated;
        let group_req = std::mem::take(&mut self.group_next);
        // Exact products on grids whose sum fits 24 bits: the block computes its value exactly.
        let exact_sum = self.grid_terms(aff, terms);
        let mut all: Vec<(f64, Term)> = terms.to_vec();
        if !aff.is_const() {
            // The slots' part only: the constant `aff.k` is the constant unit's below (with it
            // here too, `x + 1` was computed as `x + 2`).
            all.push((1.0, Term::Unary(Aff { c: aff.c.clone(), dc: aff.dc.clone(), ..Aff::default() }, F::Lin(1.0, 0.0))));
        }
        let zero: Vec<bool> = {
            let mut z = self.aff_zero(aff);
            for (_, t) in &all {
                let tz = match t {
                    Term::Prod(a, b) => {
                        let (za, zb) = (self.aff_zero(a), self.aff_zero(b));
                        za.iter().zip(&zb).map(|(x, y)| *x || *y).collect()
                    }
                    Term::Unary(u, f) if f.eval(0.0) == 0.0 => self.aff_zero(u),
                    _ => vec![false; self.n],
                };
                for (x, y) in z.iter_mut().zip(tz) {
                    *x &= y;
                }
            }
            z
        };
        // ReLU mode: a product with a positional factor is exact through indicators; other
        // products become two squares.
        let mut expanded = vec![];
        let mut indicator_products = vec![];
        // ReLU-mode products: the interval comes from the product, not from its two squares.
        let mut square_ranges = Iv::pt(0.0);
        for (w, t) in all {
            match t {
                Term::Prod(a, b) if !gated && (self.positional_values(&a).is_some() || self.positional_values(&b).is_some()) => {
                    let (p, x) = if self.positional_values(&a).is_some() { (a, b) } else { (b, a) };
                    indicator_products.push((w, p, x));
                }
                Term::Prod(a, b) if !gated => {
                    let (ma, mb) = (self.aff_iv(&a).mag().max(1e-12), self.aff_iv(&b).mag().max(1e-12));
                    let al = (mb / ma).sqrt();
                    let p = a.scale(al / 2.0).add(&b, 0.5 / al);
                    let q = a.scale(al / 2.0).add(&b, -0.5 / al);
                    square_ranges = square_ranges.add(self.prod_iv(&a, &b).scale(w));
                    expanded.push((w, Term::Square(p)));
                    expanded.push((-w, Term::Square(q)));
                }
                other => expanded.push((w, other)),
            }
        }
        let out = self.new_slot(label.to_string(), SlotEnc::Num { points: None });
        let mut m = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: gated.then(Gate::default) };
        // (The constant's fold bound: the exact constant is within `dk` of the stored one.)
        let mut iv = Iv::new(aff.k - aff.dk, aff.k + aff.dk);
        let mut err = Err2::both(aff.dk);
        // The inputs' errors carried through (a summand of `err`); None where a term's bound
        // does not split so.
        let mut carried = Some(Err2::default());
        let mut mag_sum = Err2::both(aff.k.abs());
        // Constant part: one unit that is 1 off BOS.
        let unit_to = |m: &mut Mlp, ins: Vec<(SlotId, f64)>, b: f64, gate: Option<(Vec<(SlotId, f64)>, f64)>, w: f64, o: SlotId| {
            let c = m.hidden;
            m.w_in.extend(ins.into_iter().map(|(s, x)| In::new(s, 0, c, x)));
            m.b_in.push(b);
            if let Some(g) = m.gate.as_mut() {
                let (gw, gb) = gate.unwrap_or((vec![], 1.0));
                g.w.extend(gw.into_iter().map(|(s, x)| In::new(s, 0, c, x)));
                g.b.push(gb);
            }
            m.w_out.push(Out::new(c, o, 0, w));
            m.hidden += 1;
        };
        let unit = |m: &mut Mlp, ins: Vec<(SlotId, f64)>, b: f64, gate: Option<(Vec<(SlotId, f64)>, f64)>, w: f64| unit_to(m, ins, b, gate, w, out);
        let mut constant = aff.k;
        let mut mag_exact = Err2::default();
        // Per unit that can be nonzero, a bound on its output (products only; a block with other
        // terms sums with the plain γ bound).
        let mut unit_mags: Vec<Err2> = vec![];
        // Units that can be nonzero at one position (the block's output sum rounds only between
        // those: [`Err2::gamma_sum`]).
        let mut active = 0usize;
        // A block that is one unary term `w·f(u)` gets relative bounds too (after the loop).
        let single_unary = expanded.len() == 1 && indicator_products.is_empty() && aff.is_const() && aff.k == 0.0;
        // (interpolant, units (dir, t, output weight), term weight, argument)
        type Capture = (F, Pl, Vec<(f64, f64, f64)>, f64, Aff);
        let mut unary_capture: Option<Capture> = None;
        // A grouped block ([`Group`]): per slot, (slot, interval, error); and (units per group,
        // groups).
        type GroupRes = (Vec<(SlotId, Iv, Err2)>, usize, usize, Err2);
        let mut grouped: Option<GroupRes> = None;
        for (w, p, x) in &indicator_products {
            // p·x = Σ_v v·[p = v]·x, and [p = v]·x = relu(x - R(1 - I)) - relu(-x - R(1 - I)).
            let Some(vals) = self.positional_values(p) else {
                return Err(Diagnostic::error("compile::internal", format!("internal error while lowering `{label}`: a positional factor has no values"), self.span));
            };
            let (xi, xe) = (self.aff_iv(x), self.aff_err(x));
            let r = (xi.mag() + xe.max() + 1.0).log2().ceil().exp2();
            let mut distinct: Vec<f64> = vals.clone();
            distinct.sort_by(f64::total_cmp);
            distinct.dedup();
            let pmag = distinct.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for &v in distinct.iter().filter(|&&v| v != 0.0) {
                let ind: Vec<f64> = vals.iter().map(|&y| (y == v) as i64 as f64).collect();
                let is = self.pos_slot(&format!("{label}.is{v}"), &ind);
                let mut ins: Vec<(SlotId, f64)> = x.c.iter().map(|(&s, &c)| (s, c)).collect();
                ins.push((is, r));
                unit(&mut m, ins.clone(), x.k - r, None, w * v);
                let neg: Vec<(SlotId, f64)> = x.c.iter().map(|(&s, &c)| (s, -c)).chain(std::iter::once((is, r))).collect();
                unit(&mut m, neg, -x.k - r, None, -w * v);
            }
            // Only the units of the position's own value can be nonzero.
            active += 2;
            let values_iv = Iv { lo: distinct[0], hi: distinct[distinct.len() - 1] };
            iv = iv.add(values_iv.mul(xi).scale(*w).hull(Iv::pt(0.0)));
            err += w.abs() * pmag * (xe + Err2::gamma(x.c.len() + 3, Self::aff_exact(x)) * (self.aff_mag(x) + Err2::both(2.0 * r)));
            carried = carried.map(|c| c + w.abs() * pmag * xe);
            if distinct.iter().all(|&v| f32_exact(w * v)) {
                mag_exact += w.abs() * pmag * (Err2::both(xi.mag()) + xe);
            } else {
                mag_sum += w.abs() * pmag * (Err2::both(xi.mag()) + xe);
            }
        }
        for (w, t) in &expanded {
            // A function of a constant is a constant (e.g. the square of `x - x` that a product
            // `x * x` leaves in ReLU mode): no units, and no interpolation domain of width 0.
            if let Term::Square(u) | Term::Unary(u, _) = t
                && u.is_const()
            {
                let f = match t {
                    Term::Unary(_, f) => f.eval(u.k),
                    _ => u.k * u.k,
                };
                constant += w * f;
                iv = iv.add(Iv::pt(w * f));
                continue;
            }
            let (t, product_half) = match t {
                Term::Square(u) => (Term::Unary(u.clone(), F::Mul(Box::new(F::Lin(1.0, 0.0)), Box::new(F::Lin(1.0, 0.0)))), true),
                other => (other.clone(), false),
            };
            match &t {
                // Squares were rewritten as unary terms just above.
                Term::Square(_) => return Err(Diagnostic::error("compile::internal", format!("internal error while lowering `{label}`: a square was not rewritten"), self.span)),
                Term::Unary(u, f) => {
                    let ui = self.aff_iv(u);
                    let ue = self.aff_err(u) + Err2::gamma(u.c.len() + 2, Self::aff_exact(u)) * self.aff_mag(u);
                    // Ends snapped outward to f32 values, so knots there are stored exactly.
                    // (Widened by the larger error: one domain, and one network, for both bounds.)
                    let (lo, hi) = (f32_down(ui.lo - ue.max()), f32_up(ui.hi + ue.max()));
                    // Bounds that multiply out past f64's range (`simulate --bound 1e300`): say
                    // so, not "cannot be approximated on [NaN, NaN]".
                    if !(lo.is_finite() && hi.is_finite()) {
                        return Err(Diagnostic::error("compile::too_large", format!("`{label}` reads values past any float's range (their interval overflows)"), self.span)
                            .with_note("the model computes in f32: tighter --input-bounds keep its values in range"));
                    }
                    // An argument that can take one value only (`x + 1` with --input-bounds=0,0)
                    // is a constant: no units, and no interpolation domain of width 0.
                    if lo == hi {
                        let v = w * f.eval(lo);
                        if !v.is_finite() {
                            return Err(Diagnostic::error("compile::real", format!("`{label}` is not finite at {lo} (the only value of its argument)"), self.span));
                        }
                        constant += v;
                        iv = iv.add(Iv::pt(v));
                        continue;
                    }
                    let group_here = group_req && single_unary && !product_half;
                    // (On the argument's own interval, without its error: whether the program's
                    // values reach a denominator's 0, or only the error does.)
                    let exact_ok = ui.lo < ui.hi && build_pl(f, ui.lo, ui.hi, f64::INFINITY).is_ok();
                    let pl = self.choose_pl(f, lo, hi).map_err(|e| {
                        // The remedy depends on the reason: too many pieces for the requested
                        // error, a jump, or a domain the function is not defined on.
                        let note = if e.contains("pieces would be needed") {
                            "a larger --pl-error (or tighter --input-bounds) needs fewer pieces"
                        } else if e.contains("jumps") {
                            "a conditional must agree at its threshold (both branches equal there) to be continuous; tighter --input-bounds that leave the threshold out also work"
                        } else if e.contains("division by an interval that contains 0") && exact_ok {
                            // The interval is the denominator's, widened by its certified error:
                            // often the error, not the program, reaches 0 (a softmax's total).
                            "the denominator's interval, widened by its certified error, reaches 0: keep it further from 0 than that error in a way the program allows (`x / max(d, c)` with c below every value d takes and above the error); a softmax's total with the row maximum subtracted is at least 1, which intervals do not see: divide by `max(total, 1)`, as `softmax_rows` in the matrix library does (with the maximum not yet subtracted, subtract it first)"
                        } else if e.contains("<= 0") || e.contains("division by an interval that contains 0") {
                            "tighter --input-bounds, or a clamp that keeps the value away from 0 (`max(x, c)` for a small c > 0), can bound it"
                        } else {
                            "tighter --input-bounds, or a clamp such as `min(x, 0)` that states what inference cannot see, can bound it"
                        };
                        Diagnostic::error("compile::real", format!("`{label}` cannot be approximated on [{lo:.6}, {hi:.6}] (the interval of its argument, {}): {e}", self.describe(u)), self.span)
                            .with_note(note)
                    })?;
                    let (f0, pl_units, term_mag) = split_basis(&pl);
                    constant += w * f0;
                    if single_unary && !product_half {
                        unary_capture = Some((f.clone(), pl.clone(), pl_units.iter().map(|&(d, t, c)| (d, t, w * c)).collect(), *w, u.clone()));
                    }
                    let mut pre_err = Err2::default();
                    active += pl_units.len();
                    // Kinks at representable points with representable slopes (relu, leaky
                    // relu, max, min) lose nothing when stored.
                    let exact = f32_exact(w * f0) && pl_units.iter().all(|&(_, _, c)| f32_exact(w * c));
                    // Grouped: G ≈ √K slots of `per` consecutive units each.
                    let k_units = pl_units.len();
                    let per = if group_here && k_units >= GROUP_MIN_UNITS { k_units.div_ceil((k_units as f64).sqrt().ceil() as usize) } else { usize::MAX };
                    let mut gslots = vec![out];
                    if per != usize::MAX {
                        for i in 1..k_units.div_ceil(per) {
                            gslots.push(self.new_slot(format!("{label}.group{i}"), SlotEnc::Num { points: None }));
                        }
                    }
                    // Per group: Σ|w·c| (Lipschitz), pre-activation rounding, magnitude bound,
                    // units, and the values at the domain's ends and the group's knots.
                    let mut per_group: Vec<(f64, Err2, f64, usize, Vec<f64>)> = vec![(0.0, Err2::default(), 0.0, 0, vec![lo, hi]); gslots.len()];
                    for (j, &(dir, t, coef)) in pl_units.iter().enumerate() {
                        // dir +1: relu(u - t); dir -1: relu(t - u).
                        let ins: Vec<(SlotId, f64)> = u.c.iter().map(|(&s, &x)| (s, dir * x)).collect();
                        let g = if per == usize::MAX { 0 } else { j / per };
                        unit_to(&mut m, ins, dir * (u.k - t), None, w * coef, gslots[g]);
                        let pe = coef.abs() * self.dot_err(u, dir * (u.k - t), self.aff_mag(u) + Err2::both(t.abs()));
                        pre_err += pe;
                        let pg = &mut per_group[g];
                        pg.0 += (w * coef).abs();
                        pg.1 += w.abs() * pe;
                        pg.2 += (w * coef).abs() * if dir > 0.0 { (hi - t).max(0.0) } else { (t - lo).max(0.0) };
                        pg.3 += 1;
                        pg.4.push(t);
                    }
                    if gslots.len() > 1 {
                        // Slot g's units at x (slot 0 with the constant); their range over the
                        // domain is reached at its ends or a knot (piecewise linear).
                        let part = |g: usize, x: f64| -> f64 {
                            let c0 = if g == 0 { w * f0 } else { 0.0 };
                            c0 + pl_units.iter().enumerate().filter(|(j, _)| j / per == g).map(|(_, &(dir, t, c))| w * c * (dir * (x - t)).max(0.0)).sum::<f64>()
                        };
                        let mut res_g = vec![];
                        for (g, (lip, pre, mag, units, xs)) in per_group.iter().enumerate() {
                            let vals: Vec<f64> = xs.iter().filter(|&&x| (lo..=hi).contains(&x)).map(|&x| part(g, x)).collect();
                            let mut giv = Iv { lo: vals.iter().copied().fold(f64::INFINITY, f64::min), hi: vals.iter().copied().fold(f64::NEG_INFINITY, f64::max) };
                            // The group's own sum (its units, the constant in slot 0) and the
                            // residual add.
                            let (units, mag) = if g == 0 { (units + 1, mag + (w * f0).abs()) } else { (*units, *mag) };
                            let mut e = *lip * ue + *pre + Err2::gamma(units, exact) * Err2::both(mag);
                            if g == 0 {
                                let ie = w.abs() * pl.err;
                                e += Err2::both(ie);
                                giv = Iv { lo: giv.lo - ie, hi: giv.hi + ie };
                            }
                            res_g.push((gslots[g], giv, e));
                        }
                        // The sum's error: the block's argument, interpolation and pre-activation
                        // terms as for one slot, and each group's sum.
                        let sums: Err2 = per_group
                            .iter()
                            .enumerate()
                            .map(
                                |(g, (_, _, mag, units, _))| {
                                    if g == 0 {
                                        Err2::gamma(units + 1, exact) * Err2::both(mag + (w * f0).abs())
                                    } else {
                                        Err2::gamma(*units, exact) * Err2::both(*mag)
                                    }
                                },
                            )
                            .sum();
                        let total = w.abs() * (pl.lipschitz * ue + Err2::both(pl.err) + pre_err) + sums;
                        grouped = Some((res_g, per, gslots.len(), total));
                    }
                    if !product_half {
                        iv = iv.add(pl.range.scale(*w));
                    }
                    err += w.abs() * (pl.lipschitz * ue + Err2::both(pl.err) + pre_err);
                    carried = carried.map(|c| c + w.abs() * pl.lipschitz * self.aff_err(u));
                    if exact {
                        mag_exact += Err2::both(w.abs() * term_mag);
                    } else {
                        mag_sum += Err2::both(w.abs() * term_mag);
                    }
                }
                Term::Prod(a, b) => {
                    let (ai, bi) = (self.aff_iv(a), self.aff_iv(b));
                    let (ae, be) = (self.aff_err(a), self.aff_err(b));
                    let (am, bm) = (Err2::both(ai.mag()) + ae, Err2::both(bi.mag()) + be);
                    let ins = |u: &Aff, s: f64| -> Vec<(SlotId, f64)> { u.c.iter().map(|(&k, &x)| (k, s * x)).collect() };
                    unit(&mut m, ins(a, 1.0), a.k, Some((ins(b, 1.0), b.k)), *w);
                    unit(&mut m, ins(a, -1.0), -a.k, Some((ins(b, -1.0), -b.k)), *w);
                    // Both pre-activations round (relative to what they sum), then the product
                    // and its output weight.
                    let ga = Self::dot_gamma(a, a.k);
                    let rounding = if self.grid_prod(a, b, *w).is_some() {
                        Err2::default()
                    } else {
                        self.dot_err(a, a.k, self.aff_mag(a)) * bm + self.dot_err(b, b.k, self.aff_mag(b)) * am + Self::prod_gamma(*w) * (am * bm)
                    };
                    // The units relu(a)·b and relu(-a)·b: when a's pre-activation is exact they
                    // read a' and -a' exactly, so at most one is nonzero.
                    let units = if ga == Err2::default() { 1 } else { 2 };
                    active += units;
                    let (mut term_iv, mut term_err, mut term_mag) = (self.prod_iv(a, b).scale(*w), w.abs() * (ai.mag() * be + bi.mag() * ae + ae * be + rounding), w.abs() * am * bm);
                    let (plain, term_carried) = (term_err, w.abs() * (ai.mag() * be + bi.mag() * ae + ae * be));
                    // A softmax-weighted mean (gated): also certified by `relative::Ratio`, without
                    // the factor n; each arithmetic keeps the smaller of the two valid bounds.
                    if gated && let Some((rerr, p, riv)) = self.ratio(a, b, *w) {
                        // The unit computes a'(1 + ε_a)·r'(1 + ε_b)(1 + ε_2): pre-activations
                        // (one slot with weight 1, or a grouped r's partial sums, whose adding
                        // σ charges already: charged twice, soundly) and the product round
                        // relative to |a'r'| ≤ p.
                        let one = Err2::both(1.0);
                        let g3 = (one + Self::dot_gamma(a, a.k)) * (one + Self::dot_gamma(b, b.k)) * (one + Self::prod_gamma(*w)) - one;
                        let (re, rm) = (rerr + g3 * p, (one + g3) * p);
                        term_err = Err2 { f32: term_err.f32.min(re.f32), f64: term_err.f64.min(re.f64) };
                        term_mag = Err2 { f32: term_mag.f32.min(rm.f32), f64: term_mag.f64.min(rm.f64) };
                        term_iv = Iv { lo: term_iv.lo.max(riv.lo), hi: term_iv.hi.min(riv.hi) };
                    }
                    iv = iv.add(term_iv);
                    err += term_err;
                    // (A ratio's bound, when it was the smaller, does not split.)
                    carried = carried.filter(|_| term_err == plain).map(|c| c + term_carried);
                    for _ in 0..units {
                        unit_mags.push(term_mag);
                    }
                    if f32_exact(*w) {
                        mag_exact += term_mag;
                    } else {
                        mag_sum += term_mag;
                    }
                }
            }
        }
        if constant != 0.0 {
            unit(&mut m, vec![], 1.0, None, constant);
            active += 1;
            // The constant is a sum (`x + 0.5` on [2, 8]: 0.5 plus the interpolant's value at
            // the domain's end, 1.9999975): exact parts, but it is stored as one f32, off by
            // exactly this in either precision of evaluation.
            err += Err2::both((constant - f64::from(constant as f32)).abs());
        }
        iv = iv.add(square_ranges);
        // The final sum over all units of this block.
        // Summing the block's units: every term rounds (γ over all of them); terms whose output
        // weight is not an f32 also carry that weight's rounding.
        // (Err2::gamma(k) = γ_{k+1}: the additions between the k nonzero units, their output
        // weights, and the residual add.)
        let active = active.min(m.hidden);
        if let Some((res_g, per, n_groups, total)) = grouped {
            // Every slot's own error covers its units' sum (for magnitudes); the sum's error is
            // the block's, no larger than theirs together.
            let err = min2(total, res_g.iter().map(|r| r.2).sum());
            for (slot, giv, e) in &res_g {
                self.res.insert(*slot, Res { iv: *giv, err: *e });
                self.zero.insert(*slot, vec![false; self.n]);
            }
            self.groups.insert(out, Group { slots: res_g.iter().map(|r| r.0).collect(), iv, err });

            if let Some((f, pl, units, w, u)) = unary_capture
                && aff.exact()
            {
                self.relative_unary(out, &f, &pl, &units, w, constant, &u, Some((per, n_groups)));
            }
            self.report.push(SopBound { label: label.to_string(), lo: iv.lo, hi: iv.hi, err: err.f32, err_f64: err.f64 });
            let what = format!("{label} = {} MLP, {} units in {n_groups} partial sums", if gated { "gated" } else { "ReLU" }, m.hidden);
            self.push_block(BlockKind::Mlp(m), out, what);
            return Ok(out);
        }
        let mut sum_err = Err2::gamma(active, true) * (mag_sum + mag_exact);
        if indicator_products.is_empty() && expanded.iter().all(|(_, t)| matches!(t, Term::Prod(..))) && unit_mags.len() + (constant != 0.0) as usize == active {
            // Only products (and the constant unit): the additions between them by
            // [`chain_err`], plus one rounding of each output weight's product and of the
            // residual add, each at most u·(1 + γ)·Σ bounds.
            unit_mags.push(Err2::both(constant.abs()));
            let total = unit_mags.iter().copied().sum::<Err2>();
            let k = unit_mags.len();
            let two = Err2 { f32: 2.0 * U32 * (1.0 + gamma_u(k + 2, U32)), f64: 2.0 * U64 * (1.0 + gamma_u(k + 2, U64)) };
            sum_err = min2(sum_err, chain_err2(&unit_mags) + two * total);
        }
        if exact_sum.is_none() {
            err += sum_err + (Err2::gamma(active, false) - Err2::gamma(active, true)) * mag_sum;
        }
        self.res.insert(out, Res { iv, err });
        if let Some((g, _)) = exact_sum
            && err == Err2::default()
            && g != i32::MAX
        {
            self.exact_grid.insert(out, g);
        }
        if let Some(d) = self.masked_difference(aff, terms) {
            self.diff_of.insert(out, d);
        }
        if let Some(c) = carried {
            self.carried.insert(out, c);
        }
        // (Relative bounds read the units alone: a constant that folded inexactly adds an
        // absolute error they do not carry; helper rv12.)
        if let Some((f, pl, units, w, u)) = unary_capture
            && aff.exact()
        {
            self.relative_unary(out, &f, &pl, &units, w, constant, &u, None);
        }
        if gated && indicator_products.is_empty() && aff.is_const() && aff.k == 0.0 && aff.exact() && constant == 0.0 {
            self.weighted_sum(out, terms, active);
        }
        self.zero.insert(out, zero);
        self.report.push(SopBound { label: label.to_string(), lo: iv.lo, hi: iv.hi, err: err.f32, err_f64: err.f64 });
        let what = format!("{label} = {} MLP, {} units", if gated { "gated" } else { "ReLU" }, m.hidden);
        self.push_block(BlockKind::Mlp(m), out, what);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pl_exp_within_certified_error() {
        let f = F::Exp(Box::new(F::Lin(1.0, 0.0)));
        let pl = build_pl(&f, -20.0, 0.5, 1e-6).unwrap();
        assert!(pl.err <= 1e-6);
        let mut worst = 0.0f64;
        for i in 0..=20000 {
            let x = -20.0 + 20.5 * i as f64 / 20000.0;
            let j = pl.knots.partition_point(|&t| t <= x).clamp(1, pl.knots.len() - 1);
            let (a, b) = (pl.knots[j - 1], pl.knots[j]);
            let y = pl.values[j - 1] + (pl.values[j] - pl.values[j - 1]) * (x - a) / (b - a);
            worst = worst.max((y - x.exp()).abs());
        }
        assert!(worst <= pl.err * 1.0000001, "measured {worst} > certified {}", pl.err);
        assert!(pl.lipschitz >= 0.5f64.exp());
    }

    #[test]
    fn relative_exp_bounds_hold_and_are_relative() {
        // exp(min(x, 0)) as U's softmax numerators compute it, the argument off by up to 1e-3.
        let x = F::Lin(1.0, 0.0);
        let f = F::Exp(Box::new(F::Ter(Box::new(x.clone()), Box::new(F::Cmp(Box::new(x), BinOp::Lt, Box::new(F::C(0.0)))), Box::new(F::C(0.0)))));
        let pl = build_pl(&f, -30.0, 0.01, 1e-7).unwrap();
        let (f0, units, _) = split_basis(&pl);
        let input_err = 1e-3;
        let rel = relative::unary(
            &pl,
            &units,
            1.0,
            f0,
            &vec![(Err2::default(), Err2::both(input_err))],
            &relative::Pre { gamma: Err2::gamma(4, false), mag: Err2::both(10.0), terms: None, big: Err2::default() },
            &|_| Err2::gamma(units.len() + 1, false),
        );
        let net = |x: f64| f0 + units.iter().map(|&(d, t, c)| c * (d * (x - t)).max(0.0)).sum::<f64>();
        for i in 0..=3000 {
            let x = -30.0 + 0.01 * i as f64;
            let exact = x.min(0.0).exp();
            for dx in [-input_err, 0.0, input_err] {
                let got = net(x + dx);
                for &(rho, alpha) in &rel {
                    assert!((got - exact).abs() <= rho.f32 * exact + alpha.f32, "x {x} dx {dx}: {got} vs {exact}, ({rho:?}, {alpha:?})");
                }
            }
        }
        // Some split is relative: about the argument's error, with a negligible absolute part.
        assert!(rel.iter().any(|(r, a)| r.f32 < 2.0 * input_err && a.f32 < 1e-6), "{rel:?}");
    }

    #[test]
    fn exp_and_reciprocals_are_recognised_and_interpolated_relatively() {
        let x = || Box::new(F::Lin(1.0, 0.0));
        // 2.718 ^ u as the lowering writes it, and exp(min(u, 0)) (not a pure exponential).
        let e = F::Exp(Box::new(F::Mul(Box::new(F::C(2.0f64.ln())), x())));
        assert_eq!(relative::exp_rate(&e), Some((2.0f64.ln(), f64::INFINITY)));
        // exp(min(u, 1/16)): an exponential below 1/16; exp(max(u, 0)) is not one below anything.
        let clamped = F::Exp(Box::new(F::Mul(Box::new(F::C(1.0)), Box::new(F::Ter(x(), Box::new(F::Cmp(x(), BinOp::Lt, Box::new(F::C(0.0625)))), Box::new(F::C(0.0625)))))));
        assert_eq!(relative::exp_rate(&clamped), Some((1.0, 0.0625)));
        for u in [-3.0, 0.0, 0.0625] {
            assert_eq!(clamped.eval(u), u.exp());
        }
        let floored = F::Exp(Box::new(F::Ter(x(), Box::new(F::Cmp(x(), BinOp::Gt, Box::new(F::C(0.0)))), Box::new(F::C(0.0)))));
        assert_eq!(relative::exp_rate(&floored), None);
        // 3 / max(y, 0.875) in both of the prelude's orders; 3 / min(y, 1) is not k / y above anything.
        let max_a = F::Ter(x(), Box::new(F::Cmp(x(), BinOp::Gt, Box::new(F::C(0.875)))), Box::new(F::C(0.875)));
        let max_b = F::Ter(Box::new(F::C(0.875)), Box::new(F::Cmp(Box::new(F::C(0.875)), BinOp::Gt, x())), x());
        let min = F::Ter(x(), Box::new(F::Cmp(x(), BinOp::Lt, Box::new(F::C(1.0)))), Box::new(F::C(1.0)));
        for (g, want) in [(max_a, Some(0.875)), (max_b, Some(0.875)), (min, None)] {
            let f = F::Div(Box::new(F::C(3.0)), Box::new(g));
            assert_eq!(relative::reciprocal_above(&f), want);
            if want.is_some() {
                for y in [0.875, 1.0, 2.5, 64.0] {
                    assert_eq!(f.eval(y), 3.0 / y);
                }
            }
        }
        // A relative target holds relatively (checked densely against f itself), with few knots
        // in the far tail.
        let rho = 1e-4;
        let pl = build_pl_with(&e, -60.0, 0.01, &|fv: Iv| (rho * fv.lo).max(rho / 1024.0)).unwrap();
        let at = |u: f64| {
            let k = pl.knots.partition_point(|&t| t <= u).clamp(1, pl.knots.len() - 1);
            let (a, b) = (pl.knots[k - 1], pl.knots[k]);
            pl.values[k - 1] + (pl.values[k] - pl.values[k - 1]) * (u - a) / (b - a)
        };
        for i in 0..=60_000 {
            let u = -60.0 + 0.001 * i as f64;
            let want = e.eval(u);
            assert!((at(u) - want).abs() <= (rho * want).max(rho / 1024.0) * (1.0 + 1e-9), "u {u}: {} vs {want}", at(u));
        }
        assert!(pl.knots.iter().filter(|&&t| t < -20.0).count() < 20, "{}", pl.knots.len());
    }

    #[test]
    fn chain_bound_holds_for_f32_sums_in_any_tree_and_halves_gamma() {
        // Deterministic pseudo-random f32 terms and summation trees (random pairings, chains in
        // both orders, balanced): the computed f32 sum stays within chain_err of the exact one.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut worst = 0.0f64;
        for case in 0..400 {
            let k = 2 + (next() % 40) as usize;
            // Terms of mixed signs and sizes (some cancelling), or all near 1 (the worst for γ).
            let terms: Vec<f32> = (0..k)
                .map(|_| {
                    let r = (next() >> 40) as f32 / (1u64 << 24) as f32;
                    if case % 2 == 0 {
                        1.0 - r * 1e-3
                    } else {
                        (r - 0.5) * 2f32.powi((next() % 12) as i32)
                    }
                })
                .collect();
            let mags: Vec<f64> = terms.iter().map(|&t| f64::from(t.abs())).collect();
            let exact: f64 = terms.iter().map(|&t| f64::from(t)).sum();
            let bound = chain_err(&mags, U32);
            let mut nodes = terms.clone();
            while nodes.len() > 1 {
                let n = nodes.len();
                let (i, j) = match case % 3 {
                    0 => (0, 1),
                    1 => (n - 2, n - 1),
                    _ => {
                        let i = (next() % n as u64) as usize;
                        (i, (i + 1 + (next() % (n as u64 - 1)) as usize) % n)
                    }
                };
                let (lo, hi) = (i.min(j), i.max(j));
                let v = nodes[lo] + nodes[hi];
                nodes.remove(hi);
                nodes[lo] = v;
            }
            let err = (f64::from(nodes[0]) - exact).abs();
            assert!(err <= bound, "case {case}: |{} - {exact}| = {err} > {bound}", nodes[0]);
            worst = worst.max(err / bound.max(1e-300));
            // Never above the plain γ bound (up to its higher-order factor), and about half of it
            // for equal terms.
            assert!(bound <= gamma_u(k - 1, U32) * mags.iter().sum::<f64>() * (1.0 + gamma_u(k, U32)));
        }
        assert!(worst > 0.0);
        let ones = vec![1.0; 64];
        let ratio = chain_err(&ones, U32) / (gamma_u(63, U32) * 64.0);
        assert!(ratio > 0.5 && ratio < 0.52, "{ratio}");
        // Exact zeros add nothing; one term is exact.
        assert_eq!(chain_err(&[0.0, 3.0, 0.0], U32), 0.0);
        assert_eq!(chain_err(&[1.0, 1.0], U32), U32 * (1.0 + gamma_u(2, U32)) * 2.0);
    }

    #[test]
    fn affine_forms_split_around_a_maximum() {
        let (s1, s2, m) = (SlotId(1), SlotId(2), SlotId(3));
        let s = Aff::leaf(s1).add(&Aff::leaf(s2), 1.0);
        // u = 2(s1 + s2 - m) + 5.
        let u = s.scale(2.0).add(&Aff::leaf(m), -2.0).add(&Aff::konst(5.0), 1.0);
        let (lam, rest) = u.split_max(m, &s).unwrap();
        assert_eq!(lam, 2.0);
        assert!(rest.c.is_empty() && rest.k == 5.0);
        // Not λ(s - m): one slot of s with another weight, or m missing.
        let skew = Aff::leaf(s1).scale(2.0).add(&Aff::leaf(s2), 3.0).add(&Aff::leaf(m), -2.0);
        assert!(skew.split_max(m, &s).is_none());
        assert!(s.split_max(m, &s).is_none());
    }

    #[test]
    fn sums_of_exact_terms_round_only_between_nonzero_terms() {
        // k exact terms: at most k - 1 roundings on any path; one term: exact.
        assert_eq!(Err2::gamma_sum(1), Err2::default());
        assert_eq!(Err2::gamma_sum(0), Err2::default());
        assert!((Err2::gamma_sum(3).f32 - gamma_u(2, U32)).abs() < 1e-20);
        // An f32 sum of 1000 values in [0, 1] in the worst order stays within γ_999·Σ.
        let xs: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1000) as f32 / 999.0 + 1e-3).collect();
        let exact: f64 = xs.iter().map(|&v| f64::from(v)).sum();
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for order in [xs, sorted] {
            let got = order.iter().fold(0.0f32, |a, &b| a + b);
            assert!((f64::from(got) - exact).abs() <= Err2::gamma_sum(1000).f32 * exact);
        }
        // Weights ±1 with an exact bias: the dot product's factor is γ_{k-1} (k = 3 here).
        let mut a = Aff::leaf(SlotId(1));
        a = a.add(&Aff::leaf(SlotId(2)), -1.0);
        assert_eq!(RealLowerer::dot_gamma(&a, 0.25), Err2::gamma_sum(3));
        assert_eq!(RealLowerer::dot_gamma(&a, 0.0), Err2::gamma_sum(2));
        assert_eq!(RealLowerer::dot_gamma(&a.scale(3.0), 0.0), Err2::gamma(4, true));
    }

    #[test]
    fn relu_is_exact_with_a_knot_at_the_kink() {
        let f = F::Ter(Box::new(F::Lin(1.0, 0.0)), Box::new(F::Cmp(Box::new(F::Lin(1.0, 0.0)), BinOp::Gt, Box::new(F::C(0.0)))), Box::new(F::C(0.0)));
        let pl = build_pl(&f, -3.0, 2.0, 1e-9).unwrap();
        assert_eq!(pl.knots, vec![-3.0, 0.0, 2.0]);
        assert_eq!(pl.err, 0.0);
    }

    #[test]
    fn split_basis_reproduces_the_interpolant() {
        for f in [F::Exp(Box::new(F::Lin(1.0, 0.0))), F::Mul(Box::new(F::Lin(1.0, 0.0)), Box::new(F::Lin(1.0, 0.0))), F::Div(Box::new(F::C(1.0)), Box::new(F::Lin(1.0, 2.5)))] {
            let pl = build_pl(&f, -2.0, 1.0, 1e-4).unwrap();
            let (f0, units, mag) = split_basis(&pl);
            for i in 0..=300 {
                let x = -2.0 + 3.0 * i as f64 / 300.0;
                let j = pl.knots.partition_point(|&t| t <= x).clamp(1, pl.knots.len() - 1);
                let (a, b) = (pl.knots[j - 1], pl.knots[j]);
                let want = pl.values[j - 1] + (pl.values[j] - pl.values[j - 1]) * (x - a) / (b - a);
                let terms: Vec<f64> = units.iter().map(|&(d, t, c)| c * (d * (x - t)).max(0.0)).collect();
                let got = f0 + terms.iter().sum::<f64>();
                assert!((got - want).abs() < 1e-9, "{f:?} at {x}: {got} vs {want}");
                assert!(terms.iter().map(|t| t.abs()).sum::<f64>() <= mag + 1e-9);
            }
        }
    }

    #[test]
    fn steps_are_refused() {
        let f = F::Cmp(Box::new(F::Lin(1.0, 0.0)), BinOp::Gt, Box::new(F::C(0.0)));
        assert!(build_pl(&f, -1.0, 1.0, 1e-3).unwrap_err().contains("jumps"));
    }
}
