//! `cargo bench -p raspc-tests --bench compile`: for Tracr's library programs at max-len 5, 10
//! and 16, the compile time (source text to checkpoint bytes), the model's size, and the hard
//! attention forward time at batch 1 and 64 (CPU, candle). Writes the table into
//! docs/benchmarks.md between the `compile-bench` markers and prints it.
//!
//! Times are medians of repeated runs (compile: 15 runs; forward: 30 runs after 3 warm-ups).

use raspc_tests::Case;
use std::time::Instant;

const PROGRAMS: &[(&str, &str)] = raspc_tests::TRACR_PROGRAMS;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn compile_from_source(path: &std::path::Path, vocab: &[raspc_lang::Atom], n: usize) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let (_, r) = raspc_lang::evaluate_program("p", Some(path), &text, &raspc_lang::DiskLoader);
    let s = r.unwrap();
    let (_, root) = s.entry(None).unwrap();
    let opts = raspc_compiler::Options { vocab: vocab.to_vec(), max_len: n, ..Default::default() };
    raspc_compiler::compile(&s.graph, root, &opts, "bench").unwrap().checkpoint.to_bytes().unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut rows = vec![];
    for &(name, vocab) in PROGRAMS {
        let file = format!("tracr/{name}.rasp");
        let path = raspc_tests::corpus(&file);
        let atoms = raspc_lang::parse_input(vocab).unwrap();
        for n in [5, 10, 16] {
            let times: Vec<f64> = (0..15)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(compile_from_source(&path, &atoms, n));
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            let compile_ms = median(times);
            let (_, _, _, compiled) = raspc_tests::compile(&Case { file: Box::leak(file.clone().into_boxed_str()), entry: None, vocab }, n, false).unwrap();
            let s = compiled.summary.clone();
            let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
            let ids = raspc_tests::full_length_ids(&model, &atoms, n, 64);
            let fwd = |batch: &[Vec<u32>]| {
                for _ in 0..3 {
                    model.forward(batch, raspc_runtime::Attention::Hard).unwrap();
                }
                median(
                    (0..30)
                        .map(|_| {
                            let t = Instant::now();
                            std::hint::black_box(model.forward(batch, raspc_runtime::Attention::Hard).unwrap());
                            t.elapsed().as_secs_f64() * 1e3
                        })
                        .collect(),
                )
            };
            let (f1, f64_) = (fwd(&ids[..1]), fwd(&ids));
            rows.push(format!(
                "| {name} | {n} | {compile_ms:.2} | {} ({}/{}) | {} | {} | {} | {f1:.3} | {f64_:.3} |",
                s.layers, s.attn_sublayers, s.mlp_sublayers, s.d_model, s.params, s.nonzero
            ));
        }
    }
    let table = format!(
        "| program | max-len | compile (ms) | layers (attn/MLP) | d_model | params | nonzero | forward b=1 (ms) | forward b=64 (ms) |\n|---|---|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("{table}");
    raspc_tests::write_doc_table("compile-bench", &table);
}
