//! `raspc eval`: the reference interpreter on one input.

use crate::args::*;
use crate::cmd::*;
use crate::diagnostics::render;
use crate::Failure;
use raspc_lang::Diagnostic;
use std::io::Write;

#[allow(clippy::too_many_arguments)]
pub(crate) fn eval(path: &std::path::Path, entry: Option<&str>, input: &str, json: bool, causal: bool, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    let session = load(path, err, color)?;
    let (_, node) = entry_of(&session, entry, err, color)?;
    let tokens = parse_tokens("--input", input)?;
    input_file_warning(input, err);
    let budget = limits()?.max_input_tokens;
    if tokens.len() > budget {
        return Err(format!("--input has {} tokens, over the budget of {budget} (raise it with RASPC_LIMITS=input_tokens=N)", tokens.len()).into());
    }
    // Plain text is one token per character (as in the reference); a failure on text holding
    // spaces or commas is most likely meant as several-character tokens.
    let text_note = (!input.trim_start().starts_with('[') && input.contains([' ', ','])).then(|| {
        format!(
            "`--input` text is one token per character ({} tokens here, spaces and commas included); tokens of several characters are given as a JSON array, e.g. --input '[-1, 0.5]'",
            tokens.len()
        )
    });
    // Under --causal, the program on each prefix (what `verify` compares a causal model with).
    // A failure on a shorter prefix says which one (review rv29b: "failed at position 0" of an
    // input the plain `eval` computes).
    let (value, prefix) = if causal {
        match crate::verify::causal_values(&session.graph, node, &tokens) {
            Ok(v) => (Ok(raspc_lang::interp::Value::Seq(v)), None),
            Err((n, e)) => (Err(e), Some(n).filter(|&n| n < tokens.len())),
        }
    } else {
        (raspc_lang::evaluate(&session.graph, node, &tokens), None)
    };
    let text_note = match (prefix, text_note) {
        (Some(n), t) => Some(format!(
            "with --causal the program runs on each prefix of the input; it failed on the first {n} token{} ({}){}",
            if n == 1 { "" } else { "s" },
            tokens[..n].iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "),
            t.map(|t| format!("\n{t}")).unwrap_or_default()
        )),
        (None, t) => t,
    };
    match value {
        Ok(v) => {
            if json {
                let line = serde_json::json!({ "output": v.to_json() });
                let _ = writeln!(out, "{line}");
            } else {
                let _ = writeln!(out, "{}", v.to_text());
            }
            Ok(())
        }
        Err(e) => {
            let text = failure_text(&session, &e, input, text_note.as_deref(), color);
            // The closing line every other failure has, after a blank line (helper w30).
            let gap = if text.ends_with("\n\n") { "" } else { "\n" };
            let _ = writeln!(err, "{text}{gap}error: could not evaluate `{}` on this input", path.display());
            Err(Failure::Reported)
        }
    }
}

/// What `raspc eval` (and the Python package's `raspc.eval`) says when the interpreter fails on
/// an input (`input` as shown): the failing s-op by the user's name, where, and the input.
pub fn failure_text(session: &raspc_lang::Session, e: &raspc_lang::interp::EvalError, input: &str, note: Option<&str>, color: bool) -> String {
    let at = e.position.map(|p| format!(" at position {p}")).unwrap_or_default();
    let input = if input.is_empty() { "(empty)" } else { input };
    // The user's name for the s-op, or the named s-op the failing expression is part of. An
    // empty input fails before any s-op (helper b26: "evaluating the input as it is
    // (`tokens_asis`) failed" for a program that reads `tokens_int`).
    let message = if e.position.is_none() && e.message == raspc_lang::interp::EMPTY_INPUT {
        format!("the input is empty: {}", e.message)
    } else {
        format!("evaluating {} failed{at}: {}", raspc_compiler::names::describe(&session.graph, e.node), e.message)
    };
    let mut span = e.span;
    let mut label = "this operation failed";
    if session.sources.get(e.span.file).name == "<prelude>" && e.span.start == 0 {
        // A built-in s-op (such as `tokens_int`) failed: the program text shown is its first use
        // in the program (the main file first; helper a21: no line:column at all).
        let prelude = |s: &raspc_lang::Span| session.sources.get(s.file).name == "<prelude>";
        let first_use =
            session.graph.users(e.node).into_iter().map(|u| session.graph.node(u).span).filter(|s| !prelude(s)).min_by_key(|s| (s.file != session.main_file, s.file, s.start));
        // (No s-op reads it: the entry is the built-in itself, `prog = tokens_int;`.)
        // Named only (`y = tokens_int;`): the built-in's name on the right of that `=`, where
        // the statement spells it (helper t22: the caret sat under `y`).
        let named = session.graph.node(e.node).named_at.map(|at| {
            let text = &session.sources.get(at.file).text;
            let builtin = session.graph.node(e.node).label.as_str();
            let after = at.end as usize;
            let rest = text.get(after..).unwrap_or_default();
            // The statement (to its `;`, over lines), its right side: the built-in's first
            // mention there as a whole word (`y = (tokens_int);` too).
            let stmt = &rest[..rest.find(';').unwrap_or(rest.len())];
            let word = |c: char| c.is_alphanumeric() || c == '_';
            let found = stmt.trim_start().strip_prefix('=').and_then(|rhs| {
                let base = after + (stmt.len() - rhs.len());
                rhs.match_indices(builtin).find(|&(i, _)| !rhs[..i].ends_with(word) && !rhs[i + builtin.len()..].starts_with(word)).map(|(i, _)| base + i)
            });
            match found {
                Some(start) => raspc_lang::Span::new(at.file, start, start + builtin.len()),
                None => at,
            }
        });
        // Where the program spells the built-in first (helper ed25: `vals = tokens_int;` on
        // line 1 was shown at `vals + 1` on line 2).
        match named.or(first_use) {
            Some(use_at) => {
                span = use_at;
                label = "reads the input here";
            }
            None => {
                let note: String = note.into_iter().flat_map(str::lines).map(|n| format!("  = {n}\n")).collect();
                return format!("error[eval::runtime]: {message}\n  = input: {input}\n{note}");
            }
        }
    }
    let mut d = Diagnostic::error("eval::runtime", message, span).with_label(label).with_note(format!("input: {input}"));
    // Inside a function the program defines: where the program called it (helper t22: only
    // the body's expression was shown).
    if let Some(call) = session.graph.node(e.node).called_at
        && call != span
    {
        d = d.with_secondary(call, "in this call");
    }
    // In a loaded file (and not already shown through a call in the program): the `load` that
    // read it, as a parse error there shows it (helper t22).
    if span.file != session.main_file
        && d.labels.iter().all(|l| l.span.file != session.main_file)
        && let Some(&(_, load)) = session.loaded_at.iter().find(|(f, _)| *f == span.file)
    {
        d = d.with_secondary(load, "in the file loaded here");
    }
    // (Several notes, one per line: `--causal`'s prefix and the text-input hint, review rv29b.)
    for n in note.into_iter().flat_map(str::lines) {
        d = d.with_note(n);
    }
    render(&session.sources, &[d], color)
}
