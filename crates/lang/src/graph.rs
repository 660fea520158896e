//! The program graph: a DAG of s-ops and selectors in a petgraph graph.
//!
//! This is what host-level evaluation produces and what the interpreter and the compiler
//! consume. Every node has a closed [`NodeKind`], the [`Span`] of the source that created it and
//! a stable, unique label (the name it was first assigned to, else `kind_N`). Identical nodes
//! (same kind and operands) are created once ("hash-consing"), so a selector written twice is
//! one node. Node ids are allocated in creation order, and operands always exist before their
//! users: ascending id order is a topological order.

use crate::ast::{BinOp, Cmp};
use crate::atom::Atom;
use crate::span::Span;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;

/// A node of the program graph (s-op or selector).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
    fn ix(self) -> NodeIndex {
        NodeIndex::new(self.0 as usize)
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// An argument of an elementwise map: another s-op or a constant atom.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    Sop(NodeId),
    Const(Atom),
}

/// Conversions applied to the raw input tokens (`tokens_str` etc.).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Convert {
    Str,
    Int,
    Float,
    Bool,
}

/// A finite table read with an s-op as index: `dict[sop]`, `list[sop]`, `"text"[sop]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Dict(Vec<(Atom, Atom)>),
    List(Vec<Atom>),
    /// A table the compiler builds (never the program): each key read as an atom of its own
    /// type (`0` and `0.0` are two keys, as they are two values of an s-op; floats compare as
    /// numbers, so 0.0 and -0.0 are one).
    Exact(Vec<(Atom, Atom)>),
}

/// The elementwise function of a map node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MapOp {
    Neg,
    Pos,
    Not,
    Round,
    Indicator,
    Convert(Convert),
    Binary(BinOp),
    /// args: `[then, cond, otherwise]`
    Ternary,
    /// `sop in [atoms]`
    In(Vec<Atom>),
    Lookup(Table),
}

impl MapOp {
    pub fn name(&self) -> String {
        match self {
            MapOp::Neg => "neg".into(),
            MapOp::Pos => "pos".into(),
            MapOp::Not => "not".into(),
            MapOp::Round => "round".into(),
            MapOp::Indicator => "indicator".into(),
            MapOp::Convert(c) => format!("to_{}", format!("{c:?}").to_lowercase()),
            MapOp::Binary(op) => format!("`{}`", op.symbol()),
            MapOp::Ternary => "if-else".into(),
            MapOp::In(list) => format!("in [{}]", list.iter().map(|a| a.repr()).collect::<Vec<_>>().join(", ")),
            MapOp::Lookup(Table::Dict(d)) => {
                format!("lookup {{{}}}", d.iter().map(|(k, v)| format!("{}: {}", k.repr(), v.repr())).collect::<Vec<_>>().join(", "))
            }
            MapOp::Lookup(Table::List(l)) => format!("lookup [{}]", l.iter().map(|a| a.repr()).collect::<Vec<_>>().join(", ")),
            // (A table the compiler built can have thousands of entries: the first 12 shown.)
            MapOp::Lookup(Table::Exact(d)) => {
                let shown: Vec<String> = d.iter().take(12).map(|(k, v)| format!("{}: {}", k.repr(), v.repr())).collect();
                let more = if d.len() > 12 { format!(", ... ({} entries)", d.len()) } else { String::new() };
                format!("table {{{}{more}}}", shown.join(", "))
            }
        }
    }
}

/// What a node computes. A closed set: the RASP primitives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// The input as given (`tokens_asis`).
    Tokens,
    /// `indices`: 0, 1, ..., n-1.
    Indices,
    /// `length`: n at every position.
    Length,
    /// The same atom at every position (an atom used where an s-op is needed).
    Const(Atom),
    /// Elementwise function of one or more s-ops (and constants).
    Map {
        op: MapOp,
        args: Vec<Operand>,
    },
    /// Query `q` attends to key `k` iff `keys[k] cmp queries[q]`.
    Select {
        keys: NodeId,
        queries: NodeId,
        cmp: Cmp,
    },
    SelectAnd(NodeId, NodeId),
    SelectOr(NodeId, NodeId),
    SelectNot(NodeId),
    /// No key selected: `default`; one: that value; several: their mean.
    Aggregate {
        sel: NodeId,
        values: NodeId,
        default: Atom,
    },
    /// No key selected: `default`; else the largest selected value (raspc extension,
    /// `aggregate_max(sel, values[, default])`; one hard-attention head).
    AggregateMax {
        sel: NodeId,
        values: NodeId,
        default: Atom,
    },
    /// Number of keys each query selects.
    SelectorWidth(NodeId),
}

impl NodeKind {
    pub fn is_selector(&self) -> bool {
        matches!(self, NodeKind::Select { .. } | NodeKind::SelectAnd(..) | NodeKind::SelectOr(..) | NodeKind::SelectNot(_))
    }

    /// Operand nodes in order.
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            NodeKind::Tokens | NodeKind::Indices | NodeKind::Length | NodeKind::Const(_) => vec![],
            NodeKind::Map { args, .. } => args
                .iter()
                .filter_map(|a| match a {
                    Operand::Sop(n) => Some(*n),
                    Operand::Const(_) => None,
                })
                .collect(),
            NodeKind::Select { keys, queries, .. } => vec![*keys, *queries],
            NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => vec![*a, *b],
            NodeKind::SelectNot(a) | NodeKind::SelectorWidth(a) => vec![*a],
            NodeKind::Aggregate { sel, values, .. } | NodeKind::AggregateMax { sel, values, .. } => vec![*sel, *values],
        }
    }

    /// A map's one s-op operand, when it has exactly one (`x + 1`, `indicator(x < 0)`).
    pub fn sole_operand(&self) -> Option<NodeId> {
        let NodeKind::Map { args, .. } = self else { return None };
        let mut sops = args.iter().filter_map(|a| if let Operand::Sop(s) = a { Some(*s) } else { None });
        match (sops.next(), sops.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    fn short(&self) -> &'static str {
        match self {
            NodeKind::Tokens => "tokens",
            NodeKind::Indices => "indices",
            NodeKind::Length => "length",
            NodeKind::Const(_) => "const",
            NodeKind::Map { args, .. } => {
                if args.iter().filter(|a| matches!(a, Operand::Sop(_))).count() > 1 {
                    "sequencemap"
                } else {
                    "map"
                }
            }
            NodeKind::Select { .. } => "select",
            NodeKind::SelectAnd(..) => "select_and",
            NodeKind::SelectOr(..) => "select_or",
            NodeKind::SelectNot(_) => "select_not",
            NodeKind::Aggregate { .. } => "aggregate",
            NodeKind::AggregateMax { .. } => "aggregate_max",
            NodeKind::SelectorWidth(_) => "selector_width",
        }
    }

    /// The same kind with every operand id passed through `f`.
    pub fn remap(&self, f: &impl Fn(NodeId) -> NodeId) -> NodeKind {
        match self {
            NodeKind::Map { op, args } => NodeKind::Map {
                op: op.clone(),
                args: args
                    .iter()
                    .map(|a| match a {
                        Operand::Sop(n) => Operand::Sop(f(*n)),
                        c => c.clone(),
                    })
                    .collect(),
            },
            NodeKind::Select { keys, queries, cmp } => NodeKind::Select { keys: f(*keys), queries: f(*queries), cmp: *cmp },
            NodeKind::SelectAnd(a, b) => NodeKind::SelectAnd(f(*a), f(*b)),
            NodeKind::SelectOr(a, b) => NodeKind::SelectOr(f(*a), f(*b)),
            NodeKind::SelectNot(a) => NodeKind::SelectNot(f(*a)),
            NodeKind::SelectorWidth(a) => NodeKind::SelectorWidth(f(*a)),
            NodeKind::Aggregate { sel, values, default } => NodeKind::Aggregate { sel: f(*sel), values: f(*values), default: default.clone() },
            NodeKind::AggregateMax { sel, values, default } => NodeKind::AggregateMax { sel: f(*sel), values: f(*values), default: default.clone() },
            other => other.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub kind: NodeKind,
    /// Where the user's program asks for this node: its expression, or for a node a library
    /// function builds, the call of that function in the user's program (see [`Origin`]).
    pub span: Span,
    pub label: String,
    /// True once the label came from a user's name rather than being generated.
    pub named: bool,
    /// Set when library code (the prelude, the matrix library) built the node.
    pub library: Option<Origin>,
    /// For a node the library builds by itself (`tokens_int`): where the user's program first
    /// assigns it to a name (`y = tokens_int;`), a place for diagnostics when nothing in the
    /// program computes from it.
    pub named_at: Option<Span>,
    /// For a node built inside a function the user's program defines: the outermost call of
    /// such a function in the program (the body's expression is `span`), so a diagnostic can
    /// show where the function was called from.
    pub called_at: Option<Span>,
}

/// Where in the library a node was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The expression in the library's source.
    pub span: Span,
    /// The library function the user's program called (the outermost one), whose call is the
    /// node's `span`; None for nodes the library builds by itself (`tokens`, `length`, `full_s`),
    /// which have no place in the user's program.
    pub function: Option<String>,
}

/// Upper bound on nodes, so runaway host loops fail cleanly.
pub const MAX_NODES: usize = 1_000_000;

/// The DAG. Edges run from operand to user; the edge weight is the operand's position.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    g: DiGraph<Node, u8>,
    dedup: HashMap<NodeKind, NodeId>,
    labels: HashMap<String, NodeId>,
    /// Per base name, an index below which every `base_i` (i >= 2) is taken: where
    /// [`fresh_label`](Self::fresh_label) starts looking, so that naming a thousand nodes `x` in a
    /// loop costs a thousand lookups, not half a million. Lowered when a label is freed.
    suffix_hint: HashMap<String, usize>,
    /// Labels a generated label must not take: those of the graph this one was rebuilt from
    /// (see [`reserve_labels_of`](Self::reserve_labels_of)), which name other values there.
    reserved: std::sync::Arc<std::collections::HashSet<String>>,
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    pub fn len(&self) -> usize {
        self.g.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.g.node_count() == 0
    }

    /// The node a label names, if any.
    pub fn by_label(&self, label: &str) -> Option<NodeId> {
        self.labels.get(label).copied()
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.g[id.ix()]
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.g.node_count() as u32).map(NodeId)
    }

    /// The underlying petgraph graph, for algorithms.
    pub fn petgraph(&self) -> &DiGraph<Node, u8> {
        &self.g
    }

    /// Users of a node, in id order.
    pub fn users(&self, id: NodeId) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.g.edges_directed(id.ix(), petgraph::Direction::Outgoing).map(|e| NodeId(e.target().index() as u32)).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Adds a node, or returns the existing identical one. `None` when the graph is full.
    pub fn add(&mut self, kind: NodeKind, span: Span) -> Option<NodeId> {
        if let Some(&id) = self.dedup.get(&kind) {
            return Some(id);
        }
        if self.g.node_count() >= MAX_NODES {
            return None;
        }
        let n = self.g.node_count();
        let base = match kind {
            NodeKind::Tokens | NodeKind::Indices | NodeKind::Length => kind.short().to_string(),
            _ => format!("{}_{}", kind.short(), n),
        };
        let label = self.fresh_label(&base);
        let ix = self.g.add_node(Node { kind: kind.clone(), span, label: label.clone(), named: false, library: None, named_at: None, called_at: None });
        let id = NodeId(ix.index() as u32);
        for (pos, op) in kind.operands().into_iter().enumerate() {
            self.g.add_edge(op.ix(), ix, pos as u8);
        }
        self.labels.insert(label, id);
        self.dedup.insert(kind, id);
        Some(id)
    }

    /// Keeps generated labels of this graph (a rewrite of `other`) off every label `other` has
    /// (or reserved): a node a rewrite adds must not take the name of another value of the
    /// original, which `trace --program` compares by name. Nodes rebuilt from `other` keep
    /// their labels ([`add_labelled`](Self::add_labelled)).
    pub fn reserve_labels_of(&mut self, other: &Graph) {
        let mut all: std::collections::HashSet<String> = (*other.reserved).clone();
        all.extend(other.labels.keys().cloned());
        self.reserved = std::sync::Arc::new(all);
    }

    fn label_taken(&self, l: &str) -> bool {
        self.labels.contains_key(l) || self.reserved.contains(l)
    }

    /// `base` if free, else `base_i` for the smallest free i >= 2.
    fn fresh_label(&mut self, base: &str) -> String {
        if !self.label_taken(base) {
            return base.to_string();
        }
        let mut i = self.suffix_hint.get(base).copied().unwrap_or(2).max(2);
        loop {
            let l = format!("{base}_{i}");
            if !self.label_taken(&l) {
                self.suffix_hint.insert(base.to_string(), i + 1);
                return l;
            }
            i += 1;
        }
    }

    /// Frees a label (keeping [`fresh_label`](Self::fresh_label)'s hint below it).
    fn free_label(&mut self, label: &str) {
        self.labels.remove(label);
        if let Some((base, i)) = label.rsplit_once('_').and_then(|(b, i)| Some((b, i.parse::<usize>().ok()?)))
            && let Some(h) = self.suffix_hint.get_mut(base)
        {
            *h = (*h).min(i);
        }
    }

    /// Gives a node a user's name, unless it already has one (the first name wins).
    /// Records where the user's program names node `id` (see [`Node::named_at`]): kept only for
    /// library-built nodes, and only the first place.
    pub fn named_at(&mut self, id: NodeId, span: Span) {
        let node = &mut self.g[id.ix()];
        if node.named_at.is_none() && node.library.as_ref().is_some_and(|o| o.function.is_none()) {
            node.named_at = Some(span);
        }
    }

    pub fn name(&mut self, id: NodeId, name: &str) {
        if self.g[id.ix()].named || matches!(self.g[id.ix()].kind, NodeKind::Tokens | NodeKind::Indices | NodeKind::Length) {
            return;
        }
        let old = self.g[id.ix()].label.clone();
        self.free_label(&old);
        let label = self.fresh_label(name);
        self.labels.insert(label.clone(), id);
        let node = &mut self.g[id.ix()];
        node.label = label;
        node.named = true;
    }

    /// Gives node `id` exactly the label `name` (a user's name for the program's entry), moving
    /// any other node that holds it to a fresh label: a helper's local variable assigned first
    /// (`res` inside a function) must not turn the user's `res` into `res_109`.
    pub fn claim_label(&mut self, id: NodeId, name: &str) {
        if self.g[id.ix()].label == name || matches!(self.g[id.ix()].kind, NodeKind::Tokens | NodeKind::Indices | NodeKind::Length) {
            return;
        }
        if let Some(&other) = self.labels.get(name) {
            self.free_label(name);
            let moved = self.fresh_label(name);
            self.labels.insert(moved.clone(), other);
            self.g[other.ix()].label = moved;
        }
        let old = std::mem::replace(&mut self.g[id.ix()].label, name.to_string());
        self.free_label(&old);
        self.labels.insert(name.to_string(), id);
        self.g[id.ix()].named = true;
    }

    /// Adds a node (or finds the identical one) and, if it is new, gives it `label` as it is
    /// (used when rebuilding a graph, so labels survive).
    pub fn add_labelled(&mut self, kind: NodeKind, span: Span, label: &str, named: bool) -> Option<NodeId> {
        let existed = self.dedup.contains_key(&kind);
        let id = self.add(kind, span)?;
        if !existed && !self.labels.contains_key(label) {
            let new = &mut self.g[id.ix()];
            let old = std::mem::replace(&mut new.label, label.to_string());
            new.named = named;
            self.free_label(&old);
            self.labels.insert(label.to_string(), id);
        }
        Some(id)
    }

    /// Records that library code built `id`, placed at `span` in the user's program.
    /// Records the call of a user function that built `id` ([`Node::called_at`]).
    pub fn set_called_at(&mut self, id: NodeId, call: Span) {
        self.g[id.ix()].called_at = Some(call);
    }

    pub fn set_origin(&mut self, id: NodeId, span: Span, origin: Option<Origin>) {
        let n = &mut self.g[id.ix()];
        n.span = span;
        n.library = origin;
    }

    /// All nodes `root` depends on, itself included, in topological (ascending id) order.
    pub fn ancestors(&self, root: NodeId) -> Vec<NodeId> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                stack.extend(self.node(n).kind.operands());
            }
        }
        seen.into_iter().collect()
    }

    /// A new graph with only what `root` depends on, renumbered densely; returns its root.
    pub fn extract(&self, root: NodeId) -> (Graph, NodeId) {
        let keep = self.ancestors(root);
        let map: HashMap<NodeId, NodeId> = keep.iter().enumerate().map(|(i, &n)| (n, NodeId(i as u32))).collect();
        let mut out = Graph::new();
        for &n in &keep {
            let node = self.node(n);
            let kind = node.kind.remap(&|x| map[&x]);
            // `keep` is a subset of this graph's nodes, so `out` stays within MAX_NODES.
            let id = out.add(kind, node.span).expect("extract never exceeds the source graph");
            let old = out.g[id.ix()].label.clone();
            out.free_label(&old);
            let new = &mut out.g[id.ix()];
            new.label = node.label.clone();
            new.named = node.named;
            new.library = node.library.clone();
            out.labels.insert(node.label.clone(), id);
        }
        (out, map[&root])
    }

    /// Stable text dump, one node per line, used for debugging and golden tests.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for id in self.ids() {
            let n = self.node(id);
            let body = match &n.kind {
                NodeKind::Tokens => "tokens".to_string(),
                NodeKind::Indices => "indices".to_string(),
                NodeKind::Length => "length".to_string(),
                NodeKind::Const(a) => format!("const {}", a.repr()),
                NodeKind::Map { op, args } => {
                    let a: Vec<String> = args
                        .iter()
                        .map(|a| match a {
                            Operand::Sop(n) => n.to_string(),
                            Operand::Const(c) => c.repr(),
                        })
                        .collect();
                    format!("map {}({})", op.name(), a.join(", "))
                }
                NodeKind::Select { keys, queries, cmp } => format!("select(keys={keys}, queries={queries}, {})", cmp.symbol()),
                NodeKind::SelectAnd(a, b) => format!("{a} and {b}"),
                NodeKind::SelectOr(a, b) => format!("{a} or {b}"),
                NodeKind::SelectNot(a) => format!("not {a}"),
                NodeKind::Aggregate { sel, values, default } => format!("aggregate({sel}, {values}, default={})", default.repr()),
                NodeKind::AggregateMax { sel, values, default } => format!("aggregate_max({sel}, {values}, default={})", default.repr()),
                NodeKind::SelectorWidth(a) => format!("selector_width({a})"),
            };
            let _ = writeln!(s, "{id} {} = {body}", n.label);
        }
        s
    }
}
