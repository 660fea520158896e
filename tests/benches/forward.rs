//! `cargo bench -p raspc-tests --bench forward -- [--json] [--candle] [--program NAME]... [--max-len N]... [--batch B]...`
//!
//! Times raspc's forward pass (hard attention, CPU) on Tracr's library programs
//! (tests/corpus/tracr), by default at max-len 16 and 64 and batch 1 and 64, on random
//! full-length inputs (BOS + max-len tokens, seed 7). For each configuration: the fast backend
//! on the calling thread (`fast_1t_ms`), the fast backend as `raspc run`/`verify` use it
//! (`fast_ms`: threads when the batch pays for them), and with `--candle` the candle backend
//! (`candle_ms`, candle's own thread pool). Each figure is the median over 21 samples of the
//! wall-clock time per call, a sample timing as many calls as fill about 2 ms, after warm-up;
//! `fast_1t_cpu_ms` and `fast_cpu_ms` are the same for the CPU time of the process (every
//! thread; less sensitive to other processes on a shared machine).
//! `--json` prints one JSON object per line (read by tests/bench/tracr_compare.py); otherwise
//! a markdown table.

use raspc_runtime::{Attention, Backend, Model};
use raspc_tests::Case;
use std::time::Instant;

const PROGRAMS: &[(&str, &str)] = raspc_tests::TRACR_PROGRAMS;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time of the process so far (every thread, finished ones too), in ns.
fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Median milliseconds per call of `f`: wall-clock, and CPU time of the process.
fn time(mut f: impl FnMut()) -> (f64, f64) {
    let t = Instant::now();
    for _ in 0..3 {
        f();
    }
    let once = (t.elapsed().as_secs_f64() / 3.0).max(1e-7);
    let reps = ((2e-3 / once).ceil() as usize).clamp(1, 10_000);
    let (wall, cpu): (Vec<f64>, Vec<f64>) = (0..21)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_ns());
            for _ in 0..reps {
                f();
            }
            (t.elapsed().as_secs_f64() * 1e3 / reps as f64, (cpu_ns() - c) as f64 * 1e-6 / reps as f64)
        })
        .unzip();
    (median(wall), median(cpu))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let values = |flag: &str| -> Vec<String> { args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].clone()).collect() };
    let json = args.iter().any(|a| a == "--json");
    let candle = args.iter().any(|a| a == "--candle");
    let names = values("--program");
    let lens: Vec<usize> = values("--max-len").iter().map(|s| s.parse().expect("--max-len N")).collect();
    let lens = if lens.is_empty() { vec![16, 64] } else { lens };
    let batches: Vec<usize> = values("--batch").iter().map(|s| s.parse().expect("--batch B")).collect();
    let batches = if batches.is_empty() { vec![1, 64] } else { batches };
    let mut rows = vec![];
    for &(name, vocab) in PROGRAMS {
        if !names.is_empty() && !names.iter().any(|n| n == name) {
            continue;
        }
        let file: &'static str = Box::leak(format!("tracr/{name}.rasp").into_boxed_str());
        for &n in &lens {
            let t = Instant::now();
            let (_, _, atoms, compiled) = raspc_tests::compile(&Case { file, entry: None, vocab }, n, false).unwrap();
            let compile_ms = t.elapsed().as_secs_f64() * 1e3;
            let s = compiled.summary.clone();
            let mut model = Model::new(compiled.checkpoint, &raspc_runtime::Device::Cpu).unwrap();
            let ids = raspc_tests::full_length_ids(&model, &atoms, n, 64);
            for &b in &batches {
                let batch: Vec<Vec<u32>> = ids.iter().cycle().take(b).cloned().collect();
                model.set_backend(Backend::Fast).unwrap();
                model.set_threads(1);
                let (fast_1t, fast_1t_cpu) = time(|| {
                    std::hint::black_box(model.forward(&batch, Attention::Hard).unwrap());
                });
                model.set_threads(0);
                let (fast, fast_cpu) = time(|| {
                    std::hint::black_box(model.forward(&batch, Attention::Hard).unwrap());
                });
                let candle_ms = if candle {
                    model.set_backend(Backend::Candle).unwrap();
                    let c = time(|| {
                        std::hint::black_box(model.forward(&batch, Attention::Hard).unwrap());
                    });
                    Some(c.0)
                } else {
                    None
                };
                let row = serde_json::json!({
                    "program": name, "max_len": n, "batch": b, "compile_ms": compile_ms,
                    "layers": s.layers, "d_model": s.d_model, "params": s.params, "nonzero": s.nonzero,
                    "fast_1t_ms": fast_1t, "fast_1t_cpu_ms": fast_1t_cpu, "fast_ms": fast, "fast_cpu_ms": fast_cpu, "candle_ms": candle_ms,
                });
                if json {
                    println!("{row}");
                } else {
                    eprintln!("{row}");
                }
                rows.push(row);
            }
        }
    }
    if !json {
        println!("| program | max-len | batch | d_model | params | nonzero | fast 1 thread (ms) | fast 1 thread CPU (ms) | fast (ms) | candle (ms) |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for r in rows {
            let c = r["candle_ms"].as_f64().map_or("".into(), |c| format!("{c:.4}"));
            println!(
                "| {} | {} | {} | {} | {} | {} | {:.4} | {:.4} | {:.4} | {c} |",
                r["program"].as_str().unwrap_or(""),
                r["max_len"],
                r["batch"],
                r["d_model"],
                r["params"],
                r["nonzero"],
                r["fast_1t_ms"].as_f64().unwrap_or(f64::NAN),
                r["fast_1t_cpu_ms"].as_f64().unwrap_or(f64::NAN),
                r["fast_ms"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
}
