//! The fast CPU backend (runtime/src/fast.rs, the default on the CPU) against the candle backend,
//! on every program of Tracr's library (tests/corpus/tracr) at two max-lens, hard and soft
//! attention, f32 and f64, causal and not, and on the universal simulator U (real inputs).
//!
//! Tolerance. Both backends compute the same products of the same stored f32 weights in the same
//! precision; the fast one skips exact zeros and may add the remaining terms of a sum in
//! another order. Reordering a sum of n terms changes it by at most 2(n-1)·u·Σ|terms| (u the
//! unit roundoff: 2^-24 for f32, 2^-53 for f64), and a later layer can only scale such a
//! difference by the size of its weights. With at most a few hundred terms per sum, weights
//! within 1e3 and a handful of layers, the readouts may differ by at most about
//! 1e3 · 2·500·u · depth relative to the readout scale: 1e-4 · max(1, max|readout|) in f32 and
//! 1e-12 · max(1, max|readout|) in f64 are safely above that (the largest difference seen is
//! printed). Decoded values (categorical values, numbers snapped to the output's known values)
//! must be identical.

use raspc_lang::Atom;
use raspc_runtime::{Attention, Backend, DType, Device, Model};
use raspc_tests::Case;

const PROGRAMS: &[(&str, &str)] = raspc_tests::TRACR_PROGRAMS;

/// Programs of the list that compile with `--causal` (prefix-stable).
const CAUSAL: &[&str] = &["frac_prevs", "pair_balance", "shift_by", "detect_pattern", "nary_sequencemap"];

fn flat(t: &raspc_runtime::Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

/// Random inputs (seeded) of lengths 1, max_len / 2 and max_len, grouped into equal-length
/// batches of token ids.
fn batches(model: &Model, vocab: &[Atom], max_len: usize) -> Vec<Vec<Vec<u32>>> {
    let seqs = raspc::verify::generate(&raspc::verify::Inputs::Random { count: 24, seed: 11 }, vocab.len(), max_len).unwrap();
    [1, max_len.div_ceil(2), max_len]
        .iter()
        .map(|&len| {
            seqs.iter()
                .map(|s| {
                    let input: Vec<serde_json::Value> = (0..len).map(|i| vocab[s[i % s.len()]].to_json()).collect();
                    model.encode(&input).unwrap()
                })
                .collect()
        })
        .collect()
}

/// Tracr's programs compiled at max-len 16 and, the prefix-stable ones, causal at max-len 8:
/// `(name, max_len, causal, vocabulary, compiled)`.
fn tracr_16_and_causal_8() -> Vec<(&'static str, usize, bool, Vec<Atom>, raspc_compiler::Compiled)> {
    let mut out = vec![];
    for &(name, vocab) in PROGRAMS {
        let file: &'static str = Box::leak(format!("tracr/{name}.rasp").into_boxed_str());
        for (max_len, causal) in [(16, false), (8, true)] {
            if causal && !CAUSAL.contains(&name) {
                continue;
            }
            let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file, entry: None, vocab }, max_len, causal).unwrap_or_else(|e| panic!("{name}: {e}"));
            out.push((name, max_len, causal, atoms, compiled));
        }
    }
    out
}

/// Largest |fast - candle| over every batch, both attentions; checks the tolerance and that the
/// decoded values agree.
fn compare(what: &str, fast: &Model, candle: &Model, batches: &[Vec<Vec<u32>>], rel: f64) -> f64 {
    let mut worst: f64 = 0.0;
    for batch in batches {
        for att in [Attention::Hard, Attention::Soft] {
            let (a, b) = (fast.forward(batch, att).unwrap(), candle.forward(batch, att).unwrap());
            assert_eq!(a.dims(), b.dims(), "{what}");
            let (fa, fb) = (flat(&a), flat(&b));
            let scale = fb.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            for (x, y) in fa.iter().zip(&fb) {
                let diff = (x - y).abs();
                assert!(diff <= rel * scale, "{what} {att:?} len {}: fast {x} vs candle {y} (tolerance {})", batch[0].len() - 1, rel * scale);
                worst = worst.max(diff / scale);
            }
            // Decoded values (categorical values, numbers snapped to the known values) agree; raw
            // numbers were compared above.
            let values = |m: &Model, t| m.decode(t).unwrap().iter().map(|s| s.iter().map(|v| v.to_json()).collect::<Vec<_>>()).collect::<Vec<_>>();
            assert_eq!(values(fast, &a), values(candle, &b), "{what} {att:?}");
        }
    }
    worst
}

/// The residual streams `trace` returns (after the embeddings and every sublayer) agree stage by
/// stage, within the tolerance of [`compare`] relative to each stage's largest entry.
fn compare_traces(what: &str, fast: &[raspc_runtime::Stage], candle: &[raspc_runtime::Stage], rel: f64) {
    let names = |s: &[raspc_runtime::Stage]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(fast), names(candle), "{what}");
    for ((stage, a), (_, b)) in fast.iter().zip(candle) {
        assert_eq!((a.len(), a.first().map(Vec::len)), (b.len(), b.first().map(Vec::len)), "{what} {stage}");
        let scale = b.iter().flatten().fold(1.0f64, |m, &x| m.max(f64::from(x).abs()));
        for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
            // f32 stages: the f32 conversion of each adds up to half an ulp.
            let tol = rel.max(2.0 * f64::from(f32::EPSILON)) * scale;
            assert!((f64::from(*x) - f64::from(*y)).abs() <= tol, "{what} {stage}: fast {x} vs candle {y} (tolerance {tol})");
        }
    }
}

#[test]
fn fast_backend_matches_candle_on_tracr_programs() {
    let mut worst = (0.0f64, 0.0f64);
    for &(name, vocab) in PROGRAMS {
        let file: &'static str = Box::leak(format!("tracr/{name}.rasp").into_boxed_str());
        for (max_len, causal) in [(6, false), (16, false), (8, true)] {
            if causal && !CAUSAL.contains(&name) {
                continue;
            }
            let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file, entry: None, vocab }, max_len, causal).unwrap_or_else(|e| panic!("{name}: {e}"));
            for (dtype, rel) in [(DType::F32, 1e-4), (DType::F64, 1e-12)] {
                let fast = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
                assert_eq!(fast.backend(), Backend::Fast);
                let candle = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
                let what = format!("{name} max-len {max_len} causal {causal} {dtype:?}");
                let batches = batches(&fast, &atoms, max_len);
                let w = compare(&what, &fast, &candle, &batches, rel);
                for att in [Attention::Hard, Attention::Soft] {
                    let ids = &batches.last().unwrap()[0];
                    compare_traces(&format!("{what} {att:?} trace"), &fast.trace(ids, att).unwrap(), &candle.trace(ids, att).unwrap(), rel);
                }
                if dtype == DType::F32 {
                    worst.0 = worst.0.max(w);
                } else {
                    worst.1 = worst.1.max(w);
                }
            }
        }
    }
    eprintln!("largest relative difference: f32 {:e}, f64 {:e}", worst.0, worst.1);
}

/// The structured hard-attention paths (runtime/src/fast.rs `HeadKind`) are found on the programs
/// they are for and agree with candle; with BOS ids away from position 0 (which the positional
/// path assumes absent) the fast backend falls back to score rows and still agrees. The raw
/// readouts are compared there (such inputs need not decode).
#[test]
fn fast_backend_structured_heads_match_candle() {
    // frac_prevs: `<=` on indices (long key intervals: prefix sums); shift_by: one key per query;
    // length and histogram: scores over tokens only.
    for (name, kind, causal) in
        [("frac_prevs", "position", false), ("frac_prevs", "position", true), ("shift_by", "position", true), ("length", "token", false), ("histogram", "token", false)]
    {
        let &(_, vocab) = PROGRAMS.iter().find(|p| p.0 == name).unwrap();
        let file: &'static str = Box::leak(format!("tracr/{name}.rasp").into_boxed_str());
        let max_len = 12;
        let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file, entry: None, vocab }, max_len, causal).unwrap();
        for (dtype, rel) in [(DType::F32, 1e-4), (DType::F64, 1e-12)] {
            let fast = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let kinds = fast.fast_head_kinds().unwrap();
            assert!(kinds.iter().flatten().any(|&k| k == kind), "{name}: head paths {kinds:?}, expected a {kind} head");
            let candle = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
            let what = format!("{name} causal {causal} {dtype:?}");
            let batches = batches(&fast, &atoms, max_len);
            compare(&what, &fast, &candle, &batches, rel);
            let bos = fast.checkpoint.config.bos_id as u32;
            for batch in &batches {
                let t = batch[0].len();
                // BOS again at the last position, at every position, and missing from position 0.
                let mut odd: Vec<Vec<u32>> = batch.iter().map(|s| s.iter().enumerate().map(|(i, &id)| if i + 1 == t { bos } else { id }).collect()).collect();
                odd.push(vec![bos; t]);
                odd.push(batch[0].iter().map(|&id| if id == bos { batch[0].get(1).copied().unwrap_or(bos) } else { id }).collect());
                let (a, b) = (flat(&fast.forward(&odd, Attention::Hard).unwrap()), flat(&candle.forward(&odd, Attention::Hard).unwrap()));
                let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                for (x, y) in a.iter().zip(&b) {
                    assert!((x - y).abs() <= rel * scale, "{what} with BOS elsewhere, len {}: fast {x} vs candle {y}", t - 1);
                }
            }
        }
    }
}

#[test]
fn fast_backend_matches_candle_on_the_universal_simulator() {
    use raspc::simulate::{Bounds, Layout, Shape};
    use raspc_compiler::real::MlpMode;
    let s = Shape { n: 2, d: 2, dv: 2, h: 2 };
    // The plain layout with either MLP, and the split layout (more blocks, more head kinds)
    // at a shape whose blocks are several of the fast path's 32-position blocks long.
    let split = Shape { n: 6, d: 5, dv: 3, h: 2 };
    let b = Bounds { x: 1.0, a: 1.0, v: 1.0 };
    for (s, mode, layout) in [(s, MlpMode::Gated, Layout::Plain), (s, MlpMode::Relu, Layout::Plain), (split, MlpMode::Gated, Layout::split_for(split, b))] {
        let u = raspc::simulate::build_layout(s, mode, b, None, true, layout).unwrap();
        let mut rng = raspc::verify::SplitMix(5);
        let trials: Vec<raspc::simulate::Instance> = (0..4).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng)).collect();
        let inputs: Vec<Vec<f64>> = trials.iter().map(|t| t.encode_in(layout)).collect();
        for (dtype, rel) in [(DType::F32, 1e-4), (DType::F64, 1e-12)] {
            let fast = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let candle = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
            let (a, b) = (flat(&fast.forward_real(&inputs, Attention::Hard).unwrap()), flat(&candle.forward_real(&inputs, Attention::Hard).unwrap()));
            let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= rel * scale, "U {layout:?} {mode:?} {dtype:?}: fast {x} vs candle {y}");
            }
            compare_traces(
                &format!("U {layout:?} {mode:?} {dtype:?} trace"),
                &fast.trace_real(&inputs[0], Attention::Hard).unwrap(),
                &candle.trace_real(&inputs[0], Attention::Hard).unwrap(),
                rel,
            );
        }
    }
}

/// A real-valued checkpoint whose BOS is id 1 and number token id 0 (the format allows any
/// `bos_id`; raspc writes 0): the same file with the two ids swapped runs to the same outputs,
/// on both backends and through `run` (helper c20: BOS's embedding ran at every position).
#[test]
fn real_valued_models_read_the_bos_id_from_the_file() {
    use raspc_compiler::real::MlpMode;
    let s = raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 1 };
    let u = raspc::simulate::build(s, MlpMode::Gated, 1.0, None).unwrap();
    let mut swapped = u.compiled.checkpoint.clone();
    assert_eq!(swapped.config.bos_id, 0);
    swapped.config.bos_id = 1;
    let (bos, number) = (swapped.config.vocab[0].token.clone(), swapped.config.vocab[1].token.clone());
    swapped.config.vocab[0].token = number;
    swapped.config.vocab[1].token = bos;
    let emb = swapped.tensors.get_mut(raspc_checkpoint::names::TOKEN_EMBEDDING).unwrap();
    let d = emb.shape[1];
    let (first, second) = emb.data.split_at_mut(d);
    first.swap_with_slice(&mut second[..d]);
    // Through the file format, as another tool would write it.
    let swapped = raspc_checkpoint::Checkpoint::from_bytes(&swapped.to_bytes().unwrap()).unwrap();
    let mut rng = raspc::verify::SplitMix(11);
    let inputs: Vec<Vec<f64>> = (0..3).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng).encode()).collect();
    for backend in [Backend::Fast, Backend::Candle] {
        let a = Model::new(u.compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(backend).unwrap();
        let b = Model::new(swapped.clone(), &Device::Cpu).unwrap().with_backend(backend).unwrap();
        assert_eq!(flat(&a.forward_real(&inputs, Attention::Hard).unwrap()), flat(&b.forward_real(&inputs, Attention::Hard).unwrap()), "{backend:?}");
        let json: Vec<serde_json::Value> = inputs[0].iter().map(|&x| serde_json::json!(x)).collect();
        let (ra, rb) = (a.run(&json, Attention::Hard).unwrap(), b.run(&json, Attention::Hard).unwrap());
        assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "{backend:?}");
    }
}

/// U past 512 positions (n = 4, d = dv = 16, 576 positions): the position heads get their
/// attention patterns (gathers: one key per query), most MLP units run as piecewise-linear
/// groups, the max head shares rows between equal queries, and workspaces are reused between
/// calls. The fast backend matches candle (same tolerance as above: the groups change only the
/// rounding, see runtime/src/fast/pl.rs), a second call gives the same bits, and so does a call
/// after one on other inputs and one on a shorter sequence. Also: a sequence whose constant
/// dims are off (no BOS first) takes the unit-by-unit path and still matches candle.
#[test]
fn fast_backend_structured_u_matches_candle_past_512_positions() {
    use raspc_compiler::real::MlpMode;
    let s = raspc::simulate::Shape { n: 4, d: 16, dv: 16, h: 1 };
    assert!(s.seq_len() > 512, "{}", s.seq_len());
    let u = raspc::simulate::build(s, MlpMode::Gated, 1.0, None).unwrap();
    let mut rng = raspc::verify::SplitMix(9);
    let inputs: Vec<Vec<f64>> = (0..2).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng).encode()).collect();
    let other: Vec<Vec<f64>> = vec![raspc::simulate::Instance::random(s, 1.0, &mut rng).encode()];
    for (dtype, rel) in [(DType::F32, 1e-4), (DType::F64, 1e-12)] {
        let fast = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
        let candle = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
        let kinds = fast.fast_head_kinds().unwrap();
        let position = kinds.iter().flatten().filter(|&&k| k == "position").count();
        assert!(position * 10 >= kinds.iter().flatten().count() * 9, "{kinds:?}");
        let (grouped, units) = fast.fast_mlp_groups().unwrap().iter().fold((0, 0), |(g, n), &(a, b)| (g + a, n + b));
        assert!(grouped * 10 >= units * 9, "{grouped} of {units} units in groups");
        let first = flat(&fast.forward_real(&inputs, Attention::Hard).unwrap());
        let want = flat(&candle.forward_real(&inputs, Attention::Hard).unwrap());
        let scale = want.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for (x, y) in first.iter().zip(&want) {
            assert!((x - y).abs() <= rel * scale, "U {dtype:?}: fast {x} vs candle {y}");
        }
        let _ = fast.forward_real(&other, Attention::Hard).unwrap();
        let short: Vec<Vec<f64>> = vec![inputs[0][..100].to_vec()];
        let (a, b) = (flat(&fast.forward_real(&short, Attention::Hard).unwrap()), flat(&candle.forward_real(&short, Attention::Hard).unwrap()));
        let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= rel * scale, "U {dtype:?} at 100 positions: fast {x} vs candle {y}");
        }
        assert_eq!(flat(&fast.forward_real(&inputs, Attention::Hard).unwrap()), first, "{dtype:?}: a second call differs");
        // Token ids without BOS first: the position heads scan rows and the MLPs evaluate
        // every unit (the constant dims differ at position 0).
        let ids: Vec<Vec<u32>> = vec![std::iter::repeat_n(1u32, s.seq_len() + 1).collect()];
        let (a, b) = (flat(&fast.forward(&ids, Attention::Hard).unwrap()), flat(&candle.forward(&ids, Attention::Hard).unwrap()));
        let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= rel * scale || (x.is_nan() && y.is_nan()), "U {dtype:?} without BOS: fast {x} vs candle {y}");
        }
        // Real-valued inputs take the gated MLPs column by column over blocks of positions,
        // skipping units whose inputs are all zero in a block (not when an input is not
        // finite): the same numbers as position by position (f64 `==`: up to the sign of
        // zeros), with non-finite inputs too, which spread as in the non-finite test below.
        let mut rows = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
        rows.set_mlp_columns(false);
        let mut bad = inputs.clone();
        bad[0][3] = f64::NAN;
        bad[1][s.seq_len() / 2] = f64::INFINITY;
        bad.push(inputs[0].iter().map(|&v| if v == 0.0 { -0.0 } else { v }).collect());
        for batch in [&inputs, &bad] {
            let (a, b) = (flat(&fast.forward_real(batch, Attention::Hard).unwrap()), flat(&rows.forward_real(batch, Attention::Hard).unwrap()));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(x == y || (x.is_nan() && y.is_nan()), "U {dtype:?} output {i}: by blocks {x} vs by positions {y}");
            }
        }
        let (a, b) = (flat(&fast.forward_real(&bad, Attention::Hard).unwrap()), flat(&candle.forward_real(&bad, Attention::Hard).unwrap()));
        assert!(a.iter().any(|x| x.is_nan()), "{dtype:?}: the fast backend has no NaN output");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(!x.is_nan() || y.is_nan(), "{dtype:?} output {i}: fast {x} vs candle {y}");
            if !x.is_nan() && !y.is_nan() {
                assert!((x - y).abs() <= rel * scale.max(y.abs()), "U {dtype:?} with non-finite inputs, output {i}: fast {x} vs candle {y}");
            }
        }
    }
}

/// A gather whose every query reads a key of its own, past 512 positions (the matrix library's
/// transpose of a 24 x 24 block: 576 distinct query rows in 1,153 positions), has more distinct
/// rows than a pattern is computed for at once: the first sequence at a length scans rows, the
/// second computes the pattern in full and caches it, later ones look keys up. Every pass gives candle's
/// numbers and the same bits, at every length tried; a shorter length keeps its own pattern.
#[test]
fn position_heads_with_many_rows_get_their_pattern_from_the_second_pass_on() {
    use raspc_compiler::real::{MlpMode, RealOptions};
    let src = "y = transpose(tokens_float, 0, 24, 24, 576);";
    let (_, r) = raspc_lang::evaluate_program("<test>", None, src, &raspc_lang::MemoryLoader::default());
    let session = r.unwrap();
    let (_, root) = session.entry(None).unwrap();
    let opts = raspc_compiler::Options {
        max_len: 1152,
        real: Some(RealOptions { lo: -1.0, hi: 1.0, blocks: vec![], mlp: MlpMode::Gated, pl_error: None, f32_inputs: false, grids: vec![] }),
        ..Default::default()
    };
    let ck = raspc_compiler::compile(&session.graph, root, &opts, "test").unwrap().checkpoint;
    let mut rng = raspc::verify::SplitMix(5);
    let mut random = |len: usize| -> Vec<f64> { (0..len).map(|_| raspc::verify::uniform(&mut rng, -1.0, 1.0)).collect() };
    for dtype in [DType::F32, DType::F64] {
        let fast = Model::with_dtype(ck.clone(), &Device::Cpu, dtype).unwrap();
        let candle = Model::with_dtype(ck.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
        assert_eq!(fast.fast_head_kinds().unwrap(), vec![vec!["position"]]);
        let t = 1153;
        let mut seen = vec![];
        for (pass, want) in [(0, (0, 1)), (1, (1, 1)), (2, (1, 1))] {
            // One sequence a pass, then a batch of two.
            let x: Vec<Vec<f64>> = (0..1 + pass / 2).map(|_| random(1152)).collect();
            let (a, b) = (flat(&fast.forward_real(&x, Attention::Hard).unwrap()), flat(&candle.forward_real(&x, Attention::Hard).unwrap()));
            assert_eq!(a, b, "{dtype:?} pass {pass}: a transpose copies its inputs");
            // The block's own entries, transposed: position 576 + 24i + j holds entry [j][i].
            let entry = if dtype == DType::F32 { f64::from(x[0][24 * 5 + 3] as f32) } else { x[0][24 * 5 + 3] };
            assert_eq!(a[1 + 576 + 24 * 3 + 5], entry, "{dtype:?} pass {pass}");
            assert_eq!(fast.fast_patterns_cached(t), Some(want), "{dtype:?} after pass {pass}");
            seen.push((x, a));
        }
        // The same inputs again: the same bits as on the row scan's pass.
        for (x, a) in &seen {
            assert_eq!(&flat(&fast.forward_real(x, Attention::Hard).unwrap()), a, "{dtype:?}");
        }
        // A length of at most 512 positions gets its pattern at once.
        let x = vec![random(300)];
        assert_eq!(flat(&fast.forward_real(&x, Attention::Hard).unwrap()), flat(&candle.forward_real(&x, Attention::Hard).unwrap()));
        assert_eq!(fast.fast_patterns_cached(301), Some((1, 0)));
        // Past the longest input: nothing (the candle backend asks too), no panic.
        assert_eq!(fast.candle_lookup_heads(1154), 0);
        assert_eq!(fast.candle_lookup_heads(1 << 20), 0);
        assert_eq!(candle.candle_lookup_heads(1153), 1);
    }
    // frac_prevs past 512 positions: its `<=` mean keeps up to 600 keys per query (600 distinct
    // rows); its pattern would sum long intervals as prefix differences, which round unlike the
    // row scan, so the row scan stays: the same sequence gives the same bits on every call,
    // first or not (review helper-139: 495 of 601 outputs differed between the first call and
    // the second when such patterns were kept), in f32 and f64, causal or not.
    let &(_, vocab) = PROGRAMS.iter().find(|p| p.0 == "frac_prevs").unwrap();
    for causal in [false, true] {
        let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file: "tracr/frac_prevs.rasp", entry: None, vocab }, 600, causal).unwrap();
        let ids = raspc_tests::full_length_ids(&Model::new(compiled.checkpoint.clone(), &Device::Cpu).unwrap(), &atoms, 600, 2);
        for dtype in [DType::F32, DType::F64] {
            let fast = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let first = flat(&fast.forward(&ids[..1], Attention::Hard).unwrap());
            for _ in 0..2 {
                assert_eq!(flat(&fast.forward(&ids[..1], Attention::Hard).unwrap()), first, "frac_prevs causal {causal} {dtype:?}: a later call differs");
            }
            let (cached, over) = fast.fast_patterns_cached(601).unwrap();
            assert!(over >= 1 && cached + over <= fast.fast_head_kinds().unwrap().iter().flatten().count(), "frac_prevs causal {causal}: {cached} cached, {over} over");
        }
    }
}

/// Non-finite numbers in a real-valued input (without `check_finite`, which stops both backends
/// at "the embeddings"): the fast backend skips exact-zero weights, so NaN reaches fewer outputs
/// than in candle's dense products (0·NaN is NaN there), but every output the fast backend
/// makes NaN is NaN in candle too, some are, and the outputs both compute agree.
#[test]
fn fast_backend_spreads_non_finite_inputs_like_candle() {
    use raspc_compiler::real::MlpMode;
    let s = raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 1 };
    let u = raspc::simulate::build(s, MlpMode::Gated, 1.0, None).unwrap();
    let mut rng = raspc::verify::SplitMix(3);
    let mut inputs: Vec<Vec<f64>> = (0..3).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng).encode()).collect();
    inputs[0][1] = f64::NAN;
    inputs[1][2] = f64::INFINITY;
    inputs[2][0] = f64::NEG_INFINITY;
    for dtype in [DType::F32, DType::F64] {
        let fast = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
        let candle = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
        let (a, b) = (flat(&fast.forward_real(&inputs, Attention::Hard).unwrap()), flat(&candle.forward_real(&inputs, Attention::Hard).unwrap()));
        assert!(a.iter().any(|x| x.is_nan()), "{dtype:?}: the fast backend has no NaN output");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(!x.is_nan() || y.is_nan(), "{dtype:?} output {i}: fast {x} vs candle {y}");
            if !x.is_nan() && !y.is_nan() {
                assert!(x == y || (x - y).abs() <= 1e-4 * y.abs().max(1.0), "{dtype:?} output {i}: fast {x} vs candle {y}");
            }
        }
    }
}

/// The row heads' per-length caches (runtime/src/fast.rs: queries with the same vector share
/// one output, key dims that read position dims only are summed once per length) give the same
/// bits as reading every query and key from the residual stream: on Tracr's programs (causal and
/// not, both attentions) and on U (both layouts) with finite numbers and with NaN and ±inf
/// among them (such a number reaches every dim of its row, position dims too: the caches stand
/// aside for that sequence; helper-141 found them applied there).
#[test]
fn row_head_caches_give_the_same_bits() {
    use raspc::simulate::{Bounds, Layout, Shape};
    use raspc_compiler::real::MlpMode;
    let bits = |t: &raspc_runtime::Tensor| flat(t).iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let (mut queries, mut keys) = (0, 0);
    for (name, max_len, causal, atoms, compiled) in tracr_16_and_causal_8() {
        for dtype in [DType::F32, DType::F64] {
            let cached = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let mut plain = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            plain.set_head_caches(false);
            let (q, k) = cached.fast_row_head_caches().unwrap();
            (queries, keys) = (queries + q, keys + k);
            for batch in batches(&cached, &atoms, max_len) {
                for att in [Attention::Hard, Attention::Soft] {
                    assert_eq!(bits(&cached.forward(&batch, att).unwrap()), bits(&plain.forward(&batch, att).unwrap()), "{name} max-len {max_len} causal {causal} {dtype:?} {att:?}");
                }
            }
        }
    }
    assert!(queries > 0 && keys > 0, "Tracr's programs: {queries} heads with shared queries, {keys} with static keys");
    // Real-valued reversals (the select's keys, or its queries, on indices), numbers NaN or
    // infinite at the first, a middle and the last position among finite ones.
    for src in
        ["j = length - indices - 1;\nprog = aggregate(select(indices, j, ==), tokens_float);\n", "j = length - indices - 1;\nprog = aggregate(select(j, indices, ==), tokens_float);\n"]
    {
        let (_, r) = raspc_lang::evaluate_program("<test>", None, src, &raspc_lang::MemoryLoader::default());
        let session = r.unwrap();
        let (_, root) = session.entry(None).unwrap();
        let real = raspc_compiler::real::RealOptions { lo: -1.0, hi: 1.0, blocks: vec![], mlp: MlpMode::Gated, pl_error: None, f32_inputs: false, grids: vec![] };
        let opts = raspc_compiler::Options { max_len: 8, real: Some(real), ..Default::default() };
        let compiled =
            raspc_compiler::compile(&session.graph, root, &opts, "test").unwrap_or_else(|d| panic!("{src}: {}", d.iter().map(|x| x.message.clone()).collect::<Vec<_>>().join("; ")));
        let mut inputs: Vec<Vec<f64>> = (0..6).map(|i| (0..5).map(|p| ((i * 5 + p) as f64 * 0.37).sin()).collect()).collect();
        for (row, (at, v)) in [(0, f64::INFINITY), (2, f64::NAN), (4, f64::NEG_INFINITY), (1, 1e300), (3, f64::NAN)].into_iter().enumerate() {
            inputs[row + 1][at] = v;
        }
        for dtype in [DType::F32, DType::F64] {
            let cached = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let mut plain = Model::with_dtype(compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            plain.set_head_caches(false);
            let (q, k) = cached.fast_row_head_caches().unwrap();
            assert!(q + k > 0, "{src}: {q} heads with shared queries, {k} with static keys");
            for att in [Attention::Hard, Attention::Soft] {
                assert_eq!(bits(&cached.forward_real(&inputs, att).unwrap()), bits(&plain.forward_real(&inputs, att).unwrap()), "{src} {dtype:?} {att:?}");
            }
        }
    }
    let b = Bounds { x: 1.0, a: 1.0, v: 1.0 };
    let (plain_s, split_s) = (Shape { n: 3, d: 2, dv: 2, h: 2 }, Shape { n: 6, d: 5, dv: 3, h: 1 });
    for (s, layout) in [(plain_s, Layout::Plain), (split_s, Layout::split_for(split_s, b))] {
        let u = raspc::simulate::build_layout(s, MlpMode::Gated, b, None, true, layout).unwrap();
        let mut rng = raspc::verify::SplitMix(17);
        let mut inputs: Vec<Vec<f64>> = (0..5).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng).encode_in(layout)).collect();
        let last = inputs[0].len() - 1;
        inputs[1][last] = f64::INFINITY;
        inputs[2][0] = f64::NAN;
        inputs[3][last / 2] = f64::NEG_INFINITY;
        inputs[4][1] = 1e300;
        for dtype in [DType::F32, DType::F64] {
            let cached = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            let mut plain = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap();
            plain.set_head_caches(false);
            let (q, k) = cached.fast_row_head_caches().unwrap();
            assert!(q > 0 && k > 0, "U {layout:?}: {q} heads with shared queries, {k} with static keys");
            for att in [Attention::Hard, Attention::Soft] {
                assert_eq!(bits(&cached.forward_real(&inputs, att).unwrap()), bits(&plain.forward_real(&inputs, att).unwrap()), "U {layout:?} {dtype:?} {att:?}");
            }
        }
    }
}

#[test]
fn fast_backend_reports_bad_ids_and_ragged_batches() {
    let (_, _, _, compiled) = raspc_tests::compile(&Case { file: "tracr/reverse.rasp", entry: None, vocab: "abc" }, 5, false).unwrap();
    let model = Model::new(compiled.checkpoint, &Device::Cpu).unwrap();
    let vocab = model.checkpoint.config.vocab.len() as u32;
    let bos = model.checkpoint.config.bos_id as u32;
    let e = model.forward(&[vec![bos, vocab]], Attention::Hard).unwrap_err().to_string();
    assert!(e.contains(&format!("token id {vocab}")), "{e}");
    let e = model.forward(&[vec![bos, 1], vec![bos]], Attention::Hard).unwrap_err().to_string();
    assert!(e.contains("same length"), "{e}");
    let e = model.forward(&[vec![bos; 7]], Attention::Hard).unwrap_err().to_string();
    assert!(e.contains("at most 5"), "{e}");
}

/// A head that scores tokens only keeps a `[vocab, vocab]` table, up to 2^22 entries: past that
/// (2,048 tokens and BOS, and more) the head takes the general path of score rows, and agrees with
/// candle (helper b19: a checkpoint with 65,536 tokens, within the budgets, asked for 17 GB at
/// load).
#[test]
fn fast_backend_token_tables_stay_small_for_large_vocabularies() {
    for (tokens, kind) in [(2047usize, "token"), (2048, "rows")] {
        let vocab = format!("[{}]", (0..tokens).map(|i| format!("\"t{i}\"")).collect::<Vec<_>>().join(", "));
        let vocab: &'static str = Box::leak(vocab.into_boxed_str());
        let max_len = 4;
        let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file: "tracr/histogram.rasp", entry: None, vocab }, max_len, false).unwrap();
        let fast = Model::new(compiled.checkpoint.clone(), &Device::Cpu).unwrap();
        let kinds = fast.fast_head_kinds().unwrap();
        assert!(kinds.iter().flatten().all(|&k| k == kind), "{tokens} tokens: head paths {kinds:?}, expected {kind}");
        let candle = Model::new(compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(Backend::Candle).unwrap();
        // Inputs with repeats and with tokens from both ends of the vocabulary.
        let id = |a: &Atom| fast.encode(&[a.to_json()]).unwrap()[1];
        let (first, last) = (id(&atoms[0]), id(&atoms[tokens - 1]));
        let bos = fast.checkpoint.config.bos_id as u32;
        let batch = vec![vec![bos, first, last, first, last], vec![bos, last, last, last, first]];
        compare(&format!("histogram over {tokens} tokens"), &fast, &candle, &[batch], 1e-4);
    }
}

/// The candle path reads one key's value row for heads whose every query keeps one key at
/// positions alone (U's gathers; runtime/src/lib.rs): the same numbers as scoring `[t, t]`
/// (`1·v` plus exact zeros is `v`, and the heads' outputs are added in the same order), on U past 512
/// positions and with two heads, in f32 and f64, forward and trace, and on Tracr's programs
/// (causal too). Most of U's heads take it; a batch with BOS elsewhere takes none.
#[test]
fn candle_lookups_give_the_dense_attention_numbers() {
    use raspc_compiler::real::MlpMode;
    let mut rng = raspc::verify::SplitMix(21);
    for s in [raspc::simulate::Shape { n: 4, d: 16, dv: 16, h: 1 }, raspc::simulate::Shape { n: 3, d: 2, dv: 3, h: 2 }] {
        let u = raspc::simulate::build(s, MlpMode::Gated, 1.0, None).unwrap();
        let inputs: Vec<Vec<f64>> = (0..2).map(|_| raspc::simulate::Instance::random(s, 1.0, &mut rng).encode()).collect();
        for dtype in [DType::F32, DType::F64] {
            let lookups = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
            let mut dense = Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().with_backend(Backend::Candle).unwrap();
            dense.set_candle_lookups(false);
            let t = s.seq_len() + 1;
            let heads: usize = u.compiled.checkpoint.config.layers.iter().map(|l| l.heads.len()).sum();
            let found = lookups.candle_lookup_heads(t);
            assert!(found * 10 >= heads * 8, "{s:?}: {found} of {heads} heads as lookups");
            let a = flat(&lookups.forward_real(&inputs, Attention::Hard).unwrap());
            assert_eq!(lookups.candle_lookups_run(), found, "{s:?}: one pass runs every lookup head once");
            let b = flat(&dense.forward_real(&inputs, Attention::Hard).unwrap());
            assert_eq!(dense.candle_lookups_run(), 0);
            assert_eq!(a, b, "{s:?} {dtype:?}");
            let (ta, tb) = (lookups.trace_real(&inputs[0], Attention::Hard).unwrap(), dense.trace_real(&inputs[0], Attention::Hard).unwrap());
            assert_eq!(ta, tb, "{s:?} {dtype:?} trace");
            // The fast backend agrees too (within its tolerance: it may sum in another order).
            let fast = flat(&Model::with_dtype(u.compiled.checkpoint.clone(), &Device::Cpu, dtype).unwrap().forward_real(&inputs, Attention::Hard).unwrap());
            let rel = if dtype == DType::F32 { 1e-4 } else { 1e-12 };
            let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            assert!(fast.iter().zip(&a).all(|(x, y)| (x - y).abs() <= rel * scale), "{s:?} {dtype:?}: fast backend");
        }
    }
    let mut used = 0;
    for (name, max_len, causal, atoms, compiled) in tracr_16_and_causal_8() {
        let lookups = Model::new(compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(Backend::Candle).unwrap();
        let mut dense = Model::new(compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(Backend::Candle).unwrap();
        dense.set_candle_lookups(false);
        used += lookups.candle_lookup_heads(max_len + 1);
        for batch in batches(&lookups, &atoms, max_len) {
            for att in [Attention::Hard, Attention::Soft] {
                assert_eq!(flat(&lookups.forward(&batch, att).unwrap()), flat(&dense.forward(&batch, att).unwrap()), "{name} max-len {max_len} causal {causal} {att:?}");
            }
        }
    }
    assert!(used > 0, "no head of Tracr's programs ran as a lookup");
    // BOS elsewhere: the positions no longer tell the keys apart; every head is scored.
    let s = raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 1 };
    let u = raspc::simulate::build(s, MlpMode::Gated, 1.0, None).unwrap();
    let lookups = Model::new(u.compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(Backend::Candle).unwrap();
    let mut dense = Model::new(u.compiled.checkpoint.clone(), &Device::Cpu).unwrap().with_backend(Backend::Candle).unwrap();
    dense.set_candle_lookups(false);
    let t = s.seq_len() + 1;
    let bos = u.compiled.checkpoint.config.bos_id as u32;
    let mut good = vec![1 - bos; t];
    good[0] = bos;
    let mut ids = good.clone();
    ids[t / 2] = bos;
    assert_eq!(flat(&lookups.forward(&[ids.clone()], Attention::Hard).unwrap()), flat(&dense.forward(&[ids.clone()], Attention::Hard).unwrap()));
    // ... also when it shares a batch with a sequence that alone would take lookups.
    let mixed = [good.clone(), ids];
    assert_eq!(flat(&lookups.forward(&mixed, Attention::Hard).unwrap()), flat(&dense.forward(&mixed, Attention::Hard).unwrap()));
    assert_eq!(lookups.candle_lookups_run(), 0);
    let _ = lookups.forward(&[good], Attention::Hard).unwrap();
    assert!(lookups.candle_lookups_run() > 0);
}
