//! Shared helpers for raspc's end-to-end tests: locating the corpus, evaluating corpus
//! programs with the reference interpreter, and converting values for comparison.

use raspc_lang::{Atom, DiskLoader, HostValue, Session, Value};
use std::path::PathBuf;

/// The directory holding the corpus programs.
pub fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Path of one corpus program.
pub fn corpus(name: &str) -> PathBuf {
    corpus_dir().join(name)
}

/// Evaluates a corpus program (host level). Panics with the diagnostics on failure: test use only.
pub fn session(name: &str) -> Session {
    let path = corpus(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let (_, r) = raspc_lang::evaluate_program(name, Some(&path), &text, &DiskLoader);
    r.unwrap_or_else(|d| panic!("{name} failed to evaluate: {d:#?}"))
}

/// Runs `entry` of a loaded session on `input`.
pub fn run(s: &Session, entry: &str, input: &[Atom]) -> Result<Value, String> {
    let (_, node) = s.entry(Some(entry))?;
    raspc_lang::evaluate(&s.graph, node, input).map_err(|e| format!("{}: {}", e.label, e.message))
}

/// Characters of a string as string atoms.
pub fn chars(s: &str) -> Vec<Atom> {
    s.chars().map(|c| Atom::Str(c.to_string())).collect()
}

pub fn ints(v: &[i64]) -> Vec<Atom> {
    v.iter().map(|&i| Atom::Int(i)).collect()
}

/// A sequence value as JSON, for compact comparisons with `serde_json::json!`.
pub fn json(v: &Value) -> serde_json::Value {
    v.to_json()
}

/// A host value as JSON (lists, dicts with string keys, atoms).
pub fn host_json(v: &HostValue) -> serde_json::Value {
    match v {
        HostValue::Atom(a) => a.to_json(),
        HostValue::List(l) => serde_json::Value::Array(l.iter().map(host_json).collect()),
        HostValue::Dict(d) => serde_json::Value::Object(d.entries.iter().map(|(k, v)| (k.to_py_str(), host_json(v))).collect()),
        other => serde_json::Value::String(format!("<{}>", other.kind_name())),
    }
}

/// A program to compile and check: file (relative to the corpus), entry, vocabulary.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub file: &'static str,
    pub entry: Option<&'static str>,
    pub vocab: &'static str,
}

/// Compiles a corpus program for `max_len` (and causal masking).
pub fn compile(case: &Case, max_len: usize, causal: bool) -> Result<(Session, raspc_lang::NodeId, Vec<Atom>, raspc_compiler::Compiled), String> {
    let mut s = session(case.file);
    let (_, root) = s.compile_entry(case.entry)?;
    let vocab = raspc_lang::parse_input(case.vocab)?;
    let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len, causal, ..Default::default() };
    let compiled = raspc_compiler::compile(&s.graph, root, &opts, "test").map_err(|d| format!("{d:#?}"))?;
    block_infos_name_allocated_slots(&compiled.checkpoint);
    Ok((s, root, vocab, compiled))
}

/// Every block's `writes` names a slot of the layout (one the block's output map writes into),
/// and every slot a block's weights write into is named by some block, so that `inspect`,
/// `plot` and `trace` show who writes what.
pub fn block_infos_name_allocated_slots(ck: &raspc_checkpoint::Checkpoint) {
    let d = ck.config.d_model;
    for (l, layer) in ck.config.layers.iter().enumerate() {
        let blocks = layer
            .head_info
            .iter()
            .enumerate()
            .map(|(h, i)| (i, raspc_checkpoint::names::head(l, h, "w_o")))
            .chain(layer.mlp_info.iter().map(|i| (i, raspc_checkpoint::names::mlp(l, "w_out"))));
        for (info, tensor) in blocks {
            let slot =
                ck.layout.sops.iter().find(|s| s.label == info.writes).unwrap_or_else(|| panic!("layer {l}: `{}` writes `{}`, which is not in the layout", info.what, info.writes));
            let t = &ck.tensors[&tensor];
            let cols = slot.offset..slot.offset + slot.encoding.dims();
            let rows: Vec<usize> = match info.hidden {
                Some([a, b]) => (a..b).collect(),
                None => (0..t.shape[0]).collect(),
            };
            let writes = rows.iter().any(|&r| cols.clone().chain(slot.parts.iter().copied()).any(|c| c < d && t.data[r * d + c] != 0.0));
            // A block may write nothing at all (an MLP part whose output is a constant folded into a bias).
            let any = rows.iter().any(|&r| (0..d).any(|c| t.data[r * d + c] != 0.0));
            assert!(writes || !any, "layer {l}: `{}` is said to write `{}`, but its weights write elsewhere", info.what, info.writes);
        }
    }
}

/// Compiles and verifies against the interpreter; returns the report.
pub fn verify(case: &Case, max_len: usize, causal: bool, inputs: raspc::verify::Inputs) -> raspc::verify::Report {
    let (s, root, vocab, compiled) = compile(case, max_len, causal).unwrap_or_else(|e| panic!("{} failed to compile: {e}", case.file));
    let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").expect("cpu")).expect("valid checkpoint");
    let seqs = raspc::verify::generate(&inputs, vocab.len(), max_len).expect("inputs");
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    raspc::verify::verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).expect("runs")
}

/// Replaces the text between `<!-- MARKER:start -->` and `<!-- MARKER:end -->` in
/// docs/benchmarks.md with `table` (benchmarks record their results there).
pub fn write_doc_table(marker: &str, table: &str) {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/benchmarks.md");
    let text = std::fs::read_to_string(&doc).unwrap_or_default();
    let (start, end) = (format!("<!-- {marker}:start -->"), format!("<!-- {marker}:end -->"));
    if let (Some(a), Some(b)) = (text.find(&start), text.find(&end)) {
        let new = format!("{}{start}\n{table}{}", &text[..a], &text[b..]);
        std::fs::write(&doc, new).unwrap();
        eprintln!("updated {}", doc.display());
    } else {
        eprintln!("markers not found in {}; table not written", doc.display());
    }
}

/// The idiom corpus (tests/corpus/idioms): `(name, vocab, causal)` of every program, sorted by
/// name, read from each file's `# vocab: V · causal: yes|no` header line.
pub fn idioms() -> Vec<(String, String, bool)> {
    let dir = corpus_dir().join("idioms");
    let mut out = vec![];
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("rasp") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let header = text.lines().find_map(|l| l.strip_prefix("# vocab: ")).unwrap_or_else(|| panic!("{name}: no `# vocab:` header"));
        let (vocab, causal) = header.split_once(" · causal: ").unwrap_or_else(|| panic!("{name}: header must read `# vocab: V · causal: yes|no`"));
        let causal = match causal.trim() {
            "yes" => true,
            "no" => false,
            other => panic!("{name}: causal must be yes or no, not {other:?}"),
        };
        out.push((name, vocab.trim().to_string(), causal));
    }
    out.sort();
    out
}

/// Tracr's library programs (tests/corpus/tracr/NAME.rasp) and their vocabularies.
pub const TRACR_PROGRAMS: &[(&str, &str)] = &[
    ("length", "abc"),
    ("reverse", "abc"),
    ("histogram", "abc"),
    ("sort_unique", "[1,2,3,4]"),
    ("sort", "[1,2,3,4]"),
    ("sort_freq", "abc"),
    ("frac_prevs", "xyz"),
    ("pair_balance", "()x"),
    ("dyck1", "()x"),
    ("dyck2", "(){}"),
    ("shift_by", "abc"),
    ("detect_pattern", "abc"),
    ("count_less_freq", "abc"),
    ("count", "abc"),
    ("nary_sequencemap", "[1,2,3]"),
];

/// Runs the CLI in-process (`raspc ARGS...`): exit code, stdout, stderr.
pub fn cli(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv: Vec<String> = std::iter::once("raspc").chain(args.iter().copied()).map(String::from).collect();
    let code = raspc::run(argv, &mut out, &mut err, false);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

/// `count` random inputs (seeded) over `vocab`, each cycled to exactly `n` tokens and encoded
/// for `model`: the full-length batches the forward benchmarks time.
pub fn full_length_ids(model: &raspc_runtime::Model, vocab: &[Atom], n: usize, count: usize) -> Vec<Vec<u32>> {
    let seqs = raspc::verify::generate(&raspc::verify::Inputs::Random { count, seed: 7 }, vocab.len(), n).expect("inputs");
    seqs.iter()
        .map(|s| {
            let full: Vec<serde_json::Value> = (0..n).map(|i| vocab[s[i % s.len()]].to_json()).collect();
            model.encode(&full).expect("vocabulary tokens encode")
        })
        .collect()
}

/// How many cases a property test runs: `PROPTEST_CASES` when set (for a longer hunt), else the
/// test's own CI count.
pub fn prop_cases(ci: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(ci)
}
