//! Places where raspc's interpreter must read and evaluate programs exactly as the reference
//! interpreter (tech-srl/RASP) does. Every expected value below is worked out by hand from the
//! reference's rules, which each test states; none is copied from raspc's own output.

use raspc_lang::{Atom, MemoryLoader, Value};
use raspc_tests::{chars, json};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Evaluates `main` (at /virtual/main.rasp) with in-memory files for `load`, and runs `entry`.
fn eval_with_files(main: &str, files: &[(&str, &str)], entry: &str, input: &[Atom]) -> Result<Value, String> {
    let loader = MemoryLoader(files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect::<HashMap<_, _>>());
    let (_, r) = raspc_lang::evaluate_program("main.rasp", Some(Path::new("/virtual/main.rasp")), main, &loader);
    let s = r.map_err(|d| d.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; "))?;
    let (_, node) = s.entry(Some(entry))?;
    raspc_lang::evaluate(&s.graph, node, input).map_err(|e| format!("{}: {}", e.label, e.message))
}

fn eval(src: &str, entry: &str, input: &[Atom]) -> Result<Value, String> {
    eval_with_files(src, &[], entry, input)
}

// 1. `load`

#[test]
fn load_appends_the_rasp_extension() {
    // The reference opens `name + ".rasp"`; the repository's own programs write `load "lib";`.
    let lib = "def plus_two(x) { return x + 2; }";
    for spelling in ["lib", "lib.rasp"] {
        let main = format!("load \"{spelling}\";\ny = plus_two(indices);");
        let v = eval_with_files(&main, &[("/virtual/lib.rasp", lib)], "y", &chars("abc")).unwrap();
        assert_eq!(json(&v), json!([2, 3, 4]), "load \"{spelling}\"");
    }
    // `lib.rasp` wins over a file named `lib` (a script without an extension, say).
    let main = "load \"lib\";\ny = plus_two(indices);";
    let v = eval_with_files(main, &[("/virtual/lib.rasp", lib), ("/virtual/lib", "#!/bin/sh\necho not rasp")], "y", &chars("abc")).unwrap();
    assert_eq!(json(&v), json!([2, 3, 4]));
}

#[test]
fn load_resolves_from_the_including_file_then_the_working_directory() {
    // /virtual/sub/a.rasp loads "b": /virtual/sub/b.rasp (next to a) wins over ./b.rasp.
    let files = [("/virtual/sub/a.rasp", "load \"b\";"), ("/virtual/sub/b.rasp", "which = 1;"), ("b.rasp", "which = 2;"), ("c.rasp", "other = 3;")];
    let main = "load \"sub/a\"; load \"c\"; y = indices + which * 10 + other * 100;";
    // 0 + 1*10 + 3*100 at position 0.
    assert_eq!(json(&eval_with_files(main, &files, "y", &chars("ab")).unwrap()), json!([310, 311]));
}

#[test]
fn private_names_of_a_loaded_file_stay_in_it() {
    // Reference environments: a loaded file's assignments are copied to the loading scope
    // except names starting with `_`. The caller keeps its `_x` = [1, 2]; the library's
    // functions still see the library's own `_x` = [2, 3].
    let lib = "_x = [2, 3];\ndef lib_first(s) { return s + _x[0]; }\nshared = 7;";
    let main = "_x = [1, 2];\nload \"lib\";\ny = indices + _x[0] + 10 * _x[1];\nz = lib_first(indices) + shared;";
    let files = [("/virtual/lib.rasp", lib)];
    // y: i + 1 + 20; z: i + 2 + 7.
    assert_eq!(json(&eval_with_files(main, &files, "y", &chars("abc")).unwrap()), json!([21, 22, 23]));
    assert_eq!(json(&eval_with_files(main, &files, "z", &chars("abc")).unwrap()), json!([9, 10, 11]));
}

#[test]
fn a_loaded_file_sees_the_library_not_the_callers_names() {
    // The loaded file's scope starts from the library: the caller's `secret` is unknown there.
    let lib = "y = indices + secret;";
    let main = "secret = 5;\nload \"lib\";";
    let e = eval_with_files(main, &[("/virtual/lib.rasp", lib)], "y", &chars("a")).unwrap_err();
    assert!(e.contains("unknown name `secret`"), "{e}");
    // Library functions are visible in loaded files, and they keep the library's meaning even
    // when the caller redefined them first.
    let lib = "n = count(tokens, \"a\");";
    let main = "def count(a, b) { return 99; }\nload \"lib\";";
    assert_eq!(json(&eval_with_files(main, &[("/virtual/lib.rasp", lib)], "n", &chars("aba")).unwrap()), json!([2, 2, 2]));
}

#[test]
fn redefining_a_library_function_does_not_change_the_others() {
    // The reference's library functions close over the library's scope: mark_last_instance
    // calls the library's has_focus even after the program defines its own.
    let src = "def has_focus(sel) { return aggregate(sel, 1, 0) < 0; }\nm = mark_last_instance(tokens, \"a\");";
    // "aba": the last `a` is at 2.
    assert_eq!(json(&eval(src, "m", &chars("aba")).unwrap()), json!([false, false, true]));
}

#[test]
fn a_file_loaded_twice_binds_its_names_again() {
    // Loading re-runs the file in the reference; the second load overwrites the caller's
    // rebinding of `v` with the file's value again.
    let lib = "v = 3;";
    let main = "load \"lib\";\nv = 4;\nload \"lib\";\ny = indices + v;";
    assert_eq!(json(&eval_with_files(main, &[("/virtual/lib.rasp", lib)], "y", &chars("ab")).unwrap()), json!([3, 4]));
}

#[test]
fn load_refuses_what_is_not_a_regular_file_and_does_not_show_foreign_text() {
    let dir = std::env::temp_dir().join(format!("raspc-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("notes.txt");
    std::fs::write(&secret, "password = hunter2 and more\n").unwrap();
    let main = dir.join("main.rasp");
    for (src, want) in [
        (format!("load \"{}\";", secret.display()), "is not a RASP program (it does not parse at line 1, column"),
        ("load \"/dev/zero\";".to_string(), "not a regular file"),
        (format!("load \"{}\";", dir.display()), "not a regular file"),
    ] {
        let (sources, r) = raspc_lang::evaluate_program("main.rasp", Some(&main), &src, &raspc_lang::DiskLoader);
        let d = r.unwrap_err();
        assert!(d[0].message.contains(want), "{src}: {}", d[0].message);
        // The diagnostic points at the load statement, in the program's own file.
        let span = d[0].primary_span().unwrap();
        assert_eq!(sources.get(span.file).name, "main.rasp");
        assert!(!format!("{d:?}").contains("hunter2"), "the diagnostic shows the file's text: {d:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// 2. Library functions with s-op arguments (the reference's rasplib, position by position)

#[test]
fn count_and_contains_compare_position_by_position() {
    // count(seq, atom) = round(length * mean(indicator(seq == atom))): on "abca" every
    // position has tokens == tokens, so 4 everywhere.
    assert_eq!(json(&eval("c = count(tokens, tokens);", "c", &chars("abca")).unwrap()), json!([4, 4, 4, 4]));
    // tokens == shifted: "abca" vs shift by 1 with filler "a" = "aabc": equal only at 0.
    let src = "s = shift(tokens, 1, \"a\"); c = count(tokens, s); h = contains(tokens, s); z = contains(tokens, s + \"z\");";
    assert_eq!(json(&eval(src, "c", &chars("abca")).unwrap()), json!([1, 1, 1, 1]));
    assert_eq!(json(&eval(src, "h", &chars("abca")).unwrap()), json!([true, true, true, true]));
    assert_eq!(json(&eval(src, "z", &chars("abca")).unwrap()), json!([false, false, false, false]));
    // With a constant the familiar meaning: how many `a`.
    assert_eq!(json(&eval("c = count(tokens, \"a\");", "c", &chars("abca")).unwrap()), json!([2, 2, 2, 2]));
}

#[test]
fn shift_reads_its_offset_at_the_key() {
    // shift = aggregate(select(indices + n, indices, ==), seq, filler): query q reads the key k
    // with k + n[k] == q. On "0121" n = [0,1,2,1]: k + n[k] = [0,2,4,4]; q=0 <- k=0 ("0"),
    // q=1 none ("_"), q=2 <- k=1 ("1"), q=3 none ("_").
    let v = eval("s = shift(tokens, tokens_int, \"_\");", "s", &chars("0121")).unwrap();
    assert_eq!(json(&v), json!(["0", "_", "1", "_"]));
    // Two keys landing on one query are averaged: n = [1,0] on "10": keys 0 and 1 both -> q=1.
    let v = eval("s = shift(tokens_int, tokens_int, 7);", "s", &chars("10")).unwrap();
    assert_eq!(json(&v), json!([7, 0.5]));
}

#[test]
fn mark_first_instance_is_the_reference_librarys() {
    // The reference's mark_first_instance looks for the value at *later* keys
    // (select(indices, indices, >)), so it marks the last instance.
    let src = "f = mark_first_instance(tokens, \"a\"); g = mark_first_instance(tokens, tokens);";
    assert_eq!(json(&eval(src, "f", &chars("abca")).unwrap()), json!([false, false, false, true]));
    // Against itself: a position is marked iff no later position holds its token.
    assert_eq!(json(&eval(src, "g", &chars("abca")).unwrap()), json!([false, true, true, true]));
}

// 3. and / or / not on s-ops of any kind

#[test]
fn and_or_not_on_sops_give_booleans() {
    // The reference converts both sides with bool() and combines: indices and (tokens == "b")
    // on "abca" is bool(0) and False, bool(1) and True, bool(2) and False, bool(3) and False.
    let src = "a = indices and tokens == \"b\"; o = indices or tokens == \"b\"; n = not indices; k = tokens_int and 5; s = tokens or 0;";
    assert_eq!(json(&eval(src, "a", &chars("abca")).unwrap()), json!([false, true, false, false]));
    assert_eq!(json(&eval(src, "o", &chars("abca")).unwrap()), json!([false, true, true, true]));
    assert_eq!(json(&eval(src, "n", &chars("abca")).unwrap()), json!([true, false, false, false]));
    // An atom on one side is a constant s-op: bool(5) is True.
    assert_eq!(json(&eval(src, "k", &chars("0102")).unwrap()), json!([false, true, false, true]));
    // Non-empty strings are true.
    assert_eq!(json(&eval(src, "s", &chars("ab")).unwrap()), json!([true, true]));
    // Host atoms keep Python's operand-returning `and`/`or`.
    assert_eq!(json(&eval("x = indices + (0 or 3) + (2 and 5);", "x", &chars("a")).unwrap()), json!([8]));
}

/// Python's `range` takes booleans as the integers they are (the reference checks
/// `isinstance(v, int)`, which a bool passes): `range(True)` is `[0]`, `range(False, 3)` is
/// `[0, 1, 2]` (helper sc23: refused as "not an integer"); floats stay refused.
#[test]
fn range_takes_booleans_as_integers() {
    let src = "n = len(range(True)) + len(range(False, 3)) * 10; x = indices + n;";
    assert_eq!(json(&eval(src, "x", &chars("ab")).unwrap()), json!([31, 32]));
    let e = eval("y = range(2.0); x = tokens;", "x", &chars("a")).unwrap_err();
    assert!(e.contains("`range` takes integers"), "{e}");
}

/// An s-op compared with `==` to a list, a dict or a function: the reference compares each
/// position's value with that object, which Python says is never equal (`1 == [1]`): every
/// position False (helper sc23: refused as "must be an s-op or an atom").
#[test]
fn an_sop_equal_to_a_list_is_false_everywhere() {
    for src in ["x = tokens == [1];", "x = [\"a\"] == tokens;", "x = indices == {0: 1};", "def f(a) { return a; } x = tokens == f;"] {
        assert_eq!(json(&eval(src, "x", &chars("ab")).unwrap()), json!([false, false]), "{src}");
    }
    // Order comparisons with a list stay errors (Python 3 raises for `1 < [1]`).
    assert!(eval("x = tokens < [1];", "x", &chars("ab")).is_err());
}

#[test]
fn compiled_models_follow_the_boolean_semantics() {
    use raspc::verify::{generate, verify, Inputs};
    let src = "a = indices and tokens == \"b\";";
    let (_, r) = raspc_lang::evaluate_program("a.rasp", None, src, &MemoryLoader::default());
    let s = r.unwrap();
    let (_, root) = s.entry(Some("a")).unwrap();
    let vocab = chars("abc");
    let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: 5, ..Default::default() };
    let c = raspc_compiler::compile(&s.graph, root, &opts, "test").unwrap();
    let model = raspc_runtime::Model::new(c.checkpoint, &raspc_runtime::Device::Cpu).unwrap();
    let seqs = generate(&Inputs::Exhaustive, vocab.len(), 5).unwrap();
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    let rep = verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
    assert_eq!((rep.checked, rep.failed), (seqs.len(), 0));
    // And the model's output on "abca"-like input is the boolean one.
    let ids = model.encode(&chars("abcb").iter().map(Atom::to_json).collect::<Vec<_>>()).unwrap();
    let out = model.decode(&model.forward(&[ids], raspc_runtime::Attention::Hard).unwrap()).unwrap();
    let got: Vec<Atom> = out[0].iter().map(raspc::verify::decoded_atom).collect();
    assert_eq!(got, vec![Atom::Bool(false), Atom::Bool(true), Atom::Bool(false), Atom::Bool(true)]);
}

// 4. Numeric errors

#[test]
fn overflowing_powers_are_errors_with_their_place() {
    // Python raises OverflowError for 2.718 ** 1000 (finite operands, infinite result).
    let e = eval("x = 2.718 ^ (tokens_int * 1000);", "x", &chars("01")).unwrap_err();
    assert!(e.starts_with("x: numerical result out of range (2.718 ^ 1000)"), "{e}");
    // Position 0 alone is fine: 2.718 ^ 0 = 1.0.
    assert_eq!(json(&eval("x = 2.718 ^ (tokens_int * 1000);", "x", &chars("0")).unwrap()), json!([1.0]));
    // Underflow is not an error in Python: 2.718 ** -1000 == 0.0.
    assert_eq!(json(&eval("x = 2.718 ^ (0 - tokens_int * 1000);", "x", &chars("1")).unwrap()), json!([0.0]));
    // And the CLI reports it with the place and exit status 1.
    let dir = std::env::temp_dir().join(format!("raspc-pow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("pow.rasp");
    std::fs::write(&p, "x = 2.718 ^ (tokens_int * 1000);\n").unwrap();
    let (code, out, err) = cli(&["eval", p.to_str().unwrap(), "--input", "01"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("numerical result out of range") && err.contains("pow.rasp:1:5"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

use raspc_tests::cli;

// 5. Programs the interpreter rejects

#[test]
fn compile_refuses_a_program_rejected_on_every_input() {
    let dir = std::env::temp_dir().join(format!("raspc-rejected-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("n.rasp");
    std::fs::write(&p, "n = tokens_int + 1;\n").unwrap();
    let o = dir.join("n.safetensors");
    let (code, _, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "abc", "--max-len", "4", "-o", o.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    // int("a") fails for every token: 3 + 9 + 27 + 81 = 120 inputs, all rejected.
    assert!(err.contains("compile::rejected") && err.contains("every input (120 inputs)"), "{err}");
    assert!(err.contains("n.rasp:1:5") && err.contains("invalid literal for int()"), "{err}");
    assert!(!o.exists(), "no checkpoint is written");
    // The same program with digits compiles, and a vocabulary with one digit is enough.
    let (code, out, err) = cli(&["compile", p.to_str().unwrap(), "--vocab", "a1", "--max-len", "4", "-o", o.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn verify_fails_when_it_checked_fewer_inputs_than_asked() {
    let dir = std::env::temp_dir().join(format!("raspc-avg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("avg.rasp");
    // Averaging strings: fine when exactly one key is selected (position 0 always, and the
    // whole input has length 1), an error as soon as a query selects two keys.
    std::fs::write(&p, "m = aggregate(select(indices, indices, <=), tokens);\n").unwrap();
    let path = p.to_str().unwrap();
    // Exhaustive over "ab" up to length 3: 2 + 4 + 8 = 14 inputs, of which only the 2 of
    // length 1 are accepted.
    let (code, out, err) = cli(&["verify", path, "--vocab", "ab", "--max-len", "3", "--exhaustive"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("rejected: the interpreter rejects 12 of the 14 inputs"), "{out}");
    assert!(out.contains("`m` failed on 12 inputs") && out.contains("asked to average 2 values of a non-numeric s-op"), "{out}");
    assert!(out.contains("verified: 2 inputs, 0 mismatches"), "{out}");
    assert!(err.contains("only 2 of the 14 inputs asked for were checked"), "{err}");
    // --allow-rejected accepts a partial domain.
    let (code, out, err) = cli(&["verify", path, "--vocab", "ab", "--max-len", "3", "--exhaustive", "--allow-rejected"]);
    assert_eq!(code, 0, "{out}{err}");
    // --samples 0 checks nothing.
    let (code, _, err) = cli(&["verify", path, "--vocab", "ab", "--max-len", "3", "--samples", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--samples 0 checks nothing"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reserved_names_cannot_be_rebound() {
    // The reference's environments refuse to set its constant variables.
    for src in ["indices = 3;", "tokens_int = tokens;", "True = 0;", "def f(indices) { return 1; }", "for tokens_str in [1] { x = 1; }", "x = [1 for indices in [1]];"] {
        let e = eval(src, "x", &chars("a")).unwrap_err();
        assert!(e.contains("cannot assign to the reserved name"), "{src}: {e}");
    }
    // `tokens` and `length` are ordinary names there.
    assert_eq!(json(&eval("tokens = tokens_int; length = 2; x = tokens + length;", "x", &chars("13")).unwrap()), json!([3, 5]));
}

// Bounded evaluation of hostile programs (no stack overflow, no memory blow-up, no
// exponential re-evaluation).

#[test]
fn hostile_programs_end_in_clean_errors() {
    // A flat chain of 300,000 `+` nests the tree as deep as it is long.
    let chain = format!("x = {};", vec!["1"; 300_000].join(" + "));
    let e = eval(&chain, "x", &chars("a")).unwrap_err();
    assert!(e.contains("expression is too long"), "{e}");
    // 1000 lists of a million items, and a million copies of a 1 MB string.
    let e = eval("y = [range(1000000) for i in range(1000)]; x = tokens;", "x", &chars("a")).unwrap_err();
    assert!(e.contains("program builds too much host data"), "{e}");
    let e = eval("y = \"a\" * 1000000; z = [y for i in range(1000000)]; x = tokens;", "x", &chars("a")).unwrap_err();
    assert!(e.contains("program builds too much host data"), "{e}");
    // Each of 40 files loads the next one twice: 2^40 loads if every load ran the file again.
    let names: Vec<String> = (0..40).map(|i| format!("/virtual/f{i}.rasp")).collect();
    let texts: Vec<String> = (0..40).map(|i| if i == 39 { "w = tokens;".to_string() } else { format!("load \"f{}\";\nload \"f{}\";", i + 1, i + 1) }).collect();
    let files: Vec<(&str, &str)> = names.iter().map(String::as_str).zip(texts.iter().map(String::as_str)).collect();
    assert_eq!(json(&eval_with_files("load \"f0\";\nx = w;", &files, "x", &chars("ab")).unwrap()), json!(["a", "b"]));
}

#[test]
fn evaluation_frees_its_scopes() {
    // Functions close over the scope that holds them (a reference cycle); dropping the session
    // must free the scopes all the same.
    let src = "def f(x) { def g(y) { return y + 1; } return g(x); }\nh = f;\nfs = [f, h];\nx = f(indices);";
    let (_, r) = raspc_lang::evaluate_program("m.rasp", None, src, &MemoryLoader::default());
    let s = r.unwrap();
    let globals = std::rc::Rc::downgrade(&s.globals);
    assert!(globals.upgrade().is_some());
    drop(s);
    assert!(globals.upgrade().is_none(), "the global scope outlives its session");
}

/// `exit` and `quit` stop the program where they stand, as the reference stops reading its input
/// there (its tests `quit.txt`, `exit_fun.txt`): later assignments do not run. An `exit` inside a
/// loaded file ends that file only (the reference's `loadFile` runs the file as a session of its
/// own, whose loop stops at the exit and returns to the loading file).
#[test]
fn exit_and_quit_stop_the_program_there() {
    for stop in ["exit;", "exit()", "quit", "quit();"] {
        let src = format!("x = tokens_int + 1;\n{stop}\nx = tokens_int + 100;\n");
        let v = eval(&src, "x", &[Atom::Int(1), Atom::Int(2)]).unwrap();
        assert_eq!(json(&v), json!([2, 3]), "{stop}");
    }
    let lib = "y = indices;\nexit;\ny = indices + 5;";
    let v = eval_with_files("x = 1;\nload \"lib\";\nz = 7;", &[("/virtual/lib.rasp", lib)], "y", &chars("ab")).unwrap();
    assert_eq!(json(&v), json!([0, 1]));
    let v = eval_with_files("x = 1;\nload \"lib\";\nz = y + 10;", &[("/virtual/lib.rasp", lib)], "z", &chars("ab")).unwrap();
    assert_eq!(json(&v), json!([10, 11]));
}

/// An expression statement's value is `out`, as the reference's `set_out`: later statements read
/// it, and so does `--entry out`.
#[test]
fn an_expression_statement_binds_out() {
    let src = "x = tokens_int;\nx + 1;\ny = out * 2;";
    assert_eq!(json(&eval(src, "y", &[Atom::Int(1), Atom::Int(2)]).unwrap()), json!([4, 6]));
    assert_eq!(json(&eval("tokens_int * 3;", "out", &[Atom::Int(1), Atom::Int(2)]).unwrap()), json!([3, 6]));
}

/// What the reference's line-by-line reader does not run as raspc does is noted (raspc runs it):
/// two statements completed on one line (the reference refuses the line, so neither runs), a
/// `#` comment after code inside a statement (a syntax error in its grammar: the statement is
/// skipped) and
/// `exit;` (its `exit` takes no `;`: a syntax error, and the reference goes on).
#[test]
fn what_the_reference_reader_skips_is_noted() {
    let notes = |src: &str| -> Vec<String> {
        let (_, r) = raspc_lang::evaluate_program("m.rasp", None, src, &MemoryLoader::default());
        r.unwrap().notes.iter().map(|n| format!("{} {}", n.code, n.message)).collect()
    };
    let two = notes("prog = indices;\nprog = indices + 1; prog = indices + 2;\n");
    assert!(two.iter().any(|n| n.contains("eval::reference-skips two statements on one line")), "{two:?}");
    let comment = notes("prog = indices +  # add one\n  1;\n");
    assert!(comment.iter().any(|n| n.contains("a `#` comment inside a statement")), "{comment:?}");
    let exit = {
        let (_, r) = raspc_lang::evaluate_program("m.rasp", None, "prog = indices;\nexit;\nprog = 1;\n", &MemoryLoader::default());
        r.unwrap().notes.iter().flat_map(|n| n.notes.clone()).collect::<Vec<_>>()
    };
    assert!(exit.iter().any(|n| n.contains("reads `exit;` (with the `;`) as a syntax error")), "{exit:?}");
    // A stray `;` (an empty statement: none in the reference's grammar) and `s-op` without
    // spaces (one word to its lexer): the reference skips the line; raspc ran it silently
    // (helper a10).
    for src in ["prog = tokens;\n;prog = indices + 1;\n", "prog = tokens;\nprog = indices + 1;;\n"] {
        let stray = notes(src);
        assert!(stray.iter().any(|n| n.contains("eval::reference-skips a stray `;`")), "{src}: {stray:?}");
    }
    let sop = notes("s = indices;\nop = 1;\nprog = s-op;\n");
    assert!(sop.iter().any(|n| n.contains("`s-op` without spaces")), "{sop:?}");
    // What the reference runs the same gets no such note: one statement per line, comments
    // after a statement or between a function's statements, `#` inside a string, a whole
    // function on one line, `exit` without `;`.
    let clean = notes(
        "x = indices;  # a comment\n# a line comment\ndef f(a) {\n  # inside\n  b = a + 1;  # after\n  return b;\n}\ndef g(a) { c = a; return c; }\nh = \"#\";\ns = indices;\nop = 1;\nprog = f(x) + g(x) + s - op + (s-1);\nexit\n",
    );
    assert!(clean.iter().all(|n| !n.contains("reference-skips") && !n.contains("syntax error")), "{clean:?}");
    // A line that is only a comment, inside a statement, is blanked by the reference's reader
    // before parsing (`is_comment` in its REPL.py): the statement runs there too (helper a13);
    // a comment after code on a line of an unfinished statement still breaks it.
    let blanked = notes("x = select(indices,\n  # the query side\n  indices, ==);\nprog = aggregate(x,\n\t# values\n tokens_int);\n");
    assert!(blanked.iter().all(|n| !n.contains("reference-skips")), "{blanked:?}");
    let broken = notes("x = select(indices,\n  indices, ==);\nprog = aggregate(x,  # values\n tokens_int);\n");
    assert_eq!(broken.iter().filter(|n| n.contains("a `#` comment inside a statement")).count(), 1, "{broken:?}");
}

/// Integers past 2^53 as CPython handles them: a mean sums the integers exactly, then rounds twice
/// (`sum(vals) * 1.0 / n`), `/` rounds the exact quotient once, and an int compares
/// exactly with a float.
#[test]
fn integers_past_2_53_follow_python() {
    let big = [Atom::Int(9007199254740992), Atom::Int(1), Atom::Int(1)];
    let v = eval("m = aggregate(select(indices, indices, >=), tokens_int);", "m", &big).unwrap();
    assert_eq!(json(&v), json!([3002399751580331.5, 1.0, 1]));
    let v = eval("q = tokens_int / 3;", "q", &[Atom::Int(9007199254740993)]).unwrap();
    assert_eq!(json(&v), json!([3002399751580331.0]));
    let v = eval("g = tokens_int > 9007199254740992.0;", "g", &[Atom::Int(9007199254740993), Atom::Int(9007199254740992)]).unwrap();
    assert_eq!(json(&v), json!([true, false]));
}

/// `sop[-k]` is `aggregate(select(indices, length - k, ==), sop)` with `length` as bound where it
/// is written, as the reference's `_index_into_sequence` reads it: a program that rebinds
/// `length` to an s-op changes it, and one that binds it to a number gets an error.
#[test]
fn negative_indices_read_length_as_bound() {
    let chars = chars("abcd");
    let v = eval("prog = tokens[-1];", "prog", &chars).unwrap();
    assert_eq!(json(&v), json!(["d", "d", "d", "d"]));
    let v = eval("length = indices + 1;\nprog = tokens[-1];", "prog", &chars).unwrap();
    assert_eq!(json(&v), json!(["a", "b", "c", "d"]));
    let e = eval("def f(seq, length) { return seq[-1]; }\nprog = f(tokens, 2);", "prog", &chars).unwrap_err();
    assert!(e.contains("a negative index reads `length`") && e.contains("int 2"), "{e}");
}

/// Booleans index as the integers 0 and 1, as in Python (the reference checks
/// `isinstance(index, int)`, which a bool passes): lists, strings and s-ops.
#[test]
fn booleans_index_as_0_and_1() {
    let v = eval("a = [1, 2][True];\nb = \"abc\"[True];\nprog = tokens[True] if a == 2 and b == \"b\" else tokens;", "prog", &chars("abcd")).unwrap();
    assert_eq!(json(&v), json!(["b", "b", "b", "b"]));
    let v = eval("prog = tokens[False];", "prog", &chars("abcd")).unwrap();
    assert_eq!(json(&v), json!(["a", "a", "a", "a"]));
    let e = eval("q = [1, 2][1.5];\nprog = tokens;", "prog", &chars("ab")).unwrap_err();
    assert!(e.contains("must be an integer"), "{e}");
}

/// Host values unpack and combine as the reference's Python does (helper a13): any value with
/// items unpacks (a string into characters, a dict into its keys), a list repeats with `*`,
/// lists order item by item, and a list is never equal to an atom. Expected values are
/// Python's own results for the same expressions.
#[test]
fn host_values_unpack_repeat_and_compare_as_python_does() {
    let one = [Atom::Str("a".into())];
    let host = |src: &str| json(&eval(src, "y", &one).unwrap_or_else(|e| panic!("{src}: {e}")));
    // a, b = "xy" → a = "x", b = "y"; a dict unpacks into its keys in insertion order.
    assert_eq!(host("a, b = \"xy\";\ny = tokens + b + a;"), json!(["ayx"]));
    assert_eq!(host("a, b = {\"p\": 1, \"q\": 2};\ny = tokens + b + a;"), json!(["aqp"]));
    assert_eq!(host("s = \"\";\nfor a, b in [\"xy\", \"zw\"] { s = s + b + a; }\ny = tokens + s;"), json!(["ayxwz"]));
    assert_eq!(host("r = [b + a for a, b in [\"xy\"]][0];\ny = tokens + r;"), json!(["ayx"]));
    // [1, 2] * 2 == [1, 2, 1, 2]; 3 * [0] == [0, 0, 0]; [1] * -1 == []; [1] * True == [1].
    assert_eq!(host("r = [1, 2] * 2;\ny = indices + len(r) * 10 + r[2] + r[3] * 100;"), json!([241]));
    assert_eq!(host("r = 3 * [0];\ny = indices + len(r);"), json!([3]));
    assert_eq!(host("r = [1] * -1;\ny = indices + len(r);"), json!([0]));
    assert_eq!(host("r = [1] * True;\ny = indices + len(r);"), json!([1]));
    // An empty list repeated any number of times is empty at once (review rv18: a loop of
    // 9e18 rounds).
    assert_eq!(host("r = [] * 9000000000000000000;\ny = indices + len(r);"), json!([0]));
    // A count that does not match names how many there were.
    let e = eval("a, b = \"xyz\";\ny = indices;", "y", &one).unwrap_err();
    assert!(e.contains("expected 2 values to assign, got 3 values"), "{e}");
    // Python: [1] == 1 is False; [1, 2] < [1, 3], [1, 2] >= [1, 2], [1] < [1, 0] and
    // [[1, 2], 3] > [[1, 1], 4] are True; [2] <= [1, 5] is False.
    let truth = |cond: &str| host(&format!("y = indices + (1 if {cond} else 0);"));
    for (cond, want) in [("[1] == 1", 0), ("1 == [1]", 0), ("[1, 2] < [1, 3]", 1), ("[1, 2] >= [1, 2]", 1), ("[1] < [1, 0]", 1), ("[[1, 2], 3] > [[1, 1], 4]", 1), ("[2] <= [1, 5]", 0)]
    {
        assert_eq!(truth(cond), json!([want]), "{cond}");
    }
    // Python refuses to order an int and a string: so does raspc, naming both.
    let e = eval("y = indices + (1 if [1] < [\"a\"] else 0);", "y", &one).unwrap_err();
    assert!(e.contains("`<` between lists") && e.contains("int and string"), "{e}");
}

/// A `for` body of comments only is a loop that does nothing, as in the reference's grammar
/// (a comment is a statement list there; helper a13); an empty `{ }` is refused by both.
#[test]
fn a_loop_body_of_comments_only_runs_nothing() {
    let one = [Atom::Str("a".into())];
    let v = eval("n = 1;\nfor i in [1, 2] { # nothing yet\n}\ny = indices + n;", "y", &one).unwrap();
    assert_eq!(json(&v), json!([1]));
    let e = eval("for i in [1] {\n}\ny = indices;", "y", &one).unwrap_err();
    assert!(e.contains("`for` loop with an empty body"), "{e}");
}
