//! The `raspc eval` command end to end (in-process): output formats, entries, inputs, errors.

use raspc_tests::cli;

#[test]
fn json_output_is_exactly_one_line() {
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "abc", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "{\"output\":[\"c\",\"b\",\"a\"]}\n");
    let (_, out, _) = cli(&["eval", "corpus/sort.rasp", "--input", "[3, 1, 2]", "--json"]);
    assert_eq!(out, "{\"output\":[1,2,3]}\n");
    let (_, out, _) = cli(&["eval", "corpus/constructs.rasp", "--entry", "ratio", "--input", "[1, 4]", "--json"]);
    assert_eq!(out, "{\"output\":[0.5,2.0]}\n");
    let (_, out, _) = cli(&["eval", "corpus/constructs.rasp", "--entry", "flags", "--input", "[2, 4]", "--json"]);
    assert_eq!(out, "{\"output\":[true,false]}\n");
    // A selector prints as a 0/1 matrix, rows are queries.
    let (_, out, _) = cli(&["eval", "corpus/constructs.rasp", "--entry", "sel_lt", "--input", "[5, 6]", "--json"]);
    assert_eq!(out, "{\"output\":[[0,0],[1,0]]}\n");
}

#[test]
fn text_output_is_python_like() {
    let (code, out, _) = cli(&["eval", "corpus/histogram.rasp", "--input", "hello"]);
    assert_eq!(code, 0);
    assert_eq!(out, "[1, 1, 2, 2, 1]\n");
    let (_, out, _) = cli(&["eval", "corpus/reverse.rasp", "--input", "ab"]);
    assert_eq!(out, "['b', 'a']\n");
}

#[test]
fn default_entry_is_prog_else_last_assigned() {
    // constructs.rasp binds `prog = summed`.
    let (_, out, _) = cli(&["eval", "corpus/constructs.rasp", "--input", "[1, 1]", "--json"]);
    assert_eq!(out, "{\"output\":[1,2]}\n");
    // reverse.rasp's last assignment is `reverse`.
    let (_, out, _) = cli(&["eval", "corpus/reverse.rasp", "--input", "xy", "--json"]);
    assert_eq!(out, "{\"output\":[\"y\",\"x\"]}\n");
}

#[test]
fn inputs_that_are_not_json_arrays_are_strings() {
    // "1,2" is three characters; "[1,2" starts like JSON but is not: an error, not characters.
    let (code, out, _) = cli(&["eval", "corpus/reverse.rasp", "--input", "1,2", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out, "{\"output\":[\"2\",\",\",\"1\"]}\n");
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "[1,2", "--json"]);
    assert_eq!(code, 1);
    assert!(err.contains("bad --input: it starts with `[` but is not valid JSON"), "{err}");
    assert!(out.contains("bad --input: it starts with `[` but is not valid JSON") && out.starts_with("{\"error\""), "{out}");
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "[1, null]"]);
    assert_eq!(code, 1);
    assert!(err.contains("bad --input: item 1 is null"), "{err}");
}

#[test]
fn errors_go_to_stderr_with_nonzero_exit() {
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--entry", "nope", "--input", "ab"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("entry `nope` is not defined"), "{err}");
    let (code, _, err) = cli(&["eval", "no/such/program.rasp", "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read `no/such/program.rasp`"), "{err}");
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp"]);
    assert_eq!(code, 2, "missing --input is a usage error: {err}");
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", ""]);
    assert_eq!(code, 1);
    assert!(err.contains("non-empty"), "{err}");
}

#[test]
fn non_utf8_program_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("raspc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.rasp");
    std::fs::write(&p, b"x = \xff\xfe;").unwrap();
    let (code, _, err) = cli(&["eval", p.to_str().unwrap(), "--input", "a"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not valid UTF-8 (first bad byte at line 1, column 5, byte offset 4)"), "{err}");
}

#[test]
fn dump_shows_the_entry_graph() {
    let (code, out, _) = cli(&["dump", "corpus/reverse.rasp", "--entry", "reverse"]);
    assert_eq!(code, 0);
    // Only what `reverse` depends on, labelled by the names the program gave.
    assert!(out.contains("opp_index = map `-`"), "{out}");
    assert!(out.contains("flip = select(keys=%1, queries="), "{out}");
    assert!(out.lines().last().unwrap().contains("reverse = aggregate("), "{out}");
    assert!(!out.contains("full_s"), "prelude nodes must not leak into the dump:\n{out}");
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("raspc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn compile_then_run_agrees_with_eval() {
    let out_path = temp("reverse.safetensors");
    let o = out_path.to_str().unwrap();
    let (code, out, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "8", "-o", o]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "one summary line: {out}");
    for word in ["layers", "heads", "d_model", "MLP hidden", "params", "nonzero"] {
        assert!(out.contains(word), "{out}");
    }
    for input in ["abc", "cab", "a", "abcabcab"] {
        let (_, want, _) = cli(&["eval", "corpus/reverse.rasp", "--input", input, "--json"]);
        for attention in ["hard", "soft"] {
            let (code, got, err) = cli(&["run", o, "--input", input, "--json", "--attention", attention]);
            assert_eq!(code, 0, "{err}");
            assert_eq!(got, want, "{input} ({attention})");
        }
    }
    let (_, text, _) = cli(&["run", o, "--input", "abc"]);
    assert_eq!(text, "['c', 'b', 'a']\n");
}

/// `eval --causal` gives what a model compiled with `--causal` outputs: the histogram on each
/// prefix, which differs from the histogram of the whole input.
#[test]
fn causal_eval_agrees_with_a_causal_model() {
    let out_path = temp("hist_causal.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "6", "--causal", "-o", o]).0, 0);
    for input in ["abab", "bba", "aaaaab"] {
        let (code, want, err) = cli(&["eval", "corpus/histogram.rasp", "--input", input, "--json", "--causal"]);
        assert_eq!(code, 0, "{err}");
        let (_, whole, _) = cli(&["eval", "corpus/histogram.rasp", "--input", input, "--json"]);
        assert_ne!(want, whole, "{input}: a prefix's histogram differs from the whole input's");
        let (code, got, err) = cli(&["run", o, "--input", input, "--json"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(got, want, "{input}");
    }
    // A failure on a shorter prefix names that prefix (the whole input evaluates); an empty
    // input is the interpreter's error, not an empty output.
    let p = temp("causal_div.rasp");
    std::fs::write(&p, "prog = 6 / (length - 2);\n").unwrap();
    let path = p.to_str().unwrap();
    assert_eq!(cli(&["eval", path, "--input", "abc"]).0, 0);
    let (code, _, err) = cli(&["eval", path, "--input", "abc", "--causal"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("failed on the first 2 tokens ('a', 'b')"), "{err}");
    let (code, out, err) = cli(&["eval", path, "--input", "", "--causal"]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("the input is empty"), "{err}");
}

#[test]
fn run_rejects_bad_inputs_clearly() {
    let out_path = temp("hist.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", o]).0, 0);
    let (code, _, err) = cli(&["run", o, "--input", "abz"]);
    assert_eq!(code, 1);
    assert!(err.contains("\"z\" at position 2 is not in the model's vocabulary"), "{err}");
    let (code, _, err) = cli(&["run", o, "--input", "abab"]);
    assert_eq!(code, 1);
    assert!(err.contains("4 tokens but the model was compiled for at most 3"), "{err}");
    let (code, _, err) = cli(&["run", o, "--input", "[]"]);
    assert_eq!(code, 1);
    assert!(err.contains("empty"), "{err}");
    // An unknown value of a flag is a usage error (exit 2), the values listed.
    let (code, _, err) = cli(&["run", o, "--input", "ab", "--device", "tpu"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'tpu'") && err.contains("[possible values: cpu, cuda]"), "{err}");
}

#[test]
fn plain_text_input_to_a_model_of_longer_tokens_is_told_to_use_json() {
    let out_path = temp("sort_numbers.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/sort.rasp", "--vocab", "[10, 2, 3]", "--max-len", "4", "-o", o]).0, 0);
    // `1023` is four one-character tokens, not the tokens 10, 2 and 3.
    let (code, _, err) = cli(&["run", o, "--input", "1023"]);
    assert_eq!(code, 1);
    assert!(err.contains("\"1\" at position 0") && err.contains("read one character per token") && err.contains("--input '[10, 2]'"), "{err}");
    let (code, _, err) = cli(&["trace", o, "--input", "10 2 3"]);
    assert_eq!(code, 1);
    assert!(err.contains("6 tokens") && err.contains("read one character per token"), "{err}");
    // The JSON array runs; a model of one-character tokens gets no such hint.
    let (code, out, err) = cli(&["run", o, "--input", "[10, 3, 2]"]);
    assert_eq!((code, out.as_str()), (0, "[2, 3, 10]\n"), "{err}");
    // The interpreter fails as the reference does (`int(",")`), and says why.
    let prog = temp("ints_plus_one.rasp");
    std::fs::write(&prog, "y = tokens_int + 1;\n").unwrap();
    let (code, _, err) = cli(&["eval", prog.to_str().unwrap(), "--input", "1, 2"]);
    assert_eq!(code, 1);
    assert!(err.contains("position 1") && err.contains("4 tokens here"), "{err}");
    let (code, out, err) = cli(&["eval", prog.to_str().unwrap(), "--input", "[1, 2]"]);
    assert_eq!((code, out.as_str()), (0, "[2, 3]\n"), "{err}");
    let hist = temp("hist_chars.safetensors");
    let h = hist.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", h]).0, 0);
    let (code, _, err) = cli(&["run", h, "--input", "abz"]);
    assert_eq!(code, 1);
    assert!(!err.contains("one character per token"), "{err}");
}

/// Plain `--input` text for a model whose tokens are numbers: the hint says they are numbers
/// (helper b10: `[1, 2, 3]` were called "not all single characters").
#[test]
fn text_input_for_number_tokens_is_told_why() {
    let m = temp("ints.safetensors");
    let src = temp("ints.rasp");
    std::fs::write(&src, "y = tokens_int;\n").unwrap();
    assert_eq!(cli(&["compile", src.to_str().unwrap(), "--vocab", "[1,2,3]", "--max-len", "4", "-o", m.to_str().unwrap(), "--force"]).0, 0);
    let (code, _, err) = cli(&["run", m.to_str().unwrap(), "--input", "123"]);
    assert_eq!(code, 1);
    assert!(err.contains("this model's tokens include numbers") && err.contains("--input '[1, 2]'"), "{err}");
}

#[test]
fn verify_checks_a_small_domain_once_instead_of_sampling_it() {
    // 2 + 4 + 8 inputs: asking for 1000 random ones checks each of the 14 once.
    let (code, out, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3"]);
    assert_eq!(code, 0, "{err}");
    // (Nothing was asked: the default is named as such; helper b10.)
    assert!(out.contains("every input checked: 14 (2 tokens, lengths 1 to 3), fewer than the default 1000 samples"), "{out}");
    assert!(out.ends_with("verified: 14 inputs, 0 mismatches\n"), "{out}");
    let (code, out, _) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "--samples", "500"]);
    assert_eq!(code, 0);
    assert!(out.contains("fewer than the 500 samples asked"), "{out}");
    let (code, out, _) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "--samples", "14"]);
    assert_eq!(code, 0);
    // Exactly as many as asked: every one, and said (helper b26: the README promised the line).
    assert!(out.contains("every input checked: 14 (2 tokens, lengths 1 to 3), as many as the 14 samples asked") && out.ends_with("verified: 14 inputs, 0 mismatches\n"), "{out}");
    // More inputs than samples: random ones, as many as asked.
    let (code, out, _) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "--samples", "10"]);
    assert_eq!(code, 0);
    assert!(out.ends_with("verified: 10 inputs, 0 mismatches\n") && !out.contains("every input checked"), "{out}");
    // As many random inputs as asked from a larger domain are not every input.
    let (code, out, _) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "4", "--samples", "14"]);
    assert_eq!(code, 0);
    assert!(out.ends_with("verified: 14 inputs, 0 mismatches\n") && !out.contains("every input checked"), "{out}");
}

#[test]
fn inputs_and_vocabularies_may_start_with_a_hyphen() {
    // Balanced-ternary digits: clap would take `-0+` for a flag.
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "-+0"]);
    assert_eq!((code, out.as_str()), (0, "['0', '+', '-']\n"), "{err}");
    let model = temp("ternary.safetensors");
    let m = model.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "-0+", "--max-len", "4", "-o", m]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&["run", m, "--input", "--0+"]);
    assert_eq!((code, out.as_str()), (0, "['+', '0', '-', '-']\n"), "{err}");
    // A flag where the value should be is not silently taken as the input.
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "--json"]);
    assert_eq!(code, 1);
    assert!(err.contains("--input needs a value, and got `--json`, which is a flag"), "{err}");
}

#[test]
fn compile_never_overwrites_what_is_not_a_checkpoint() {
    let victim = temp("notes.txt");
    std::fs::write(&victim, "precious").unwrap();
    let v = victim.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", v]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a raspc checkpoint (nor any safetensors file)") && err.contains("refusing to overwrite it"), "{err}");
    assert!(!err.contains("RASPC_LIMITS"), "a text file is not a size problem: {err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // --force does not replace what is not a raspc checkpoint either.
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", v, "--force"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A checkpoint is replaced.
    let ck = temp("replaced.safetensors");
    let c = ck.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", c]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "abc", "--max-len", "3", "-o", c]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", "corpus/histogram.rasp"]);
    assert_eq!(code, 1);
    assert!(err.contains("is the program itself"), "{err}");
}

/// A raspc checkpoint cut short (a full disk, an interrupted copy) is the damage `--force` is
/// for: with its data cut, or its header too, it is named as a damaged raspc checkpoint and
/// replaced with --force (it was "not a raspc checkpoint", --force refused). A replaced file keeps
/// its permissions (a private 0600 checkpoint became 0644). Helper t.
#[test]
fn a_cut_checkpoint_is_replaced_with_force_and_a_replaced_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let ck = temp("cut.safetensors");
    let c = ck.to_str().unwrap();
    let args = ["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", c];
    assert_eq!(cli(&args).0, 0);
    let whole = std::fs::read(&ck).unwrap();
    let header = 8 + u64::from_le_bytes(whole[..8].try_into().unwrap()) as usize;
    for keep in [header + 100, header / 2] {
        std::fs::write(&ck, &whole[..keep]).unwrap();
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{err}");
        assert!((err.contains("damaged raspc checkpoint") || err.contains("raspc checkpoint this raspc cannot read")) && err.contains("--force replaces it"), "{keep}: {err}");
        assert_eq!(std::fs::read(&ck).unwrap().len(), keep, "left as it was");
        let (code, _, err) = cli(&[&args[..], &["--force"]].concat());
        assert_eq!(code, 0, "{keep}: {err}");
        assert_eq!(std::fs::read(&ck).unwrap(), whole);
    }
    // A text file that merely quotes the format is no checkpoint, cut or whole (helper rv).
    let note = temp("quotes.safetensors");
    std::fs::write(&note, "{\"__metadata__\": the header has \"format\":\"raspc\" in it}").unwrap();
    let n = note.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", n, "--force"]);
    assert_eq!(code, 1, "{err}");
    assert!(std::fs::read_to_string(&note).unwrap().starts_with("{\"__metadata__\""));
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(cli(&args).0, 0);
    assert_eq!(std::fs::metadata(&ck).unwrap().permissions().mode() & 0o777, 0o600);
    // `simulate --input` without `--target` was dropped (random X simulated, exit 0).
    let (code, _, err) = cli(&["simulate", "--trials", "1", "--input", "[[1]]"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--input is X for --target"), "{err}");
}

/// A file nobody may write is not replaced, whatever it holds (helper dt26: a 0444 checkpoint,
/// ONNX file or figure was renamed over); and a program's line ends do not change its
/// checkpoint (CRLF gave other bytes: another `program_hash`).
#[test]
fn read_only_outputs_stay_and_line_ends_do_not_change_a_checkpoint() {
    use std::os::unix::fs::PermissionsExt;
    let ck = temp("read-only.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", c]).0, 0);
    let before = std::fs::read(&ck).unwrap();
    std::fs::set_permissions(&ck, std::fs::Permissions::from_mode(0o444)).unwrap();
    for force in [false, true] {
        let mut args = vec!["compile", "corpus/histogram.rasp", "--vocab", "abc", "--max-len", "4", "-o", c];
        if force {
            args.push("--force");
        }
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("read-only") && err.contains(c), "{err}");
        assert_eq!(std::fs::read(&ck).unwrap(), before, "left as it was");
    }
    let onnx = temp("read-only.onnx");
    let o = onnx.to_str().unwrap();
    assert_eq!(cli(&["export", c, "--to", "onnx", "-o", o]).0, 0);
    let exported = std::fs::read(&onnx).unwrap();
    std::fs::set_permissions(&onnx, std::fs::Permissions::from_mode(0o444)).unwrap();
    let (code, _, err) = cli(&["export", c, "--to", "onnx", "-o", o]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("read-only"), "{err}");
    assert_eq!(std::fs::read(&onnx).unwrap(), exported);
    // LF, CRLF, lone CR and a byte-order mark: one checkpoint.
    let text = std::fs::read_to_string("corpus/histogram.rasp").unwrap().replace("\r\n", "\n");
    let mut files = vec![];
    for (k, variant) in [text.clone(), text.replace('\n', "\r\n"), text.replace('\n', "\r"), format!("\u{feff}{text}")].iter().enumerate() {
        let p = temp(&format!("line-ends-{k}.rasp"));
        std::fs::write(&p, variant).unwrap();
        let out = temp(&format!("line-ends-{k}.safetensors"));
        let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        files.push(std::fs::read(&out).unwrap());
    }
    assert!(files.iter().all(|f| *f == files[0]), "line ends changed the checkpoint");
}

/// A figure's temporary file left by a `plot` killed outright (its process gone, an hour idle)
/// is removed by the next plot into that folder; a fresh one is kept (helper dt26: they stayed).
#[test]
fn a_killed_plots_temporary_figure_is_removed_later() {
    let dir = temp("plot-stale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = dir.join("h.safetensors");
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", ck.to_str().unwrap()]).0, 0);
    let figs = dir.join("figs");
    assert_eq!(cli(&["plot", ck.to_str().unwrap(), "-o", figs.to_str().unwrap()]).0, 0);
    let stale = figs.join(".overview.png.4294967.raspc-tmp.png");
    let fresh = figs.join(".overview.png.4294966.raspc-tmp.png");
    std::fs::write(&stale, "half a figure").unwrap();
    std::fs::write(&fresh, "another machine's").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options().write(true).open(&stale).and_then(|h| h.set_modified(old)).unwrap();
    let (code, _, err) = cli(&["plot", ck.to_str().unwrap(), "-o", figs.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    if std::path::Path::new("/proc/self").exists() {
        assert!(!stale.exists() && fresh.exists(), "a stale figure kept, or a fresh one removed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn verify_ends_with_one_summary_line() {
    let (code, out, err) = cli(&["verify", "corpus/sort.rasp", "--entry", "sorted", "--vocab", "[1,2,3]", "--max-len", "4", "--exhaustive"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().last().unwrap(), "verified: 120 inputs, 0 mismatches");
    let (code, out, _) = cli(&["verify", "corpus/dyck1.rasp", "--vocab", "()", "--max-len", "12", "--samples", "50", "--seed", "3", "--attention", "soft"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().last().unwrap(), "verified: 50 inputs, 0 mismatches");
    // Causal: the prefix semantics, and refusals name the place.
    let (code, out, err) = cli(&["verify", "corpus/tracr/frac_prevs.rasp", "--vocab", "xyz", "--max-len", "6", "--exhaustive", "--causal"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("mismatches\n"));
    let (code, _, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "70000", "--samples", "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("--max-len 70000 is too large"), "{err}");
    let (code, _, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "abcdefghij", "--max-len", "9", "--exhaustive"]);
    assert_eq!(code, 1);
    assert!(err.contains("use --samples"), "{err}");
}

#[test]
fn a_wrong_model_is_reported_as_mismatches() {
    // Verification must be able to fail: a checkpoint whose readout maps values to the wrong
    // outputs (two output columns swapped) disagrees.
    let (s, root, vocab, compiled) = raspc_tests::compile(&raspc_tests::Case { file: "reverse.rasp", entry: None, vocab: "abc" }, 4, false).unwrap();
    let mut ck = compiled.checkpoint;
    let k = ck.config.readout_dims;
    let r = ck.tensors.get_mut("readout").unwrap();
    for row in r.data.chunks_mut(k) {
        row.swap(0, 1);
    }
    let model = raspc_runtime::Model::new(ck, &raspc_runtime::device("cpu").unwrap()).unwrap();
    let seqs = raspc::verify::generate(&raspc::verify::Inputs::Exhaustive, vocab.len(), 4).unwrap();
    let rep = raspc::verify::verify(&s.graph, root, &model, &vocab, &seqs, &[raspc_runtime::Attention::Hard], &mut |_| {}).unwrap();
    assert!(rep.failed > 0 && !rep.examples.is_empty());
}

#[test]
fn inspect_names_every_block_in_the_residual_basis() {
    let out_path = temp("sort.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/sort.rasp", "--entry", "sorted", "--vocab", "[1,2,3]", "--max-len", "5", "-o", o]).0, 0);
    let (code, out, err) = cli(&["inspect", o]);
    assert_eq!(code, 0, "{err}");
    for want in ["residual layout:", "target_pos", "sorted = aggregate(", "layer 0", "mlp (relu, hidden"] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let (code, out, _) = cli(&["inspect", o, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["layout"][0]["label"], "<bos>");
    let last = v["layers"].as_array().unwrap().len() - 1;
    let (code, out, err) = cli(&["inspect", o, "--layer", &last.to_string(), "--head", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("indices=0") && out.contains("w_q"), "{out}");
    let (code, out, _) = cli(&["inspect", o, "--layer", "0", "--mlp", "--json"]);
    assert_eq!(code, 0);
    let m: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(m[0]["name"], "layers.0.mlp.w_in");
    let (code, _, err) = cli(&["inspect", o, "--layer", "9", "--head", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("layer 9 does not exist"), "{err}");
}

#[test]
fn corrupted_checkpoints_get_named_errors() {
    let out_path = temp("hist2.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", o]).0, 0);
    let bytes = std::fs::read(&out_path).unwrap();
    let bad = temp("truncated.safetensors");
    std::fs::write(&bad, &bytes[..bytes.len() - 10]).unwrap();
    for cmd in ["inspect", "run"] {
        let mut args = vec![cmd, bad.to_str().unwrap()];
        if cmd == "run" {
            args.extend(["--input", "ab"]);
        }
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(err.contains("truncated.safetensors") && err.contains("not a safetensors file"), "{err}");
        // Both sizes, the header's and the file's.
        assert!(err.contains(&format!("the file is truncated: its header describes {} bytes", bytes.len())) && err.contains(&format!("the file has {}", bytes.len() - 10)), "{err}");
    }
}

#[test]
fn encodings_can_be_overridden_and_stay_correct() {
    for (file, vocab, enc) in [
        ("corpus/tracr/frac_prevs.rasp", "xyz", "frac=categorical"),
        ("corpus/tracr/sort_unique.rasp", "[1,2,3,4]", "tokens=numerical"),
        ("corpus/tracr/histogram.rasp", "abc", "hist=numerical"),
    ] {
        let (code, out, err) = cli(&["verify", file, "--vocab", vocab, "--max-len", "6", "--samples", "200", "--encoding", enc]);
        assert_eq!(code, 0, "{file} {enc}: {err}{out}");
        assert!(out.ends_with("verified: 200 inputs, 0 mismatches\n"), "{out}");
    }
    // An s-op the compiler would fold into its reader's table (`(x - r) / 10` of one `x`) keeps
    // a slot of its own when --encoding names it (review rv23: the override did nothing).
    let p = temp("pinned-enc.rasp");
    std::fs::write(&p, "prev = aggregate(select(indices, indices - 1, ==), tokens_int, 0);\nx = tokens_int * 10 + prev;\nr = x % 10;\nprog = (x - r) / 10;\n").unwrap();
    let p = p.to_str().unwrap();
    let layout_has_r = |enc: &[&str]| {
        let ck = temp(&format!("pinned-enc{}.safetensors", enc.len()));
        let c = ck.to_str().unwrap();
        let mut args = vec!["compile", p, "--vocab", "0123456789", "--max-len", "6", "-o", c, "--force"];
        args.extend(enc);
        let (code, _, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        let (code, out, err) = cli(&["inspect", c]);
        assert_eq!(code, 0, "{err}");
        out.lines().any(|l| l.split_whitespace().nth(1) == Some("r") && l.contains("categorical"))
    };
    assert!(!layout_has_r(&[]));
    assert!(layout_has_r(&["--encoding", "r=categorical"]));
    let (code, out, err) = cli(&["verify", p, "--vocab", "0123456789", "--max-len", "6", "--samples", "100", "--encoding", "r=categorical"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 100 inputs, 0 mismatches\n"), "{out}");
    let (code, _, err) = cli(&["compile", "corpus/histogram.rasp", "--vocab", "ab", "--max-len", "3", "-o", "/nonexistent/x.safetensors", "--encoding", "nope=numerical"]);
    assert_eq!(code, 1);
    assert!(err.contains("--encoding names `nope`"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "-o", "/nonexistent/x.safetensors", "--encoding", "reverse=numerical"]);
    assert_eq!(code, 1);
    assert!(err.contains("`reverse` cannot be numerical"), "{err}");
}

#[test]
fn trace_decodes_every_sublayer_and_finds_the_first_divergence() {
    let out_path = temp("dyck1.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/dyck1.rasp", "--vocab", "()x", "--max-len", "8", "-o", o]).0, 0);
    let (code, out, err) = cli(&["trace", o, "--input", "(()x", "--program", "corpus/tracr/dyck1.rasp"]);
    assert_eq!(code, 0, "{err}");
    // Dyck-1's token reads are sums the embedding writes; `indices` and `length` decode.
    assert!(out.contains("embed:\n  indices = [0, 1, 2, 3]  (= interpreter)") && out.contains("layer 0 mlp:\n  length = [4, 4, 4, 4]  (= interpreter)"), "{out}");
    assert!(agrees_all(&out), "{out}");
    // Break the first MLP: the trace must point at what it writes.
    let mut ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&out_path).unwrap()).unwrap();
    let broken_label = ck.config.layers[0].mlp_info[0].writes.clone();
    ck.tensors.get_mut("layers.0.mlp.w_out").unwrap().data.iter_mut().for_each(|x| *x = 0.0);
    let broken = temp("dyck1-broken.safetensors");
    std::fs::write(&broken, ck.to_bytes().unwrap()).unwrap();
    let (code, out, _) = cli(&["trace", broken.to_str().unwrap(), "--input", "(()x", "--program", "corpus/tracr/dyck1.rasp", "--json"]);
    // A divergence is a failure, as in `verify`.
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["first_divergence"]["stage"], "layer 0 mlp", "{out}");
    let first = v["first_divergence"]["sop"].as_str().unwrap();
    assert!(ck.config.layers[0].mlp_info.iter().any(|i| i.writes == first), "{first} vs {broken_label}");
    // Another program than the checkpoint's: said, not silently compared by name.
    let (code, _, err) = cli(&["trace", o, "--input", "(()x", "--program", "corpus/tracr/dyck2.rasp"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("was not compiled from") && err.contains("program hashes differ"), "{err}");
    let (_, _, err) = cli(&["trace", o, "--input", "(()x", "--program", "corpus/tracr/dyck1.rasp"]);
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn plot_draws_every_block_and_an_overview() {
    let out_path = temp("dyck2.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/dyck2.rasp", "--vocab", "(){}", "--max-len", "8", "-o", o]).0, 0);
    let dir = temp("plots");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = cli(&["plot", o, "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&out_path).unwrap()).unwrap();
    let heads: usize = ck.config.layers.iter().map(|l| l.heads.len()).sum();
    let mlps = ck.config.layers.iter().filter(|l| l.mlp.is_some()).count();
    let expected = 1 + 2 * heads + 2 * mlps;
    assert_eq!(out, format!("wrote {expected} figures to {}\n", dir.display()));
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), expected);
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display());
        // Width and height from the IHDR chunk: labelled figures are never tiny.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert!(w >= 300 && h >= 100, "{}: {w}x{h}", f.display());
        assert!(bytes.len() > 5_000, "{}: {} bytes", f.display(), bytes.len());
    }
    assert!(files.iter().any(|f| f.ends_with("overview.png")));
    assert!(files.iter().any(|f| f.ends_with("layer0_head0_qk.png")));
}

/// `--format svg` writes the same figures as SVG; `--symlog` labels a log colour scale; every
/// heatmap has a colorbar (its end labels are the largest |weight|).
#[test]
fn plot_writes_svg_with_colorbars_and_a_symlog_scale() {
    let out_path = temp("sort-svg.safetensors");
    let o = out_path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/sort.rasp", "--entry", "sorted", "--vocab", "[1,2,3,4]", "--max-len", "8", "-o", o]).0, 0);
    let dir = temp("plots-svg");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = cli(&["plot", o, "--out", dir.to_str().unwrap(), "--format", "svg", "--symlog"]);
    assert_eq!(code, 0, "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(out, format!("wrote {} figures to {}\n", files.len(), dir.display()));
    assert!(files.iter().all(|f| f.extension().unwrap() == "svg"), "{files:?}");
    let ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&out_path).unwrap()).unwrap();
    // (The figure's last row is b_in.)
    let vmax = ck.tensors["layers.0.mlp.w_in"].data.iter().chain(&ck.tensors["layers.0.mlp.b_in"].data).fold(0f32, |m, x| m.max(x.abs()));
    let svg = std::fs::read_to_string(dir.join("layer0_mlp_in.svg")).unwrap();
    assert!(svg.starts_with("<!-- raspc plot -->\n<svg"), "{}", &svg[..100]);
    // plotters writes each text's content on a line of its own.
    let text = |t: &str| svg.lines().any(|l| l.trim() == t);
    // Four significant digits (this block's largest weight has three before the point).
    assert!((100.0..1000.0).contains(&vmax), "{vmax}");
    assert!(text(&format!("{vmax:.1}")) && text(&format!("-{vmax:.1}")), "colorbar labels ±{vmax:.1} missing");
    assert!(text("symlog") && svg.contains("all-zero rows"), "scale and dropped-row note");
    assert!(svg.contains("selector_width_8:inverse (numeric)"), "residual-basis labels");
    let (code, _, _) = cli(&["plot", o, "--out", dir.to_str().unwrap(), "--format", "pdf"]);
    assert_eq!(code, 2, "unknown formats are refused");
    // A ReGLU gate made of its bias alone (w_gate all zero) drew as an empty figure with a
    // colour scale of 0 (helper e10): each MLP figure's last row is its bias.
    let gated = temp("softmax-gated.safetensors");
    let g = gated.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/paper/softmax_rows.rasp", "--input-bounds=-1,1", "--max-len", "4", "--mlp", "gated", "-o", g, "--force"]).0, 0);
    let ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&gated).unwrap()).unwrap();
    let l =
        (0..ck.config.layers.len()).find(|&l| ck.tensors.get(&format!("layers.{l}.mlp.w_gate")).is_some_and(|w| w.data.iter().all(|&x| x == 0.0))).expect("a gate of its bias alone");
    let dir = temp("plots-gated");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cli(&["plot", g, "--out", dir.to_str().unwrap(), "--format", "svg"]).0, 0);
    let pages: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("layer{l}_mlp_gate"))).collect();
    assert!(!pages.is_empty());
    for p in pages {
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.lines().any(|x| x.trim() == "bias"), "{}", p.display());
    }
}

/// inspect, plot and trace work on every corpus program's checkpoint, and the trace agrees
/// with the interpreter at every sublayer.
#[test]
fn inspection_tools_work_on_the_whole_corpus() {
    let cases: &[(&str, Option<&str>, &str, &str)] = &[
        ("corpus/tracr/length.rasp", None, "abc", "abca"),
        ("corpus/tracr/reverse.rasp", None, "abc", "abca"),
        ("corpus/tracr/histogram.rasp", None, "abc", "abca"),
        ("corpus/tracr/sort_unique.rasp", None, "[1,2,3,4]", "[4,1,3]"),
        ("corpus/tracr/sort.rasp", None, "[1,2,3,4]", "[4,1,3,1]"),
        ("corpus/tracr/sort_freq.rasp", None, "abc", "abcb"),
        ("corpus/tracr/frac_prevs.rasp", None, "xyz", "xyxx"),
        ("corpus/tracr/pair_balance.rasp", None, "()x", "(()x"),
        ("corpus/tracr/dyck1.rasp", None, "()x", "(x))"),
        ("corpus/tracr/dyck2.rasp", None, "(){}", "({})"),
        ("corpus/tracr/shift_by.rasp", None, "abc", "abcab"),
        ("corpus/tracr/detect_pattern.rasp", None, "abc", "abcab"),
        ("corpus/tracr/count_less_freq.rasp", None, "abc", "aabca"),
        ("corpus/tracr/count.rasp", None, "abc", "abca"),
        ("corpus/tracr/nary_sequencemap.rasp", None, "[1,2,3]", "[3,1,2]"),
        ("corpus/reverse.rasp", None, "abc", "abc"),
        ("corpus/histogram.rasp", None, "abc", "abca"),
        ("corpus/sort.rasp", Some("sorted"), "[1,2,3,4]", "[3,1,3]"),
        ("corpus/sort_freq.rasp", None, "abc", "abcb"),
        ("corpus/double_hist.rasp", None, "abc", "aabc"),
        ("corpus/dyck1.rasp", None, "()", "(()"),
        ("corpus/dyck2.rasp", None, "(){}", "({)}"),
        // Slots several blocks add into (affine sums) are decoded once complete; an output
        // reassigned in a loop is compared with the last assignment.
        ("corpus/idioms/prev_distance.rasp", None, "abc", "abacab"),
        ("corpus/idioms/running_max.rasp", None, "0123456789", "29141"),
        ("corpus/idioms/centered.rasp", None, "ab", "abbab"),
        ("corpus/idioms/count_diff.rasp", None, "ab", "abbab"),
        ("corpus/idioms/double_count.rasp", None, "ab", "abbab"),
        ("corpus/idioms/dyck1_count.rasp", None, "()", "(()()"),
        ("corpus/idioms/mean_diff.rasp", None, "0123", "10203"),
        ("corpus/idioms/prefix_sum.rasp", None, "0123", "31203"),
        ("corpus/idioms/sum_of_counts.rasp", None, "abcde", "aebdc"),
        ("corpus/idioms/weighted_counts.rasp", None, "abcd", "dabca"),
        ("corpus/idioms/width_sum.rasp", None, "abcd", "dabca"),
    ];
    for (i, &(file, entry, vocab, input)) in cases.iter().enumerate() {
        let path = temp(&format!("corpus{i}.safetensors"));
        let o = path.to_str().unwrap();
        let mut args = vec!["compile", file, "--vocab", vocab, "--max-len", "6", "-o", o];
        if let Some(e) = entry {
            args.extend(["--entry", e]);
        }
        let (code, _, err) = cli(&args);
        assert_eq!(code, 0, "{file}: {err}");
        let (code, out, err) = cli(&["inspect", o]);
        assert!(code == 0 && out.contains("residual layout:"), "{file}: {err}");
        let dir = temp(&format!("plots{i}"));
        let (code, _, err) = cli(&["plot", o, "--out", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{file}: {err}");
        let mut args = vec!["trace", o, "--input", input, "--program", file];
        if let Some(e) = entry {
            args.extend(["--entry", e]);
        }
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{file}: {err}");
        assert!(agrees_all(&out), "{file}:\n{out}");
    }
}

/// A model's output holds a number, not its type (helper p): a mean of integers is `1` from one
/// key and `1.0` from several, one number to the model, and `compile` says so; a conditional
/// between `True` and `1`, one-hot, keeps the two apart and gets no warning.
#[test]
fn an_output_that_is_one_number_of_two_types_is_warned_about() {
    let p = temp("frac-types.rasp");
    std::fs::write(&p, "frac = aggregate(select(indices, indices, <=), indicator(tokens == \"a\"), 0);\n").unwrap();
    let o = temp("frac-types.safetensors");
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "ab", "--max-len", "4", "-o", o.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: `frac` can be") && err.contains("one number as values of different types"), "{err}");
    let (_, run, _) = cli(&["run", o.to_str().unwrap(), "--input", "aaaa", "--json"]);
    let (_, eval, _) = cli(&["eval", p.to_str().unwrap(), "--input", "aaaa", "--json"]);
    assert_eq!((run.trim(), eval.trim()), ("{\"output\":[1,1,1,1]}", "{\"output\":[1,1.0,1.0,1.0]}"));
    std::fs::write(&p, "prog = True if indices == 0 else 1;\n").unwrap();
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "ab", "--max-len", "4", "-o", o.to_str().unwrap(), "--force"]);
    assert!(code == 0 && !err.contains("warning"), "{err}");
    let (_, run, _) = cli(&["run", o.to_str().unwrap(), "--input", "aba", "--json"]);
    assert_eq!(run.trim(), "{\"output\":[true,1,1]}");
}

/// `dump --stage simplified` shows the graph compile lowers: when compile keeps the plan with
/// every comparison with a mean on the integer grid, the dump has that rewrite too (`high` reads
/// `to_int(centre)`, the mean's floor), not the plain simplification.
#[test]
fn dump_shows_the_simplification_compile_keeps() {
    let p = temp("centre.rasp");
    std::fs::write(&p, "centre = aggregate(select(indices, indices, ==) or select(indices, indices, !=), tokens_int);\nhigh = tokens_int > centre;\n").unwrap();
    let (code, out, err) = cli(&["dump", p.to_str().unwrap(), "--stage", "simplified", "--vocab", "[0,1,2,3]", "--max-len", "16"]);
    assert_eq!(code, 0, "{err}");
    let floor = out.lines().find(|l| l.contains("= map to_int(%6)")).unwrap_or_else(|| panic!("{out}"));
    let id = floor.split_whitespace().next().unwrap();
    // `tokens_int > floor(centre)`, or the sign of their difference (planned too, and kept
    // when no larger).
    let diff = out.lines().find(|l| l.contains(&format!("= map `-`(%2, {id})"))).and_then(|l| l.split_whitespace().next());
    assert!(out.lines().any(|l| l.contains("high = map `>`(") && (l.contains(&format!("(%2, {id})")) || diff.is_some_and(|d| l.contains(&format!("({d}, 0)"))))), "{out}");
}

/// Nodes a rewrite adds get labels no value of the original program has: `trace --program`
/// compares by label, and a helper of the comparison with a mean of positions once took the
/// label of another s-op (`sequencemap_17`) and was reported as a divergence of a correct model.
#[test]
fn trace_compares_only_what_the_program_names_after_rewrites() {
    let file = "corpus/idioms/bar_sum.rasp";
    for max_len in ["8", "16"] {
        let path = temp(&format!("bar_sum{max_len}.safetensors"));
        let o = path.to_str().unwrap();
        let (code, _, err) = cli(&["compile", file, "--vocab", "1234|", "--max-len", max_len, "-o", o, "--force"]);
        assert_eq!(code, 0, "{err}");
        for input in ["12|34", "4|1", "3124|42", "|", "11|"] {
            let (code, out, err) = cli(&["trace", o, "--input", input, "--program", file]);
            assert_eq!(code, 0, "{input}: {err}{out}");
            assert!(agrees_all(&out) && out.contains("left_val = ") && out.contains("(= interpreter)"), "{input}:\n{out}");
        }
    }
}

/// `raspc simulate`: U for a small shape against T(X), one summary line; `-o` writes U, and
/// inspect, plot and trace work on it (trace agrees with the interpreter at every sublayer).
#[test]
fn simulate_builds_u_and_the_inspection_tools_work_on_it() {
    let u_path = temp("U.safetensors");
    let u = u_path.to_str().unwrap();
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--heads", "2", "--trials", "100", "--seed", "3", "-o", u]);
    assert_eq!(code, 0, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("simulate: 100 trials, 0 failures, max_abs_err "), "{out}");
    assert!(out.contains("layers 6"), "{out}");
    // The bounds also relative to the largest |XV| the bounds allow (d·1·1 = 2 here).
    let line = out.lines().find(|l| l.starts_with("compiled in ")).unwrap();
    let nums: Vec<f64> = line.split([' ', ',', ':']).filter_map(|w| w.parse().ok()).collect();
    assert!(line.ends_with("of d·max|X|·max|V| = 2, the largest |XV| these bounds allow"), "{line}");
    assert!(nums.len() == 6 && (nums[3] - nums[1] / 2.0).abs() <= 5e-3 * nums[3] && (nums[4] - nums[2] / 2.0).abs() <= 5e-3 * nums[4], "{line}: {nums:?}");
    // JSON: one object with the sizes, errors and bounds.
    let (code, out, _) = cli(&["simulate", "--n", "2", "--d", "3", "--dv", "2", "--mlp", "relu", "--trials", "20", "--x-bound", "0.5", "--bound", "0.25", "--json"]);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["max_w"], 3.0 * 0.5 * 0.25);
    assert_eq!(j["failures"], 0);
    assert!(j["max_abs_err"].as_f64().unwrap() <= j["certified_bound_f64"].as_f64().unwrap());
    assert!(j["layers"].as_u64().unwrap() <= 6);
    // A tolerance no computation meets: every gated trial fails, and the exit status says so.
    let (code, out, _) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--trials", "5", "--tolerance", "1e-30"]);
    assert_eq!(code, 1);
    assert!(out.lines().last().unwrap().starts_with("simulate: 5 trials, 5 failures"), "{out}");

    let (code, out, err) = cli(&["inspect", u]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("aggregate_max") && out.contains("gated MLP"), "{out}");
    let (code, out, err) = cli(&["inspect", u, "--layer", "4", "--mlp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("layers.4.mlp.w_gate"), "{out}");
    let (code, out, _) = cli(&["inspect", u, "--json"]);
    assert_eq!(code, 0);
    assert!(serde_json::from_str::<serde_json::Value>(out.trim()).is_ok());

    let dir = temp("u-plots");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, _, err) = cli(&["plot", u, "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    // Wide MLPs are split into pages of at most 300 units (never cut): every nonzero unit of
    // the gate is on some page.
    let gate: Vec<_> = files.iter().filter(|f| f.file_name().unwrap().to_str().unwrap().starts_with("layer4_mlp_gate")).collect();
    assert!(!gate.is_empty() && files.iter().any(|f| f.ends_with("overview.png")), "{files:?}");
    let ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(u).unwrap()).unwrap();
    let (g, b) = (&ck.tensors["layers.4.mlp.w_gate"], &ck.tensors["layers.4.mlp.b_gate"]);
    let used = (0..g.shape[1]).filter(|&j| b.data[j] != 0.0 || (0..g.shape[0]).any(|i| g.data[i * g.shape[1] + j] != 0.0)).count();
    assert_eq!(gate.len(), if used > 300 { used.div_ceil(300) } else { 1 }, "{gate:?}");
    // Page files sort in page order (page numbers are zero-padded).
    let mut names: Vec<String> = gate.iter().map(|f| f.file_name().unwrap().to_str().unwrap().to_string()).collect();
    names.sort();
    let page = |n: &String| n.rsplit_once('_').map_or(0, |(_, p)| p.trim_end_matches(".png").parse::<usize>().unwrap());
    assert!(names.windows(2).all(|w| page(&w[0]) < page(&w[1])), "{names:?}");

    let prog = temp("u.rasp");
    std::fs::write(&prog, raspc::simulate::source(raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 2 })).unwrap();
    let len = raspc::simulate::Shape { n: 2, d: 2, dv: 2, h: 2 }.seq_len();
    let mut rng = raspc::verify::SplitMix(9);
    let input: Vec<String> = (0..len).map(|_| format!("{:.4}", raspc::verify::uniform(&mut rng, -1.0, 1.0))).collect();
    let input = format!("[{}]", input.join(","));
    let (code, out, err) = cli(&["trace", u, "--input", &input, "--program", prog.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("layer 4 mlp:") && agrees_all(&out), "{out}");
    // U is recognised as compiled from a program that calls `universal` with its shapes, however
    // spelled; a program of other shapes is not.
    assert!(!err.contains("was not compiled from"), "{err}");
    std::fs::write(&prog, "# U\nu=universal( 2,2, 2,2 ) ;").unwrap();
    let (code, _, err) = cli(&["trace", u, "--input", &input, "--program", prog.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("was not compiled from"), "{err}");
    std::fs::write(&prog, "u = universal(2, 2, 2, 1);").unwrap();
    let (_, _, err) = cli(&["trace", u, "--input", &input, "--program", prog.to_str().unwrap()]);
    assert!(err.contains("was not compiled from"), "{err}");
    // Out-of-bounds inputs are refused by position.
    let first_replaced = format!("[7,{}", input.split_once(',').unwrap().1);
    let (code, _, err) = cli(&["run", u, "--input", &first_replaced]);
    assert_ne!(code, 0);
    assert!(err.contains("input at position 0 is 7") && err.contains("[-1, 1]"), "{err}");
}

/// `raspc simulate --target`: a user's attention layer from a safetensors file.
/// `simulate --split`: U on the split input, in the terminal's text and in JSON, on random
/// layers and on a user's layer (`--target`), with its smaller f32 bound.
#[test]
fn simulate_split_builds_u_on_the_split_input() {
    let (code, out, err) = cli(&["simulate", "--n", "5", "--d", "6", "--dv", "3", "--trials", "20", "--dtype", "f32", "--split", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let (code, out, _) = cli(&["simulate", "--n", "5", "--d", "6", "--dv", "3", "--trials", "20", "--dtype", "f32", "--json"]);
    assert_eq!(code, 0);
    let plain: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // [Xh; Xl; Ah; Al; V]: 2·30 + 2·36 + 18 positions, on the grid 2^-6 (d = 6: Sh = Xh·Ah·Xhᵀ
    // is at most 36 on the grid 2^-18, 36·2^18 ≤ 2^24; on 2^-7, 36·2^21 would not be).
    assert_eq!((j["seq_len"].as_u64(), j["split_grid"].as_i64(), j["layers"].as_u64()), (Some(150), Some(-6), Some(7)), "{j}");
    assert_eq!((plain["seq_len"].as_u64(), plain["split_grid"].as_i64()), (Some(84), None));
    assert_eq!((j["failures"].as_u64(), j["bound_violations"].as_u64()), (Some(0), Some(0)));
    let (bs, bp) = (j["certified_bound_f32"].as_f64().unwrap(), plain["certified_bound_f32"].as_f64().unwrap());
    assert!(bs < 0.7 * bp && j["max_abs_err"].as_f64().unwrap() <= bs, "{bs} vs {bp}");
    // The text names the positions of the split layout.
    let u = temp("U-split.safetensors");
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--trials", "3", "--split", "-o", u.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{out}{err}");
    // `trace --program` knows the split U it wrote (its program hash names shapes and grid):
    // [Xh; Xl; Ah; Al; V], high parts on 2^-7, remainders within 2^-8.
    let prog = temp("u-split.rasp");
    std::fs::write(&prog, "u = universal_split(2, 2, 2, 1);\n").unwrap();
    let input = "[0.5, 0.5, -0.5, 0.25, 0.001, 0, 0, -0.002, 0.25, 0.5, 0.75, -1, 0.002, 0, 0, 0, 0.5, 0.5, -0.5, 1]";
    let (code, traced, err) = cli(&["trace", u.to_str().unwrap(), "--input", input, "--program", prog.to_str().unwrap()]);
    assert_eq!(code, 0, "{traced}{err}");
    assert!(traced.contains("trace: every s-op agrees with the interpreter"), "{traced}");
    assert!(out.contains("split input: X and A as multiples of 2^-7 plus remainders, 20 positions") && out.contains("layers 7"), "{out}");
    // An f32 run of the plain layout whose bound is past 1e-3 of d·max|X|·max|V| (d = 32:
    // 1.4e-3) points at --split; the split run's (2.0e-4) does not.
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "32", "--dv", "2", "--trials", "1", "--dtype", "f32"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("note: the f32 bound is 1.41e-3 of d·max|X|·max|V|; `--split`"), "{out}");
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "32", "--dv", "2", "--trials", "1", "--dtype", "f32", "--split"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("note:"), "{out}");
    // ReLU MLPs interpolate products: the split would only add cost, and is refused.
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--mlp", "relu", "--split"]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("--split needs gated MLPs (--mlp gated, the default)"), "{err}");
    // A user's layer: the same output as the plain layout within both bounds.
    let t = temp("split-target.safetensors");
    write_safetensors(&t, &[("A", vec![0.5f32, -0.25, 0.125, 1.0], vec![2usize, 2]), ("V", vec![1.0, 0.0, -0.5, 0.75], vec![2, 2])]);
    let run = |split: bool| -> serde_json::Value {
        let mut args = vec!["simulate", "--target", t.to_str().unwrap(), "--input", "[[0.3, -0.7], [0.9, 0.1], [-1, 0.5]]", "--dtype", "f32", "--json"];
        if split {
            args.push("--split");
        }
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{out}{err}");
        serde_json::from_str(out.trim()).unwrap()
    };
    let (s, p) = (run(true), run(false));
    let flat = |j: &serde_json::Value, k: &str| -> Vec<f64> {
        j[k].as_array().unwrap().iter().flat_map(|h| h.as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))).collect()
    };
    let tol = s["certified_bound_f32"].as_f64().unwrap() + p["certified_bound_f32"].as_f64().unwrap();
    assert_eq!(flat(&s, "expected"), flat(&p, "expected"));
    for (a, b) in flat(&s, "output").iter().zip(flat(&p, "output")) {
        assert!((a - b).abs() <= tol, "{a} vs {b}");
    }
}

#[test]
fn simulate_runs_a_users_attention_layer() {
    let t = temp("T.safetensors");
    // One head, d = 2, dv = 3, given as W_Q, W_K, W_V.
    let tensors = [("W_Q", vec![0.5f32, -0.25, 0.75, 0.1], vec![2usize, 2]), ("W_K", vec![0.3, 0.2, -0.6, 0.9], vec![2, 2]), ("W_V", vec![1.0, 0.0, -0.5, 0.25, 0.5, 0.75], vec![2, 3])];
    write_safetensors(&t, &tensors);
    let x = temp("X.json");
    std::fs::write(&x, "[[0.1, -0.4], [0.8, 0.3], [-0.6, 0.2]]").unwrap();
    let (code, out, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("U for n=3 d=2 dv=3 heads=1"), "{out}");
    // X inline gives the same report.
    let (code, inline, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", "[[0.1, -0.4], [0.8, 0.3], [-0.6, 0.2]]"]);
    assert_eq!(code, 0, "{err}");
    let strip = |s: &str| s.lines().filter(|l| !l.contains(" ms")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&inline), strip(&out));
    assert!(out.contains("simulate: 1 trials, 0 failures"), "{out}");
    // The printed matrix is T(X), computed here independently.
    let (xs, q, k, v) = ([[0.1, -0.4], [0.8, 0.3], [-0.6, 0.2]], [[0.5, -0.25], [0.75, 0.1]], [[0.3, 0.2], [-0.6, 0.9]], [[1.0, 0.0, -0.5], [0.25, 0.5, 0.75]]);
    let mm = |a: &[[f64; 2]], b: &[[f64; 2]; 2]| -> Vec<[f64; 2]> { a.iter().map(|r| [r[0] * b[0][0] + r[1] * b[1][0], r[0] * b[0][1] + r[1] * b[1][1]]).collect() };
    let (xq, xk) = (mm(&xs, &q), mm(&xs, &k));
    let row0: Vec<f64> = {
        let s: Vec<f64> = xk.iter().map(|kj| xq[0][0] * kj[0] + xq[0][1] * kj[1]).collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..3).map(|b| (0..3).map(|j| e[j] / z * (xs[j][0] * v[0][b] + xs[j][1] * v[1][b])).sum()).collect()
    };
    let printed: Vec<f64> =
        out.lines().find(|l| l.trim_start().starts_with('[')).unwrap().trim().trim_matches(|c| c == '[' || c == ']').split(", ").map(|s| s.parse().unwrap()).collect();
    for (p, w) in printed.iter().zip(&row0) {
        assert!((p - w).abs() < 1e-5, "{printed:?} vs {row0:?}");
    }
    // `--json` carries U's output too, every digit (the text's first row is the same numbers).
    let (code, json, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let first: Vec<f64> = j["output"][0][0].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(first, printed);
    assert_eq!(j["output"].as_array().unwrap().len(), 1);
    assert_eq!(j["output"][0].as_array().unwrap().len(), 3);
    // Bad targets are named.
    let bad = temp("bad.safetensors");
    write_safetensors(&bad, &[("V", vec![1.0, 2.0], vec![2, 1])]);
    let (code, _, err) = cli(&["simulate", "--target", bad.to_str().unwrap(), "--input", x.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("neither tensor `A`"), "{err}");
    // Every wrong shape is refused naming the tensors and their shapes, never cut to fit (W_Q
    // [2, 3] with W_K [2, 1] once gave a wrong A whose own reference agreed with it).
    let v = ("W_V", vec![1.0, 0.0, -0.5, 0.25, 0.5, 0.75], vec![2usize, 3]);
    for (tensors, says) in [
        (vec![("W_Q", vec![0.5f32; 6], vec![2usize, 3]), ("W_K", vec![0.3; 2], vec![2, 1]), v.clone()], "tensors `W_Q` [2, 3] and `W_K` [2, 1] must have the same shape"),
        (vec![("A", vec![0.5f32; 6], vec![2usize, 3]), v.clone()], "A has shape [2, 3] and X (`"),
        (vec![("A", vec![0.5f32; 4], vec![2usize, 2]), ("W_Q", vec![0.5; 4], vec![2, 2]), ("W_K", vec![0.5; 4], vec![2, 2]), v.clone()], "both `A` and `W_Q`/`W_K`"),
        (vec![("A", vec![0.5f32; 4], vec![2usize, 2]), ("V", vec![1.0; 2], vec![1, 2]), v.clone()], "both `V` and `W_V`"),
        (vec![("A", vec![0.5, f32::NAN, 0.0, 1.0], vec![2usize, 2]), v.clone()], "tensor `A` (shape [2, 2]) holds NaN at flat index 1"),
        (vec![("A", vec![0.5f32; 4], vec![2usize, 2]), ("W_V", vec![1.0; 6], vec![3, 2])], "W_V has shape [3, 2] and X (`"),
    ] {
        write_safetensors(&bad, &tensors);
        let (code, _, err) = cli(&["simulate", "--target", bad.to_str().unwrap(), "--input", x.to_str().unwrap()]);
        assert_eq!(code, 1, "{says}: {err}");
        assert!(err.contains(says), "{says}: {err}");
    }
    write_safetensors(&bad, &[("A", vec![0.5f32; 4], vec![2usize, 2]), v]);
    let (code, _, err) = cli(&["simulate", "--target", bad.to_str().unwrap(), "--input", "[[0.1, 0.2], [1e39, 0.0]]"]);
    assert_eq!(code, 1);
    assert!(err.contains("X (--input): entry 2 (row 1, column 0) is not a finite f32 number"), "{err}");
    // The shapes come from the tensors and X: shape flags are refused, not ignored.
    let (code, _, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x.to_str().unwrap(), "--n", "4"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with '--n <N>'"), "{err}");
}

/// `simulate --target` certifies U for each block's own largest entries (X, A, V), not one bound
/// for all three (X's 8 for A's 0.25 and V's 0.5 here: helper b6 measured 14,000x looser at
/// n = d = 64); widening flags are taken and checked against the data; tensors T does not use
/// are named; the JSON has T(X) as computed directly, the worst entry and the checkpoint written.
#[test]
fn simulate_target_bounds_each_block_by_its_data() {
    let t = temp("Tb.safetensors");
    let a = vec![0.25f32, -0.125, 0.0625, 0.2];
    let v = vec![0.5f32, -0.25, 0.125, 0.375];
    write_safetensors(&t, &[("A", a.clone(), vec![2, 2]), ("V", v.clone(), vec![2, 2]), ("b_Q", vec![1.0, 1.0], vec![2]), ("W_O", vec![1.0; 4], vec![2, 2])]);
    let xs = [[8.0f64, -2.0], [1.5, 3.0], [-4.0, 0.5]];
    let x = "[[8.0, -2.0], [1.5, 3.0], [-4.0, 0.5]]";
    let ck = temp("Ub.safetensors");
    let (code, json, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x, "--json", "-o", ck.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!((j["x_bound"].as_f64(), j["a_bound"].as_f64(), j["v_bound"].as_f64()), (Some(8.0), Some(0.25), Some(0.5)));
    assert_eq!(j["ignored_tensors"], serde_json::json!(["W_O", "b_Q"]));
    assert_eq!(j["checkpoint"].as_str(), ck.to_str());
    assert!(ck.exists());
    // `expected` is T(X), computed here: softmax(X A Xᵀ) X V.
    let af = |i: usize, k: usize| a[i * 2 + k] as f64;
    let vf = |i: usize, k: usize| v[i * 2 + k] as f64;
    let xa: Vec<[f64; 2]> = xs.iter().map(|r| [r[0] * af(0, 0) + r[1] * af(1, 0), r[0] * af(0, 1) + r[1] * af(1, 1)]).collect();
    let xv: Vec<[f64; 2]> = xs.iter().map(|r| [r[0] * vf(0, 0) + r[1] * vf(1, 0), r[0] * vf(0, 1) + r[1] * vf(1, 1)]).collect();
    for (i, q) in xa.iter().enumerate() {
        let s: Vec<f64> = xs.iter().map(|k| q[0] * k[0] + q[1] * k[1]).collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|z| (z - m).exp()).collect();
        let total: f64 = e.iter().sum();
        for c in 0..2 {
            let want: f64 = (0..3).map(|r| e[r] / total * xv[r][c]).sum();
            let got = j["expected"][0][i][c].as_f64().unwrap();
            assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "T(X)[{i}][{c}]: {got} vs {want}");
            let u = j["output"][0][i][c].as_f64().unwrap();
            assert!((u - want).abs() <= j["bound"].as_f64().unwrap(), "U(X)[{i}][{c}]: {u} vs {want}");
        }
    }
    let w = &j["worst"];
    let (wi, wc) = (w["row"].as_u64().unwrap() as usize, w["col"].as_u64().unwrap() as usize);
    assert_eq!(w["u"], j["output"][0][wi][wc]);
    assert_eq!(w["t"], j["expected"][0][wi][wc]);
    // One bound for all three blocks (the old default) certifies less.
    let (code, wide, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x, "--json", "--bound", "8"]);
    assert_eq!(code, 0, "{err}");
    let wide: serde_json::Value = serde_json::from_str(wide.trim()).unwrap();
    assert!(wide["certified_bound_f64"].as_f64().unwrap() > 10.0 * j["certified_bound_f64"].as_f64().unwrap(), "{wide} vs {j}");
    // The text names the ignored tensors (stderr) and the checkpoint written.
    let (code, out, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x, "-o", ck.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("also holds `W_O`, `b_Q`, which simulate does not use"), "{err}");
    assert!(out.contains(&format!("wrote U's checkpoint -> {}", ck.display())) && out.contains("largest error at head 0, row"), "{out}");
    // Flags below the data are refused, naming the entry.
    let (code, _, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x, "--x-bound", "4"]);
    assert_eq!(code, 1);
    assert!(err.contains("--x-bound 4 is smaller than the largest entry of X, 8 at X[0][0]"), "{err}");
    let (code, _, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", x, "--bound", "0.3"]);
    assert_eq!(code, 1);
    assert!(err.contains("--bound 0.3 is smaller than the largest entry of V, 0.5 at V[0][0]"), "{err}");
    // A ragged X names the row; an archive torch.save wrote is named as such.
    let (code, _, err) = cli(&["simulate", "--target", t.to_str().unwrap(), "--input", "[[1, 2], [3]]"]);
    assert_eq!(code, 1);
    assert!(err.contains("row 1 has 1 entries, row 0 has 2"), "{err}");
    let zip = temp("torch.safetensors");
    std::fs::write(&zip, b"PK\x03\x04archive/data.pkl....").unwrap();
    let (code, _, err) = cli(&["simulate", "--target", zip.to_str().unwrap(), "--input", x]);
    assert_eq!(code, 1);
    assert!(err.contains("is a zip archive (what `torch.save` writes), not a safetensors file"), "{err}");
}

/// A minimal safetensors writer for test inputs (F32 tensors).
fn write_safetensors(path: &std::path::Path, tensors: &[(&str, Vec<f32>, Vec<usize>)]) {
    let mut header = serde_json::Map::new();
    let mut data = vec![];
    for (name, v, shape) in tensors {
        let start = data.len();
        for x in v {
            data.extend_from_slice(&x.to_le_bytes());
        }
        header.insert(name.to_string(), serde_json::json!({ "dtype": "F32", "shape": shape, "data_offsets": [start, data.len()] }));
    }
    let mut h = serde_json::Value::Object(header).to_string().into_bytes();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h);
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

/// Inputs from a declared finite grid: functions of them (exp, products) are exact lookups.
#[test]
fn grid_inputs_compile_to_exact_lookups() {
    let prog = temp("grid.rasp");
    std::fs::write(&prog, "y = 2.718281828459045 ^ tokens_float * tokens_float;\n").unwrap();
    let (code, out, err) = cli(&["verify", prog.to_str().unwrap(), "--input-grid=-1,1,0.25", "--max-len", "3", "--exhaustive"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("verified: 819 inputs, 0 mismatches\n"), "{out}");
    let (code, _, err) = cli(&["verify", prog.to_str().unwrap(), "--input-grid=1,0,0.5", "--max-len", "3"]);
    assert_ne!(code, 0);
    assert!(err.contains("bad --input-grid"), "{err}");
}

/// Real-valued programs through the CLI: `compile` prints the certified bound, `verify` checks
/// random inputs in the bounds against the interpreter, `run` takes numbers.
#[test]
fn real_valued_programs_compile_verify_and_run() {
    let prog = temp("softmax.rasp");
    std::fs::write(&prog, "y = softmax_rows(tokens_float, 0, 2, 3, 1);\n").unwrap();
    let p = prog.to_str().unwrap();
    let model = temp("softmax.safetensors");
    let m = model.to_str().unwrap();
    let (code, out, err) = cli(&["compile", p, "--input-bounds=-5,5", "--max-len", "6", "--mlp", "gated", "-o", m]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("certified: |y - program| <= ") && out.contains("for inputs in [-5,5]"), "{out}");
    let (code, out, err) = cli(&["verify", p, "--input-bounds=-5,5", "--max-len", "6", "--samples", "200"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 200 inputs, 0 mismatches\n"), "{out}");
    // The certificate is for hard attention: soft is said not checked, and refused when asked.
    assert!(out.contains("Hard attention: 200 inputs, 0 mismatches\nSoft attention: not checked"), "{out}");
    let (code, _, err) = cli(&["verify", p, "--input-bounds=-5,5", "--max-len", "6", "--attention", "soft"]);
    assert!(code == 1 && err.contains("certified bound holds under hard attention only"), "{err}");
    let (code, out, err) = cli(&["run", m, "--input", "[0, 0, 0, 1, 1, 1]", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for x in v["output"].as_array().unwrap() {
        assert!((x.as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-4, "{out}");
    }
    let (code, _, err) = cli(&["compile", p, "--input-bounds=5,-5", "--max-len", "6", "-o", m]);
    assert_ne!(code, 0);
    assert!(err.contains("bad --input-bounds"), "{err}");
    // Per-block bounds: the first row in [-1, 1], the second in [-5, 5].
    let (code, out, err) = cli(&["verify", p, "--input-bounds=-5,5;-1,1@0:3", "--max-len", "6", "--samples", "100"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 100 inputs, 0 mismatches\n"), "{out}");
    let (code, _, err) = cli(&["verify", p, "--input-bounds=-5,5;-1,1@0", "--max-len", "6"]);
    assert_ne!(code, 0);
    assert!(err.contains("bad --input-bounds"), "{err}");
}

#[test]
fn the_output_is_named_as_the_user_wrote_the_entry() {
    // A helper's local `res` is assigned first and simplification replaces the root (a map of
    // a map): the checkpoint, its layout and the message still name the output `res`.
    let src = temp("shadowed_res.rasp");
    std::fs::write(&src, "def has_a(t) {\n  res = t == \"a\";\n  return res;\n}\nx = has_a(tokens);\nres = x and (indices > 0);\n").unwrap();
    let ck = temp("shadowed_res.safetensors");
    let (s, c) = (src.to_str().unwrap(), ck.to_str().unwrap());
    let (code, out, err) = cli(&["compile", s, "--vocab", "ab", "--max-len", "6", "-o", c]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("compiled `res` -> "), "{out}");
    let loaded = raspc_checkpoint::Checkpoint::from_file(&ck, &raspc_checkpoint::Limits::default()).unwrap();
    assert_eq!(loaded.output.label, "res");
    assert!(loaded.layout.sops.iter().any(|e| e.label == "res"), "{:?}", loaded.layout.sops.iter().map(|e| &e.label).collect::<Vec<_>>());
    for input in ["abab", "a", "bbaa"] {
        let (_, want, _) = cli(&["eval", s, "--input", input, "--json"]);
        let (code, got, err) = cli(&["run", c, "--input", input, "--json"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(got, want, "input {input}");
    }
}

#[test]
fn simulate_runs_on_the_device_asked_for_and_refuses_unknown_ones() {
    let (code, out, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--trials", "2", "--json", "--device", "cpu"]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["device"], "cpu");
    assert_eq!(j["failures"], 0);
    // Refused before U is built, with the devices named.
    let (code, _, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--device", "tpu"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'tpu'") && err.contains("[possible values: cpu, cuda]"), "{err}");
}

#[test]
fn a_load_cycle_through_another_file_is_noted_where_it_closes() {
    // main loads a, a loads b, b loads a again: b's load is skipped, and the note names b's line
    // (notes from loaded files are shown, not only the main file's).
    let dir = std::env::temp_dir().join(format!("raspc-load-cycle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.rasp"), "load \"a\";\nprog = tokens;\n").unwrap();
    std::fs::write(dir.join("a.rasp"), "load \"b\";\nx = 1;\n").unwrap();
    std::fs::write(dir.join("b.rasp"), "y = 2;\nload \"a\";\n").unwrap();
    let main = dir.join("main.rasp");
    let (code, out, err) = cli(&["eval", main.to_str().unwrap(), "--input", "ab"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "['a', 'b']\n");
    assert!(err.contains("b.rasp:2:6: `a` is already being loaded; this load is skipped"), "{err}");
}

#[test]
fn encoding_accepts_every_name_the_program_binds_to_an_s_op() {
    // `prog = fa;` labels the s-op `prog`; `--encoding fa=...` still means it. A name bound to
    // nothing is refused, naming it.
    let p = temp("alias.rasp");
    std::fs::write(&p, "def frac(seq, tok) {\n    return aggregate(select(indices, indices, <=), indicator(seq == tok));\n}\nfa = frac(tokens, \"a\");\nprog = fa;\n").unwrap();
    let p = p.to_str().unwrap();
    for (enc, ok) in [("fa=categorical", true), ("prog=categorical", true), ("nope=categorical", false)] {
        let (code, out, err) = cli(&["verify", p, "--vocab", "ab", "--max-len", "6", "--samples", "50", "--encoding", enc]);
        if ok {
            assert_eq!(code, 0, "{enc}: {err}");
            assert!(out.contains("verified: 50 inputs, 0 mismatches"), "{enc}: {out}");
        } else {
            assert_eq!(code, 1, "{enc}");
            assert!(err.contains("--encoding names `nope`"), "{err}");
        }
    }
}

#[test]
fn runtime_errors_name_the_users_variable_not_a_generated_label() {
    let p = temp("fdiv.rasp");
    std::fs::write(&p, "def f(x) {\n    return 1 / (x - 2);\n}\ny = f(indices) + 1;\n").unwrap();
    let p = p.to_str().unwrap();
    let (code, _, err) = cli(&["eval", p, "--input", "abcd"]);
    assert_eq!(code, 1);
    assert!(err.contains("evaluating an expression in `y` failed at position 2: division by zero"), "{err}");
    assert!(!err.contains("map_"), "{err}");
    let (code, out, err) = cli(&["verify", p, "--vocab", "abc", "--max-len", "4", "--samples", "50", "--allow-rejected"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("an expression in `y` failed on ") && !out.contains("map_"), "{out}");
    // A built-in token reader that fails is shown where the program reads it (helper a21: no
    // line:column at all), or where the entry names it.
    for (src, at, caret) in [("x = 1;\ny = tokens_int * 2;\n", ":2:5", "y = tokens_int * 2;"), ("prog = tokens_int;\n", ":1:8", "prog = tokens_int;")] {
        let q = temp("tokint.rasp");
        std::fs::write(&q, src).unwrap();
        let (code, _, err) = cli(&["eval", q.to_str().unwrap(), "--input", "ab"]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("evaluating `tokens_int` failed at position 0: invalid literal for int(): 'a'") && err.contains(at) && err.contains(caret), "{src}: {err}");
    }
}

#[test]
fn export_replaces_only_an_onnx_file_raspc_wrote() {
    let ck = temp("export-src.safetensors");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let onnx = temp("export.onnx");
    let _ = std::fs::remove_file(&onnx);
    for _ in 0..2 {
        let (code, _, err) = cli(&["export", ck.to_str().unwrap(), "--to", "onnx", "-o", onnx.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    let notes = temp("export-notes.onnx");
    std::fs::write(&notes, "precious").unwrap();
    let (code, _, err) = cli(&["export", ck.to_str().unwrap(), "--to", "onnx", "-o", notes.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not an ONNX file raspc wrote"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "precious");
}

/// `export -o` over an export of another program says so, as `compile -o` does (helper dt26:
/// it was replaced without a word); over the same program's, nothing.
#[test]
fn replacing_another_programs_onnx_export_is_said() {
    let onnx = temp("replaced.onnx");
    let o = onnx.to_str().unwrap();
    let _ = std::fs::remove_file(&onnx);
    let mut errs = vec![];
    for (i, file) in ["corpus/reverse.rasp", "corpus/reverse.rasp", "corpus/histogram.rasp"].into_iter().enumerate() {
        let ck = temp(&format!("replaced-onnx-{i}.safetensors"));
        let (code, _, err) = cli(&["compile", file, "--vocab", "abc", "--max-len", "4", "-o", ck.to_str().unwrap(), "--force"]);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = cli(&["export", ck.to_str().unwrap(), "--to", "onnx", "-o", o]);
        assert_eq!(code, 0, "{err}");
        errs.push(err);
    }
    assert!(!errs[0].contains("replaced") && !errs[1].contains("replaced"), "{errs:?}");
    assert!(errs[2].contains(&format!("note: replaced `{o}`, an ONNX export of another program (sha256:")), "{}", errs[2]);
}

/// A real-valued model's certified bound holds for hard attention: the ONNX export bakes in hard
/// attention for it unless asked otherwise, and warns when asked (helper d6: a soft export of a
/// gather was 4.8x the stated tolerance). Token models keep soft as the default.
#[test]
fn export_defaults_to_hard_attention_for_real_valued_models() {
    let prog = temp("export-gather.rasp");
    std::fs::write(&prog, "y = gather(tokens_float, 5 - indices);\n").unwrap();
    let ck = temp("export-gather.safetensors");
    let (code, _, err) = cli(&["compile", prog.to_str().unwrap(), "--input-bounds=-1,1", "--max-len", "6", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let onnx = temp("export-gather.onnx");
    let attention_of = |args: &[&str]| -> (String, String) {
        let mut a = vec!["export", ck.to_str().unwrap(), "--to", "onnx", "-o", onnx.to_str().unwrap(), "--json"];
        a.extend_from_slice(args);
        let (code, out, err) = cli(&a);
        assert_eq!(code, 0, "{err}");
        let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        (j["attention"].as_str().unwrap().to_string(), err)
    };
    assert_eq!(attention_of(&[]), ("hard".to_string(), String::new()));
    let (soft, warning) = attention_of(&["--attention", "soft"]);
    assert_eq!(soft, "soft");
    assert!(warning.contains("is real-valued: its certified bound") && warning.contains("hard attention only"), "{warning}");
    let tok = temp("export-rev.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "-o", tok.to_str().unwrap(), "--force"]).0, 0);
    let (code, out, _) = cli(&["export", tok.to_str().unwrap(), "--to", "onnx", "-o", onnx.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"attention\":\"soft\""), "{out}");
}

#[test]
fn probe_refuses_a_scored_window_longer_than_the_sequence() {
    let ck = temp("probe-sort.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/sort.rasp", "--vocab", "[1,2,3,4]", "--max-len", "5", "-o", c, "--force"]).0, 0);
    let (code, _, err) = cli(&["probe", "svflow", c, "--program", "corpus/tracr/sort.rasp", "--eval-window", "9", "--seeds", "1", "--sequences", "2"]);
    assert_eq!(code, 1);
    assert!(err.contains("--eval-window 9 must be between 1 and --seq-len 5"), "{err}");
}

#[test]
fn inspect_folds_wide_matrices_for_a_terminal() {
    let ck = temp("fold.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/idioms/prev_distance.rasp", "--vocab", "abc", "--max-len", "6", "-o", c, "--force"]).0, 0);
    let ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&ck).unwrap()).unwrap();
    let wide = raspc::inspect::block(&ck, 0, None, false).unwrap();
    let folded = raspc::inspect::block_for_terminal(&ck, 0, None, false, 60).unwrap();
    assert!(wide.lines().any(|l| l.chars().count() > 60 && !l.contains("are nonzero)")), "the test needs a wide matrix");
    // (Titles are one line each; the matrices' lines fit.)
    let title = |l: &str| l.contains("are nonzero)") || l.contains("(units");
    assert!(folded.lines().filter(|l| !title(l)).all(|l| l.chars().count() <= 60), "{folded}");
    assert!(folded.contains("-- nonzero columns 1..") && !wide.contains("-- nonzero columns"), "{folded}");
    // Every nonzero cell is still shown: the same numbers, in a different order.
    let cells = |s: &str| {
        let mut v: Vec<String> = s.split_whitespace().filter(|w| w.parse::<f64>().is_ok()).map(String::from).collect();
        v.sort();
        v
    };
    let strip = |s: &str| s.lines().filter(|l| !l.starts_with("-- nonzero columns")).collect::<Vec<_>>().join("\n");
    assert_eq!(cells(&strip(&wide)), cells(&strip(&folded)));
}

#[test]
fn real_refusals_suggest_the_remedy_for_their_reason() {
    let p = temp("step.rasp");
    let o = temp("never-written.safetensors");
    for (src, extra, says) in [
        ("x = tokens_float;\ny = 2 * x if x > 0.25 else -x;\n", vec![], "must agree at its threshold"),
        ("y = tokens_float ^ 2;\n", vec!["--pl-error", "1e-16"], "a larger --pl-error"),
        ("y = 1 / tokens_float;\n", vec![], "a clamp that keeps the value away from 0"),
        // A total that is never 0 but whose certified error reaches it (helper r: the clamp
        // advice could not help there).
        ("e = 2.718 ^ tokens_float;\ns = aggregate(select(0, 0, ==), e);\ny = e / s;\n", vec!["--input-bounds=-8,8"], "widened by its certified error, reaches 0"),
    ] {
        std::fs::write(&p, src).unwrap();
        let bounds = if extra.iter().any(|a| a.starts_with("--input-bounds")) { vec![] } else { vec!["--input-bounds=-1,1"] };
        let mut args = vec!["compile", p.to_str().unwrap(), "--max-len", "16", "-o", o.to_str().unwrap()];
        args.extend(bounds);
        args.extend(extra);
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{src}");
        assert!(err.contains("cannot be approximated") && err.contains(says), "{src}: {err}");
        assert!(!o.exists());
    }
}

#[test]
fn figures_and_reports_never_replace_a_users_file_or_write_through_a_link() {
    let ck = temp("guard-sort.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/sort.rasp", "--vocab", "[1,2,3]", "--max-len", "4", "-o", c, "--force"]).0, 0);
    // plot: a file of the user's where a figure goes, and a link there, are refused; a second
    // run replaces its own figures.
    let dir = temp("guard-figs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let notes = dir.join("overview.png");
    std::fs::write(&notes, "notes").unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("overview.png` exists and is not a PNG figure written by raspc"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "notes");
    let victim = temp("guard-victim.txt");
    std::fs::write(&victim, "victim").unwrap();
    std::fs::remove_file(&notes).unwrap();
    std::os::unix::fs::symlink(&victim, &notes).unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a regular file"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
    std::fs::remove_file(&notes).unwrap();
    // A link where a later figure goes: refused before any figure is drawn (not half way), and
    // no temporary file is left.
    let later = dir.join("layer1_mlp_out.png");
    std::os::unix::fs::symlink(&victim, &later).unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
    assert!(code == 1 && err.contains("layer1_mlp_out.png") && err.contains("is not a regular file"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec!["layer1_mlp_out.png".to_string()], "figures drawn before the refusal");
    std::fs::remove_file(&later).unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", "-"]);
    assert_eq!(code, 1);
    assert!(err.contains("not to standard output") && !std::path::Path::new("-").exists(), "{err}");
    for _ in 0..2 {
        let (code, out, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("wrote") && !out.contains("note:"), "{out}");
    }
    // A real PNG of the user's (raspc's figure without its text chunk: the same image, another
    // program's file) is not replaced either; nor is an SVG of the user's.
    let png = std::fs::read(&notes).unwrap();
    let len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize;
    assert_eq!(&png[37..41], b"tEXt");
    let users = [&png[..33], &png[33 + 12 + len..]].concat();
    std::fs::write(&notes, &users).unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("overview.png` exists and is not a PNG figure written by raspc"), "{err}");
    assert_eq!(std::fs::read(&notes).unwrap(), users);
    std::fs::remove_file(&notes).unwrap();
    let svg_dir = temp("guard-svg");
    let _ = std::fs::remove_dir_all(&svg_dir);
    std::fs::create_dir_all(&svg_dir).unwrap();
    std::fs::write(svg_dir.join("overview.svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"/>").unwrap();
    let (code, _, err) = cli(&["plot", c, "-o", svg_dir.to_str().unwrap(), "--format", "svg"]);
    assert_eq!(code, 1, "{err}");
    // Another model's figures left in the directory are pointed out.
    std::fs::write(dir.join("layer7_head0_qk.png"), &png).unwrap();
    let (code, out, err) = cli(&["plot", c, "-o", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("note: 1 other figure in") && out.contains("layer7_head0_qk.png"), "{out}");
    // probe -o: refused before the run for a file that is not an earlier report; an earlier
    // report is replaced.
    let report = temp("guard-report.json");
    std::fs::write(&report, "mydata").unwrap();
    let probe = |out: &str| cli(&["probe", "svflow", c, "--program", "corpus/tracr/sort.rasp", "--seeds", "1", "--sequences", "2", "-o", out]);
    let (code, out, err) = probe(report.to_str().unwrap());
    assert_eq!(code, 1);
    assert!(err.contains("is not an SVFlow report raspc wrote") && out.is_empty(), "{err}");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "mydata");
    std::fs::remove_file(&report).unwrap();
    for _ in 0..2 {
        let (code, _, err) = probe(report.to_str().unwrap());
        assert_eq!(code, 0, "{err}");
    }
    // `-o -` is not standard output.
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "-o", "-"]);
    assert_eq!(code, 1);
    assert!(err.contains("`-o -`: raspc writes this output to a file"), "{err}");
    assert!(!std::path::Path::new("-").exists());
}

#[test]
fn misused_inputs_get_a_message_that_says_what_they_are() {
    // A program given where a model goes: not a safetensors file (not a header budget).
    let (code, _, err) = cli(&["run", "corpus/reverse.rasp", "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a safetensors file: it starts with text") && err.contains("raspc compile") && !err.contains("RASPC_LIMITS"), "{err}");
    // A GGUF language model (its magic, version 3, then counts): only `probe svflow` reads it
    // (helper s23: "its first 8 bytes announce a 14064895815-byte header").
    let gguf = temp("lm.gguf");
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend([0u8; 64]);
    std::fs::write(&gguf, &bytes).unwrap();
    for cmd in ["inspect", "trace"] {
        let args: Vec<&str> = if cmd == "trace" { vec![cmd, gguf.to_str().unwrap(), "--input", "ab"] } else { vec![cmd, gguf.to_str().unwrap()] };
        let (code, _, err) = cli(&args);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("it is a GGUF language model: `raspc probe svflow` reads those"), "{cmd}: {err}");
    }
    // A tokenizer's vocab.json object, a vocabulary too large to enumerate.
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "{\"a\": 1}", "--max-len", "3", "-o", temp("v.safetensors").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("looks like a JSON object"), "{err}");
    let big = serde_json::to_string(&(0..5000).map(|i| i.to_string()).collect::<Vec<_>>()).unwrap();
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", &big, "--max-len", "3", "-o", temp("v.safetensors").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("--vocab has 5000 tokens"), "{err}");
    // Real inputs cannot be enumerated.
    let p = temp("exh-real.rasp");
    std::fs::write(&p, "y = tokens_float * 2;\n").unwrap();
    let (code, _, err) = cli(&["verify", p.to_str().unwrap(), "--input-bounds=-1,1", "--max-len", "3", "--exhaustive"]);
    assert_eq!(code, 1);
    assert!(err.contains("--exhaustive enumerates token inputs"), "{err}");
    // A program the interpreter rejects on many inputs compiles, with a warning that says so
    // (and a program that fails on none gets none).
    let p = temp("rejecting.rasp");
    std::fs::write(&p, "x = indices / (indices - 1);\n").unwrap();
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "abc", "--max-len", "4", "-o", temp("rejecting.safetensors").to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: the interpreter rejects") && err.contains("`x` failed on") && err.contains("division by zero"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "4", "-o", temp("accepting.safetensors").to_str().unwrap(), "--force"]);
    assert_eq!((code, err.as_str()), (0, ""));
    // A library-built s-op the program only names (`y = tokens_int;`) is placed at that name,
    // not in the prelude.
    let p = temp("named-lib.rasp");
    std::fs::write(&p, "x = 1;\ny = tokens_int;\n").unwrap();
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--input-bounds=-1,1", "--max-len", "3", "-o", temp("named-lib.safetensors").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("named-lib.rasp:2:1") && !err.contains("<prelude>"), "{err}");
    // A byte-order mark at the start of a program is skipped.
    let p = temp("bom.rasp");
    std::fs::write(&p, "\u{feff}x = indices;\n").unwrap();
    let (code, out, err) = cli(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!((code, out.as_str()), (0, "[0, 1]\n"), "{err}");
    std::fs::write(&p, "\u{feff}x = indices +;\n").unwrap();
    let (code, _, err) = cli(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("bom.rasp:1:14") && !err.contains('\u{feff}'), "{err}");
    // Old Mac line ends (a lone carriage return), as Python reads them: a comment ends at one,
    // and a diagnostic names the right line.
    let p = temp("cr.rasp");
    std::fs::write(&p, "# a comment\rx = indices;\ry = x + 1;\r").unwrap();
    let (code, out, err) = cli(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!((code, out.as_str()), (0, "[1, 2]\n"), "{err}");
    std::fs::write(&p, "x = indices;\ry = x +;\rz = y;\r").unwrap();
    let (code, _, err) = cli(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("cr.rasp:2:8") && !err.contains('\r'), "{err}");
}

#[test]
fn encoding_may_name_an_s_op_that_simplification_rewrote_and_probe_warns_on_another_program() {
    // `opens` (a mean of an indicator, times nothing) is rewritten into widths by the compiler:
    // naming it in --encoding is not an error; a name the program never had still is.
    let p = temp("balanced-enc.rasp");
    std::fs::write(
        &p,
        "opens = aggregate(select(indices, indices, <=), indicator(tokens == \"(\"));\ncloses = aggregate(select(indices, indices, <=), indicator(tokens == \")\"));\nbal = opens - closes;\nprog = aggregate(select(indices, length - 1, ==), bal) == 0;\n",
    )
    .unwrap();
    let p = p.to_str().unwrap();
    let (code, out, err) = cli(&["verify", p, "--vocab", "()", "--max-len", "8", "--samples", "100", "--encoding", "opens=numerical"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0 mismatches"), "{out}");
    let (code, _, err) = cli(&["verify", p, "--vocab", "()", "--max-len", "8", "--samples", "10", "--encoding", "opening=numerical"]);
    assert_eq!(code, 1);
    assert!(err.contains("--encoding names `opening`"), "{err}");
    // probe with a program the model was not compiled from: a warning, as trace gives.
    let ck = temp("probe-warn.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/sort.rasp", "--vocab", "[1,2,3]", "--max-len", "4", "-o", c, "--force"]).0, 0);
    let (code, _, err) = cli(&["probe", "svflow", c, "--program", "corpus/reverse.rasp", "--seeds", "1", "--sequences", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("was not compiled from") && err.contains("the program hashes differ"), "{err}");
    let (_, _, err) = cli(&["probe", "svflow", c, "--program", "corpus/tracr/sort.rasp", "--seeds", "1", "--sequences", "2"]);
    assert!(!err.contains("was not compiled from"), "{err}");
    // A reference that rejects every probed input scores nothing: an error, not a perfect score.
    let rev = temp("probe-rev.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "6", "-o", rev.to_str().unwrap(), "--force"]).0, 0);
    let (code, out, err) = cli(&["probe", "svflow", rev.to_str().unwrap(), "--program", "corpus/sort.rasp", "--seeds", "1", "--sequences", "2"]);
    assert_eq!(code, 1);
    assert!(err.contains("no prediction was scored") && !out.contains("accuracy"), "{err}");
}

#[test]
fn a_numerical_boolean_output_decodes_to_booleans() {
    // `--encoding flags=numerical` stores a boolean s-op as 0/1 in one dim; `run` snaps it to
    // the listed values `[false, true]`, as the interpreter prints it.
    let ck = temp("flags-numerical.safetensors");
    let c = ck.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/constructs.rasp", "--entry", "flags", "--encoding", "flags=numerical", "--vocab", "[1,2,3]", "--max-len", "6", "-o", c, "--force"]);
    assert_eq!(code, 0, "{err}");
    for input in ["[1,2,3]", "[2,2,1,3]", "[3]"] {
        let (_, want, _) = cli(&["eval", "corpus/constructs.rasp", "--entry", "flags", "--input", input, "--json"]);
        let (code, got, err) = cli(&["run", c, "--input", input, "--json"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(got, want);
        assert!(got.contains("true") || got.contains("false"), "{got}");
    }
}

#[test]
fn an_output_that_permutes_the_input_values_compiles() {
    // The readout reads the tokens one-hot, relabelled onto the same set of values in another
    // order: not the input read unchanged (which would keep the input's name).
    for (src, vocab) in
        [("n = 3 - tokens_int;", "[1,2]"), ("n = \"b\" if tokens == \"a\" else \"a\";", "ab"), ("n = (tokens_int + 1) % 3;", "[0,1,2]"), ("n = not tokens_bool;", "[true,false]")]
    {
        let p = temp("permute.rasp");
        std::fs::write(&p, format!("{src}\n")).unwrap();
        let (code, out, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", vocab, "--max-len", "3", "--exhaustive"]);
        assert_eq!(code, 0, "{src}: {err}");
        assert!(out.contains("compiled `n`") && out.contains(", 0 mismatches"), "{src}: {out}");
    }
}

#[test]
fn trace_follows_causal_semantics_and_refuses_non_finite_activations() {
    // A causal model computes, at each position, the program on the prefix ending there: the
    // trace compares with exactly that (as `verify --causal` does).
    let ck = temp("hist-causal.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/tracr/histogram.rasp", "--vocab", "abc", "--max-len", "6", "--causal", "-o", c, "--force"]).0, 0);
    let (code, out, err) = cli(&["trace", c, "--input", "abcab", "--program", "corpus/tracr/histogram.rasp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hist = [1, 1, 1, 2, 2]  (= interpreter)") && agrees_all(&out), "{out}");
    // Weights within the budget whose activations overflow f32: named, not decoded.
    let src = temp("rev-overflow-src.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "6", "-o", src.to_str().unwrap(), "--force"]).0, 0);
    let mut m = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&src).unwrap()).unwrap();
    let mlp = (0..m.config.layers.len()).find(|&l| m.config.layers[l].mlp.is_some()).unwrap();
    for name in ["embed.token".to_string(), raspc_checkpoint::names::mlp(mlp, "w_in"), raspc_checkpoint::names::mlp(mlp, "w_out")] {
        m.tensors.get_mut(&name).unwrap().data.iter_mut().for_each(|x| *x = 1e15);
    }
    let bad = temp("rev-overflow.safetensors");
    std::fs::write(&bad, m.to_bytes().unwrap()).unwrap();
    let (code, _, err) = cli(&["trace", bad.to_str().unwrap(), "--input", "abc"]);
    assert_eq!(code, 1);
    assert!(err.contains("non-finite activation") && err.contains(&format!("layer {mlp} mlp")), "{err}");
}

/// Scores past f32 under hard attention: every key scoring +inf ties, the weights stay finite,
/// and the model decoded garbage with exit status 0 (helper d6: `[1, 1, 1]`); refused now, as
/// soft attention's weights are, on both backends and whatever the head's kind (token, position
/// or general scores). A damaged byte in the readout is a corrupted file, not a readout that
/// "reads dims 0..=51".
#[test]
fn overflowing_scores_and_damaged_data_are_refused() {
    for (prog, vocab, input) in [("corpus/sort.rasp", "[1,2,3,4]", "[3,1,2]"), ("corpus/tracr/histogram.rasp", "abc", "abca"), ("corpus/reverse.rasp", "abc", "abca")] {
        let src = temp("inf-src.safetensors");
        let mut args = vec!["compile", prog, "--vocab", vocab, "--max-len", "8", "-o", src.to_str().unwrap(), "--force"];
        if prog == "corpus/sort.rasp" {
            args.extend(["--entry", "sorted"]);
        }
        assert_eq!(cli(&args).0, 0, "{prog}");
        let bytes = std::fs::read(&src).unwrap();
        let mut m = raspc_checkpoint::Checkpoint::from_bytes(&bytes).unwrap();
        for name in ["embed.token".to_string(), "embed.position".to_string(), raspc_checkpoint::names::head(0, 0, "w_q"), raspc_checkpoint::names::head(0, 0, "w_k")] {
            m.tensors.get_mut(&name).unwrap().data.iter_mut().filter(|x| **x != 0.0).for_each(|x| *x = 1e15f32.copysign(*x));
        }
        let bad = temp("inf-scores.safetensors");
        std::fs::write(&bad, m.to_bytes().unwrap()).unwrap();
        let (code, out, err) = cli(&["run", bad.to_str().unwrap(), "--input", input]);
        assert_eq!(code, 1, "{prog}: {out}");
        assert!(err.contains("non-finite activation") && err.contains("layer 0 attention (attention scores)"), "{prog}: {err}");
        // `trace` refuses the same (it printed the overflowing stream, exit 0: helper b21).
        for extra in [&[][..], &["--json"][..], &["--attention", "soft"][..]] {
            let (code, out, err) = cli(&[&["trace", bad.to_str().unwrap(), "--input", input][..], extra].concat());
            assert_eq!(code, 1, "{prog} {extra:?}: {out}");
            assert!(err.contains("non-finite activation") && err.contains("layer 0 attention"), "{prog} {extra:?}: {err}");
        }
        let model = raspc_runtime::Model::new(m.clone(), &raspc_runtime::Device::Cpu).unwrap();
        let candle = raspc_runtime::Model::new(m, &raspc_runtime::Device::Cpu).unwrap().with_backend(raspc_runtime::Backend::Candle).unwrap();
        let tokens: Vec<serde_json::Value> =
            serde_json::from_str(&if input.starts_with('[') { input.to_string() } else { format!("{:?}", input.chars().map(String::from).collect::<Vec<_>>()) }).unwrap();
        for (which, m) in [("fast", &model), ("candle", &candle)] {
            let e = m.run(&tokens, raspc_runtime::Attention::Hard).unwrap_err().to_string();
            assert!(e.contains("layer 0 attention (attention scores)"), "{prog} {which}: {e}");
        }
        if prog == "corpus/tracr/histogram.rasp" {
            // Only the last token's scores overflow: an input without it runs (the same on both
            // backends), one with it is refused (the fast backend refused both: review).
            let mut m = raspc_checkpoint::Checkpoint::from_bytes(&bytes).unwrap();
            let d = m.config.d_model;
            let last = m.config.vocab.len() - 1;
            m.tensors.get_mut("embed.token").unwrap().data[last * d..(last + 1) * d].iter_mut().filter(|x| **x != 0.0).for_each(|x| *x = 1e15f32.copysign(*x));
            for name in [raspc_checkpoint::names::head(0, 0, "w_q"), raspc_checkpoint::names::head(0, 0, "w_k")] {
                m.tensors.get_mut(&name).unwrap().data.iter_mut().filter(|x| **x != 0.0).for_each(|x| *x = 1e12f32.copysign(*x));
            }
            let fast = raspc_runtime::Model::new(m.clone(), &raspc_runtime::Device::Cpu).unwrap();
            let candle = raspc_runtime::Model::new(m, &raspc_runtime::Device::Cpu).unwrap().with_backend(raspc_runtime::Backend::Candle).unwrap();
            let without: Vec<serde_json::Value> = serde_json::from_str(r#"["a","b","a","b"]"#).unwrap();
            let with: Vec<serde_json::Value> = serde_json::from_str(r#"["a","c","a","b"]"#).unwrap();
            let a = fast.run(&without, raspc_runtime::Attention::Hard).unwrap();
            let b = candle.run(&without, raspc_runtime::Attention::Hard).unwrap();
            assert_eq!(a.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>(), b.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>());
            for m in [&fast, &candle] {
                assert!(m.run(&with, raspc_runtime::Attention::Hard).unwrap_err().to_string().contains("attention scores"));
            }
        }
        // One byte of the readout's data flipped.
        let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let meta: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header]).unwrap();
        let at = 8 + header + meta["readout"]["data_offsets"][0].as_u64().unwrap() as usize;
        let mut flipped = bytes.clone();
        flipped[at + 3] ^= 0x3f;
        std::fs::write(&bad, &flipped).unwrap();
        let (code, _, err) = cli(&["run", bad.to_str().unwrap(), "--input", input]);
        assert_eq!(code, 1);
        assert!(err.contains("does not match its integrity hash") && err.contains("the file is corrupted"), "{prog}: {err}");
    }
}

#[test]
fn inspect_shows_every_bias_small_weights_and_escapes_control_characters() {
    let src = temp("insp-src.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "6", "-o", src.to_str().unwrap(), "--force"]).0, 0);
    let mut m = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&src).unwrap()).unwrap();
    let l = (0..m.config.layers.len()).find(|&l| m.config.layers[l].mlp.is_some()).unwrap();
    m.tensors.get_mut(&raspc_checkpoint::names::mlp(l, "b_out")).unwrap().data[0] = 0.25;
    let w_in = m.tensors.get_mut(&raspc_checkpoint::names::mlp(l, "w_in")).unwrap();
    let nz = w_in.data.iter().position(|&x| x != 0.0).unwrap();
    w_in.data[nz] = 1e-4;
    let i = m.layout.sops.iter().position(|s| s.label == "opp_index").unwrap();
    m.layout.sops[i].label = "opp\u{1b}[31mRED".into();
    for info in m.config.layers.iter_mut().flat_map(|x| x.mlp_info.iter_mut().chain(x.head_info.iter_mut())) {
        if info.writes == "opp_index" {
            info.writes = "opp\u{1b}[31mRED".into();
        }
    }
    let p = temp("insp.safetensors");
    std::fs::write(&p, m.to_bytes().unwrap()).unwrap();
    let (code, out, err) = cli(&["inspect", p.to_str().unwrap(), "--layer", &l.to_string(), "--mlp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("layers.{l}.mlp.b_out")) && out.contains("0.25"), "{out}");
    assert!(out.contains("1.0e-4") && !out.contains('\u{1b}'), "{out}");
    let (code, out, _) = cli(&["inspect", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(!out.contains('\u{1b}') && out.contains("\\u{1b}"), "{out}");
    // An error that quotes a label escapes it too (helper b10: an output label that is not in
    // the layout reached the terminal raw through the metadata error).
    let bytes = std::fs::read(&src).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let output = header["__metadata__"]["output"].as_str().unwrap().replace("\"reverse\"", "\"rev\\u001b[31mRED\\u0007\"");
    header["__metadata__"]["output"] = serde_json::Value::String(output);
    let text = serde_json::to_vec(&header).unwrap();
    let q = temp("insp-bad-output.safetensors");
    std::fs::write(&q, [&(text.len() as u64).to_le_bytes()[..], &text, &bytes[8 + n..]].concat()).unwrap();
    let (code, _, err) = cli(&["run", q.to_str().unwrap(), "--input", "abc"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("output label") && err.contains("rev\\u{1b}[31mRED\\u{7}") && !err.contains('\u{1b}') && !err.contains('\u{7}'), "{err}");
    // A long categorical list is cut in the text (`--json` has every value).
    let wide = temp("insp-wide.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "64", "-o", wide.to_str().unwrap(), "--force"]).0, 0);
    let (code, out, _) = cli(&["inspect", wide.to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.contains(" indices ")).unwrap();
    assert!(line.ends_with(", …, 63] (64 values)") && line.len() < 200, "{line}");
    let (_, json, _) = cli(&["inspect", wide.to_str().unwrap(), "--json"]);
    assert!(json.contains("62,63]") || json.contains("62, 63]"), "inspect --json lists every value");
    // The SVG figures escape it too (ESC is not allowed in XML: overview.svg was ill-formed).
    let svg = temp("insp-svg");
    let (code, _, err) = cli(&["plot", p.to_str().unwrap(), "-o", svg.to_str().unwrap(), "--format", "svg"]);
    assert_eq!(code, 0, "{err}");
    for f in std::fs::read_dir(&svg).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r'), "a control character in an SVG");
    }
    let overview = std::fs::read_to_string(svg.join("overview.svg")).unwrap();
    assert!(overview.contains("opp\\u{1b}[31mRED"), "{overview}");
    // A line break in a label cannot forge a line of the report: it is shown escaped.
    let (code, before, _) = cli(&["inspect", src.to_str().unwrap()]);
    assert_eq!(code, 0);
    let j = m.layout.sops.iter().position(|s| s.label == "length").unwrap();
    m.layout.sops[j].label = "length\nlayer 9: forged".into();
    for info in m.config.layers.iter_mut().flat_map(|x| x.mlp_info.iter_mut().chain(x.head_info.iter_mut())) {
        for r in info.reads.iter_mut().chain(std::iter::once(&mut info.writes)) {
            if r == "length" {
                *r = "length\nlayer 9: forged".into();
            }
        }
    }
    std::fs::write(&p, m.to_bytes().unwrap()).unwrap();
    for args in [vec!["inspect", p.to_str().unwrap()], vec!["inspect", p.to_str().unwrap(), "--layer", &l.to_string(), "--mlp"]] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        assert!(!out.lines().any(|x| x.starts_with("layer 9")), "{out}");
        assert!(args.len() > 2 || out.contains("length\\nlayer 9: forged"), "{out}");
    }
    assert_eq!(before.lines().count(), cli(&["inspect", p.to_str().unwrap()]).1.lines().count());
}

/// The last line of a `trace` in which every compared s-op agreed, and at least one was compared.
fn agrees_all(out: &str) -> bool {
    out.lines().last().is_some_and(|l| {
        l.starts_with("trace: every s-op agrees with the interpreter (") && (l.ends_with(" compared)") || l.ends_with(" compared, and the readout)")) && !l.contains("(0 compared")
    })
}

/// `trace --entry`: a selector is refused (trace compares s-ops); an s-op other than the model's
/// output is compared only by name (a note says so), never as the output's slot.
#[test]
fn trace_entry_is_compared_by_what_the_model_holds() {
    let ck = temp("rev-entry.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "6", "-o", c, "--force"]).0, 0);
    let p = "corpus/reverse.rasp";
    let (code, _, err) = cli(&["trace", c, "--input", "abc", "--program", p, "--entry", "flip"]);
    assert_eq!(code, 1);
    assert!(err.contains("`flip` is a selector") && err.contains("`reverse`"), "{err}");
    // opp_index is an s-op the model holds: it agrees, and the output is not compared with it.
    let (code, out, err) = cli(&["trace", c, "--input", "abc", "--program", p, "--entry", "opp_index"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("note: the model computes `reverse`") && agrees_all(&out), "{out}{err}");
}

/// `trace` ends with what the readout decodes (what `run` prints), compared with the program's
/// output: an output map folded into the readout has no slot of its own, and was never shown
/// nor compared while trace said every s-op agreed (helper t22).
#[test]
fn trace_compares_the_readout() {
    let dir = temp("trace-readout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::fs::read_to_string("corpus/reverse.rasp").unwrap();
    let (good, bad) = (dir.join("good.rasp"), dir.join("bad.rasp"));
    std::fs::write(&good, format!("{src}\nout2 = reverse == \"a\";\n")).unwrap();
    std::fs::write(&bad, format!("{src}\nout2 = reverse == \"b\";\n")).unwrap();
    let ck = dir.join("out2.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", good.to_str().unwrap(), "--vocab", "abc", "--max-len", "4", "-o", c, "--force"]).0, 0);
    let (code, out, err) = cli(&["trace", c, "--input", "abc", "--program", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("the readout:\n  out2 = [False, False, True]  (= interpreter)\n") && agrees_all(&out), "{out}");
    // The same model against a program whose `out2` differs: the stream agrees up to `reverse`,
    // the readout does not.
    let (code, out, err) = cli(&["trace", c, "--input", "abc", "--program", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("reverse = ['c', 'b', 'a']  (= interpreter)") && out.ends_with("trace: first divergence at `out2` after the readout\n"), "{out}");
    let (code, out, _) = cli(&["trace", c, "--input", "abc", "--program", bad.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["first_divergence"], serde_json::json!({ "stage": "the readout", "sop": "out2" }), "{out}");
    // Whole numbers print as `run` prints them (not `[1.0, 2.0, 3.0]`).
    let sort = dir.join("sort.safetensors");
    assert_eq!(cli(&["compile", "corpus/sort.rasp", "--vocab", "[1,2,3]", "--max-len", "4", "-o", sort.to_str().unwrap(), "--force"]).0, 0);
    let (code, out, err) = cli(&["trace", sort.to_str().unwrap(), "--input", "[3,1,2]", "--program", "corpus/sort.rasp"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("\n  sorted = [1, 2, 3]  (= interpreter)\n") && agrees_all(&out), "{out}");
}

/// The `.unselected` helper of a real-valued head holds a set (a 1 for each key group the query
/// leaves out): its layout entry is `multi_hot`, and the trace decodes it as that set, not as a
/// one-hot "shown by its largest dim" at every position (helper t22). The sets are checked
/// against the program's selector: key k is selected by query p (same row of the square
/// matrix) exactly when k's key group is not in p's set.
#[test]
fn multi_hot_helpers_are_declared_and_traced_as_sets() {
    let dir = temp("multi-hot");
    std::fs::create_dir_all(&dir).unwrap();
    let ck = dir.join("sm.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/paper/softmax_rows.rasp", "--input-bounds=-1,1", "--max-len", "9", "-o", c, "--force"]).0, 0);
    let (code, out, err) = cli(&["inspect", c, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let layout = v["layout"].as_array().expect("layout");
    let kind = |suffix: &str| layout.iter().filter(|e| e["label"].as_str().unwrap().ends_with(suffix)).map(|e| e["encoding"]["kind"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(kind(".unselected"), ["multi_hot"], "{out}");
    assert_eq!(kind(".keygroup"), ["categorical"], "{out}");
    for (input, side) in [("[0.5,-0.5,0.25,1]", 2), ("[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9]", 3)] {
        let (code, out, err) = cli(&["trace", c, "--input", input, "--program", "corpus/paper/softmax_rows.rasp", "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let rows = v["trace"].as_array().unwrap();
        assert!(rows.iter().all(|r| r["not_one_hot"].as_array().is_some_and(Vec::is_empty)), "{out}");
        let values = |suffix: &str| rows.iter().find(|r| r["sop"].as_str().unwrap().ends_with(suffix)).unwrap()["values"].as_array().unwrap().clone();
        let (groups, unselected) = (values(".keygroup"), values(".unselected"));
        let n = side * side;
        assert_eq!((groups.len(), unselected.len()), (n, n));
        for (p, set) in unselected.iter().enumerate() {
            let set = set.as_array().expect("a set");
            for (k, group) in groups.iter().enumerate() {
                assert_eq!(!set.contains(group), k / side == p / side, "query {p}, key {k}: {out}");
            }
        }
    }
}

/// An error inside a loaded file shows the `load` that read it, as a parse error there does, and
/// a failure inside a function the program's call of it (helper t22: neither was shown).
#[test]
fn errors_in_loaded_files_and_functions_show_where_they_were_reached() {
    let dir = temp("loaded-errors");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("libtop.rasp"), "x = 1;\nz = x + undefined_thing;\n").unwrap();
    std::fs::write(dir.join("m1.rasp"), "load \"libtop\";\ny = tokens;\n").unwrap();
    let (code, _, err) = cli(&["eval", dir.join("m1.rasp").to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown name `undefined_thing`") && err.contains("m1.rasp:1:6") && err.contains("in the file loaded here"), "{err}");
    std::fs::write(dir.join("libg.rasp"), "def g(a) {\n  return 1 / (a - 1);\n}\n").unwrap();
    std::fs::write(dir.join("m2.rasp"), "load \"libg\";\ny = g(indices) + 1;\n").unwrap();
    let (code, _, err) = cli(&["eval", dir.join("m2.rasp").to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("division by zero") && err.contains("m2.rasp:2:5") && err.contains("in this call"), "{err}");
}

/// A refusal of an s-op the user already forced numerical does not propose that flag again nor
/// speak of a categorical encoding (helper a21).
#[test]
fn an_unbounded_numerical_sop_is_not_told_to_be_numerical() {
    let args = ["verify", "corpus/paper/softmax_rows.rasp", "--vocab", "[-1,0,1]", "--max-len", "9", "--samples", "10"];
    let (code, _, err) = cli(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`softmax` takes too many values to list") && err.contains("`--encoding NAME=numerical`"), "{err}");
    let forced = [&args[..], &["--encoding", "softmax=numerical"]].concat();
    let (code, _, err) = cli(&forced);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`--encoding softmax=numerical` keeps it in one dim") && !err.contains("NAME=numerical") && !err.contains("a categorical encoding"), "{err}");
}

/// Notes come in the order of the program's text (helper t22: the parser's before the
/// evaluator's, 1:12, 3:7, 2:1).
#[test]
fn notes_follow_the_source() {
    let p = temp("notes-order.rasp");
    std::fs::write(&p, "a = tokens;;\nset example \"x\";\nb = a;;\n").unwrap();
    let (code, _, err) = cli(&["eval", p.to_str().unwrap(), "--input", "ab"]);
    assert_eq!(code, 0, "{err}");
    let at: Vec<&str> = err.lines().filter(|l| l.starts_with("note: ")).map(|l| l.split(':').nth(2).unwrap_or_default()).collect();
    assert_eq!(at, ["1", "2", "3"], "{err}");
}

/// An output path that names a folder (`newd/`, `x/.`) is refused before any work, saying so,
/// not with "Not a directory (os error 20)" after it; `probe --plot -` is refused as `plot -o -`
/// is, and `probe --entry` needs `--program` as `trace --entry` does (helper t22).
#[test]
fn outputs_that_name_folders_are_refused_first() {
    let dir = temp("folder-outputs");
    std::fs::create_dir_all(&dir).unwrap();
    let ck = dir.join("rev.safetensors");
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", ck.to_str().unwrap(), "--force"]).0, 0);
    let new = |name: &str| format!("{}/{name}", dir.display());
    for args in [
        vec!["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", &new("c/")],
        vec!["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", &new("c2/.")],
        vec!["simulate", "--n", "2", "--d", "2", "--dv", "2", "--trials", "1", "-o", &new("s/")],
        vec!["export", ck.to_str().unwrap(), "--to", "onnx", "-o", &new("e/")],
    ] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.contains("the path names a folder") && !err.contains("os error") && out.is_empty(), "{args:?}: {out}{err}");
    }
    for name in ["c", "c2", "s", "e"] {
        assert!(!dir.join(name).exists(), "{name} was made");
    }
    // `plot -o` through a file, or at a link (dangling or to a file): said plainly (helper dt26:
    // "Not a directory (os error 20)", "File exists (os error 17)").
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let _ = std::fs::remove_file(dir.join("dangling"));
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
    for (out, says) in [(new("notes.txt/figs"), "notes.txt` is not a folder".to_string()), (new("dangling"), "is a symbolic link".to_string())] {
        let (code, _, err) = cli(&["plot", ck.to_str().unwrap(), "-o", &out]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(&says) && !err.contains("os error"), "{out}: {err}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine");
    let (code, _, err) = cli(&["probe", "svflow", ck.to_str().unwrap(), "--plot", "-"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("`--plot -`") && err.contains("`./-`"), "{err}");
    assert!(!std::path::Path::new("-").exists());
    let (code, _, err) = cli(&["probe", "svflow", ck.to_str().unwrap(), "--entry", "reverse"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--program"), "{err}");
}

/// U whose intermediate values overflow is refused in terms of the bounds given, not by an
/// s-op of U's own source that the user never wrote (`e`; helpers b21, p22).
#[test]
fn an_overflowing_u_names_the_bounds() {
    let (code, _, err) = cli(&["simulate", "--n", "2", "--d", "2", "--dv", "2", "--bound", "1e30", "--trials", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("X within ±1e30, A within ±1e30, V within ±1e30") && err.contains("pass any float's range") && !err.contains("`e`"), "{err}");
}

/// `--mlp gated` and `--pl-error` on a token program change nothing: said, not silently ignored.
#[test]
fn gated_mlps_on_a_token_program_are_a_warning() {
    let ck = temp("rev-gated.safetensors");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "--mlp", "gated", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: --mlp gated changes nothing here"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "--pl-error", "0.1", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: --pl-error changes nothing here"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
}

/// A negative number for an option says so (clap's tip `-- -1` does not work), and a number that
/// does not parse is described in words, not Rust's "invalid digit found in string" (helper t).
#[test]
fn a_negative_number_for_an_option_is_named() {
    let (code, _, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "--seed", "-1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--seed does not take a negative number (got -1)") && !err.contains("'-- -1'"), "{err}");
    let (code, _, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "abc", "--max-len=-3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("expected a whole number (0, 1, 2, ...)") && !err.contains("invalid digit"), "{err}");
    // A negative number where one is allowed is still read.
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "['1', '-']\n");
}

/// `compile --bounds` prints small interval ends in exponent form ([0, 1e-6] was `[0.0000,
/// 0.0000]`: helper h8), and `aggregate_max` under --causal says both what to add and what to drop.
#[test]
fn bounds_print_small_intervals_and_aggregate_max_advice_fits_causal() {
    let p = temp("tiny.rasp");
    std::fs::write(&p, "x = tokens_float;\ny = x if x > 0.0000005 else 0;\n").unwrap();
    let o = temp("tiny.safetensors");
    let (code, out, err) = cli(&["compile", p.to_str().unwrap(), "--input-bounds=-0.000001,0.000001", "--max-len", "2", "-o", o.to_str().unwrap(), "--force", "--bounds"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("y: [0.0000, 1.0000e-6] err 5.000e-7"), "{out}");
    let m = temp("amax.rasp");
    std::fs::write(&m, "y = aggregate_max(select(indices, indices, <=), tokens_int);\n").unwrap();
    let (code, _, err) = cli(&["compile", m.to_str().unwrap(), "--vocab", "[1,2]", "--max-len", "4", "--causal", "-o", o.to_str().unwrap(), "--force"]);
    assert_eq!(code, 1);
    assert!(err.contains("drop --causal"), "{err}");
}

#[test]
fn with_json_a_failure_is_one_error_object_on_stdout() {
    // The error object a script reads instead of parsing stderr: the message, the exit code,
    // the diagnostics with their places, and the text stderr got (which is unchanged).
    let p = temp("json-error.rasp");
    let src = "x = tokens;\ny = select(indices, indices ==);\n";
    std::fs::write(&p, src).unwrap();
    let p = p.to_str().unwrap();
    let error_of = |out: &str| -> serde_json::Value {
        assert_eq!(out.lines().count(), 1, "{out}");
        let v: serde_json::Value = serde_json::from_str(out).unwrap();
        v["error"].clone()
    };
    for args in [vec!["eval", p, "--input", "ab", "--json"], vec!["compile", p, "--vocab", "ab", "--max-len", "3", "-o", "unused.safetensors", "--json"]] {
        let (code, out, err) = cli(&args);
        assert_eq!(code, 1, "{err}");
        let e = error_of(&out);
        assert_eq!(e["exit_code"], 1);
        assert_eq!(e["message"], "expected an expression, found `)`");
        let label = &e["diagnostics"][0]["labels"][0];
        // The `)` after `==`: line 2, column 1 + its character offset in the line.
        let column = src.lines().nth(1).unwrap().find(')').unwrap() + 1;
        assert_eq!((label["file"].as_str(), label["line"].as_u64(), label["column"].as_u64()), (Some(p), Some(2), Some(column as u64)), "{e}");
        assert_eq!(e["diagnostics"][0]["code"], "parse::expected");
        assert_eq!(e["stderr"].as_str(), Some(err.as_str()));
        assert!(err.contains("error[parse::expected]"), "{err}");
    }
    // A message error, and a usage error (exit 2).
    let (code, out, _) = cli(&["run", "no/such.safetensors", "--input", "ab", "--json"]);
    assert_eq!(code, 1);
    assert!(error_of(&out)["message"].as_str().unwrap().starts_with("cannot read `no/such.safetensors`"), "{out}");
    let (code, out, _) = cli(&["eval", p, "--input", "ab", "--json", "--bogus"]);
    assert_eq!(code, 2);
    let e = error_of(&out);
    assert_eq!((e["exit_code"].as_i64(), e["message"].as_str()), (Some(2), Some("unexpected argument '--bogus' found")));
    // A command that prints its own object when it fails (verify's `ok: false`) prints only it.
    let bad = temp("json-error-verify.rasp");
    std::fs::write(&bad, "y = 1 / (indices - 1);\n").unwrap();
    let (code, out, _) = cli(&["verify", bad.to_str().unwrap(), "--vocab", "ab", "--max-len", "3", "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v.get("error").is_none() && v["ok"] == false, "{out}");
    // Without --json, stdout stays empty on failure.
    let (code, out, _) = cli(&["eval", p, "--input", "ab"]);
    assert_eq!((code, out.as_str()), (1, ""));
}

#[test]
fn inspect_layer_without_a_block_is_a_usage_error() {
    let ck = temp("inspect-usage.safetensors");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let ck = ck.to_str().unwrap();
    // Like clap's own `--head` without `--layer`: exit 2, with the usage line.
    let (code, _, err) = cli(&["inspect", ck, "--layer", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--layer needs --head H (an attention head) or --mlp") && err.contains("Usage: raspc inspect"), "{err}");
    let (code, _, err) = cli(&["inspect", ck, "--head", "0"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = cli(&["inspect", ck, "--layer", "0", "--mlp"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.is_empty());
    // The other name of -o, as on compile, export and simulate.
    let dir = temp("inspect-usage-plots");
    let (code, _, err) = cli(&["plot", ck, "--output", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(dir.join("overview.png").exists());
}

#[test]
fn a_number_a_rounding_away_from_a_token_names_the_token() {
    // np.linspace(0, 1, 11) gives 0.30000000000000004 for the grid's 0.3, and a float32 array
    // 0.10000000149011612 for 0.1 (helper c13): the refusal names the token and the gap.
    let p = temp("grid-near.rasp");
    std::fs::write(&p, "y = tokens_float * 2;\n").unwrap();
    let ck = temp("grid-near.safetensors");
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--input-grid", "0,1,0.1", "--max-len", "4", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let ck = ck.to_str().unwrap();
    let sum = 0.1f64 + 0.2;
    let (code, _, err) = cli(&["run", ck, "--input", &format!("[{sum:?}]")]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("the nearest token is 0.3, {:.1e} away", sum - 0.3)), "{err}");
    let single = f64::from(0.1f32);
    let (_, _, err) = cli(&["run", ck, "--input", &format!("[{single:?}]")]);
    assert!(err.contains("the nearest token is 0.1") && err.contains("float32 value"), "{err}");
    // A number far from every token gets no such hint.
    let (_, _, err) = cli(&["run", ck, "--input", "[0.35]"]);
    assert!(err.contains("not in the model's vocabulary") && !err.contains("nearest"), "{err}");
}

#[test]
fn inspect_shows_the_input_bounds_a_real_valued_model_is_certified_for() {
    let p = temp("inspect-real.rasp");
    std::fs::write(&p, "y = softmax_rows(tokens_float, 0, 2, 3, 1);\n").unwrap();
    let ck = temp("inspect-real.safetensors");
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--input-bounds=-1,1;-0.5,0.5@2:4", "--max-len", "6", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&["inspect", ck.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("real-valued input: numbers in [-1, 1]; [-0.5, 0.5] at positions 2..4"), "{out}");
    let (_, out, _) = cli(&["inspect", ck.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &j["config"]["real_input"];
    assert_eq!((r["lo"].as_f64(), r["hi"].as_f64(), r["blocks"][0]["start"].as_u64()), (Some(-1.0), Some(1.0), Some(2)), "{r}");
    assert!(j["config"]["readout_dims"].as_u64().is_some_and(|d| d >= 1), "{}", j["config"]);
}

#[test]
fn trace_marks_a_one_hot_slot_split_between_values_as_a_divergence() {
    // reverse's `length` comes from a head writing 1/(length+1) and an MLP reading it: the head
    // scaled by 0.9 leaves `length` between two values (0.5 each at length 3), whose argmax is
    // the interpreter's 3 (helper f13: trace said it agreed, and marked `reverse`, two
    // sublayers later, as the first divergence).
    let path = temp("reverse-trace.safetensors");
    let o = path.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "5", "-o", o, "--force"]).0, 0);
    let (code, out, err) = cli(&["trace", o, "--input", "abc", "--program", "corpus/reverse.rasp"]);
    assert_eq!(code, 0, "{err}");
    assert!(agrees_all(&out) && !out.contains("not one-hot"), "{out}");
    let mut ck = raspc_checkpoint::Checkpoint::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
    let head = ck.config.layers[0].head_info.iter().position(|i| i.writes.ends_with(":inverse")).expect("a head writing length's inverse");
    ck.tensors.get_mut(&raspc_checkpoint::names::head(0, head, "w_o")).unwrap().data.iter_mut().for_each(|x| *x *= 0.9);
    let broken = temp("reverse-trace-broken.safetensors");
    std::fs::write(&broken, ck.to_bytes().unwrap()).unwrap();
    let (code, out, _) = cli(&["trace", broken.to_str().unwrap(), "--input", "abc", "--program", "corpus/reverse.rasp", "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["first_divergence"]["stage"].as_str(), v["first_divergence"]["sop"].as_str()), (Some("layer 0 mlp"), Some("length")), "{out}");
    let row = v["trace"].as_array().unwrap().iter().find(|r| r["sop"] == "length").unwrap();
    assert_eq!(row["not_one_hot"], serde_json::json!([0, 1, 2]), "{row}");
    // Soft attention blurs one-hots by design: no such mark there.
    let (_, out, _) = cli(&["trace", o, "--input", "abc", "--program", "corpus/reverse.rasp", "--attention", "soft"]);
    assert!(!out.contains("not one-hot"), "{out}");
}

#[test]
fn values_read_again_and_again_compile_without_growing_as_trees() {
    // A value read several times by an s-op read several times again is a DAG; walked as a tree
    // it doubles per round (helper d13: 16 rounds of `x if x > 3 else x + 1` took 27 s, 18
    // never finished; 30 rounds of `(s and t) or s` tried to allocate 4 GiB). 40 rounds each,
    // checked against the interpreter on every input.
    let cases = [
        ("dag-ternary.rasp", "x = indices;\nfor i in range(40) { x = x if x > 3 else x + 1; }\n"),
        ("dag-mod.rasp", "x = tokens_int;\nfor i in range(40) { x = (x + x) % 5; }\n"),
        ("dag-select.rasp", "s = select(tokens, tokens, ==);\nfor i in range(40) { s = (s and select(indices, indices, <=)) or s; }\ny = aggregate(s, tokens_int, 0);\n"),
        // (as a select's key: review rv18, through other walks of positional s-ops)
        ("dag-key.rasp", "x = indices;\nfor i in range(40) { x = x if x > 3 else x + 1; }\ny = aggregate(select(x, indices, ==), tokens_int, 0);\n"),
    ];
    for (name, src) in cases {
        let p = temp(name);
        std::fs::write(&p, src).unwrap();
        let (code, out, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", "[1,2,3]", "--max-len", "5", "--exhaustive"]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(out.contains("0 mismatches"), "{name}: {out}");
    }
    // Real-valued expressions are trees by design: past a budget the s-op is refused by name.
    let p = temp("dag-real.rasp");
    std::fs::write(&p, "x = tokens_float;\nfor i in range(24) { x = (x + x) * 0.5; }\n").unwrap();
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--input-bounds=-1,1", "--max-len", "4", "-o", temp("dag-real.safetensors").to_str().unwrap(), "--force"]);
    assert_eq!(code, 1);
    assert!(err.contains("grows to more than 1048576 operations") && err.contains("dag-real.rasp:2:"), "{err}");
}

#[test]
fn a_map_of_indices_and_length_counts_only_the_pairs_an_input_reaches() {
    // Rows of a square laid out flat: a map of `indices` and `length` enumerates only pairs with
    // index < length (helper d13: refused from max-len 91, counting 91² = 8,281 pairs against
    // 8,192, of which 4,186 occur; at 127, 8,128 occur).
    let p = temp("rowmean.rasp");
    std::fs::write(&p, "n = length ^ 0.5;\nrow = (indices - indices % n) / n;\ntotal = aggregate(select(row, row, ==), tokens_int);\n").unwrap();
    let (code, out, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", "[1,2,3]", "--max-len", "100", "--samples", "40"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verified: 40 inputs, 0 mismatches"), "{out}");
}

/// An output whose folder is missing gets the folder (as `plot -o` did already), and one whose
/// path runs through a file is refused before any work; `--input` naming a file is warned
/// about, since it is the input itself (helper c19: `probe -o new/report.json` ran the whole
/// probe and then could not write; `eval --input in.json` evaluated the 7 characters).
#[test]
fn outputs_make_their_folders_and_input_files_are_warned_about() {
    let dir = std::env::temp_dir().join(format!("raspc-cli-folders-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("new/deeper/rev.safetensors");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_file());
    let report = dir.join("reports/probe.json");
    let (code, _, err) = cli(&["probe", "svflow", out.to_str().unwrap(), "--levels", "0", "--seeds", "1", "--sequences", "1", "-o", report.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(report.is_file());
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", file.join("rev.safetensors").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a folder"), "{err}");
    let input = dir.join("in.json");
    std::fs::write(&input, "[\"a\", \"b\"]").unwrap();
    let (code, stdout, err) = cli(&["eval", "corpus/reverse.rasp", "--input", input.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is a file, but --input takes the input itself"), "{err}");
    assert!(stdout.starts_with("['n', 'o', 's', 'j', '.', 'n', 'i'"), "the name's characters, reversed: {stdout}");
    let (_, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "ab"]);
    assert!(!err.contains("warning"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `--json` error object's message carries the list clap's message announces (helper c19:
/// "the following required arguments were not provided:" ended at the colon).
#[test]
fn json_errors_name_the_missing_flags() {
    let (code, out, _) = cli(&["compile", "corpus/reverse.rasp", "--json", "--max-len", "5", "-o", "unused.safetensors"]);
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["error"]["message"], "the following required arguments were not provided: --vocab <VOCAB>", "{out}");
}

/// A malformed `--encoding`, `--input-grid` or `--input-bounds` is a usage error (exit status 2,
/// as README says of malformed values), naming the flag (helper c19: they exited 1); numbers
/// of the right form that make no range or grid are values refused (exit status 1, as
/// `--max-len 0` and a grid whose HI is not on it; helper t22: 1,0,0.5 exited 2, 0,1,0.3 1).
#[test]
fn malformed_flag_values_are_usage_errors() {
    for (flag, want) in [
        ("--encoding=foo", 2),
        ("--encoding=x=num", 2),
        ("--input-grid=abc", 2),
        ("--input-grid=1,2", 2),
        ("--input-bounds=abc", 2),
        ("--input-grid=1,0,0.5", 1),
        ("--input-grid=0,1,0", 1),
        ("--input-grid=0,1,0.3", 1),
        ("--input-bounds=1,0", 1),
    ] {
        let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--max-len", "4", flag, "-o", "unused.safetensors"]);
        let name = flag.split('=').next().unwrap();
        assert_eq!(code, want, "{flag}: {err}");
        assert!(err.contains(&format!("bad {name}")), "{flag}: {err}");
    }
}

/// `tokens_bool` over `--vocab 01` is True for every token (Python's bool of a non-empty
/// string): compile and verify say so; over booleans they do not (helper a20).
#[test]
fn a_token_conversion_constant_over_the_vocabulary_is_warned_about() {
    let p = temp("tokens_bool.rasp");
    std::fs::write(&p, "x = tokens_bool;\nprog = aggregate(select(indices, indices, <=), indicator(x)) == 1;\n").unwrap();
    let o = temp("tokens_bool.safetensors");
    for (vocab, warned) in [("01", true), ("[true,false]", false)] {
        let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", vocab, "--max-len", "4", "-o", o.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(err.contains("warning: `tokens_bool` is True for every token of the vocabulary ('0', '1')"), warned, "{vocab}: {err}");
        let (code, _, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", vocab, "--max-len", "4", "--samples", "20"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(err.contains("is True for every token"), warned, "{vocab}: {err}");
    }
    // A token the conversion fails on is not "the same value" (review rv20: `tokens_int` was said
    // to be 1 for '1' and 'a'); the rejected inputs are warned about instead.
    std::fs::write(&p, "prog = tokens_int == 1;\n").unwrap();
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "1a", "--max-len", "4", "-o", o.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("for every token") && err.contains("rejects"), "{err}");
}

/// A certified bound that is small beside the output's certified range but not beside the values
/// the program gives (the paper's rectangular softmax at max-len 12: 0.65 against outputs up to
/// 3, a range reaching 22.8) is warned about; the row softmax's 2e-2 is not (helper a20).
#[test]
fn a_bound_large_beside_the_outputs_seen_is_warned_about() {
    let o = temp("softmax.safetensors");
    for (file, max_len, warned) in [("paper/softmax_rect.rasp", "12", true), ("paper/softmax_rows.rasp", "9", false)] {
        let path = raspc_tests::corpus(file);
        let (code, _, err) = cli(&["compile", path.to_str().unwrap(), "--input-bounds=-1,1", "--mlp", "gated", "--max-len", max_len, "-o", o.to_str().unwrap(), "--force"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(err.contains("of the largest output the program gives on 48 sampled inputs"), warned, "{file}: {err}");
    }
}

/// Without --entry, compile and verify take the last s-op assigned, skipping a selector assigned
/// after it (review b24: the selector was taken, then refused); eval still shows the selector.
#[test]
fn default_entry_of_compile_skips_a_trailing_selector() {
    let p = temp("trailing-selector.rasp");
    std::fs::write(&p, "y = indices * 3;\nz = select(indices, indices, ==);\nn = 5;\n").unwrap();
    let p = p.to_str().unwrap();
    let (code, out, err) = cli(&["verify", p, "--vocab", "ab", "--max-len", "4", "--samples", "20"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 20 inputs, 0 mismatches\n"), "{out}");
    let ck = temp("trailing-selector.safetensors");
    let (code, out, err) = cli(&["compile", p, "--vocab", "ab", "--max-len", "4", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("compiled `y`"), "{out}");
    let (code, out, err) = cli(&["eval", p, "--input", "ab"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1 0\n0 1\n", "eval shows the selector");
}

/// `compile -o` over a checkpoint of another program says so (review b24: a compiled model was
/// replaced by another without a word); over the same program's, nothing.
#[test]
fn replacing_another_programs_checkpoint_is_said() {
    let ck = temp("replaced.safetensors");
    let c = ck.to_str().unwrap();
    let _ = std::fs::remove_file(&ck);
    let compile = |file: &str| cli(&["compile", file, "--vocab", "abc", "--max-len", "4", "-o", c]);
    let (code, _, err) = compile("corpus/reverse.rasp");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("replaced"), "{err}");
    let (code, _, err) = compile("corpus/reverse.rasp");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("replaced"), "the same program: {err}");
    let (code, _, err) = compile("corpus/histogram.rasp");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("note: replaced `{c}`, a checkpoint of another program (sha256:")), "{err}");
}

/// Flags that change nothing say so; counts of one are singular (review b24).
#[test]
fn ignored_flags_warn_and_counts_of_one_are_singular() {
    let ck = temp("b24-reverse.safetensors");
    let c = ck.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", c, "--force", "--bounds"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: --bounds prints nothing here"), "{err}");
    let (code, out, err) = cli(&["dump", "corpus/reverse.rasp", "--vocab", "abc"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tokens = tokens") && err.contains("warning: --stage graph does not compile the program"), "{out}{err}");
    let (code, _, err) = cli(&["dump", "corpus/reverse.rasp"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let (code, out, err) = cli(&["verify", "corpus/reverse.rasp", "--vocab", "ab", "--max-len", "3", "--samples", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 1 input, 0 mismatches\n") && out.contains("): 1 input, 0 mismatches\n"), "{out}");
    // A model without heads is refused before the probe says anything else.
    let p = temp("b24-headless.rasp");
    std::fs::write(&p, "prog = tokens_int + 1;\n").unwrap();
    let h = temp("b24-headless.safetensors");
    assert_eq!(cli(&["compile", p.to_str().unwrap(), "--vocab", "123", "--max-len", "4", "-o", h.to_str().unwrap(), "--force"]).0, 0);
    let (code, out, err) = cli(&["probe", "svflow", h.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("has no attention heads") && !err.contains("warning") && !out.contains("no --program"), "{out}{err}");
}

/// Review rv24's counterexamples to this session's rewrites, each verified or refused, never
/// compiled wrong: a difference of counted sums stored categorically (the interpreter's `k.0`
/// beside `k`; one key's value passed on, not averaged); a value beside strings whose mean of
/// copies is another number (three 0.1s average to 0.10000000000000002); a positional window
/// `or` kept one head (not split into widths).
#[test]
fn rewrites_of_this_session_hold_on_review_counterexamples() {
    let (code, out, err) = cli(&[
        "verify",
        "corpus/idioms/dyck1_frac.rasp",
        "--vocab",
        "()",
        "--max-len",
        "8",
        "--exhaustive",
        "--encoding",
        "opens=categorical",
        "--encoding",
        "closes=categorical",
        "--encoding",
        "depth=categorical",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("verified: 510 inputs, 0 mismatches\n"), "{out}");
    let p = temp("rv24-counted.rasp");
    std::fs::write(
        &p,
        "c1 = (-1 * indices - 1) * aggregate(select(indices, indices, <=), indicator(tokens == \"a\"), 0);\nc2 = (3 * indices) * aggregate(select(indices, indices, <), (tokens == \"a\"), 0.5);\nd = c1 - c2;\nprog = d >= -1;\n",
    )
    .unwrap();
    let (code, out, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", "abc", "--max-len", "6", "--exhaustive", "--allow-rejected"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verified: ") && out.ends_with(", 0 mismatches\n") && !out.contains(" 0 inputs"), "{out}");
    let p = temp("rv24-tenth.rasp");
    std::fs::write(
        &p,
        "nxt = select(indices, indices + 1, ==) and select(tokens, tokens, ==);\nv = aggregate(nxt, tokens, 0.1);\nm = aggregate(select(indices, indices, <=), v, \"z\");\nprog = m == 0.1;\n",
    )
    .unwrap();
    let (code, _, err) = cli(&["verify", p.to_str().unwrap(), "--vocab", "abc", "--max-len", "6", "--samples", "100"]);
    assert_eq!(code, 1, "must be refused, not compiled: {err}");
    assert!(err.contains("compile::"), "{err}");
    let p = temp("rv24-window.rasp");
    std::fs::write(&p, "s = select(indices, indices, ==) or select(indices, indices - 1, ==);\nprog = selector_width(s);\n").unwrap();
    let ck = temp("rv24-window.safetensors");
    let (code, out, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "ab", "--max-len", "64", "-o", ck.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("heads 1,"), "a window of positions is one head: {out}");
    // Not split either (review rv24b): a width an --encoding names, an `or` over maps of one
    // s-op (read through its own one-hot), an `or` that an `and` also reads (it keeps the one-hot).
    for (src, vocab, max_len, enc, heads) in [
        ("tok_c = tokens < \"b\";\ns = select(tokens, tokens, ==) or select(tok_c, indices, >=) or select(tok_c, tok_c, <=);\nw = selector_width(s);\nprog = w > 2;\n", "ab", "5", Some("w=categorical"), 1),
        ("c = tokens < \"m\";\ns = select(tokens, tokens, >=) or select(c, c, >);\nprog = selector_width(s);\n", "abcdefghijklmnopqrstuvwxyz", "16", None, 1),
        ("c = tokens < \"b\";\ns = select(indices, c, <) or select(indices - 1, indices, <=) or select(indices + 1, indices + 1, >);\nw = selector_width(s);\nt = s and select(tokens, tokens, ==);\nprog = w + selector_width(t);\n", "abc", "16", None, 2),
    ] {
        std::fs::write(&p, src).unwrap();
        let mut args = vec!["compile", p.to_str().unwrap(), "--vocab", vocab, "--max-len", max_len, "-o", ck.to_str().unwrap(), "--force"];
        if let Some(e) = enc {
            args.extend(["--encoding", e]);
        }
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("heads {heads},")), "{src}: {out}");
        let mut args = vec!["verify", p.to_str().unwrap(), "--vocab", vocab, "--max-len", max_len, "--samples", "200"];
        if let Some(e) = enc {
            args.extend(["--encoding", e]);
        }
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        assert!(out.ends_with(", 0 mismatches\n"), "{out}");
    }
}

/// An unknown token names the vocabulary in the order it was given, the first 24 tokens and a
/// count (helper perf24: 4,096 tokens made one 31 KB line, in string order).
#[test]
fn unknown_token_lists_a_large_vocabulary_in_part() {
    let vocab: Vec<String> = (0..100).rev().map(|i| i.to_string()).collect();
    let vocab = serde_json::to_string(&vocab).unwrap();
    let ck = temp("vocab100.safetensors");
    let c = ck.to_str().unwrap();
    assert_eq!(cli(&["compile", "corpus/reverse.rasp", "--vocab", &vocab, "--max-len", "4", "-o", c, "--force"]).0, 0);
    let (code, _, err) = cli(&["run", c, "--input", "[\"x\"]"]);
    assert_eq!(code, 1);
    assert!(err.contains("(\"99\", \"98\", \"97\",") && err.contains("\"76\", ... (100 tokens))") && !err.contains("\"75\""), "{err}");
}

/// Slips at the terminal get plain advice (helper ed25): a separator in a plain `--vocab` is a
/// token (warned, or named in the duplicate's refusal), a program given to `run` is named as text
/// first, an overflowing `--max-len` is "too large", a missing file has no OS error number, and
/// a JSON object as `--input` is warned about.
#[test]
fn terminal_slips_get_plain_advice() {
    let c = temp("slips.safetensors");
    let c = c.to_str().unwrap();
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "a,b", "--max-len", "4", "-o", c, "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: --vocab is read one character per token, so \",\" is a token too ('a', ',', 'b')"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "4", "-o", c, "--force"]);
    assert_eq!(code, 0);
    assert!(!err.contains("warning"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "a,b,c", "--max-len", "4", "-o", c, "--force"]);
    assert_eq!(code, 1);
    assert!(err.contains("--vocab lists ',' twice (a plain string is read one character per token"), "{err}");
    let (code, _, err) = cli(&["run", "corpus/reverse.rasp", "--input", "abc"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a safetensors file: it starts with text (`# ") && err.find("raspc compile") < err.find("byte header"), "{err}");
    let (code, _, err) = cli(&["compile", "corpus/reverse.rasp", "--vocab", "abc", "--max-len", "99999999999999999999", "-o", c, "--force"]);
    assert_eq!(code, 2);
    assert!(err.contains("'99999999999999999999' for '--max-len <MAX_LEN>': too large a number") && !err.contains("target type"), "{err}");
    let (code, _, err) = cli(&["eval", "corpus/no-such-program.rasp", "--input", "ab"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read `corpus/no-such-program.rasp`: No such file or directory") && !err.contains("os error"), "{err}");
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "{\"a\":1}"]);
    assert_eq!(code, 0);
    assert!(err.contains("warning: --input is a JSON object, which is read as its 7 characters"), "{err}");
}

/// A named s-op of numbers one-hot over so many values that it is most of the model's width
/// gets a note with the flag that stores it as one number and the size that gives, which
/// compiling with the flag confirms (helper w27: the deepest level written as a mean over the
/// positions no other beats, `m if m > 0 else 0`, 2,594 values, 22 M parameters, and not a
/// word; that conditional is products now, and its square is 1,298 values and 16.8 M; the mean
/// over the argmax alone is one of the depths now, so the first position joins the selection).
#[test]
fn a_wide_one_hot_output_notes_the_numerical_encoding() {
    let p = temp("wide-one-hot.rasp");
    std::fs::write(
        &p,
        "step = 1 if tokens == \"(\" else -1;\nbal = round(aggregate(select(indices, indices, <=), step) * (indices + 1));\nismax = not has_focus(select(bal, bal, >));\nm = aggregate(select(ismax, True, ==) or select(indices, 0, ==), bal);\nprog = m * m;\n",
    )
    .unwrap();
    let ck = temp("wide-one-hot.safetensors");
    let args = ["compile", p.to_str().unwrap(), "--vocab", "()", "--max-len", "16", "-o", ck.to_str().unwrap(), "--force"];
    let (code, _, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    let note = err.lines().find(|l| l.starts_with("note: `prog` is one-hot over its")).unwrap_or_else(|| panic!("{err}"));
    assert!(note.contains("(`--encoding prog=numerical`)"), "{note}");
    let (code, out, err) = cli(&[&args[..], &["--encoding", "prog=numerical", "--json"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("is one-hot over"), "no note once the flag is given: {err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let params = j["params"].as_u64().unwrap() as usize;
    let d_model = j["d_model"].as_u64().unwrap();
    assert!(note.contains(&format!("d_model {d_model} and {} parameters", raspc_compiler::names::thousands(params))), "{note} vs {j}");
}

/// A runtime failure of `eval` ends as every other failure does, and each note is a note of its
/// own: under `--causal` the failing prefix and the hint about text input are two (review
/// rv29b: they were joined by a newline inside one; helper w30: no closing line).
#[test]
fn eval_failures_close_like_the_others_with_one_note_each() {
    let p = temp("prefix_fails.rasp");
    std::fs::write(&p, "prog = 6 / (length - 2);\n").unwrap();
    let p = p.to_str().unwrap();
    let (code, _, err) = cli(&["eval", p, "--input", "a b", "--causal"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("\n  = with --causal the program runs on each prefix of the input; it failed on the first 2 tokens ('a', ' ')\n  = `--input` text is one token per character"),
        "{err}"
    );
    assert!(err.trim_end().ends_with(&format!("error: could not evaluate `{p}` on this input")), "{err}");
}
