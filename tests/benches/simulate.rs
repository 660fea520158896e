//! `cargo bench -p raspc-tests --bench simulate`: the universal simulator U over the full sweep
//! (n, d, dv, h) in {2,4,8} x {2,4,8} x {2,4} x {1,2,4}, gated and ReLU MLPs, 100 random T and
//! X per shape (entries uniform in [-1, 1]), U run on candle in f64 and compared with T(X)
//! computed directly (candle, f64). Records U's size, compile time, measured errors and the
//! certified bound per shape, writes the table into docs/benchmarks.md between the
//! `simulate-bench` markers and prints it. Exits 1 if any shape has a failure.
//!
//! `RASPC_SWEEP=small` runs only n, d in {2, 4}, dv = 2, h in {1, 2}; `RASPC_SWEEP_MLP=gated`
//! (or `relu`) one MLP kind.

use raspc::simulate::{build, run_trials, Instance, Shape};
use raspc::verify::SplitMix;
use raspc_compiler::real::MlpMode;

fn main() {
    let small = std::env::var("RASPC_SWEEP").as_deref() == Ok("small");
    let only = std::env::var("RASPC_SWEEP_MLP").ok();
    let ns: &[usize] = if small { &[2, 4] } else { &[2, 4, 8] };
    let dvs: &[usize] = if small { &[2] } else { &[2, 4] };
    let hs: &[usize] = if small { &[1, 2] } else { &[1, 2, 4] };
    let modes: Vec<(MlpMode, &str)> = [(MlpMode::Gated, "gated"), (MlpMode::Relu, "relu")].into_iter().filter(|(_, n)| only.as_deref().is_none_or(|o| o == *n)).collect();
    let mut rows = vec![];
    let mut failed = 0;
    let t_all = std::time::Instant::now();
    for &(mode, name) in &modes {
        for &n in ns {
            for &d in ns {
                for &dv in dvs {
                    for &h in hs {
                        let s = Shape { n, d, dv, h };
                        let u = build(s, mode, 1.0, None).unwrap();
                        let mut rng = SplitMix((n * 1000 + d * 100 + dv * 10 + h) as u64);
                        let trials: Vec<Instance> = (0..100).map(|_| Instance::random(s, 1.0, &mut rng)).collect();
                        let model = raspc_runtime::Model::with_dtype(u.compiled.checkpoint.clone(), &raspc_runtime::Device::Cpu, raspc_runtime::DType::F64).unwrap();
                        let t0 = std::time::Instant::now();
                        let o = run_trials(&model, &u, &trials, true, 1e-4, &mut |_| {}).unwrap();
                        let run_s = t0.elapsed().as_secs_f64();
                        failed += o.failures;
                        let sum = &u.compiled.summary;
                        let row = format!(
                            "| {name} | {n} | {d} | {dv} | {h} | {} | {} | {} | {} | {} | {:.1} | {:.2e} | {:.2e} | {:.2e} | {} | {:.1} |",
                            sum.layers, sum.heads, sum.d_model, sum.params, sum.nonzero, u.compile_ms, o.max_abs_err, o.max_rel_err, o.bound, o.failures, run_s
                        );
                        eprintln!("{row}");
                        rows.push(row);
                    }
                }
            }
        }
    }
    let mut table = String::from(
        "| MLP | n | d | dv | h | layers | heads | d_model | params | nonzero | compile ms | max abs err | max rel err | certified bound (f64) | failures / 100 | run s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        table += r;
        table.push('\n');
    }
    table += &format!("\nWhole sweep: {:.0} s.\n", t_all.elapsed().as_secs_f64());
    println!("{table}");
    if !small && only.is_none() {
        raspc_tests::write_doc_table("simulate-bench", &table);
    }
    if failed > 0 {
        eprintln!("{failed} failing trials");
        std::process::exit(1);
    }
}
