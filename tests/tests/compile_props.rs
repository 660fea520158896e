//! Property test of the compiler's central promise: a model it emits never disagrees with the
//! interpreter. Random programs (chains of maps, selects with and/or/not, aggregates with
//! defaults, selector widths, ternaries, and the numeric idioms people write: means of 0/1
//! indicators, sums and differences of means and widths, means times positions rounded — the
//! counting idiom —, means over positional selectors times the number of keys they select
//! (`mean * length`, `mean * (length - indices)`), linear combinations with constants, and
//! functions of a `load`ed library) over the vocabulary 0..3 are compiled
//! for max-len 4; a
//! refusal must be a diagnostic (never a panic), and a compiled model must agree with the
//! interpreter on every input of length 1..=4 the interpreter accepts, hard and soft attention,
//! causal or not.

use proptest::prelude::*;
use raspc::verify::{generate, verify, Inputs};

#[derive(Clone, Debug)]
enum Step {
    Map(usize, &'static str, usize),
    MapConst(usize, &'static str, i64),
    Agg {
        k: usize,
        q: usize,
        cmp: &'static str,
        combine: Option<(&'static str, usize, usize, &'static str)>,
        v: usize,
        default: i64,
    },
    Width {
        k: usize,
        q: usize,
        cmp: &'static str,
    },
    Ternary(usize, usize, usize),
    /// A mean of a 0/1 indicator over a selection: `aggregate(select(k, q, cmp), indicator(v > 0), 0)`.
    Mean {
        k: usize,
        q: usize,
        cmp: &'static str,
        v: usize,
    },
    /// `a + b - c` (sums and differences of numbers: means, widths, positions).
    Linear(usize, usize, usize),
    /// `round(a * (indices + 1))`: a prefix mean times the prefix size (the counting idiom).
    Count(usize),
    /// A function of the loaded library applied to one or two s-ops.
    Lib(&'static str, usize, usize),
    /// The counting idiom: a prefix mean times the number of keys it averages.
    Counted {
        v: usize,
        strict: bool,
    },
    /// A linear combination of two s-ops.
    Affine(usize, i64, usize),
    /// A mean over a positional selector times the number of keys it selects, a function of
    /// `length` (and `indices`): a counted sum over the grid of (index, length) pairs.
    Total(usize, usize),
}

/// The library every random program loads (`load "lib";`).
const LIBRARY: &str = "def running(x) {
    return aggregate(select(indices, indices, <=), x, 0);
}
def prefix_total(x) {
    return round(aggregate(select(indices, indices, <=), indicator(x > 0), 0) * (indices + 1));
}
def width_sum(x, y) {
    return selector_width(select(x, y, <)) + selector_width(select(x, y, ==));
}
def from_end(x) {
    return length - x - 1;
}
";

fn step() -> impl Strategy<Value = Step> {
    let ops = proptest::sample::select(&["+", "-", "*", "%", "==", "<", "and", "or"][..]);
    let cmps = proptest::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]);
    let pick = 0usize..64;
    prop_oneof![
        (pick.clone(), ops.clone(), pick.clone()).prop_map(|(a, o, b)| Step::Map(a, o, b)),
        (pick.clone(), proptest::sample::select(&["+", "-", "*", "%", "==", ">"][..]), 1i64..3).prop_map(|(a, o, c)| Step::MapConst(a, o, c)),
        (
            pick.clone(),
            pick.clone(),
            cmps.clone(),
            proptest::option::of((proptest::sample::select(&["and", "or", "and not"][..]), pick.clone(), pick.clone(), cmps.clone())),
            pick.clone(),
            -1i64..2
        )
            .prop_map(|(k, q, cmp, combine, v, default)| Step::Agg { k, q, cmp, combine, v, default }),
        (pick.clone(), pick.clone(), cmps).prop_map(|(k, q, cmp)| Step::Width { k, q, cmp }),
        (pick.clone(), pick.clone(), pick.clone()).prop_map(|(a, b, c)| Step::Ternary(a, b, c)),
        (pick.clone(), pick.clone(), proptest::sample::select(&["==", "<", "<=", ">="][..]), pick.clone()).prop_map(|(k, q, cmp, v)| Step::Mean { k, q, cmp, v }),
        (pick.clone(), pick.clone(), pick.clone()).prop_map(|(a, b, c)| Step::Linear(a, b, c)),
        pick.clone().prop_map(Step::Count),
        (proptest::sample::select(&["running", "prefix_total", "width_sum", "from_end"][..]), pick.clone(), pick.clone()).prop_map(|(f, a, b)| Step::Lib(f, a, b)),
        (pick.clone(), any::<bool>()).prop_map(|(v, strict)| Step::Counted { v, strict }),
        (pick.clone(), -3i64..4, pick.clone()).prop_map(|(a, c, b)| Step::Affine(a, c, b)),
        (pick, 0usize..4).prop_map(|(v, form)| Step::Total(v, form)),
    ]
}

fn program(steps: &[Step]) -> String {
    let mut names = vec!["tokens_int".to_string(), "indices".to_string(), "length".to_string()];
    let mut text = String::from("load \"lib\";\n");
    for (i, s) in steps.iter().enumerate() {
        let n = |x: &usize| names[x % names.len()].clone();
        let body = match s {
            Step::Map(a, o, b) => format!("{} {o} {}", n(a), n(b)),
            Step::MapConst(a, o, c) => format!("{} {o} {c}", n(a)),
            Step::Agg { k, q, cmp, combine, v, default } => {
                let mut sel = format!("select({}, {}, {cmp})", n(k), n(q));
                if let Some((how, k2, q2, c2)) = combine {
                    sel = format!("({sel} {how} select({}, {}, {c2}))", n(k2), n(q2));
                }
                format!("aggregate({sel}, {}, {default})", n(v))
            }
            Step::Width { k, q, cmp } => format!("selector_width(select({}, {}, {cmp}))", n(k), n(q)),
            Step::Ternary(a, b, c) => format!("{} if {} else {}", n(a), n(b), n(c)),
            Step::Mean { k, q, cmp, v } => format!("aggregate(select({}, {}, {cmp}), indicator({} > 0), 0)", n(k), n(q), n(v)),
            Step::Linear(a, b, c) => format!("{} + {} - {}", n(a), n(b), n(c)),
            Step::Count(a) => format!("round({} * (indices + 1))", n(a)),
            Step::Lib("width_sum", a, b) => format!("width_sum({}, {})", n(a), n(b)),
            Step::Lib(f, a, _) => format!("{f}({})", n(a)),
            Step::Counted { v, strict: true } => format!("round(aggregate(select(indices, indices, <), {}, 0) * indices)", n(v)),
            Step::Counted { v, strict: false } => format!("round(aggregate(select(indices, indices, <=), {}, 0) * (indices + 1))", n(v)),
            Step::Affine(a, c, b) => format!("{} * {c} - {} / 2", n(a), n(b)),
            Step::Total(v, 0) => format!("aggregate(select(indices, indices, ==) or select(indices, indices, !=), {}, 0) * length", n(v)),
            Step::Total(v, 1) => format!("round(aggregate(select(indices, indices, >=), {}, 0) * (length - indices))", n(v)),
            Step::Total(v, 2) => format!("aggregate(select(indices, indices, >), {}, 1) * (length - indices - 1)", n(v)),
            Step::Total(v, _) => format!("round(length * aggregate(select(0, 0, ==), {}, 1) * 2)", n(v)),
        };
        text += &format!("s{i} = {body};\n");
        names.push(format!("s{i}"));
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: raspc_tests::prop_cases(300), ..ProptestConfig::default() })]

    #[test]
    fn compiled_models_agree_with_the_interpreter(steps in proptest::collection::vec(step(), 1..6), causal in any::<bool>()) {
        let text = program(&steps);
        let loader = raspc_lang::MemoryLoader([(std::path::PathBuf::from("/prop/lib.rasp"), LIBRARY.to_string())].into_iter().collect());
        let (_, r) = raspc_lang::evaluate_program("prop.rasp", Some(std::path::Path::new("/prop/main.rasp")), &text, &loader);
        let session = match r {
            Ok(s) => s,
            Err(_) => return Ok(()), // e.g. `not` of a selector: not a program
        };
        let (_, root) = session.entry(None).unwrap();
        let vocab = raspc_lang::parse_input("0123").unwrap();
        let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: 4, causal, ..Default::default() };
        let compiled = match raspc_compiler::compile(&session.graph, root, &opts, "prop") {
            Ok(c) => c,
            Err(diags) => {
                prop_assert!(diags.iter().all(|d| d.is_error() && d.primary_span().is_some()), "refusals carry a place: {diags:?}");
                return Ok(());
            }
        };
        let model = raspc_runtime::Model::new(compiled.checkpoint, &raspc_runtime::device("cpu").unwrap()).unwrap();
        let seqs = generate(&Inputs::Exhaustive, vocab.len(), 4).unwrap();
        let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
        let report = verify(&session.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {}).unwrap();
        prop_assert_eq!(report.failed, 0, "program (causal {}):\n{}\n{:#?}", causal, text, report.examples);
    }
}
