//! The program's domain: a program the interpreter rejects on every input is refused before
//! any lowering, with the interpreter's own error, instead of compiling to a model of nothing.

use raspc_lang::{Atom, Diagnostic, EvalError, Graph, NodeId};

/// Most inputs tried before concluding that the interpreter rejects every input.
pub const PROBE_BUDGET: usize = 1024;

/// Inputs tried in order: every sequence of each length while the lengths' totals fit in the
/// budget, then seeded random sequences at the remaining lengths (shortest first).
fn probes(vocab: usize, max_len: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![];
    let mut state: u64 = 0x5eed;
    let mut rand = |n: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n
    };
    for len in 1..=max_len {
        let left = PROBE_BUDGET.saturating_sub(out.len());
        if left == 0 {
            break;
        }
        let all = (vocab as u128).checked_pow(len as u32).unwrap_or(u128::MAX);
        if all <= left as u128 {
            for code in 0..all {
                let mut c = code;
                let mut seq = vec![0; len];
                for slot in seq.iter_mut().rev() {
                    *slot = (c % vocab as u128) as usize;
                    c /= vocab as u128;
                }
                out.push(seq);
            }
        } else {
            // Share what is left among the remaining lengths.
            let lengths_left = max_len - len + 1;
            let k = (left / lengths_left).max(1);
            for _ in 0..k {
                out.push((0..len).map(|_| rand(vocab)).collect());
            }
        }
    }
    out
}

/// Refuses `root` when the interpreter rejects every input tried (up to [`PROBE_BUDGET`]
/// inputs over `vocab` of lengths 1..=max_len). Returns the first input it accepts.
pub fn check(graph: &Graph, root: NodeId, vocab: &[Atom], max_len: usize) -> Result<Vec<Atom>, Diagnostic> {
    if vocab.is_empty() || max_len == 0 {
        return Ok(vec![]);
    }
    let mut first: Option<(Vec<Atom>, EvalError)> = None;
    let tried = probes(vocab.len(), max_len);
    for p in &tried {
        let input: Vec<Atom> = p.iter().map(|&t| vocab[t].clone()).collect();
        match raspc_lang::evaluate(graph, root, &input) {
            Ok(_) => return Ok(input),
            Err(e) => {
                if first.is_none() {
                    first = Some((input, e));
                }
            }
        }
    }
    let Some((input, e)) = first else { return Ok(vec![]) };
    let shown = format!("[{}]", input.iter().map(Atom::repr).collect::<Vec<_>>().join(", "));
    let exhaustive = tried.len() as u128 == (1..=max_len as u32).map(|n| (vocab.len() as u128).saturating_pow(n)).fold(0u128, u128::saturating_add);
    let what = if exhaustive { format!("every input ({} inputs)", tried.len()) } else { format!("every one of {} inputs tried", tried.len()) };
    let root_label = &graph.node(root).label;
    // Built-in s-ops (`tokens_int`, ...) have an empty span in the prelude: point where the
    // program names it (`vals = tokens_int;`), else at its first reader, else at the entry
    // (helper ed25: the entry, 20,000 lines below the mistake).
    let span = if e.span.start == e.span.end {
        let first_reader = graph.users(e.node).into_iter().map(|u| graph.node(u).span).filter(|s| s.start != s.end).min_by_key(|s| (s.file, s.start));
        graph.node(e.node).named_at.or(first_reader).unwrap_or(graph.node(root).span)
    } else {
        e.span
    };
    Err(Diagnostic::error(
        "compile::rejected",
        format!("the interpreter rejects `{root_label}` on {what} of lengths 1..={max_len} over the vocabulary; there is nothing to compile"),
        span,
    )
    .with_label(format!("{} fails{}: {}", crate::names::describe(graph, e.node), e.position.map(|p| format!(" at position {p}")).unwrap_or_default(), e.message))
    .with_note(format!("e.g. on the input {shown}"))
    .with_note("check the program with `raspc eval PROGRAM --input ...`, or give a --vocab it accepts"))
}
