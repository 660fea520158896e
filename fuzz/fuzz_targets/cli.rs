//! The command line in-process: a subcommand and flags chosen from the real ones with fuzzed
//! values (numbers, JSON, special floats, raw strings), a fuzzed program written to a file, and
//! `raspc::run`. The exit code must be 0, 1 or 2 (101 is the "internal error" of a caught
//! panic) and nothing may panic.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

struct Files {
    dir: PathBuf,
    program: PathBuf,
    model: PathBuf,
}

const SEED_PROGRAM: &str = "prog = aggregate(select(indices, length - indices - 1, ==), tokens);\n";

fn files() -> &'static Files {
    static F: OnceLock<Files> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("raspc-fuzz-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let seed = dir.join("seed.rasp");
        std::fs::write(&seed, SEED_PROGRAM).expect("seed program");
        let model = dir.join("seed.safetensors");
        let args = ["raspc", "compile", seed.to_str().unwrap(), "--vocab", "abc", "--max-len", "4", "-o", model.to_str().unwrap()];
        let (mut out, mut err) = (vec![], vec![]);
        let code = raspc::run(args.map(String::from), &mut out, &mut err, false);
        assert_eq!(code, 0, "the seed model compiles: {}", String::from_utf8_lossy(&err));
        Files { program: dir.join("prog.rasp"), model, dir }
    })
}

fn number(u: &mut Unstructured) -> Result<String> {
    Ok(match u.int_in_range(0..=9)? {
        0 => u.int_in_range(0..=4u32)?.to_string(),
        1 => "0".into(),
        2 => "-1".into(),
        3 => "nan".into(),
        4 => "inf".into(),
        5 => "1e308".into(),
        6 => "18446744073709551616".into(),
        7 => u.arbitrary::<u64>()?.to_string(),
        8 => format!("{}", u.arbitrary::<f64>()?),
        _ => "0.5".into(),
    })
}

fn text(u: &mut Unstructured) -> Result<String> {
    Ok(match u.int_in_range(0..=8)? {
        0 => "ab".into(),
        1 => r#"["a","b"]"#.into(),
        2 => "[1,2,3]".into(),
        3 => "[".into(),
        4 => "".into(),
        5 => r#"[1.0, true, null, {"x": 1}]"#.into(),
        6 => "0,1,0.5".into(),
        7 => "-1,1".into(),
        _ => u.arbitrary::<String>()?.chars().take(40).collect(),
    })
}

fn model(u: &mut Unstructured, f: &Files) -> Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => f.program.display().to_string(),
        1 => "/dev/null".into(),
        2 => f.dir.display().to_string(),
        3 => "/nonexistent/x.safetensors".into(),
        _ => f.model.display().to_string(),
    })
}

fn out_path(u: &mut Unstructured, f: &Files) -> Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => f.program.display().to_string(),
        1 => f.model.display().to_string(),
        2 => f.dir.display().to_string(),
        3 => "/dev/null".into(),
        _ => f.dir.join("out.safetensors").display().to_string(),
    })
}

/// Flags of the compile target (`--vocab` or `--input-grid` or `--input-bounds`, `--max-len`, ...).
fn target(u: &mut Unstructured, args: &mut Vec<String>) -> Result<()> {
    match u.int_in_range(0..=3)? {
        0 => args.extend(["--input-grid".into(), text(u)?]),
        1 => args.extend(["--input-bounds".into(), text(u)?]),
        _ => args.extend(["--vocab".into(), text(u)?]),
    }
    args.extend(["--max-len".into(), if u.ratio(3, 4)? { u.int_in_range(1..=4u32)?.to_string() } else { number(u)? }]);
    for _ in 0..u.int_in_range(0..=3)? {
        match u.int_in_range(0..=5)? {
            0 => args.push("--causal".into()),
            1 => args.extend(["--entry".into(), text(u)?]),
            2 => args.extend(["--mlp".into(), ["relu", "gated", "x"][u.int_in_range(0..=2)?].into()]),
            3 => args.extend(["--pl-error".into(), number(u)?]),
            4 => args.extend(["--encoding".into(), format!("{}={}", text(u)?, ["numerical", "categorical", "x"][u.int_in_range(0..=2)?])]),
            _ => args.push(text(u)?),
        }
    }
    Ok(())
}

fn argv(u: &mut Unstructured, f: &Files) -> Result<Vec<String>> {
    let prog = f.program.display().to_string();
    let mut a: Vec<String> = vec!["raspc".into()];
    let small = |u: &mut Unstructured| -> Result<String> { if u.ratio(3, 4)? { Ok(u.int_in_range(0..=3u32)?.to_string()) } else { number(u) } };
    match u.int_in_range(0..=10)? {
        0 => {
            a.extend(["eval".into(), prog, "--input".into(), text(u)?]);
            if u.arbitrary()? {
                a.push("--json".into());
            }
        }
        1 => a.extend(["dump".into(), prog, "--stage".into(), ["graph", "x"][u.int_in_range(0..=1)?].into()]),
        2 => {
            a.extend(["compile".into(), prog]);
            target(u, &mut a)?;
            a.extend(["-o".into(), out_path(u, f)?]);
            if u.arbitrary()? {
                a.push("--force".into());
            }
            if u.arbitrary()? {
                a.push("--bounds".into());
            }
        }
        3 => {
            a.extend(["run".into(), model(u, f)?, "--input".into(), text(u)?]);
            a.extend(["--attention".into(), ["hard", "soft"][u.int_in_range(0..=1)?].into()]);
            if u.arbitrary()? {
                a.push("--json".into());
            }
        }
        4 => {
            a.extend(["verify".into(), prog]);
            target(u, &mut a)?;
            if u.arbitrary()? {
                a.push("--exhaustive".into());
            } else {
                a.extend(["--samples".into(), small(u)?]);
            }
            a.extend(["--seed".into(), number(u)?]);
            if u.arbitrary()? {
                a.push("--allow-rejected".into());
            }
        }
        5 => {
            a.extend(["inspect".into(), model(u, f)?]);
            if u.arbitrary()? {
                a.push("--json".into());
            }
            if u.arbitrary()? {
                a.extend(["--layer".into(), small(u)?]);
                if u.arbitrary()? {
                    a.extend(["--head".into(), small(u)?]);
                } else {
                    a.push("--mlp".into());
                }
            }
        }
        6 => {
            a.extend(["trace".into(), model(u, f)?, "--input".into(), text(u)?]);
            if u.arbitrary()? {
                a.extend(["--program".into(), prog]);
            }
            if u.arbitrary()? {
                a.push("--json".into());
            }
        }
        7 => {
            a.extend(["simulate".into(), "--n".into(), small(u)?, "--d".into(), small(u)?, "--dv".into(), small(u)?, "--heads".into(), small(u)?]);
            a.extend(["--trials".into(), small(u)?, "--bound".into(), number(u)?, "--tolerance".into(), number(u)?]);
            if u.arbitrary()? {
                a.extend(["--x-bound".into(), number(u)?]);
            }
            if u.arbitrary()? {
                a.extend(["--dtype".into(), "f32".into()]);
            }
        }
        8 => {
            a.extend(["probe".into(), "svflow".into(), model(u, f)?, "--sequences".into(), small(u)?, "--seeds".into(), small(u)?]);
            a.extend(["--levels".into(), format!("{},{}", number(u)?, number(u)?), "--attn-temp".into(), number(u)?, "--weight-noise".into(), number(u)?]);
            if u.arbitrary()? {
                a.extend(["--seq-len".into(), small(u)?]);
            }
            if u.arbitrary()? {
                a.extend(["--eval-window".into(), small(u)?]);
            }
            if u.arbitrary()? {
                a.extend(["--program".into(), prog]);
            }
        }
        9 => {
            for _ in 0..u.int_in_range(0..=4)? {
                a.push(text(u)?);
            }
        }
        _ => a.extend(["plot".into(), model(u, f)?, "--out".into(), f.dir.join("plots").display().to_string()]),
    }
    Ok(a)
}

fuzz_target!(|data: &[u8]| {
    let f = files();
    let mut u = Unstructured::new(data);
    let Ok(args) = argv(&mut u, f) else { return };
    let program = u.take_rest();
    if std::fs::write(&f.program, if program.is_empty() { SEED_PROGRAM.as_bytes() } else { program }).is_err() {
        return;
    }
    let (mut out, mut err) = (vec![], vec![]);
    let code = raspc::run(args.clone(), &mut out, &mut err, false);
    assert!(matches!(code, 0..=2), "exit code {code} for {args:?}:\n{}", String::from_utf8_lossy(&err));
});
