//! How diagnostics name s-ops: by the user's variable, never by a generated label
//! (`sequencemap_12`). An unnamed s-op is "this expression" (the diagnostic's span points at
//! it), placed by the nearest named s-op that uses it.

use raspc_lang::{Graph, NodeId};
use std::collections::{BTreeSet, VecDeque};

/// "`x`" for a named s-op; otherwise "this expression", or "an expression in `y`" when `y` is
/// the nearest named s-op computed from it.
pub fn describe(g: &Graph, id: NodeId) -> String {
    let node = g.node(id);
    if node.named {
        return format!("`{}`", node.label);
    }
    match named_user(g, id) {
        Some(u) => format!("an expression in `{}`", g.node(u).label),
        None => "this expression".to_string(),
    }
}

/// The nearest s-op (breadth first over users) that has a user's name.
pub fn named_user(g: &Graph, id: NodeId) -> Option<NodeId> {
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([id]);
    while let Some(x) = queue.pop_front() {
        for u in g.users(x) {
            if !seen.insert(u) {
                continue;
            }
            if g.node(u).named && !g.node(u).kind.is_selector() {
                return Some(u);
            }
            queue.push_back(u);
        }
    }
    None
}
