//! `raspc probe svflow` on compiled checkpoints: the SVFlow metrics (runtime/src/svflow.rs) per
//! layer and head under prefix shuffling, against the task score (agreement with the
//! interpreter, NLL, ECE). docs/svflow.md defines every number printed here.

use crate::verify::{agrees, SplitMix};
use raspc_checkpoint::{Checkpoint, Encoding};
use raspc_lang::{Atom, Graph, NodeId};
use raspc_runtime::svflow::probe_query;
use raspc_runtime::{Attention, Decoded, Model};

/// The metrics averaged per layer (over heads and scored queries).
pub const METRICS: [&str; 5] = ["log_marginal", "elbo", "kl_q_p", "kl_q_u_norm", "kl_p_u_norm"];

#[derive(Clone, Debug)]
pub struct Settings {
    pub seq_len: usize,
    pub eval_window: usize,
    pub levels: Vec<f64>,
    pub seeds: u64,
    pub sequences: usize,
    pub attention: Attention,
    pub attn_temp: f64,
    pub weight_noise: f64,
    /// Readout temperature for NLL and ECE: probabilities are softmax(readout / t).
    pub readout_temp: f64,
}

/// One (level, seed) condition.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Condition {
    pub level: f64,
    pub seed: u64,
    /// Mean NLL in nats of the scored predictions; None (`null`) for a numerical output, which
    /// has no distribution over values.
    pub nll: Option<f64>,
    pub accuracy: f64,
    /// Expected calibration error; None for a numerical output.
    pub ece: Option<f64>,
    /// metric -> per layer mean (over heads and scored queries).
    pub layers: std::collections::BTreeMap<String, Vec<f64>>,
    /// metric -> per layer, per head mean (over scored queries).
    pub heads: std::collections::BTreeMap<String, Vec<Vec<f64>>>,
    /// exp(NLL); for raspc checkpoints, of the readout distribution.
    pub perplexity: Option<f64>,
    pub scored: usize,
    /// Scored predictions left out of the NLL: the reference's value is none of the output's
    /// values (a --program other than the model's), so the readout gives it no probability.
    pub nll_excluded: usize,
    /// Scored queries whose probes were not finite (left out of the means).
    pub probes_excluded: usize,
}

/// True when the finite values of `v` differ by at most 1e-6 of their size (or not at all):
/// a series that varies only by rounding (the models run in f32: about 1e-7 relative per step).
pub fn nearly_constant(v: &[f64]) -> bool {
    let finite = v.iter().copied().filter(|x| x.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    // No finite value (lo > hi): nothing varies either.
    lo > hi || hi - lo <= 1e-6 * lo.abs().max(hi.abs())
}

/// Permutes a random fraction `level` of positions 1..end (position 0 stays), seeded.
pub fn shuffle_prefix(seq: &mut [usize], end: usize, level: f64, rng: &mut SplitMix) {
    let movable: Vec<usize> = (1..end.min(seq.len())).collect();
    // A level outside [0, 1] (or NaN, which casts to 0) moves at most every movable position.
    let m = ((level * movable.len() as f64).round() as usize).min(movable.len());
    // Choose m positions (partial Fisher-Yates), then permute their tokens among them.
    let mut pos = movable.clone();
    for i in 0..m {
        let j = i + rng.below(pos.len() - i);
        pos.swap(i, j);
    }
    let chosen = &pos[..m];
    let mut toks: Vec<usize> = chosen.iter().map(|&p| seq[p]).collect();
    for i in (1..toks.len()).rev() {
        let j = rng.below(i + 1);
        toks.swap(i, j);
    }
    for (&p, t) in chosen.iter().zip(toks) {
        seq[p] = t;
    }
}

fn perturb(ck: &Checkpoint, s: &Settings, seed: u64) -> Checkpoint {
    let mut ck = ck.clone();
    ck.config.attention.soft_beta /= s.attn_temp;
    if s.weight_noise > 0.0 {
        let mut rng = SplitMix(0x5EED ^ seed);
        for (name, t) in ck.tensors.iter_mut() {
            if name.starts_with("layers.") {
                for x in t.data.iter_mut() {
                    // Box-Muller from two uniforms.
                    let u1 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 + 1e-300;
                    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    *x += (s.weight_noise * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32;
                }
            }
        }
    }
    ck
}

/// Sums for one condition: the probes per layer and head, and the task's predictions.
struct Acc {
    sums: Vec<Vec<f64>>,
    counts: Vec<usize>,
    head_sums: Vec<Vec<Vec<f64>>>,
    head_counts: Vec<Vec<usize>>,
    nll: f64,
    nll_count: usize,
    nll_excluded: usize,
    probes_excluded: usize,
    /// False for a numerical output: no NLL or ECE.
    distribution: bool,
    correct: usize,
    scored: usize,
    bins: Vec<(usize, f64, usize)>,
}

impl Acc {
    /// `distribution`: the output is categorical (a numerical one has no NLL or ECE).
    fn new(layers: usize, distribution: bool) -> Acc {
        Acc {
            sums: vec![vec![0.0; layers]; METRICS.len()],
            counts: vec![0; layers],
            head_sums: vec![vec![vec![]; layers]; METRICS.len()],
            head_counts: vec![vec![]; layers],
            nll: 0.0,
            nll_count: 0,
            nll_excluded: 0,
            probes_excluded: 0,
            distribution,
            correct: 0,
            scored: 0,
            bins: vec![(0, 0.0, 0); 15],
        }
    }

    /// The probes of the scored query rows `rows` of every head of captured layer `l`;
    /// `visible(i)` is the number of keys query i sees.
    fn add_layer(&mut self, l: usize, c: &raspc_runtime::LayerCapture, rows: std::ops::Range<usize>, visible: &dyn Fn(usize) -> usize) -> Result<(), String> {
        // The accumulators have one entry per captured layer (sized from the model): `l` is one.
        let (Some(counts), Some(head_counts)) = (self.counts.get_mut(l), self.head_counts.get_mut(l)) else {
            return Err(format!("internal: layer {l} has no accumulator"));
        };
        if head_counts.len() < c.heads.len() {
            head_counts.resize(c.heads.len(), 0);
            for hs in self.head_sums.iter_mut() {
                hs[l].resize(c.heads.len(), 0.0); // same length as head_counts: l is in range
            }
        }
        let short = |what: &str, i: usize| format!("the captured attention of layer {l} has no {what} for query {i}");
        for (hi, h) in c.heads.iter().enumerate() {
            for i in rows.clone() {
                let vis = visible(i);
                let weights = h.weights.get(i).and_then(|w| w.get(..vis)).ok_or_else(|| short("weights", i))?;
                let scores = h.scores.get(..vis).ok_or_else(|| short("key scores", i))?;
                let input = c.input.get(i).ok_or_else(|| short("residual", i))?;
                let p = probe_query(weights, input, scores)?;
                let vals = [p.log_marginal, p.elbo, p.kl_q_p, p.kl_q_u_norm, p.kl_p_u_norm];
                // A query whose probes are not all finite is left out of every mean (counted),
                // not averaged in as 0.
                if vals.iter().any(|v| !v.is_finite()) {
                    self.probes_excluded += 1;
                    continue;
                }
                // sums and head_sums have METRICS.len() == vals.len() rows of one entry per
                // layer; head_sums[m][l] was resized to the heads above.
                for (m, v) in vals.iter().enumerate() {
                    self.sums[m][l] += v;
                    self.head_sums[m][l][hi] += v;
                }
                *counts += 1;
                head_counts[hi] += 1;
            }
        }
        Ok(())
    }

    /// One scored prediction: correct or not, its confidence (for ECE) and its NLL (None: the
    /// target has no probability under the readout; it is counted apart).
    fn add_prediction(&mut self, ok: bool, confidence: Option<f64>, nll: Option<f64>) {
        self.correct += ok as usize;
        self.scored += 1;
        match nll {
            Some(x) => {
                self.nll += x;
                self.nll_count += 1;
            }
            // (A numerical output has no NLL at all: nothing is left out.)
            None if self.distribution => self.nll_excluded += 1,
            None => {}
        }
        if let Some(conf) = confidence {
            let b = ((conf * 15.0) as usize).min(14);
            self.bins[b].0 += 1;
            self.bins[b].1 += conf;
            self.bins[b].2 += ok as usize;
        }
    }

    fn finish(self, level: f64, seed: u64) -> Condition {
        let scored = self.scored.max(1) as f64;
        // (`+ 0.0`: an empty f64 sum is -0.0, which would print as "-0.0000".)
        let ece = self.bins.iter().filter(|b| b.0 > 0).map(|b| (b.0 as f64 / scored) * (b.1 / b.0 as f64 - b.2 as f64 / b.0 as f64).abs()).sum::<f64>() + 0.0;
        let (layers, heads) = summarise(&self.sums, &self.counts, &self.head_sums, &self.head_counts);
        let nll = (self.distribution && self.nll_count > 0).then(|| self.nll / self.nll_count as f64);
        Condition {
            level,
            seed,
            nll,
            perplexity: nll.map(f64::exp),
            accuracy: self.correct as f64 / scored,
            ece: self.distribution.then_some(ece),
            layers,
            heads,
            scored: self.scored,
            nll_excluded: self.nll_excluded,
            probes_excluded: self.probes_excluded,
        }
    }
}

/// Runs every condition. The task reference is the interpreter on `reference` (the program's
/// graph and entry) or, without one, the unperturbed checkpoint under hard attention (the
/// semantics it was compiled for) on the same shuffled input.
pub fn run(ck: &Checkpoint, reference: Option<(&Graph, NodeId)>, vocab: &[Atom], s: &Settings, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Condition>, String> {
    if vocab.is_empty() || s.seq_len == 0 {
        return Err("probe svflow needs a vocabulary with at least one token and --seq-len >= 1".into());
    }
    let unperturbed = match reference {
        Some(_) => None,
        None => Some(Model::new(ck.clone(), &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?),
    };
    let n = s.seq_len;
    let e = s.eval_window.clamp(1, n);
    let mut base_rng = SplitMix(0xC0FFEE);
    let base: Vec<Vec<usize>> = (0..s.sequences).map(|_| (0..n).map(|_| base_rng.below(vocab.len())).collect()).collect();
    let total = s.levels.len() * s.seeds as usize;
    let mut out = vec![];
    for (li, &level) in s.levels.iter().enumerate() {
        for seed in 0..s.seeds {
            let perturbed = perturb(ck, s, seed);
            // Noise past f32's range makes weights infinite: the flag's doing, not the file's.
            if let Some((name, _)) = perturbed.tensors.iter().find(|(_, t)| t.data.iter().any(|x| !x.is_finite())) {
                return Err(format!("--weight-noise {}: the perturbed weights overflow f32 (first in `{name}`)", crate::args::num(s.weight_noise)));
            }
            let model = Model::new(perturbed, &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?;
            let mut acc = Acc::new(ck.config.layers.len(), matches!(ck.output.encoding, Encoding::Categorical { .. }));
            let mut rng = SplitMix(seed.wrapping_mul(0x9E37) ^ (li as u64) << 32);
            for seq in &base {
                let mut seq = seq.clone();
                shuffle_prefix(&mut seq, n - e, level, &mut rng);
                // Base tokens are drawn below vocab.len(); shuffling only permutes them.
                let atoms: Vec<Atom> = seq.iter().map(|&t| vocab.get(t).cloned().ok_or_else(|| format!("internal: token index {t} beyond the vocabulary"))).collect::<Result<_, _>>()?;
                let want = match (reference, &unperturbed) {
                    (Some((graph, root)), _) => crate::verify::expected(graph, root, &atoms, ck.config.causal),
                    (None, Some(m)) => model_output(m, &atoms)?,
                    (None, None) => None,
                };
                let Some(want) = want else { continue };
                let ids = model.encode(&atoms.iter().map(Atom::to_json).collect::<Vec<_>>()).map_err(|e| e.to_string())?;
                let (readout, caps) = model.forward_capture(&ids, s.attention).map_err(|e| e.to_string())?;
                let causal = ck.config.causal;
                for (l, c) in caps.iter().enumerate() {
                    // Scored query rows: the last e tokens (residual rows n-e+1 ..= n, BOS is row 0).
                    acc.add_layer(l, c, (n + 1 - e)..(n + 1), &|i| if causal { i + 1 } else { n + 1 })?;
                }
                let rows: Vec<Vec<f32>> = readout.to_vec3::<f32>().map_err(|e| e.to_string())?.remove(0);
                let decoded = model.decode(&readout).map_err(|e| e.to_string())?.remove(0);
                for i in (n - e)..n {
                    // The model decodes n positions and the reference gives n values; a shorter
                    // reference (a program whose output is not one value per position) is an error.
                    let (Some(got), Some(want_i), Some(row)) = (decoded.get(i), want.get(i), rows.get(i + 1)) else {
                        return Err(format!("position {i} is missing from the model's output ({} values) or the reference ({} values)", decoded.len(), want.len()));
                    };
                    let ok = agrees(got, want_i, ck.output.tolerance);
                    match &ck.output.encoding {
                        Encoding::Categorical { values } => {
                            let logits: Vec<f64> = row.iter().map(|&x| x as f64 / s.readout_temp).collect();
                            let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            let z: f64 = logits.iter().map(|x| (x - m).exp()).sum();
                            let target = values.iter().position(|v| agrees(&Decoded::Value(v.clone()), want_i, 0.0));
                            // -log softmax, in logs (a probability below f64's range is no
                            // reason to cap the NLL).
                            let nll = target.and_then(|t| logits.get(t)).map(|l| m + z.ln() - l);
                            // The top probability is exp(m - m) / z.
                            acc.add_prediction(ok, Some(1.0 / z), nll);
                        }
                        Encoding::Numerical { .. } | Encoding::MultiHot { .. } => acc.add_prediction(ok, None, None),
                    }
                }
            }
            out.push(acc.finish(level, seed));
            progress(out.len(), total);
        }
    }
    Ok(out)
}

/// The unperturbed model's outputs (hard attention) as atoms, the reference without a program.
fn model_output(m: &Model, atoms: &[Atom]) -> Result<Option<Vec<Atom>>, String> {
    let ids = m.encode(&atoms.iter().map(Atom::to_json).collect::<Vec<_>>()).map_err(|e| e.to_string())?;
    let r = m.forward(&[ids], Attention::Hard).map_err(|e| e.to_string())?;
    let decoded = m.decode(&r).map_err(|e| e.to_string())?;
    Ok(decoded.into_iter().next().map(|d| d.iter().map(crate::verify::decoded_atom).collect()))
}

type PerLayer = std::collections::BTreeMap<String, Vec<f64>>;
type PerHead = std::collections::BTreeMap<String, Vec<Vec<f64>>>;

fn summarise(sums: &[Vec<f64>], counts: &[usize], head_sums: &[Vec<Vec<f64>>], head_counts: &[Vec<usize>]) -> (PerLayer, PerHead) {
    let (mut per_layer, mut per_head) = (PerLayer::new(), PerHead::new());
    let div = |s: f64, c: usize| if c > 0 { s / c as f64 } else { f64::NAN };
    // sums and head_sums have one row per metric (Acc::new sizes them from METRICS).
    for (m, name) in METRICS.iter().enumerate() {
        per_layer.insert(name.to_string(), sums[m].iter().zip(counts).map(|(s, &c)| div(*s, c)).collect());
        per_head.insert(name.to_string(), head_sums[m].iter().zip(head_counts).map(|(hs, hc)| hs.iter().zip(hc).map(|(s, &c)| div(*s, c)).collect()).collect());
    }
    (per_layer, per_head)
}

/// Average ranks (ties share the mean rank).
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let (va, vb): (f64, f64) = (a.iter().map(|x| (x - ma).powi(2)).sum(), b.iter().map(|y| (y - mb).powi(2)).sum());
    if va == 0.0 || vb == 0.0 {
        f64::NAN
    } else {
        cov / (va * vb).sqrt()
    }
}

/// Spearman's ρ with average ranks, and a two-sided permutation p-value (`perms` shuffles).
pub fn spearman(a: &[f64], b: &[f64], perms: usize, seed: u64) -> (f64, f64) {
    // Differences at the last digits of a float are rounding, not an ordering to correlate;
    // two points always give ±1 (helper s23: "across levels 1.000 (p 1.000)" for two levels).
    if a.len() < 3 || nearly_constant(a) || nearly_constant(b) {
        return (f64::NAN, f64::NAN);
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let rho = pearson(&ra, &rb);
    if !rho.is_finite() {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = SplitMix(seed);
    let mut shuffled = rb.clone();
    let mut hits = 0;
    for _ in 0..perms {
        for i in (1..shuffled.len()).rev() {
            let j = rng.below(i + 1);
            shuffled.swap(i, j);
        }
        if pearson(&ra, &shuffled).abs() >= rho.abs() - 1e-12 {
            hits += 1;
        }
    }
    (rho, (hits + 1) as f64 / (perms + 1) as f64)
}

/// Per layer: z = (mean at the highest level - mean at the lowest) / pooled sd over seeds, and
/// its regime. A layer whose values at both levels agree to rounding (see [`nearly_constant`])
/// is insensitive (z 0); one whose seeds do not spread at all while the levels differ has no z
/// (None: one seed, or a deterministic change), regime "no spread over seeds".
pub fn sensitivity(conds: &[Condition], metric: &str, layers: usize) -> Vec<(Option<f64>, &'static str)> {
    let lo = conds.iter().map(|c| c.level).fold(f64::INFINITY, f64::min);
    let hi = conds.iter().map(|c| c.level).fold(f64::NEG_INFINITY, f64::max);
    (0..layers)
        .map(|l| {
            let at = |lv: f64| -> Vec<f64> { conds.iter().filter(|c| c.level == lv).filter_map(|c| c.layers.get(metric)?.get(l).copied()).filter(|x| x.is_finite()).collect() };
            let (a, b) = (at(lo), at(hi));
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            let var = |v: &[f64]| {
                let m = mean(v);
                v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len().max(2) - 1) as f64
            };
            let sd = ((var(&a) + var(&b)) / 2.0).sqrt();
            let diff = mean(&b) - mean(&a);
            let both: Vec<f64> = a.iter().chain(&b).copied().collect();
            if nearly_constant(&both) {
                return (Some(0.0), "insensitive");
            }
            let scale = both.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            if sd <= 1e-9 * scale {
                return (None, "no spread over seeds");
            }
            let z = diff / sd;
            let label = if z.abs() < 1.0 {
                "insensitive"
            } else if z.abs() < 3.0 {
                "moderate"
            } else {
                "high"
            };
            (Some(z), label)
        })
        .collect()
}

/// The same probe on a GGUF language model: `text` is tokenized and cut into `sequences`
/// windows of `seq_len` tokens; the task score is next-token prediction of the scored tokens.
pub fn run_lm(lm: &raspc_lm::LanguageModel, text: &str, s: &Settings, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<Condition>, String> {
    let ids = lm.encode(text).map_err(|e| e.to_string())?;
    let n = s.seq_len;
    if n < 2 {
        return Err(format!("--seq-len {n}: a language model needs at least 2 tokens (one to predict from)"));
    }
    let e = s.eval_window.clamp(1, n - 1);
    if ids.len() < n {
        return Err(format!("the text has {} tokens; --seq-len {n} needs at least {n} (a longer --text, or a --seq-len of at most {})", ids.len(), ids.len()));
    }
    let stride = ((ids.len() - n) / s.sequences.max(1)).max(1);
    let base: Vec<Vec<usize>> = (0..s.sequences).map(|k| ids[(k * stride).min(ids.len() - n)..][..n].iter().map(|&t| t as usize).collect()).collect();
    let layers = lm.config.layers;
    let total = s.levels.len() * s.seeds as usize;
    let mut out = vec![];
    for (li, &level) in s.levels.iter().enumerate() {
        for seed in 0..s.seeds {
            let mut acc = Acc::new(layers, true);
            let mut rng = SplitMix(seed.wrapping_mul(0x9E37) ^ (li as u64) << 32);
            for seq in &base {
                let mut seq = seq.clone();
                shuffle_prefix(&mut seq, n - e, level, &mut rng);
                let toks: Vec<u32> = seq.iter().map(|&t| t as u32).collect();
                let mut caps = vec![];
                let logits = lm.forward_with(&toks, Some(&mut caps), s.attn_temp).map_err(|e| e.to_string())?;
                for (l, c) in caps.iter().enumerate() {
                    acc.add_layer(l, c, (n - e)..n, &|i| i + 1)?;
                }
                let lp = raspc_lm::log_softmax_rows(&logits).map_err(|e| e.to_string())?;
                for i in (n - e)..n {
                    // e <= n - 1, so i >= 1; lp has one row per token. A token id beyond the
                    // logits (a tokenizer larger than the embedding) is an error, not a panic.
                    let (Some(row), Some(&target)) = (lp.get(i - 1), toks.get(i)) else { return Err(format!("internal: no logits for position {i}")) };
                    let target = target as usize;
                    let lp_target =
                        *row.get(target).ok_or_else(|| format!("token id {target} is beyond the model's {} logits (the tokenizer is larger than the embedding)", row.len()))?;
                    let (best, &top) = row.iter().enumerate().fold((0, &f64::NEG_INFINITY), |b, (j, x)| if *x > *b.1 { (j, x) } else { b });
                    acc.add_prediction(best == target, Some(top.exp()), Some(-lp_target));
                }
            }
            out.push(acc.finish(level, seed));
            progress(out.len(), total);
        }
    }
    Ok(out)
}
