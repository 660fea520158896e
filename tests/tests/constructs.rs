//! Every construct of the language (docs/language.md), checked on values worked out by hand.

use raspc_lang::Atom;
use raspc_tests::*;
use serde_json::json;

fn host(s: &raspc_lang::Session, name: &str) -> serde_json::Value {
    host_json(&s.get(name).unwrap_or_else(|| panic!("{name} is not bound")))
}

#[test]
fn host_level_values() {
    let s = session("constructs.rasp");
    assert_eq!(host(&s, "arith"), json!(6.5));
    assert_eq!(host(&s, "mod_neg"), json!(2));
    assert_eq!(host(&s, "rounded"), json!([0, 2, 2, -2, 3]));
    assert_eq!(host(&s, "truth"), json!(true));
    assert_eq!(host(&s, "chain"), json!(2));
    assert_eq!(host(&s, "powers"), json!([1024, 0.5, 4.0]));
    assert_eq!(host(&s, "host_logic"), json!([2, 0, "x", 0]));
    assert_eq!(host(&s, "strings"), json!("abc"));
    assert_eq!(host(&s, "membership"), json!([true, true, true, false]));
    assert_eq!(host(&s, "fact5"), json!(120));
    assert_eq!(host(&s, "nums"), json!([0, 1, 2, 3, 4]));
    assert_eq!(host(&s, "span"), json!([2, 5, 8]));
    assert_eq!(host(&s, "down"), json!([5, 3, 1]));
    assert_eq!(host(&s, "squares"), json!([0, 1, 4, 9, 16]));
    assert_eq!(host(&s, "pairs"), json!([[0, 0], [1, 1], [2, 4], [3, 9], [4, 16]]));
    assert_eq!(host(&s, "square_of"), json!({"0": 0, "1": 1, "2": 4, "3": 9, "4": 16}));
    assert_eq!(host(&s, "size"), json!(13));
    assert_eq!(host(&s, "total"), json!(10));
    assert_eq!(host(&s, "last_square"), json!(16));
    assert_eq!(host(&s, "lookup"), json!(9));
    assert_eq!(host(&s, "acc"), json!([2, 12]));
    assert_eq!(host(&s, "safe"), json!(1));
    // REPL-only statements and draw are accepted and reported as notes.
    assert_eq!(s.notes.iter().filter(|d| d.code == "eval::repl-ignored").count(), 5);
    assert_eq!(s.notes.iter().filter(|d| d.code == "eval::draw-ignored").count(), 1);
}

#[test]
fn sop_operations() {
    let s = session("constructs.rasp");
    let input = ints(&[1, 2, 3, 2]);
    let cases = [
        ("added", json!([3, 4, 5, 6])),
        ("plus_one", json!([2, 3, 4, 3])),
        ("times_two", json!([2, 4, 6, 4])),
        ("late_val", json!([100, 101, 102, 103])),
        ("as_ints", json!([1, 2, 3, 2])),
        ("doubled", json!([2, 4, 6, 4])),
        ("summed", json!([1, 3, 5, 5])),
        ("parity", json!(["even", "odd", "even", "odd"])),
        ("clipped", json!([1, 2, 3, 2])),
        ("small", json!([true, true, false, true])),
        ("named", json!(["one", "two", "three", "two"])),
        ("letters", json!(["x", "y", "z", "x"])),
        ("picked", json!(["p", "q", "p", "q"])),
        ("negated", json!([-1, -2, -3, -2])),
        ("plus_tok", json!([1, 2, 3, 2])),
        ("as_floats", json!([1.0, 2.0, 3.0, 2.0])),
        ("as_bools", json!([true, true, true, true])),
        ("as_is", json!([1, 2, 3, 2])),
        ("as_strs", json!(["1", "2", "3", "2"])),
        ("flags", json!([false, true, false, true])),
        ("inverted", json!([true, false, true, false])),
        ("either", json!([true, true, false, true])),
        ("both", json!([false, false, false, false])),
        ("ratio", json!([0.5, 1.0, 1.5, 1.0])),
        ("rounded_ratio", json!([0, 1, 2, 1])),
        ("marks", json!([0, 1, 1, 1])),
        ("first", json!([1, 1, 1, 1])),
        ("last", json!([2, 2, 2, 2])),
        ("has_two", json!([true, true, true, true])),
        ("width_lt", json!([0, 1, 2, 3])),
        // one selected value keeps its type (int); several give the float mean
        ("prefix_mean", json!([1, 1.5, 2.0, 2.0])),
        ("prev_token", json!([-1, 1, 2, 3])),
        ("prev_str", json!(["none", "1", "2", "3"])),
        ("n", json!([4, 4, 4, 4])),
        ("prog", json!([1, 3, 5, 5])),
    ];
    for (name, want) in cases {
        assert_eq!(json(&run(&s, name, &input).unwrap()), want, "{name}");
    }
    let m = |rows: &[[u8; 4]]| json!(rows);
    let sels = [
        ("sel_lt", m(&[[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]])),
        ("sel_le", m(&[[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])),
        ("sel_gt", m(&[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]])),
        ("sel_ge", m(&[[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1]])),
        ("sel_ne", m(&[[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]])),
        ("sel_eq", m(&[[1, 0, 0, 0], [0, 1, 0, 1], [0, 0, 1, 0], [0, 1, 0, 1]])),
        ("sel_and", m(&[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]])),
        ("sel_or", m(&[[1, 0, 0, 0], [1, 1, 0, 1], [1, 1, 1, 0], [1, 1, 1, 1]])),
        ("sel_not", m(&[[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]])),
        ("sel_const", m(&[[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]])),
    ];
    for (name, want) in sels {
        assert_eq!(json(&run(&s, name, &input).unwrap()), want, "{name}");
    }
    // Applying an s-op to an input at host level runs the interpreter.
    assert_eq!(host(&s, "applied"), json!([4, 3.0, 4.0]));
}

#[test]
fn string_inputs_and_conversions() {
    let s = session("constructs.rasp");
    // A string input is split into characters; tokens_int converts each one.
    assert_eq!(json(&run(&s, "as_ints", &chars("123")).unwrap()), json!([1, 2, 3]));
    let err = run(&s, "as_ints", &chars("1x")).unwrap_err();
    assert!(err.contains("invalid literal for int(): 'x'"), "{err}");
    assert_eq!(json(&run(&s, "as_bools", &ints(&[0, 3])).unwrap()), json!([false, true]));
    assert_eq!(json(&run(&s, "as_floats", &chars("7")).unwrap()), json!([7.0]));
    let err = run(&s, "as_ints", &[]).unwrap_err();
    assert!(err.contains("non-empty"), "{err}");
}

#[test]
fn library_functions() {
    let s = session("library.rasp");
    let input = chars("abcab");
    let cases = [
        ("n_a", json!([2, 2, 2, 2, 2])),
        ("has_b", json!([true, true, true, true, true])),
        ("bigger", json!([5, 4, 3, 3, 4])),
        ("smaller", json!([0, 1, 2, 2, 2])),
        ("mean_index", json!([2.0, 2.0, 2.0, 2.0, 2.0])),
        ("third", json!(["c", "c", "c", "c", "c"])),
        ("shifted", json!(["_", "a", "b", "c", "a"])),
        // The reference library's mark_first_instance selects later keys (`indices > indices`
        // at key side), so it marks the last `a`, like mark_last_instance.
        ("first_a", json!([false, false, false, true, false])),
        ("last_a", json!([false, false, false, true, false])),
        ("from_first_a", json!([3, 3, 3, 3, 3])),
        ("from_last_a", json!([3, 3, 3, 3, 3])),
        ("sorted_chars", json!(["a", "a", "b", "b", "c"])),
        ("next_same", json!([3, 4, -1, -1, -1])),
        ("focus", json!([false, false, false, false, false])),
        ("full_width", json!([5, 5, 5, 5, 5])),
    ];
    for (name, want) in cases {
        assert_eq!(json(&run(&s, name, &input).unwrap()), want, "{name}");
    }
}

#[test]
fn user_definitions_shadow_the_library_and_builtins() {
    let src = r#"
        def count(seq, atom) { return 42; }
        c = count(tokens, "a") + indices;
        def my_length() {
            return round(1 / aggregate(select(1, 1, ==), indicator(indices == 0)));
        }
        len2 = my_length();
        def my_width(sel) {
            return round(length * aggregate(sel, 1, 0));
        }
        w = my_width(select(indices, indices, <=));
        length = 7;
        l = indices + length;
        tokens = tokens_int;
        t = tokens + 1;
    "#;
    let input = chars("123");
    let out = |e| raspc_lang::run_source(src, Some(e), &input).map(|v| v.to_json()).unwrap();
    assert_eq!(out("c"), json!([42, 43, 44]));
    assert_eq!(out("len2"), json!([3, 3, 3]));
    // the mean of a constant 1 is 1 whatever the width, so this is just `length`
    assert_eq!(out("w"), json!([3, 3, 3]));
    assert_eq!(out("l"), json!([7, 8, 9]));
    assert_eq!(out("t"), json!([2, 3, 4]));
}

#[test]
fn reference_semantics_of_aggregate_and_types() {
    let input = ints(&[1, 2, 3]);
    let run_src = |src: &str| raspc_lang::run_source(src, None, &input);
    // Averaging booleans is an error in the reference (the sequence type is bool).
    let e = run_src("x = aggregate(select(indices, indices, <=), tokens_int == 1);").unwrap_err();
    assert!(e.contains("non-numeric"), "{e}");
    // Averaging strings likewise.
    let e = run_src("x = aggregate(select(indices, indices, <=), tokens);").unwrap_err();
    assert!(e.contains("non-numeric"), "{e}");
    // Strings may not mix with numbers in one s-op (default 0 with string values).
    let e = run_src("x = aggregate(select(indices, indices - 1, ==), tokens);").unwrap_err();
    assert!(e.contains("mixes strings"), "{e}");
    // The input list itself may mix them: the reference converts it value by value for
    // `tokens_int`, `tokens_str`, `tokens_bool`, and checks its type only as `tokens_asis`
    // (helper a10: `[1, "2"]` was refused for `tokens_int`, naming `tokens_str`).
    let mixed = [Atom::Int(1), Atom::Str("2".into())];
    assert_eq!(raspc_lang::run_source("x = tokens_int;", None, &mixed).unwrap().to_json(), json!([1, 2]));
    assert_eq!(raspc_lang::run_source("x = tokens;", None, &mixed).unwrap().to_json(), json!(["1", "2"]));
    assert_eq!(raspc_lang::run_source("x = tokens_bool;", None, &mixed).unwrap().to_json(), json!([true, true]));
    let e = raspc_lang::run_source("x = tokens_asis;", None, &mixed).unwrap_err();
    assert!(e.contains("mixes strings"), "{e}");
    let e = raspc_lang::run_source("x = tokens_asis == 1;", None, &mixed).unwrap_err();
    assert!(e.contains("mixes strings"), "{e}");
    // A string default works.
    assert_eq!(run_src("x = aggregate(select(indices, indices - 1, ==), tokens, \"-\");").unwrap().to_json(), json!(["-", "1", "2"]));
    // Booleans selected singly keep their type; a bool default is kept.
    assert_eq!(run_src("x = aggregate(select(indices, indices, ==), tokens_int == 2, False);").unwrap().to_json(), json!([false, true, false]));
    // Python modulo and true division elementwise; round half to even.
    assert_eq!(run_src("x = (indices - 2) % 3;").unwrap().to_json(), json!([1, 2, 0]));
    assert_eq!(run_src("x = round((indices * 2 + 1) / 2);").unwrap().to_json(), json!([0, 2, 2]));
    // Division by zero names the failing operation.
    let e = run_src("boom = tokens_int / (indices - 1);").unwrap_err();
    assert!(e.starts_with("boom: division by zero"), "{e}");
}

#[test]
fn load_is_relative_and_cycle_safe() {
    let path = corpus("load/main.rasp");
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, r) = raspc_lang::evaluate_program("main.rasp", Some(&path), &text, &raspc_lang::DiskLoader);
    let s = r.expect("loads resolve");
    assert!(s.notes.iter().any(|d| d.code == "eval::load-cycle"));
    assert_eq!(json(&run(&s, "doubled", &ints(&[1, 5])).unwrap()), json!([2, 10]));
}

#[test]
fn entry_defaults() {
    // `prog` wins when bound; otherwise the last name assigned.
    let input = [Atom::Int(1)];
    assert_eq!(raspc_lang::run_source("prog = indices + 5; y = indices;", None, &input).unwrap().to_json(), json!([5]));
    assert_eq!(raspc_lang::run_source("x = indices + 5; y = indices + 9;", None, &input).unwrap().to_json(), json!([9]));
    // A trailing host assignment does not hide the last s-op.
    assert_eq!(raspc_lang::run_source("x = indices + 5; n = 3;", None, &input).unwrap().to_json(), json!([5]));
    let e = raspc_lang::run_source("x = [1];", None, &input).unwrap_err();
    assert!(e.contains("assigns no s-op or selector") && e.contains("`x`, is a list"), "{e}");
}
