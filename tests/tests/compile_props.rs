//! Property test of the compiler's central promise: a model it emits never disagrees with the
//! interpreter. Random programs (chains of maps, selects with and/or/not, aggregates with
//! defaults, selector widths, ternaries, the counting idiom, linear combinations) over the vocabulary 0..3 are compiled for max-len 4; a
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
    /// The counting idiom: a prefix mean times the number of keys it averages.
    Counted {
        v: usize,
        strict: bool,
    },
    /// A linear combination of two s-ops.
    Affine(usize, i64, usize),
}

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
        (pick.clone(), any::<bool>()).prop_map(|(v, strict)| Step::Counted { v, strict }),
        (pick.clone(), -3i64..4, pick).prop_map(|(a, c, b)| Step::Affine(a, c, b)),
    ]
}

fn program(steps: &[Step]) -> String {
    let mut names = vec!["tokens_int".to_string(), "indices".to_string(), "length".to_string()];
    let mut text = String::new();
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
            Step::Counted { v, strict: true } => format!("round(aggregate(select(indices, indices, <), {}, 0) * indices)", n(v)),
            Step::Counted { v, strict: false } => format!("round(aggregate(select(indices, indices, <=), {}, 0) * (indices + 1))", n(v)),
            Step::Affine(a, c, b) => format!("{} * {c} - {} / 2", n(a), n(b)),
        };
        text += &format!("s{i} = {body};\n");
        names.push(format!("s{i}"));
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn compiled_models_agree_with_the_interpreter(steps in proptest::collection::vec(step(), 1..6), causal in any::<bool>()) {
        let text = program(&steps);
        let (_, r) = raspc_lang::evaluate_program("prop.rasp", None, &text, &raspc_lang::MemoryLoader::default());
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
