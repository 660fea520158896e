//! Relative error bounds, and the certificate of a ratio `Σ_j a_j·b_j · f(Σ_j a_j)` (a softmax:
//! `a_j = exp(s_j - m)`, `f(x) = 1/max(x, 1)`), docs/compiler.md "Real-valued programs".
//!
//! The absolute analysis of `real.rs` bounds every resident by `|computed - exact| ≤ e`. For the
//! softmax that loses a factor n twice: every `E_j = exp(..)` carries the absolute error of the
//! score, the numerator `Σ_j E_j W_j` collects n of them, the reciprocal of the row sum another
//! n, and the final product multiplies `max|numerator|` (n·max|W|) by the reciprocal's error.
//! Here a resident may also carry *relative* bounds: a list of pairs `(ρ, α)`, each one valid on
//! its own, meaning
//!
//! ```text
//!     |computed - exact| ≤ ρ·|exact| + α        at every position.
//! ```
//!
//! A list (not one pair) because how the error splits between ρ and α is a choice (the far tail
//! of exp is better charged to α); the i-th pairs of residents derived from one source belong
//! together, and the ratio certificate takes the best index. Every step below is proved in its
//! comment; all quantities are `Err2` (the f32 and the f64 arithmetic side by side).

use super::{gamma_u, min2, Err2, Pl, F, U32, U64};
use crate::plan::SlotId;

/// Valid relative bounds `(ρ, α)`, see the module documentation.
pub(super) type Rel = Vec<(Err2, Err2)>;

fn max2(a: Err2, b: Err2) -> Err2 {
    Err2 { f32: a.f32.max(b.f32), f64: a.f64.max(b.f64) }
}

fn div(a: Err2, x: f64) -> Err2 {
    Err2 { f32: a.f32 / x, f64: a.f64 / x }
}

fn one() -> Err2 {
    Err2::both(1.0)
}

/// How a unary block's pre-activations round: unit i's by at most `gamma·(mag + |t_i|)`
/// (`mag` = Σ|weights·inputs| + |bias part|), and, with `terms = Some(K)`, when every
/// pre-activation adds K exact terms (its inputs with weights ±1 and an f32 bias), also by what
/// [`Pre::rounding`] derives from the argument being small where it is evaluated.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pre {
    pub gamma: Err2,
    pub mag: Err2,
    pub terms: Option<usize>,
    /// A bound every pre-activation has one term at least this large in (0: none known).
    pub big: Err2,
}

impl Pre {
    /// A bound on `Σ_i |c_i|·|ε_i|` over the units that can be active for a computed argument
    /// in `[lo, hi]` (`sum_c = Σ|c_i|`, `sum_ct = Σ|c_i||t_i|` over them).
    ///
    /// Always `gamma·(mag·Σ|c_i| + Σ|c_i||t_i|)`. With K exact terms, also the following. Unit
    /// i's pre-activation adds K leaves whose computed values are bounded by `m_l`, with
    /// `M_i = Σ m_l ≤ mag + |t_i|`, and whose exact sum is `±(x̂ - t_i)`, x̂ the argument from
    /// the computed inputs: `|x̂ - t_i| ≤ W_i = max(|lo|, |hi|) + |t_i|` for x̂ in `[lo, hi]`.
    /// Whatever the summation tree, each of its K - 1
    /// additions rounds by at most u times its exact result, which is the sum of the leaves
    /// below it, Σ_A, plus the children's rounding (at most `γ_K·M_A`), and these errors reach
    /// the root unchanged. For the root, Σ_A is the whole sum: at most W_i. For any other node
    /// `|Σ_A| ≤ M_A` and `|Σ_A| = |whole - Σ_(not A)| ≤ W_i + M_i - M_A`, so `|Σ_A| ≤ (W_i + M_i)/2`.
    /// So `|ε_i| ≤ u·(W_i + (K - 2)·(W_i + M_i)/2 + (K - 1)·γ_K·M_i)`: where the argument is
    /// small and its terms are large (the softmax's `s - m` near the row maximum), about half
    /// the worst chain, whose nodes are all as large as the terms' whole magnitude. And with
    /// one term at least `Z = big` in size: a node A either holds it, `|Σ_A| ≤ W_i + M_i - M_A
    /// ≤ W_i + M_i - Z`, or not, `|Σ_A| ≤ M_A ≤ M_i - Z`: every node is at most `W_i + M_i - Z`,
    /// the other terms' size plus the window, when one large term carries all the cancellation
    /// (the exp of `(s_h - m) + s_c` with `s_h - m` computed first).
    pub fn rounding(&self, sum_c: f64, sum_ct: f64, lo: f64, hi: f64) -> Err2 {
        let chain = self.gamma * (self.mag * sum_c + Err2::both(sum_ct));
        let Some(k) = self.terms else { return chain };
        // Σ|c_i|·W_i and Σ|c_i|·M_i.
        let cw = lo.abs().max(hi.abs()) * sum_c + sum_ct;
        let cm = self.mag * sum_c + Err2::both(sum_ct);
        // Σ|c_i|·node_i ≤ min(Σ|c_i|(W_i + M_i)/2, Σ|c_i|(W_i + M_i - Z)).
        let win = |u: f64, cm: f64, big: f64| {
            let node = ((cw + cm) / 2.0).min((cw + cm - big * sum_c).max(0.0));
            u * (cw + k.saturating_sub(2) as f64 * node + cm * k.saturating_sub(1) as f64 * gamma_u(k, u))
        };
        min2(chain, Err2 { f32: win(U32, cm.f32, self.big.f32), f64: win(U64, cm.f64, self.big.f64) })
    }
}

/// One MLP block computing `y = c0 + Σ_i c_i·relu(dir_i·(u - t_i))` (`units` = `(dir_i, t_i,
/// c_i)`, output weights included, `c0` the constant unit), the piecewise-linear interpolant of
/// `w·f` on `pl`'s knots. `input` lists the relative bounds of the argument `u` (a single pair
/// `(0, e)` when only its absolute error `e` is known); `pre` bounds the rounding of the units'
/// pre-activations ([`Pre`]) and
/// `sum_gamma(k)` the rounding of the block's output sum relative to Σ|unit outputs| when at most
/// k units (of `units`) are nonzero.
///
/// Proof, for an exact argument x in the segment k = [t_k, t_k+1] and the exact value w·f(x):
/// * every unit reads the same computed inputs, so unit i's computed pre-activation is
///   `dir_i·(x̂ - t_i) + ε_i` with one `x̂ = x + Δ` (`|Δ| ≤ Δ_in(x) = ρ_in·|x| + α_in`) and its
///   own rounding `|ε_i| ≤ pre.gamma·(pre.mag + |t_i|)` (weights stored in f32 included);
/// * so the output is `g(x̂) + Σ_i c_i·(relu(p_i + ε_i) - relu(p_i))` with g the interpolant
///   (`g = c0 + Σ c_i relu(p_i)`, `p_i = dir_i(x̂ - t_i)`). `|g(x̂) - g(x)| ≤ Δ_in·steep_k`,
///   steep_k the largest |slope| of g over the window `[t_k - δ, t_k+1 + δ]` (δ ≥ Δ_in + every
///   |ε_i|; outside the domain the units continue the end pieces); relu is 1-Lipschitz and only
///   units that can be positive move (`dir = +1` with `t_i < t_k+1 + δ`, `dir = -1` with
///   `t_i > t_k - δ`): `Σ|c_i||ε_i| ≤ rnd_k` over them ([`Pre::rounding`] for x̂ in the window);
/// * the interpolant differs from w·f by at most `|w|·e_k` (e_k: the segment's certified
///   interpolation error, `Pl::segs`);
/// * the computed output sum rounds by at most `sum_gamma(k)·Σ|c_i·relu(..)|` with k the units that
///   can be positive over the window (the others are exact zeros, which add no rounding), and that sum is at
///   most `mag_k = |c0| + max(Σ|c_i| relu(dir_i(y - t_i)), y ∈ {t_k - δ, t_k+1 + δ}) + rnd_k`
///   (a convex function of y is largest at an end of the window);
/// * so `|computed - w·f(x)| ≤ T_k = Δ_in·steep_k + rnd_k + |w|·e_k + sum_gamma(k)·mag_k`, and when f keeps its
///   sign on the segment, `|w·f(x)| ≥ m_k = |w|·min|f|`: `T_k ≤ (T_k / m_k)·|w·f(x)|`.
///
/// (Wide segments are cut into pieces and each piece is bounded the same way, with |f| on the
/// piece at least the interpolant at its ends less e_k: the interpolant is linear there.)
///
/// Each segment is charged either relatively (`ρ ≥ T_k/m_k`) or absolutely (`α ≥ T_k`); the
/// pairs returned are for thresholds τ on m_k (segments with `m_k ≥ τ` relative). With a
/// relative input (more than one pair, or ρ_in > 0), one pair per input pair (τ = 0: every
/// segment where f keeps its sign is charged relatively), so indices stay aligned.
#[allow(clippy::too_many_arguments)]
pub(super) fn unary(pl: &Pl, units: &[(f64, f64, f64)], w: f64, c0: f64, input: &Rel, pre: &Pre, sum_gamma: &dyn Fn(usize) -> Err2) -> Rel {
    unary_terms(pl, units, w, c0, input, pre, sum_gamma, false)
}

/// Only the output-sum term of [`unary`]'s `T_k` (`sum_gamma(k)·mag_k`, over the same windows and
/// as the same pairs): how far the rounding of the block's output sum alone can move its value,
/// relative to the exact value. Used for the part of a sum that every reader of a grouped block
/// computes for itself ([`shared_ratio`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn unary_sum_only(pl: &Pl, units: &[(f64, f64, f64)], w: f64, c0: f64, input: &Rel, pre: &Pre, sum_gamma: &dyn Fn(usize) -> Err2) -> Rel {
    unary_terms(pl, units, w, c0, input, pre, sum_gamma, true)
}

#[allow(clippy::too_many_arguments)]
fn unary_terms(pl: &Pl, units: &[(f64, f64, f64)], w: f64, c0: f64, input: &Rel, pre: &Pre, sum_gamma: &dyn Fn(usize) -> Err2, sum_only: bool) -> Rel {
    // Units sorted by t, per direction, with prefix sums of |c| and |c|·t (signed) and |c|·|t|.
    let side = |dir: f64| -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut u: Vec<(f64, f64)> = units.iter().filter(|x| x.0 == dir).map(|x| (x.1, x.2.abs())).collect();
        u.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut t, mut c, mut ct, mut cat) = (vec![], vec![0.0], vec![0.0], vec![0.0]);
        for (ti, ci) in u {
            t.push(ti);
            c.push(c.last().copied().unwrap_or(0.0) + ci);
            ct.push(ct.last().copied().unwrap_or(0.0) + ci * ti);
            cat.push(cat.last().copied().unwrap_or(0.0) + ci * ti.abs());
        }
        (t, c, ct, cat)
    };
    let (tp, cp, ctp, catp) = side(1.0);
    let (tm, cm, ctm, catm) = side(-1.0);
    let nm = tm.len();
    // Σ|c| relu(y - t) over dir +1, Σ|c| relu(t - y) over dir -1.
    let relu_sum = |y: f64| -> f64 {
        let i = tp.partition_point(|&t| t < y);
        let j = tm.partition_point(|&t| t <= y);
        (y * cp[i] - ctp[i]) + ((ctm[nm] - ctm[j]) - y * (cm[nm] - cm[j]))
    };
    let tmax = units.iter().fold(0.0f64, |m, u| m.max(u.1.abs()));
    let mut out = vec![];
    // One input pair (an absolute error, or one relative bound such as a materialised
    // difference's rounding): the output may split between ρ and α at any threshold, as one
    // source's pairs; several input pairs keep their index, one output each.
    let absolute_input = input.len() == 1;
    for &(rho_in, alpha_in) in input {
        // Per segment: T_k and m_k.
        let mut tk = vec![];
        for (k, &(e, fiv)) in pl.segs.iter().enumerate() {
            let (sa, sb) = (pl.knots[k], pl.knots[k + 1]);
            let (ya, yb) = (pl.values[k], pl.values[k + 1]);
            // A wide segment (the reciprocal's, far from 1) is cut into pieces whose ends differ
            // by at most about 1/16 of their size, so the argument's relative error and the
            // window are taken where the argument is, not at the segment's far end.
            let pieces = if sb > sa { (16.0 * (sb - sa) / sa.abs().min(sb.abs()).max(1e-300)).ceil().clamp(1.0, 64.0) as usize } else { 1 };
            for p in 0..pieces {
                let a = if p == 0 { sa } else { sa + (sb - sa) * p as f64 / pieces as f64 };
                let b = if p + 1 == pieces { sb } else { sa + (sb - sa) * (p + 1) as f64 / pieces as f64 };
                let din = rho_in * a.abs().max(b.abs()) + alpha_in;
                let delta = (din + pre.gamma * (pre.mag + Err2::both(tmax))).max();
                // Units that can be active for an argument in [a - δ, b + δ].
                let i = tp.partition_point(|&t| t < b + delta);
                let j = tm.partition_point(|&t| t <= a - delta);
                let sum_c = cp[i] + (cm[nm] - cm[j]);
                let sum_ct = catp[i] + (catm[nm] - catm[j]);
                // The steepest piece of the interpolant over the window (outside the domain the
                // units continue the end pieces).
                let (k0, k1) = (pl.knots.partition_point(|&t| t <= a - delta).saturating_sub(1), pl.knots.partition_point(|&t| t < b + delta).clamp(1, pl.knots.len() - 1));
                let steep = (k0.min(k1 - 1)..k1).map(|j| ((pl.values[j + 1] - pl.values[j]) / (pl.knots[j + 1] - pl.knots[j])).abs()).fold(0.0f64, f64::max) * w.abs();
                let rounding = pre.rounding(sum_c, sum_ct, a - delta, b + delta);
                let lip = din * steep + rounding;
                let mag = Err2::both(c0.abs() + relu_sum(a - delta).max(relu_sum(b + delta))) + rounding;
                // Only the units that can be active round in the output sum.
                let t = if sum_only { sum_gamma(i + (nm - j)) * mag } else { lip + Err2::both(w.abs() * e) + sum_gamma(i + (nm - j)) * mag };
                // |f| on the piece: at least the segment's bound, and at least the interpolant's
                // (linear on the segment) at the piece's ends less the interpolation error.
                let at = |x: f64| ya + (yb - ya) * (x - sa) / (sb - sa).max(1e-300);
                let m = w.abs()
                    * if fiv.lo > 0.0 {
                        fiv.lo.max(at(a).min(at(b)) - e)
                    } else if fiv.hi < 0.0 {
                        (-fiv.hi).max((-at(a)).min(-at(b)) - e)
                    } else {
                        0.0
                    };
                tk.push((t, m));
            }
        }
        let pair = |tau: f64| -> (Err2, Err2) {
            let (mut rho, mut alpha) = (Err2::default(), Err2::default());
            for &(t, m) in &tk {
                if m > 0.0 && m >= tau {
                    rho = max2(rho, div(t, m));
                } else {
                    alpha = max2(alpha, t);
                }
            }
            (rho, alpha)
        };
        if absolute_input {
            for tau in [f64::INFINITY, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-10, 1e-12, 0.0] {
                out.push(pair(tau));
            }
        } else {
            out.push(pair(0.0));
        }
    }
    out
}

/// Through a mean (or one-key gather) head of a value `v ≥ 0` read with weight 1: the head
/// returns `Σ_k p_k v'_k` (weights p_k ≥ 0 summing to 1, exact under hard attention) rounded by
/// at most `g·Σ_k p_k|v'_k|` (`g`: the value projection's and the mean's rounding, as in the
/// absolute bound). With `|v'_k - v_k| ≤ ρ v_k + α` and v_k ≥ 0:
/// `|out' - mean v| ≤ ρ·mean v + α + g·((1 + ρ)·mean v + α)`, and mean v = |exact output|.
pub(super) fn through_mean(rel: &Rel, g: Err2) -> Rel {
    rel.iter().map(|&(rho, alpha)| (rho + g * (one() + rho), alpha * (one() + g))).collect()
}

/// `N = Σ_j a_j·b_j` over J product terms (one gated MLP, no other term), each a_j a one-key
/// gather of a value `E ≥ 0` with `|a'_j - a_j| ≤ ρ·a_j + α`, each b_j with exact value
/// `|b_j| ≤ M` and computed within `e_b`. `q` bounds a term's rounding relative to |a'_j|:
/// the gated unit computes `a'(1 + ε_a)·(b' + η_b)·(1 + ε_2)` (pre-activations and product),
/// so `|unit - a'b'| ≤ |a'|·r_b` with `r_b = (M + e_b)·((1+γ_a)(1+γ_2) - 1) + γ_b·mag_b·(1+γ_a)(1+γ_2)`,
/// and the block's sum adds `γ_H·Σ|units| ≤ γ_H·Σ|a'_j|·(M + e_b + r_b)`: `q = r_b + γ_H·(M + e_b + r_b)`.
/// Then, with `S = Σ_j a_j` and `|a'_j| ≤ (1 + ρ)a_j + α`:
/// `|N' - N| ≤ Σ_j |a'_j - a_j||b'_j| + a_j|b'_j - b_j| + |a'_j|·q ≤ κ·S + λ` with
/// `κ = ρ(M + e_b) + e_b + (1 + ρ)q` and `λ = J·α·(M + e_b + q)`.
pub(super) fn weighted_sum(rho: Err2, alpha: Err2, m: f64, e_b: Err2, q: Err2, terms: usize) -> (Err2, Err2) {
    let mb = Err2::both(m) + e_b;
    let kappa = rho * mb + e_b + (one() + rho) * q;
    let lambda = alpha * (mb + q) * terms as f64;
    (kappa, lambda)
}

/// What the ratio certificate needs of `Y = N·f(x)` (module documentation): N within `κS + λ`
/// of its exact value, `|N| ≤ M·S` (weights a_j ≥ 0 summing to S, `|b_j| ≤ M`), S in
/// `[0, s_max]`, f's argument `x ≥ S` (x = c·t, t the mean of the same E over the keys that
/// exist: at full length exactly the gathered ones, c of them, so x = S; on a shorter input
/// `|K_L| ≤ c` of them, the gathers of missing keys read 0, so x = (c/|K_L|)·S ≥ S), f's
/// computed value within `σ·f(x) + α_r` of f(x), `0 ≤ f ≤ f_sup` and `x·f(x) ≤ phi` for x ≥ 0
/// (so `S·f(x) ≤ x·f(x) ≤ phi`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ratio {
    pub kappa: Err2,
    pub lambda: Err2,
    pub sigma: Err2,
    pub alpha_r: Err2,
    pub m: f64,
    pub s_max: f64,
    pub phi: f64,
    pub f_sup: f64,
}

impl Ratio {
    /// `(bound on |N'·r' - N·f(x)|, bound on |N'·r'|)`. Proof: `N'r' - N f(x) = (N' - N)·r' +
    /// N·(r' - f(x))`, `|r'| ≤ f(x)(1 + σ) + α_r`, S·f(x) ≤ phi, f(x) ≤ f_sup, S ≤ s_max:
    /// `|N' - N||r'| ≤ κ·phi·(1+σ) + κ·s_max·α_r + λ·f_sup·(1+σ) + λ·α_r` and
    /// `|N||r' - f(x)| ≤ M·S·(σ f(x) + α_r) ≤ M·phi·σ + M·s_max·α_r`;
    /// `|N'||r'| ≤ ((M + κ)S + λ)(f(x)(1+σ) + α_r) ≤ (M + κ)(phi(1+σ) + s_max α_r) + λ(f_sup(1+σ) + α_r)`.
    /// No factor S (the row's length) multiplies κ, σ or M: the softmax-weighted mean of the
    /// b's moves by about 2·max|b|·(relative error of the weights).
    pub fn bound(&self) -> (Err2, Err2) {
        let m = Err2::both(self.m);
        let s1 = one() + self.sigma;
        let t1 = self.kappa * self.phi * s1 + (self.kappa * self.s_max + self.lambda) * self.alpha_r + self.lambda * self.f_sup * s1;
        let t2 = m * self.phi * self.sigma + m * self.s_max * self.alpha_r;
        let p = (m + self.kappa) * (s1 * self.phi + self.alpha_r * self.s_max) + self.lambda * (s1 * self.f_sup + self.alpha_r);
        (t1 + t2, p)
    }
}

/// `phi = sup x·f(x)` and `f_sup = sup f` over x ≥ 0, and whether f ≥ 0 there, from the
/// interval of f on each segment of the interpolant (a segment [a, b] with b ≥ 0 contributes
/// `b·max f` and `max f`).
pub(super) fn nonneg_profile(pl: &Pl) -> Option<(f64, f64)> {
    let (mut phi, mut sup) = (0.0f64, 0.0f64);
    for (k, &(_, fiv)) in pl.segs.iter().enumerate() {
        let b = pl.knots[k + 1];
        if b < 0.0 {
            continue;
        }
        if fiv.lo < 0.0 || !fiv.hi.is_finite() {
            return None;
        }
        phi = phi.max(b * fiv.hi);
        sup = sup.max(fiv.hi);
    }
    Some((phi, sup))
}

/// Relative bounds against a **row-shifted reference**: `|computed_j - C_r·v_j| ≤ ρ·C_r·v_j + α`
/// (each pair of `rel`), with v_j the exact value at position j and `C_r > 0` one number per row
/// r of the maximum head `max` (the keys its query at j selects), `|ln C_r| ≤ log_c`.
///
/// Where it comes from: `E = w·exp(κ·u)` with `u = λ(s - m) + k`, m the row maximum of an
/// affine form s (`aggregate_max` of s, or a one-key gather of one that reads each row's
/// maximum from one key of the row: `MaxInfo` in `real.rs`). The computed argument at position
/// j is `u'_j = u_j + λ(ε_j - D_r - η_j)` (plus the units' own rounding, charged by
/// [`unary`]), where `ε_j = s'_j - s_j` (|ε_j| ≤ e_s, s' the exact value of the computed form),
/// `D_r = max_{k∈r} s'_k - max_{k∈r} s_k + c_r` and `η_j = m'_j - max_{k∈r} s'_k - c_r`: the
/// head's own error (tie tolerance, score and mean rounding) split into `c_r`, one number per
/// row (|c_r| ≤ e_common: the maximum head's own error when its value is read from one key per
/// row), and the rest (|η_j| ≤ e_own). `D_r` depends on the row only (every query of the row
/// reads the same keys), and `|D_r| ≤ e_s + e_common`. So against the reference argument
/// `x_j = u_j - λD_r` the argument's error is at most `|λ|(e_s + e_own)`, not
/// `|λ|(e_s + e_m) = |λ|(2e_s + e_own + e_common)`, and the reference value is
/// `w·exp(κ x_j) = C_r·E_j` with `C_r = exp(-κλD_r)`: `log_c = |κλ|·(e_s + e_common)`. (x_j may
/// exceed u's exact range by |λ|(e_s + e_common): exp must go on past 0 that far, a clamp
/// `min(·, x_max)` only above it, checked, and x_j lies inside the interpolated domain, which is
/// widened by u's whole error.)
///
/// The reference passes through mean and one-key gather heads like exact values do
/// ([`through_mean`] holds for any nonnegative reference), and through a unary `r = f(c·t)` of a
/// mean t of it (bounds relative to `f(c·t~)`, t~ the mean of the reference). The ratio
/// certificate then uses it where every key read at a position lies in one row r, and that row is
/// exactly the keys read: `Ñ = Σ_j C_r E_j b_j = C_r·N`, `x~ = c·t~ = C_r·x`, and when
/// `f(y) = k/y` for `y ≥ θ` and `C_r·x ≥ θ` (x ≥ floor: the row's maximum, a key of the row,
/// contributes `floor = w·exp(κk)` to the sum; checked as `e^{-log_c}·floor ≥ θ`),
/// `Ñ·f(x~) = C_r N k/(C_r x) = N·f(x)`: the exact value. (On a shorter input the keys past its
/// end drop out of the row, of the gathers and of the mean alike, and D_r is taken over the
/// keys that exist: the same argument.)
/// So [`Ratio::bound`] with the shifted κ, λ, σ (and s_max scaled by `e^{log_c}`) bounds
/// `|N'r' - N f(x)|`; the common part of the max head's error costs nothing.
#[derive(Clone, Debug)]
pub(super) struct Shifted {
    pub rel: Rel,
    pub max: SlotId,
    pub log_c: Err2,
    pub floor: f64,
}

/// `(κ, x_max)` when `f(x) = exp(κx + b)` for every `x ≤ x_max`: `F::Exp` of an affine function
/// of x (x_max = ∞), or of `κ·min(x, x_max)` as the prelude writes `min` (`x if x < x_max else
/// x_max`; `<=` alike). Only exponentials turn a shifted argument into a common factor.
pub(super) fn exp_rate(f: &F) -> Option<(f64, f64)> {
    let F::Exp(inner) = f else { return None };
    let is_x = |g: &F| matches!(g, F::Lin(a, b) if *a == 1.0 && *b == 0.0);
    // g(x) = a·x + b for x ≤ x_max: (a, x_max).
    let affine_below = |g: &F| -> Option<(f64, f64)> {
        match g {
            F::Lin(a, _) => Some((*a, f64::INFINITY)),
            F::Ter(then, cond, other) => match (then.as_ref(), cond.as_ref(), other.as_ref()) {
                (t, F::Cmp(a, op, b), F::C(top))
                    if is_x(t) && is_x(a) && matches!(op, raspc_lang::ast::BinOp::Lt | raspc_lang::ast::BinOp::Le) && matches!(b.as_ref(), F::C(c) if c == top) =>
                {
                    Some((1.0, *top))
                }
                _ => None,
            },
            _ => None,
        }
    };
    match inner.as_ref() {
        F::Mul(x, y) => match (x.as_ref(), y.as_ref()) {
            (F::C(k), g) | (g, F::C(k)) => affine_below(g).map(|(a, top)| (k * a, top)),
            _ => None,
        },
        g => affine_below(g),
    }
}

/// θ when `f(y) = k / y` for every `y ≥ θ` (k > 0): `k / y` (θ = the smallest positive
/// number), or `k / max(y, θ)` as the prelude writes `max` (`y if y > θ else θ`, or `θ if θ > y
/// else y`; `>=` alike: at y = θ both branches are θ).
pub(super) fn reciprocal_above(f: &F) -> Option<f64> {
    let F::Div(num, den) = f else { return None };
    let F::C(k) = num.as_ref() else { return None };
    if *k <= 0.0 {
        return None;
    }
    let is_x = |g: &F| matches!(g, F::Lin(a, b) if *a == 1.0 && *b == 0.0);
    let cmp_ok = |op: &raspc_lang::ast::BinOp| matches!(op, raspc_lang::ast::BinOp::Gt | raspc_lang::ast::BinOp::Ge);
    match den.as_ref() {
        g if is_x(g) => Some(f64::MIN_POSITIVE),
        F::Ter(then, cond, other) => match (then.as_ref(), cond.as_ref(), other.as_ref()) {
            (t, F::Cmp(a, op, b), F::C(th)) if is_x(t) && is_x(a) && cmp_ok(op) && matches!(b.as_ref(), F::C(c) if c == th) => Some(*th),
            (F::C(th), F::Cmp(a, op, b), o) if is_x(o) && is_x(b) && cmp_ok(op) && matches!(a.as_ref(), F::C(c) if c == th) => Some(*th),
            _ => None,
        },
        _ => None,
    }
}

/// The ratio certificate with the **weights' shared error** taken once (Popoviciu), for the
/// softmax-weighted mean `Y = N·f(x)` of [`Ratio`] against a reference `R_j ≥ 0` (exact E_j, or
/// C_r·E_j of [`Shifted`]) with `f(y) = k/y` for y ≥ θ.
///
/// Setting. `P_j` is the exact sum of what the block computing E stored at key j (its output, or
/// the partial sums of a grouped block), `|P_j - R_j| ≤ ρ_s R_j + α_s` (`shared`). Each head that
/// reads E reads `V_j = P_j + η_j`, `|η_j| ≤ ρ_r R_j + α_r` (`reader`: a grouped block's partial
/// sums added by that head's own value projection, which two heads may round differently; none
/// for a block with one output). The one-key gathers round by at most `g_a·|V_j|`, the mean
/// head by `g_t·mean|V|`. The row has at most J keys; the reference row sum `S = Σ_j R_j` lies
/// in `[s_min, s_max]`; `|b_j| ≤ M` (exact), the b's computed within e_b, the products and the
/// block's sum rounding within `q·|a'_j|` (as in [`weighted_sum`]). The program's value is
/// `Y = k·(|K|/c)·N/S` (x = (c/|K|)·S ≥ θ, |K| the keys of the row that exist, c the mean's
/// weight: the identity of [`Ratio`]; C_r cancels).
///
/// Proof. Write `S_P = Σ_j P_j`, `Ŷ = Σ_j P_j b_j / S_P` and `x_P = (c/|K|)·S_P`.
/// * R_j ≤ (|P_j| + α_s)/(1 - ρ_s), so `|η_j| ≤ ρ'|P_j| + α'` with `ρ' = ρ_r/(1 - ρ_s)`,
///   `α' = α_r + ρ_r α_s/(1 - ρ_s)` ([`Self::reader_of_computed`]). Hence the gathers are within
///   `ρ_a|P_j| + α_a` of P_j ([`through_mean`]'s algebra with |P_j| for v_j), and
///   [`weighted_sum`] gives `|N' - N_P| ≤ κ̂·Σ|P_j| + λ̂` with `N_P = Σ_j P_j b_j`; the mean is
///   within `ρ_t·t_P + α_t` of `t_P = mean P` ([`Self::mean`]: mean|P| ≤ t_P + 2α_s, since a
///   negative P_j is at least -α_s). So r' is within `σ̂·f(x_P) + α̂` of f(x_P) (the caller's
///   [`unary`] of r with the mean's bounds as its input, x_P in r's interpolated domain).
/// * `S_P ≥ S·den` with `den = 1 - ρ_s - J·α_s/s_min`, and `Σ|P_j| ≤ S_P + 2J·α_s`, so
///   `Σ|P_j|/S_P ≤ A = 1 + 2Jα_s/(s_min·den)`. Checked: `s_min·den ≥ θ`, so f(x_P) = k/x_P and
///   `Σ|P_j|·f(x_P) ≤ k·A`. [`Ratio::bound`] with (κ̂, λ̂, σ̂, α̂), `Σ|P_j| ≤ (1 + ρ_s)s_max + Jα_s`
///   and phi·A bounds `|N'r' - N_P·f(x_P)|`, and `N_P f(x_P) = k(|K|/c)·Ŷ`.
/// * `Ŷ - Y = Σ_j (P_j - R_j)(b_j - Y)/S_P` (Σ_j R_j (b_j - Y) = 0). Split `P_j - R_j = ε_j R_j + β_j`
///   with |ε_j| ≤ ρ_s, |β_j| ≤ α_s. With p_j = R_j/S (weights of a probability):
///   `Σ_j ε_j R_j (b_j - Y) = S·E_p[(ε - E_p ε)(b - Y)] ≤ S·sd_p(ε)·sd_p(b) ≤ S·ρ_s·M` (Cauchy-
///   Schwarz; E_p[(ε - E_p ε)²] ≤ E_p[ε²] ≤ ρ_s², E_p[(b - Y)²] ≤ E_p[b²] ≤ M²), and
///   `|Σ_j β_j (b_j - Y)| ≤ 2J·M·α_s`. So `k(|K|/c)|Ŷ - Y| ≤ k·(ρ_s M + 2JMα_s/s_min)/den`.
///
/// The weights' shared relative error ρ_s moves the mean by ρ_s·M once: [`Ratio`] charges it
/// twice (once in the numerator, once in the reciprocal), which is what it must do when the
/// numerator's and the total's weights may differ.
#[derive(Clone, Copy, Debug)]
pub(super) struct SharedWeights {
    pub shared: (Err2, Err2),
    pub reader: (Err2, Err2),
    pub g_gather: Err2,
    pub g_mean: Err2,
    pub terms: usize,
    pub s_min: f64,
    pub s_max: f64,
    pub m: f64,
    pub e_b: Err2,
    pub q: Err2,
    pub k: f64,
    pub phi: f64,
    pub f_sup: f64,
}

impl SharedWeights {
    /// `den` of the proof, per arithmetic; None when either is not positive or ρ_s ≥ 1/2.
    fn den(&self) -> Option<Err2> {
        let (rho, alpha) = self.shared;
        let j = self.terms as f64;
        let d = Err2 { f32: 1.0 - rho.f32 - j * alpha.f32 / self.s_min, f64: 1.0 - rho.f64 - j * alpha.f64 / self.s_min };
        (rho.max() < 0.5 && d.f32 > 0.0 && d.f64 > 0.0 && self.s_min > 0.0).then_some(d)
    }

    /// The reader's bounds relative to |P_j| (proof, first point).
    fn reader_of_computed(&self) -> (Err2, Err2) {
        let ((rs, as_), (rr, ar)) = (self.shared, self.reader);
        let inv = Err2 { f32: 1.0 / (1.0 - rs.f32), f64: 1.0 / (1.0 - rs.f64) };
        (rr * inv, ar + rr * as_ * inv)
    }

    /// Bounds of the mean head against `t_P = mean P`, relative to t_P: the input of r's
    /// [`unary`] (its α times the mean's weight c).
    pub fn mean(&self) -> (Err2, Err2) {
        let (rho, alpha) = self.reader_of_computed();
        let r = rho + self.g_mean * (one() + rho);
        (r, alpha * (one() + self.g_mean) + r * self.shared.1 * 2.0)
    }

    /// The smallest `S_P` (proof, second point), None when it is not positive.
    pub fn s_p_min(&self) -> Option<f64> {
        let d = self.den()?;
        Some(self.s_min * d.f32.min(d.f64))
    }

    /// Where r's argument `x_P = c·mean P` can lie: from s_min·den (x_P ≥ S_P, as |K| ≤ c) to
    /// `c·max P ≤ c·((1 + ρ_s)·r_max + α_s)`, r_max bounding every R_j. None when den is not
    /// positive.
    pub fn x_range(&self, c: f64, r_max: f64) -> Option<(f64, f64)> {
        let (rho, alpha) = self.shared;
        Some((self.s_p_min()?, c * ((1.0 + rho.max()) * r_max + alpha.max())))
    }

    /// `(bound on |N'r' - Y|, bound on |N'r'|)` given r's bounds `(σ̂, α̂)` against f(x_P), or
    /// None when `den` is not positive or f(x_P) might not be k/x_P (θ above s_min·den).
    pub fn bound(&self, sigma: Err2, alpha_r: Err2, theta: f64) -> Option<(Err2, Err2)> {
        let den = self.den()?;
        let sp_min = self.s_p_min()?;
        if sp_min < theta {
            return None;
        }
        let (rho_s, alpha_s) = self.shared;
        let j = self.terms as f64;
        let (rho_c, alpha_c) = self.reader_of_computed();
        let (rho_a, alpha_a) = (rho_c + self.g_gather * (one() + rho_c), alpha_c * (one() + self.g_gather));
        let (kappa, lambda) = weighted_sum(rho_a, alpha_a, self.m, self.e_b, self.q, self.terms);
        let a = 1.0 + 2.0 * j * alpha_s.max() / sp_min;
        // Σ|P_j| ≤ (1 + ρ_s)·S + J·α_s.
        let abs_max = (1.0 + rho_s.max()) * self.s_max + j * alpha_s.max();
        let (e, p) = Ratio { kappa, lambda, sigma, alpha_r, m: self.m, s_max: abs_max, phi: self.phi.max(self.k) * a, f_sup: self.f_sup }.bound();
        let m = Err2::both(self.m);
        let cov = (rho_s * m + alpha_s * (2.0 * j * self.m / self.s_min)) * self.k;
        let cov = Err2 { f32: cov.f32 / den.f32, f64: cov.f64 / den.f64 };
        Some((e + cov, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform numbers in [0, 1) from a seed (xorshift).
    fn uniform(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Y = Σ R_j b_j / Σ R_j and the same with weights P_j, for the certificate's setting with
    /// exact readers, products and reciprocal (k = 1, θ = 15/16).
    fn means(r: &[f64], p: &[f64], b: &[f64]) -> (f64, f64) {
        let y = r.iter().zip(b).map(|(r, b)| r * b).sum::<f64>() / r.iter().sum::<f64>();
        let yp = p.iter().zip(b).map(|(p, b)| p * b).sum::<f64>() / p.iter().sum::<f64>();
        (y, yp)
    }

    fn shared(rho: f64, alpha: f64, j: usize, m: f64, s_max: f64) -> SharedWeights {
        let z = Err2::default();
        SharedWeights {
            shared: (Err2::both(rho), Err2::both(alpha)),
            reader: (z, z),
            g_gather: z,
            g_mean: z,
            terms: j,
            s_min: 1.0,
            s_max,
            m,
            e_b: z,
            q: z,
            k: 1.0,
            phi: 1.0,
            f_sup: 1.0 / 0.9375,
        }
    }

    #[test]
    fn shared_weights_move_the_mean_by_rho_m_once_and_the_bound_holds() {
        // Equal weights, b = ±M alternating, ε = ρ·sign(b): the mean moves by exactly ρM, which
        // the certificate reaches (the two-sided ratio bound charges 2ρM).
        let (rho, m, j) = (1e-3, 5.0, 8);
        let r = vec![1.0; j];
        let b: Vec<f64> = (0..j).map(|i| if i % 2 == 0 { m } else { -m }).collect();
        let p: Vec<f64> = r.iter().zip(&b).map(|(r, b)| r * (1.0 + rho * b.signum())).collect();
        let (y, yp) = means(&r, &p, &b);
        assert!(((yp - y) - rho * m).abs() < 1e-12, "{}", yp - y);
        let sw = shared(rho, 0.0, j, m, j as f64);
        let (e, _) = sw.bound(Err2::default(), Err2::default(), 0.9375).unwrap();
        assert!(e.f64 >= rho * m && e.f64 <= 1.01 * rho * m, "{e:?}");
        let old =
            Ratio { kappa: Err2::both(rho * m), lambda: Err2::default(), sigma: Err2::both(rho), alpha_r: Err2::default(), m, s_max: j as f64, phi: 1.0, f_sup: 1.0 / 0.9375 }.bound().0;
        assert!(old.f64 >= 1.9 * rho * m, "{old:?}");
        // Random rows (a maximum of weight 1, the rest in (0, 1]), perturbations of every sign
        // within ρR + α, the adversarial ones included: within the bound.
        let mut next = uniform(0x9e37_79b9_7f4a_7c15u64);
        for case in 0..2000 {
            let j = 1 + (next() * 40.0) as usize;
            let (rho, alpha) = (next() * 1e-2, if case % 3 == 0 { 0.0 } else { next() * 1e-4 });
            let mut r: Vec<f64> = (0..j).map(|_| (-8.0 * next()).exp()).collect();
            r[0] = 1.0;
            let b: Vec<f64> = (0..j).map(|_| m * (2.0 * next() - 1.0)).collect();
            let y = r.iter().zip(&b).map(|(r, b)| r * b).sum::<f64>() / r.iter().sum::<f64>();
            let p: Vec<f64> = r
                .iter()
                .zip(&b)
                .map(|(r, b)| {
                    let s = if case % 2 == 0 { (b - y).signum() } else { 2.0 * next() - 1.0 };
                    r * (1.0 + rho * s) + alpha * s
                })
                .collect();
            let (y, yp) = means(&r, &p, &b);
            let sw = shared(rho, alpha, j, m, j as f64);
            let (e, _) = sw.bound(Err2::default(), Err2::default(), 0.9375).unwrap();
            assert!((yp - y).abs() <= e.f64, "case {case}: |Y' - Y| = {} > {}", (yp - y).abs(), e.f64);
        }
    }

    /// The whole chain the certificate covers, simulated with every error at its bound and
    /// signs chosen adversarially or at random: shared error of the stored weights, each
    /// reader's own error, the gathers' and the mean's rounding, the b's error, the products'
    /// rounding, rows shorter than the mean's weight c (keys past the input's end), and the
    /// reciprocal's own relative error σ from the mean's bounds. Never above the bound.
    #[test]
    fn shared_weights_bound_every_error_source_together() {
        let mut next = uniform(0x1234_5678_9abc_def1u64);
        // Magnitudes spread over decades.
        let spread = |x: f64| x * 10f64.powf(-1.0 - 3.0 * x.clamp(1e-9, 1.0));
        let (theta, k) = (0.9375, 1.0);
        let mut checked = 0;
        for case in 0..40_000 {
            let c = 1 + (next() * 24.0) as usize;
            let keys = if case % 4 == 0 { (1 + (next() * c as f64) as usize).min(c) } else { c };
            let m = 0.5 + 4.0 * next();
            let (rho_s, alpha_s) = (spread(next()) * 0.05, if case % 3 == 0 { 0.0 } else { spread(next()) * 1e-3 });
            let (rho_r, alpha_r) = (spread(next()) * 0.02, spread(next()) * 1e-4);
            let (g, gm, eb, q) = (spread(next()) * 0.01, spread(next()) * 0.01, spread(next()) * 0.01, spread(next()) * 0.01);
            let sw = SharedWeights {
                shared: (Err2::both(rho_s), Err2::both(alpha_s)),
                reader: (Err2::both(rho_r), Err2::both(alpha_r)),
                g_gather: Err2::both(g),
                g_mean: Err2::both(gm),
                terms: c,
                s_min: 1.0,
                s_max: c as f64,
                m,
                e_b: Err2::both(eb),
                q: Err2::both(q),
                k,
                phi: 1.0,
                f_sup: k / theta,
            };
            let Some(sp_min) = sw.s_p_min().filter(|&x| x >= theta) else { continue };
            // An exact reciprocal of the computed argument: its relative error against f(x_P)
            // is that of the argument, |Δ| ≤ ρ_t·x_P + c·α_t with x_P ≥ sp_min.
            let (rt, at) = sw.mean();
            let d = rt.f64 + c as f64 * at.f64 / sp_min;
            if d >= 0.5 {
                continue;
            }
            let Some((e, _)) = sw.bound(Err2::both(d / (1.0 - d)), Err2::default(), theta) else { continue };
            let mut r: Vec<f64> = (0..keys).map(|_| (-8.0 * next()).exp()).collect();
            r[0] = 1.0;
            let b: Vec<f64> = (0..keys).map(|_| if next() < 0.5 { m } else { -m } * if case % 5 == 0 { next() } else { 1.0 }).collect();
            let y = r.iter().zip(&b).map(|(r, b)| r * b).sum::<f64>() / r.iter().sum::<f64>();
            let strategy = case % 6;
            let mut sign = |j: usize, which: u32| -> f64 {
                match strategy {
                    0 => 2.0 * next() - 1.0,
                    1 => 1.0,
                    2 => -1.0,
                    3 => (b[j] - y).signum(),
                    4 => -(b[j] - y).signum(),
                    _ => (b[j] - y).signum() * if which.is_multiple_of(2) { 1.0 } else { -1.0 },
                }
            };
            let p: Vec<f64> = (0..keys)
                .map(|j| {
                    let s = sign(j, 0);
                    r[j] * (1.0 + rho_s * s) + alpha_s * s
                })
                .collect();
            let mut num = 0.0;
            for j in 0..keys {
                let v = p[j] + (rho_r * r[j] + alpha_r) * sign(j, 1);
                let a = v + g * v.abs() * sign(j, 2);
                let bj = b[j] + eb * sign(j, 3);
                num += a * bj + q * a.abs() * sign(j, 4);
            }
            let read: Vec<f64> = (0..keys).map(|j| p[j] + (rho_r * r[j] + alpha_r) * sign(j, 5)).collect();
            let mean = read.iter().sum::<f64>() / keys as f64;
            let mean_abs = read.iter().map(|v| v.abs()).sum::<f64>() / keys as f64;
            let t = mean + gm * mean_abs * sign(0, 6);
            let got = num * k / (c as f64 * t).max(theta);
            let want = k * (keys as f64 / c as f64) * y;
            assert!((got - want).abs() <= e.f64, "case {case}: {} > {} ({sw:?})", (got - want).abs(), e.f64);
            checked += 1;
        }
        assert!(checked > 20_000, "{checked}");
    }

    #[test]
    fn shared_weights_need_the_row_sum_above_the_clamp() {
        // S_P could fall below θ (f would not be k/x there): no certificate.
        let sw = shared(0.2, 0.0, 4, 1.0, 4.0);
        assert!(sw.bound(Err2::default(), Err2::default(), 0.9375).is_none());
        assert!(shared(0.6, 0.0, 4, 1.0, 4.0).bound(Err2::default(), Err2::default(), 0.1).is_none());
        assert!(shared(0.01, 0.0, 4, 1.0, 4.0).bound(Err2::default(), Err2::default(), 0.9375).is_some());
    }

    /// The f32 sum of `nodes` in a tree: `how` 0 random pairs, 1 a chain from the end, else a
    /// chain from the start.
    fn tree_sum(mut nodes: Vec<f32>, how: usize, next: &mut dyn FnMut() -> f64) -> f32 {
        while nodes.len() > 1 {
            let n = nodes.len();
            let (i, j) = match how {
                0 => {
                    let i = (next() * n as f64) as usize % n;
                    (i, (i + 1 + (next() * (n - 1) as f64) as usize % (n - 1)) % n)
                }
                1 => (n - 2, n - 1),
                _ => (0, 1),
            };
            let (a, b) = (i.min(j), i.max(j));
            let v = nodes[a] + nodes[b];
            nodes.remove(b);
            nodes[a] = v;
        }
        nodes[0]
    }

    #[test]
    fn cancelling_pre_activations_round_by_the_window_not_the_terms() {
        // Softmax-like pre-activations: K - 1 large terms (scores' partial sums and minus the row
        // maximum) whose sum x̂ is small, minus a knot t, added in f32 in every kind of tree
        // (random pairings, chains from either end, largest terms first): the error stays
        // within Pre::rounding for a window holding x̂, which is well under the worst chain.
        let mut next = uniform(0x51f1_5eed);
        let mut worst = 0.0f64;
        let mut gain = 0.0f64;
        for case in 0..600 {
            let k = 3 + (case % 10);
            let scale = 2f64.powi(4 + (case % 9) as i32);
            let mut slots: Vec<f32> = (0..k - 2).map(|_| ((next() * 0.9 + 0.1) * scale / (k - 2) as f64) as f32).collect();
            // The last slot (minus the maximum) nearly cancels the others.
            let others: f64 = slots.iter().map(|&v| f64::from(v)).sum();
            slots.push((-(others + next() * 20.0 - 18.0)) as f32);
            let t = (-20.0 * next()) as f32;
            let x: f64 = slots.iter().map(|&v| f64::from(v)).sum();
            let mut leaves = slots.clone();
            leaves.push(-t);
            let exact = x - f64::from(t);
            let mag: f64 = slots.iter().map(|&v| f64::from(v.abs())).sum();
            let pre = Pre { gamma: Err2::both(1.0), mag: Err2::both(mag), terms: Some(k), big: Err2::default() };
            let (lo, hi) = (x - next(), x + next());
            let bound = pre.rounding(1.0, f64::from(t.abs()), lo, hi).f32;
            let chain = super::super::chain_err(&leaves.iter().map(|&v| f64::from(v.abs())).collect::<Vec<_>>(), U32);
            let mut nodes = leaves.clone();
            if case % 4 == 3 {
                nodes.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
            }
            let err = (f64::from(tree_sum(nodes, case % 4, &mut next)) - exact).abs();
            assert!(err <= bound, "case {case}: error {err} > {bound}");
            worst = worst.max(err / bound);
            if scale >= 512.0 && k >= 6 {
                gain = gain.max(bound / chain);
            }
        }
        assert!(worst > 0.05, "{worst}");
        // About (K-2)/2 nodes at half the terms' size instead of a chain's K-1 at up to all of it
        // (large terms, K ≥ 6: U's exp block adds √d partial sums of a score, the maximum and a knot).
        assert!(gain > 0.0 && gain < 0.75, "{gain}");
        // One term bounded by a large Z carrying the cancellation (`big`): the exp of
        // `(s_h - m) + s_c` with z = s_h - m computed first, |z| ≤ Z = 2d² by its interval but
        // small wherever the argument is. Every node of any tree is at most the window plus the
        // other terms, far below half of all the terms' bounds.
        let (mut worst, mut gain) = (0.0f64, 0.0f64);
        for case in 0..600 {
            let k = 3 + (case % 8);
            let scale = 2f64.powi(6 + (case % 7) as i32);
            let mut slots: Vec<f32> = (0..k - 2).map(|_| ((next() - 0.5) * scale / 8.0 / (k - 2) as f64) as f32).collect();
            let others: f64 = slots.iter().map(|&v| f64::from(v)).sum();
            slots.push((next() * 20.0 - 18.0 - others) as f32);
            let t = (-20.0 * next()) as f32;
            let x: f64 = slots.iter().map(|&v| f64::from(v)).sum();
            let mut leaves = slots.clone();
            leaves.push(-t);
            let exact = x - f64::from(t);
            let mag: f64 = slots[..k - 2].iter().map(|&v| f64::from(v.abs())).sum::<f64>() + scale;
            let with = Pre { gamma: Err2::both(1.0), mag: Err2::both(mag), terms: Some(k), big: Err2::both(scale) };
            let without = Pre { big: Err2::default(), ..with };
            let (lo, hi) = (x - next(), x + next());
            let bound = with.rounding(1.0, f64::from(t.abs()), lo, hi).f32;
            let err = (f64::from(tree_sum(leaves.clone(), case % 3, &mut next)) - exact).abs();
            assert!(err <= bound, "case {case}: error {err} > {bound}");
            worst = worst.max(err / bound);
            if k >= 5 && scale >= 1024.0 {
                gain = gain.max(bound / without.rounding(1.0, f64::from(t.abs()), lo, hi).f32);
            }
        }
        assert!(worst > 0.01, "{worst}");
        assert!(gain > 0.0 && gain < 0.5, "{gain}");
        // Without exact terms, or where the argument is as large as its terms, the chain bound.
        let plain = Pre { gamma: Err2::both(1e-6), mag: Err2::both(100.0), terms: None, big: Err2::default() };
        assert_eq!(plain.rounding(1.0, 2.0, -1.0, 1.0), Err2::both(1e-6 * 102.0));
        let wide = Pre { terms: Some(4), ..plain };
        assert_eq!(wide.rounding(1.0, 2.0, -1e9, 1e9).f32, plain.rounding(1.0, 2.0, -1e9, 1e9).f32);
    }
}
