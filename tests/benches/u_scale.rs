//! `cargo bench -p raspc-tests --bench u_scale`: how the universal simulator U scales with the
//! shape of the simulated attention, up to n = d = dv = 64. Per shape (each in a child process,
//! so the peak memory is its own): positions, layers, heads, d_model, parameters, nonzeros,
//! checkpoint bytes, compile time, peak resident memory, the certified bounds (f64 and f32
//! evaluation; the f32 one also divided by d, the largest |W| = |XV| for entries in [-1, 1]), and,
//! for sequences of at most `RASPC_U_RUN_MAX` positions (default 20,000: every shape), the
//! measured errors of U against T(X) computed directly (candle, f64) in f64
//! and in f32 over `RASPC_U_TRIALS` (default 2) random T and X with entries in [-1, 1], with
//! the forward pass's time per instance (the first pass, which prepares the attention patterns
//! of the position heads, and a second one: `warm`), against T(X) computed directly (candle,
//! f64, the fastest of a few runs).
//! Fits the exponents of sizes and compile time in n and d, writes the table into
//! docs/benchmarks.md between the `u-scale-bench` markers and prints it.
//!
//! Shapes marked `s` (`n,d,dv,h,s`) build U on the split input (`raspc simulate --split`,
//! docs/universal-simulator.md "Split scores"); the fits use the plain layout's shapes only.
//!
//! `RASPC_U_SHAPES="n,d,dv,h[,s];..."` replaces the shape list (the table is then only printed).

use raspc::simulate::{build, build_layout, run_trials, Bounds, Instance, Layout, Shape};
use raspc::verify::SplitMix;
use raspc_compiler::real::MlpMode;

const SHAPES: &[&str] = &[
    "4,4,4,1",
    "8,8,8,1",
    "16,16,16,1",
    "32,32,32,1",
    "64,64,64,1",
    "16,8,8,1",
    "32,8,8,1",
    "64,8,8,1",
    "8,16,16,1",
    "8,32,32,1",
    "8,64,64,1",
    "32,32,32,4",
    "8,8,8,1,s",
    "16,16,16,1,s",
    "32,32,32,1,s",
    "64,64,64,1,s",
    "1,64,64,1,s",
    "32,32,32,4,s",
];

fn peak_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<f64>().ok()).map_or(f64::NAN, |k| k / 1024.0)
}

/// One shape, in this process: a JSON object on stdout.
fn one(spec: &str) {
    let split = spec.ends_with(",s");
    let v: Vec<usize> = spec.trim_end_matches(",s").split(',').map(|x| x.trim().parse().unwrap()).collect();
    let s = Shape { n: v[0], d: v[1], dv: v[2], h: v[3] };
    let run_max: usize = std::env::var("RASPC_U_RUN_MAX").ok().and_then(|x| x.parse().ok()).unwrap_or(24_000);
    let trials: usize = std::env::var("RASPC_U_TRIALS").ok().and_then(|x| x.parse().ok()).unwrap_or(2);
    let u = if split {
        let b = Bounds { x: 1.0, a: 1.0, v: 1.0 };
        build_layout(s, MlpMode::Gated, b, None, true, Layout::split_for(s, b)).unwrap()
    } else {
        build(s, MlpMode::Gated, 1.0, None).unwrap()
    };
    let positions = s.seq_len_in(u.layout);
    let compile_rss = peak_rss_mb();
    let bytes = u.compiled.checkpoint.to_bytes().map(|b| b.len()).unwrap_or(0);
    let sum = &u.compiled.summary;
    let rep = u.compiled.report.as_ref().unwrap();
    let mut row = serde_json::json!({
        "n": s.n, "d": s.d, "dv": s.dv, "h": s.h, "layout": if split { "split" } else { "plain" }, "positions": positions, "layers": sum.layers, "heads": sum.heads,
        "d_model": sum.d_model, "params": sum.params, "nonzero": sum.nonzero, "bytes": bytes, "compile_s": u.compile_ms / 1e3,
        "compile_rss_mb": compile_rss, "bound_f64": rep.output_bound_f64, "bound_f32": rep.output_bound,
    });
    if positions <= run_max && trials > 0 {
        let mut rng = SplitMix((s.n * 1000 + s.d * 100 + s.dv * 10 + s.h) as u64);
        let inst: Vec<Instance> = (0..trials).map(|_| Instance::random(s, 1.0, &mut rng)).collect();
        let scale = inst.iter().map(|i| raspc::simulate::reference(i).unwrap().iter().fold(0.0f64, |m, x| m.max(x.abs()))).fold(f64::INFINITY, f64::min);
        for (name, dt, f64_) in [("f64", raspc_runtime::DType::F64, true), ("f32", raspc_runtime::DType::F32, false)] {
            let model = raspc_runtime::Model::with_dtype(u.compiled.checkpoint.clone(), &raspc_runtime::Device::Cpu, dt).unwrap();
            let t0 = std::time::Instant::now();
            let o = run_trials(&model, &u, &inst, f64_, 1.0, &mut |_| {}).unwrap();
            row[format!("run_{name}_s")] = serde_json::json!(t0.elapsed().as_secs_f64() / trials as f64);
            row[format!("forward_{name}_ms")] = serde_json::json!(o.forward_ms);
            row[format!("warm_{name}_ms")] = serde_json::json!(o.forward_warm_ms);
            row["direct_ms"] = serde_json::json!(o.direct_ms);
            row[format!("rel_err_{name}")] = serde_json::json!(o.max_rel_err);
            row[format!("violations_{name}")] = serde_json::json!(o.bound_violations);
        }
        row["min_max_t"] = serde_json::json!(scale);
    }
    row["peak_rss_mb"] = serde_json::json!(peak_rss_mb());
    println!("{row}");
}

/// Least-squares slope of log y against log x.
fn slope(pts: &[(f64, f64)]) -> f64 {
    let pts: Vec<(f64, f64)> = pts.iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).map(|p| (p.0.ln(), p.1.ln())).collect();
    let m = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / m, sy / m);
    let num: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let den: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    num / den
}

fn main() {
    if let Ok(spec) = std::env::var("RASPC_U_ONE") {
        one(&spec);
        return;
    }
    let custom = std::env::var("RASPC_U_SHAPES").ok();
    let shapes: Vec<String> = match &custom {
        Some(s) => s.split(';').map(str::to_string).collect(),
        None => SHAPES.iter().map(|s| s.to_string()).collect(),
    };
    let exe = std::env::current_exe().unwrap();
    let mut rows: Vec<serde_json::Value> = vec![];
    let t_all = std::time::Instant::now();
    for spec in &shapes {
        let out = std::process::Command::new(&exe).env("RASPC_U_ONE", spec).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().last().and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
            Some(r) if out.status.success() => {
                eprintln!("{r}");
                rows.push(r);
            }
            _ => {
                eprintln!("shape {spec} failed: {}", String::from_utf8_lossy(&out.stderr));
                std::process::exit(1);
            }
        }
    }
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let e = |r: &serde_json::Value, k: &str| r.get(k).and_then(|x| x.as_f64()).map_or("-".to_string(), |x| format!("{x:.2e}"));
    let mut table = String::from(
        "| n | d | dv | h | layout | positions | layers | heads | d_model | params | nonzero | checkpoint MB | compile s | peak MB (compile) | bound f64 | bound f32 | bound f32 / d | min max\\|T\\| | rel err f64 | rel err f32 | forward ms f64 (per trial / one more) | forward ms f32 (one more) | direct T(X) ms | one more f64 / direct |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let ms = |r: &serde_json::Value, k: &str| r.get(k).and_then(|x| x.as_f64());
    let mut violations = 0.0;
    for r in &rows {
        violations += r.get("violations_f64").and_then(|x| x.as_f64()).unwrap_or(0.0) + r.get("violations_f32").and_then(|x| x.as_f64()).unwrap_or(0.0);
        table += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.2} | {:.0} | {:.2e} | {:.2e} | {:.2e} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["n"],
            r["d"],
            r["dv"],
            r["h"],
            r["layout"].as_str().unwrap_or("plain"),
            r["positions"],
            r["layers"],
            r["heads"],
            r["d_model"],
            r["params"],
            r["nonzero"],
            f(r, "bytes") / 1e6,
            f(r, "compile_s"),
            f(r, "compile_rss_mb"),
            f(r, "bound_f64"),
            f(r, "bound_f32"),
            // Relative to the largest |W| = |XV| (d for entries in [-1, 1]): what an
            // input-independent bound on a softmax-weighted mean of W's rows can be relative to.
            f(r, "bound_f32") / f(r, "d"),
            e(r, "min_max_t"),
            e(r, "rel_err_f64"),
            e(r, "rel_err_f32"),
            ms(r, "forward_f64_ms").map_or("-".to_string(), |a| format!("{a:.1} / {}", ms(r, "warm_f64_ms").map_or("-".to_string(), |b| format!("{b:.2}")))),
            ms(r, "warm_f32_ms").map_or("-".to_string(), |x| format!("{x:.2}")),
            ms(r, "direct_ms").map_or("-".to_string(), |x| format!("{x:.3}")),
            ms(r, "warm_f64_ms").zip(ms(r, "direct_ms")).map_or("-".to_string(), |(a, b)| format!("{:.2}x", a / b)),
        );
    }
    // Exponents: h = 1, dv = d; in n at d = 8, in d at n = 8, along n = d. Each cell: the
    // least-squares slope of log(quantity) over the series, and (in brackets) the slope between
    // its two largest shapes, which is closest to the asymptotic exponent.
    let series = |cond: &dyn Fn(&serde_json::Value) -> bool, x: &str, k: &str| -> String {
        let mut pts: Vec<(f64, f64)> =
            rows.iter().filter(|r| r["h"] == 1 && r["dv"] == r["d"] && r["layout"] == "plain" && cond(r)).map(|r| (f(r, x), f(r, k))).filter(|p| p.1.is_finite()).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if pts.len() < 2 {
            return "-".into();
        }
        format!("{:.2} ({:.2})", slope(&pts), slope(&pts[pts.len() - 2..]))
    };
    let mut fit = String::from("\nExponents (plain layout):\n\n| quantity | exponent in n (d = dv = 8) | exponent in d = dv (n = 8) | exponent along n = d = dv |\n|---|---|---|---|\n");
    for k in ["positions", "heads", "d_model", "params", "nonzero", "bytes", "compile_s", "compile_rss_mb", "warm_f64_ms"] {
        fit += &format!("| {k} | {} | {} | {} |\n", series(&|r| r["d"] == 8, "n", k), series(&|r| r["n"] == 8, "d", k), series(&|r| r["n"] == r["d"], "n", k));
    }
    fit += "| direct attention n²d + nd² (for comparison) | 1 to 2 (2 when n ≫ d) | 1 to 2 (2 when d ≫ n) | 3 |\n";
    table += &fit;
    table += &format!("\nWhole bench: {:.0} s.\n", t_all.elapsed().as_secs_f64());
    println!("{table}");
    if custom.is_none() {
        raspc_tests::write_doc_table("u-scale-bench", &table);
    }
    if violations > 0.0 {
        eprintln!("{violations} trials over the certified bound");
        std::process::exit(1);
    }
}
