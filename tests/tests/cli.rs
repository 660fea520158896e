//! The `raspc eval` command end to end (in-process): output formats, entries, inputs, errors.

fn cli(args: &[&str]) -> (i32, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv: Vec<String> = std::iter::once("raspc").chain(args.iter().copied()).map(String::from).collect();
    let code = raspc::run(argv, &mut out, &mut err, false);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

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
    // "[1,2" is not a JSON array: it is five characters.
    let (code, out, _) = cli(&["eval", "corpus/reverse.rasp", "--input", "[1,2", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out, "{\"output\":[\"2\",\",\",\"1\",\"[\"]}\n");
    let (code, _, err) = cli(&["eval", "corpus/reverse.rasp", "--input", "[1, null]"]);
    assert_eq!(code, 1);
    assert!(err.contains("input item 1 is null"), "{err}");
}

#[test]
fn errors_go_to_stderr_with_nonzero_exit() {
    let (code, out, err) = cli(&["eval", "corpus/reverse.rasp", "--entry", "nope", "--input", "ab", "--json"]);
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
    assert!(err.contains("is not valid UTF-8 (first bad byte at offset 4)"), "{err}");
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
