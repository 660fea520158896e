//! raspc-lang: the RASP language front end and the reference interpreter.
//!
//! Pipeline of this crate: [`lexer`] -> [`parser`] (AST with spans) -> [`host`] evaluation
//! (functions, loops, comprehensions run at compile time) -> [`graph`] (the DAG of s-ops and
//! selectors) -> [`interp`] (the oracle). No tensor library is involved.

pub mod ast;
pub mod atom;
pub mod diag;
pub mod graph;
pub mod host;
pub mod interp;
pub mod lexer;
pub mod parser;
pub mod pretty;
pub mod span;

pub use atom::Atom;
pub use diag::{Diagnostic, Severity};
pub use graph::{Graph, NodeId, NodeKind, Origin};
pub use host::{evaluate_program, DiskLoader, FileLoader, HostValue, MemoryLoader, Session};
pub use interp::{evaluate, EvalError, Value};
pub use span::{FileId, SourceMap, Span};

/// Parses a command-line input: a JSON array of atoms (`[1,2]`, `["a","b"]`, `[0.5,true]`),
/// or otherwise a plain string split into characters, as the reference does.
pub fn parse_input(s: &str) -> Result<Vec<Atom>, String> {
    let t = s.trim_start();
    if t.starts_with('[')
        && let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(s)
    {
        // serde_json reads an integer past u64 as a float (1e20): refuse it as one past i64.
        if let Some(big) = json_integers(s).into_iter().find(|n| n.parse::<i64>().is_err()) {
            return Err(format!("the integer {big} does not fit in 64 bits (RASP's integers are i64)"));
        }
        return items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                serde_json::Value::Bool(b) => Ok(Atom::Bool(*b)),
                serde_json::Value::String(s) => Ok(Atom::Str(s.clone())),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => Ok(Atom::Int(i)),
                    // An integer past i64 (RASP's integers are 64-bit) is refused, not turned
                    // into a float.
                    None if n.is_u64() => Err(format!("item {i}: the integer {n} does not fit in 64 bits (RASP's integers are i64)")),
                    None => n.as_f64().map(Atom::Float).ok_or_else(|| format!("item {i}: number {n} is out of range")),
                },
                other => Err(format!("item {i} is {other}: items must be numbers, strings or booleans")),
            })
            .collect();
    }
    Ok(s.chars().map(|c| Atom::Str(c.to_string())).collect())
}

/// The integer literals of a JSON text (numbers with no fraction or exponent), outside strings.
fn json_integers(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let (mut out, mut i, mut in_str) = (vec![], 0, false);
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            c if !in_str && (c == b'-' || c.is_ascii_digit()) => {
                let start = i;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                    i += 1;
                }
                let tok = &text[start..i];
                if !tok.contains(['.', 'e', 'E']) {
                    out.push(tok);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Convenience: evaluate a program text (no `load` from disk) and run `entry` on `input`.
pub fn run_source(text: &str, entry: Option<&str>, input: &[Atom]) -> Result<Value, String> {
    let (sources, r) = evaluate_program("<program>", None, text, &MemoryLoader::default());
    let session = r.map_err(|ds| {
        ds.iter()
            .map(|d| {
                let (l, c) = d.primary_span().map(|s| sources.line_col(s.file, s.start)).unwrap_or((0, 0));
                format!("{l}:{c}: {}", d.message)
            })
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let (_, node) = session.entry(entry)?;
    evaluate(&session.graph, node, input).map_err(|e| format!("{}: {}", e.label, e.message))
}

/// Where the first invalid UTF-8 byte of a program file is, for an error message: its line and
/// column (lines counted by `\n`, columns in characters of the valid text before it) and byte
/// offset.
pub fn utf8_place(bytes: &[u8], valid_up_to: usize) -> String {
    let before = std::str::from_utf8(&bytes[..valid_up_to.min(bytes.len())]).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("first bad byte at line {line}, column {col}, byte offset {valid_up_to}")
}

#[cfg(test)]
mod utf8_place_tests {
    #[test]
    fn counts_lines_and_characters_before_the_bad_byte() {
        let bytes = b"x = 1;\ny = \"\xc3\xa9\xff\";\n";
        let e = String::from_utf8(bytes.to_vec()).unwrap_err();
        assert_eq!(super::utf8_place(bytes, e.utf8_error().valid_up_to()), "first bad byte at line 2, column 7, byte offset 14");
    }
}

#[cfg(test)]
mod parse_input_tests {
    use super::{parse_input, Atom};

    #[test]
    fn integers_past_64_bits_are_refused_not_read_as_floats() {
        for big in ["[100000000000000000000, 1]", "[1, -9223372036854775809]", "[18446744073709551616]"] {
            let e = parse_input(big).unwrap_err();
            assert!(e.contains("does not fit in 64 bits"), "{big}: {e}");
        }
        // Floats, the i64 range and digits inside strings (escaped quotes included) are fine.
        let ok = parse_input(r#"[9223372036854775807, -9223372036854775808, 1e20, 2.5, "a\"12345678901234567890123", "x"]"#).unwrap();
        assert_eq!(ok[0], Atom::Int(i64::MAX));
        assert_eq!(ok[1], Atom::Int(i64::MIN));
        assert_eq!(ok[2], Atom::Float(1e20));
        assert_eq!(ok[4], Atom::Str("a\"12345678901234567890123".into()));
    }
}
