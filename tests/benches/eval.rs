//! Benchmark: evaluating every corpus program on a 16-token input with the reference
//! interpreter (graph already built), and the whole front end (parse + host evaluation).
//! Run: `cargo bench -p raspc-tests --bench eval`. Results are recorded in docs/benchmarks.md.

use criterion::{criterion_group, criterion_main, Criterion};
use raspc_lang::Atom;
use raspc_tests::{chars, ints, session};
use std::hint::black_box;

fn inputs() -> Vec<(&'static str, &'static str, Vec<Atom>)> {
    vec![
        ("reverse.rasp", "reverse", chars("abcdabcdabcdabcd")),
        ("histogram.rasp", "hist", chars("abcaabbccabcabca")),
        ("histogram_bos.rasp", "hist_bos", chars("$abcaabbccabcabc")),
        ("sort.rasp", "sorted", ints(&[5, 3, 9, 1, 1, 0, 7, 3, 2, 8, 6, 4, 4, 9, 0, 2])),
        ("sort_freq.rasp", "sort_freq", chars("abbcccddddaabbcc")),
        ("double_hist.rasp", "double_hist", chars("aabcdeeffgghhijk")),
        ("dyck1.rasp", "dyck1", chars("(()(()))()((()))")),
        ("dyck2.rasp", "dyck2", chars("({}){()}{{()}}()")),
        ("long_addition.rasp", "sum_digits", chars("1234567+98765432")),
        ("library.rasp", "next_same", chars("abcabcabcabcabca")),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("interpret_n16");
    for (file, entry, input) in inputs() {
        assert_eq!(input.len(), 16);
        let s = session(file);
        let (_, node) = s.entry(Some(entry)).unwrap();
        g.bench_function(entry, |b| b.iter(|| raspc_lang::evaluate(&s.graph, node, black_box(&input)).unwrap()));
    }
    g.finish();
    let mut g = c.benchmark_group("front_end");
    for (file, _, _) in inputs() {
        let path = raspc_tests::corpus(file);
        let text = std::fs::read_to_string(&path).unwrap();
        g.bench_function(file, |b| {
            b.iter(|| {
                let (_, r) = raspc_lang::evaluate_program(file, Some(&path), black_box(&text), &raspc_lang::DiskLoader);
                r.unwrap()
            })
        });
    }
    g.finish();
    // A chain of s-op maps written by a loop (`x = x + 1` N times): every node is named `x`, so
    // naming must not search the taken suffixes from the start (it did: quadratic), and the
    // compiler fuses the chain into one lookup without walking it again per node.
    let mut g = c.benchmark_group("chain");
    for n in [4000usize, 16000] {
        let text = format!("x = tokens_int;\nfor i in range({n}) {{ x = x + 1; }}\nprog = x;\n");
        g.bench_function(format!("front_end/{n}"), |b| {
            b.iter(|| {
                let (_, r) = raspc_lang::evaluate_program("chain.rasp", None, black_box(&text), &raspc_lang::MemoryLoader::default());
                r.unwrap()
            })
        });
        let (_, r) = raspc_lang::evaluate_program("chain.rasp", None, &text, &raspc_lang::MemoryLoader::default());
        let mut s = r.unwrap();
        let (_, root) = s.compile_entry(Some("prog")).unwrap();
        let opts = raspc_compiler::Options { vocab: vec![Atom::Int(1), Atom::Int(2)], max_len: 4, ..Default::default() };
        g.bench_function(format!("compile/{n}"), |b| b.iter(|| raspc_compiler::compile(&s.graph, root, black_box(&opts), "chain").unwrap()));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
