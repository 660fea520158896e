//! `--causal` support does not depend on how a program orders the operands of `and`.

use raspc::verify::{generate, verify, Inputs};
use raspc_lang::{Atom, MemoryLoader};

fn verify_causal(src: &str) -> Result<(usize, usize), String> {
    let (_, r) = raspc_lang::evaluate_program("c.rasp", None, src, &MemoryLoader::default());
    let s = r.map_err(|d| format!("{d:?}"))?;
    let (_, root) = s.entry(Some("y"))?;
    let vocab: Vec<Atom> = ["a", "b", "c"].iter().map(|t| Atom::Str(t.to_string())).collect();
    let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: 5, causal: true, ..Default::default() };
    let c = raspc_compiler::compile(&s.graph, root, &opts, "test").map_err(|d| d.iter().map(|x| x.message.clone()).collect::<Vec<_>>().join("; "))?;
    let model = raspc_runtime::Model::new(c.checkpoint, &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?;
    let seqs = generate(&Inputs::Exhaustive, vocab.len(), 5)?;
    let modes = [raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft];
    let rep = verify(&s.graph, root, &model, &vocab, &seqs, &modes, &mut |_| {})?;
    Ok((rep.checked, rep.failed))
}

#[test]
fn and_of_a_backward_selector_is_causal_in_either_order() {
    // "some earlier position holds my token", read again at key side by a prefix mean.
    for sel in ["select(tokens, tokens, ==) and select(indices, indices, <)", "select(indices, indices, <) and select(tokens, tokens, ==)"] {
        let src = format!("x = has_focus({sel});\ny = aggregate(select(indices, indices, <=), indicator(x));");
        // 3 + 9 + 27 + 81 + 243 inputs, every prefix checked by verify.
        assert_eq!(verify_causal(&src), Ok((363, 0)), "{sel}");
    }
    // A selector that looks ahead is still refused, whichever side it is on.
    for sel in ["select(tokens, tokens, ==) and select(indices, indices, >)", "select(indices, indices, >) and select(tokens, tokens, ==)"] {
        let src = format!("x = has_focus({sel});\ny = aggregate(select(indices, indices, <=), indicator(x));");
        let e = verify_causal(&src).unwrap_err();
        assert!(e.contains("with --causal"), "{sel}: {e}");
    }
}

/// `or` of two backward selectors looks backward, and so does `not` of a selector whose
/// negation does (`not (a or b)` is `not a and not b`): a running count of two tokens written
/// with `or`, or with De Morgan, was refused (helper g8). One side looking ahead is still refused.
#[test]
fn or_and_not_of_backward_selectors_are_causal() {
    for sel in [
        "(select(tokens, \"a\", ==) and select(indices, indices, <=)) or (select(tokens, \"b\", ==) and select(indices, indices, <=))",
        "not (select(tokens, tokens, !=) or select(indices, indices, >))",
        "not (select(indices, indices, >) or select(tokens, \"c\", ==))",
    ] {
        let src = format!("w = selector_width({sel});\ny = aggregate(select(indices, indices, <=), w);");
        assert_eq!(verify_causal(&src), Ok((363, 0)), "{sel}");
    }
    for sel in ["(select(tokens, \"a\", ==) and select(indices, indices, <=)) or select(tokens, \"b\", ==)", "not (select(tokens, tokens, !=) or select(indices, indices, <))"] {
        let src = format!("w = selector_width({sel});\ny = aggregate(select(indices, indices, <=), w);");
        let e = verify_causal(&src).unwrap_err();
        assert!(e.contains("with --causal"), "{sel}: {e}");
    }
}

/// An s-op with one possible value is prefix-stable whatever it reads: `indices < length` is
/// always true, so a mean of it at key positions is fine (it was refused for reading `length`;
/// helper g8). `length` itself at key positions is still refused.
#[test]
fn a_constant_computed_from_length_is_causal() {
    assert_eq!(verify_causal("x = (indices < length) + 0;\ny = aggregate(select(indices, indices, <=), x);"), Ok((363, 0)));
    let e = verify_causal("x = length + 0;\ny = aggregate(select(indices, indices, <=), x);").unwrap_err();
    assert!(e.contains("with --causal"), "{e}");
}
