//! Every loader and command-line failure class found by the robustness campaign (issue 13):
//! each runs the real `raspc` binary on a file or flag this test crafts itself, and must end
//! in a clear error (exit 1, a message naming the file, flag, key or tensor, no panic) within a
//! bounded time, under a 4 GB address-space cap when `prlimit` is available.

use raspc_checkpoint::{names, tensor_hash, Checkpoint};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(60);

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus").join(name)
}

fn scratch() -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("raspc-robust-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Runs raspc with a deadline (and a 4 GB address-space cap when prlimit exists).
fn raspc(args: &[&str]) -> (i32, String, String) {
    let bin = env!("CARGO_BIN_EXE_raspc");
    let mut cmd = if Path::new("/usr/bin/prlimit").is_file() {
        let mut c = Command::new("/usr/bin/prlimit");
        c.arg("--as=4000000000").arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let mut child =
        cmd.args(args).env("RUST_BACKTRACE", "0").env_remove("RASPC_LIMITS").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start raspc");
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut b = String::new();
        let _ = so.read_to_string(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = String::new();
        let _ = se.read_to_string(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("raspc {args:?} did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), t_out.join().expect("stdout"), t_err.join().expect("stderr"))
}

/// Asserts a clean error: exit 1, every `needle` in stderr, no panic or internal error.
#[track_caller]
fn fails(args: &[&str], needles: &[&str]) {
    let (code, out, err) = raspc(args);
    assert_eq!(code, 1, "raspc {args:?}: exit {code}\nstdout: {out}\nstderr: {err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "raspc {args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "raspc {args:?}: stderr lacks {n:?}:\n{err}");
    }
}

/// A checkpoint's parts as JSON and raw tensors, so invalid files can be written.
#[derive(Clone)]
struct Parts {
    meta: BTreeMap<String, String>,
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

impl Parts {
    fn of(ck: &Checkpoint) -> Parts {
        let meta = ck.metadata().unwrap().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let tensors = ck.tensors.iter().map(|(n, t)| (n.clone(), (t.shape.clone(), t.data.clone()))).collect();
        Parts { meta, tensors }
    }
    fn json(&self, key: &str) -> Value {
        serde_json::from_str(&self.meta[key]).expect("metadata JSON")
    }
    fn set(&mut self, key: &str, v: &Value) {
        self.meta.insert(key.to_string(), v.to_string());
    }
    /// Safetensors bytes with a correct `tensor_sha256` and `metadata_sha256` (so the check
    /// under test is reached).
    fn bytes(&self) -> Vec<u8> {
        let mut data = vec![];
        let mut header = serde_json::Map::new();
        for (name, (shape, values)) in &self.tensors {
            let start = data.len();
            for x in values {
                data.extend_from_slice(&x.to_le_bytes());
            }
            header.insert(name.clone(), json!({ "dtype": "F32", "shape": shape, "data_offsets": [start, data.len()] }));
        }
        let mut meta = self.meta.clone();
        meta.insert("tensor_sha256".into(), tensor_hash(&data));
        let hash = raspc_checkpoint::metadata_hash(meta.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        meta.insert("metadata_sha256".into(), hash);
        header.insert("__metadata__".into(), json!(meta));
        let mut h = Value::Object(header).to_string();
        while !(8 + h.len()).is_multiple_of(8) {
            h.push(' ');
        }
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&data);
        out
    }
    fn write(&self, dir: &Path, name: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, self.bytes()).expect("write crafted checkpoint");
        p.to_str().expect("utf-8 path").to_string()
    }
}

/// histogram.rasp over {a, b, c}, max-len 8, compiled by the binary.
fn hist(dir: &Path) -> (String, Checkpoint) {
    let p = dir.join("hist.safetensors");
    let ps = p.to_str().expect("utf-8").to_string();
    let h = corpus("histogram.rasp");
    let (code, _, err) = raspc(&["compile", h.to_str().expect("utf-8"), "--vocab", "abc", "--max-len", "8", "-o", &ps]);
    assert_eq!(code, 0, "{err}");
    let ck = Checkpoint::from_bytes(&std::fs::read(&p).expect("read hist")).expect("valid");
    (ps, ck)
}

#[test]
fn crafted_checkpoints_give_named_errors() {
    let dir = scratch();
    let (good, ck) = hist(&dir);
    let base = Parts::of(&ck);
    let h = corpus("histogram.rasp");
    let h = h.to_str().expect("utf-8");
    let hist_sop = ck.layout.sops.iter().position(|s| s.label == "hist").expect("hist in layout");

    // The untouched file, written by this test's writer, loads: the writer is faithful.
    let same = base.write(&dir, "same.safetensors");
    let (code, out, err) = raspc(&["run", &same, "--input", "abca", "--json"]);
    assert_eq!((code, out.as_str()), (0, "{\"output\":[2,1,1,2]}\n"), "{err}");

    // Sizes from the header, over budget before anything is allocated.
    for (name, d) in [("c1.safetensors", json!(1u64 << 31)), ("c2.safetensors", json!(1u64 << 63))] {
        let mut p = base.clone();
        let mut c = p.json("config");
        c["d_model"] = d;
        p.set("config", &c);
        let f = p.write(&dir, name);
        fails(&["run", &f, "--input", "abca"], &[name, "config.d_model", "RASPC_LIMITS=d_model"]);
        fails(&["inspect", &f], &[name, "config.d_model"]);
    }
    // A layout offset that wraps.
    let mut p = base.clone();
    let mut l = p.json("layout");
    l["sops"][hist_sop]["offset"] = json!(u64::MAX);
    p.set("layout", &l);
    let f = p.write(&dir, "c3.safetensors");
    fails(&["run", &f, "--input", "abca", "--json"], &["c3.safetensors", "s-op `hist`", "beyond d_model"]);
    fails(&["trace", &f, "--input", "abca"], &["s-op `hist`"]);
    fails(&["inspect", &f, "--layer", "0", "--head", "0"], &["s-op `hist`"]);
    // Two entries with one label (trace reported a false divergence: helper b21).
    let mut p = base.clone();
    let mut l = p.json("layout");
    let other = (0..l["sops"].as_array().expect("sops").len()).find(|&i| i != hist_sop && l["sops"][i]["label"] != json!("hist")).expect("another entry");
    l["sops"][other]["label"] = json!("hist");
    p.set("layout", &l);
    let f = p.write(&dir, "c3b.safetensors");
    for args in [vec!["run", f.as_str(), "--input", "abca"], vec!["trace", f.as_str(), "--input", "abca"], vec!["inspect", f.as_str()]] {
        fails(&args, &["c3b.safetensors", "two entries are labelled `hist`"]);
    }
    // An MLP block's unit range backwards: said as a range (the message showed Rust's
    // `Some([5, 2])`: helper b21).
    let mut p = base.clone();
    let mut c = p.json("config");
    let l = (0..c["layers"].as_array().expect("layers").len()).find(|&l| c["layers"][l]["mlp_info"].as_array().is_some_and(|a| !a.is_empty())).expect("an MLP block");
    c["layers"][l]["mlp_info"][0]["hidden"] = json!([5, 2]);
    p.set("config", &c);
    let f = p.write(&dir, "c3c.safetensors");
    fails(&["inspect", &f], &["c3c.safetensors", &format!("layers[{l}].mlp_info"), "names hidden units [5, 2], not a range inside 0.."]);
    // A zero-width layout entry.
    let mut p = base.clone();
    let mut l = p.json("layout");
    l["sops"].as_array_mut().expect("sops").push(json!({ "label": "z", "offset": 0, "encoding": { "kind": "categorical", "values": [] } }));
    p.set("layout", &l);
    let f = p.write(&dir, "c4.safetensors");
    fails(&["trace", &f, "--input", "abca"], &["s-op `z`", "0 dims"]);
    // An empty categorical output.
    let mut p = base.clone();
    let mut c = p.json("config");
    c["readout_dims"] = json!(0);
    p.set("config", &c);
    let mut o = p.json("output");
    o["encoding"]["values"] = json!([]);
    p.set("output", &o);
    p.tensors.insert(names::READOUT.into(), (vec![ck.config.d_model, 0], vec![]));
    let f = p.write(&dir, "c5.safetensors");
    fails(&["run", &f, "--input", "abca"], &["c5.safetensors", "`output`", "no values"]);
    // A vocabulary of BOS only.
    let mut p = base.clone();
    let mut c = p.json("config");
    let bos = c["vocab"][0].clone();
    c["vocab"] = json!([bos]);
    p.set("config", &c);
    let e = p.tensors.get_mut(names::TOKEN_EMBEDDING).expect("embedding");
    e.0[0] = 1;
    e.1.truncate(ck.config.d_model);
    let f = p.write(&dir, "c6.safetensors");
    fails(&["probe", "svflow", &f, "--program", h], &["c6.safetensors", "vocabulary"]);
    // Attention constants at extreme values.
    for (field, v, budget) in [("soft_beta", 1e308, "soft_beta"), ("tie_tolerance", 1e300, "tie_tolerance"), ("tie_tolerance", f64::MAX, "tie_tolerance")] {
        let mut p = base.clone();
        let mut c = p.json("config");
        c["attention"][field] = json!(v);
        p.set("config", &c);
        let f = p.write(&dir, "c7.safetensors");
        fails(&["probe", "svflow", &f, "--program", h, "--seeds", "1", "--sequences", "2"], &[&format!("config.attention.{field}"), budget]);
        fails(&["run", &f, "--input", "abca"], &[&format!("config.attention.{field}")]);
    }
    // A weight beyond the budget: the largest is named (a budget raised to the first one found
    // past it then failed on the next; helper d10).
    let mut p = base.clone();
    p.tensors.get_mut(names::TOKEN_EMBEDDING).expect("embedding").1[0] = 2e38;
    p.tensors.get_mut(names::TOKEN_EMBEDDING).expect("embedding").1[1] = -3e38;
    let f = p.write(&dir, "c8.safetensors");
    fails(&["run", &f, "--input", "abca", "--json"], &["c8.safetensors", "tensor `embed.token`", "-300000000000000000000000000000000000000 at flat index 1 (its largest)"]);
    // Weights within the budget whose products overflow f32: the first non-finite activation is named.
    let mut p = base.clone();
    for x in p.tensors.get_mut(names::TOKEN_EMBEDDING).expect("embedding").1.iter_mut() {
        *x = 1e15;
    }
    for w in ["w_in", "w_out"] {
        for x in p.tensors.get_mut(&names::mlp(0, w)).expect("mlp").1.iter_mut() {
            *x = 1e15;
        }
    }
    let f = p.write(&dir, "c8b.safetensors");
    fails(&["run", &f, "--input", "abca"], &["c8b.safetensors", "non-finite activation", "layer 0 mlp"]);
    // Helper slots may share a label (each argument a real-valued expression materialises is
    // `prog.arg`, each division's numerator `prog.num`): what raspc writes loads (review rv21:
    // the label check refused these at compile time).
    for (i, line) in ["prog = x*y if x*y > y*z else y*z;", "prog = (x*y + y*z) / (x*z + z*z + 1) + (x*x*y) / (y*z*z + 1);"].into_iter().enumerate() {
        let src = dir.join(format!("helpers{i}.rasp"));
        std::fs::write(&src, format!("x = tokens_float;\ny = aggregate(select(indices, indices, <=), x);\nz = aggregate(select(indices, indices, >=), x);\n{line}\n")).expect("write");
        let ck = dir.join(format!("helpers{i}.safetensors"));
        let (code, _, err) = raspc(&["compile", src.to_str().expect("utf-8"), "--input-bounds", "1,2", "--max-len", "4", "-o", ck.to_str().expect("utf-8")]);
        assert_eq!(code, 0, "{line}: {err}");
        let (code, _, err) = raspc(&["run", ck.to_str().expect("utf-8"), "--input", "[1.5, 1.25]"]);
        assert_eq!(code, 0, "{line}: {err}");
    }
    // Input blocks wider than the overall bounds or past max_seq_len: refused at load, as
    // `compile` refuses them (`run` answered for [4, 4] outside the certified [-1, 1]: helper b21).
    let prog = dir.join("real.rasp");
    std::fs::write(&prog, "x = tokens_float;\ny = aggregate(select(indices, indices, <=), x);\nprog = y * 2 + 1;\n").expect("write");
    let real = dir.join("real.safetensors");
    let (code, _, err) = raspc(&["compile", prog.to_str().expect("utf-8"), "--input-bounds", "-1,1", "--max-len", "6", "-o", real.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    let real = Parts::of(&Checkpoint::from_bytes(&std::fs::read(&real).expect("read")).expect("valid"));
    let (code, _, err) = raspc(&["run", &real.write(&dir, "real_ok.safetensors"), "--input", "[0.5, -0.5]"]);
    assert_eq!(code, 0, "{err}");
    for (file, block) in [("wide.safetensors", json!({"start": 0, "end": 2, "lo": -5.0, "hi": 5.0})), ("past.safetensors", json!({"start": 0, "end": 100, "lo": -1.0, "hi": 1.0}))] {
        let mut p = real.clone();
        let mut c = p.json("config");
        c["real_input"]["blocks"] = json!([block]);
        p.set("config", &c);
        let f = p.write(&dir, file);
        fails(&["run", &f, "--input", "[0.5, -0.5]"], &[file, "real_input block", "must lie inside the overall bounds [-1, 1] and within max_seq_len 6"]);
    }
    // A shape whose byte size overflows 64 bits: the tensor named (safetensors' own message
    // named none: helper b21), for a checkpoint and for `simulate --target`.
    let mut p = base.clone();
    p.tensors.get_mut(names::TOKEN_EMBEDDING).expect("embedding").0 = vec![1 << 62, 4];
    let f = p.write(&dir, "c8c.safetensors");
    for cmd in ["run", "inspect"] {
        let mut args = vec![cmd, f.as_str()];
        if cmd == "run" {
            args.extend(["--input", "ab"]);
        }
        fails(&args, &["c8c.safetensors", "tensor `embed.token` has shape [4611686018427387904, 4], whose size in bytes overflows"]);
    }
    let mut p = Parts { meta: BTreeMap::new(), tensors: BTreeMap::new() };
    p.tensors.insert("A".into(), (vec![1 << 31, 1 << 31], vec![0.0; 4]));
    p.tensors.insert("V".into(), (vec![2, 2], vec![0.0; 4]));
    let f = p.write(&dir, "t_huge.safetensors");
    fails(&["simulate", "--target", &f, "--input", "[[1, 0], [0, 1]]"], &["t_huge.safetensors", "tensor `A` has shape [2147483648, 2147483648], whose size in bytes overflows"]);
    // A huge description string and a huge layout list.
    let mut p = base.clone();
    let mut c = p.json("config");
    c["layers"][0]["head_info"][0]["what"] = json!("w".repeat(200_000));
    p.set("config", &c);
    let f = p.write(&dir, "c9.safetensors");
    fails(&["plot", &f, "--out", dir.join("plot9").to_str().expect("utf-8")], &["c9.safetensors", "head_info[0].what", "string_bytes"]);
    let mut p = base.clone();
    let mut l = p.json("layout");
    let sops = l["sops"].as_array_mut().expect("sops");
    sops.extend((0..100_000).map(|j| json!({ "label": format!("e{j}"), "offset": 0, "encoding": { "kind": "categorical", "values": [] } })));
    p.set("layout", &l);
    let f = p.write(&dir, "c10.safetensors");
    fails(&["plot", &f, "--out", dir.join("plot10").to_str().expect("utf-8")], &["c10.safetensors", "layout.sops", "list_len"]);
    // max_seq_len + 1 wrapping to 0 (and a wide d_model).
    let d = 100_000usize;
    let cfg = json!({ "d_model": d, "layers": [{ "heads": [0], "mlp": null }], "vocab": ck.config.vocab, "bos_id": 0, "max_seq_len": u64::MAX,
                      "causal": false, "attention": ck.config.attention, "readout_dims": 1 });
    let mut p = base.clone();
    p.set("config", &cfg);
    p.set("layout", &json!({ "sops": [] }));
    p.set("output", &json!({ "label": "x", "encoding": { "kind": "numerical" }, "tolerance": 0 }));
    p.tensors = BTreeMap::from([
        (names::TOKEN_EMBEDDING.to_string(), (vec![4, d], vec![0.0; 4 * d])),
        (names::POSITION_EMBEDDING.to_string(), (vec![0, d], vec![])),
        (names::READOUT.to_string(), (vec![d, 1], vec![0.0; d])),
    ]);
    let f = p.write(&dir, "c11.safetensors");
    fails(&["plot", &f, "--out", dir.join("plot11").to_str().expect("utf-8")], &["c11.safetensors", "config.max_seq_len"]);
    fails(&["run", &f, "--input", "abc"], &["config.max_seq_len"]);
    // A valid but wide model: plot refuses d_model x d_model heatmaps beyond its budget.
    let d = 5000usize;
    let cfg = json!({ "d_model": d, "layers": [{ "heads": [1], "mlp": null }], "vocab": ck.config.vocab, "bos_id": 0, "max_seq_len": 1,
                      "causal": false, "attention": ck.config.attention, "readout_dims": 1 });
    let mut p = base.clone();
    p.set("config", &cfg);
    p.set("layout", &json!({ "sops": [{ "label": "x", "offset": 0, "encoding": { "kind": "numerical" } }] }));
    p.set("output", &json!({ "label": "x", "encoding": { "kind": "numerical" }, "tolerance": 0 }));
    let mut readout = vec![0.0; d];
    readout[0] = 1.0;
    p.tensors = BTreeMap::from([
        (names::TOKEN_EMBEDDING.to_string(), (vec![4, d], vec![0.0; 4 * d])),
        (names::POSITION_EMBEDDING.to_string(), (vec![2, d], vec![0.0; 2 * d])),
        (names::READOUT.to_string(), (vec![d, 1], readout)),
        (names::head(0, 0, "w_q"), (vec![d, 1], vec![0.0; d])),
        (names::head(0, 0, "w_k"), (vec![d, 1], vec![0.0; d])),
        (names::head(0, 0, "w_v"), (vec![d, 1], vec![0.0; d])),
        (names::head(0, 0, "w_o"), (vec![1, d], vec![0.0; d])),
    ]);
    let f = p.write(&dir, "wide.safetensors");
    let (code, out, err) = raspc(&["run", &f, "--input", "a", "--json"]);
    assert_eq!((code, out.as_str()), (0, "{\"output\":[0.0]}\n"), "{err}");
    fails(&["plot", &f, "--out", dir.join("plotw").to_str().expect("utf-8")], &["d_model 5000", "cells"]);
    // An output label that is not in the layout.
    let mut p = base.clone();
    let mut o = p.json("output");
    o["label"] = json!("not_in_layout");
    p.set("output", &o);
    let f = p.write(&dir, "c13.safetensors");
    fails(&["inspect", &f], &["c13.safetensors", "`not_in_layout` is not in the layout"]);
    // A bit flip in the tensor data (the metadata untouched): the integrity hash catches it.
    let mut bytes = std::fs::read(&good).expect("read");
    let n = bytes.len();
    bytes[n - 5] ^= 0x01;
    let flipped = dir.join("flipped.safetensors");
    std::fs::write(&flipped, &bytes).expect("write");
    fails(&["run", flipped.to_str().expect("utf-8"), "--input", "abca"], &["flipped.safetensors", "integrity hash", "tensor_sha256"]);
    // A header length beyond the file.
    let mut bytes = std::fs::read(&good).expect("read");
    bytes[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let big = dir.join("header.safetensors");
    std::fs::write(&big, &bytes).expect("write");
    fails(&["inspect", big.to_str().expect("utf-8")], &["header.safetensors", "header"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_that_are_not_regular_are_refused_without_reading() {
    let dir = scratch();
    fails(&["run", "/dev/zero", "--input", "abc"], &["/dev/zero", "not a regular file"]);
    fails(&["inspect", "/dev/zero"], &["not a regular file"]);
    fails(&["eval", "/dev/zero", "--input", "abc"], &["/dev/zero", "not a regular file"]);
    fails(&["simulate", "--target", "/dev/zero", "--input", "/dev/zero"], &["/dev/zero", "not a regular file"]);
    fails(&["run", dir.to_str().expect("utf-8"), "--input", "abc"], &["not a regular file"]);
    let fifo = dir.join("fifo");
    if Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let f = fifo.to_str().expect("utf-8");
        fails(&["run", f, "--input", "abc"], &["fifo", "not a regular file"]);
        fails(&["eval", f, "--input", "abc"], &["fifo", "not a regular file"]);
        let h = corpus("histogram.rasp");
        for force in [false, true] {
            let mut args = vec!["compile", h.to_str().expect("utf-8"), "--vocab", "abc", "--max-len", "4", "-o", f];
            if force {
                args.push("--force");
            }
            fails(&args, &["fifo", "not a regular file", "refusing"]);
            let ft = std::fs::symlink_metadata(&fifo).expect("fifo still there").file_type();
            assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ft), "the FIFO was replaced");
        }
    } else {
        println!("mkfifo unavailable: FIFO cases skipped");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn output_paths_are_never_clobbered_and_leave_no_temp_files() {
    let dir = scratch();
    let h = corpus("histogram.rasp");
    let h = h.to_str().expect("utf-8");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "precious").expect("write");
    let n = notes.to_str().expect("utf-8");
    fails(&["compile", h, "--vocab", "abc", "--max-len", "4", "-o", n], &["notes.txt", "not a raspc checkpoint"]);
    fails(&["compile", h, "--vocab", "abc", "--max-len", "4", "-o", n, "--force"], &["notes.txt", "not a raspc checkpoint"]);
    assert_eq!(std::fs::read_to_string(&notes).expect("read"), "precious");
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&notes, &link).expect("symlink");
    fails(&["compile", h, "--vocab", "abc", "--max-len", "4", "-o", link.to_str().expect("utf-8"), "--force"], &["link.safetensors", "not a regular file"]);
    // A raspc checkpoint is replaced; one this raspc cannot read only with --force.
    let ck = dir.join("m.safetensors");
    let c = ck.to_str().expect("utf-8");
    for vocab in ["abc", "ab"] {
        let (code, _, err) = raspc(&["compile", h, "--vocab", vocab, "--max-len", "4", "-o", c]);
        assert_eq!(code, 0, "{err}");
    }
    let mut bytes = std::fs::read(&ck).expect("read");
    let len = bytes.len();
    bytes[len - 1] ^= 0x40;
    std::fs::write(&ck, &bytes).expect("write");
    fails(&["compile", h, "--vocab", "abc", "--max-len", "4", "-o", c], &["m.safetensors", "cannot read", "--force"]);
    // A temporary file of a raspc that was killed outright (its process is gone) is removed by
    // the next write of that output; one of a live process (this test's) is not.
    let stale = dir.join(".m.safetensors.4294967-0.raspc-tmp");
    let live = dir.join(format!(".m.safetensors.{}-0.raspc-tmp", std::process::id()));
    std::fs::write(&stale, "half a checkpoint").expect("write");
    std::fs::write(&live, "being written").expect("write");
    // (Left for over an hour: a fresh one may be another machine's writer.)
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    for f in [&stale, &live] {
        std::fs::File::options().write(true).open(f).and_then(|h| h.set_modified(old)).expect("set mtime");
    }
    let fresh = dir.join(".m.safetensors.4294966-0.raspc-tmp");
    std::fs::write(&fresh, "another machine's").expect("write");
    let (code, _, err) = raspc(&["compile", h, "--vocab", "abc", "--max-len", "4", "-o", c, "--force"]);
    assert_eq!(code, 0, "{err}");
    if Path::new("/proc/self").exists() {
        assert!(!stale.exists() && live.exists() && fresh.exists(), "stale temporary file kept, or a live or fresh one removed");
    }
    std::fs::remove_file(&live).ok();
    std::fs::remove_file(&fresh).ok();
    let _ = std::fs::remove_file(&stale);
    let left: Vec<String> = std::fs::read_dir(&dir).expect("list").filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains("tmp")).collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flags_are_checked_before_anything_is_allocated() {
    let h = corpus("histogram.rasp");
    let h = h.to_str().expect("utf-8");
    fails(&["verify", h, "--vocab", "abc", "--max-len", "4", "--samples", "10000000000"], &["--samples", "RASPC_LIMITS=samples"]);
    fails(&["simulate", "--n", "100000", "--d", "100000", "--trials", "2"], &["--n 100000"]);
    // A count that parses but is refused: exit status 1 (`fails`), as `--n 0` (it was 2).
    fails(&["simulate", "--trials", "0"], &["--trials 0: must be at least 1"]);
    fails(&["simulate", "--n", "4294967296", "--d", "4294967296", "--heads", "4294967296", "--trials", "2"], &["--n"]);
    fails(&["simulate", "--n", "100", "--d", "100", "--heads", "8", "--trials", "2"], &["U for --n 100", "positions", "u_positions"]);
    fails(&["simulate", "--trials", "1000000000"], &["--trials"]);
    fails(&["simulate", "--trials", "2", "--tolerance", "NaN"], &["--tolerance NaN"]);
    fails(&["simulate", "--trials", "2", "--bound", "inf"], &["--bound inf"]);
    fails(&["simulate", "--trials", "2", "--pl-error=-1"], &["--pl-error -1"]);
    let long = "a".repeat(100_000);
    fails(&["eval", h, "--input", &long], &["--input has 100000 tokens", "input_tokens"]);
    fails(&["eval", h, "--input", "[1,2,2"], &["bad --input", "not valid JSON"]);
    fails(&["compile", h, "--vocab", "[1,2", "--max-len", "4", "-o", "/nonexistent/typo.safetensors", "--force"], &["bad --vocab", "not valid JSON"]);
    fails(&["compile", h, "--input-grid", "0,1,1e-300", "--max-len", "4", "-o", "/nonexistent/g.safetensors"], &["--input-grid", "at most 4096"]);
    fails(&["compile", h, "--vocab", "abc", "--max-len", "100000", "-o", "/nonexistent/x.safetensors"], &["--max-len 100000"]);
    // Equal numbers are one token (as in Python's sets): -0.0 and 0.0, 0 and 0.0, 1 and true.
    for (vocab, says) in [("[-0.0, 0.0]", "-0.0 and 0.0"), ("[0, -0]", "0 and -0.0"), ("[1, 2, 1.0]", "1 and 1.0"), ("[true, 1]", "true and 1"), ("[\"a\", \"a\"]", "lists 'a' twice")] {
        fails(&["compile", h, "--vocab", vocab, "--max-len", "4", "-o", "/nonexistent/z.safetensors"], &[says]);
    }
}

#[test]
fn probe_and_run_flags() {
    let dir = scratch();
    let (hist, _) = hist(&dir);
    let h = corpus("histogram.rasp");
    let h = h.to_str().expect("utf-8");
    fails(&["probe", "svflow", &hist, "--program", h, "--attn-temp", "1e-300", "--seeds", "1", "--sequences", "2"], &["--attn-temp 1e-300", "soft_beta"]);
    fails(&["probe", "svflow", &hist, "--program", h, "--attn-temp", "NaN"], &["--attn-temp NaN"]);
    fails(&["probe", "svflow", &hist, "--program", h, "--weight-noise", "inf"], &["--weight-noise inf"]);
    fails(&["probe", "svflow", &hist, "--program", h, "--sequences", "1000000000"], &["--sequences (1000000000)", "forward passes"]);
    // A real-valued model: an error, not all-NaN metrics.
    let prog = dir.join("real.rasp");
    std::fs::write(&prog, "m = aggregate(select(indices, indices, <=), tokens_float);\nprog = m * m;\n").expect("write");
    let real = dir.join("real.safetensors");
    let (code, _, err) = raspc(&["compile", prog.to_str().expect("utf-8"), "--input-bounds=-1,1", "--mlp", "gated", "--max-len", "4", "-o", real.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    fails(&["probe", "svflow", real.to_str().expect("utf-8"), "--program", prog.to_str().expect("utf-8"), "--seeds", "1", "--sequences", "2"], &["real.safetensors", "real numbers"]);
    // `run` and `eval` agree that 1.0 is not the token 1: the program reads tokens as strings
    // (`tokens` is `tokens_str`: "1.0" vs "1"), so on [1.0, 2, 1] it counts [1, 1, 1] where on
    // [1, 2, 1] it counts [2, 1, 2]. A model compiled for the tokens 1, 2, 3 refuses 1.0.
    let ints = dir.join("ints.safetensors");
    let (code, _, err) = raspc(&["compile", h, "--vocab", "[1,2,3]", "--max-len", "4", "-o", ints.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    fails(&["run", ints.to_str().expect("utf-8"), "--input", "[1.0, 2, 1]", "--json"], &["1.0", "not in the model's vocabulary"]);
    let (code, eval_out, err) = raspc(&["eval", h, "--input", "[1.0, 2, 1]", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(eval_out, "{\"output\":[1,1,1]}\n");
    let (code, run_out, err) = raspc(&["run", ints.to_str().expect("utf-8"), "--input", "[1, 2, 1]", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(run_out, "{\"output\":[2,1,2]}\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A GGUF file (version 3) with one llama block whose `attn_q` claims 2^31 x 2^31 elements.
fn huge_gguf(path: &Path) {
    tiny_gguf(path, vec![1 << 31, 1 << 31], 0.5, &[]);
}

/// A GGUF file (version 3): one llama block of d_model 8, its `attn_q` of dimensions `q`, every
/// weight `fill`; `extra` metadata (key, GGUF value type, value bytes) after the others (a key
/// given twice takes the later value).
fn tiny_gguf(path: &Path, q: Vec<u64>, fill: f32, extra: &[(&str, u32, Vec<u8>)]) {
    fn s(x: &str) -> Vec<u8> {
        let mut b = (x.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(x.as_bytes());
        b
    }
    let u32kv = |k: &str, v: u32| [s(k), 4u32.to_le_bytes().to_vec(), v.to_le_bytes().to_vec()].concat();
    let f32kv = |k: &str, v: f32| [s(k), 6u32.to_le_bytes().to_vec(), v.to_le_bytes().to_vec()].concat();
    let strkv = |k: &str, v: &str| [s(k), 8u32.to_le_bytes().to_vec(), s(v)].concat();
    let toks = ["a", "b", "c", "d", "e", "f"];
    let arr =
        [s("tokenizer.ggml.tokens"), 9u32.to_le_bytes().to_vec(), 8u32.to_le_bytes().to_vec(), (toks.len() as u64).to_le_bytes().to_vec(), toks.iter().flat_map(|t| s(t)).collect()]
            .concat();
    let kvs = [
        strkv("general.architecture", "llama"),
        u32kv("llama.attention.head_count", 2),
        u32kv("llama.embedding_length", 8),
        u32kv("llama.attention.head_count_kv", 2),
        u32kv("llama.block_count", 1),
        f32kv("llama.attention.layer_norm_rms_epsilon", 1e-5),
        u32kv("llama.vocab_size", 6),
        arr,
    ]
    .into_iter()
    .chain(extra.iter().map(|(k, ty, v)| [s(k), ty.to_le_bytes().to_vec(), v.clone()].concat()))
    .collect::<Vec<_>>();
    let (d, v, ff) = (8u64, 6u64, 16u64);
    let tensors: Vec<(&str, Vec<u64>)> = vec![
        ("token_embd.weight", vec![d, v]),
        ("blk.0.attn_norm.weight", vec![d]),
        ("blk.0.attn_q.weight", q),
        ("blk.0.attn_k.weight", vec![d, d]),
        ("blk.0.attn_v.weight", vec![d, d]),
        ("blk.0.attn_output.weight", vec![d, d]),
        ("blk.0.ffn_norm.weight", vec![d]),
        ("blk.0.ffn_gate.weight", vec![d, ff]),
        ("blk.0.ffn_up.weight", vec![d, ff]),
        ("blk.0.ffn_down.weight", vec![ff, d]),
        ("output_norm.weight", vec![d]),
    ];
    let mut infos = vec![];
    let mut data: Vec<u8> = vec![];
    for (name, dims) in &tensors {
        infos.extend(s(name));
        infos.extend((dims.len() as u32).to_le_bytes());
        for x in dims {
            infos.extend(x.to_le_bytes());
        }
        infos.extend(0u32.to_le_bytes()); // F32
        infos.extend((data.len() as u64).to_le_bytes());
        let n: u64 = if dims.iter().any(|&x| x > 1 << 20) { 4 } else { dims.iter().product() };
        data.extend((0..n).flat_map(|_| fill.to_le_bytes()));
        data.resize(data.len().div_ceil(32) * 32, 0);
    }
    let mut x = b"GGUF".to_vec();
    x.extend(3u32.to_le_bytes());
    x.extend((tensors.len() as u64).to_le_bytes());
    x.extend((kvs.len() as u64).to_le_bytes());
    x.extend(kvs.concat());
    x.extend(infos);
    x.resize(x.len().div_ceil(32) * 32, 0);
    x.extend(data);
    std::fs::write(path, x).expect("write gguf");
}

/// A command line of owned arguments as `&str`s.
fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn gguf_with_huge_dims_is_an_error() {
    let dir = scratch();
    let g = dir.join("huge.gguf");
    huge_gguf(&g);
    let text = dir.join("text.txt");
    std::fs::write(&text, "ab cd ab ab cd abcd ".repeat(20)).expect("write");
    let text = text.to_str().expect("utf-8").to_string();
    // `probe svflow` of a GGUF file on that text, one short sequence per seed.
    let probe = |g: &Path| -> Vec<String> {
        ["probe", "svflow", g.to_str().expect("utf-8"), "--text", &text, "--seq-len", "8", "--seeds", "1", "--sequences", "2"].iter().map(|a| a.to_string()).collect()
    };
    fails(&as_strs(&probe(&g)), &["huge.gguf", "blk.0.attn_q.weight", "2147483648"]);
    fails(&["probe", "svflow", "/dev/zero.gguf"], &["/dev/zero.gguf"]);
    // Well formed, but its weights are NaN: refused at load with the tensor named (the probe
    // printed NaN scores beside clean-looking metrics).
    let nan = dir.join("nan.gguf");
    tiny_gguf(&nan, vec![8, 8], f32::NAN, &[]);
    fails(&as_strs(&probe(&nan)), &["nan.gguf", "token_embd.weight", "non-finite weight"]);
    // Metadata that broke the load or every activation (helper b21): an alignment of 0 panicked
    // inside candle (division by zero); a NaN or negative epsilon, or a rope base of 0, gave `NLL
    // NaN` and exit 0; more tokens than embedding rows failed at run time naming no key.
    let f32v = |x: f32| x.to_le_bytes().to_vec();
    let strs = |xs: &[&str]| {
        let mut b = 8u32.to_le_bytes().to_vec();
        b.extend((xs.len() as u64).to_le_bytes());
        for x in xs {
            b.extend((x.len() as u64).to_le_bytes());
            b.extend(x.as_bytes());
        }
        b
    };
    type Kv<'a> = (&'a str, u32, Vec<u8>);
    let cases: Vec<(&str, Kv, Vec<&str>)> = vec![
        ("align0.gguf", ("general.alignment", 4, 0u32.to_le_bytes().to_vec()), vec!["general.alignment is 0"]),
        ("align0u8.gguf", ("general.alignment", 0, vec![0u8]), vec!["general.alignment is 0"]),
        // candle drops a key's trailing NULs (review rv21: this one still panicked).
        ("align0nul.gguf", ("general.alignment\0\0", 4, 0u32.to_le_bytes().to_vec()), vec!["general.alignment is 0"]),
        ("eps_nan.gguf", ("llama.attention.layer_norm_rms_epsilon", 6, f32v(f32::NAN)), vec!["layer_norm_rms_epsilon = NaN", "positive finite"]),
        ("eps_neg.gguf", ("llama.attention.layer_norm_rms_epsilon", 6, f32v(-1e-5)), vec!["layer_norm_rms_epsilon = -0.00001 ", "positive finite"]),
        ("rope0.gguf", ("llama.rope.freq_base", 6, f32v(0.0)), vec!["llama.rope.freq_base = 0", "positive finite"]),
        ("toks.gguf", ("tokenizer.ggml.tokens", 9, strs(&["a", "b", "c", "d", "e", "f", "g"])), vec!["7 tokens", "llama.vocab_size = 6"]),
        // `ab` is no token: the tokenizers crate panicked building the merge table.
        ("merge.gguf", ("tokenizer.ggml.merges", 9, strs(&["a b"])), vec!["tokenizer.ggml.merges[0] `a b`", "`ab` is not in tokenizer.ggml.tokens"]),
    ];
    for (file, kv, want) in cases {
        let g = dir.join(file);
        tiny_gguf(&g, vec![8, 8], 0.5, &[kv]);
        let mut want = want;
        want.push(file);
        fails(&as_strs(&probe(&g)), &want);
    }
    // The same file with a sane alignment and settings loads and probes (the cases above fail
    // for what they change).
    // An alignment candle does not read (a u64; the spec's type is u32) leaves its default: the
    // file loads (review rv21: it was refused as 0).
    let u64_align = dir.join("u64align.gguf");
    tiny_gguf(
        &u64_align,
        vec![8, 8],
        0.5,
        &[("general.alignment", 10, 0u64.to_le_bytes().to_vec()), ("tokenizer.ggml.merges", 9, strs(&["c d"])), ("tokenizer.ggml.tokens", 9, strs(&["a", "b", "c", "d", "cd", "f"]))],
    );
    let (code, _, err) = raspc(&as_strs(&probe(&u64_align)));
    assert_eq!(code, 0, "{err}");
    let ok = dir.join("ok.gguf");
    tiny_gguf(
        &ok,
        vec![8, 8],
        0.5,
        &[
            ("general.alignment", 4, 32u32.to_le_bytes().to_vec()),
            ("llama.rope.freq_base", 6, f32v(10000.0)),
            ("tokenizer.ggml.merges", 9, strs(&["c d"])),
            ("tokenizer.ggml.tokens", 9, strs(&["a", "b", "c", "d", "cd", "f"])),
        ],
    );
    let (code, _, err) = raspc(&as_strs(&probe(&ok)));
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bad RASPC_LIMITS is reported as the environment's error, not the model file's.
#[test]
fn a_bad_budget_in_the_environment_is_not_blamed_on_the_file() {
    let dir = scratch();
    let (f, _) = hist(&dir);
    for args in [vec!["run", f.as_str(), "--input", "ab"], vec!["inspect", f.as_str()]] {
        let out = Command::new(env!("CARGO_BIN_EXE_raspc")).args(&args).env("RASPC_LIMITS", "foo=1").output().expect("start raspc");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.starts_with("error: bad RASPC_LIMITS: `foo=1`") && !err.contains(f.as_str()), "{args:?}: {err}");
    }
}

/// `RASPC_LIMITS=params=N` is compile's parameter limit as well as the loaders' budget: a small
/// one refuses a model, naming the limit and how to raise it; a large one admits it.
#[test]
fn the_params_budget_is_compiles_limit_too() {
    let dir = scratch();
    let prog = dir.join("rev.rasp");
    std::fs::write(&prog, "r = aggregate(select(indices, length - indices - 1, ==), tokens);\n").unwrap();
    let out = dir.join("rev.safetensors");
    let compile = |limits: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_raspc"))
            .args(["compile", prog.to_str().unwrap(), "--vocab", "abc", "--max-len", "8", "-o", out.to_str().unwrap(), "--force"])
            .env("RASPC_LIMITS", limits)
            .output()
            .expect("start raspc");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = compile("params=1000");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("compile::too_large") && err.contains("(the limit is 1000)") && err.contains("RASPC_LIMITS=params=N"), "{err}");
    let (code, err) = compile("params=1e9");
    assert_eq!(code, Some(0), "{err}");
}

/// Programs far larger than anyone writes by hand (generated ones): 300,000 statements evaluate
/// (every per-statement scan of the whole file made this quadratic: 100,000 took 38 s); more
/// than the token budget is refused at its place, within the 4 GB cap (a 63 MB file ran the
/// parser out of memory); 30,000 parse errors and 200,000 bad characters print the first 50
/// diagnostics and a count (rendering each one took 30 s for the first and minutes for the
/// second).
#[test]
fn huge_programs_and_floods_of_errors_end_promptly() {
    let dir = scratch();
    let p = dir.join("many.rasp");
    std::fs::write(&p, "x = 1;\n".repeat(300_000) + "prog = tokens;\n").unwrap();
    let (code, out, err) = raspc(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!((code, out.as_str()), (0, "['a', 'b']\n"), "{err}");
    std::fs::write(&p, "x = 1;\n".repeat(raspc_lang::lexer::MAX_TOKENS / 4 + 10) + "prog = tokens;\n").unwrap();
    let line = raspc_lang::lexer::MAX_TOKENS / 4;
    fails(&["eval", p.to_str().unwrap(), "--input", "ab"], &["lex::too-big", &format!("many.rasp:{line}:")]);
    std::fs::write(&p, "x = ;\n".repeat(30_000)).unwrap();
    let (code, _, err) = raspc(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(
        err.matches("error[parse::expected]").count() == 50 && err.contains("note: 29950 more diagnostics (29950 errors) not shown") && err.contains("due to 30000 previous errors"),
        "{}",
        &err[err.len() - 300..]
    );
    std::fs::write(&p, "$".repeat(200_000) + "\n").unwrap();
    let (code, _, err) = raspc(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert!(code == 1 && err.contains("199950 more diagnostics") && err.len() < 20_000, "{}", &err[..err.len().min(600)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Source shown under a diagnostic never carries control characters to the terminal (an escape
/// sequence in a string literal recoloured it), and a zero-width character gets a caret.
#[test]
fn diagnostics_show_control_characters_as_question_marks() {
    let dir = scratch();
    let p = dir.join("ctrl.rasp");
    std::fs::write(&p, "x = \"\u{1b}[31mred\u{7}\" + undefined_name;\n").unwrap();
    let (code, _, err) = raspc(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("x = \"?[31mred?\" + undefined_name;") && !err.contains('\u{1b}') && !err.contains('\u{7}') && err.contains("ctrl.rasp:1:"), "{err:?}");
    std::fs::write(&p, "y = a\u{200b}b + 1;\n").unwrap();
    let (code, _, err) = raspc(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("unexpected character `\\u{200b}`") && err.contains("y = a???b + 1;") && err.contains("^^^") && err.contains("ctrl.rasp:1:6"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Output that cannot be written is an error (a full disk lost a model's output while raspc
/// said nothing and exited 0); a reader that stops early (`| head -1`) is not.
#[test]
fn unwritable_output_is_an_error_and_a_closed_pipe_is_not() {
    let bin = env!("CARGO_BIN_EXE_raspc");
    let program = corpus("reverse.rasp");
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let o = Command::new(bin).args(["eval", program.to_str().unwrap(), "--input", "abc"]).stdout(full).stderr(Stdio::piped()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("error: could not write the output:"), "{err}");
    } else {
        eprintln!("skipped the /dev/full half: no /dev/full here");
    }
    // A reader that closes at once: no error, no panic.
    let mut child = Command::new(bin).args(["dump", program.to_str().unwrap()]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(0) && !err.contains("panicked") && !err.contains("could not write"), "{:?} {err}", o.status);
}

/// Messages for three misuses that read as something else (helper l): a quoted --vocab (its
/// quotes are tokens), plot into a device, a tiny simulate bound printed in full.
#[test]
fn misuses_are_named_as_what_they_are() {
    let program = corpus("reverse.rasp");
    let dir = scratch();
    let out = dir.join("m.safetensors");
    fails(
        &["compile", program.to_str().expect("utf-8"), "--vocab", "\"abc\"", "--max-len", "4", "-o", out.to_str().expect("utf-8")],
        &["a quoted string is read one character per token"],
    );
    let (code, _, err) = raspc(&["compile", program.to_str().expect("utf-8"), "--vocab", "abc", "--max-len", "4", "-o", out.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    if Path::new("/dev/null").exists() {
        fails(&["plot", out.to_str().expect("utf-8"), "-o", "/dev/null"], &["`/dev/null` exists and is not a folder"]);
    }
    let (code, text, err) = raspc(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--bound", "1e-300", "--trials", "1"]);
    assert!(code == 0 && text.contains("inputs in [-1e-300, 1e-300]") && text.len() < 2_000, "{err}{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chain of loads deeper than the budget is refused at the load that passes it (a chain of
/// 5,000 files took 30 s and 1.4 GB); one within it runs.
#[test]
fn load_chains_have_a_depth_budget() {
    let dir = scratch();
    let chain = |n: usize| {
        for i in 0..n {
            let next = if i + 1 < n { format!("load \"c{}.rasp\";\n", i + 1) } else { String::new() };
            std::fs::write(dir.join(format!("c{i}.rasp")), format!("{next}x{i} = {i};\n")).expect("write");
        }
        let _ = std::fs::remove_file(dir.join(format!("c{n}.rasp")));
        let main = dir.join("main.rasp");
        std::fs::write(&main, "load \"c0.rasp\";\nprog = indices + x0;\n").expect("write");
        main
    };
    let main = chain(100);
    let (code, out, err) = raspc(&["eval", main.to_str().expect("utf-8"), "--input", "ab"]);
    assert_eq!((code, out.as_str()), (0, "[0, 1]\n"), "{err}");
    let main = chain(raspc_lang::host::MAX_LOAD_DEPTH + 20);
    fails(&["eval", main.to_str().expect("utf-8"), "--input", "ab"], &["eval::load", "loads nested more than 256 files deep"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A signal ends any command with 128 + its number, having removed what it was writing (helper
/// b10: SIGTERM and SIGHUP exited with SIGINT's 130, or, where no checkpoint was being written,
/// killed the process outright, with a progress bar left on the terminal's line).
#[cfg(unix)]
#[test]
fn signals_end_a_run_with_their_own_exit_status() {
    let bin = env!("CARGO_BIN_EXE_raspc");
    let dir = std::env::temp_dir().join(format!("raspc-signals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("v.rasp");
    std::fs::write(&prog, "x = aggregate(select(tokens, tokens, ==), indices);\n").unwrap();
    // An exhaustive verify of 1.4 M inputs runs long enough to be interrupted: its output
    // after `sig` 400 ms in.
    let interrupted = |sig: &str, json: bool| {
        let mut args = vec!["verify", prog.to_str().unwrap(), "--vocab", "abcd", "--max-len", "10", "--exhaustive"];
        if json {
            args.push("--json");
        }
        let child = Command::new(bin).args(&args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success());
        child.wait_with_output().unwrap()
    };
    for (sig, code) in [("-INT", 130), ("-TERM", 143), ("-HUP", 129)] {
        let status = interrupted(sig, false).status;
        assert_eq!(status.code(), Some(code), "{sig}: {status:?}");
    }
    // With --json the interrupted command prints its error object, as a failure does (helper
    // t22: nothing at all).
    for (sig, code, name) in [("-INT", 130, "SIGINT"), ("-TERM", 143, "SIGTERM")] {
        let out = interrupted(sig, true);
        assert_eq!(out.status.code(), Some(code), "{sig}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().count(), 1, "{sig}: {text}");
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["error"]["exit_code"], code, "{text}");
        assert_eq!(v["error"]["message"], format!("interrupted ({name})"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A gated unit skipped in a block where its inputs are all zero must still see a gate that
/// overflows: 0·∞ is NaN, refused as on the row path and in candle (review rv22: a gate weight
/// of 1e35 times a position's (p - 1)² gave ∞ from position 60 on, and the block path
/// returned zeros, exit 0).
#[test]
fn block_mlps_keep_overflowing_gates() {
    let bin = env!("CARGO_BIN_EXE_raspc");
    let dir = std::env::temp_dir().join(format!("raspc-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (prog, ck) = (dir.join("g2.rasp"), dir.join("g2.safetensors"));
    std::fs::write(&prog, "x = tokens_float;\nprev = aggregate(select(indices, indices - 1, ==), x);\nprog = x * prev - (x if x > prev else prev);\n").unwrap();
    let ok = Command::new(bin).args(["compile", prog.to_str().unwrap(), "--input-bounds=-2,2", "--mlp", "gated", "--max-len", "72", "-o", ck.to_str().unwrap()]).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let mut c = Checkpoint::from_bytes(&std::fs::read(&ck).unwrap()).unwrap();
    // Unit 0's gate also reads dim 5 (`prev.key0^2`: (p - 1)² from the position embedding).
    c.tensors.get_mut(&names::mlp(0, "w_gate")).unwrap().data[25] = 1e35;
    std::fs::write(&ck, c.to_bytes_unchecked().unwrap()).unwrap();
    let zeros = |n: usize| format!("[{}]", vec!["0.0"; n].join(","));
    let run = |n: usize| Command::new(bin).env("RASPC_LIMITS", "abs_weight=1e36").args(["run", ck.to_str().unwrap(), "--input", &zeros(n)]).output().unwrap();
    // 59 zeros: (p - 1)² · 1e35 stays within f32 at every position.
    assert!(run(59).status.success());
    let out = run(60);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("non-finite activation") && err.contains("layer 0 mlp"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An argument that is not UTF-8 is refused, naming it (helper t22: its bad bytes were replaced
/// and the command ran on "\u{fffd}").
#[cfg(unix)]
#[test]
fn arguments_that_are_not_utf8_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let bin = env!("CARGO_BIN_EXE_raspc");
    let bad = std::ffi::OsStr::from_bytes(b"\xff\xfe");
    let out = Command::new(bin).args(["eval".as_ref(), "x.rasp".as_ref(), "--input".as_ref(), bad]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("argument 4") && err.contains("not valid UTF-8"), "{err}");
}
