//! `raspc dump --stage`: every stage of the pipeline prints a stable text form, pinned here by
//! golden snapshots (tests/tests/snapshots/dump_stages__*.snap; review changes with
//! `cargo insta review`). A change to the compiler that alters a plan shows up as a diff here.

use raspc_tests::cli;

fn stage(program: &str, vocab: &str, stage: &str) -> String {
    let path = raspc_tests::corpus(program);
    let (code, out, err) = cli(&["dump", path.to_str().unwrap(), "--stage", stage, "--vocab", vocab, "--max-len", "5"]);
    assert_eq!(code, 0, "{program} --stage {stage}: {err}");
    assert!(!out.is_empty());
    out
}

macro_rules! goldens {
    ($($name:ident: $program:literal, $vocab:literal;)*) => {$(
        #[test]
        fn $name() {
            for s in ["graph", "simplified", "values", "plan", "schedule"] {
                insta::assert_snapshot!(format!("{}_{s}", stringify!($name)), stage($program, $vocab, s));
            }
        }
    )*};
}

goldens! {
    reverse: "reverse.rasp", "abc";
    sort_freq: "sort_freq.rasp", "abc";
    dyck1: "dyck1.rasp", "()";
}

#[test]
fn compiler_stages_need_the_compile_flags() {
    let path = raspc_tests::corpus("reverse.rasp");
    let (code, out, err) = cli(&["dump", path.to_str().unwrap(), "--stage", "plan"]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("--max-len"), "{err}");
}

#[test]
fn the_schedule_matches_the_checkpoint() {
    // The schedule stage reports the same depth and width as the compiled checkpoint.
    let (code, out, err) = cli(&["dump", raspc_tests::corpus("sort_freq.rasp").to_str().unwrap(), "--stage", "schedule", "--vocab", "abc", "--max-len", "16"]);
    assert_eq!(code, 0, "{err}");
    let case = raspc_tests::Case { file: "sort_freq.rasp", entry: None, vocab: "abc" };
    let s = raspc_tests::compile(&case, 16, false).unwrap().3.summary;
    assert!(out.starts_with(&format!("layers {}, d_model {}\n", s.layers, s.d_model)), "{out}");
}
