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

#[test]
fn the_ast_stage_is_fully_parenthesised_source() {
    let dir = std::env::temp_dir().join(format!("raspc-ast-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.rasp");
    std::fs::write(&path, "x = 1 + 2 * indices - -3;\ny = x if not x > 2 or x == 0 else 2.0;\ndef f(a) {\n  b = a ^ 2 ^ 3;\n  return b;\n}\n").unwrap();
    let (code, out, err) = cli(&["dump", path.to_str().unwrap(), "--stage", "ast"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0, "{err}");
    // Precedence and associativity as the parser (and the reference's grammar, whose `^` groups
    // to the left) grouped them, and where each statement starts.
    assert_eq!(
        out,
        "x = (1 + (2 * indices)) - (-3);  # 1:1\n\
         y = x if (((not x) > 2) or (x == 0)) else 2.0;  # 2:1\n\
         def f(a) {  # 3:1\n    b = (a ^ 2) ^ 3;  # 4:3\n    return b;  # 5:3\n}\n"
    );
}

/// Every corpus program and both built-in libraries, written back by `--stage ast`, parse to a
/// program that prints the same again and evaluates to the same values.
#[test]
fn the_ast_stage_round_trips_every_corpus_program() {
    use raspc_lang::{parser, pretty, DiskLoader, SourceMap};
    fn print(text: &str) -> String {
        let mut sources = SourceMap::new();
        let f = sources.add("p.rasp", None, text.to_string());
        let (prog, errs) = parser::parse(f, text);
        assert!(errs.is_empty(), "{errs:?}\n{text}");
        // Without the `# line:col` comments, which differ between the two texts.
        let text = pretty::program(&prog, &|s| sources.line_col(s.file, s.start));
        text.lines().map(|l| l.rsplit_once("  # ").map_or(l, |(code, _)| code)).collect::<Vec<_>>().join("\n")
    }
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rasp") {
                out.push(p);
            }
        }
    }
    let mut paths = vec![];
    files(&raspc_tests::corpus_dir(), &mut paths);
    let lang = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/lang/src");
    paths.extend([lang.join("prelude.rasp"), lang.join("matrix.rasp")]);
    paths.sort();
    let mut evaluated = 0;
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let once = print(&text);
        // REPL-only statements (which raspc ignores) come back as comments.
        let code = |t: &str| t.lines().filter(|l| !l.starts_with("# a REPL statement")).collect::<Vec<_>>().join("\n");
        assert_eq!(code(&print(&once)), code(&once), "{}", path.display());
        assert!(once.lines().count() * 2 > text.lines().filter(|l| !l.trim().is_empty() && !l.trim().starts_with('#')).count(), "{}", path.display());
        // Evaluated from the file's own path, so that its `load`s resolve as they do for it.
        let (_, a) = raspc_lang::evaluate_program("a.rasp", Some(path), &text, &DiskLoader);
        let (_, b) = raspc_lang::evaluate_program("b.rasp", Some(path), &once, &DiskLoader);
        let (a, b) = match (a, b) {
            (Ok(a), Ok(b)) => (a, b),
            // A file that fails on its own (a library with names its loader defines): the same failure.
            (Err(a), Err(b)) => {
                let codes = |d: &[raspc_lang::Diagnostic]| d.iter().map(|d| d.code).collect::<Vec<_>>();
                assert_eq!(codes(&a), codes(&b), "{}", path.display());
                continue;
            }
            _ => panic!("{}: the original and the printed program evaluate differently", path.display()),
        };
        let Some(entry) = a.default_entry().filter(|e| a.entry(Some(e)).is_ok()) else { continue };
        assert_eq!(b.default_entry(), Some(entry.clone()), "{}", path.display());
        for input in [raspc_tests::chars("abc"), raspc_tests::chars("()a("), raspc_tests::ints(&[3, 1, 2, 1])] {
            let run = |s: &raspc_lang::Session| raspc_tests::run(s, &entry, &input).map(|v| raspc_tests::json(&v));
            assert_eq!(run(&a), run(&b), "{} on {input:?}", path.display());
        }
        evaluated += 1;
    }
    assert!(evaluated >= 60, "only {evaluated} of {} programs have an entry", paths.len());
}

/// A program the vocabulary makes fail on every input (`tokens_int` of letters): `compile`
/// refuses it (`compile::rejected`), and `dump` still prints every stage, the plan and schedule
/// as that refusal (review rv23: `--stage simplified` and `values` panicked indexing an empty
/// value list).
#[test]
fn stages_of_a_program_rejected_everywhere() {
    let p = std::env::temp_dir().join(format!("raspc-dump-rejected-{}.rasp", std::process::id()));
    std::fs::write(
        &p,
        "prev = aggregate(select(indices, indices - 1, ==), tokens_int, 0);\ns = tokens_int + prev;\nprog = aggregate(select(indices, s, ==), indices, 0) if s > 0 else -1;\n",
    )
    .unwrap();
    for s in ["graph", "simplified", "values", "plan", "schedule"] {
        let (code, out, err) = cli(&["dump", p.to_str().unwrap(), "--stage", s, "--vocab", "abc", "--max-len", "6"]);
        assert!(!err.contains("internal error") && !err.contains("panicked"), "{s}: {err}");
        match s {
            "plan" | "schedule" => assert!(code == 1 && err.contains("compile::rejected"), "{s}: {out}{err}"),
            _ => assert!(code == 0 && out.contains("prog"), "{s}: {out}{err}"),
        }
    }
    let _ = std::fs::remove_file(&p);
}
