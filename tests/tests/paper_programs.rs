//! The paper's programs, checked against expected outputs worked out by hand and against
//! independent Rust implementations on many random inputs.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
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
