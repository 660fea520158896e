//! Value-set inference is sound: on every input up to the maximum length (exhaustively), every
//! value the interpreter computes at every s-op node lies in that node's inferred set.

use raspc_compiler::infer::{infer, ValueSet};
use raspc_lang::{Atom, DiskLoader, NodeKind, Value};
use std::path::PathBuf;

fn check(file: &str, entry: &str, alphabet: &[&str], max_len: usize) -> usize {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, r) = raspc_lang::evaluate_program(file, Some(&path), &text, &DiskLoader);
    let s = r.unwrap();
    let (_, root) = s.entry(Some(entry)).unwrap();
    let vocab: Vec<Atom> = alphabet.iter().map(|t| Atom::Str(t.to_string())).collect();
    let sets = infer(&s.graph, root, &vocab, max_len);
    let mut checked = 0;
    for len in 1..=max_len {
        let total = alphabet.len().pow(len as u32);
        for code in 0..total {
            let mut c = code;
            let input: Vec<Atom> = (0..len)
                .map(|_| {
                    let a = vocab[c % vocab.len()].clone();
                    c /= vocab.len();
                    a
                })
                .collect();
            let Ok(vals) = raspc_lang::interp::evaluate_all(&s.graph, root, &input) else { continue };
            for (id, v) in vals {
                if let Value::Seq(seq) = v {
                    let set = &sets[&id];
                    for a in &seq {
                        assert!(set.contains(a), "{file}: node {} = {:?} missing {a} (input {input:?})", s.graph.node(id).label, s.graph.node(id).kind);
                        checked += 1;
                    }
                } else {
                    assert!(s.graph.node(id).kind.is_selector());
                }
            }
        }
    }
    checked
}

#[test]
fn inferred_sets_cover_every_interpreted_value() {
    let cases: &[(&str, &str, &[&str], usize)] = &[
        ("reverse.rasp", "reverse", &["a", "b", "c"], 5),
        ("histogram.rasp", "hist", &["a", "b", "c"], 5),
        ("histogram_bos.rasp", "hist_bos", &["$", "a", "b"], 5),
        ("sort.rasp", "sorted", &["1", "2", "3"], 5),
        ("sort_freq.rasp", "sort_freq", &["a", "b", "c"], 5),
        ("double_hist.rasp", "double_hist", &["a", "b", "c"], 5),
        ("dyck1.rasp", "dyck1", &["(", ")"], 6),
        ("dyck2.rasp", "dyck2", &["(", ")", "{", "}"], 5),
        ("long_addition.rasp", "sum_digits", &["1", "9", "+"], 5),
        ("library.rasp", "next_same", &["a", "b"], 5),
    ];
    for (file, entry, alphabet, n) in cases {
        let checked = check(file, entry, alphabet, *n);
        assert!(checked > 100, "{file}: only {checked} values checked");
    }
}

#[test]
fn sets_are_tight_for_simple_programs() {
    let src = "x = indices + 1; y = aggregate(select(indices, indices, <=), indicator(tokens == \"a\"));";
    let (_, r) = raspc_lang::evaluate_program("t", None, src, &raspc_lang::MemoryLoader::default());
    let s = r.unwrap();
    let vocab = vec![Atom::Str("a".into()), Atom::Str("b".into())];
    let (_, x) = s.entry(Some("x")).unwrap();
    let sets = infer(&s.graph, x, &vocab, 3);
    let ValueSet::Finite(xs) = &sets[&x] else { panic!("finite") };
    assert_eq!(xs.iter().cloned().collect::<Vec<_>>(), vec![Atom::Int(1), Atom::Int(2), Atom::Int(3)]);
    let (_, y) = s.entry(Some("y")).unwrap();
    let sets = infer(&s.graph, y, &vocab, 3);
    let ValueSet::Finite(ys) = &sets[&y] else { panic!("finite") };
    // default 0, single values 0 and 1, means of 2 or 3 indicator values: 0, 1/3, 1/2, 2/3, 1.
    for v in [0.0, 1.0 / 3.0, 0.5, 2.0 / 3.0, 1.0] {
        assert!(ys.contains(&Atom::Float(v)), "missing {v}");
    }
    assert!(ys.contains(&Atom::Int(0)) && ys.contains(&Atom::Int(1)));
    assert_eq!(ys.len(), 7, "{ys:?}");
    assert!(matches!(s.graph.node(y).kind, NodeKind::Aggregate { .. }));
}
