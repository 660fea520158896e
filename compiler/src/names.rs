//! How diagnostics name s-ops: by the user's variable, never by a generated label
//! (`sequencemap_12`). An unnamed s-op is "this expression" (the diagnostic's span points at
//! it), placed by the nearest named s-op that uses it.

use raspc_lang::{Diagnostic, Graph, NodeId, Span};
use std::collections::{BTreeSet, VecDeque};

/// "`x`" for a named s-op; "`a - b` (in `y`)" for an operation on named s-ops; otherwise "this
/// expression", or "an expression in `y`" when `y` is the nearest named s-op computed from it.
pub fn describe(g: &Graph, id: NodeId) -> String {
    let node = g.node(id);
    // The raw input: its users include the library's `tokens_str`, which the program may not read.
    if matches!(node.kind, raspc_lang::graph::NodeKind::Tokens) {
        return "the input as it is (`tokens_asis`)".to_string();
    }
    if node.named {
        // A name bound again (in a loop, or twice) gets a suffix: say whose value it is.
        if let Some((base, n)) = node.label.rsplit_once('_')
            && n.parse::<u32>().is_ok_and(|n| n >= 2)
            && g.by_label(base).is_some_and(|b| g.node(b).named)
        {
            return format!("`{}` (a later value of `{base}`)", node.label);
        }
        return format!("`{}`", node.label);
    }
    // An operation on named s-ops (or constants, `indices`, `length`) is written out: a
    // comparison `w >= p` is compiled as the sign of `w - p`, which the user did not write and
    // could not place as "an expression in `prog`" (helper w27).
    let text = short_expr(g, id);
    match (named_user(g, id), text) {
        (Some(u), Some(t)) => format!("`{t}` (in `{}`)", g.node(u).label),
        (Some(u), None) => format!("an expression in `{}`", g.node(u).label),
        (None, Some(t)) => format!("`{t}`"),
        (None, None) => "this expression".to_string(),
    }
}

/// `a op b` for a binary map of two named s-ops, `indices`, `length` or constants.
fn short_expr(g: &Graph, id: NodeId) -> Option<String> {
    use raspc_lang::graph::{MapOp, NodeKind, Operand};
    let NodeKind::Map { op: MapOp::Binary(b), args } = &g.node(id).kind else { return None };
    let [x, y] = args.as_slice() else { return None };
    let side = |o: &Operand| match o {
        Operand::Const(k) => Some(k.repr()),
        Operand::Sop(s) => {
            let n = g.node(*s);
            (n.named || matches!(n.kind, NodeKind::Indices | NodeKind::Length)).then(|| n.label.clone())
        }
    };
    Some(format!("{} {} {}", side(x)?, b.symbol(), side(y)?))
}

/// The nearest s-op (breadth first over users) that has a user's name.
pub fn named_user(g: &Graph, id: NodeId) -> Option<NodeId> {
    nearest_user(g, id, |u| g.node(u).named && !g.node(u).kind.is_selector())
}

/// The nearest user of `id` (breadth first, `id` itself excluded) for which `pred` holds.
fn nearest_user(g: &Graph, id: NodeId, pred: impl Fn(NodeId) -> bool) -> Option<NodeId> {
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([id]);
    while let Some(x) = queue.pop_front() {
        for u in g.users(x) {
            if !seen.insert(u) {
                continue;
            }
            if pred(u) {
                return Some(u);
            }
            queue.push_back(u);
        }
    }
    None
}

/// Where a diagnostic about `id` points: the node's place in the user's program (for a node a
/// library function builds, the user's call of that function). A node the library builds by
/// itself (`tokens_int`, `length`, `full_s`) has none: the nearest user of it that has one
/// stands in, else where the program assigns it to a name (`y = tokens_int;`), else the node's
/// own span.
pub fn place(g: &Graph, id: NodeId) -> Span {
    placed_by(g, id).0
}

/// [`place`], and the node whose span it is (None: the node's own assignment or span).
fn placed_by(g: &Graph, id: NodeId) -> (Span, Option<NodeId>) {
    let in_program = |x: NodeId| g.node(x).library.as_ref().is_none_or(|o| o.function.is_some());
    if in_program(id) {
        return (g.node(id).span, Some(id));
    }
    match nearest_user(g, id, in_program) {
        Some(u) => (g.node(u).span, Some(u)),
        None => (g.node(id).named_at.unwrap_or(g.node(id).span), None),
    }
}

/// A note for diagnostics about a node a library function built: which function, called where.
pub fn library_note(g: &Graph, id: NodeId) -> Option<String> {
    let f = g.node(id).library.as_ref()?.function.as_ref()?;
    Some(format!("it is computed inside the library function `{f}`, called here"))
}

/// A compiler diagnostic about `id`, placed in the user's program ([`place`]), with the
/// library note when library code built the node.
pub fn error(g: &Graph, id: NodeId, code: &'static str, msg: String) -> Diagnostic {
    let (at, by) = placed_by(g, id);
    let mut d = Diagnostic::error(code, msg, at);
    // A node a function of the program built: the call too, as `eval` shows it (helper ed25: a
    // refusal pointed into `def at`'s body, not at the call that passed it `tokens_int`).
    if let Some(call) = by.and_then(|n| g.node(n).called_at)
        && call.file == at.file
        && !(call.start <= at.start && at.end <= call.end)
    {
        d = d.with_secondary(call, "in this call");
    }
    match library_note(g, id) {
        Some(n) => d.with_note(n),
        None => d,
    }
}

/// `n` with thousands separated by commas (`1,198`), as the docs and notes write counts.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_separated() {
        let cases = [(0, "0"), (999, "999"), (1000, "1,000"), (1198, "1,198"), (8192, "8,192"), (1234567, "1,234,567")];
        for (n, text) in cases {
            assert_eq!(super::thousands(n), text);
        }
    }
}
