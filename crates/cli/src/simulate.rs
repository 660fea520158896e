//! `raspc simulate`: builds the universal simulator U (the `universal` function of the matrix
//! library, docs/universal-simulator.md) for given shapes, compiles it, runs it on candle and
//! compares U(<T, X>) with T(X) = softmax(X A Xᵀ) X V computed directly (candle, f64).

use candle_core::{DType, Device, Tensor, D};
use raspc_compiler::real::{MlpMode, RealOptions};

/// Shapes of the simulated attention: X is n x d, A_t d x d, V_t d x dv, t < h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub n: usize,
    pub d: usize,
    pub dv: usize,
    pub h: usize,
}

impl Shape {
    /// Length of ⟨T, X⟩ = [X ; A_1..A_h ; V_1..V_h].
    pub fn input_len(&self) -> usize {
        self.n * self.d + self.h * self.d * self.d + self.h * self.d * self.dv
    }
    /// U's sequence length: the input, and every intermediate block (Q, W, S, Y).
    pub fn seq_len(&self) -> usize {
        self.input_len().max(self.h * self.n * self.n.max(self.d).max(self.dv))
    }
    pub fn output_len(&self) -> usize {
        self.h * self.n * self.dv
    }
    /// The sequence length of U with this layout.
    pub fn seq_len_in(&self, layout: Layout) -> usize {
        match layout {
            Layout::Plain => self.seq_len(),
            Layout::Split { .. } => (self.input_len() + self.n * self.d + self.h * self.d * self.d).max(self.h * self.n * self.n.max(self.d).max(self.dv)),
        }
    }
    /// The `program_hash` `raspc simulate` records for U of this shape.
    pub fn hash(&self) -> String {
        format!("universal(n={}, d={}, dv={}, h={})", self.n, self.d, self.dv, self.h)
    }
    /// The `program_hash` of U of this shape in `layout`.
    pub fn hash_in(&self, layout: Layout) -> String {
        match layout {
            Layout::Plain => self.hash(),
            Layout::Split { e } => format!("universal_split(n={}, d={}, dv={}, h={}, e={e})", self.n, self.d, self.dv, self.h),
        }
    }
    /// The shape and layout of a `program_hash` written by [`hash_in`](Self::hash_in).
    pub fn layout_from_hash(s: &str) -> Option<(Shape, Layout)> {
        if let Some(shape) = Shape::from_hash(s) {
            return Some((shape, Layout::Plain));
        }
        let (head, e) = s.strip_prefix("universal_split(")?.strip_suffix(')')?.rsplit_once(", e=")?;
        let layout = Layout::Split { e: e.parse().ok()? };
        let shape = Shape::from_hash(&format!("universal({head})"))?;
        (shape.hash_in(layout) == s).then_some((shape, layout))
    }
    /// The shape of a `program_hash` written by [`hash`](Self::hash).
    pub fn from_hash(s: &str) -> Option<Shape> {
        let inner = s.strip_prefix("universal(")?.strip_suffix(')')?;
        let mut it = inner.split(", ");
        let mut field = |name: &str| it.next()?.strip_prefix(name)?.strip_prefix('=')?.parse::<usize>().ok();
        let shape = Shape { n: field("n")?, d: field("d")?, dv: field("dv")?, h: field("h")? };
        (shape.hash() == s).then_some(shape)
    }
}

/// How U reads ⟨T, X⟩.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layout {
    /// `[X ; A_1..A_h ; V_1..V_h]`: the matrix library's `universal`.
    #[default]
    Plain,
    /// `[Xh ; Xl ; Ah_1..Ah_h ; Al_1..Al_h ; V_1..V_h]`, `universal_split`: every entry of X and
    /// of the A_t as its nearest multiple of 2^e (`e`) and the remainder, so that the scores'
    /// high part is exact (docs/universal-simulator.md, "Split scores").
    Split { e: i32 },
}

impl Layout {
    /// The split layout on the coarsest grid 2^e on which the scores' high part Xh·Ah·Xhᵀ is
    /// exact in f32 for these shapes and bounds: Qh = Xh·Ah and Sh = Qh·Xhᵀ are sums of
    /// products on the grids 2^(2e) and 2^(3e), whose magnitudes must sum to at most 2^24 grid
    /// steps (`RealOptions::grids`). The finest such grid leaves the smallest remainders.
    pub fn split_for(s: Shape, b: Bounds) -> Layout {
        let d = s.d as f64;
        let mut e = -40;
        while e < 60 {
            let (xh, ah) = (split_high_bound(b.x, e), split_high_bound(b.a, e));
            let q_ok = d * xh * ah <= (f64::from(2 * e) + 24.0).exp2();
            let s_ok = d * d * xh * xh * ah <= (f64::from(3 * e) + 24.0).exp2();
            if q_ok && s_ok {
                return Layout::Split { e };
            }
            e += 1;
        }
        Layout::Split { e }
    }
}

/// The largest |high part| of an entry within [-b, b] split on the grid 2^e: b rounded up to
/// the grid (round to nearest never passes it).
fn split_high_bound(b: f64, e: i32) -> f64 {
    let step = f64::from(e).exp2();
    (b / step).ceil() * step
}

/// The high part of x (its nearest multiple of 2^e, ties away from zero) and the remainder,
/// both exact: x - high is a multiple of x's ulp below 2^(e-1) in magnitude.
pub fn split_entry(x: f64, e: i32) -> (f64, f64) {
    let step = f64::from(e).exp2();
    let hi = (x / step).round() * step;
    (hi, x - hi)
}

/// The f32 number nearest x in the direction of zero.
fn f32_toward_zero(x: f64) -> f64 {
    let f = x as f32;
    let g = if (f as f64).abs() <= x.abs() {
        f
    } else if f > 0.0 {
        f.next_down()
    } else {
        f.next_up()
    };
    g as f64
}

/// One attention layer T and its input: `a[t]` is d x d, `v[t]` d x dv, `x` n x d.
#[derive(Clone, Debug)]
pub struct Instance {
    pub x: Vec<Vec<f64>>,
    pub a: Vec<Vec<Vec<f64>>>,
    pub v: Vec<Vec<Vec<f64>>>,
}

impl Instance {
    pub fn shape(&self) -> Shape {
        Shape { n: self.x.len(), d: self.x.first().map_or(0, Vec::len), dv: self.v.first().and_then(|m| m.first()).map_or(0, Vec::len), h: self.a.len() }
    }

    /// ⟨T, X⟩ row-major, zero-padded to U's sequence length.
    pub fn encode(&self) -> Vec<f64> {
        let s = self.shape();
        let mut out: Vec<f64> = self.x.iter().flatten().copied().collect();
        for m in &self.a {
            out.extend(m.iter().flatten());
        }
        for m in &self.v {
            out.extend(m.iter().flatten());
        }
        out.resize(s.seq_len(), 0.0);
        out
    }

    /// ⟨T, X⟩ in `layout`, zero-padded to U's sequence length.
    pub fn encode_in(&self, layout: Layout) -> Vec<f64> {
        let Layout::Split { e } = layout else { return self.encode() };
        let s = self.shape();
        let parts = |ms: &[&Vec<Vec<f64>>]| -> (Vec<f64>, Vec<f64>) { ms.iter().flat_map(|m| m.iter().flatten()).map(|&x| split_entry(x, e)).unzip() };
        let (xh, xl) = parts(&[&self.x]);
        let (ah, al) = parts(&self.a.iter().collect::<Vec<_>>());
        let mut out = [xh, xl, ah, al].concat();
        for m in &self.v {
            out.extend(m.iter().flatten());
        }
        out.resize(s.seq_len_in(layout), 0.0);
        out
    }

    /// Random entries uniform in [-b, b].
    pub fn random(s: Shape, b: f64, rng: &mut crate::verify::SplitMix) -> Instance {
        Instance::random_with(s, b, b, rng)
    }

    /// X's entries uniform in [-bx, bx], A's and V's in [-b, b].
    pub fn random_with(s: Shape, bx: f64, b: f64, rng: &mut crate::verify::SplitMix) -> Instance {
        // f32 numbers (rounded toward zero: within the bounds), so that T(X) is computed from
        // exactly what an f32 forward pass of U reads.
        let x = (0..s.n).map(|_| (0..s.d).map(|_| f32_toward_zero(crate::verify::uniform(rng, -bx, bx))).collect()).collect();
        let mut m = |r: usize, c: usize| -> Vec<Vec<f64>> { (0..r).map(|_| (0..c).map(|_| f32_toward_zero(crate::verify::uniform(rng, -b, b))).collect()).collect() };
        let a = (0..s.h).map(|_| m(s.d, s.d)).collect();
        let v = (0..s.h).map(|_| m(s.d, s.dv)).collect();
        Instance { x, a, v }
    }

    /// Every entry rounded to the nearest f32 number: what U reads (its certificate is for f32
    /// inputs, `RealOptions::f32_inputs`), and so what T is computed from.
    pub fn to_f32(&self) -> Instance {
        let r = |m: &Vec<Vec<f64>>| -> Vec<Vec<f64>> { m.iter().map(|row| row.iter().map(|&x| x as f32 as f64).collect()).collect() };
        Instance { x: r(&self.x), a: self.a.iter().map(r).collect(), v: self.v.iter().map(r).collect() }
    }

    /// The largest |entry|.
    pub fn magnitude(&self) -> f64 {
        self.x.iter().flatten().chain(self.a.iter().flatten().flatten()).chain(self.v.iter().flatten().flatten()).fold(0.0f64, |m, x| m.max(x.abs()))
    }

    /// The largest |entry| of X, of the A_t and of the V_t, each with where it is.
    pub fn largest(&self) -> [Largest; 3] {
        let of = |ms: &[&Vec<Vec<f64>>]| -> Largest {
            let mut best = Largest::default();
            for (t, m) in ms.iter().enumerate() {
                for (i, row) in m.iter().enumerate() {
                    for (j, &x) in row.iter().enumerate() {
                        if x.abs() > best.value {
                            best = Largest { value: x.abs(), head: t, row: i, col: j };
                        }
                    }
                }
            }
            best
        };
        [of(&[&self.x]), of(&self.a.iter().collect::<Vec<_>>()), of(&self.v.iter().collect::<Vec<_>>())]
    }
}

/// The largest |entry| of a block and where it is (head, row, column).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Largest {
    pub value: f64,
    pub head: usize,
    pub row: usize,
    pub col: usize,
}

/// The bounds U is certified for: X's entries in [-x, x], the A_t's in [-a, a], the V_t's in
/// [-v, v] (the padding is 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub x: f64,
    pub a: f64,
    pub v: f64,
}

fn tensor(m: &[Vec<f64>]) -> Result<Tensor, candle_core::Error> {
    let (r, c) = (m.len(), m.first().map_or(0, Vec::len));
    Tensor::from_vec(m.iter().flatten().copied().collect::<Vec<f64>>(), (r, c), &Device::Cpu)
}

/// T(X) computed directly with candle in f64: per head softmax(X A Xᵀ) X V (row max
/// subtracted), laid out as U writes it (head t's row i, column b at t*n*dv + i*dv + b).
pub fn reference(inst: &Instance) -> Result<Vec<f64>, candle_core::Error> {
    let x = tensor(&inst.x)?;
    let mut out = vec![];
    for (a, v) in inst.a.iter().zip(&inst.v) {
        let s = x.matmul(&tensor(a)?)?.matmul(&x.t()?)?;
        let e = s.broadcast_sub(&s.max_keepdim(D::Minus1)?)?.exp()?;
        let p = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
        let y = p.matmul(&x.matmul(&tensor(v)?)?)?;
        out.extend(y.flatten_all()?.to_vec1::<f64>()?);
    }
    Ok(out)
}

/// U compiled for one shape.
#[derive(Debug)]
pub struct BuiltU {
    pub shape: Shape,
    pub layout: Layout,
    pub compiled: raspc_compiler::Compiled,
    pub compile_ms: f64,
}

/// The RASP source of U for a shape (the library is loaded with the prelude).
pub fn source(s: Shape) -> String {
    source_in(s, Layout::Plain)
}

/// The RASP source of U for a shape and layout.
pub fn source_in(s: Shape, layout: Layout) -> String {
    let f = if layout == Layout::Plain { "universal" } else { "universal_split" };
    format!("u = {f}({}, {}, {}, {});\n", s.n, s.d, s.dv, s.h)
}

pub fn build(s: Shape, mlp: MlpMode, bound: f64, pl_error: Option<f64>) -> Result<BuiltU, String> {
    build_with(s, mlp, bound, bound, pl_error, true)
}

/// U certified for A and V entries in [-bound, bound], X entries in [-x_bound, x_bound] and
/// zero padding. Refused past the `u_positions` budget (`RASPC_LIMITS`, default 32,768).
/// `f32_inputs`: every entry U will read is an f32 number (as [`Instance::random_with`] and
/// [`load_target`] make them), so the f32 certificate charges no input rounding; false for
/// entries given in f64 (the Python package's arrays), whose rounding it then charges.
pub fn build_with(s: Shape, mlp: MlpMode, bound: f64, x_bound: f64, pl_error: Option<f64>, f32_inputs: bool) -> Result<BuiltU, String> {
    build_bounds(s, mlp, Bounds { x: x_bound, a: bound, v: bound }, pl_error, f32_inputs).map_err(|e| format!("{e}\n  = {}", advice(mlp)))
}

/// What to change when U for random T does not compile.
pub fn advice(mlp: MlpMode) -> &'static str {
    match mlp {
        MlpMode::Relu => {
            "ReLU U interpolates its products, which stops at about n = d = dv = 18 for entries in [-1, 1]: `--mlp gated` (exact products) reaches 64, or use smaller shapes or --bound"
        }
        MlpMode::Gated => "smaller shapes, --bound or --x-bound keep U's intermediate values within what it can approximate",
    }
}

/// [`build_with`] with a bound per block (X, the A_t, the V_t); a refusal without advice (the
/// caller knows which flags apply).
pub fn build_bounds(s: Shape, mlp: MlpMode, bounds: Bounds, pl_error: Option<f64>, f32_inputs: bool) -> Result<BuiltU, String> {
    build_layout(s, mlp, bounds, pl_error, f32_inputs, Layout::Plain)
}

/// [`build_bounds`] in a given layout.
pub fn build_layout(s: Shape, mlp: MlpMode, bounds: Bounds, pl_error: Option<f64>, f32_inputs: bool, layout: Layout) -> Result<BuiltU, String> {
    let Bounds { x: x_bound, a: a_bound, v: v_bound } = bounds;
    if s.n == 0 || s.d == 0 || s.dv == 0 || s.h == 0 {
        return Err(format!("shapes must be at least 1 (n {}, d {}, dv {}, heads {})", s.n, s.d, s.dv, s.h));
    }
    let budget = raspc_checkpoint::Limits::from_env().map_err(|e| e.to_string())?.max_u_positions;
    let seq_len = s.seq_len_in(layout);
    if seq_len > budget {
        return Err(format!("U for these shapes needs {seq_len} positions, over the budget of {budget} (raise it with RASPC_LIMITS=u_positions=N)"));
    }
    if ![x_bound, a_bound, v_bound].iter().all(|b| b.is_finite() && *b > 0.0) {
        return Err(format!("bounds must be positive numbers, got {x_bound} (X), {a_bound} (A), {v_bound} (V)"));
    }
    let widest = x_bound.max(a_bound).max(v_bound);
    let (nd, hdd) = (s.n * s.d, s.h * s.d * s.d);
    let a_end = nd + hdd;
    let (blocks, grids) = match layout {
        Layout::Plain => (vec![(0, nd, -x_bound, x_bound), (nd, a_end, -a_bound, a_bound), (a_end, s.input_len(), -v_bound, v_bound), (s.input_len(), seq_len, 0.0, 0.0)], vec![]),
        Layout::Split { e } => {
            // High parts on the grid within the bounds rounded up to it; remainders within half
            // a step (and within the bound: a high part of 0 leaves the entry whole).
            let (xh, ah) = (split_high_bound(x_bound, e), split_high_bound(a_bound, e));
            let half = f64::from(e - 1).exp2();
            let (xl, al) = (half.min(x_bound), half.min(a_bound));
            let v0 = 2 * nd + 2 * hdd;
            let v1 = v0 + s.h * s.d * s.dv;
            (
                vec![(0, nd, -xh, xh), (nd, 2 * nd, -xl, xl), (2 * nd, 2 * nd + hdd, -ah, ah), (2 * nd + hdd, v0, -al, al), (v0, v1, -v_bound, v_bound), (v1, seq_len, 0.0, 0.0)],
                vec![(0, nd, e), (2 * nd, 2 * nd + hdd, e)],
            )
        }
    };
    let widest = blocks.iter().fold(widest, |m, b| m.max(b.3));
    let text = source_in(s, layout);
    let (_, r) = raspc_lang::evaluate_program("<universal>", None, &text, &raspc_lang::MemoryLoader::default());
    let session = r.map_err(|d| format!("internal error: U does not evaluate: {}", d.iter().map(|x| x.message.clone()).collect::<Vec<_>>().join("; ")))?;
    let (_, root) = session.entry(Some("u")).map_err(|e| format!("internal error: {e:?}"))?;
    let opts = raspc_compiler::Options {
        max_len: seq_len,
        real: Some(RealOptions { lo: -widest, hi: widest, blocks: blocks.into_iter().filter(|b| b.0 < b.1).collect(), mlp, pl_error, f32_inputs, grids }),
        ..Default::default()
    };
    let t0 = std::time::Instant::now();
    let hash = s.hash_in(layout);
    let compiled = raspc_compiler::compile(&session.graph, root, &opts, &hash).map_err(|d| {
        // Each message once (a function used by several heads fails for each).
        let mut seen: Vec<String> = vec![];
        for x in d {
            if !seen.contains(&x.message) {
                seen.push(x.message.clone());
            }
        }
        // An overflow names an s-op of U's library source (`e`, the softmax's exponentials),
        // which the user never wrote: said in the terms of the shapes and bounds (helpers b21,
        // p22), with any other refusal after it.
        let (overflows, others): (Vec<&String>, Vec<&String>) = seen.iter().partition(|m| m.contains("past any float's range"));
        if !overflows.is_empty() {
            let scores = (s.d * s.d) as f64 * x_bound * x_bound * a_bound;
            let num = |x: f64| if (1e-3..1e6).contains(&x) { format!("{x}") } else { format!("{x:e}") };
            let (x_bound, a_bound, v_bound) = (num(x_bound), num(a_bound), num(v_bound));
            let scores = if scores.is_finite() { format!("= {scores:.3e}") } else { "past f64's range".to_string() };
            let others = if others.is_empty() { String::new() } else { format!("; also: {}", others.iter().map(|m| m.as_str()).collect::<Vec<_>>().join("; ")) };
            return format!(
                "U does not compile: with entries this large (X within ±{x_bound}, A within ±{a_bound}, V within ±{v_bound}) its intermediate values pass any float's range (the scores X·A·Xᵀ reach d²·max|X|²·max|A| {scores}, and the softmax exponentiates their differences){others}"
            );
        }
        format!("U does not compile: {}", seen.join("; "))
    })?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(BuiltU { shape: s, layout, compiled, compile_ms })
}

/// What a simulation measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Outcome {
    pub trials: usize,
    pub failures: usize,
    /// Trials whose error exceeded the certified bound (also counted in `failures`).
    pub bound_violations: usize,
    pub max_abs_err: f64,
    /// Largest max|U - T| / max|T| of a trial.
    pub max_rel_err: f64,
    pub bound: f64,
    /// Wall-clock ms per instance of U's forward passes over the trials (the first pass also
    /// prepares what the runtime caches per length: the attention patterns of position heads).
    pub forward_ms: f64,
    /// One instance run again on its own (one thread, the caches warm): the cost of one more
    /// instance (the fastest of 3 to 20 passes).
    pub forward_warm_ms: f64,
    /// Wall-clock ms of the direct computation of T(X) (candle, f64; the fastest instance).
    pub direct_ms: f64,
    /// The entry with the largest |U - T| over the trials.
    pub worst: Option<WorstEntry>,
    /// The smallest max|T(X)| of a trial: a bound at least this large certifies nothing about
    /// that trial's entries.
    pub min_max_t: f64,
}

/// Where U is furthest from T: the trial, T's head, row and column, and both values.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct WorstEntry {
    pub trial: usize,
    pub head: usize,
    pub row: usize,
    pub col: usize,
    pub u: f64,
    pub t: f64,
}

/// U's outputs in one readout sequence: BOS skipped, then the output block (the first
/// h·n·dv positions), dim 0 of each.
fn outputs(seq: &[Vec<f64>], out_len: usize) -> Vec<f64> {
    seq.iter().skip(1).take(out_len).map(|v| v[0]).collect()
}

/// Runs U on `instances` (batched) and compares with the reference. A trial fails when its
/// error exceeds the certified bound, or (gated MLPs) its relative error exceeds `tolerance`.
pub fn run_trials(model: &raspc_runtime::Model, u: &BuiltU, instances: &[Instance], dtype_f64: bool, tolerance: f64, progress: &mut dyn FnMut(usize)) -> Result<Outcome, String> {
    let report = u.compiled.report.as_ref().ok_or("internal error: U has no certified bound")?;
    let bound = if dtype_f64 { report.output_bound_f64 } else { report.output_bound };
    let gated = u.compiled.checkpoint.config.layers.iter().any(|l| l.mlp.as_ref().is_some_and(|m| m.kind == raspc_checkpoint::MlpKind::Reglu));
    let mut o = Outcome { bound, min_max_t: f64::INFINITY, ..Default::default() };
    let out_len = u.shape.output_len();
    let batch = (200_000 / (u.compiled.summary.mlp_hidden.max(1) + u.compiled.summary.d_model)).clamp(1, 32);
    // The fast CPU backend computes an instance to the same bits alone or in a batch; candle on a
    // GPU chooses its kernels by the batch's shape and may round differently, so there the lone
    // pass must only agree with the batched one within twice the certified bound (each is
    // within it of T(X)).
    let exact = model.backend() == raspc_runtime::Backend::Fast;
    let mut forward = std::time::Duration::ZERO;
    let mut direct = f64::INFINITY;
    for (ci, chunk) in instances.chunks(batch).enumerate() {
        let inputs: Vec<Vec<f64>> = chunk.iter().map(|i| i.encode_in(u.layout)).collect();
        let t0 = std::time::Instant::now();
        let readout = model.forward_real(&inputs, raspc_runtime::Attention::Hard).map_err(|e| e.to_string())?;
        let rows: Vec<Vec<Vec<f64>>> = readout.to_dtype(DType::F64).and_then(|t| t.to_vec3()).map_err(|e| e.to_string())?;
        forward += t0.elapsed();
        if ci == 0 {
            // One instance alone (one thread), caches warm: the fastest of at least three
            // passes, more while they take under 0.3 s in all (a shared machine's noise moved
            // the fastest of three by half), each checked against the first.
            o.forward_warm_ms = f64::INFINITY;
            let started = std::time::Instant::now();
            for pass in 0..20 {
                if pass >= 3 && started.elapsed().as_secs_f64() > 0.3 {
                    break;
                }
                let t0 = std::time::Instant::now();
                let again = model.forward_real(&inputs[..1], raspc_runtime::Attention::Hard).and_then(|t| Ok(t.to_dtype(DType::F64)?.to_vec3::<f64>()?)).map_err(|e| e.to_string())?;
                o.forward_warm_ms = o.forward_warm_ms.min(t0.elapsed().as_secs_f64() * 1e3);
                if exact {
                    if again[..] != rows[..1] {
                        return Err("internal error: a second forward pass of U gave different numbers".into());
                    }
                } else {
                    let first = |r: &[Vec<Vec<f64>>]| r.first().map(|seq| outputs(seq, out_len)).unwrap_or_default();
                    let moved = first(&again).iter().zip(first(&rows)).fold(0.0f64, |m, (a, b)| if (a - b).is_nan() { f64::NAN } else { m.max((a - b).abs()) });
                    if moved.is_nan() || moved > 2.0 * bound {
                        return Err(format!(
                            "U's forward pass on one instance alone differs from the same instance in a batch by {moved:e} (more than twice the certified bound {bound:e})"
                        ));
                    }
                }
            }
        }
        for (inst, row) in chunk.iter().zip(rows) {
            // The direct computation's time: the fastest of a few runs (the first pays for
            // candle's one-off setup).
            let mut want = vec![];
            for _ in 0..if o.trials == 0 { 5 } else { 1 } {
                let t0 = std::time::Instant::now();
                want = reference(inst).map_err(|e| e.to_string())?;
                direct = direct.min(t0.elapsed().as_secs_f64() * 1e3);
            }
            let got = outputs(&row, out_len);
            let (mut abs, mut at) = (0.0f64, 0);
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let e = (g - w).abs();
                if e > abs || e.is_nan() {
                    (abs, at) = (e, k);
                    if e.is_nan() {
                        break;
                    }
                }
            }
            // A NaN entry stays the worst (review: a later finite error replaced it).
            let worst_nan = o.worst.is_some_and(|w| (w.u - w.t).is_nan());
            if !worst_nan && (o.worst.is_none() || abs > o.max_abs_err || abs.is_nan()) {
                let (nv, dv) = (u.shape.n * u.shape.dv, u.shape.dv);
                o.worst = Some(WorstEntry {
                    trial: o.trials,
                    head: at / nv,
                    row: at % nv / dv,
                    col: at % dv,
                    u: got.get(at).copied().unwrap_or(f64::NAN),
                    t: want.get(at).copied().unwrap_or(f64::NAN),
                });
            }
            let max_t = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
            o.min_max_t = o.min_max_t.min(max_t);
            let scale = max_t.max(1e-300);
            let rel = abs / scale;
            // (f64::max drops a NaN: keep it.)
            o.max_abs_err = if abs.is_nan() || o.max_abs_err.is_nan() { f64::NAN } else { o.max_abs_err.max(abs) };
            o.max_rel_err = if rel.is_nan() || o.max_rel_err.is_nan() { f64::NAN } else { o.max_rel_err.max(rel) };
            let over_bound = abs.is_nan() || abs > bound;
            o.bound_violations += over_bound as usize;
            if over_bound || (gated && (rel.is_nan() || rel > tolerance)) {
                o.failures += 1;
            }
            o.trials += 1;
        }
        progress(((ci + 1) * batch).min(instances.len()));
    }
    if o.trials > 0 {
        o.forward_ms = forward.as_secs_f64() * 1e3 / o.trials as f64;
        o.direct_ms = direct;
    }
    Ok(o)
}

/// One matrix per head, rows of numbers.
type Matrices = Vec<Vec<Vec<f64>>>;

/// Reads a user's attention layer (`A`, `V` or `W_Q`, `W_K`, `W_V`; 2-D for one head, 3-D
/// [h, d, ·] for several) and X (a JSON array of n rows of d numbers, inline or in a file).
/// The names a target's tensors may have; [`load_target`] lists any other as ignored.
pub const TARGET_TENSORS: [&str; 5] = ["A", "V", "W_Q", "W_K", "W_V"];

/// A user's attention layer and its input, and the file's tensors that T does not use (biases,
/// an output map: T is softmax(X A Xᵀ) X V, nothing more).
#[derive(Clone, Debug)]
pub struct Target {
    pub instance: Instance,
    pub ignored: Vec<String>,
}

pub fn load_target(target: &std::path::Path, input: &std::path::Path) -> Result<Target, String> {
    let bytes = crate::read_input_file(target)?;
    // A safetensors file opens with its header's length (8 bytes) and then the header, `{`.
    let looks_safetensors = bytes.get(8) == Some(&b'{');
    let not_safetensors = if looks_safetensors {
        None
    } else if bytes.starts_with(b"PK\x03\x04") {
        Some("a zip archive (what `torch.save` writes)")
    } else if bytes.first() == Some(&0x80) && bytes.get(1).is_some_and(|p| (2..=5).contains(p)) {
        Some("a Python pickle")
    } else {
        None
    };
    if let Some(what) = not_safetensors {
        return Err(format!("`{}` is {what}, not a safetensors file: write it with `safetensors.torch.save_file` or `safetensors.numpy.save_file`", target.display()));
    }
    let ts = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| format!("cannot read `{}` as a safetensors file: {}", target.display(), raspc_checkpoint::safetensors_problem(&bytes).unwrap_or_else(|| e.to_string())))?;
    let file = target.display();
    let mut found: Vec<&String> = ts.keys().collect();
    found.sort();
    let listed = || if found.is_empty() { "no tensors".to_string() } else { format!("tensors {}", found.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")) };
    // A tensor as heads of rows, with its shape for messages: [d, k] is one head.
    let heads = |name: &str| -> Result<Option<(Vec<usize>, Matrices)>, String> {
        let Some(t) = ts.get(name) else { return Ok(None) };
        let dims = t.dims().to_vec();
        let t = t.to_dtype(DType::F64).map_err(|e| format!("`{file}`: tensor `{name}`: {e}"))?;
        let data = match dims.len() {
            2 => vec![t.to_vec2::<f64>().map_err(|e| e.to_string())?],
            3 => t.to_vec3::<f64>().map_err(|e| e.to_string())?,
            _ => return Err(format!("`{file}`: tensor `{name}` has shape {dims:?}; expected [d, k] or [heads, d, k]")),
        };
        if data.is_empty() {
            return Err(format!("`{file}`: tensor `{name}` has shape {dims:?}: no heads"));
        }
        if let Some(i) = data.iter().flatten().flatten().position(|x| !x.is_finite() || x.abs() > f32::MAX as f64) {
            return Err(format!(
                "`{file}`: tensor `{name}` (shape {dims:?}) holds {} at flat index {i}; entries must be finite f32 numbers",
                data.iter().flatten().flatten().nth(i).copied().unwrap_or(f64::NAN)
            ));
        }
        Ok(Some((dims, data)))
    };
    // U's shape from the tensors' shapes (X has at least one row), checked before any product
    // (helper b19: W_Q·W_Kᵀ of [4096, 1024] took 17 s before the refusal the shapes decide).
    let dims_of = |name: &str| ts.get(name).map(|t| t.dims().to_vec());
    if let (Some(qd), Some(vd)) = (dims_of("A").or_else(|| dims_of("W_Q")), dims_of("V").or_else(|| dims_of("W_V")))
        && (2..=3).contains(&qd.len())
        && vd.len() == qd.len()
    {
        let (h, d) = if qd.len() == 3 { (qd[0], qd[1]) } else { (1, qd[0]) };
        let dv = vd[vd.len() - 1];
        if h > 0 && d > 0 && dv > 0 {
            crate::cmd::simulate::check_sim_shape(Shape { n: 1, d, dv, h }).map_err(|e| format!("`{file}`: {e}"))?;
        }
    }
    let matmul_t = |q: &[Vec<f64>], k: &[Vec<f64>]| -> Vec<Vec<f64>> { q.iter().map(|qi| k.iter().map(|kj| qi.iter().zip(kj).map(|(a, b)| a * b).sum()).collect()).collect() };
    let (a, a_name, a_dims) = match (heads("A")?, heads("W_Q")?, heads("W_K")?) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => return Err(format!("`{file}` holds both `A` and `W_Q`/`W_K`: give one (A = W_Q W_Kᵀ)")),
        (Some((dims, a)), None, None) => (a, "A", dims),
        (None, Some((qd, q)), Some((kd, k))) => {
            if qd != kd {
                return Err(format!("`{file}`: tensors `W_Q` {qd:?} and `W_K` {kd:?} must have the same shape ([d, k] or [heads, d, k]) for A = W_Q W_Kᵀ"));
            }
            let dims = if qd.len() == 3 { vec![qd[0], qd[1], qd[1]] } else { vec![qd[0], qd[0]] };
            (q.iter().zip(&k).map(|(q, k)| matmul_t(q, k)).collect(), "W_Q W_Kᵀ", dims)
        }
        _ => return Err(format!("`{file}` has neither tensor `A` nor both `W_Q` and `W_K` (it holds {}); the names are case-sensitive", listed())),
    };
    let (v, v_name, v_dims) = match (heads("V")?, heads("W_V")?) {
        (Some(_), Some(_)) => return Err(format!("`{file}` holds both `V` and `W_V`: give one")),
        (Some((dims, v)), None) => (v, "V", dims),
        (None, Some((dims, v))) => (v, "W_V", dims),
        (None, None) => return Err(format!("`{file}` has neither tensor `V` nor `W_V` (it holds {}); the names are case-sensitive", listed())),
    };
    // X inline (`[[1, 0], [0, 1]]`, as `eval --input` takes inputs) or in a file.
    let inline = input.to_str().map(str::trim_start).filter(|t| t.starts_with('['));
    let text = match inline {
        Some(t) => t.to_string(),
        None => String::from_utf8(crate::read_input_file(input)?).map_err(|_| format!("`{}` is not valid UTF-8", input.display()))?,
    };
    let x: Vec<Vec<f64>> = serde_json::from_str(&text).map_err(|e| format!("`{}`: expected a JSON array of rows of numbers: {e}", input.display()))?;
    let inst = Instance { x, a, v };
    let s = inst.shape();
    let bad = |what: String| Err(format!("`{file}`: {what}"));
    let x_name = if inline.is_some() { "X (--input)".to_string() } else { format!("X (`{}`)", input.display()) };
    if s.n == 0 || s.d == 0 {
        return Err(format!("{x_name} must be a non-empty array of non-empty rows"));
    }
    if let Some(i) = inst.x.iter().position(|r| r.len() != s.d) {
        return Err(format!("{x_name}: row {i} has {} entries, row 0 has {}; every row of X must have the same length", inst.x[i].len(), s.d));
    }
    if let Some(i) = inst.x.iter().flatten().position(|x| !x.is_finite() || x.abs() > f32::MAX as f64) {
        return Err(format!("{x_name}: entry {i} (row {}, column {}) is not a finite f32 number", i / s.d, i % s.d));
    }
    if inst.a.len() != inst.v.len() {
        return bad(format!("{} heads of {a_name} ({a_dims:?}) but {} of {v_name} ({v_dims:?})", inst.a.len(), inst.v.len()));
    }
    let d = s.d;
    for (am, vm) in inst.a.iter().zip(&inst.v) {
        if am.len() != d || am.iter().any(|r| r.len() != d) {
            return bad(format!("{a_name} has shape {a_dims:?} and {x_name} has {d} columns: they must agree (A is d x d, or [heads, d, d], for X of n rows of d entries)"));
        }
        if vm.len() != d || vm.iter().any(|r| r.len() != s.dv || r.is_empty()) {
            return bad(format!("{v_name} has shape {v_dims:?} and {x_name} has {d} columns: they must agree (V is d x dv, or [heads, d, dv], with dv at least 1)"));
        }
    }
    let ignored = found.into_iter().filter(|n| !TARGET_TENSORS.contains(&n.as_str())).cloned().collect();
    Ok(Target { instance: inst.to_f32(), ignored })
}

#[cfg(test)]
mod tests {
    use super::{Layout, Shape};

    #[test]
    fn a_shape_is_read_back_from_its_hash_and_nothing_else_is() {
        let s = Shape { n: 3, d: 64, dv: 5, h: 2 };
        assert_eq!(Shape::from_hash(&s.hash()), Some(s));
        for layout in [Layout::Plain, Layout::Split { e: -4 }, Layout::Split { e: 3 }] {
            assert_eq!(Shape::layout_from_hash(&s.hash_in(layout)), Some((s, layout)));
        }
        for bad in ["universal_split(n=2, d=3, dv=4, h=1)", "universal_split(n=2, d=3, dv=4, h=1, e=x)", "universal_split(n=2, d=3, dv=4, h=1, e=-4) "] {
            assert_eq!(Shape::layout_from_hash(bad), None, "{bad}");
        }
        for bad in ["universal(n=3, d=64, dv=5)", "universal(n=3, d=64, dv=5, h=2, x=1)", "universal(n=3,d=64,dv=5,h=2)", "sha256:00", "universal(n=-3, d=64, dv=5, h=2)"] {
            assert_eq!(Shape::from_hash(bad), None, "{bad}");
        }
    }
}
