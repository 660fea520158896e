//! The paper's programs, checked against expected outputs worked out by hand and against
//! independent Rust implementations on many random inputs; matrix programs in the style of the
//! universal-simulator paper compiled and checked against the interpreter.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use raspc::verify::Inputs;
use raspc_lang::{Atom, Value};
use raspc_tests::*;
use serde_json::json;

fn seq(v: Value) -> Vec<Atom> {
    match v {
        Value::Seq(s) => s,
        Value::Sel(_) => panic!("expected an s-op"),
    }
}

fn random_string(rng: &mut StdRng, alphabet: &[char], len: usize) -> String {
    (0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect()
}

#[test]
fn reverse_by_hand_and_random() {
    let s = session("reverse.rasp");
    assert_eq!(json(&run(&s, "reverse", &chars("hello")).unwrap()), json!(["o", "l", "l", "e", "h"]));
    assert_eq!(json(&run(&s, "reverse", &ints(&[1, 2])).unwrap()), json!(["2", "1"]));
    let mut rng = StdRng::seed_from_u64(1);
    for _ in 0..200 {
        let n = rng.random_range(1..=16);
        let text = random_string(&mut rng, &['a', 'b', 'c', 'd'], n);
        let want: String = text.chars().rev().collect();
        assert_eq!(seq(run(&s, "reverse", &chars(&text)).unwrap()), chars(&want), "input {text}");
    }
}

fn histogram_oracle(text: &str) -> Vec<Atom> {
    text.chars().map(|c| Atom::Int(text.chars().filter(|&d| d == c).count() as i64)).collect()
}

#[test]
fn histogram_by_hand_and_random() {
    let s = session("histogram.rasp");
    assert_eq!(json(&run(&s, "hist", &chars("hello")).unwrap()), json!([1, 1, 2, 2, 1]));
    assert_eq!(json(&run(&s, "hist", &chars("aaa")).unwrap()), json!([3, 3, 3]));
    let b = session("histogram_bos.rasp");
    // "$" is the BOS marker; its own count is meaningless, the others are real counts.
    assert_eq!(json(&run(&b, "hist_bos", &chars("$hello")).unwrap()).as_array().unwrap()[1..], [json!(1), json!(1), json!(2), json!(2), json!(1)]);
    let mut rng = StdRng::seed_from_u64(2);
    for _ in 0..200 {
        let n = rng.random_range(1..=16);
        let text = random_string(&mut rng, &['a', 'b', 'c'], n);
        assert_eq!(seq(run(&s, "hist", &chars(&text)).unwrap()), histogram_oracle(&text), "input {text}");
        let with_bos = format!("${text}");
        let got = seq(run(&b, "hist_bos", &chars(&with_bos)).unwrap());
        assert_eq!(&got[1..], histogram_oracle(&text).as_slice(), "input {with_bos}");
    }
}

#[test]
fn sort_with_duplicates() {
    let s = session("sort.rasp");
    assert_eq!(json(&run(&s, "sorted", &chars("3121")).unwrap()), json!([1, 1, 2, 3]));
    assert_eq!(json(&run(&s, "sorted", &ints(&[5, -2, 5, 0])).unwrap()), json!([-2, 0, 5, 5]));
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..200 {
        let n = rng.random_range(1..=16);
        let mut v: Vec<i64> = (0..n).map(|_| rng.random_range(-3..=3)).collect();
        let got = seq(run(&s, "sorted", &ints(&v)).unwrap());
        v.sort();
        assert_eq!(got, ints(&v));
    }
}

fn sort_freq_oracle(text: &str) -> Vec<Atom> {
    let chars: Vec<char> = text.chars().collect();
    let count = |c: char| chars.iter().filter(|&&d| d == c).count();
    let mut idx: Vec<usize> = (0..chars.len()).collect();
    idx.sort_by_key(|&i| std::cmp::Reverse(count(chars[i]))); // stable
    idx.into_iter().map(|i| Atom::Str(chars[i].to_string())).collect()
}

#[test]
fn sort_most_frequent_first() {
    let s = session("sort_freq.rasp");
    assert_eq!(json(&run(&s, "sort_freq", &chars("abbcbc")).unwrap()), json!(["b", "b", "b", "c", "c", "a"]));
    let mut rng = StdRng::seed_from_u64(4);
    for _ in 0..200 {
        let n = rng.random_range(1..=16);
        let text = random_string(&mut rng, &['x', 'y', 'z', 'w'], n);
        assert_eq!(seq(run(&s, "sort_freq", &chars(&text)).unwrap()), sort_freq_oracle(&text), "input {text}");
    }
}

#[test]
fn double_histogram() {
    let s = session("double_hist.rasp");
    // counts a:2 b:1 c:1 d:1 -> a shares its count with 1 distinct token, b/c/d with 3.
    assert_eq!(json(&run(&s, "double_hist", &chars("aabcd")).unwrap()), json!([1, 1, 3, 3, 3]));
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..200 {
        let n = rng.random_range(1..=16);
        let text = random_string(&mut rng, &['a', 'b', 'c', 'd', 'e'], n);
        let cs: Vec<char> = text.chars().collect();
        let count = |c: char| cs.iter().filter(|&&d| d == c).count();
        let mut distinct = cs.clone();
        distinct.sort();
        distinct.dedup();
        let want: Vec<Atom> = cs.iter().map(|&c| Atom::Int(distinct.iter().filter(|&&d| count(d) == count(c)).count() as i64)).collect();
        assert_eq!(seq(run(&s, "double_hist", &chars(&text)).unwrap()), want, "input {text}");
    }
}

/// Independent Dyck-k checker with a stack.
fn dyck_oracle(text: &str, pairs: &[(char, char)]) -> Vec<Atom> {
    let mut stack = vec![];
    let mut failed = false;
    text.chars()
        .map(|c| {
            if !failed {
                if let Some(k) = pairs.iter().position(|p| p.0 == c) {
                    stack.push(k);
                } else if let Some(k) = pairs.iter().position(|p| p.1 == c)
                    && stack.pop() != Some(k)
                {
                    failed = true;
                }
            }
            Atom::Str(
                if failed {
                    "F"
                } else if stack.is_empty() {
                    "T"
                } else {
                    "P"
                }
                .to_string(),
            )
        })
        .collect()
}

#[test]
fn dyck1_prefix_check() {
    let s = session("dyck1.rasp");
    assert_eq!(json(&run(&s, "dyck1", &chars("(()))(")).unwrap()), json!(["P", "P", "P", "T", "F", "F"]));
    let mut rng = StdRng::seed_from_u64(6);
    for _ in 0..300 {
        let n = rng.random_range(1..=16);
        let text = random_string(&mut rng, &['(', ')'], n);
        assert_eq!(seq(run(&s, "dyck1", &chars(&text)).unwrap()), dyck_oracle(&text, &[('(', ')')]), "input {text}");
    }
}

#[test]
fn dyck2_prefix_check() {
    let s = session("dyck2.rasp");
    assert_eq!(json(&run(&s, "dyck2", &chars("({})(}")).unwrap()), json!(["P", "P", "P", "T", "P", "F"]));
    assert_eq!(json(&run(&s, "dyck2", &chars("({)}")).unwrap()), json!(["P", "P", "F", "F"]));
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..400 {
        let n = rng.random_range(1..=16);
        // Bias towards balanced-looking strings so all three outcomes occur.
        let text = random_string(&mut rng, &['(', ')', '{', '}', '(', '{'], n);
        assert_eq!(seq(run(&s, "dyck2", &chars(&text)).unwrap()), dyck_oracle(&text, &[('(', ')'), ('{', '}')]), "input {text}");
    }
}

#[test]
fn long_addition() {
    let s = session("long_addition.rasp");
    // 12 + 345 = 357, padded to the input length 6.
    assert_eq!(json(&run(&s, "sum_digits", &chars("12+345")).unwrap()), json!(["0", "0", "0", "3", "5", "7"]));
    // 999 + 1 = 1000 (carry chain).
    assert_eq!(json(&run(&s, "sum_digits", &chars("999+1")).unwrap()), json!(["0", "1", "0", "0", "0"]));
    let mut rng = StdRng::seed_from_u64(8);
    for _ in 0..300 {
        let (la, lb) = (rng.random_range(1..=7), rng.random_range(1..=7));
        let a: String = (0..la).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect();
        let b: String = (0..lb).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect();
        let input = format!("{a}+{b}");
        let sum = a.parse::<u64>().unwrap() + b.parse::<u64>().unwrap();
        let want = format!("{sum:0>width$}", width = input.len());
        assert_eq!(seq(run(&s, "sum_digits", &chars(&input)).unwrap()), chars(&want), "input {input}");
    }
}

// ---- Matrix programs in the style of the universal-simulator paper (tests/corpus/paper) ------
//
// Written as that paper writes them: the matrix side from the length (`length ^ 0.5`, or
// `length / 3` for three rows), positions mapped with `%` and `/`. Each compiles with --max-len
// equal to the matrix size, its model agrees with the interpreter (every length up to it), and
// the interpreter computes what a direct Rust computation of the matrix operation gives.

fn atoms_i64(v: &[Atom]) -> Vec<f64> {
    v.iter().map(|a| a.as_f64().expect("a number")).collect()
}

/// Compiles `case` at `max_len` and checks the model against the interpreter on `seqs`
/// (vocabulary indices; random ones of every length when None). Returns (checked, summary).
fn model_agrees(case: &Case, max_len: usize, seqs: Option<Vec<Vec<usize>>>) -> (usize, raspc_compiler::Summary) {
    let (s, root, vocab, compiled) = raspc_tests::compile(case, max_len, false).unwrap_or_else(|e| panic!("{}: {e}", case.file));
    let summary = compiled.summary.clone();
    let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
    let seqs = seqs.unwrap_or_else(|| raspc::verify::generate(&Inputs::Random { count: 300, seed: 9 }, vocab.len(), max_len).unwrap());
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    let r = raspc::verify::verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
    assert_eq!(r.failed, 0, "{}: {:#?}", case.file, r.examples);
    (r.checked, summary)
}

/// `count` random inputs of exactly `len` tokens over a vocabulary of `vocab` tokens.
fn full_size(count: usize, vocab: usize, len: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count).map(|_| (0..len).map(|_| rng.random_range(0..vocab)).collect()).collect()
}

const DIGITS: &str = "[-2,-1,0,1,2,3]";
/// For the programs whose products multiply the value sets.
const SMALL: &str = "[-2,-1,0,1]";

fn digits_of(seq: &[usize]) -> Vec<i64> {
    seq.iter().map(|&t| t as i64 - 2).collect()
}

#[test]
fn paper_style_square_transpose() {
    let case = Case { file: "paper/transpose_square.rasp", entry: None, vocab: DIGITS };
    let s = session(case.file);
    for side in 1..=3usize {
        for input in full_size(20, 6, side * side, side as u64) {
            let m = digits_of(&input);
            let want: Vec<f64> = (0..side * side).map(|p| m[(p % side) * side + p / side] as f64).collect();
            assert_eq!(atoms_i64(&seq_of(&s, "transposed", &ints(&m))), want, "{m:?}");
        }
    }
    let (checked, size) = model_agrees(&case, 9, None);
    assert_eq!(checked, 300);
    assert!(size.layers <= 3, "{size}");
}

fn seq_of(s: &raspc_lang::Session, entry: &str, input: &[Atom]) -> Vec<Atom> {
    seq(run(s, entry, input).unwrap())
}

#[test]
fn paper_style_rectangular_transpose_and_product() {
    // Three rows of length / 3 columns, at max-len 12 (3 x 4).
    let t = Case { file: "paper/transpose_rect.rasp", entry: None, vocab: DIGITS };
    let p = Case { file: "paper/product_rect.rasp", entry: None, vocab: DIGITS };
    let (st, sp) = (session(t.file), session(p.file));
    for cols in 1..=4usize {
        for input in full_size(20, 6, 3 * cols, cols as u64) {
            let a = digits_of(&input);
            let at = |i: usize, j: usize| a[i * cols + j];
            // The transpose: cols rows of three.
            let want: Vec<f64> = (0..3 * cols).map(|q| at(q % 3, q / 3) as f64).collect();
            assert_eq!(atoms_i64(&seq_of(&st, "transposed", &ints(&a))), want, "{a:?}");
            if cols >= 3 {
                // S · A, S the first three columns.
                let want: Vec<f64> = (0..3 * cols).map(|q| (0..3).map(|j| at(q / cols, j) * at(j, q % cols)).sum::<i64>() as f64).collect();
                assert_eq!(atoms_i64(&seq_of(&sp, "product", &ints(&a))), want, "{a:?}");
            }
        }
    }
    // The transpose: the length head, its staircase, the source position (one MLP over the
    // reachable (index, length) pairs), the gather: 3 layers.
    let (checked, size) = model_agrees(&t, 12, None);
    assert_eq!(checked, 300);
    assert!(size.layers <= 3, "{size}");
    let (checked, _) = model_agrees(&Case { vocab: SMALL, ..p }, 12, None);
    assert_eq!(checked, 300);
}

#[test]
fn paper_style_maxmin_sort() {
    let case = Case { file: "paper/maxmin_sort.rasp", entry: None, vocab: DIGITS };
    let s = session(case.file);
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..100 {
        let n = rng.random_range(1..=10);
        let x: Vec<i64> = (0..n).map(|_| rng.random_range(-2..=3)).collect();
        // Two rounds of odd-even transposition sort: pairs from 0, then from 1.
        let mut want = x.clone();
        for offset in [0, 1] {
            let mut i = offset;
            while i + 1 < want.len() {
                if want[i] > want[i + 1] {
                    want.swap(i, i + 1);
                }
                i += 2;
            }
        }
        assert_eq!(atoms_i64(&seq_of(&s, "round2", &ints(&x))), want.iter().map(|&v| v as f64).collect::<Vec<_>>(), "{x:?}");
    }
    let (checked, size) = model_agrees(&case, 10, None);
    assert_eq!(checked, 300);
    assert!(size.layers <= 3, "{size}");
}

/// det and inverse of a 3 x 3 integer matrix, as exact fractions (numerator, denominator).
fn inverse3(m: &[i64]) -> Option<Vec<(i64, i64)>> {
    let a = |i: usize, j: usize| m[(i % 3) * 3 + (j % 3)];
    let cof = |i: usize, j: usize| a(i + 1, j + 1) * a(i + 2, j + 2) - a(i + 1, j + 2) * a(i + 2, j + 1);
    let det: i64 = (0..3).map(|j| a(0, j) * cof(0, j)).sum();
    (det != 0).then(|| (0..9).map(|p| (cof(p % 3, p / 3), det)).collect())
}

#[test]
fn paper_style_inverse_by_cofactors() {
    let case = Case { file: "paper/inverse3.rasp", entry: None, vocab: SMALL };
    let s = session(case.file);
    let seqs = full_size(200, 4, 9, 3);
    let mut invertible = 0;
    for input in &seqs {
        let m = digits_of(input);
        match (inverse3(&m), run(&s, "inverse", &ints(&m))) {
            (Some(want), Ok(got)) => {
                invertible += 1;
                for (g, (num, den)) in atoms_i64(&seq(got)).iter().zip(want) {
                    assert!((g - num as f64 / den as f64).abs() < 1e-12, "{m:?}: {g} vs {num}/{den}");
                }
            }
            (None, Err(e)) => assert!(e.contains("division by zero"), "{e}"),
            (w, g) => panic!("{m:?}: direct {w:?}, interpreter {g:?}"),
        }
    }
    assert!(invertible > 50, "{invertible}");
    // The model agrees on every full-size input the interpreter accepts (singular ones are
    // outside the program's domain).
    let (checked, _) = model_agrees(&case, 9, Some(seqs));
    assert_eq!(checked, invertible);
}

/// Real-valued: softmax of each row, the rows from `length ^ 0.5` (square) or `length / 3`.
#[test]
fn paper_style_softmax_by_rows() {
    use raspc_compiler::real::{MlpMode, RealOptions};
    for (file, max_len) in [("paper/softmax_rows.rasp", 9), ("paper/softmax_rect.rasp", 12)] {
        let s = session(file);
        let (_, root) = s.entry(None).unwrap();
        let opts = raspc_compiler::Options {
            max_len,
            real: Some(RealOptions { lo: -1.0, hi: 1.0, blocks: vec![], mlp: MlpMode::Gated, pl_error: None, f32_inputs: false, grids: vec![] }),
            ..Default::default()
        };
        let compiled = raspc_compiler::compile(&s.graph, root, &opts, "test").unwrap_or_else(|d| panic!("{file}: {d:#?}"));
        // Full size: the interpreter is the softmax of each row.
        let mut rng = StdRng::seed_from_u64(11);
        let cols = if file.contains("rect") { max_len / 3 } else { 3 };
        for _ in 0..20 {
            let x: Vec<f64> = (0..max_len).map(|_| rng.random_range(-1.0..=1.0)).collect();
            let got = atoms_i64(&seq(run(&s, "softmax", &x.iter().map(|&v| Atom::Float(v)).collect::<Vec<_>>()).unwrap()));
            for (p, g) in got.iter().enumerate() {
                let r = p / cols;
                let total: f64 = (0..cols).map(|j| x[r * cols + j].exp()).sum();
                assert!((g - x[p].exp() / total).abs() < 1e-3, "{file} {x:?} at {p}: {g}");
            }
        }
        let model = raspc_runtime::Model::new(compiled.checkpoint.clone(), &raspc_runtime::device("cpu").unwrap()).unwrap();
        let r = raspc::verify::verify_real(&s.graph, root, &model, 200, 5, &mut |_| {}).unwrap();
        assert_eq!((r.checked, r.failed), (200, 0), "{file}: {r:?}");
        assert!(compiled.summary.layers <= 4, "{file}: {}", compiled.summary);
    }
}

/// A running maximum (minimum) written with a host loop over the ten digit values. Depth bound,
/// reasoned independently of the compiler: "seen v so far" needs one attention sublayer (all nine
/// heads are independent, so one layer); `> 0` of a mean is one MLP; the chain of nine ternaries
/// is a function of the nine booleans, one MLP. So at most 2 layers (attention, MLP, MLP).
#[test]
fn running_max_and_min_have_the_depth_they_need() {
    for (file, entry) in [("paper/running_max.rasp", "running_max"), ("paper/running_min.rasp", "running_min")] {
        let case = Case { file, entry: Some(entry), vocab: "[0,1,2,3,4,5,6,7,8,9]" };
        let s = session(file);
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..50 {
            let n = rng.random_range(1..=12);
            let x: Vec<i64> = (0..n).map(|_| rng.random_range(0..=9)).collect();
            let want: Vec<f64> = (0..n).map(|i| if file.contains("max") { *x[..=i].iter().max().unwrap() } else { *x[..=i].iter().min().unwrap() } as f64).collect();
            assert_eq!(atoms_i64(&seq_of(&s, entry, &ints(&x))), want, "{x:?}");
        }
        for max_len in [16, 64] {
            let (checked, size) = model_agrees(&case, max_len, None);
            assert_eq!(checked, 300);
            assert!(size.layers <= 2 && size.attn_sublayers == 1, "{file} at {max_len}: {size}");
        }
    }
}
