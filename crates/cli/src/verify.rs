//! Model-vs-interpreter verification, shared by `raspc verify` and the test suite.

use raspc_lang::{Atom, EvalError, Graph, NodeId, Value};
use raspc_runtime::{Attention, Decoded, Model};

/// Which inputs to check.
#[derive(Clone, Debug)]
pub enum Inputs {
    /// Every sequence over the vocabulary of length 1..=max_len.
    Exhaustive,
    /// `count` random sequences (lengths uniform in 1..=max_len, tokens uniform), seeded.
    Random { count: usize, seed: u64 },
}

/// Largest exhaustive set `raspc verify` agrees to enumerate.
pub const MAX_EXHAUSTIVE: u128 = 2_000_000;

/// A small, fixed pseudo-random generator (SplitMix64), so `--seed` means the same inputs
/// in every raspc version.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

pub fn exhaustive_count(vocab: usize, max_len: usize) -> u128 {
    (1..=max_len as u32).map(|n| (vocab as u128).saturating_pow(n)).fold(0u128, u128::saturating_add)
}

/// The input sequences, as vocabulary indices. Random inputs as many as there are inputs (or
/// more) are all the inputs, each once, in order.
pub fn generate(inputs: &Inputs, vocab: usize, max_len: usize) -> Result<Vec<Vec<usize>>, String> {
    if vocab == 0 || max_len == 0 {
        return Err(format!("inputs need a non-empty vocabulary and max-len >= 1 (got {vocab} tokens, max-len {max_len})"));
    }
    match inputs {
        Inputs::Exhaustive => {
            let total = exhaustive_count(vocab, max_len);
            if total > MAX_EXHAUSTIVE {
                return Err(format!("--exhaustive would check {total} inputs ({vocab} tokens, lengths 1..={max_len}); the limit is {MAX_EXHAUSTIVE}: use --samples"));
            }
            let mut out = Vec::with_capacity(total as usize);
            for n in 1..=max_len {
                let count = (vocab as u128).pow(n as u32);
                for code in 0..count {
                    let mut c = code;
                    let mut seq = vec![0usize; n];
                    for slot in seq.iter_mut().rev() {
                        *slot = (c % vocab as u128) as usize;
                        c /= vocab as u128;
                    }
                    out.push(seq);
                }
            }
            Ok(out)
        }
        // Asked for at least as many random inputs as there are inputs: every one, once.
        Inputs::Random { count, .. } if exhaustive_count(vocab, max_len) <= *count as u128 => generate(&Inputs::Exhaustive, vocab, max_len),
        Inputs::Random { count, seed } => {
            let mut rng = SplitMix(*seed);
            Ok((0..*count)
                .map(|_| {
                    let n = 1 + rng.below(max_len);
                    (0..n).map(|_| rng.below(vocab)).collect()
                })
                .collect())
        }
    }
}

/// The interpreter's expected output for the model: the program's value, or under causal
/// masking the value at each position i of the program run on the prefix ending at i.
/// `None` when the interpreter rejects the input (or a prefix of it).
pub fn expected(graph: &Graph, root: NodeId, input: &[Atom], causal: bool) -> Option<Vec<Atom>> {
    expected_or_error(graph, root, input, causal).ok()
}

/// As [`expected`], with the interpreter's error when it rejects the input.
pub fn expected_or_error(graph: &Graph, root: NodeId, input: &[Atom], causal: bool) -> Result<Vec<Atom>, EvalError> {
    if !causal {
        return seq_value(graph, root, input);
    }
    causal_values(graph, root, input).map_err(|(_, e)| e)
}

/// The program's s-op on `input` (a selector is an error: a model outputs an s-op).
fn seq_value(graph: &Graph, root: NodeId, input: &[Atom]) -> Result<Vec<Atom>, EvalError> {
    match raspc_lang::evaluate(graph, root, input)? {
        Value::Seq(s) => Ok(s),
        Value::Sel(_) => Err(EvalError {
            node: root,
            label: graph.node(root).label.clone(),
            span: graph.node(root).span,
            position: None,
            message: "a selector is not an s-op: a model outputs an s-op".into(),
        }),
    }
}

/// The program's value at each position i on the prefix ending at i (what a causal model
/// outputs); on a failure, the length of the prefix that failed with its error. An empty input
/// is evaluated as it is (the interpreter's error for it).
pub fn causal_values(graph: &Graph, root: NodeId, input: &[Atom]) -> Result<Vec<Atom>, (usize, EvalError)> {
    if input.is_empty() {
        return seq_value(graph, root, input).map_err(|e| (0, e));
    }
    (1..=input.len()).map(|n| seq_value(graph, root, &input[..n]).map(|s| s[n - 1].clone()).map_err(|e| (n, e))).collect()
}

/// Inputs the interpreter rejected, grouped by the operation that failed.
#[derive(Clone, Debug, Default)]
pub struct Rejections {
    /// Per failing operation (as the user knows it: `y`, or an expression in `y`): how many
    /// inputs, and the first one with its error.
    pub by_op: Vec<(String, usize, Vec<Atom>, String)>,
}

impl Rejections {
    pub fn add(&mut self, graph: &raspc_lang::Graph, input: &[Atom], e: &EvalError) {
        let what = raspc_compiler::names::describe(graph, e.node);
        match self.by_op.iter_mut().find(|r| r.0 == what) {
            Some(r) => r.1 += 1,
            None => {
                let msg = format!("{}{}", e.position.map(|p| format!("at position {p}: ")).unwrap_or_default(), e.message);
                self.by_op.push((what, 1, input.to_vec(), msg));
            }
        }
    }

    pub fn total(&self) -> usize {
        self.by_op.iter().map(|r| r.1).sum()
    }

    /// One line per failing operation: `` `avg` failed on 117 inputs, e.g. [a, b]: ...`` (or `an
    /// expression in `avg` failed ...`).
    pub fn lines(&self) -> Vec<String> {
        self.by_op
            .iter()
            .map(|(label, n, input, msg)| {
                let shown = format!("[{}]", input.iter().map(Atom::repr).collect::<Vec<_>>().join(", "));
                format!("{label} failed on {n} input{}, e.g. {shown}: {msg}", if *n == 1 { "" } else { "s" })
            })
            .collect()
    }
}

/// Inputs `compile` runs through the interpreter to warn about a program that fails on some.
pub const REJECTION_SAMPLES: usize = 48;

/// The interpreter on [`REJECTION_SAMPLES`] random token inputs (lengths up to 64, seed 0): a
/// program that divides by zero or indexes out of range on some inputs compiles, and its model
/// answers there anyway, so `compile` says so at once rather than only under `verify`.
pub fn sampled_rejections(graph: &Graph, root: NodeId, vocab: &[Atom], max_len: usize, causal: bool) -> Rejections {
    let mut r = Rejections::default();
    let inputs = Inputs::Random { count: REJECTION_SAMPLES, seed: 0 };
    let Ok(seqs) = generate(&inputs, vocab.len(), max_len.min(64)) else { return r };
    for ids in seqs {
        let input: Vec<Atom> = ids.iter().map(|&i| vocab[i].clone()).collect();
        if let Err(e) = expected_or_error(graph, root, &input, causal) {
            r.add(graph, &input, &e);
        }
    }
    r
}

/// A JSON atom (bool, string, number) as an atom; `None` for null, arrays and objects.
pub fn json_atom(v: &serde_json::Value) -> Option<Atom> {
    Some(match v {
        serde_json::Value::Bool(b) => Atom::Bool(*b),
        serde_json::Value::String(s) => Atom::Str(s.clone()),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Atom::Int(i),
            None => Atom::Float(n.as_f64()?),
        },
        _ => return None,
    })
}

/// A decoded model value as an atom (numbers: the snapped value when there is one).
pub fn decoded_atom(d: &Decoded) -> Atom {
    match d {
        Decoded::Value(v) => json_atom(v).unwrap_or(Atom::Str(v.to_string())),
        Decoded::Number { snapped: Some(v), .. } => json_atom(v).unwrap_or(Atom::Float(f64::NAN)),
        Decoded::Number { raw, .. } => Atom::Float(*raw),
    }
}

/// Does the model's value agree with the interpreter's? Categorical: Python equality, floats
/// within 1e-9 relative (a mean's last bits depend on the order its values were summed in, and
/// the compiler enumerates means in its own order). Numerical: the listed value `run` snaps to,
/// as a categorical float; a number not snapped, within the checkpoint's tolerance.
pub fn agrees(got: &Decoded, want: &Atom, tolerance: f64) -> bool {
    match got {
        Decoded::Value(_) => {
            let g = decoded_atom(got);
            match (&g, want) {
                (Atom::Float(_), _) | (_, Atom::Float(_)) if !g.is_str() && !want.is_str() => {
                    let (x, y) = (g.as_f64().unwrap_or(f64::NAN), want.as_f64().unwrap_or(f64::NAN));
                    (x - y).abs() <= 1e-9 * y.abs().max(1.0)
                }
                _ => g.py_eq(want),
            }
        }
        // A listed value `run` snapped to is what it prints: it must be the interpreter's (up
        // to the order a mean was summed in). The tolerance may exceed half the smallest gap
        // (f32's rounding at large values), so a raw number within it can still be nearer a
        // neighbour.
        Decoded::Number { snapped: Some(_), .. } => {
            let (g, w) = (decoded_atom(got).as_f64(), want.as_f64());
            !want.is_str() && matches!((g, w), (Some(x), Some(y)) if (x - y).abs() <= 1e-9 * y.abs().max(1.0))
        }
        Decoded::Number { raw, .. } => want.as_f64().is_some_and(|w| !want.is_str() && (raw - w).abs() <= tolerance),
    }
}

/// One disagreement.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub attention: Attention,
    pub input: Vec<Atom>,
    pub expected: Vec<Atom>,
    pub got: Vec<Decoded>,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Inputs checked (the interpreter accepted them).
    pub checked: usize,
    /// Inputs the interpreter rejects (not part of the program's domain).
    pub skipped: usize,
    /// Why the interpreter rejected them.
    pub rejections: Rejections,
    /// Inputs where some attention mode disagreed somewhere.
    pub failed: usize,
    /// Per mode: mismatching inputs.
    pub per_mode: Vec<(Attention, usize)>,
    /// The first few mismatches.
    pub examples: Vec<Mismatch>,
}

/// Compares `model` with the interpreter on `inputs` (vocabulary indices into `vocab`).
/// `progress` is called with the number of inputs done so far.
pub fn verify(graph: &Graph, root: NodeId, model: &Model, vocab: &[Atom], inputs: &[Vec<usize>], modes: &[Attention], progress: &mut dyn FnMut(usize)) -> Result<Report, String> {
    let causal = model.checkpoint.config.causal;
    let tol = model.checkpoint.output.tolerance;
    let mut report = Report { per_mode: modes.iter().map(|&m| (m, 0)).collect(), ..Report::default() };
    // Group by length so each batch is rectangular.
    let mut by_len: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, s) in inputs.iter().enumerate() {
        by_len.entry(s.len()).or_default().push(i);
    }
    let mut done = 0;
    let mut failed = vec![false; inputs.len()];
    for idxs in by_len.values() {
        for chunk in idxs.chunks(256) {
            if raspc_compiler::cancel::cancelled() {
                return Err(raspc_compiler::cancel::INTERRUPTED.into());
            }
            let mut rows = vec![];
            for &i in chunk {
                // `i` comes from enumerating `inputs`; token indices come from the caller (`generate`
                // keeps them below vocab.len()): one out of range is an error, not a panic.
                let atoms: Vec<Atom> = inputs[i]
                    .iter()
                    .map(|&t| vocab.get(t).cloned().ok_or_else(|| format!("input {i} has token index {t}, beyond the vocabulary of {}", vocab.len())))
                    .collect::<Result<_, _>>()?;
                match expected_or_error(graph, root, &atoms, causal) {
                    Ok(e) => rows.push((i, atoms, e)),
                    Err(e) => {
                        report.skipped += 1;
                        report.rejections.add(graph, &atoms, &e);
                    }
                }
            }
            if !rows.is_empty() {
                let ids: Vec<Vec<u32>> =
                    rows.iter().map(|(_, a, _)| model.encode(&a.iter().map(Atom::to_json).collect::<Vec<_>>())).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
                for (m, &mode) in modes.iter().enumerate() {
                    // Name the attention and an input of the batch: soft attention's errors can
                    // grow where hard attention's cannot.
                    let batch_failed = |e: raspc_runtime::RuntimeError| {
                        let first = rows[0].1.iter().map(Atom::repr).collect::<Vec<_>>().join(", ");
                        format!("{mode:?} attention, on a batch of {} inputs of length {} (the first [{first}]): {e}", rows.len(), rows[0].1.len())
                    };
                    let out = model.forward(&ids, mode).map_err(batch_failed)?;
                    let decoded = model.decode(&out).map_err(batch_failed)?;
                    for ((i, atoms, want), got) in rows.iter().zip(decoded) {
                        let ok = got.len() == want.len() && got.iter().zip(want).all(|(g, w)| agrees(g, w, tol));
                        if !ok {
                            // per_mode has one entry per mode (m enumerates modes); failed one per input.
                            report.per_mode[m].1 += 1;
                            failed[*i] = true;
                            if report.examples.len() < 5 {
                                report.examples.push(Mismatch { attention: mode, input: atoms.clone(), expected: want.clone(), got });
                            }
                        }
                    }
                }
                report.checked += rows.len();
            }
            done += chunk.len();
            progress(done);
        }
    }
    report.failed = failed.iter().filter(|&&f| f).count();
    Ok(report)
}

/// Result of checking a real-valued model against the interpreter.
#[derive(Clone, Debug, Default)]
pub struct RealReport {
    pub checked: usize,
    /// Inputs with some position farther from the interpreter than the certified bound.
    pub failed: usize,
    /// Largest |model - interpreter| seen.
    pub max_err: f64,
    /// The certified bound (the checkpoint's output tolerance).
    pub bound: f64,
    /// The largest allowance made for the interpreter's own f64 rounding (see
    /// [`interpreter_rounding`]), added to the bound on each input.
    pub max_slack: f64,
    pub examples: Vec<Mismatch>,
    /// Inputs the interpreter rejected, and why.
    pub rejections: Rejections,
}

/// The largest |output| the program gives on `count` random inputs within a real-valued model's
/// input bounds (lengths 1..=max-len; inputs the interpreter refuses are skipped), and how many
/// it evaluated: what a certified bound is compared with ([`raspc_compiler::real::Report::loose_bound_warning_seen`]).
pub fn sampled_magnitude(graph: &Graph, root: NodeId, real: &raspc_checkpoint::RealInput, max_len: usize, count: usize) -> (f64, usize) {
    let mut rng = SplitMix(0x5eed);
    let (mut m, mut n) = (0.0f64, 0);
    for _ in 0..count {
        let len = 1 + rng.below(max_len.max(1));
        let input: Vec<Atom> = (0..len).map(|p| real.bounds_at(p)).map(|(lo, hi)| Atom::Float(uniform(&mut rng, lo, hi))).collect();
        let Ok(v) = raspc_lang::evaluate(graph, root, &input) else { continue };
        let Value::Seq(v) = v else { continue };
        n += 1;
        m = v.iter().filter_map(Atom::as_f64).filter(|x| x.is_finite()).fold(m, |m, x| m.max(x.abs()));
    }
    (m, n)
}

/// Uniform in [lo, hi].
pub fn uniform(rng: &mut SplitMix, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
}

/// How far the interpreter's f64 evaluation of a real-valued program may be from the program's
/// exact value, which the certificate bounds the model against: a first-order estimate, one
/// rounding of at most 2^-53 of the largest result of an operation, per operation of the program
/// (`x * 3 - x - x - x` is exactly 0, and 0.125 in f64 at inputs near 1e15).
pub fn interpreter_rounding(graph: &Graph, all: &std::collections::HashMap<NodeId, Value>, input_len: usize) -> f64 {
    let mut largest = 0.0f64;
    let mut ops = 0usize;
    for (id, v) in all {
        // The results of operations round; the input and the positions are exact.
        if matches!(graph.node(*id).kind, raspc_lang::NodeKind::Tokens | raspc_lang::NodeKind::Indices | raspc_lang::NodeKind::Length) {
            continue;
        }
        if let raspc_lang::Value::Seq(s) = v {
            let m = s.iter().filter_map(Atom::as_f64).filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs()));
            if m > 0.0 {
                ops += 1;
                largest = largest.max(m);
            }
        }
    }
    // Each of the max-len positions of an aggregate adds into one sum: count it per position.
    (ops * input_len.max(1)) as f64 * largest * f64::EPSILON / 2.0
}

/// Checks a real-valued model on `count` random inputs (numbers uniform in the declared bounds;
/// lengths uniform in 1..=max_len, and max_len for every fourth input), hard attention.
pub fn verify_real(graph: &Graph, root: NodeId, model: &Model, count: usize, seed: u64, progress: &mut dyn FnMut(usize)) -> Result<RealReport, String> {
    let c = &model.checkpoint.config;
    let r = c.real_input.as_ref().ok_or("the model does not read real numbers")?;
    let bound = model.checkpoint.output.tolerance;
    let mut rng = SplitMix(seed);
    let mut report = RealReport { bound, ..Default::default() };
    for i in 0..count {
        if raspc_compiler::cancel::cancelled() {
            return Err(raspc_compiler::cancel::INTERRUPTED.into());
        }
        let len = if i % 4 == 0 { c.max_seq_len } else { 1 + rng.below(c.max_seq_len) };
        let xs: Vec<f64> = (0..len)
            .map(|p| {
                let (lo, hi) = r.bounds_at(p);
                uniform(&mut rng, lo, hi)
            })
            .collect();
        let atoms: Vec<Atom> = xs.iter().map(|&x| Atom::Float(x)).collect();
        // Every node's value, once: the expected output, and the magnitudes that bound the
        // interpreter's rounding (a causal model's output is read per prefix).
        let evaluated = raspc_lang::interp::evaluate_all(graph, root, &atoms).and_then(|all| match (c.causal, all.get(&root)) {
            (false, Some(Value::Seq(s))) => Ok((s.clone(), all)),
            _ => expected_or_error(graph, root, &atoms, c.causal).map(|w| (w, all)),
        });
        let (want, all) = match evaluated {
            Ok(w) => w,
            Err(e) => {
                report.rejections.add(graph, &atoms, &e);
                progress(i + 1);
                continue;
            }
        };
        let out = model.forward_real(std::slice::from_ref(&xs), Attention::Hard).map_err(|e| e.to_string())?;
        let got = model.decode(&out).map_err(|e| e.to_string())?.remove(0);
        let slack = interpreter_rounding(graph, &all, atoms.len());
        report.max_slack = report.max_slack.max(slack);
        let mut bad = false;
        for (g, w) in got.iter().zip(&want) {
            let (Decoded::Number { raw, .. }, Some(w)) = (g, w.as_f64()) else {
                bad = true;
                continue;
            };
            let e = (raw - w).abs();
            report.max_err = report.max_err.max(e);
            bad |= e.is_nan() || e > bound + slack;
        }
        if bad {
            report.failed += 1;
            if report.examples.len() < 3 {
                report.examples.push(Mismatch { attention: Attention::Hard, input: atoms, expected: want, got });
            }
        }
        report.checked += 1;
        progress(i + 1);
    }
    Ok(report)
}
