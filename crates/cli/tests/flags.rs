//! The command line's conventions: every argument has help text, `--json` prints exactly one
//! JSON object on stdout (compile and verify included), output paths are `-o/--out`.

use clap::CommandFactory;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("raspc-flags-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (vec![], vec![]);
    let code = raspc::run(std::iter::once("raspc").chain(args.iter().copied()).map(String::from), &mut out, &mut err, false);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

fn one_json_object(stdout: &str) -> serde_json::Value {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "--json prints one line, got:\n{stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert!(v.is_object(), "{v}");
    v
}

#[test]
fn every_argument_has_help_text() {
    fn walk(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in c.get_arguments() {
            let id = a.get_id().as_str();
            if id != "help" && id != "version" && a.get_help().is_none() && a.get_long_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for s in c.get_subcommands() {
            if s.get_about().is_none() && s.get_name() != "help" {
                missing.push(format!("{path} {} (no about)", s.get_name()));
            }
            walk(s, &format!("{path} {}", s.get_name()), missing);
        }
    }
    let mut missing = vec![];
    walk(&raspc::Cli::command(), "raspc", &mut missing);
    assert!(missing.is_empty(), "arguments without help text: {missing:?}");
}

#[test]
fn compile_and_verify_print_one_json_object() {
    let d = scratch("json");
    let prog = d.join("rev.rasp");
    std::fs::write(&prog, "prog = aggregate(select(indices, length - indices - 1, ==), tokens);\n").unwrap();
    let model = d.join("rev.safetensors");
    let (code, out, err) = run(&["compile", prog.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", "--out", model.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let j = one_json_object(&out);
    assert_eq!(j["output"], "prog");
    assert_eq!(j["path"], model.to_str().unwrap());
    assert!(j["params"].as_u64().unwrap() > 0, "{j}");
    assert!(model.is_file());

    let (code, out, err) = run(&["verify", prog.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", "--exhaustive", "--json"]);
    assert_eq!(code, 0, "{err}");
    let j = one_json_object(&out);
    assert_eq!(j["checked"], 14);
    assert_eq!(j["mismatches"], 0);
    assert_eq!(j["ok"], true);
    assert_eq!(j["attention"]["hard"]["mismatches"], 0);

    // A failing verdict still prints one object, and exits 1.
    let (code, out, _) = run(&["verify", prog.to_str().unwrap(), "--vocab", "[\"a\",\"b\",1]", "--max-len", "2", "--samples", "5", "--json", "--entry", "prog"]);
    if code != 0 {
        assert_eq!(code, 1);
        assert_eq!(one_json_object(&out)["ok"], false);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn plot_json_lists_the_files() {
    let d = scratch("plot");
    let prog = d.join("h.rasp");
    std::fs::write(&prog, "hist = selector_width(select(tokens, tokens, ==));\n").unwrap();
    let model = d.join("h.safetensors");
    assert_eq!(run(&["compile", prog.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", "-o", model.to_str().unwrap()]).0, 0);
    let (code, out, err) = run(&["plot", model.to_str().unwrap(), "-o", d.join("figs").to_str().unwrap(), "--json"]);
    if code == 1 && err.contains("font") {
        return; // no TrueType font on this machine (.ci/run installs one)
    }
    assert_eq!(code, 0, "{err}");
    let j = one_json_object(&out);
    assert!(!j["files"].as_array().unwrap().is_empty(), "{j}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn output_paths_are_dash_o_and_out() {
    let d = scratch("out");
    let prog = d.join("h.rasp");
    std::fs::write(&prog, "hist = selector_width(select(tokens, tokens, ==));\n").unwrap();
    for flag in ["-o", "--out", "--output"] {
        let model = d.join(format!("h{flag}.safetensors"));
        let (code, _, err) = run(&["compile", prog.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", flag, model.to_str().unwrap()]);
        assert_eq!(code, 0, "{flag}: {err}");
        assert!(model.is_file(), "{flag}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
