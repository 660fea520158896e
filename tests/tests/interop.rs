//! Checkpoints load and run unchanged outside raspc: an independent numpy forward pass
//! (tests/python/forward.py, which reads only the safetensors file and its metadata) reproduces
//! `raspc run`'s outputs on the corpus, hard and soft attention, causal models included.
//!
//! The test makes its own Python environment: a venv under the cargo target directory with
//! `safetensors` and `numpy` from PyPI (about 6 s the first time).

use raspc::verify::Inputs;
use raspc_tests::{compile, Case};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A venv (one per package set) under the cargo target directory, created on first use.
fn python(name: &str, packages: &[&str]) -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("venv-{name}"));
    let py = venv.join("bin").join("python");
    let ready = venv.join(".installed");
    // Tests run in parallel threads: one installs, the others wait.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if !ready.exists() {
        let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().expect("python3 is needed for the interop tests").success();
        assert!(ok, "python3 -m venv failed");
        let ok = Command::new(&py).args(["-m", "pip", "install", "-q", "--disable-pip-version-check"]).args(packages).status().expect("pip").success();
        assert!(ok, "pip install {packages:?} failed");
        std::fs::write(&ready, "").unwrap();
    }
    py
}

/// Compiles the interop corpus (once per test binary) and writes the job file.
fn job() -> &'static (PathBuf, usize) {
    static JOB: std::sync::OnceLock<(PathBuf, usize)> = std::sync::OnceLock::new();
    JOB.get_or_init(make_job)
}

fn run_script(py: &Path, args: &[&str]) -> String {
    let out = Command::new(py).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    text
}

fn make_job() -> (PathBuf, usize) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: &[(&str, Option<&str>, &str, bool)] = &[
        ("tracr/length.rasp", None, "abc", false),
        ("tracr/reverse.rasp", None, "abc", false),
        ("tracr/histogram.rasp", None, "abc", false),
        ("tracr/sort_unique.rasp", None, "[1,2,3,4]", false),
        ("tracr/sort.rasp", None, "[1,2,3,4]", false),
        ("tracr/sort_freq.rasp", None, "abc", false),
        ("tracr/frac_prevs.rasp", None, "xyz", false),
        ("tracr/frac_prevs.rasp", None, "xyz", true),
        ("tracr/pair_balance.rasp", None, "()x", false),
        ("tracr/dyck1.rasp", None, "()x", true),
        ("tracr/dyck2.rasp", None, "(){}", false),
        ("tracr/shift_by.rasp", None, "abc", true),
        ("tracr/detect_pattern.rasp", None, "abc", false),
        ("tracr/count_less_freq.rasp", None, "abc", false),
        ("tracr/count.rasp", None, "abc", false),
        ("tracr/nary_sequencemap.rasp", None, "[1,2,3]", false),
        ("reverse.rasp", None, "abc", false),
        ("histogram_bos.rasp", None, "abc", false),
        ("sort.rasp", Some("sorted"), "[1,2,3,4]", false),
        ("sort_freq.rasp", None, "abc", false),
        ("double_hist.rasp", None, "abc", false),
        ("dyck1.rasp", None, "()", false),
        ("dyck2.rasp", None, "(){}", false),
    ];
    let mut job = vec![];
    for (i, &(file, entry, vocab, causal)) in cases.iter().enumerate() {
        let (_, _, atoms, compiled) = compile(&Case { file, entry, vocab }, 10, causal).unwrap();
        let path = dir.join(format!("{i}.safetensors"));
        std::fs::write(&path, compiled.checkpoint.to_bytes().unwrap()).unwrap();
        let model = raspc_runtime::Model::load(&std::fs::read(&path).unwrap(), &raspc_runtime::device("cpu").unwrap()).unwrap();
        let seqs = raspc::verify::generate(&Inputs::Random { count: 40, seed: i as u64 }, atoms.len(), 10).unwrap();
        let inputs: Vec<Vec<serde_json::Value>> = seqs.iter().map(|s| s.iter().map(|&t| atoms[t].to_json()).collect()).collect();
        let mut expected = serde_json::Map::new();
        for (name, mode) in [("hard", raspc_runtime::Attention::Hard), ("soft", raspc_runtime::Attention::Soft)] {
            let outs: Vec<serde_json::Value> =
                inputs.iter().map(|inp| serde_json::Value::Array(model.run(inp, mode).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect())).collect();
            expected.insert(name.into(), serde_json::Value::Array(outs));
        }
        job.push(serde_json::json!({ "checkpoint": path, "inputs": inputs, "expected": expected }));
    }
    let job_path = dir.join("job.json");
    std::fs::write(&job_path, serde_json::json!({ "cases": job }).to_string()).unwrap();
    (job_path, cases.len() * 40)
}

/// Real-valued, gated and ReLU checkpoints: U for two shapes and a softmax, 10 random inputs
/// each; expected outputs from `raspc run` semantics (hard attention, f32).
fn real_job() -> &'static (PathBuf, usize) {
    static JOB: std::sync::OnceLock<(PathBuf, usize)> = std::sync::OnceLock::new();
    JOB.get_or_init(|| {
        use raspc_compiler::real::MlpMode;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-real");
        std::fs::create_dir_all(&dir).unwrap();
        let mut checkpoints = vec![];
        for (i, (s, mode)) in [((2, 2, 2, 1), MlpMode::Gated), ((2, 2, 2, 2), MlpMode::Relu), ((4, 2, 2, 1), MlpMode::Gated)].into_iter().enumerate() {
            let shape = raspc::simulate::Shape { n: s.0, d: s.1, dv: s.2, h: s.3 };
            let u = raspc::simulate::build(shape, mode, 1.0, None).unwrap();
            checkpoints.push((dir.join(format!("u{i}.safetensors")), u.compiled.checkpoint));
        }
        let mut job = vec![];
        for (i, (path, ck)) in checkpoints.into_iter().enumerate() {
            std::fs::write(&path, ck.to_bytes().unwrap()).unwrap();
            let model = raspc_runtime::Model::load(&std::fs::read(&path).unwrap(), &raspc_runtime::device("cpu").unwrap()).unwrap();
            let mut rng = raspc::verify::SplitMix(i as u64);
            let n = ck.config.max_seq_len;
            let inputs: Vec<Vec<serde_json::Value>> = (0..10).map(|_| (0..n).map(|_| serde_json::json!(raspc::verify::uniform(&mut rng, -1.0, 1.0))).collect()).collect();
            let outs: Vec<serde_json::Value> = inputs
                .iter()
                .map(|inp| serde_json::Value::Array(model.run(inp, raspc_runtime::Attention::Hard).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect()))
                .collect();
            job.push(serde_json::json!({ "checkpoint": path, "inputs": inputs, "expected": { "hard": outs } }));
        }
        let job_path = dir.join("job.json");
        std::fs::write(&job_path, serde_json::json!({ "cases": job }).to_string()).unwrap();
        (job_path, 30)
    })
}

/// numpy and JAX run the universal simulator's checkpoints (real inputs, gated and ReLU MLPs).
#[test]
fn numpy_and_jax_run_real_valued_gated_checkpoints() {
    let (job_path, runs) = real_job();
    let py = python("numpy", &["safetensors", "numpy"]);
    let text = run_script(&py, &[&script("forward.py"), job_path.to_str().unwrap()]);
    assert!(text.contains(&format!("{runs} runs, 0 disagreements")), "{text}");
    let py = python("jax", &["safetensors", "numpy", "jax[cpu]"]);
    let text = run_script(&py, &[&script("soft_attention.py"), "jax-hard", job_path.to_str().unwrap()]);
    assert!(text.contains(&format!("{runs} runs, 0 disagreements")), "{text}");
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(name).to_str().unwrap().to_string()
}

#[test]
fn numpy_forward_pass_reproduces_raspc_run() {
    let (job_path, runs) = job();
    let py = python("numpy", &["safetensors", "numpy"]);
    let text = run_script(&py, &[&script("forward.py"), job_path.to_str().unwrap()]);
    assert!(text.contains(&format!("{} runs, 0 disagreements", runs * 2)), "{text}");
}

/// Soft attention through JAX's standard attention op (`jax.nn.dot_product_attention`).
#[test]
fn jax_standard_attention_reproduces_soft_outputs() {
    let (job_path, runs) = job();
    let py = python("jax", &["safetensors", "numpy", "jax[cpu]"]);
    // Op-by-op JAX is slow to dispatch: 10 inputs of each program.
    let text = run_script(&py, &[&script("soft_attention.py"), "jax", job_path.to_str().unwrap(), "10"]);
    assert!(text.contains(&format!("{} runs, 0 disagreements", runs / 4)), "{text}");
}

/// The same with PyTorch's `scaled_dot_product_attention`. PyPI has no CPU-only torch here
/// (about 3 GB and 2 minutes to install), so this runs only with `RASPC_TEST_TORCH=1`.
#[test]
fn torch_standard_attention_reproduces_soft_outputs() {
    if std::env::var("RASPC_TEST_TORCH").as_deref() != Ok("1") {
        eprintln!("skipped: set RASPC_TEST_TORCH=1 to install torch and run this check");
        return;
    }
    let (job_path, runs) = job();
    let py = python("torch", &["safetensors", "numpy", "torch"]);
    let text = run_script(&py, &[&script("soft_attention.py"), "torch", job_path.to_str().unwrap()]);
    assert!(text.contains(&format!("{runs} runs, 0 disagreements")), "{text}");
}
