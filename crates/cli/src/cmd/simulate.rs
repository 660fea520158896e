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
    pub(crate) split: bool,
    pub(crate) json: bool,
}

/// Flags of `simulate` checked before anything is built or allocated.
pub(crate) fn check_sim_args(a: &SimArgs) -> Result<(), String> {
    check_sim_shape(a.shape)?;
    let l = limits()?;
    // A value that parses but is refused: exit status 1, as `--max-len 0` (it was a usage
    // error, 2: helper b21).
    if a.trials == 0 {
        return Err("--trials 0: must be at least 1 (with no trials nothing is checked)".into());
    }
    if a.trials as u64 > l.max_samples {
        return Err(format!("--trials {} is over the budget of {} (raise it with RASPC_LIMITS=samples=N)", a.trials, l.max_samples));
    }
    finite_flag("--tolerance", a.tolerance, a.tolerance >= 0.0, ">= 0")?;
    if a.split && a.mlp.mode() != raspc_compiler::real::MlpMode::Gated {
        return Err("--split needs gated MLPs (--mlp gated, the default): the split input's exact scores come from exact products, which ReLU MLPs interpolate (with them it would only add positions and heads)".into());
    }
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

pub(crate) fn simulate_cmd(a: &SimArgs, target: Option<(&Path, &Path)>, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    check_sim_args(a)?;
    // A device that cannot be opened is refused before U is built (and opened only once).
    let device = raspc_runtime::device(&a.device).map_err(|e| e.to_string())?;
    if let Some(o) = &a.output {
        check_output(o, a.force)?;
    }
    let (instances, shape, bounds, ignored) = match target {
        Some((t, x)) => {
            let target = simulate::load_target(t, x)?;
            let inst = target.instance;
            let s = inst.shape();
            check_sim_shape(s).map_err(|e| format!("--target `{}`: {e}", t.display()))?;
            // Bounds from the data, block by block (X, the A_t, the V_t): one bound for all
            // three took X's largest entry for A and V too, and certified 14,000 times less
            // than per-block bounds for a LayerNorm-scaled X (helper b6). --bound (A and V)
            // and --x-bound (X) may widen them.
            let [lx, la, lv] = inst.largest();
            let place = |what: &str, l: &simulate::Largest| {
                if s.h > 1 && what != "X" {
                    format!("{what}[{}][{}][{}]", l.head, l.row, l.col)
                } else {
                    format!("{what}[{}][{}]", l.row, l.col)
                }
            };
            let check = |flag: &str, given: Option<f64>, entries: &[(&str, &simulate::Largest)]| -> Result<Vec<f64>, String> {
                let mut out = vec![];
                for (what, l) in entries {
                    if let Some(b) = given
                        && l.value > b
                    {
                        return Err(format!(
                            "{flag} {} is smaller than the largest entry of {what}, {} at {} (entries are taken as the nearest f32 numbers, what U reads)",
                            crate::args::num(b),
                            crate::args::num(l.value),
                            place(what, l)
                        ));
                    }
                    out.push(given.unwrap_or(l.value.max(1e-6)));
                }
                Ok(out)
            };
            let bx = check("--x-bound", a.x_bound, &[("X", &lx)])?;
            let bav = check("--bound", a.bound, &[("A", &la), ("V", &lv)])?;
            (vec![inst], s, simulate::Bounds { x: bx[0], a: bav[0], v: bav[1] }, target.ignored)
        }
        None => {
            let b = a.bound.unwrap_or(1.0);
            let bx = a.x_bound.unwrap_or(b);
            let mut rng = verify::SplitMix(a.seed);
            let s = a.shape;
            ((0..a.trials).map(|_| simulate::Instance::random_with(s, bx, b, &mut rng)).collect::<Vec<_>>(), s, simulate::Bounds { x: bx, a: b, v: b }, vec![])
        }
    };
    if !ignored.is_empty() && !a.json {
        let _ = writeln!(
            err,
            "warning: `{}` also holds {}, which simulate does not use: T is softmax(X A Xᵀ) X V, with no biases, output map, scaling or mask (fold 1/√d_head into W_Q or A; docs/universal-simulator.md, \"A real head\")",
            target.map(|t| t.0.display().to_string()).unwrap_or_default(),
            ignored.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        );
    }
    // Compiling U takes seconds at n = d = 64: say what is happening (a terminal only).
    let spinner = indicatif::ProgressBar::new_spinner();
    if a.json {
        spinner.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let layout = if a.split { simulate::Layout::split_for(shape, bounds) } else { simulate::Layout::Plain };
    spinner.set_message(format!("compiling U ({} positions)", shape.seq_len_in(layout)));
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let built = simulate::build_layout(shape, a.mlp.mode(), bounds, a.pl_error, true, layout);
    spinner.finish_and_clear();
    let u = built.map_err(|e| {
        let advice = if target.is_some() {
            "the target's largest entries (the bounds above) take U's intermediate values past what it can approximate: T is unchanged by X/c, A·c², V·c, which can balance them, or try smaller entries"
        } else {
            simulate::advice(a.mlp.mode())
        };
        format!("{e}\n  = {advice}")
    })?;
    let sum = &u.compiled.summary;
    let report = u.compiled.report.clone().unwrap_or_default();
    if let Some(o) = &a.output {
        let bytes = u.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: {e}"))?;
        if let Some(note) = write_checkpoint(o, &bytes, a.force)? {
            let _ = writeln!(err, "{note}");
        }
    }
    let dtype = if a.f64 { candle_core::DType::F64 } else { candle_core::DType::F32 };
    let model = raspc_runtime::Model::with_dtype(u.compiled.checkpoint.clone(), &device, dtype).map_err(|e| format!("cannot load U on {}: {e}", a.device))?;
    let bar = indicatif::ProgressBar::new(instances.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{wide_bar} {pos}/{len} trials (U and T(X) for each; {eta})").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
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
            let got = model.forward_real(&[first.encode_in(layout)], raspc_runtime::Attention::Hard).map_err(|e| e.to_string())?;
            let rows: Vec<Vec<Vec<f64>>> = got.to_dtype(candle_core::DType::F64).and_then(|t| t.to_vec3()).map_err(|e| e.to_string())?;
            let at = |k: usize| rows.first().and_then(|r| r.get(k)).and_then(|r| r.first()).copied().unwrap_or(f64::NAN);
            Some((0..s.h).map(|t| (0..s.n).map(|i| (0..s.dv).map(|b| at(1 + t * s.n * s.dv + i * s.dv + b)).collect::<Vec<f64>>()).collect::<Vec<_>>()).collect::<Vec<_>>())
        }
        None => None,
    };
    // The bound says nothing when it reaches the largest |T(X)| of a trial.
    let vacuous = o.trials > 0 && o.bound >= o.min_max_t;
    // With --target: T(X) computed directly, laid out as `output`.
    let expected = match (target, instances.first()) {
        (Some(_), Some(first)) => {
            let t = simulate::reference(first).map_err(|e| e.to_string())?;
            Some(
                (0..s.h)
                    .map(|h| (0..s.n).map(|i| (0..s.dv).map(|b| t.get(h * s.n * s.dv + i * s.dv + b).copied().unwrap_or(f64::NAN)).collect::<Vec<f64>>()).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
            )
        }
        _ => None,
    };
    // The largest entry W = XV can reach under these bounds (T(X)'s rows are softmax-weighted
    // means of W's rows): what the bounds are also given relative to (docs/universal-simulator.md,
    // "f32 certificate").
    let max_w = s.d as f64 * bounds.x * bounds.v;
    if a.json {
        let mut j = serde_json::json!({
            "n": s.n, "d": s.d, "dv": s.dv, "heads": s.h, "mlp": format!("{:?}", a.mlp).to_lowercase(),
            "dtype": if a.f64 { "f64" } else { "f32" }, "device": a.device, "input_bound": bounds.x.max(bounds.a).max(bounds.v),
            "x_bound": bounds.x, "a_bound": bounds.a, "v_bound": bounds.v, "seq_len": s.seq_len_in(layout),
            "split_grid": match layout { simulate::Layout::Split { e } => Some(e), simulate::Layout::Plain => None },
            "layers": sum.layers, "attention_heads": sum.heads, "d_model": sum.d_model, "mlp_hidden": sum.mlp_hidden,
            "params": sum.params, "nonzero": sum.nonzero, "compile_ms": u.compile_ms,
            "certified_bound_f32": report.output_bound, "certified_bound_f64": report.output_bound_f64, "max_w": max_w,
            "trials": o.trials, "failures": o.failures, "bound_violations": o.bound_violations,
            "max_abs_err": o.max_abs_err, "max_rel_err": o.max_rel_err, "bound": o.bound, "tolerance": a.tolerance,
            "forward_ms": o.forward_ms, "forward_warm_ms": o.forward_warm_ms, "direct_ms": o.direct_ms,
        });
        if let Some(u_out) = &shown {
            j["output"] = serde_json::json!(u_out);
        }
        if let Some(t) = &expected {
            j["expected"] = serde_json::json!(t);
        }
        j["worst"] = serde_json::json!(o.worst);
        j["bound_vacuous"] = serde_json::json!(vacuous);
        j["ignored_tensors"] = serde_json::json!(ignored);
        j["checkpoint"] = serde_json::json!(a.output.as_ref().map(|p| p.display().to_string()));
        let _ = writeln!(out, "{j}");
    } else {
        // (Bounds as `num` prints them: 1e-320 is not 330 digits.)
        // An f32 bound (the entries' largest f32 magnitude) in the f32's shortest digits: 0.4,
        // not 0.4000000059604645 (review b24).
        let shortest = |x: f64| {
            let f = x as f32;
            let x = if f64::from(f) == x { f.to_string().parse::<f64>().unwrap_or(x) } else { x };
            crate::args::num(x)
        };
        let (xb, ab, vb) = (shortest(bounds.x), shortest(bounds.a), shortest(bounds.v));
        let ranges = if xb == ab && ab == vb {
            format!("inputs in [-{xb}, {xb}]")
        } else if ab == vb {
            format!("X in [-{xb}, {xb}], A and V in [-{ab}, {ab}]")
        } else {
            format!("X in [-{xb}, {xb}], A in [-{ab}, {ab}], V in [-{vb}, {vb}]")
        };
        let split = match layout {
            simulate::Layout::Split { e } => format!(", split input: X and A as multiples of 2^{e} plus remainders"),
            simulate::Layout::Plain => String::new(),
        };
        let _ = writeln!(
            out,
            "U for n={} d={} dv={} heads={} ({} MLPs, {ranges}{split}, {} positions): {sum}",
            s.n,
            s.d,
            s.dv,
            s.h,
            format!("{:?}", a.mlp).to_lowercase(),
            s.seq_len_in(layout)
        );
        let _ = writeln!(
            out,
            "compiled in {:.1} ms; certified |U - T| <= {:.3e} (f64 evaluation), {:.3e} (f32): {:.2e} and {:.2e} of d·max|X|·max|V| = {}, the largest |XV| these bounds allow",
            u.compile_ms,
            report.output_bound_f64,
            report.output_bound,
            report.output_bound_f64 / max_w,
            report.output_bound / max_w,
            crate::args::num(max_w)
        );
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
        if let Some(w) = &o.worst
            && (target.is_some() || o.failures > 0)
        {
            let trial = if target.is_some() { String::new() } else { format!("trial {}, ", w.trial) };
            let _ = writeln!(out, "largest error at {trial}head {}, row {}, column {}: U {:?}, T {:?}", w.head, w.row, w.col, w.u, w.t);
        }
        if o.bound_violations > 0 {
            let _ = writeln!(out, "FAILED: {} trials exceed the certified bound {:.3e}", o.bound_violations, o.bound);
        }
        if o.failures > o.bound_violations {
            let _ = writeln!(out, "FAILED: {} trials have a relative error (max|U - T| / max|T|) over --tolerance {:e}", o.failures - o.bound_violations, a.tolerance);
        }
        if vacuous {
            let _ = writeln!(
                out,
                "note: the certified bound {:.3e} is at least max|T(X)| ({:.3e}): it certifies nothing about these entries (smaller entries, or X/c, A·c², V·c, which leave T unchanged, tighten it; docs/universal-simulator.md)",
                o.bound, o.min_max_t
            );
        }
        // An f32 run whose bound is past 1e-3 of the largest |XV| (the plain layout from d = 27
        // on): the split input certifies far less (docs/universal-simulator.md, "Split scores").
        if !a.f64 && layout == simulate::Layout::Plain && report.output_bound > 1e-3 * max_w {
            let _ = writeln!(
                out,
                "note: the f32 bound is {:.2e} of d·max|X|·max|V|; `--split` (U on a split input, its scores' high part exact) certifies a much smaller one for twice the forward time",
                report.output_bound / max_w
            );
        }
        if let Some(p) = &a.output {
            let _ = writeln!(out, "wrote U's checkpoint -> {}", p.display());
        }
        let _ = writeln!(out, "simulate: {} trials, {} failures, max_abs_err {:.3e}, bound {:.3e}", o.trials, o.failures, o.max_abs_err, o.bound);
    }
    if o.failures > 0 {
        Err(Failure::Silent)
    } else {
        Ok(())
    }
}
