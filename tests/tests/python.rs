//! The `raspc` Python package (crates/python) against the Rust runtime: builds the wheel with
//! maturin, installs it in a virtual environment under the target directory, and checks on
//! every corpus program (causal variants included), hard and soft attention, on padded batches
//! of mixed lengths, that
//!
//! - `raspc.compile_file` gives the same weights as the Rust compiler, and `raspc.load` reads them;
//! - `Model.run` == `raspc run` (the candle runtime, `raspc_runtime::Model::run`);
//! - `Model.to_torch()` == `raspc run`;
//! - `Model.to_transformer_lens()` (a HookedTransformer, pinned TransformerLens) == `raspc run`;
//! - ONNX Runtime on `raspc export --to onnx` (soft) and on `Model.to_onnx(attention="hard")`
//!   == `raspc run`;
//! - `Model.plot_head` / `plot_mlp` return matplotlib figures of the true matrices (colorbar,
//!   labels, SVG and PNG);
//! - `raspc.universal` builds U, and U simulates random attention layers T within its certified
//!   bound (the reference T(X) computed in numpy).
//!
//! One test, because the environment is heavy: PyTorch from PyPI installs ~5 GB. The
//! virtual environment is cached under `target/tmp/venv-python` (reinstalled only when the
//! package list below changes); the wheel is rebuilt by maturin each run (incrementally, in
//! `target/tmp/python-build`, a target directory of its own, since this test's cargo holds the
//! main one).

use raspc::verify::{expected_or_error, Inputs};
use raspc_tests::{compile, Case};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages of the test environment (the extras of crates/python/pyproject.toml, pinned).
const PACKAGES: &[&str] = &["maturin>=1.5,<2", "numpy>=2", "torch>=2.6", "transformer_lens==3.9.0", "transformers==5.24.0", "onnx", "onnxruntime", "matplotlib"];

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn sh(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// The venv, created (or recreated when PACKAGES changed) on first use.
fn venv() -> PathBuf {
    let venv = tmp().join("venv-python");
    let py = venv.join("bin").join("python");
    let marker = venv.join(".raspc-packages");
    let want = PACKAGES.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(want.as_str()) {
        let t0 = std::time::Instant::now();
        let _ = std::fs::remove_dir_all(&venv);
        sh(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        // PyTorch's Linux wheels bring ~5 GB of CUDA libraries: keep pip's downloads on the
        // target's disk (not a small /tmp or home), keep no cache, and drop triton (the GPU
        // kernel compiler, never used on CPU; 1 GB) once installed.
        let pip_tmp = tmp().join("pip-tmp");
        let _ = std::fs::remove_dir_all(&pip_tmp);
        std::fs::create_dir_all(&pip_tmp).unwrap();
        let pip = |args: &[&str]| {
            let mut cmd = Command::new(&py);
            cmd.args(["-m", "pip"]).args(args).args(["-q", "--disable-pip-version-check", "--no-cache-dir"]).env("TMPDIR", &pip_tmp);
            let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
            if !out.status.success() {
                let df = Command::new("df").args(["-h", "."]).arg(&venv).arg(&pip_tmp).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
                panic!("{cmd:?} failed:\n{}{}\ndisk space:\n{df}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            }
        };
        pip(&[&["install"], PACKAGES].concat());
        pip(&["uninstall", "-y", "triton"]);
        let _ = std::fs::remove_dir_all(&pip_tmp);
        std::fs::write(&marker, &want).unwrap();
        eprintln!("python: created {} in {:.0} s", venv.display(), t0.elapsed().as_secs_f64());
    }
    py
}

/// Builds the wheel with maturin and installs it (replacing any earlier build).
fn install_wheel(py: &Path) {
    let t0 = std::time::Instant::now();
    let out = tmp().join("python-wheel");
    let _ = std::fs::remove_dir_all(&out);
    sh(Command::new(py)
        .args(["-m", "maturin", "build", "--locked", "-q", "-m"])
        .arg(root().join("crates/python/Cargo.toml"))
        .arg("--out")
        .arg(&out)
        .arg("--interpreter")
        .arg(py)
        .env("CARGO_TARGET_DIR", tmp().join("python-build")));
    let wheel = std::fs::read_dir(&out).unwrap().filter_map(|e| e.ok().map(|e| e.path())).find(|p| p.extension().is_some_and(|x| x == "whl")).expect("maturin wrote no wheel");
    assert!(wheel.file_name().unwrap().to_str().unwrap().contains("abi3"), "not an abi3 wheel: {}", wheel.display());
    sh(Command::new(py).args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "--force-reinstall", "--no-deps"]).arg(&wheel));
    eprintln!("python: built and installed {} in {:.0} s", wheel.display(), t0.elapsed().as_secs_f64());
}

/// Every corpus program of tests/tests/compile.rs: (file, entry, vocab, causal variant too).
const CORPUS: &[(&str, Option<&str>, &str, bool)] = &[
    ("tracr/length.rasp", None, "abc", true),
    ("tracr/reverse.rasp", None, "abc", true),
    ("tracr/histogram.rasp", None, "abc", true),
    ("tracr/sort_unique.rasp", None, "[1,2,3,4]", false),
    ("tracr/sort.rasp", None, "[1,2,3,4]", false),
    ("tracr/sort_freq.rasp", None, "abc", false),
    ("tracr/frac_prevs.rasp", None, "xyz", true),
    ("tracr/pair_balance.rasp", None, "()x", true),
    ("tracr/dyck1.rasp", None, "()x", true),
    ("tracr/dyck2.rasp", None, "(){}", true),
    ("tracr/shift_by.rasp", None, "abc", true),
    ("tracr/detect_pattern.rasp", None, "abc", true),
    ("tracr/count_less_freq.rasp", None, "abc", false),
    ("tracr/count.rasp", None, "abc", true),
    ("tracr/nary_sequencemap.rasp", None, "[1,2,3]", true),
    ("reverse.rasp", None, "abc", false),
    ("histogram.rasp", None, "abc", false),
    ("histogram_bos.rasp", None, "abc", false),
    ("sort.rasp", Some("sorted"), "[1,2,3,4]", false),
    ("sort_freq.rasp", None, "abc", false),
    ("double_hist.rasp", None, "abc", false),
    ("dyck1.rasp", None, "()", false),
    ("dyck2.rasp", None, "(){}", false),
    ("match2.rasp", None, "[0,1,2,3,4,5,6,7]", false),
    ("k_parity.rasp", None, "[0,1]", false),
];

const MAX_LEN: usize = 8;
const INPUTS: usize = 24;

/// Compiles every case in Rust, runs `raspc run`'s runtime on its inputs, exports ONNX through
/// the CLI, and writes the job for tests/python/python_api.py.
fn make_job(dir: &Path) -> (PathBuf, usize) {
    std::fs::create_dir_all(dir).unwrap();
    let cpu = raspc_runtime::device("cpu").unwrap();
    let mut cases = vec![];
    let variants = CORPUS.iter().flat_map(|&(f, e, v, c)| std::iter::once((f, e, v, false)).chain(c.then_some((f, e, v, true))));
    for (i, (file, entry, vocab, causal)) in variants.enumerate() {
        let (session, root, atoms, compiled) = compile(&Case { file, entry, vocab }, MAX_LEN, causal).unwrap_or_else(|e| panic!("{file}: {e}"));
        let path = dir.join(format!("{i}.safetensors"));
        std::fs::write(&path, compiled.checkpoint.to_bytes().unwrap()).unwrap();
        let model = raspc_runtime::Model::load(&std::fs::read(&path).unwrap(), &cpu).unwrap();
        // Inputs the interpreter accepts (the program's domain), of mixed lengths.
        let seqs = raspc::verify::generate(&Inputs::Random { count: 4 * INPUTS, seed: 100 + i as u64 }, atoms.len(), MAX_LEN).unwrap();
        let inputs: Vec<Vec<raspc_lang::Atom>> =
            seqs.iter().map(|s| s.iter().map(|&t| atoms[t].clone()).collect::<Vec<_>>()).filter(|a| expected_or_error(&session.graph, root, a, causal).is_ok()).take(INPUTS).collect();
        assert!(inputs.len() >= INPUTS / 2, "{file}: only {} inputs in the domain", inputs.len());
        let json_inputs: Vec<Vec<serde_json::Value>> = inputs.iter().map(|s| s.iter().map(raspc_lang::Atom::to_json).collect()).collect();
        let mut expected = serde_json::Map::new();
        for (name, mode) in [("hard", raspc_runtime::Attention::Hard), ("soft", raspc_runtime::Attention::Soft)] {
            let outs: Vec<serde_json::Value> =
                json_inputs.iter().map(|inp| serde_json::Value::Array(model.run(inp, mode).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect())).collect();
            expected.insert(name.into(), serde_json::Value::Array(outs));
        }
        let onnx = dir.join(format!("{i}.onnx"));
        cli(&["export", path.to_str().unwrap(), "--to", "onnx", "--attention", "soft", "-o", onnx.to_str().unwrap()]);
        // What `raspc eval --json` prints for a few inputs: `raspc.eval` must print the same.
        let program = raspc_tests::corpus(file);
        let evals: Vec<serde_json::Value> = json_inputs
            .iter()
            .take(if causal { 0 } else { 3 })
            .map(|inp| {
                let text = serde_json::Value::Array(inp.clone()).to_string();
                let mut args = vec!["eval", program.to_str().unwrap(), "--input", &text, "--json"];
                if let Some(e) = entry {
                    args.extend(["--entry", e]);
                }
                let out: serde_json::Value = serde_json::from_str(&cli(&args)).unwrap();
                serde_json::json!([inp, out["output"]])
            })
            .collect();
        cases.push(serde_json::json!({
            "name": format!("{file}{}", if causal { " (causal)" } else { "" }),
            "program": program, "entry": entry, "vocab": serde_json::Value::Array(atoms.iter().map(raspc_lang::Atom::to_json).collect()),
            "max_len": MAX_LEN, "causal": causal, "checkpoint": path, "onnx_soft": onnx,
            "inputs": json_inputs, "expected": expected, "eval": evals,
        }));
    }
    // A real-valued, gated checkpoint: U for one shape, built here and in Python (which takes
    // float64 entries: their rounding to f32 charged, `f32_inputs` false).
    let u = raspc::simulate::build_with(raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 1 }, raspc_compiler::real::MlpMode::Gated, 1.0, 1.0, None, false).unwrap();
    let path = dir.join("u.safetensors");
    std::fs::write(&path, u.compiled.checkpoint.to_bytes().unwrap()).unwrap();
    let model = raspc_runtime::Model::load(&std::fs::read(&path).unwrap(), &cpu).unwrap();
    let mut rng = raspc::verify::SplitMix(7);
    let n = u.compiled.checkpoint.config.max_seq_len;
    let inputs: Vec<Vec<serde_json::Value>> = (0..8).map(|k| (0..n - k % 3).map(|_| serde_json::json!(raspc::verify::uniform(&mut rng, -1.0, 1.0))).collect()).collect();
    let hard: Vec<serde_json::Value> =
        inputs.iter().map(|inp| serde_json::Value::Array(model.run(inp, raspc_runtime::Attention::Hard).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect())).collect();
    let soft: Vec<serde_json::Value> =
        inputs.iter().map(|inp| serde_json::Value::Array(model.run(inp, raspc_runtime::Attention::Soft).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect())).collect();
    let onnx = dir.join("u.onnx");
    cli(&["export", path.to_str().unwrap(), "--to", "onnx", "--attention", "soft", "-o", onnx.to_str().unwrap()]);
    cases.push(serde_json::json!({
        "name": "universal(2, 2, 2, 1)", "universal": [2, 2, 2, 1], "checkpoint": path, "onnx_soft": onnx,
        "inputs": inputs, "expected": { "hard": hard, "soft": soft },
    }));
    let job = dir.join("job.json");
    let count = cases.len();
    std::fs::write(&job, serde_json::json!({ "cases": cases }).to_string()).unwrap();
    (job, count)
}

fn cli(args: &[&str]) -> String {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = raspc::run(std::iter::once("raspc").chain(args.iter().copied()).map(String::from), &mut out, &mut err, false);
    let (out, err) = (String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned());
    assert_eq!(code, 0, "raspc {args:?}: {out}{err}");
    out
}

#[test]
fn python_package_torch_transformer_lens_and_onnx_reproduce_raspc_run() {
    let t0 = std::time::Instant::now();
    let (job, cases) = make_job(&tmp().join("python-api"));
    let t_job = t0.elapsed().as_secs_f64();
    let py = venv();
    install_wheel(&py);
    let t1 = std::time::Instant::now();
    let script = root().join("tests/python/python_api.py");
    let text = sh(Command::new(&py).arg(&script).arg(&job));
    eprintln!("{text}");
    eprintln!("python: job {t_job:.1} s, checks {:.1} s, total {:.1} s", t1.elapsed().as_secs_f64(), t0.elapsed().as_secs_f64());
    // The script's last line: `python: C cases, K checks, 0 failures`.
    let last = text.lines().rev().find(|l| l.starts_with("python: ")).unwrap_or_else(|| panic!("no summary line:\n{text}"));
    assert!(last.starts_with(&format!("python: {cases} cases, ")) && last.ends_with(", 0 failures"), "{text}");
}
