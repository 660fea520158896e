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

fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-venv");
    let py = venv.join("bin").join("python");
    let ready = venv.join(".installed");
    if !ready.exists() {
        let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().expect("python3 is needed for the interop test").success();
        assert!(ok, "python3 -m venv failed");
        let ok = Command::new(&py).args(["-m", "pip", "install", "-q", "safetensors", "numpy"]).status().expect("pip").success();
        assert!(ok, "pip install safetensors numpy failed");
        std::fs::write(&ready, "").unwrap();
    }
    py
}

#[test]
fn numpy_forward_pass_reproduces_raspc_run() {
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
            let outs: Vec<serde_json::Value> = inputs
                .iter()
                .map(|inp| serde_json::Value::Array(model.run(inp, mode).unwrap().iter().map(raspc_runtime::Decoded::to_json).collect()))
                .collect();
            expected.insert(name.into(), serde_json::Value::Array(outs));
        }
        job.push(serde_json::json!({ "checkpoint": path, "inputs": inputs, "expected": expected }));
    }
    let job_path = dir.join("job.json");
    std::fs::write(&job_path, serde_json::json!({ "cases": job }).to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/forward.py");
    let out = Command::new(python()).arg(&script).arg(&job_path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("{} runs, 0 disagreements", cases.len() * 40 * 2)), "{text}");
}
