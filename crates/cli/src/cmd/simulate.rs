//! `raspc simulate`: the command around [`crate::simulate`].

use crate::args::*;
use crate::cmd::output::*;
use crate::{simulate, verify, Failure};
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) struct SimArgs {
    pub(crate) shape: simulate::Shape,
    pub(crate) mlp: MlpArg,
    pub(crate) trials: usize,
    pub(crate) seed: u64,
    pub(crate) bound: Option<f64>,
    pub(crate) x_bound: Option<f64>,
    pub(crate) tolerance: f64,
    pub(crate) f64: bool,
    pub(crate) pl_error: Option<f64>,
    pub(crate) output: Option<PathBuf>,
    pub(crate) force: bool,
    pub(crate) device: String,
    pub(crate) json: bool,
}

/// Flags of `simulate` checked before anything is built or allocated.
pub(crate) fn check_sim_args(a: &SimArgs) -> Result<(), String> {
    check_sim_shape(a.shape)?;
    let l = limits()?;
    if a.trials as u64 > l.max_samples {
        return Err(format!("--trials {} is over the budget of {} (raise it with RASPC_LIMITS=samples=N)", a.trials, l.max_samples));
    }
    finite_flag("--tolerance", a.tolerance, a.tolerance >= 0.0, ">= 0")?;
    for (flag, v) in [("--bound", a.bound), ("--x-bound", a.x_bound), ("--pl-error", a.pl_error)] {
        if let Some(x) = v {
            finite_flag(flag, x, x > 0.0, "> 0")?;
        }
    }
    Ok(())
}

/// U's shape within the `input_tokens` budget (flags, or the shape of a --target file).
pub(crate) fn check_sim_shape(s: simulate::Shape) -> Result<(), String> {
    let l = limits()?;
    for (flag, x) in [("--n", s.n), ("--d", s.d), ("--dv", s.dv), ("--heads", s.h)] {
        if x == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
        if x > l.max_input_tokens {
            return Err(format!("{flag} {x} is over the budget of {} (raise it with RASPC_LIMITS=input_tokens=N)", l.max_input_tokens));
        }
    }
    // U's sequence length (see simulate::Shape::seq_len), in u128: no overflow for any flags.
    let (n, d, dv, h) = (s.n as u128, s.d as u128, s.dv as u128, s.h as u128);
    let seq = (n * d + h * d * d + h * d * dv).max(h * n * n.max(d).max(dv));
    if seq > l.max_u_positions as u128 {
        return Err(format!(
            "U for --n {} --d {} --dv {} --heads {} needs sequences of {seq} positions, over the budget of {} (raise it with RASPC_LIMITS=u_positions=N)",
            s.n, s.d, s.dv, s.h, l.max_u_positions
        ));
    }
    Ok(())
}

/// A ratio with two significant digits or more (`0.52`, `5.6`, `42`, `368`).
fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

pub(crate) fn simulate_cmd(a: &SimArgs, target: Option<(&Path, &Path)>, out: &mut dyn Write) -> Result<(), Failure> {
    check_sim_args(a)?;
    // A device that cannot be opened is refused before U is built (and opened only once).
    let device = raspc_runtime::device(&a.device).map_err(|e| e.to_string())?;
    if let Some(o) = &a.output {
        check_output(o, a.force)?;
    }
    let (instances, shape, bound, x_bound) = match target {
        Some((t, x)) => {
            let inst = simulate::load_target(t, x)?;
            let s = inst.shape();
            check_sim_shape(s).map_err(|e| format!("--target `{}`: {e}", t.display()))?;
            let b = a.bound.unwrap_or_else(|| inst.magnitude().max(1e-6));
            if inst.magnitude() > b {
                return Err(format!(
                    "--bound {b} is smaller than the largest entry {} of the target and input (entries are taken as the nearest f32 numbers, what U reads)",
                    inst.magnitude()
                )
                .into());
            }
            (vec![inst], s, b, b)
        }
        None => {
            let b = a.bound.unwrap_or(1.0);
            let bx = a.x_bound.unwrap_or(b);
            let mut rng = verify::SplitMix(a.seed);
            let s = a.shape;
            ((0..a.trials).map(|_| simulate::Instance::random_with(s, bx, b, &mut rng)).collect::<Vec<_>>(), s, b, bx)
        }
    };
    let u = simulate::build_with(shape, a.mlp.mode(), bound, x_bound, a.pl_error, true)?;
    let sum = &u.compiled.summary;
    let report = u.compiled.report.clone().unwrap_or_default();
    if let Some(o) = &a.output {
        let bytes = u.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: {e}"))?;
        write_checkpoint(o, &bytes, a.force)?;
    }
    let dtype = if a.f64 { candle_core::DType::F64 } else { candle_core::DType::F32 };
    let model = raspc_runtime::Model::with_dtype(u.compiled.checkpoint.clone(), &device, dtype).map_err(|e| format!("cannot load U on {}: {e}", a.device))?;
    let bar = indicatif::ProgressBar::new(instances.len() as u64);
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let o = simulate::run_trials(&model, &u, &instances, a.f64, a.tolerance, &mut |k| bar.set_position(k as u64))?;
    bar.finish_and_clear();
    let s = shape;
    // With --target: U(<T, X>) per head, [h][n][dv], from U's readout (one row per output entry
    // after BOS; a missing one is NaN rather than a panic).
    let shown = match target {
        Some(_) => {
            let first = instances.first().ok_or_else(|| "no instance to show".to_string())?;
            let got = model.forward_real(&[first.encode()], raspc_runtime::Attention::Hard).map_err(|e| e.to_string())?;
            let rows: Vec<Vec<Vec<f64>>> = got.to_dtype(candle_core::DType::F64).and_then(|t| t.to_vec3()).map_err(|e| e.to_string())?;
            let at = |k: usize| rows.first().and_then(|r| r.get(k)).and_then(|r| r.first()).copied().unwrap_or(f64::NAN);
            Some((0..s.h).map(|t| (0..s.n).map(|i| (0..s.dv).map(|b| at(1 + t * s.n * s.dv + i * s.dv + b)).collect::<Vec<f64>>()).collect::<Vec<_>>()).collect::<Vec<_>>())
        }
        None => None,
    };
    if a.json {
        let mut j = serde_json::json!({
            "n": s.n, "d": s.d, "dv": s.dv, "heads": s.h, "mlp": format!("{:?}", a.mlp).to_lowercase(),
            "dtype": if a.f64 { "f64" } else { "f32" }, "device": a.device, "input_bound": bound, "seq_len": s.seq_len(),
            "layers": sum.layers, "attention_heads": sum.heads, "d_model": sum.d_model, "mlp_hidden": sum.mlp_hidden,
            "params": sum.params, "nonzero": sum.nonzero, "compile_ms": u.compile_ms,
            "certified_bound_f32": report.output_bound, "certified_bound_f64": report.output_bound_f64,
            "trials": o.trials, "failures": o.failures, "bound_violations": o.bound_violations,
            "max_abs_err": o.max_abs_err, "max_rel_err": o.max_rel_err, "bound": o.bound, "tolerance": a.tolerance,
            "forward_ms": o.forward_ms, "forward_warm_ms": o.forward_warm_ms, "direct_ms": o.direct_ms,
        });
        if let Some(u_out) = &shown {
            j["output"] = serde_json::json!(u_out);
        }
        let _ = writeln!(out, "{j}");
    } else {
        // (Bounds as `num` prints them: 1e-320 is not 330 digits.)
        let (bound, x_bound) = (crate::args::num(bound), crate::args::num(x_bound));
        let xb = if x_bound != bound { format!(", X in [-{x_bound}, {x_bound}]") } else { String::new() };
        let _ = writeln!(
            out,
            "U for n={} d={} dv={} heads={} ({} MLPs, inputs in [-{bound}, {bound}]{xb}, {} positions): {sum}",
            s.n,
            s.d,
            s.dv,
            s.h,
            format!("{:?}", a.mlp).to_lowercase(),
            s.seq_len()
        );
        let _ = writeln!(out, "compiled in {:.1} ms; certified |U - T| <= {:.3e} (f64 evaluation), {:.3e} (f32)", u.compile_ms, report.output_bound_f64, report.output_bound);
        if let Some(u_out) = &shown {
            // Shortest round-trip form (all the digits U computed; `--json` gives "output" too).
            for (t, head) in u_out.iter().enumerate() {
                let _ = writeln!(out, "head {t}: U(<T,X>) =");
                for row in head {
                    let r: Vec<String> = row.iter().map(|x| format!("{x:?}")).collect();
                    let _ = writeln!(out, "  [{}]", r.join(", "));
                }
            }
        }
        let _ = writeln!(out, "{} trials ({}): max_abs_err {:.3e}, max_rel_err {:.3e}", o.trials, if a.f64 { "f64" } else { "f32" }, o.max_abs_err, o.max_rel_err);
        if o.trials > 0 {
            let _ = writeln!(
                out,
                "U's forward pass: {:.2} ms per instance over the trials (the first pass also prepares what the runtime caches per length), {:.2} ms for one more ({}x T(X) computed directly: {:.3} ms)",
                o.forward_ms,
                o.forward_warm_ms,
                ratio(o.forward_warm_ms / o.direct_ms),
                o.direct_ms
            );
        }
        let _ = writeln!(out, "simulate: {} trials, {} failures, max_abs_err {:.3e}, bound {:.3e}", o.trials, o.failures, o.max_abs_err, o.bound);
    }
    if o.failures > 0 {
        Err(Failure::Silent)
    } else {
        Ok(())
    }
}
