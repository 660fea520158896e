//! Value-set inference is sound: on every input up to the maximum length (exhaustively), every
//! value the interpreter computes at every s-op node lies in that node's inferred set.

use raspc_compiler::infer::{infer, ValueSet};
use raspc_lang::{Atom, DiskLoader, NodeKind, Value};
use std::path::PathBuf;

fn check(file: &str, entry: &str, alphabet: &[&str], max_len: usize) -> usize {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, r) = raspc_lang::evaluate_program(file, Some(&path), &text, &DiskLoader);
    check_session(file, &r.unwrap(), entry, alphabet, max_len)
}

fn check_session(file: &str, s: &raspc_lang::Session, entry: &str, alphabet: &[&str], max_len: usize) -> usize {
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
        ("idioms/long_add_ref.rasp", "long_add_ref", &["1", "9", "+"], 5),
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

/// Ranks among the keys that pass a test, compared with `==` and `and`-ed with the same test,
/// are proved to pick at most one key (`infer::filtered_rank_select`): their aggregates have no
/// means in their sets. Sound for every order (`<`, `<=`, `>`, `>=`) on every input, and not
/// claimed without the test in the outer selector.
#[test]
fn filtered_ranks_pick_one_key() {
    let src = "keep = tokens == \"a\"; test = select(keep, True, ==);
        r_lt = selector_width(select(indices, indices, <) and test);
        next_lt = aggregate(select(r_lt, r_lt + 1, ==) and test, indices);
        r_ge = selector_width(test and select(indices, indices, >=));
        next_ge = aggregate(test and select(r_ge, r_ge - 1, ==), indices);
        r_le = selector_width(select(indices, indices, <=) and test);
        untested = aggregate(select(r_le, r_le, ==), indices);
        out = next_lt + next_ge + untested;";
    let (_, r) = raspc_lang::evaluate_program("t", None, src, &raspc_lang::MemoryLoader::default());
    let s = r.unwrap();
    let checked = check_session("filtered ranks", &s, "out", &["a", "b"], 7);
    assert!(checked > 1000);
    let vocab = vec![Atom::Str("a".into()), Atom::Str("b".into())];
    let (_, out) = s.entry(Some("out")).unwrap();
    let sets = infer(&s.graph, out, &vocab, 7);
    let set = |name: &str| {
        let (_, id) = s.entry(Some(name)).unwrap();
        let ValueSet::Finite(v) = &sets[&id] else { panic!("{name}: finite") };
        v.iter().cloned().collect::<Vec<_>>()
    };
    for name in ["next_lt", "next_ge"] {
        assert_eq!(set(name), (0..7).map(Atom::Int).collect::<Vec<_>>(), "{name}");
    }
    // Without the test, keys that fail it share the rank of the last one that passed.
    assert!(set("untested").iter().any(|a| matches!(a, Atom::Float(x) if x.fract() != 0.0)));
}
