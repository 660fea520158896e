//! Property tests: no byte string makes the parser, the host evaluator, the interpreter or the
//! CLI panic. Inputs are both raw bytes and soups of RASP tokens (which get much further into
//! the parser and evaluator than random bytes do).

use proptest::prelude::*;

const WORDS: &[&str] = &[
    "x",
    "y",
    "f",
    "tokens",
    "indices",
    "length",
    "tokens_int",
    "def",
    "return",
    "for",
    "in",
    "if",
    "else",
    "not",
    "and",
    "or",
    "load",
    "draw",
    "round(",
    "indicator(",
    "select(",
    "aggregate(",
    "range(",
    "zip(",
    "len(",
    "selector_width(",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ":",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "^",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "0",
    "1",
    "2",
    "3.5",
    "\"a\"",
    "\"\"",
    "True",
    "False",
    "set example",
    "exit",
    "\n",
    "#c\n",
    "prog",
];

fn eval_cli(program: &str, input: &str) -> i32 {
    let dir = std::env::temp_dir().join(format!("raspc-prop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("p{n}.rasp"));
    std::fs::write(&path, program).unwrap();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let args = ["raspc", "eval", path.to_str().unwrap(), "--input", input, "--json"].map(String::from);
    let code = raspc::run(args, &mut out, &mut err, false);
    let _ = std::fs::remove_file(&path);
    code
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: raspc_tests::prop_cases(400), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (_, r) = raspc_lang::evaluate_program("fuzz", None, &text, &raspc_lang::MemoryLoader::default());
        if let Ok(s) = r
            && let Ok((_, node)) = s.entry(None) {
                let _ = raspc_lang::evaluate(&s.graph, node, &raspc_lang::parse_input("ab1").unwrap());
            }
    }

    #[test]
    fn token_soup_never_panics(words in proptest::collection::vec(proptest::sample::select(WORDS), 0..60), input in "[a-c0-9]{0,5}") {
        let program = words.join(" ");
        let code = eval_cli(&program, &input);
        prop_assert!(code == 0 || code == 1, "exit code {code} for program {program:?}");
    }

    #[test]
    fn plausible_programs_never_panic(
        op in proptest::sample::select(&["+", "-", "*", "/", "%", "^", "==", "<", "and", "or"][..]),
        cmp in proptest::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]),
        a in proptest::sample::select(&["tokens", "tokens_int", "indices", "length", "1", "\"a\"", "0.5", "True"][..]),
        b in proptest::sample::select(&["tokens", "tokens_int", "indices", "length", "2", "\"b\"", "-3", "False"][..]),
        input in "[a-c0-9]{0,6}",
    ) {
        let program = format!(
            "m = {a} {op} {b};\ns = select({a}, {b}, {cmp});\nw = selector_width(s);\nv = aggregate(s, {a}, {b});\nprog = v if w > 1 else m;\n"
        );
        let code = eval_cli(&program, &input);
        prop_assert!(code == 0 || code == 1, "exit code {code} for program {program:?}");
    }
}
