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
