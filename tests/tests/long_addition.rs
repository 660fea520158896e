//! Long addition ("a+b" in decimal digits) compiles at max-len 16 and 32 and the model agrees
//! with the interpreter, hard and soft attention: the corpus program
//! (`tests/corpus/long_addition.rasp`) and one written in the reference interpreter's style
//! (`tests/corpus/idioms/long_add_ref.rasp`: the "+" found as a mean of positions, the first
//! number moved by `indices + length - add_index`, carries by the counting idiom).
//!
//! The position of the "+" is `aggregate(select(tokens, "+", ==), indices)`: on inputs with
//! several "+" it is a mean of positions, a fraction with a denominator up to max-len (more
//! values than can be enumerated at 32). The compiler compares it with integers through
//! `floor`, `ceil` and "is an integer" (docs/compiler.md, "Comparisons with means of
//! integers"), so the inputs here include many with several "+" (and none), as well as
//! well-formed additions of every length up to max-len. The interpreter is the oracle on all of
//! them; on the well-formed ones it is also checked against `u128` addition.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use raspc::verify::Inputs;
use raspc_lang::Atom;
use raspc_tests::{compile, run, session, Case};

const VOCAB: &str = "0123456789+";
/// Random inputs (any tokens, lengths uniform in 1..=max-len) per program and max-len.
const RANDOM: usize = 1000;
/// Well-formed additions, and full-length inputs with several "+", per program and max-len.
const CRAFTED: usize = 200;

const PROGRAMS: [Case; 2] = [Case { file: "long_addition.rasp", entry: Some("sum_digits"), vocab: VOCAB }, Case { file: "idioms/long_add_ref.rasp", entry: None, vocab: VOCAB }];

/// Vocabulary index of a character of `VOCAB`.
fn id(c: char) -> usize {
    VOCAB.find(c).expect("a vocabulary character")
}

fn digits(rng: &mut StdRng, n: usize) -> String {
    (0..n).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect()
}

/// `a+b` with `a` and `b` of random lengths filling `len` characters.
fn addition(rng: &mut StdRng, len: usize) -> String {
    let la = rng.random_range(1..=len - 2);
    let (a, b) = (digits(rng, la), digits(rng, len - 1 - la));
    format!("{a}+{b}")
}

/// `len` characters holding two to four "+" (so the mean of their positions is often not an
/// integer), or none.
fn malformed(rng: &mut StdRng, len: usize) -> String {
    let mut s: Vec<char> = digits(rng, len).chars().collect();
    let pluses = if rng.random_range(0..8) == 0 { 0 } else { rng.random_range(2..=4.min(len)) };
    for _ in 0..pluses {
        let p = rng.random_range(0..len);
        s[p] = '+';
    }
    s.into_iter().collect()
}

/// Mean of the positions of "+" in `s` is a fraction that is not an integer.
fn fractional_plus(s: &[usize]) -> bool {
    let pos: Vec<usize> = s.iter().enumerate().filter(|&(_, &t)| t == id('+')).map(|(i, _)| i).collect();
    pos.len() > 1 && pos.iter().sum::<usize>() % pos.len() != 0
}

/// The decimal digits of a + b right-aligned in `width` columns (the programs' output).
fn expected(text: &str, width: usize) -> Vec<u32> {
    let (a, b) = text.split_once('+').expect("an addition");
    let sum = a.parse::<u128>().expect("digits") + b.parse::<u128>().expect("digits");
    format!("{sum:0>width$}").chars().map(|c| c.to_digit(10).expect("a digit")).collect()
}

fn as_digits(v: &raspc_lang::Value) -> Vec<u32> {
    let raspc_lang::Value::Seq(atoms) = v else { panic!("a sequence: {v:?}") };
    atoms
        .iter()
        .map(|a| match a {
            Atom::Int(i) => *i as u32,
            Atom::Str(s) => s.parse().expect("a digit string"),
            other => panic!("not a digit: {other:?}"),
        })
        .collect()
}

fn check(case: &Case, max_len: usize) {
    let (s, root, vocab, compiled) = compile(case, max_len, false).unwrap_or_else(|e| panic!("{} at max-len {max_len}: {e}", case.file));
    let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
    let mut seqs = raspc::verify::generate(&Inputs::Random { count: RANDOM, seed: 12 + max_len as u64 }, vocab.len(), max_len).unwrap();
    let mut rng = StdRng::seed_from_u64(max_len as u64);
    let entry = case.entry.unwrap_or("long_add_ref");
    let program = session(case.file);
    for k in 0..CRAFTED {
        // Additions of every length 3..=max_len (most at full length), then malformed inputs.
        let len = if k % 2 == 0 { max_len } else { rng.random_range(3..=max_len) };
        let text = if k < CRAFTED / 2 { addition(&mut rng, len) } else { malformed(&mut rng, len) };
        if k < CRAFTED / 2 {
            // The interpreter itself adds correctly (an independent check of the program).
            let out = run(&program, entry, &raspc_tests::chars(&text)).unwrap();
            assert_eq!(as_digits(&out), expected(&text, text.len()), "{} on {text}", case.file);
        }
        seqs.push(text.chars().map(id).collect());
    }
    let fractional = seqs.iter().filter(|s| fractional_plus(s)).count();
    assert!(fractional >= 100, "only {fractional} inputs with a fractional mean position of `+`");
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    let r = raspc::verify::verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
    assert_eq!(r.failed, 0, "{} at max-len {max_len}: {:#?}", case.file, r.examples);
    assert_eq!(r.checked, seqs.len(), "{} at max-len {max_len}: {} inputs rejected", case.file, r.skipped);
}

#[test]
fn corpus_long_addition_16_and_32() {
    for n in [16, 32] {
        check(&PROGRAMS[0], n);
    }
}

#[test]
fn reference_style_long_addition_16_and_32() {
    for n in [16, 32] {
        check(&PROGRAMS[1], n);
    }
}

/// Every form of comparison the rewrite handles, between integers and a mean of positions (a
/// fraction with denominator up to 32: too many values to enumerate at max-len 32, so each of
/// these compiles only through `floor`/`ceil`/"is an integer"): in maps and selects, on either
/// side, with `u` added or subtracted, against constants and s-ops. Each model agrees with the
/// interpreter on random inputs (most hold several `a`, and some none), hard and soft.
#[test]
fn comparisons_with_a_mean_of_positions() {
    let cases = [
        "indices < u",
        "indices >= u",
        "u <= indices",
        "u > 4",
        "indices == u",
        "indices < length - u",
        "selector_width(select(indices, u + 1, <))",
        "selector_width(select(indices, u - 2, ==))",
        "selector_width(select(indices, u, !=))",
        "selector_width(select(indices + length - u, indices, <=))",
        "selector_width(select(3 - u, indices, >))",
        "aggregate(select(indices, u - 1, ==), tokens, \"none\")",
    ];
    let vocab = vec![Atom::Str("a".into()), Atom::Str("b".into())];
    let max_len = 32;
    for expr in cases {
        let src = format!("u = aggregate(select(tokens, \"a\", ==), indices);\nout = {expr};\n");
        let (_, r) = raspc_lang::evaluate_program("compare.rasp", None, &src, &raspc_lang::MemoryLoader::default());
        let s = r.unwrap();
        let (_, root) = s.entry(Some("out")).unwrap();
        let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len, ..Default::default() };
        let compiled = raspc_compiler::compile(&s.graph, root, &opts, "test").unwrap_or_else(|e| panic!("{expr}: {e:#?}"));
        let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
        let seqs = raspc::verify::generate(&Inputs::Random { count: 300, seed: 5 }, vocab.len(), max_len).unwrap();
        let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
        let rep = raspc::verify::verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
        assert_eq!((rep.checked, rep.failed), (seqs.len(), 0), "{expr}: {:#?}", rep.examples.first());
    }
}
