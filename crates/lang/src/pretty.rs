//! The parsed program written back as RASP source (`raspc dump --stage ast`): every operation
//! in parentheses, so the text shows how the parser grouped it, and each statement followed by
//! a `# line:col` comment naming where it starts. The text parses back to the same program
//! (REPL-only statements, which raspc ignores, become comments).

use crate::ast::*;
use crate::span::Span;
use std::fmt::Write;

/// Writes `prog` as RASP source; `at` gives a span's line and column (1-based).
pub fn program(prog: &Program, at: &dyn Fn(Span) -> (usize, usize)) -> String {
    let mut out = String::new();
    for s in &prog.stmts {
        stmt(&mut out, s, 0, at);
    }
    out
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("    ");
    }
}

fn position(out: &mut String, span: Span, at: &dyn Fn(Span) -> (usize, usize)) {
    let (l, c) = at(span);
    let _ = writeln!(out, "  # {l}:{c}");
}

fn names(ids: &[Ident]) -> String {
    ids.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn list(es: &[Expr]) -> String {
    es.iter().map(|e| expr(e, true)).collect::<Vec<_>>().join(", ")
}

fn stmt(out: &mut String, s: &Stmt, depth: usize, at: &dyn Fn(Span) -> (usize, usize)) {
    indent(out, depth);
    match &s.kind {
        StmtKind::Expr(e) => {
            let _ = write!(out, "{};", expr(e, true));
            position(out, s.span, at);
        }
        StmtKind::Assign { targets, values } => {
            let _ = write!(out, "{} = {};", names(targets), list(values));
            position(out, s.span, at);
        }
        StmtKind::Def(f) => {
            let _ = write!(out, "def {}({}) {{", f.name.name, names(&f.params));
            position(out, s.span, at);
            for b in &f.body {
                stmt(out, b, depth + 1, at);
            }
            indent(out, depth + 1);
            let _ = write!(out, "return {};", list(&f.ret));
            position(out, f.ret_span, at);
            indent(out, depth);
            out.push_str("}\n");
        }
        StmtKind::For { vars, iter, body } => {
            let _ = write!(out, "for {} in {} {{", names(vars), expr(iter, false));
            position(out, s.span, at);
            for b in body.iter() {
                stmt(out, b, depth + 1, at);
            }
            indent(out, depth);
            out.push_str("}\n");
        }
        StmtKind::Load { path, .. } => {
            let _ = write!(out, "load \"{path}\";");
            position(out, s.span, at);
        }
        StmtKind::Draw { target, input } => {
            match input {
                Some(i) => {
                    let _ = write!(out, "draw({}, {});", expr(target, true), expr(i, true));
                }
                None => {
                    let _ = write!(out, "draw({});", expr(target, true));
                }
            }
            position(out, s.span, at);
        }
        StmtKind::Repl { kind, .. } => {
            let what = match kind {
                ReplKind::SetExample => "set example",
                ReplKind::ShowExample => "show example",
                ReplKind::ToggleExamples => "examples on/off",
                ReplKind::FullSeqDisplay => "full seq display",
                ReplKind::Exit => "exit",
            };
            let _ = write!(out, "# a REPL statement ({what}), ignored");
            position(out, s.span, at);
        }
    }
}

/// A float literal that lexes back to the same number and stays a float (`2.0`, not `2`).
fn float(f: f64) -> String {
    if f.is_infinite() {
        // Only a literal too large for f64 lexes to infinity; this one does too.
        return format!("1{}.0", "0".repeat(309));
    }
    let s = format!("{f}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// `e` as source; `top` leaves off the parentheses of the outermost operation.
fn expr(e: &Expr, top: bool) -> String {
    let wrap = |s: String| if top { s } else { format!("({s})") };
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Int(i) if *i < 0 => format!("(-{})", i.unsigned_abs()),
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Float(f) if f.is_sign_negative() => format!("(-{})", float(-f)),
        ExprKind::Float(f) => float(*f),
        ExprKind::Str(s) => format!("\"{s}\""),
        ExprKind::List(es) => format!("[{}]", list(es)),
        ExprKind::Dict(kv) => format!("{{{}}}", kv.iter().map(|(k, v)| format!("{}: {}", expr(k, true), expr(v, true))).collect::<Vec<_>>().join(", ")),
        ExprKind::Index { target, index } => format!("{}[{}]", expr(target, false), expr(index, true)),
        ExprKind::Call { callee, args } => format!("{}({})", expr(callee, false), list(args)),
        ExprKind::Unary { op, operand } => match op {
            UnaryOp::Not => wrap(format!("not {}", expr(operand, false))),
            UnaryOp::Neg => wrap(format!("-{}", expr(operand, false))),
            UnaryOp::Pos => wrap(format!("+{}", expr(operand, false))),
            UnaryOp::Round => format!("round({})", expr(operand, true)),
            UnaryOp::Indicator => format!("indicator({})", expr(operand, true)),
        },
        ExprKind::Binary { op, lhs, rhs } => wrap(format!("{} {} {}", expr(lhs, false), op.symbol(), expr(rhs, false))),
        ExprKind::Select { keys, queries, cmp } => format!("select({}, {}, {})", expr(keys, true), expr(queries, true), cmp.symbol()),
        ExprKind::Aggregate { sel, values, default } => match default {
            Some(d) => format!("aggregate({}, {}, {})", expr(sel, true), expr(values, true), expr(d, true)),
            None => format!("aggregate({}, {})", expr(sel, true), expr(values, true)),
        },
        ExprKind::Ternary { then, cond, otherwise } => wrap(format!("{} if {} else {}", expr(then, false), expr(cond, false), expr(otherwise, false))),
        ExprKind::Range(es) => format!("range({})", list(es)),
        ExprKind::Zip(es) => format!("zip({})", list(es)),
        ExprKind::Len(x) => format!("len({})", expr(x, true)),
        ExprKind::ListComp { body, vars, iter } => format!("[{} for {} in {}]", expr(body, false), names(vars), expr(iter, false)),
        ExprKind::DictComp { key, value, vars, iter } => format!("{{{}: {} for {} in {}}}", expr(key, false), expr(value, false), names(vars), expr(iter, false)),
        ExprKind::In { item, container } => wrap(format!("{} in {}", expr(item, false), expr(container, false))),
        ExprKind::Error => "<error>".into(),
    }
}
