//! Regression tests for panics found by reading the code (issue 13, item 3) and by the fuzz
//! targets in `fuzz/` (docs/testing.md, "Fuzzing"). Each calls the library API or `raspc::run`
//! in-process with the input that used to panic and asserts an error instead.

use raspc_checkpoint::{Checkpoint, Encoding};
use raspc_runtime::{Attention, Device, Model};
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("raspc-regress-{}-{name}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (vec![], vec![]);
    let code = raspc::run(std::iter::once("raspc").chain(args.iter().copied()).map(String::from), &mut out, &mut err, false);
    (code, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

/// A compiled checkpoint (reverse over {a, b, c}, up to 3 tokens).
fn reverse() -> Checkpoint {
    let d = scratch("reverse");
    let prog = d.join("rev.rasp");
    std::fs::write(&prog, "prog = aggregate(select(indices, length - indices - 1, ==), tokens);\n").unwrap();
    let model = d.join("rev.safetensors");
    let (code, _, err) = run(&["compile", prog.to_str().unwrap(), "--vocab", "abc", "--max-len", "3", "-o", model.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let ck = Checkpoint::from_file(&model, &raspc_checkpoint::Limits::default()).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    ck
}

#[test]
fn inspect_and_plot_of_an_unvalidated_checkpoint_are_errors() {
    // `Checkpoint` has public fields: one built in memory can lack tensors or have wrong shapes.
    let mut ck = reverse();
    let w_q = raspc_checkpoint::names::head(0, 0, "w_q");
    ck.tensors.get_mut(&w_q).unwrap().shape = vec![1, 1];
    let e = raspc::inspect::block(&ck, 0, Some(0), false).unwrap_err();
    assert!(e.contains(&w_q), "{e}");
    ck.tensors.remove(&w_q);
    let e = raspc::inspect::block(&ck, 0, Some(0), true).unwrap_err();
    assert!(e.contains("no tensor"), "{e}");
    let d = scratch("plot");
    let e = raspc::plot::plot(&ck, &d).unwrap_err();
    assert!(e.contains(&w_q), "{e}");
    // A layout entry beyond d_model is skipped by the basis names, not a panic.
    ck.layout.sops[0].offset = ck.config.d_model + 5;
    let _ = raspc::inspect::basis(&ck);
    let _ = raspc::inspect::summary(&ck, true);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn decode_checks_the_readout_width() {
    let model = Model::new(reverse(), &Device::Cpu).unwrap();
    let wrong = candle_core::Tensor::zeros((1, 3, 7), candle_core::DType::F32, &Device::Cpu).unwrap();
    let e = model.decode(&wrong).unwrap_err().to_string();
    assert!(e.contains("7 dims"), "{e}");
    let ids = model.encode(&[serde_json::json!("a"), serde_json::json!("b")]).unwrap();
    let ok = model.forward(&[ids], Attention::Hard).unwrap();
    assert_eq!(model.decode(&ok).unwrap()[0].len(), 2);
}

#[test]
fn svflow_probe_of_mismatched_or_non_finite_captures_is_not_a_panic() {
    use raspc_runtime::svflow::{ln_bessel_i, ln_vmf_normaliser, probe_query};
    assert!(probe_query(&[0.5, 0.5], &[1.0, 0.0], &[vec![1.0, 0.0]]).is_err());
    assert!(ln_bessel_i(1.0, f64::NAN).is_nan());
    assert!(ln_bessel_i(-1.0, 1.0).is_nan());
    assert!(ln_vmf_normaliser(4, f64::NAN).is_nan());
    let p = probe_query(&[0.5, 0.5], &[1.0, 0.0], &[vec![f64::INFINITY, 0.0], vec![f64::NAN, 1.0]]).unwrap();
    assert_eq!(p.n, 2);
}

#[test]
fn metadata_and_unchecked_writer_round_trip_through_the_reader() {
    let ck = reverse();
    let meta = ck.metadata().unwrap();
    assert!(meta.contains_key("tensor_sha256"));
    let bytes = ck.to_bytes_unchecked().unwrap();
    assert_eq!(bytes, ck.to_bytes().unwrap());
    // What a hostile writer produces (correct hash, invalid content) is refused by the reader.
    let mut bad = ck.clone();
    bad.output.encoding = Encoding::Categorical { values: vec![] };
    let e = Checkpoint::from_bytes(&bad.to_bytes_unchecked().unwrap()).unwrap_err().to_string();
    assert!(e.contains("no values"), "{e}");
    let mut nan = ck;
    nan.tensors.values_mut().next().unwrap().data[0] = f32::NAN;
    let e = Checkpoint::from_bytes(&nan.to_bytes_unchecked().unwrap()).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("finite") || e.contains("NaN"), "{e}");
}

/// Compiling a product of real-valued s-ops with the default ReLU MLPs panicked in
/// compiler/src/real.rs (a width-0 interpolation domain); fixed on main by the compiler's owner
/// (commit 1f695c5). Seen again while seeding the `checkpoint_load` fuzz corpus with a stale
/// release binary; kept as a guard.
#[test]
fn real_valued_product_with_relu_mlps_compiles_or_is_refused() {
    let d = scratch("realprod");
    let prog = d.join("p.rasp");
    for src in ["y = tokens_float * tokens_float + 1;\n", "m = aggregate(select(indices, indices, <=), tokens_float);\nprog = m * m;\n"] {
        std::fs::write(&prog, src).unwrap();
        let model = d.join("p.safetensors");
        let (code, _, err) = run(&["compile", prog.to_str().unwrap(), "--input-bounds=-1,1", "--max-len", "3", "-o", model.to_str().unwrap()]);
        assert!(code == 0 || code == 1, "{src}: exit {code}: {err}");
        assert!(!err.contains("internal error"), "{src}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The committed seeds of the `checkpoint_load` and `gguf_load` fuzz targets, replayed in CI
/// without libFuzzer: every file loads or is refused with an error, and a checkpoint that loads
/// runs and inspects.
#[test]
fn fuzz_seed_files_load_or_are_refused() {
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut loaded = 0;
    for entry in std::fs::read_dir(fuzz.join("checkpoint_load")).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let Ok(ck) = Checkpoint::from_bytes_with(&bytes, &raspc_checkpoint::Limits::default()) else { continue };
        loaded += 1;
        let _ = raspc::inspect::summary(&ck, true);
        let model = Model::new(ck, &Device::Cpu).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let c = &model.checkpoint.config;
        let input: Vec<serde_json::Value> = match &c.real_input {
            Some(r) => vec![serde_json::json!(r.lo)],
            None => c.vocab.iter().filter(|v| v.id != c.bos_id).take(1).map(|v| v.token.clone()).collect(),
        };
        for a in [Attention::Hard, Attention::Soft] {
            model.run(&input, a).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    assert!(loaded >= 5, "the compiled seeds load ({loaded})");
    for entry in std::fs::read_dir(fuzz.join("gguf_load")).unwrap() {
        let path = entry.unwrap().path();
        if let Ok(lm) = raspc_lm::LanguageModel::load(&path) {
            let ids = lm.encode("ab cd").unwrap();
            lm.forward(&ids, None).unwrap();
        }
    }
}
