//! The reference interpreter: evaluates the program graph on one input. This is the oracle
//! every compiled model is checked against, so it follows the reference implementation's
//! semantics to the letter:
//!
//! * `aggregate`: no key selected -> the default; exactly one -> that value, type included;
//!   several -> the arithmetic mean (a float), an error unless the s-op is numeric (all-bool and
//!   string s-ops cannot be averaged, as in the reference);
//! * every s-op is type-consistent: strings never mix with numbers (the reference rejects such a
//!   sequence); ints, floats and bools may mix;
//! * selectors are 0/1 matrices, `sel[q][k]` = query `q` attends to key `k`;
//! * an empty input is an error, as in the reference.

use crate::ast::BinOp;
use crate::atom::{self, Atom, OpError};
use crate::graph::{Convert, Graph, MapOp, NodeId, NodeKind, Operand, Table};
use crate::span::Span;

/// The value of one node on one input.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Seq(Vec<Atom>),
    /// `m[q][k]`: query q selects key k.
    Sel(Vec<Vec<bool>>),
}

impl Value {
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Seq(v) => serde_json::Value::Array(v.iter().map(Atom::to_json).collect()),
            Value::Sel(m) => serde_json::Value::Array(m.iter().map(|row| serde_json::Value::Array(row.iter().map(|&b| serde_json::Value::from(b as u8)).collect())).collect()),
        }
    }

    /// Python-style text: `[1, 2, 'a', True]`; a selector one row per query.
    pub fn to_text(&self) -> String {
        match self {
            Value::Seq(v) => format!("[{}]", v.iter().map(Atom::repr).collect::<Vec<_>>().join(", ")),
            Value::Sel(m) => m.iter().map(|r| r.iter().map(|&b| if b { "1" } else { "0" }).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n"),
        }
    }
}

/// A failure while evaluating a node on an input.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    pub node: NodeId,
    pub label: String,
    pub span: Span,
    pub position: Option<usize>,
    pub message: String,
}

/// The error of an empty input (every program needs one token at least).
pub const EMPTY_INPUT: &str = "RASP programs need a non-empty input";

/// Evaluates `root` on `input` (the raw tokens, as `tokens_asis` sees them).
pub fn evaluate(graph: &Graph, root: NodeId, input: &[Atom]) -> Result<Value, EvalError> {
    // The deepest operand first (least memory); on a failure, again in the reference's order,
    // to report the failure it would (see `evaluate_nodes`).
    let mut all = match evaluate_nodes(graph, root, input, false, true) {
        Ok(all) => all,
        Err(first) => return Err(evaluate_nodes(graph, root, input, false, false).err().unwrap_or(first)),
    };
    all.remove(&root).ok_or_else(|| EvalError {
        node: root,
        label: graph.node(root).label.clone(),
        span: graph.node(root).span,
        position: None,
        message: "internal error: the entry was not evaluated".into(),
    })
}

/// Evaluates every ancestor of `root`; returns all their values (for tracing).
pub fn evaluate_all(graph: &Graph, root: NodeId, input: &[Atom]) -> Result<std::collections::HashMap<NodeId, Value>, EvalError> {
    evaluate_nodes(graph, root, input, true, false)
}

/// Evaluates every ancestor of `root` in topological order ([`post_order`]). With `keep_all` false a value is
/// dropped as soon as its last reader has been evaluated (a selector holds length² cells: a
/// program with hundreds of selects on a long input would otherwise hold all of them at once),
/// and only `root`'s value is sure to be in the result.
fn evaluate_nodes(graph: &Graph, root: NodeId, input: &[Atom], keep_all: bool, deepest_first: bool) -> Result<std::collections::HashMap<NodeId, Value>, EvalError> {
    // Depth first from `root`, each node after its operands, in operand order as the
    // reference's recursive evaluator goes (so the failure reported is the one it reports:
    // `a + e` where both fail blames `a`), or with `deepest_first` the deepest operand first,
    // so that 300 selects defined first and read one by one later are alive one at a time, not
    // all at once (helper b19: 5 GB on a 4,096-token input in the order of definition);
    // `evaluate` goes so and, on a failure, again in operand order.
    let order = post_order(graph, root, deepest_first);
    let mut vals: std::collections::HashMap<NodeId, Value> = std::collections::HashMap::with_capacity(order.len());
    // Readers still to be evaluated, per node (an operand read twice counts twice).
    let mut readers: std::collections::HashMap<NodeId, usize> = std::collections::HashMap::new();
    if !keep_all {
        for &id in &order {
            for o in graph.node(id).kind.operands() {
                *readers.entry(o).or_default() += 1;
            }
        }
    }
    let n = input.len();
    // The raw input is a sequence of its own (and must not mix strings with other values) only
    // where the program reads it as it is (`tokens_asis`): the reference converts the input
    // list itself for `tokens_int`, `tokens_str`, ... (`[1, "2"]` is `[1, 2]` to `tokens_int`).
    let asis_read = order.iter().any(|&t| {
        matches!(graph.node(t).kind, NodeKind::Tokens)
            && (t == root
                || order.iter().any(|&id| {
                    let kind = &graph.node(id).kind;
                    !matches!(kind, NodeKind::Map { op: MapOp::Convert(_), .. }) && kind.operands().contains(&t)
                }))
    });
    for id in order {
        let node = graph.node(id);
        let fail = |position: Option<usize>, message: String| EvalError { node: id, label: node.label.clone(), span: node.span, position, message };
        if n == 0 {
            return Err(fail(None, EMPTY_INPUT.into()));
        }
        // Operands come earlier in the topological order, and host evaluation only builds
        // s-op operands where s-ops are expected (and selectors where selectors are): a
        // missing or mistyped operand is an internal error, reported as one.
        let internal = |what: &str| fail(None, format!("internal error: operand is not {what}"));
        let seq = |x: NodeId| match vals.get(&x) {
            Some(Value::Seq(s)) => Ok(s),
            _ => Err(internal("an s-op")),
        };
        let sel = |x: NodeId| match vals.get(&x) {
            Some(Value::Sel(s)) => Ok(s),
            _ => Err(internal("a selector")),
        };
        // The first query where an aggregate selects no key (and gives its default).
        let mut defaulted: Option<usize> = None;
        let v = match &node.kind {
            NodeKind::Tokens => Value::Seq(input.to_vec()),
            NodeKind::Indices => Value::Seq((0..n as i64).map(Atom::Int).collect()),
            NodeKind::Length => Value::Seq(vec![Atom::Int(n as i64); n]),
            NodeKind::Const(a) => Value::Seq(vec![a.clone(); n]),
            NodeKind::Map { op, args } => {
                let mut out = Vec::with_capacity(n);
                let mut row = Vec::with_capacity(args.len());
                for i in 0..n {
                    row.clear();
                    for a in args {
                        row.push(match a {
                            Operand::Sop(x) => seq(*x)?[i].clone(),
                            Operand::Const(c) => c.clone(),
                        });
                    }
                    out.push(apply_map(op, &row).map_err(|e| fail(Some(i), e.0))?);
                }
                Value::Seq(out)
            }
            NodeKind::Select { keys, queries, cmp } => {
                let (k, q) = (seq(*keys)?, seq(*queries)?);
                let mut m = vec![vec![false; n]; n];
                for (qi, row) in m.iter_mut().enumerate() {
                    for (ki, cell) in row.iter_mut().enumerate() {
                        *cell = Atom::compare(&k[ki], *cmp, &q[qi]).map_err(|e| fail(Some(qi), e.0))?;
                    }
                }
                Value::Sel(m)
            }
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                let and = matches!(node.kind, NodeKind::SelectAnd(..));
                let (x, y) = (sel(*a)?, sel(*b)?);
                Value::Sel(x.iter().zip(y).map(|(r, s)| r.iter().zip(s).map(|(&p, &q)| if and { p && q } else { p || q }).collect()).collect())
            }
            NodeKind::SelectNot(a) => Value::Sel(sel(*a)?.iter().map(|r| r.iter().map(|&p| !p).collect()).collect()),
            NodeKind::SelectorWidth(a) => Value::Seq(sel(*a)?.iter().map(|r| Atom::Int(r.iter().filter(|&&p| p).count() as i64)).collect()),
            NodeKind::AggregateMax { sel: s, values, default } => {
                let (m, v) = (sel(*s)?, seq(*values)?);
                let mut out = Vec::with_capacity(n);
                for (q, row) in m.iter().enumerate() {
                    let mut best: Option<&Atom> = None;
                    for (_, a) in row.iter().zip(v).filter(|(p, _)| **p) {
                        if a.is_str() {
                            return Err(fail(Some(q), format!("`aggregate_max` needs numbers, got {}", a.repr())));
                        }
                        if best.is_none_or(|b| a.as_f64().unwrap_or(f64::NAN) > b.as_f64().unwrap_or(f64::NAN)) {
                            best = Some(a);
                        }
                    }
                    out.push(best.cloned().unwrap_or_else(|| default.clone()));
                }
                Value::Seq(out)
            }
            NodeKind::Aggregate { sel: s, values, default } => {
                let (m, v) = (sel(*s)?, seq(*values)?);
                let averageable = is_numeric_sequence(v);
                let mut out = Vec::with_capacity(n);
                for (q, row) in m.iter().enumerate() {
                    let picked: Vec<&Atom> = row.iter().zip(v).filter(|(p, _)| **p).map(|(_, a)| a).collect();
                    out.push(match picked.len() {
                        0 => {
                            defaulted.get_or_insert(q);
                            default.clone()
                        }
                        1 => picked[0].clone(),
                        k => {
                            if !averageable {
                                return Err(fail(
                                    Some(q),
                                    format!(
                                        "asked to average {k} values of a non-numeric s-op ({}); only int and float s-ops can be averaged",
                                        picked.iter().map(|a| a.repr()).collect::<Vec<_>>().join(", ")
                                    ),
                                ));
                            }
                            Atom::Float(python_mean(&picked))
                        }
                    });
                }
                Value::Seq(out)
            }
        };
        if let Value::Seq(s) = &v
            && (!matches!(node.kind, NodeKind::Tokens) || asis_read)
        {
            check_consistent(s).map_err(|m| match (&node.kind, defaulted) {
                // Strings beside the default where no key is selected: the commonest RASP slip
                // (an off-by-one in a reversal; helper ed25: nothing said where the 0s came from).
                (NodeKind::Aggregate { default, .. }, Some(q)) if !default.is_str() => fail(
                    Some(q),
                    format!(
                        "{m}: no key is selected at position {q}, where `aggregate` gives its default {}, not a string; give a string default (`aggregate(sel, values, \"\")`) or a selector that selects a key at every position",
                        default.repr()
                    ),
                ),
                _ => fail(None, m),
            })?;
        }
        vals.insert(id, v);
        if !keep_all {
            for o in node.kind.operands() {
                if let Some(r) = readers.get_mut(&o) {
                    *r -= 1;
                    if *r == 0 && o != root {
                        vals.remove(&o);
                    }
                }
            }
        }
    }
    Ok(vals)
}

/// The ancestors of `root`, each after its operands, depth first from `root`, iteratively (a
/// chain of a million maps is not a million stack frames): operands in order, as the reference
/// evaluates them, or with `deepest_first` the deepest operand first (as registers are
/// allocated: `aggregate(s_i, x_{i-1})` down a chain computes the chain first and each select
/// `s_i` right before its aggregate, which is then its last reader).
fn post_order(graph: &Graph, root: NodeId, deepest_first: bool) -> Vec<NodeId> {
    // Ids are topological (operands first), so one pass gives each node's depth.
    let mut depth: std::collections::HashMap<NodeId, usize> = std::collections::HashMap::new();
    if deepest_first {
        for id in graph.ancestors(root) {
            let d = graph.node(id).kind.operands().iter().map(|o| depth.get(o).copied().unwrap_or(0) + 1).max().unwrap_or(0);
            depth.insert(id, d);
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut order = vec![];
    let mut stack = vec![(root, false)];
    while let Some((id, expanded)) = stack.pop() {
        if expanded {
            order.push(id);
            continue;
        }
        if !seen.insert(id) {
            continue;
        }
        stack.push((id, true));
        // Pushed shallowest first, so the deepest is expanded first (ties: in operand order).
        let mut ops = graph.node(id).kind.operands();
        ops.reverse();
        ops.sort_by_key(|o| depth.get(o).copied().unwrap_or(0));
        for o in ops {
            if !seen.contains(&o) {
                stack.push((o, false));
            }
        }
    }
    order
}

/// The reference's mean, `sum(values) * 1.0 / n`: Python's `sum` adds left to right, exactly
/// while the values are integers (booleans count as 0 and 1), in floats from the first float
/// on; the total is then rounded to a float once and divided by n.
pub fn python_mean(values: &[&Atom]) -> f64 {
    let mut int_sum: Option<i128> = Some(0);
    let mut float_sum = 0.0f64;
    for v in values {
        match (int_sum, v) {
            (Some(t), Atom::Int(i)) => int_sum = Some(t + i128::from(*i)),
            (Some(t), Atom::Bool(b)) => int_sum = Some(t + i128::from(*b)),
            (Some(t), other) => {
                float_sum = t as f64 + other.as_f64().unwrap_or(f64::NAN);
                int_sum = None;
            }
            (None, other) => float_sum += other.as_f64().unwrap_or(f64::NAN),
        }
    }
    int_sum.map_or(float_sum, |t| t as f64) / values.len() as f64
}

/// The reference's sequence type check: `int`/`float` sequences can be averaged; all-bool and
/// string sequences cannot.
fn is_numeric_sequence(v: &[Atom]) -> bool {
    !v.iter().any(Atom::is_str) && !v.iter().all(|a| matches!(a, Atom::Bool(_)))
}

fn check_consistent(s: &[Atom]) -> Result<(), String> {
    let strs = s.iter().filter(|a| a.is_str()).count();
    if strs != 0 && strs != s.len() {
        let shown: Vec<String> = s.iter().take(12).map(Atom::repr).collect();
        return Err(format!("s-op mixes strings with other values: [{}{}] (the reference rejects such a sequence)", shown.join(", "), if s.len() > 12 { ", ..." } else { "" }));
    }
    Ok(())
}

/// Applies a map's function to one position's arguments.
pub fn apply_map(op: &MapOp, args: &[Atom]) -> Result<Atom, OpError> {
    let a = &args[0];
    match op {
        MapOp::Neg => atom::neg(a),
        MapOp::Pos => atom::pos(a),
        MapOp::Not => Ok(Atom::Bool(!a.truthy())),
        MapOp::Round => atom::py_round(a),
        MapOp::Indicator => Ok(Atom::Int(a.truthy() as i64)),
        MapOp::Convert(Convert::Str) => Ok(Atom::Str(a.to_py_str())),
        MapOp::Convert(Convert::Int) => atom::to_int(a),
        MapOp::Convert(Convert::Float) => atom::to_float(a),
        MapOp::Convert(Convert::Bool) => Ok(Atom::Bool(a.truthy())),
        // On s-ops, `and`/`or` compare truth values and give booleans (the reference converts
        // both sides with `bool` first); on host atoms they return an operand, as in Python.
        MapOp::Binary(BinOp::And) => Ok(Atom::Bool(a.truthy() && args[1].truthy())),
        MapOp::Binary(BinOp::Or) => Ok(Atom::Bool(a.truthy() || args[1].truthy())),
        MapOp::Binary(op) => atom::binary(*op, a, &args[1]),
        MapOp::Ternary => Ok(if args[1].truthy() { args[0].clone() } else { args[2].clone() }),
        MapOp::In(list) => Ok(Atom::Bool(list.iter().any(|x| x.py_eq(a)))),
        MapOp::Lookup(Table::Dict(d)) => d.iter().find(|(k, _)| k.key() == a.key()).map(|(_, v)| v.clone()).ok_or_else(|| OpError(format!("key {} not in dict", a.repr()))),
        // Of the same type, and equal (0.0 and -0.0 are one key, as they are one value of a
        // value set).
        MapOp::Lookup(Table::Exact(d)) => d.iter().find(|(k, _)| k.same_value(a)).map(|(_, v)| v.clone()).ok_or_else(|| OpError(format!("value {} not in the table", a.repr()))),
        MapOp::Lookup(Table::List(l)) => {
            let i = match a {
                Atom::Int(i) => *i,
                Atom::Bool(b) => *b as i64,
                other => return Err(OpError(format!("list index must be an integer, got {}", other.repr()))),
            };
            let len = l.len() as i64;
            let j = if i < 0 { i + len } else { i };
            if j < 0 || j >= len {
                return Err(OpError(format!("index {i} out of range for a list or string of length {len}")));
            }
            Ok(l[j as usize].clone())
        }
    }
}
