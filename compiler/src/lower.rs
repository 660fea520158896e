//! Lowering: program graph -> [`Plan`] (slots and blocks), after the support check.
//!
//! The constructions (all exact under hard attention; docs/compiler.md has the derivations):
//!
//! * **Residual slots.** `<bos>` (1 at BOS) and `<tok>` (1 elsewhere) always exist. Every
//!   s-op that some block or the readout reads gets a slot: categorical (one-hot over its
//!   finite value set) or numerical (one dim). Each slot's value at BOS is known at compile
//!   time, and every reader subtracts it through the `<bos>` dim, so all blocks see zeros at BOS.
//! * **Maps are folded where they are linear.** A map (or chain of maps) of a single categorical
//!   s-op is a relabelling of that s-op's one-hot dims, so it gets no MLP and no dims: selects,
//!   aggregates and the readout read the underlying one-hot through the map. Constants are views
//!   of `<tok>`. Maps of two or more s-ops (fused across chains) are one MLP with one hidden unit
//!   per leaf of a decision tree over their reachable combinations (`lower/tree.rs`; at most
//!   one per combination), `relu(x_a + y_b + ... - (k - 1))` over the leaf's literals; maps of a numerical
//!   s-op are an exact staircase over its finite set of values.
//! * **Numbers are affine forms** (`lower/affine.rs`): sums, differences and constant multiples of
//!   numerical s-ops get a one-dim slot that the writers of their parts also write (no MLP), and
//!   products with functions of `indices` one unit per index value.
//! * **select** is a bilinear form on one-hot query and key dims: score 1 where the predicate
//!   holds. `and` of selects on different s-ops adds their scores; `and`/`or`/`not` of selects on
//!   the same pair of s-ops is one predicate. BOS scores `r - 1/2` (r = number of summed terms),
//!   so a query with no selected key attends to BOS alone, whose value vector is the default.
//! * **aggregate**: categorical (a one-hot copy; exact when at most one key is selected, which is
//!   proved for selects on an injective function of `indices` with `==`, and when values are not
//!   numeric, since the interpreter rejects averaging those) or numerical (the mean of the
//!   values' numbers) otherwise. Never silently wrong: a numerical aggregate needed categorically
//!   is converted by an exact staircase MLP over its finite set of means.
//! * **selector_width / length**: one head where BOS ties with the selected keys and carries
//!   value 1, giving 1/(w+1), then a staircase MLP to w. `length` is the width of the all-true
//!   selector and needs no query or key weights at all.

mod affine;
mod chain;
mod logic;
mod tree;

use crate::infer::ValueSet;
use crate::numeric::Iv;
use crate::plan::*;
use raspc_lang::graph::Operand;
use raspc_lang::{Atom, Diagnostic, Graph, NodeId, NodeKind};
use std::collections::{BTreeSet, HashMap};

/// Largest number of value combinations one MLP enumerates.
pub const MAX_COMBINATIONS: usize = 8192;

/// What the compiler is asked to do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The atoms the input may hold, in vocabulary order.
    pub vocab: Vec<Atom>,
    pub max_len: usize,
    /// Causal masking: position i sees positions <= i; the model then computes, at position i,
    /// the program's value at i on the prefix ending at i.
    pub causal: bool,
    /// Labels of s-ops to store numerically (one dim).
    pub numerical: BTreeSet<String>,
    /// Labels of s-ops to store categorically (one-hot).
    pub categorical: BTreeSet<String>,
    /// Real-valued inputs (`--input-bounds`): compiled by [`crate::real`] instead.
    pub real: Option<crate::real::RealOptions>,
    /// Lower `a + b` of two s-ops as a sum slot from [`EAGER_SUM_COMBINATIONS`] value
    /// combinations on, instead of enumerating them up to [`MAX_COMBINATIONS`]. `compile` tries
    /// both and keeps the better (`best` in lib.rs).
    pub eager_sums: bool,
    /// Add a sum of several s-ops read by a lookup over more than [`EAGER_SUM_COMBINATIONS`]
    /// value combinations in a sum slot first (read through its own one-hot, a layer deeper):
    /// `(w0 + w1 + w2) / length` at max-len 10 enumerates 7,260 combinations, 826 k parameters
    /// in 2 layers, 54 k in 3 so. `compile` tries both.
    pub lookup_sums: bool,
    /// Never lower a whole-input mean times `length` as a product with the length's one-hot
    /// (`compile` retries so when the plan with it is refused: its readers may need the
    /// interpreter's exact floats, which the lookup over (mean, length) keeps; review rv25b).
    pub no_length_product: bool,
    /// Never lower a long `and`/`or` as one threshold over its terms (`lower/logic.rs`), nor a
    /// maximum or minimum of numbers as a relu (`affine.rs`, `max_min`): `compile` lowers so
    /// too when either was used, and keeps the better plan (a threshold can give a node a slot
    /// that a lookup would have fused into its reader, a layer more: review rv30b; a relu's
    /// result is one f32 number, where the lookup kept values f32 cannot tell apart exactly:
    /// review rv30c).
    pub no_logic_threshold: bool,
    /// Lower a conditional with a numerical branch of few values (`m * 2 + 1 if m > 0 else 0`,
    /// at most 64 values) as products too, not only one of more values (`lower/affine.rs`):
    /// `compile` lowers so too when such a conditional was met, and keeps the better plan (a
    /// lookup reads the number's one-hot, which its readers may share; products read it as a
    /// number: the mean over an argmax, 33 values at max-len 16, took 152 k parameters by lookup
    /// and 57 k by products).
    pub few_valued_products: bool,
}

/// Value combinations from which [`Options::eager_sums`] adds two s-ops in a sum slot.
pub const EAGER_SUM_COMBINATIONS: usize = 1024;

#[derive(Clone, Debug)]
enum Rep {
    /// Has its own slot.
    Slot(SlotId),
    /// Computed by maps from nodes that have slots (see `leaves_of`); no slot of its own.
    Inline,
}

/// A slot and, per dim, the tuple of values it stands for (None: unreachable).
type TupleView = (SlotId, Vec<Option<Vec<Atom>>>);

/// One side of a score term.
#[derive(Clone, Debug)]
enum Side {
    Cat(SlotId, Vec<Option<Vec<Atom>>>),
    Num(SlotId, Vec<f64>, Vec<Atom>),
}

/// A way to read an s-op: a slot, and for a categorical slot the s-op's value per slot dim.
#[derive(Clone, Debug)]
struct View {
    slot: SlotId,
    map: Option<Vec<Option<Atom>>>,
}

struct Lowerer<'a> {
    g: &'a Graph,
    opts: &'a Options,
    sets: HashMap<NodeId, ValueSet>,
    slots: Vec<Slot>,
    blocks: Vec<Block>,
    rep: HashMap<NodeId, Rep>,
    /// Numerical slot -> its categorical conversion slot.
    conv: HashMap<SlotId, SlotId>,
    /// Numerical slot -> the atoms behind each point (for evaluating maps on it).
    num_atoms: HashMap<SlotId, Vec<Vec<Atom>>>,
    /// Categorical slots whose values stand for others too, aligned with the encoding's values:
    /// a count the interpreter computes as `k/n·n` (7.000000000000001 where the model has 7).
    cat_alts: HashMap<SlotId, Vec<Vec<Atom>>>,
    /// Slots whose `cat_alts` are the floats the interpreter computes for the same input (a
    /// count from a mean, 7.000000000000001), not values of different inputs grouped as one
    /// number (`length ^ 0.5` arithmetic): selectors reading these check every alternative.
    same_input_alts: std::collections::HashSet<SlotId>,
    /// The leaves of inline maps (`leaves_of`), computed once: a chain of a thousand inline maps
    /// (`x = x + 1` in a loop) would otherwise walk the chain again for each of its nodes.
    /// Cleared when a node that was read through becomes a slot.
    leaf_cache: std::cell::RefCell<HashMap<NodeId, std::rc::Rc<Vec<NodeId>>>>,
    /// Nodes whose value sets hold floats the interpreter computes beside the exact values
    /// (`simplify::simplify_noting`).
    inexact_nodes: std::collections::HashSet<NodeId>,
    diags: Vec<Diagnostic>,
    tokens: Option<SlotId>,
    indices: Option<SlotId>,
    /// Tuple views already built, by their s-ops.
    tuples: HashMap<Vec<NodeId>, TupleView>,
    /// Class staircases already built: (numerical slot, class of each point) -> slot.
    class_slots: HashMap<(SlotId, Vec<usize>), SlotId>,
    /// The compiled s-op.
    root: NodeId,
    /// Intervals of numerical s-ops ([`crate::numeric`]).
    ivs: HashMap<NodeId, Iv>,
    /// Sum slots ([`affine`]): their affine forms over base dims.
    sums: HashMap<SlotId, affine::Lin>,
    /// Users of each s-op (built on first use).
    users: HashMap<NodeId, Vec<NodeId>>,
    /// [`Lowerer::read_as_number`]'s answers (they depend on the graph alone).
    read_as_number: HashMap<NodeId, bool>,
    /// Some sum was enumerated that [`Options::eager_sums`] would add in a sum slot.
    eager_sums_differ: bool,
    /// Some lookup read a sum that [`Options::lookup_sums`] would add in a sum slot first.
    lookup_sums_differ: bool,
    /// Some `and`/`or` was lowered as a threshold ([`Options::no_logic_threshold`]).
    logic_threshold_used: bool,
    /// Some conditional was left to a lookup that [`Options::few_valued_products`] would not.
    few_products_differ: bool,
    /// Extra token-embedding and position-embedding entries (sum slots).
    token_values: Vec<EmbedRow>,
    positional: Vec<EmbedRow>,
    /// Numerical slots read by staircases: (smallest step gap, largest magnitude).
    grid_reads: std::collections::BTreeMap<SlotId, (f64, f64)>,
    /// Conditionals waiting for their user to lower the chain they are part of ([`chain`]).
    links: HashMap<NodeId, chain::Link>,
}

/// Runs the support check and lowering. All problems are reported together.
pub fn lower(g: &Graph, root: NodeId, opts: &Options) -> Result<Plan, Vec<Diagnostic>> {
    lower_noting(g, root, opts, &HashMap::new())
}

/// [`lower`], with values the interpreter computes for some nodes besides their exact ones
/// (`simplify::simplify_noting`): they join those nodes' value sets, so a map that tells them
/// apart is refused.
pub fn lower_noting(g: &Graph, root: NodeId, opts: &Options, inexact: &HashMap<NodeId, Vec<Atom>>) -> Result<Plan, Vec<Diagnostic>> {
    lower_noting_choices(g, root, opts, inexact).map(|(plan, _)| plan)
}

/// Whether a lowering with [`Options::eager_sums`] or [`Options::lookup_sums`] set would lower
/// some sum differently (when not, a second lowering with it gives the same plan).
#[derive(Clone, Copy, Debug, Default)]
pub struct Choices {
    pub eager_sums: bool,
    pub lookup_sums: bool,
    /// Some `and`/`or` was lowered as a threshold, or a maximum as a relu
    /// ([`Options::no_logic_threshold`] would not).
    pub logic_threshold: bool,
    /// Some conditional of a few-valued number was a lookup
    /// ([`Options::few_valued_products`] would make it products).
    pub few_valued_products: bool,
}

/// [`lower_noting`], and which [`Choices`] would change the plan.
pub fn lower_noting_choices(g: &Graph, root: NodeId, opts: &Options, inexact: &HashMap<NodeId, Vec<Atom>>) -> Result<(Plan, Choices), Vec<Diagnostic>> {
    let node = g.node(root);
    if node.kind.is_selector() {
        return Err(vec![Diagnostic::error("compile::entry", format!("`{}` is a selector; only s-ops can be compiled", node.label), node.span)
            .with_label("a selector")
            .with_note("compile an s-op that uses it, e.g. `selector_width(...)` or `aggregate(...)`")]);
    }
    let (sets, ivs) = crate::infer::infer_seeded(g, root, &opts.vocab, opts.max_len, inexact);
    let mut lw = Lowerer {
        g,
        opts,
        sets,
        slots: vec![],
        blocks: vec![],
        rep: HashMap::new(),
        conv: HashMap::new(),
        num_atoms: HashMap::new(),
        cat_alts: HashMap::new(),
        same_input_alts: Default::default(),
        leaf_cache: Default::default(),
        inexact_nodes: inexact.keys().copied().collect(),
        diags: vec![],
        tokens: None,
        indices: None,
        tuples: HashMap::new(),
        class_slots: HashMap::new(),
        root,
        ivs,
        sums: HashMap::new(),
        users: HashMap::new(),
        read_as_number: HashMap::new(),
        eager_sums_differ: false,
        lookup_sums_differ: false,
        logic_threshold_used: false,
        few_products_differ: false,
        token_values: vec![],
        positional: vec![],
        grid_reads: Default::default(),
        links: HashMap::new(),
    };
    // One-dim categorical slots: `<bos>` holds True at BOS only, `<tok>` True everywhere else.
    lw.slots.push(Slot { label: "<bos>".into(), enc: SlotEnc::Cat(vec![Atom::Bool(true)]), at_bos: vec![], multi_hot: false });
    lw.slots.push(Slot { label: "<tok>".into(), enc: SlotEnc::Cat(vec![Atom::Bool(true)]), at_bos: vec![], multi_hot: false });
    lw.check_overrides(root);
    if opts.causal {
        lw.check_causal(root);
    }
    if !lw.diags.is_empty() {
        return Err(lw.diags);
    }
    // Nodes that failed, or depend on one that did: their users are skipped (no cascades).
    let mut failed: BTreeSet<NodeId> = BTreeSet::new();
    for id in g.ancestors(root) {
        if crate::cancel::cancelled() {
            return Err(vec![Diagnostic::error("compile::interrupted", crate::cancel::INTERRUPTED, g.node(root).span)]);
        }
        if g.node(id).kind.operands().iter().any(|o| failed.contains(o)) {
            failed.insert(id);
            continue;
        }
        if g.node(id).kind.is_selector() {
            continue;
        }
        if let Err(d) = lw.lower_node(id) {
            lw.diags.push(d);
            failed.insert(id);
        }
    }
    let output = if lw.diags.is_empty() {
        match lw.output_view(root) {
            Ok(o) => Some(o),
            Err(d) => {
                lw.diags.push(d);
                None
            }
        }
    } else {
        None
    };
    if !lw.diags.is_empty() {
        let mut seen = BTreeSet::new();
        lw.diags.retain(|d| seen.insert((d.primary_span().map(|s| (s.file.0, s.start, s.end)), d.message.clone())));
        return Err(lw.diags);
    }
    let mut num_values = std::collections::BTreeMap::new();
    for (s, slot) in lw.slots.iter().enumerate() {
        let s = SlotId(s);
        if let SlotEnc::Num { points: Some(p) } = &slot.enc {
            let vals = match lw.num_atoms.get(&s) {
                Some(groups) => groups.iter().map(|g| g[0].to_json()).collect(),
                None => p.iter().map(|&x| Atom::Float(x).to_json()).collect(),
            };
            num_values.insert(s, vals);
        }
    }
    let output = output.ok_or_else(|| vec![lw.internal(root, "the output was not lowered")])?;
    let differ = Choices { eager_sums: lw.eager_sums_differ, lookup_sums: lw.lookup_sums_differ, logic_threshold: lw.logic_threshold_used, few_valued_products: lw.few_products_differ };
    let plan = Plan {
        slots: lw.slots,
        blocks: lw.blocks,
        tokens: lw.tokens,
        indices: lw.indices,
        output,
        num_values,
        output_label: g.node(root).label.clone(),
        positional: lw.positional,
        token_values: lw.token_values,
        real_input: None,
        output_bound: None,
        output_ints: lw.ivs.get(&root).filter(|iv| iv.int).map(|iv| (iv.lo, iv.hi)),
        grid_reads: lw.grid_reads,
        parts: std::collections::BTreeMap::new(),
        max_len: opts.max_len,
    };
    Ok((plan, differ))
}

/// Advances an odometer over `idx[j] in 0..size(j)`; false after the last combination.
fn next_combination(idx: &mut [usize], size: impl Fn(usize) -> usize) -> bool {
    for (j, i) in idx.iter_mut().enumerate() {
        *i += 1;
        if *i < size(j) {
            return true;
        }
        *i = 0;
    }
    false
}

fn index_of(values: &[Atom], a: &Atom) -> Option<usize> {
    values.iter().position(|v| v == a).or_else(|| match a {
        Atom::Float(x) => values.iter().position(|v| matches!(v, Atom::Float(y) if (x - y).abs() <= 1e-9 * x.abs().max(1.0))),
        _ => None,
    })
}

fn is_mean_capable(a: &Atom) -> bool {
    matches!(a, Atom::Int(_) | Atom::Float(_))
}

/// Distinct numeric points of a set of atoms (ascending), with the atoms behind each.
/// Whether two numbers are the same number computed two ways in floating point: within 1e-12
/// of the larger, relatively (at any scale: 1e-13 and 3e-13 are two numbers, not one).
fn same_up_to_rounding(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
}

fn points_of(atoms: &[Atom]) -> Option<(Vec<f64>, Vec<Vec<Atom>>)> {
    let mut v: Vec<(f64, Atom)> = Vec::with_capacity(atoms.len());
    for a in atoms {
        if a.is_str() {
            return None;
        }
        v.push((a.as_f64()?, a.clone()));
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Near zero, "the same number" is judged at the scale of the whole set, up to 1: the
    // rounding left by `(fa - fb) + fc` on means of size 1 is about 1e-16 where the exact value
    // is 0, and 0, 2.8e-17 and 1.1e-16 are then one value, not three that f32 would have to tell
    // apart. At most 1e-12 apart, whatever the set's scale (0 and 1e-7 beside 1e6 are two
    // values: review rv19), within what `raspc verify` takes for one value (1e-9 of
    // max(1, |value|)).
    let floor = 1e-12 * v.iter().fold(0.0f64, |m, (x, _)| m.max(x.abs())).min(1.0);
    let (mut pts, mut groups): (Vec<f64>, Vec<Vec<Atom>>) = (vec![], vec![]);
    for (x, a) in v {
        match pts.last() {
            Some(&p) if same_up_to_rounding(x, p) || (x - p).abs() <= floor => groups.last_mut()?.push(a),
            _ => {
                pts.push(x);
                groups.push(vec![a]);
            }
        }
    }
    // The first atom of a group stands for it: the exact one (an int, else the float with the
    // shortest repr: 1.0 rather than 0.9999999999999999 from a sum of thirds).
    for (p, g) in pts.iter_mut().zip(groups.iter_mut()) {
        g.sort_by_key(|a| (matches!(a, Atom::Float(_)), a.repr().len()));
        *p = g[0].as_f64().unwrap_or(*p);
    }
    Some((pts, groups))
}

/// A value set whose non-integer floats within rounding of one of its integers (the
/// interpreter's 3.0000000000000004 for a count of 3: `simplify::simplify_noting`) stand with
/// that integer: the other values, each with the floats it stands for (first the value itself).
fn with_missed_floats(vals: Vec<Atom>) -> (Vec<Atom>, Vec<Vec<Atom>>) {
    let near = |a: &Atom| matches!(a, Atom::Float(x) if x.fract() != 0.0 && (x - x.round()).abs() <= 1e-12 * x.abs().max(1.0));
    let (floats, mut kept): (Vec<Atom>, Vec<Atom>) = vals.into_iter().partition(near);
    let mut groups: Vec<Vec<Atom>> = kept.iter().map(|v| vec![v.clone()]).collect();
    for a in floats {
        match a.as_f64().and_then(|x| kept.iter().position(|v| !v.is_str() && v.as_f64() == Some(x.round()))) {
            Some(k) => groups[k].push(a),
            None => {
                kept.push(a.clone());
                groups.push(vec![a]);
            }
        }
    }
    (kept, groups)
}

impl Lowerer<'_> {
    fn label(&self, id: NodeId) -> &str {
        &self.g.node(id).label
    }

    fn err(&self, id: NodeId, code: &'static str, msg: String) -> Diagnostic {
        crate::names::error(self.g, id, code, msg)
    }

    /// A broken invariant of the lowering itself, reported instead of panicking.
    fn internal(&self, id: NodeId, what: &str) -> Diagnostic {
        self.err(id, "compile::internal", format!("internal error while lowering `{}`: {what} (this is a bug in raspc; please report it with the program)", self.label(id)))
    }

    fn new_slot(&mut self, label: String, enc: SlotEnc, at_bos: Vec<f64>) -> SlotId {
        self.slots.push(Slot { label, enc, at_bos, multi_hot: false });
        SlotId(self.slots.len() - 1)
    }

    fn push_block(&mut self, kind: BlockKind, writes: SlotId, what: String) {
        let mut reads: Vec<SlotId> = match &kind {
            BlockKind::Head(h) => h.q.iter().chain(&h.k).chain(&h.v).map(|e| e.slot).collect(),
            BlockKind::Mlp(m) => m.w_in.iter().map(|e| e.slot).collect(),
        };
        reads.sort();
        reads.dedup();
        self.blocks.push(Block { kind, reads, writes, what });
    }

    fn finite(&self, id: NodeId) -> Result<Vec<Atom>, Diagnostic> {
        match self.sets.get(&id).ok_or_else(|| self.internal(id, "no value set"))? {
            ValueSet::Finite(s) => Ok(s.iter().cloned().collect()),
            ValueSet::Unbounded => {
                let what = crate::names::describe(self.g, id);
                // Forced numerical already (helper a21: the note proposed the flag the user had
                // given, and spoke of a categorical encoding): what needs the list is a reader.
                let forced = self.opts.numerical.contains(&self.g.node(id).label);
                let remedy = if forced {
                    format!(
                        "`--encoding {}=numerical` keeps it in one dim, but here it is computed or read as a table of its values (a map's MLP lists them, a categorical aggregate needs a one-hot of them): a smaller --vocab or --max-len bounds them",
                        self.g.node(id).label
                    )
                } else {
                    "a categorical encoding needs a finite set: a smaller --vocab or --max-len, or `--encoding NAME=numerical` on a named s-op that feeds it, can bound it".to_string()
                };
                let mut d = self.err(id, "compile::unbounded", format!("{what} takes too many values to list")).with_label("too many possible values").with_note(format!(
                    "with these inputs and --max-len {}, {what} could take more than {} values; {remedy}",
                    self.opts.max_len,
                    crate::infer::MAX_VALUES
                ));
                // Where the values multiply: a mean of whole numbers that can be a fraction
                // (helper a6: a carry read through a selector meant to pick one key was blamed
                // on `10 * cout` four lines later).
                if let Some(m) = self.fractional_mean(id) {
                    let who = crate::names::describe(self.g, m);
                    d = d.with_secondary(crate::names::place(self.g, m), "a mean of whole numbers: it can be a fraction").with_note(format!(
                        "{who} averages whole numbers, so it can be a fraction, and what is computed from it multiplies its values; if its selector is meant to keep one key (a lookup), the compiler could not prove it: `==` on an injective function of `indices` or on a `selector_width` rank is proved, and `round(...)` keeps a value whole"
                    ));
                }
                Err(d)
            }
        }
    }

    /// An aggregate feeding `id` whose values are whole numbers (or booleans) but whose mean can
    /// be a fraction, nearest to `id` first.
    fn fractional_mean(&self, id: NodeId) -> Option<NodeId> {
        let whole = |a: &Atom| !a.is_str() && a.as_f64().is_some_and(|x| x.fract() == 0.0);
        let mut frontier = vec![id];
        let mut seen = std::collections::HashSet::new();
        while !frontier.is_empty() {
            let mut next = vec![];
            for n in frontier {
                if !seen.insert(n) {
                    continue;
                }
                if let NodeKind::Aggregate { values, .. } = &self.g.node(n).kind
                    && let (Some(ValueSet::Finite(vs)), Some(ValueSet::Finite(ms))) = (self.sets.get(values), self.sets.get(&n))
                    && !vs.is_empty()
                    && vs.iter().all(whole)
                    && ms.iter().any(|a| !a.is_str() && a.as_f64().is_some_and(|x| x.fract() != 0.0))
                {
                    return Some(n);
                }
                // Only through values that are unbounded or fractional themselves (a mean read
                // as a boolean, `f > 0.5`, does not multiply anything: review rv9).
                next.extend(self.g.node(n).kind.operands().into_iter().filter(|o| match self.sets.get(o) {
                    Some(ValueSet::Unbounded) => true,
                    Some(ValueSet::Finite(s)) => s.iter().any(|a| !a.is_str() && a.as_f64().is_some_and(|x| x.fract() != 0.0)),
                    None => false,
                }));
            }
            frontier = next;
        }
        None
    }

    /// User overrides must name s-ops of the program, and make sense for them.
    fn check_overrides(&mut self, root: NodeId) {
        let labels: HashMap<&str, NodeId> = self.g.ancestors(root).into_iter().map(|id| (self.g.node(id).label.as_str(), id)).collect();
        // A selector holds no values in the residual stream: there is nothing to encode.
        for name in self.opts.numerical.iter().chain(&self.opts.categorical) {
            if let Some(&id) = labels.get(name.as_str())
                && self.g.node(id).kind.is_selector()
            {
                self.diags.push(
                    self.err(id, "compile::encoding", format!("`{name}` is a selector; --encoding applies to s-ops"))
                        .with_label("a selector")
                        .with_note("a selector has no slot in the residual stream (heads read it through the s-ops it compares): encode those s-ops instead"),
                );
            }
        }
        for name in self.opts.numerical.iter().chain(&self.opts.categorical) {
            if !labels.contains_key(name.as_str()) {
                // The program's names (and the built-ins'), not the compiler's for unnamed
                // expressions (helper ed25: `sequencemap_9` was listed).
                let generated = |l: &str, id: NodeId| !self.g.node(id).named && l.rsplit_once('_').is_some_and(|(_, n)| n.parse::<u32>().is_ok());
                let mut known: Vec<&&str> = labels
                    .iter()
                    .filter(|(l, id)| !self.g.node(**id).kind.is_selector() && !generated(l, **id) && (!l.contains('_') || !l.starts_with("select")))
                    .map(|(l, _)| l)
                    .collect();
                known.sort();
                self.diags.push(
                    Diagnostic::error("compile::encoding", format!("--encoding names `{name}`, which is not an s-op of this program"), self.g.node(root).span)
                        .with_label("the compiled s-op")
                        .with_note(format!("s-ops here: {}", known.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "))),
                );
            }
        }
        for name in &self.opts.numerical {
            if let Some(&id) = labels.get(name.as_str()) {
                let kind = &self.g.node(id).kind;
                let numeric = match self.sets.get(&id) {
                    Some(ValueSet::Finite(s)) => s.iter().all(|a| !a.is_str()),
                    Some(ValueSet::Unbounded) | None => true,
                };
                if !kind.is_selector() && (matches!(kind, NodeKind::Const(_)) || !numeric) {
                    self.diags.push(
                        self.err(id, "compile::encoding", format!("`{name}` cannot be numerical"))
                            .with_label("here")
                            .with_note("only s-ops whose values are all numbers (or booleans) can be stored numerically"),
                    );
                }
            }
        }
    }

    // ---- causal support ------------------------------------------------------------------

    /// Under causal masking, the model computes at position i the program on the prefix ending
    /// at i. That holds when every s-op read at key positions has the same value at position j
    /// whatever follows j ("prefix-stable"). Reports every key-side read that is not.
    fn check_causal(&mut self, root: NodeId) {
        let mut stable: HashMap<NodeId, bool> = HashMap::new();
        for id in self.g.ancestors(root) {
            let k = &self.g.node(id).kind;
            let s = match k {
                NodeKind::Tokens | NodeKind::Indices | NodeKind::Const(_) => true,
                NodeKind::Length => false,
                NodeKind::Map { .. } => k.operands().iter().all(|o| stable[o]),
                NodeKind::Select { keys, queries, .. } => stable[keys] && stable[queries] && self.backward(id),
                // `a and b` is prefix-stable when both are, or when either side is stable and
                // looks only backward while the other compares prefix-stable s-ops (the order of
                // the operands does not matter).
                NodeKind::SelectAnd(a, b) => {
                    (stable[a] && stable[b])
                        || (stable[a] && self.backward(*a) && self.operands_stable(*b, &stable))
                        || (stable[b] && self.backward(*b) && self.operands_stable(*a, &stable))
                }
                NodeKind::SelectOr(..) | NodeKind::SelectNot(_) => self.backward(id) && self.operands_stable(id, &stable),
                NodeKind::SelectorWidth(sel) => stable[sel],
                NodeKind::Aggregate { sel, values, .. } | NodeKind::AggregateMax { sel, values, .. } => stable[sel] && stable[values],
            };
            // An s-op with one possible value is that constant whatever follows (`indices <
            // length` is always true: helper g8).
            let s = s || (!k.is_selector() && matches!(self.sets.get(&id), Some(ValueSet::Finite(v)) if v.len() == 1));
            stable.insert(id, s);
            // Key-side reads.
            let keys_read: Vec<NodeId> = match k {
                NodeKind::Select { keys, .. } => vec![*keys],
                NodeKind::Aggregate { values, .. } | NodeKind::AggregateMax { values, .. } => vec![*values],
                _ => vec![],
            };
            for r in keys_read {
                if !stable[&r] {
                    let what = if matches!(k, NodeKind::Select { .. }) { "compares the keys" } else { "averages the values" };
                    // A value the user named by its name; one the compiler named (`map_14`) as
                    // the expression it is (helper w).
                    let named = self.g.node(r).named;
                    let message = if named {
                        format!("with --causal, this {what} `{}`, which depends on later positions", self.label(r))
                    } else if matches!(k, NodeKind::Select { .. }) {
                        "with --causal, this compares keys that depend on later positions".to_string()
                    } else {
                        "with --causal, this averages values that depend on later positions".to_string()
                    };
                    let mut d = self.err(id, "compile::causal", message).with_label("reads a value that is not fixed by the prefix");
                    // `length` and other library values have no definition in the program.
                    let defined = crate::names::place(self.g, r);
                    if defined != crate::names::place(self.g, id) {
                        d = d.with_secondary(defined, if named { format!("`{}` is defined here", self.label(r)) } else { "that value, computed here".to_string() });
                    }
                    // Where the dependence on later positions comes from, followed through what
                    // the value reads (helper w26: the refusal named `bad`, four definitions
                    // after the selector that looks ahead).
                    let (reader, source) = self.unstable_source(r, &stable);
                    let at = crate::names::place(self.g, source);
                    if source != r && at != defined && at != crate::names::place(self.g, id) {
                        let node = self.g.node(source);
                        let name = if node.named { format!("`{}`", node.label) } else { "this selector".to_string() };
                        d = match &node.kind {
                            NodeKind::Length => d.with_secondary(crate::names::place(self.g, reader), "reads `length`, the whole input's length, which a prefix does not know"),
                            k if k.is_selector() => d
                                .with_secondary(at, format!("{name} can select keys after the query: the look-ahead comes from here"))
                                .with_note("a selector `and`-ed with `select(indices, indices, <=)` (or `<`, for keys before the query) selects only keys up to the query"),
                            _ => d.with_secondary(at, "depends on later positions from here"),
                        };
                    }
                    self.diags.push(d.with_note(
                        "a causal model computes position i from positions <= i; every value read at key positions must not depend on `length` or on selectors that look ahead",
                    ));
                }
            }
        }
    }

    /// The first node, following operands that are not prefix-stable from `r`, whose own
    /// operands are all stable: `length`, or a selector that looks ahead (with the node that
    /// reads it).
    fn unstable_source(&self, r: NodeId, stable: &HashMap<NodeId, bool>) -> (NodeId, NodeId) {
        let (mut reader, mut cur) = (r, r);
        let unstable = |o: &NodeId| !stable.get(o).copied().unwrap_or(true);
        loop {
            let kind = &self.g.node(cur).kind;
            let next = match kind {
                // A combination of selects over prefix-stable s-ops looks ahead as a whole: it
                // is the source, not whichever conjunct comes first (helper w29: the refusal
                // blamed `select(tokens, tokens, !=)` where it was `and`-ed with a look-ahead).
                NodeKind::SelectAnd(..) | NodeKind::SelectOr(..) | NodeKind::SelectNot(_) if self.operands_stable(cur, stable) => None,
                k if k.is_selector() => k.operands().into_iter().find(|o| unstable(o) && (!self.g.node(*o).kind.is_selector() || !self.operands_stable(*o, stable))),
                k => k.operands().into_iter().find(unstable),
            };
            match next {
                Some(n) => (reader, cur) = (cur, n),
                None => return (reader, cur),
            }
        }
    }

    fn operands_stable(&self, sel: NodeId, stable: &HashMap<NodeId, bool>) -> bool {
        self.select_leaves(sel).iter().all(|&l| match &self.g.node(l).kind {
            NodeKind::Select { keys, queries, .. } => stable[keys] && stable[queries],
            _ => false,
        })
    }

    fn select_leaves(&self, sel: NodeId) -> Vec<NodeId> {
        // Each node once, in order of first reach: a selector combined with itself again and
        // again (`s = (s and t) or s` in a loop) is a DAG whose tree is exponential (helper
        // d13: 30 rounds tried to allocate 4 GiB).
        fn go(g: &Graph, sel: NodeId, seen: &mut BTreeSet<NodeId>, out: &mut Vec<NodeId>) {
            if !seen.insert(sel) {
                return;
            }
            match &g.node(sel).kind {
                NodeKind::Select { .. } => out.push(sel),
                NodeKind::SelectAnd(a, b) | NodeKind::SelectOr(a, b) => {
                    go(g, *a, seen, out);
                    go(g, *b, seen, out);
                }
                NodeKind::SelectNot(a) => go(g, *a, seen, out),
                _ => {}
            }
        }
        let mut out = vec![];
        go(self.g, sel, &mut BTreeSet::new(), &mut out);
        out
    }

    /// True when the selector provably selects only keys at or before the query.
    fn backward(&self, sel: NodeId) -> bool {
        self.backward_as(sel, false)
    }

    /// [`backward`](Self::backward) of `sel`, or of `not sel` when `negated`: `a and b` when
    /// either side is, `a or b` when both are (helper g8: two backward `and`s joined by `or` were
    /// refused), `not` pushed inward (`not (a or b)` is `not a and not b`); otherwise every
    /// (key, query) pair of a selector over functions of `indices`.
    fn backward_as(&self, sel: NodeId, negated: bool) -> bool {
        match (&self.g.node(sel).kind, negated) {
            (NodeKind::SelectAnd(a, b), false) | (NodeKind::SelectOr(a, b), true) if self.backward_as(*a, negated) || self.backward_as(*b, negated) => return true,
            (NodeKind::SelectOr(a, b), false) | (NodeKind::SelectAnd(a, b), true) if self.backward_as(*a, negated) && self.backward_as(*b, negated) => return true,
            (NodeKind::SelectNot(a), _) if self.backward_as(*a, !negated) => return true,
            _ => {}
        }
        // All leaves compare functions of indices: check every (key, query) position pair.
        let n = self.opts.max_len as i64;
        let leaves = self.select_leaves(sel);
        let mut fns: HashMap<NodeId, Vec<Option<Atom>>> = HashMap::new();
        for &l in &leaves {
            let NodeKind::Select { keys, queries, .. } = &self.g.node(l).kind else { return false };
            for x in [*keys, *queries] {
                if fns.contains_key(&x) {
                    continue;
                }
                match self.index_function(x) {
                    Some(f) => {
                        fns.insert(x, f);
                    }
                    None => return false,
                }
            }
        }
        for q in 0..n {
            for k in (q + 1)..n {
                if self.eval_selector(sel, &|x| fns[&x][k as usize].clone(), &|x| fns[&x][q as usize].clone()) != negated {
                    return false;
                }
            }
        }
        true
    }

    /// If `x` is a function of `indices` alone, its value at each index 0..max_len.
    fn index_function(&self, x: NodeId) -> Option<Vec<Option<Atom>>> {
        crate::infer::index_function(self.g, x, self.opts.max_len)
    }

    /// Evaluates a selector tree for one (key, query) pair given each operand's key-side and
    /// query-side value.
    fn eval_selector(&self, sel: NodeId, key: &dyn Fn(NodeId) -> Option<Atom>, query: &dyn Fn(NodeId) -> Option<Atom>) -> bool {
        // Each node once per (key, query): a selector combined with itself again and again is a
        // DAG whose tree is exponential (helper d13).
        fn go(lw: &Lowerer, sel: NodeId, key: &dyn Fn(NodeId) -> Option<Atom>, query: &dyn Fn(NodeId) -> Option<Atom>, memo: &mut HashMap<NodeId, bool>) -> bool {
            if let Some(&b) = memo.get(&sel) {
                return b;
            }
            let b = match &lw.g.node(sel).kind {
                NodeKind::Select { keys, queries, cmp } => match (key(*keys), query(*queries)) {
                    (Some(k), Some(q)) => Atom::compare(&k, *cmp, &q).unwrap_or(false),
                    _ => false,
                },
                NodeKind::SelectAnd(a, b) => go(lw, *a, key, query, memo) && go(lw, *b, key, query, memo),
                NodeKind::SelectOr(a, b) => go(lw, *a, key, query, memo) || go(lw, *b, key, query, memo),
                NodeKind::SelectNot(a) => !go(lw, *a, key, query, memo),
                _ => false,
            };
            memo.insert(sel, b);
            b
        }
        go(self, sel, key, query, &mut HashMap::new())
    }

    // ---- nodes ---------------------------------------------------------------------------

    /// A slot the embeddings fill (`tokens`, `indices`): one-hot, or numerical on request.
    fn embedded(&mut self, id: NodeId, label: String) -> Result<SlotId, Diagnostic> {
        let vals = self.finite(id)?;
        let s = if self.opts.numerical.contains(&label) {
            let (pts, groups) = points_of(&vals).ok_or_else(|| self.err(id, "compile::encoding", format!("`{label}` has non-numeric values and cannot be numerical")))?;
            let s = self.new_slot(label, SlotEnc::Num { points: Some(pts) }, vec![0.0]);
            self.num_atoms.insert(s, groups);
            s
        } else {
            let d = vals.len();
            self.new_slot(label, SlotEnc::Cat(vals), vec![0.0; d])
        };
        self.set_rep(id, Rep::Slot(s));
        Ok(s)
    }

    fn lower_node(&mut self, id: NodeId) -> Result<(), Diagnostic> {
        let label = self.label(id).to_string();
        match self.g.node(id).kind.clone() {
            NodeKind::Tokens => {
                let s = self.embedded(id, label)?;
                self.tokens = Some(s);
            }
            NodeKind::Indices => {
                let s = self.embedded(id, label)?;
                self.indices = Some(s);
            }
            NodeKind::Const(_) => {
                self.set_rep(id, Rep::Inline);
            }
            NodeKind::Map { .. } => self.lower_map(id)?,
            NodeKind::Length => {
                let s = self.width(id, None)?;
                self.set_rep(id, Rep::Slot(s));
            }
            NodeKind::SelectorWidth(sel) => {
                let s = self.width(id, Some(sel))?;
                self.set_rep(id, Rep::Slot(s));
            }
            NodeKind::Aggregate { sel, values, default } => {
                let s = self.aggregate(id, sel, values, &default)?;
                self.set_rep(id, Rep::Slot(s));
            }
            NodeKind::AggregateMax { .. } => {
                return Err(self
                    .err(id, "compile::unsupported", format!("`aggregate_max` (`{label}`) compiles only for real-valued inputs"))
                    .with_label("a maximum over selected keys")
                    .with_note(if self.opts.causal {
                        "real-valued programs compile without --causal only (give the input's bounds with --input-bounds LO,HI and drop --causal); the maximum is then one hard-attention head"
                    } else {
                        "give the input's bounds with --input-bounds LO,HI; the maximum is then one hard-attention head"
                    }));
            }
            // Selectors get no slot: heads read them through their operands.
            NodeKind::Select { .. } | NodeKind::SelectAnd(..) | NodeKind::SelectOr(..) | NodeKind::SelectNot(_) => {}
        }
        Ok(())
    }

    /// The value combinations of some leaves (each at least one value), saturating.
    fn combinations<'l>(&self, leaves: impl IntoIterator<Item = &'l NodeId>) -> usize {
        leaves.into_iter().fold(1usize, |p, l| p.saturating_mul(self.domain_size(*l).max(1)))
    }

    fn domain_size(&self, leaf: NodeId) -> usize {
        match &self.rep[&leaf] {
            Rep::Slot(s) => match &self.slots[*s].enc {
                SlotEnc::Cat(v) => v.len(),
                SlotEnc::Num { points } => points.as_ref().map_or(usize::MAX, Vec::len),
            },
            Rep::Inline => 1,
        }
    }

    /// Gives each inline operand that has fewer values than its leaves combine to its own slot
    /// (one MLP), so a map reads those few values (`x < 0`, `c > 0`); with `numeric_only`, only
    /// operands that read a numerical slot. Not an operand that reads every leaf of the map `id`
    /// when the map has at most half as many values (`round(total / length)`: the quotient's 1,422 values
    /// were a one-hot for `round` to read, 9.9 M parameters at max-len 16; the map's own 145 are
    /// one lookup; helper w31).
    fn materialise_reducing(&mut self, id: NodeId, ops: &[NodeId], numeric_only: bool) -> Result<(), Diagnostic> {
        let all = self.leaf_list(id);
        let count = |lw: &Self, x: NodeId| match lw.sets.get(&x) {
            Some(ValueSet::Finite(v)) => v.len(),
            _ => usize::MAX,
        };
        // (Not where a leaf's number stands for several floats: the operand's own slot groups
        // the floats it computes from them, which the map may tell apart.)
        let exact = |lw: &Self, o: NodeId, ls: &[NodeId]| {
            !lw.inexact_nodes.contains(&o)
                && ls.iter().all(|l| match lw.rep.get(l) {
                    Some(Rep::Slot(s)) => !lw.cat_alts.contains_key(s) && lw.num_atoms.get(s).is_none_or(|g| g.iter().all(|x| x.len() == 1)),
                    _ => true,
                })
        };
        for o in ops {
            if let Rep::Inline = self.rep[o]
                && let ls = self.leaf_list(*o)
                && !(ls.len() > 1 && ls == all && count(self, id).saturating_mul(2) <= count(self, *o) && exact(self, *o, &ls))
                && (!numeric_only || ls.iter().any(|l| matches!(&self.rep[l], Rep::Slot(s) if matches!(self.slots[*s].enc, SlotEnc::Num { .. }))))
                && let ValueSet::Finite(vals) = &self.sets[o]
                // (A map of one number, reducing or not, is a staircase that gives its values in
                // one MLP: read one-hot instead, the number would be converted in one MLP and
                // the map computed in the next, a layer more: helper a19, `has_focus(s) and
                // has_focus(t)` took a layer per flag.)
                && (vals.len() < ls.iter().fold(1usize, |p, l| p.saturating_mul(self.domain_size(*l))) || (numeric_only && ls.len() == 1))
            {
                let s = self.materialise(*o)?;
                self.set_rep(*o, Rep::Slot(s));
            }
        }
        Ok(())
    }

    fn lower_map(&mut self, id: NodeId) -> Result<(), Diagnostic> {
        if let Some(s) = self.logic_threshold(id)? {
            self.set_rep(id, Rep::Slot(s));
            return Ok(());
        }
        match self.case_chain(id)? {
            chain::Chain::Waiting => return Ok(()),
            chain::Chain::Lowered(s) => {
                self.set_rep(id, Rep::Slot(s));
                return Ok(());
            }
            chain::Chain::No => {}
        }
        self.lower_map_plain(id)
    }

    /// [`Self::lower_map`] of a map that is not lowered with a chain of conditionals.
    fn lower_map_plain(&mut self, id: NodeId) -> Result<(), Diagnostic> {
        if let Some(s) = self.affine_map(id)? {
            self.set_rep(id, Rep::Slot(s));
            return Ok(());
        }
        let ops = self.g.node(id).kind.operands();
        let gather = |lw: &Self| -> BTreeSet<NodeId> {
            let mut leaves = BTreeSet::new();
            for o in &ops {
                lw.leaves_of(*o, &mut leaves);
            }
            leaves
        };
        // Combinations of the leaves' values; `indices` with `length` count only the pairs an
        // input reaches (index < length), the only ones that get units (helper d13: a map of
        // the two was refused from max-len 91, at 8,281 pairs of which 4,186 occur).
        let product = |lw: &Self, ls: &BTreeSet<NodeId>| {
            let kind_leaf = |k: fn(&NodeKind) -> bool| ls.iter().copied().find(|l| k(&lw.g.node(*l).kind) && matches!(lw.rep[l], Rep::Slot(_)));
            let pair = kind_leaf(|k| matches!(k, NodeKind::Indices)).zip(kind_leaf(|k| matches!(k, NodeKind::Length)));
            let values = |l: NodeId| -> Option<Vec<f64>> {
                match &lw.rep[&l] {
                    Rep::Slot(s) => match &lw.slots[*s].enc {
                        SlotEnc::Cat(v) => v.iter().map(|a| a.as_f64()).collect(),
                        SlotEnc::Num { .. } => None,
                    },
                    Rep::Inline => None,
                }
            };
            let reachable = pair.and_then(|(i, l)| {
                let (is, ls) = (values(i)?, values(l)?);
                Some(is.iter().map(|i| ls.iter().filter(|&&l| *i < l).count()).sum::<usize>().max(1))
            });
            let rest = ls.iter().filter(|l| reachable.is_none() || pair.is_none_or(|(i, n)| **l != i && **l != n));
            rest.fold(reachable.unwrap_or(1), |p, l| p.saturating_mul(lw.domain_size(*l).max(1)))
        };
        let mut leaves = gather(self);
        // A lookup over more than [`EAGER_SUM_COMBINATIONS`] combinations through an operand that
        // sums several s-ops (`(w0 + w1 + w2) / length`, 7,260 combinations at max-len 10: 826 k
        // parameters) is the plain plan; with [`Options::lookup_sums`] that operand is a sum slot
        // (the MLPs writing its terms add it) read through its own one-hot, a layer deeper
        // (54 k), and `compile` keeps the better of the two.
        if product(self, &leaves) > EAGER_SUM_COMBINATIONS {
            let sum_like = |lw: &Self, o: &NodeId| {
                matches!(lw.rep[o], Rep::Inline)
                    && lw.leaf_list(*o).len() > 1
                    && matches!(&lw.g.node(*o).kind, NodeKind::Map { op: raspc_lang::graph::MapOp::Binary(raspc_lang::ast::BinOp::Add | raspc_lang::ast::BinOp::Sub), .. })
            };
            for o in &ops {
                if !sum_like(self, o) {
                    continue;
                }
                if !self.opts.lookup_sums {
                    self.lookup_sums_differ = true;
                } else if let Some(lin) = self.lin_of_sum(*o)? {
                    let s = self.sum_slot(*o, lin);
                    self.set_rep(*o, Rep::Slot(s));
                }
            }
            leaves = gather(self);
        }
        let is_num = |lw: &Self, l: &NodeId| matches!(&lw.rep[l], Rep::Slot(s) if matches!(lw.slots[*s].enc, SlotEnc::Num { .. }));
        if leaves.len() >= 2 && leaves.iter().any(|l| is_num(self, l)) {
            // A number combined with other s-ops would need a one-hot over all its values.
            // Operands that reduce it to a few values (like `x < 0`) get their own staircase.
            self.materialise_reducing(id, &ops, true)?;
            leaves = gather(self);
        }
        // A map of one number is a staircase over its values, not an enumeration.
        let one_number = leaves.len() == 1 && leaves.iter().all(|l| is_num(self, l));
        if !one_number && product(self, &leaves) > MAX_COMBINATIONS {
            // Too many combinations to fuse: give multi-leaf operands their own MLPs first.
            for o in &ops {
                if let Rep::Inline = &self.rep[o]
                    && self.leaf_list(*o).len() > 1
                {
                    let s = self.materialise(*o)?;
                    self.set_rep(*o, Rep::Slot(s));
                }
            }
            leaves = gather(self);
            // Then operands that reduce their input to fewer values (`c > 0` of a count) get
            // their own MLP, and the map reads those few values.
            if product(self, &leaves) > MAX_COMBINATIONS {
                self.materialise_reducing(id, &ops, false)?;
                leaves = gather(self);
            }
            if product(self, &leaves) > MAX_COMBINATIONS {
                if let Some(s) = self.separable_sum(id)? {
                    self.set_rep(id, Rep::Slot(s));
                    return Ok(());
                }
                if let Some(s) = self.separable_ternary(id)? {
                    self.set_rep(id, Rep::Slot(s));
                    return Ok(());
                }
                // The inputs, with the user's names (or the built-in ones: `length`, `indices`).
                let named = |l: &NodeId| self.g.node(*l).named || matches!(self.g.node(*l).kind, NodeKind::Tokens | NodeKind::Indices | NodeKind::Length);
                // (Splitting a map of two inputs leaves a map of two: helper w30.)
                let remedy = if leaves.len() > 2 { "a smaller --vocab or --max-len, or splitting it into maps of fewer inputs each" } else { "a smaller --vocab or --max-len" };
                let here = crate::names::place(self.g, id);
                // (Only when it can be written out: `indices - k`, not "an expression in `y`".)
                let within = |l: NodeId| {
                    let s = crate::names::place(self.g, l);
                    s.file == here.file && s.start == here.start && crate::names::describe(self.g, l).starts_with('`')
                };
                let mut d = self
                    .err(id, "compile::too_many_combinations", format!("{} combines too many values to compile as one MLP", crate::names::describe(self.g, id)))
                    .with_label("this map")
                    .with_note(format!("its inputs ({}) take more than {MAX_COMBINATIONS} combinations of values; {remedy} avoids that", {
                        // Each with its number of values: which input makes the product
                        // large is what the user needs to see (helper w27).
                        let count = |l: &NodeId| match self.domain_size(*l) {
                            usize::MAX => "too many values to list".to_string(),
                            1 => "1 value".to_string(),
                            n => format!("{} values", crate::names::thousands(n)),
                        };
                        let mut parts: Vec<String> = leaves.iter().filter(|l| named(l)).map(|l| format!("`{}`: {}", self.label(*l), count(l))).collect();
                        // An input whose span starts where the map's does is written out: its
                        // mark is drawn under the map's (helper w30: both labels at one place).
                        let marked = |l: &&NodeId| !named(l) && !within(**l);
                        parts.extend(leaves.iter().filter(|l| !named(l) && !marked(l)).map(|l| format!("{}: {}", crate::names::describe(self.g, *l), count(l))));
                        let unnamed: Vec<String> = leaves.iter().filter(marked).map(count).collect();
                        match unnamed.as_slice() {
                            [] => {}
                            [c] => parts.push(format!("the expression marked: {c}")),
                            cs => parts.push(format!("the {} expressions marked: {}", cs.len(), cs.join(", "))),
                        }
                        parts.join("; ")
                    }));
                for l in &leaves {
                    if !named(l) && !within(*l) {
                        d = d.with_secondary(crate::names::place(self.g, *l), "one of its inputs");
                    }
                }
                return Err(d);
            }
        }
        self.set_rep(id, Rep::Inline);
        // A node whose values include the interpreter's floats beside the exact ones gets a slot
        // of its own, so that the maps reading it check them (an inline node's are not seen).
        let missed =
            matches!(self.sets.get(&id), Some(ValueSet::Finite(set)) if self.inexact_nodes.contains(&id) && set.iter().any(|a| matches!(a, Atom::Float(x) if x.fract() != 0.0)));
        // Such a node affine on one number (`m * 3 - 1` of a mean `m`) is that number's
        // multiple: a numerical slot keeps its floats as one, as `--encoding NAME=numerical`
        // would, where a one-hot would refuse them.
        if missed
            && !self.opts.categorical.contains(self.label(id))
            && let Some((lin, _)) = self.affine_on_points(id)?
        {
            let s = self.sum_slot(id, lin);
            self.set_rep(id, Rep::Slot(s));
            return Ok(());
        }
        if missed || self.opts.numerical.contains(self.label(id)) || self.opts.categorical.contains(self.label(id)) {
            let s = self.materialise(id)?;
            self.set_rep(id, Rep::Slot(s));
        }
        Ok(())
    }

    /// `a + b` or `a - b` where `a` and `b` each read one categorical slot (different ones):
    /// a numerical slot computed as a sum of per-value lookups, one hidden unit per value,
    /// instead of one per combination.
    fn separable_sum(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let NodeKind::Map { op: raspc_lang::graph::MapOp::Binary(op @ (raspc_lang::ast::BinOp::Add | raspc_lang::ast::BinOp::Sub)), args } = self.g.node(id).kind.clone() else {
            return Ok(None);
        };
        let (Some(Operand::Sop(a)), Some(Operand::Sop(b))) = (args.first(), args.get(1)) else { return Ok(None) };
        let mut sides = vec![];
        for (x, sign) in [(*a, 1.0), (*b, if op == raspc_lang::ast::BinOp::Sub { -1.0 } else { 1.0 })] {
            let v = self.view(x)?;
            let SlotEnc::Cat(_) = &self.slots[v.slot].enc else { return Ok(None) };
            let vals = self.view_values(&v);
            let mut nums = vec![];
            for val in vals {
                match val {
                    Some(a) if !a.is_str() => nums.push(a.as_f64()),
                    None => nums.push(None),
                    Some(_) => return Ok(None),
                }
            }
            sides.push((v.slot, nums, sign));
        }
        if sides[0].0 == sides[1].0 {
            return Ok(None);
        }
        let label = self.label(id).to_string();
        let atoms = self.finite(id).ok();
        let pg = atoms.as_deref().and_then(points_of);
        if atoms.is_some() && pg.is_none() {
            return Ok(None);
        }
        let out = self.new_slot(label.clone(), SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![0.0]);
        if let Some((_, groups)) = pg {
            self.num_atoms.insert(out, groups);
        }
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        for (slot, nums, sign) in &sides {
            for (d, x) in nums.iter().enumerate() {
                if let Some(x) = x
                    && *x != 0.0
                {
                    // `relu(2·onehot - 1)`: 0 or 1 through a leak under 1/2 (see `tree.rs`).
                    let c = mlp.hidden;
                    mlp.hidden += 1;
                    mlp.w_in.push(In::new(*slot, d, c, 2.0));
                    mlp.b_in.push(-1.0);
                    mlp.w_out.push(Out::new(c, out, 0, sign * x));
                }
            }
        }
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = {} {} {}", self.label(*a), if op == raspc_lang::ast::BinOp::Sub { "-" } else { "+" }, self.label(*b)));
        Ok(Some(out))
    }

    /// `t if c else e` where `t`, `c` and `e` each read one categorical slot, `c` another than
    /// the branches': a categorical slot with one unit per value of each branch (`t`'s value v
    /// and `c` true, or `e`'s and `c` false), not one per combination of the three (helper w26:
    /// `na if tokens == "a" else (nb if tokens == "b" else nc)` of three counts was refused at
    /// max-len 64, 12,675 combinations, where each branch has 65 values).
    fn separable_ternary(&mut self, id: NodeId) -> Result<Option<SlotId>, Diagnostic> {
        let NodeKind::Map { op: raspc_lang::graph::MapOp::Ternary, args } = self.g.node(id).kind.clone() else {
            return Ok(None);
        };
        let [Operand::Sop(t), Operand::Sop(c), Operand::Sop(e)] = args.as_slice() else { return Ok(None) };
        let label = self.label(id).to_string();
        // Only the plain case: no forced encoding, no floats standing for others.
        if self.opts.numerical.contains(&label) || self.inexact_nodes.contains(&id) {
            return Ok(None);
        }
        let Ok(vals) = self.finite(id) else { return Ok(None) };
        let mut sides = vec![];
        for x in [*t, *c, *e] {
            let mut v = self.view(x)?;
            // A number with its values listed is read through its one-hot (`depth if is_open
            // else depth + 1` of a rounded mean: helper w26).
            if v.map.is_none() && matches!(self.slots[v.slot].enc, SlotEnc::Num { points: Some(_) }) && !self.num_atoms.get(&v.slot).is_some_and(|g| g.iter().any(|x| x.len() > 1)) {
                v = self.cat_view(x)?;
            }
            if !matches!(self.slots[v.slot].enc, SlotEnc::Cat(_)) || self.cat_alts.contains_key(&v.slot) {
                return Ok(None);
            }
            let values = self.view_values(&v);
            sides.push((v.slot, values));
        }
        let (cond_slot, cond) = (sides[1].0, sides[1].1.clone());
        if sides[0].0 == cond_slot || sides[2].0 == cond_slot || cond.iter().any(Option::is_none) {
            return Ok(None);
        }
        // (branch slot, dim, output dim, the condition's truth it needs)
        let mut units = vec![];
        for (side, want) in [(0, true), (2, false)] {
            for (d, a) in sides[side].1.iter().enumerate() {
                let Some(a) = a else { continue };
                let Some(k) = index_of(&vals, a) else { return Ok(None) };
                units.push((sides[side].0, d, k, want));
            }
        }
        let dims = vals.len();
        let out = self.new_slot(label.clone(), SlotEnc::Cat(vals), vec![0.0; dims]);
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        for (slot, d, k, want) in units {
            let u = mlp.hidden;
            mlp.hidden += 1;
            // Both hold: `relu(2·(branch + cond) - 3)`, tolerating a leak under 1/2 (`tree.rs`).
            mlp.w_in.push(In::new(slot, d, u, 2.0));
            for (j, a) in cond.iter().enumerate() {
                if a.as_ref().is_some_and(|a| a.truthy() == want) {
                    mlp.w_in.push(In::new(cond_slot, j, u, 2.0));
                }
            }
            mlp.b_in.push(-3.0);
            mlp.w_out.push(Out::new(u, out, k, 1.0));
        }
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = {} if {} else {}", self.label(*t), self.label(*c), self.label(*e)));
        Ok(Some(out))
    }

    /// The nodes with slots an inline node is computed from (walking maps until a slot).
    /// Records how `id` is represented; a node that was read through as inline and now has a
    /// slot makes every cached leaf set stale.
    fn set_rep(&mut self, id: NodeId, rep: Rep) {
        let was = self.rep.insert(id, rep);
        let mut cache = self.leaf_cache.borrow_mut();
        if was.is_some() && matches!(self.rep[&id], Rep::Slot(_)) {
            cache.clear();
        } else {
            cache.remove(&id);
        }
    }

    fn leaves_of(&self, id: NodeId, out: &mut BTreeSet<NodeId>) {
        if let Some(Rep::Slot(_)) = self.rep.get(&id) {
            out.insert(id);
            return;
        }
        match &self.g.node(id).kind {
            NodeKind::Map { args, .. } => {
                if let Some(cached) = self.leaf_cache.borrow().get(&id) {
                    out.extend(cached.iter().copied());
                    return;
                }
                let mut mine = BTreeSet::new();
                for a in args {
                    if let Operand::Sop(s) = a {
                        self.leaves_of(*s, &mut mine);
                    }
                }
                out.extend(mine.iter().copied());
                self.leaf_cache.borrow_mut().insert(id, std::rc::Rc::new(mine.into_iter().collect()));
            }
            NodeKind::Const(_) => {}
            _ => {
                out.insert(id);
            }
        }
    }

    fn leaf_list(&self, id: NodeId) -> Vec<NodeId> {
        let mut s = BTreeSet::new();
        self.leaves_of(id, &mut s);
        s.into_iter().collect()
    }

    /// Value of an inline node given its leaves' values.
    fn eval_inline(&self, id: NodeId, env: &HashMap<NodeId, Atom>) -> Option<Atom> {
        self.eval_inline_memo(id, env, &mut HashMap::new())
    }

    /// [`Self::eval_inline`], each map once (a value read several times over and over is a DAG
    /// whose tree is exponential: helper d13).
    fn eval_inline_memo(&self, id: NodeId, env: &HashMap<NodeId, Atom>, memo: &mut HashMap<NodeId, Option<Atom>>) -> Option<Atom> {
        // Leaves are looked up; maps are evaluated even if they have a slot by now (a map
        // materialised after its user recorded its leaves).
        let value = |s: NodeId, memo: &HashMap<NodeId, Option<Atom>>| -> Option<Atom> {
            match (env.get(&s), &self.g.node(s).kind) {
                (Some(a), _) => Some(a.clone()),
                (None, NodeKind::Const(a)) => Some(a.clone()),
                (None, NodeKind::Map { .. }) => memo.get(&s).cloned().flatten(),
                _ => None,
            }
        };
        // The maps below `id` in post-order, iteratively (helper b19: a chain of 900,000 maps
        // overflowed the stack recursing).
        let mut stack = vec![(id, false)];
        while let Some((n, expanded)) = stack.pop() {
            if env.contains_key(&n) || memo.contains_key(&n) {
                continue;
            }
            let NodeKind::Map { op, args } = &self.g.node(n).kind else { continue };
            if expanded {
                let v = crate::positional::apply_with(op, args, |s| value(s, memo));
                memo.insert(n, v);
            } else {
                stack.push((n, true));
                for a in args.iter().rev() {
                    if let Operand::Sop(s) = a {
                        stack.push((*s, false));
                    }
                }
            }
        }
        value(id, memo)
    }

    /// The constants a map compares `leaf` with, when that is all it does with it (`leaf >= 0`,
    /// `not (leaf < 1) and not (leaf == 3)`): the map is then constant between them.
    fn thresholds(&self, id: NodeId, leaf: NodeId) -> Option<Vec<f64>> {
        use raspc_lang::ast::BinOp;
        use raspc_lang::graph::MapOp;
        let constant = |o: &Operand| match o {
            Operand::Const(c) => Some(c.clone()),
            Operand::Sop(n) => match &self.g.node(*n).kind {
                NodeKind::Const(c) => Some(c.clone()),
                _ => None,
            },
        };
        let (mut out, mut stack, mut seen) = (vec![], vec![id], std::collections::HashSet::new());
        while let Some(n) = stack.pop() {
            if n == leaf {
                // Read other than through a comparison with a constant.
                return None;
            }
            if !seen.insert(n) {
                continue;
            }
            match &self.g.node(n).kind {
                NodeKind::Const(_) => {}
                NodeKind::Map { op, args } => {
                    if let (MapOp::Binary(BinOp::Eq | BinOp::Le | BinOp::Ge | BinOp::Lt | BinOp::Gt), [x, y]) = (op, args.as_slice()) {
                        let c = match (x, y) {
                            (Operand::Sop(s), c) | (c, Operand::Sop(s)) if *s == leaf => constant(c).filter(|c| !c.is_str()).and_then(|c| c.as_f64()).filter(|c| c.is_finite()),
                            _ => None,
                        };
                        if let Some(c) = c {
                            out.push(c);
                            continue;
                        }
                    }
                    stack.extend(args.iter().filter_map(|a| match a {
                        Operand::Sop(s) => Some(*s),
                        Operand::Const(_) => None,
                    }));
                }
                _ => return None,
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Is `id` a comparison of `leaf` with 0, `leaf` the merge of two means of integers over one
    /// selector (`mean(a) - mean(b)` as `aggregate(s, a - b)`)? The interpreter's `S1/c - S2/c`
    /// (or `+`) has the sign of `S1 - S2` exactly (rounding is monotone and keeps k/c apart for
    /// distinct k; a difference of distinct floats is never 0), so such a test reads the merged
    /// mean's exact grid, however many floats the interpreter may compute (Tracr's Dyck-1 at
    /// max-len 90: `balance < 0` and `balance == 0` were refused, too many to list).
    fn sign_of_two_means(&self, id: NodeId, leaf: NodeId) -> bool {
        use raspc_lang::ast::BinOp;
        use raspc_lang::graph::MapOp;
        // (Through maps of one s-op each, `indicator(balance < 0)`: a function of the sign.)
        let mut id = id;
        while let Some(only) = self.g.node(id).kind.sole_operand().filter(|&o| o != leaf) {
            id = only;
        }
        let NodeKind::Map { op: MapOp::Binary(BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), args } = &self.g.node(id).kind else { return false };
        let zero = |a: &Operand| matches!(a, Operand::Const(Atom::Int(0))) || matches!(a, Operand::Const(Atom::Float(z)) if *z == 0.0);
        let compares = match args.as_slice() {
            [Operand::Sop(x), c] | [c, Operand::Sop(x)] => *x == leaf && zero(c),
            _ => false,
        };
        let NodeKind::Aggregate { values, default: Atom::Int(_), .. } = &self.g.node(leaf).kind else { return false };
        let NodeKind::Map { op: MapOp::Binary(BinOp::Add | BinOp::Sub), args: parts } = &self.g.node(*values).kind else { return false };
        let [Operand::Sop(x), Operand::Sop(y)] = parts.as_slice() else { return false };
        // Each part one mean's values (a part that is itself arithmetic may be a third mean
        // merged in), integers.
        let plain = |n: NodeId| {
            !matches!(self.g.node(n).kind, NodeKind::Map { op: MapOp::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div), .. })
                && matches!(self.sets.get(&n), Some(ValueSet::Finite(s)) if s.iter().all(|a| matches!(a, Atom::Int(_) | Atom::Bool(_))))
        };
        compares && x != y && plain(*x) && plain(*y)
    }

    /// The values of `leaf = a ± b` (two numbers with known values, too many sums to list:
    /// `mean(x) - mean(y) >= 0` over different selectors) that a map comparing it only with
    /// constants needs: the smallest and largest, and the nearest on each side of each constant.
    /// Between them the map is constant, so the staircase over these steps only where the full
    /// list would (its gap is the true one: the two values either side of a constant).
    fn threshold_points(&self, id: NodeId, leaf: NodeId) -> Option<Vec<Atom>> {
        use raspc_lang::ast::BinOp;
        let NodeKind::Map { op: raspc_lang::graph::MapOp::Binary(op @ (BinOp::Add | BinOp::Sub)), args } = &self.g.node(leaf).kind else { return None };
        let [Operand::Sop(a), Operand::Sop(b)] = args.as_slice() else { return None };
        if a == b {
            return None;
        }
        let ts = self.thresholds(id, leaf)?;
        let side = |n: NodeId| -> Option<Vec<(f64, Atom)>> {
            let atoms: Vec<Atom> = match self.sets.get(&n) {
                Some(ValueSet::Finite(s)) => s.iter().cloned().collect(),
                _ => crate::numeric::mean_grid(self.g, n, &self.sets, &self.ivs, self.opts.max_len)?.points()?.1.into_iter().flatten().collect(),
            };
            let mut v = atoms.into_iter().map(|x| Some((x.as_f64().filter(|f| f.is_finite() && !x.is_str())?, x))).collect::<Option<Vec<_>>>()?;
            v.sort_by(|p, q| p.0.total_cmp(&q.0));
            (!v.is_empty()).then_some(v)
        };
        let (xs, ys) = (side(*a)?, side(*b)?);
        // d(x, y) rises with x, and with y for a sum, falls with it for a difference (IEEE
        // rounding is monotone): per x, a binary search over y finds the nearest on each side.
        let sub = *op == BinOp::Sub;
        let d = |x: f64, y: f64| if sub { x - y } else { x + y };
        let mut pairs: Vec<(usize, usize)> = vec![];
        let (ylo, yhi) = (0, ys.len() - 1);
        pairs.push((0, if sub { yhi } else { ylo }));
        pairs.push((xs.len() - 1, if sub { ylo } else { yhi }));
        for &t in &ts {
            // below(d) is true for the values under the split: d < t, and d <= t.
            for strict in [true, false] {
                let below = |v: f64| if strict { v < t } else { v <= t };
                // (value, index into xs, index into ys)
                let (mut lo, mut hi) = (None::<(f64, usize, usize)>, None::<(f64, usize, usize)>);
                for (i, &(x, _)) in xs.iter().enumerate() {
                    // Ascending y: a difference is below t for a suffix of y, a sum for a prefix.
                    let k = ys.partition_point(|&(y, _)| if sub { !below(d(x, y)) } else { below(d(x, y)) });
                    let (under, over) = if sub { (ys.get(k).map(|_| k), k.checked_sub(1)) } else { (k.checked_sub(1), ys.get(k).map(|_| k)) };
                    // The largest value under the split and the smallest over it.
                    let keep = |best: &mut Option<(f64, usize, usize)>, j: Option<usize>, better: fn(f64, f64) -> bool| {
                        if let Some(j) = j
                            && best.is_none_or(|(v, _, _)| better(d(x, ys[j].0), v))
                        {
                            *best = Some((d(x, ys[j].0), i, j));
                        }
                    };
                    keep(&mut lo, under, |a, b| a > b);
                    keep(&mut hi, over, |a, b| a < b);
                }
                pairs.extend(lo.iter().chain(hi.iter()).map(|&(_, i, j)| (i, j)));
            }
        }
        // The interpreter's own values of those pairs (every atom a point stands for).
        let mut out = vec![];
        for (i, j) in pairs {
            let v = self.eval_inline(leaf, &HashMap::from([(*a, xs[i].1.clone()), (*b, ys[j].1.clone())]))?;
            out.push(v);
        }
        Some(out)
    }

    /// Whether `id` is, or is computed from, a mean of values that are not all integers.
    fn mean_of_non_integers(&self, id: NodeId) -> bool {
        self.g.ancestors(id).into_iter().any(|n| match &self.g.node(n).kind {
            NodeKind::Aggregate { values, .. } => match self.sets.get(values) {
                Some(ValueSet::Finite(set)) => set.iter().any(|a| matches!(a, Atom::Float(x) if x.fract() != 0.0)),
                _ => true,
            },
            _ => false,
        })
    }

    /// `id` maps `input`'s value `exact` and `other`, the same number computed another way, to
    /// different results.
    fn rounding_differs(&self, id: NodeId, input: NodeId, exact: &Atom, other: &Atom) -> Diagnostic {
        self.err(id, "compile::numeric_map", format!("{} gives different results for numbers that differ only by rounding", crate::names::describe(self.g, id))).with_label("this map").with_note(format!(
            "{} can be {} or {}, the same number computed two ways in floating point (a mean of floats depends on the order they are added; k/n·n is not always exactly k); the interpreter's result depends on which, a model cannot tell them apart. {}",
            crate::names::describe(self.g, input),
            exact.repr(),
            other.repr(),
            self.round_first_advice(id, "Round the values first (`round(...)`), or compute with integers")
        ))
    }

    /// "Round the values first", unless the map is that `round` (helper w26: advised inside the
    /// `round(...)` it was about): then the two numbers round to different integers.
    fn round_first_advice(&self, id: NodeId, otherwise: &str) -> String {
        match &self.g.node(id).kind {
            NodeKind::Map { op: raspc_lang::graph::MapOp::Round, .. } => {
                "Rounding is what tells them apart here (they lie either side of a half): compute with integers (counts from `selector_width`, sums of integers) instead of rounding floats".to_string()
            }
            _ => otherwise.to_string(),
        }
    }

    /// How to read `id` linearly.
    fn view(&mut self, id: NodeId) -> Result<View, Diagnostic> {
        match self.rep.get(&id).cloned().ok_or_else(|| self.internal(id, "read before it was lowered"))? {
            Rep::Slot(s) => Ok(View { slot: s, map: None }),
            Rep::Inline if self.leaf_list(id).is_empty() => Ok(View { slot: TOK, map: Some(vec![self.eval_inline(id, &HashMap::new())]) }),
            Rep::Inline => {
                let leaves = self.leaf_list(id);
                if leaves.len() == 1
                    && let Rep::Slot(s) = self.rep[&leaves[0]]
                    && let SlotEnc::Cat(vals) = &self.slots[s].enc
                {
                    let map: Vec<Option<Atom>> = vals.iter().map(|a| self.eval_inline(id, &HashMap::from([(leaves[0], a.clone())]))).collect();
                    // A value that stands for another the interpreter computes in its place
                    // (`cat_alts`) must map to the same result.
                    for (k, group) in self.cat_alts.get(&s).into_iter().flatten().enumerate() {
                        for a in group.iter().skip(1) {
                            let other = self.eval_inline(id, &HashMap::from([(leaves[0], a.clone())]));
                            if let (Some(x), Some(y)) = (&map[k], &other)
                                && !x.py_eq(y)
                            {
                                return Err(self.rounding_differs(id, leaves[0], &group[0], a));
                            }
                        }
                    }
                    return Ok(View { slot: s, map: Some(map) });
                }
                let s = self.materialise(id)?;
                self.set_rep(id, Rep::Slot(s));
                Ok(View { slot: s, map: None })
            }
        }
    }

    /// Value of each dim of a categorical view.
    fn view_values(&self, v: &View) -> Vec<Option<Atom>> {
        match (&v.map, &self.slots[v.slot].enc) {
            (Some(m), _) => m.clone(),
            (None, SlotEnc::Cat(vals)) => vals.iter().cloned().map(Some).collect(),
            // Numerical views are converted by `cat_view` before anyone asks for their values.
            (None, SlotEnc::Num { .. }) => vec![],
        }
    }

    /// A categorical view of `id`, converting a numerical slot with a staircase MLP if needed.
    fn cat_view(&mut self, id: NodeId) -> Result<View, Diagnostic> {
        let v = self.view(id)?;
        if matches!(self.slots[v.slot].enc, SlotEnc::Cat(_)) {
            return Ok(v);
        }
        Ok(View { slot: self.categorical_of(v.slot, id)?, map: None })
    }

    fn categorical_of(&mut self, num: SlotId, id: NodeId) -> Result<SlotId, Diagnostic> {
        if let Some(&c) = self.conv.get(&num) {
            return Ok(c);
        }
        let SlotEnc::Num { points: Some(points) } = self.slots[num].enc.clone() else {
            return Err(self
                .finite(id)
                .err()
                .unwrap_or_else(|| {
                    let what = crate::names::describe(self.g, id);
                    self.err(id, "compile::unbounded", format!("{what} takes too many values to list, and a reader needs it one-hot"))
                        .with_label("needed as a categorical value")
                        .with_note(format!(
                            "a categorical encoding has a dim per value; with these inputs and --max-len {}, {what} can take more than {} values (a number it is computed as); a smaller --max-len or --vocab bounds it",
                            self.opts.max_len,
                            crate::infer::MAX_VALUES
                        ))
                }));
        };
        Ok(self.one_hot_of_points(num, &points))
    }

    /// The one-hot of a numerical slot's points ([`Self::categorical_of`], which has checked
    /// that it lists them).
    fn one_hot_of_points(&mut self, num: SlotId, points: &[f64]) -> SlotId {
        if let Some(&c) = self.conv.get(&num) {
            return c;
        }
        let atoms: Vec<Atom> = match self.num_atoms.get(&num) {
            Some(groups) => groups.iter().map(|g| g[0].clone()).collect(),
            None => points.iter().map(|&p| Atom::Float(p)).collect(),
        };
        let n = atoms.len();
        let outputs: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| (i == j) as u8 as f64).collect()).collect();
        let label = format!("{}:categorical", self.slots[num].label);
        let out = self.new_slot(label, SlotEnc::Cat(atoms), vec![0.0; n]);
        // A point that stands for several floats (a number computed two ways) still does in the
        // one-hot: a map reading it must give them the same result.
        if let Some(groups) = self.num_atoms.get(&num).filter(|g| g.iter().any(|x| x.len() > 1)) {
            self.cat_alts.insert(out, groups.clone());
        }
        let mlp = self.staircase(num, points, &outputs, out);
        self.push_block(BlockKind::Mlp(mlp), out, format!("categorical({})", self.slots[num].label));
        self.conv.insert(num, out);
        out
    }

    /// Each leaf with the categorical slot that holds it (numerical leaves converted by a
    /// staircase) and that slot's values.
    fn categorical_leaves<'l>(&mut self, leaves: impl IntoIterator<Item = &'l NodeId>) -> Result<Vec<(NodeId, SlotId, Vec<Atom>)>, Diagnostic> {
        let mut views = vec![];
        for &l in leaves {
            let Some(Rep::Slot(s)) = self.rep.get(&l).cloned() else { return Err(self.internal(l, "a leaf has no slot")) };
            let s = if matches!(self.slots[s].enc, SlotEnc::Num { .. }) { self.categorical_of(s, l)? } else { s };
            let SlotEnc::Cat(vals) = self.slots[s].enc.clone() else { return Err(self.internal(l, "a categorical view is numerical")) };
            views.push((l, s, vals));
        }
        Ok(views)
    }

    /// The `--encoding` flag for node `id`: its name when the user gave it one; a name the
    /// compiler made (`sequencemap_13`) is no name `--encoding` knows, so the user is told to
    /// give it one.
    fn encoding_flag(&self, id: NodeId, kind: &str) -> String {
        let node = self.g.node(id);
        if node.named {
            format!("`--encoding {}={kind}`", node.label)
        } else {
            format!("bind it to a name (`NAME = ...;`) and pass `--encoding NAME={kind}`")
        }
    }

    /// Gives an inline map its own slot and MLP.
    fn materialise(&mut self, id: NodeId) -> Result<SlotId, Diagnostic> {
        let Some(Rep::Inline) = self.rep.get(&id) else { return Err(self.internal(id, "materialising what already has a slot")) };
        let leaves = self.leaf_list(id);
        let label = self.label(id).to_string();
        let mut vals = self.finite(id)?;
        // A map whose results include floats that differ only by rounding (a fractional mean
        // passed through: `w * indicator(c)`, `w if c else 0`) is stored as a number, one
        // point for each such group, as its input is: a one-hot would give the two floats
        // dims of their own, which no model tells apart.
        let numerical = self.opts.numerical.contains(&label);
        // Categorical: a float the interpreter computes in place of an integer value (a count
        // from a mean, 3.0000000000000004) stands with that integer, not in a dim of its own.
        let mut alts: Option<Vec<Vec<Atom>>> = None;
        if !numerical && self.inexact_nodes.contains(&id) {
            let (kept, groups) = with_missed_floats(vals.clone());
            if groups.iter().any(|g| g.len() > 1) {
                vals = kept;
                alts = Some(groups);
            }
        }
        let enc = if numerical {
            let (pts, groups) = points_of(&vals).ok_or_else(|| self.err(id, "compile::encoding", format!("`{label}` has non-numeric values")))?;
            (SlotEnc::Num { points: Some(pts) }, Some(groups))
        } else {
            (SlotEnc::Cat(vals.clone()), None)
        };
        let encode = |a: &Atom| -> Option<Vec<f64>> {
            match &enc.0 {
                SlotEnc::Cat(v) => index_of(v, a).map(|i| (0..v.len()).map(|j| (i == j) as u8 as f64).collect()),
                SlotEnc::Num { .. } => a.as_f64().map(|x| vec![x]),
            }
        };
        let dims = enc.0.dims();
        let what = format!("{} = map({})", label, leaves.iter().map(|l| self.label(*l).to_string()).collect::<Vec<_>>().join(", "));
        // A single numerical leaf: staircase over its points.
        if leaves.len() == 1
            && let Rep::Slot(ls) = self.rep[&leaves[0]]
            && let SlotEnc::Num { points } = self.slots[ls].enc.clone()
        {
            let (points, groups) = match points {
                Some(points) => {
                    let groups = self.num_atoms.get(&ls).cloned().unwrap_or_else(|| points.iter().map(|p| vec![Atom::Float(*p)]).collect());
                    (points, groups)
                }
                // A merged mean (`mean(a) - mean(b)`) whose floats the interpreter computes apart
                // from S/c: the grid of S/c is not what the map sees (helper z3: `m0 - m1 < 1`
                // past max-len 18, 19 of 200 inputs wrong).
                None if self.inexact_nodes.contains(&leaves[0]) && !self.sign_of_two_means(id, leaves[0]) => {
                    return Err(self
                        .err(id, "compile::numeric_map", format!("{} reads a sum or difference of means whose floats depend on rounding", crate::names::describe(self.g, id)))
                        .with_label("this map")
                        .with_note(format!(
                            "{} is the interpreter's sum of rounded quotients (8/3 - 5/3 is 0.9999999999999998), too many values to list at --max-len {}; the map's result may depend on which. Round it first (`round(...)`), or compare the means' integer sums",
                            crate::names::describe(self.g, leaves[0]),
                            self.opts.max_len
                        )));
                }
                None => match crate::numeric::mean_grid(self.g, leaves[0], &self.sets, &self.ivs, self.opts.max_len)
                    .and_then(|g| g.points())
                    .or_else(|| self.threshold_points(id, leaves[0]).and_then(|v| points_of(&v)))
                {
                    Some(pg) => pg,
                    None => {
                        let what = crate::names::describe(self.g, leaves[0]);
                        let grid = match crate::numeric::mean_grid(self.g, leaves[0], &self.sets, &self.ivs, self.opts.max_len) {
                            Some(_) => format!(", and as a mean of integers over up to {} positions, more than {} fractions", self.opts.max_len, crate::numeric::MAX_GRID_POINTS),
                            None => String::new(),
                        };
                        return Err(self
                            .err(leaves[0], "compile::unbounded", format!("{what} can take too many values for the map that reads it"))
                            .with_label("read by a map")
                            .with_note(format!(
                                "a map reads a number through a lookup over every value the number can take; with these inputs and --max-len {}, {what} can take more than {} values{grid}",
                                self.opts.max_len,
                                crate::infer::MAX_VALUES
                            ))
                            .with_note("a smaller --max-len or --vocab bounds it"));
                    }
                },
            };
            let on_grid = self.slots[ls].enc == (SlotEnc::Num { points: None });
            let mut outputs = vec![];
            for g in &groups {
                let results: Vec<Option<Atom>> = g.iter().map(|a| self.eval_inline(id, &HashMap::from([(leaves[0], a.clone())]))).collect();
                let first = results.iter().flatten().next().cloned();
                // A numerical result may itself differ only by rounding (the input passed
                // through); it is then one point of the output.
                let same = |r: &Atom, f: &Atom| {
                    r.py_eq(f) || matches!((&enc.0, r.is_str() || f.is_str(), r.as_f64(), f.as_f64()), (SlotEnc::Num { .. }, false, Some(p), Some(q)) if same_up_to_rounding(p, q))
                };
                if results.iter().flatten().zip(std::iter::repeat(&first)).any(|(r, f)| f.as_ref().is_some_and(|f| !same(r, f))) {
                    // One point stands either for equal numbers of different types (1, 1.0,
                    // True) or for floats that differ only by rounding (a mean's 27/7 computed
                    // two ways); the remedy differs.
                    let input = crate::names::describe(self.g, leaves[0]);
                    let values = match g.len() {
                        0..=4 => g.iter().map(Atom::repr).collect::<Vec<_>>().join(" or "),
                        k => format!("{} or {} other values", g.iter().take(3).map(Atom::repr).collect::<Vec<_>>().join(", "), k - 3),
                    };
                    let rounding = g.iter().any(|a| a.as_f64() != g[0].as_f64());
                    // The named s-ops to store categorically: the input itself, or the ones an
                    // unnamed input is computed from.
                    let mut named = vec![];
                    let mut todo = vec![leaves[0]];
                    let mut seen = std::collections::HashSet::new();
                    while let Some(n) = todo.pop() {
                        let node = self.g.node(n);
                        if !seen.insert(n)
                            || matches!(node.kind, raspc_lang::NodeKind::Tokens | raspc_lang::NodeKind::Indices | raspc_lang::NodeKind::Length | raspc_lang::NodeKind::Const(_))
                        {
                            continue;
                        }
                        if node.named {
                            // Numbers computed two ways by rounding: storing categorically helps
                            // only for a mean of integers (one float per sum and count, which
                            // the map then reads exactly); a count computed as a mean times a
                            // length, or a mean of other floats, stays ambiguous.
                            // (A merged or scaled mean, `fa + fb`, carries the floats of its
                            // parts' order: not plain.)
                            let plain_mean = match &node.kind {
                                raspc_lang::NodeKind::Aggregate { values, .. } => {
                                    !self.inexact_nodes.contains(&n)
                                        && matches!(self.sets.get(values), Some(ValueSet::Finite(set)) if set.iter().all(|a| !matches!(a, Atom::Float(x) if x.fract() != 0.0)))
                                }
                                _ => false,
                            };
                            // (Not one the user already stores so: review w24 was told to pass
                            // the --encoding it had passed.)
                            if (!rounding || plain_mean) && !self.opts.categorical.contains(&node.label) {
                                named.push(node.label.clone());
                            }
                        } else {
                            todo.extend(node.kind.operands());
                        }
                    }
                    named.sort();
                    // Storing a mean of non-integers categorically does not help: its float
                    // depends on the order the interpreter adds the values in.
                    if rounding && self.mean_of_non_integers(leaves[0]) {
                        named.clear();
                    }
                    let flag = match named.as_slice() {
                        [] => String::new(),
                        _ => format!(" (`{}`)", named.iter().map(|n| format!("--encoding {n}=categorical")).collect::<Vec<_>>().join(" ")),
                    };
                    let (what, note) = if rounding {
                        (
                            "numbers that differ only by rounding",
                            format!(
                                "{input} can be {values}, the same number computed two ways; the interpreter's result depends on which, a model cannot tell them apart. {}",
                                self.round_first_advice(
                                    id,
                                    &if flag.is_empty() {
                                        "Round the values first, or compute with integers".to_string()
                                    } else {
                                        format!("Round the values first, compute with integers, or store the s-ops it comes from categorically{flag}")
                                    }
                                )
                            ),
                        )
                    } else {
                        ("equal numbers of different types", format!("{input} can be {values}; store the s-ops it comes from categorically{flag}"))
                    };
                    // Results that differ only by rounding themselves (the number passed on):
                    // stored as a number, they are one.
                    let results: Vec<f64> = results.iter().flatten().filter(|r| !r.is_str()).filter_map(Atom::as_f64).collect();
                    let passed_on = matches!(enc.0, SlotEnc::Cat(_)) && results.len() > 1 && results.iter().all(|&x| same_up_to_rounding(x, results[0]));
                    let note = if passed_on {
                        format!("{note}; its results differ only by rounding too: storing it as a number ({}) keeps them as one", self.encoding_flag(id, "numerical"))
                    } else {
                        note
                    };
                    return Err(self
                        .err(id, "compile::numeric_map", format!("{} gives different results for {what}", crate::names::describe(self.g, id)))
                        .with_label("this map")
                        .with_note(note));
                }
                outputs.push(first.and_then(|r| encode(&r)).unwrap_or_else(|| vec![0.0; dims]));
            }
            let out = self.new_slot(label, enc.0, vec![0.0; dims]);
            if let (Some(a), SlotEnc::Cat(_)) = (&alts, &self.slots[out].enc) {
                self.cat_alts.insert(out, a.clone());
                self.same_input_alts.insert(out);
            }
            if let Some(gr) = enc.1 {
                self.num_atoms.insert(out, gr);
            }
            let (points, outputs) = if on_grid { self.grid_steps(ls, &points, outputs) } else { (points, outputs) };
            let mlp = self.staircase(ls, &points, &outputs, out);
            self.push_block(BlockKind::Mlp(mlp), out, what);
            return Ok(out);
        }
        // Categorical leaves (numerical ones converted first): one unit per combination.
        let views = self.categorical_leaves(&leaves)?;
        let out = self.new_slot(label.clone(), enc.0.clone(), vec![0.0; dims]);
        if let (Some(a), SlotEnc::Cat(_)) = (&alts, &self.slots[out].enc) {
            self.cat_alts.insert(out, a.clone());
            self.same_input_alts.insert(out);
        }
        if let Some(gr) = enc.1 {
            self.num_atoms.insert(out, gr);
        }
        // The table over every combination (None: unreachable, or the map fails there), then
        // one unit per leaf of its decision tree (`lower/tree.rs`).
        let sizes: Vec<usize> = views.iter().map(|v| v.2.len()).collect();
        // An input with no values: the map is computed on no input (the program fails on every
        // one; `compile` says so first, `raspc dump` reached here: review rv23, a panic).
        if sizes.contains(&0) {
            return Err(self.err(id, "compile::rejected", format!("{} is computed on no input: one of the values it reads takes no value", crate::names::describe(self.g, id))));
        }
        // A numerical leaf's point may stand for floats that differ only by rounding; the map
        // must give them the same result (the interpreter sees the exact float, a model only
        // the number).
        let alternatives: Vec<Option<Vec<Vec<Atom>>>> = leaves
            .iter()
            .map(|l| match self.rep.get(l) {
                Some(Rep::Slot(s)) if matches!(self.slots[*s].enc, SlotEnc::Num { .. }) => self.num_atoms.get(s).cloned().filter(|g| g.iter().any(|x| x.len() > 1)),
                Some(Rep::Slot(s)) => self.cat_alts.get(s).cloned(),
                _ => None,
            })
            .collect();
        let mut codes: Vec<Vec<f64>> = vec![];
        let mut code_class: HashMap<Vec<u64>, u32> = HashMap::new();
        let mut class: Vec<Option<u32>> = vec![];
        let mut idx = vec![0usize; views.len()];
        let mut env = HashMap::new();
        loop {
            for (j, (l, _, vals)) in views.iter().enumerate() {
                env.insert(*l, vals[idx[j]].clone());
            }
            let result = if crate::positional::reachable(self.g, &env) { self.eval_inline(id, &env) } else { None };
            for (j, alts) in alternatives.iter().enumerate() {
                let Some(group) = alts.as_ref().and_then(|g| g.get(idx[j])).filter(|g| g.len() > 1) else { continue };
                let Some(r) = &result else { continue };
                for a in &group[1..] {
                    let mut e = env.clone();
                    e.insert(views[j].0, a.clone());
                    // A one-hot result must light the same dim (or an equal value's); a number
                    // may be off within the tolerance that merges points (a later step that tells
                    // such numbers apart checks its own inputs).
                    let differs = |x: &Atom| match &enc.0 {
                        SlotEnc::Cat(_) => !x.py_eq(r) && encode(x) != encode(r),
                        SlotEnc::Num { .. } => match (x.is_str() || r.is_str(), x.as_f64(), r.as_f64()) {
                            (false, Some(p), Some(q)) => !same_up_to_rounding(p, q),
                            _ => !x.py_eq(r),
                        },
                    };
                    if let Some(other) = self.eval_inline(id, &e).filter(|other| differs(other)) {
                        let mut d = self.rounding_differs(id, views[j].0, &group[0], a);
                        if let (SlotEnc::Cat(_), false, Some(p), Some(q)) = (&enc.0, other.is_str() || r.is_str(), other.as_f64(), r.as_f64())
                            && same_up_to_rounding(p, q)
                        {
                            // The results differ only by rounding too (the number passed on):
                            // stored as a number, they are one.
                            d = d.with_note(format!(
                                "its results ({} and {}) differ only by rounding too: storing it as a number ({}) keeps them as one",
                                r.repr(),
                                other.repr(),
                                self.encoding_flag(id, "numerical")
                            ));
                        }
                        return Err(d);
                    }
                }
            }
            // (Classes found by hash: a linear search over the codes found so far took 15 s for
            // 7,000 combinations of a 7,000-value one-hot, review rv27a.)
            let code = result.and_then(|r| encode(&r));
            class.push(code.map(|c| {
                let key: Vec<u64> = c.iter().map(|x| (x + 0.0).to_bits()).collect();
                *code_class.entry(key).or_insert_with(|| {
                    codes.push(c);
                    codes.len() as u32 - 1
                })
            }));
            if !next_combination(&mut idx, |j| sizes[j]) {
                break;
            }
        }
        let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
        for (lits, c) in tree::leaves(&sizes, &class) {
            let code = &codes[c as usize];
            if code.iter().all(|&x| x == 0.0) {
                continue;
            }
            let u = mlp.hidden;
            mlp.hidden += 1;
            // `relu(2·Σ - (2m - 1))`: 1 when all m literals hold, 0 when one does not, and so
            // on a one-hot that leaks (a staircase's far steps cancel in f32 only up to their
            // rounding: 1.2e-4 on dims that should be 0, review rv26b) still 0 and 1 exactly
            // until the literals' sum is off by 1/2 (`relu(Σ - (m - 1))` passed the leak on,
            // times the value written).
            if lits.is_empty() {
                mlp.w_in.push(In::new(TOK, 0, u, 2.0));
            }
            for (j, vals) in &lits {
                for &v in vals {
                    mlp.w_in.push(In::new(views[*j].1, v, u, 2.0));
                }
            }
            mlp.b_in.push(-(2.0 * lits.len().max(1) as f64 - 1.0));
            for (d, &x) in code.iter().enumerate() {
                if x != 0.0 {
                    mlp.w_out.push(Out::new(u, out, d, x));
                }
            }
        }
        self.push_block(BlockKind::Mlp(mlp), out, what);
        Ok(out)
    }

    // ---- selectors -----------------------------------------------------------------------

    /// Splits a selector into score terms: its `and`-conjuncts, merged when they compare the same
    /// s-ops. Each term is (key operands, query operands, subtrees).
    fn terms(&self, sel: NodeId) -> Vec<(Vec<NodeId>, Vec<NodeId>, Vec<NodeId>)> {
        fn conj(g: &Graph, s: NodeId, out: &mut Vec<NodeId>) {
            if let NodeKind::SelectAnd(a, b) = &g.node(s).kind {
                conj(g, *a, out);
                conj(g, *b, out);
            } else {
                out.push(s);
            }
        }
        let mut parts = vec![];
        conj(self.g, sel, &mut parts);
        let mut groups: Vec<(Vec<NodeId>, Vec<NodeId>, Vec<NodeId>)> = vec![];
        for p in parts {
            let (mut ks, mut qs) = (BTreeSet::new(), BTreeSet::new());
            for l in self.select_leaves(p) {
                if let NodeKind::Select { keys, queries, .. } = &self.g.node(l).kind {
                    ks.insert(*keys);
                    qs.insert(*queries);
                }
            }
            let (ks, qs): (Vec<NodeId>, Vec<NodeId>) = (ks.into_iter().collect(), qs.into_iter().collect());
            match groups.iter_mut().find(|g| g.0 == ks && g.1 == qs) {
                Some(g) => g.2.push(p),
                None => groups.push((ks, qs, vec![p])),
            }
        }
        groups
    }

    /// A one-hot reading of several s-ops at once: a slot and, per dim, the tuple of their values.
    /// One s-op: its categorical view. Several that are functions of one categorical slot: a
    /// view of that slot. Otherwise an MLP builds a one-hot over the reachable tuples.
    fn tuple_view(&mut self, nodes: &[NodeId]) -> Result<TupleView, Diagnostic> {
        if nodes.len() == 1 {
            let v = self.cat_view(nodes[0])?;
            return Ok((v.slot, self.view_values(&v).into_iter().map(|o| o.map(|a| vec![a])).collect()));
        }
        if let Some(t) = self.tuples.get(nodes) {
            return Ok(t.clone());
        }
        // Maps of a number without a finite set (`floor(u)`, `u == round(u)` of a mean on a grid)
        // get their own staircases: the number itself has no one-hot. So does a map of one
        // number alone, whose staircase gives its few values where a one-hot of the number has a
        // dim per value (helper a19: `select(indices, ceil(m), <) or ...` over a mean m of
        // indices read m's 1,201 values one-hot at max-len 16, 25 M parameters at 20; the
        // staircase of `ceil(m)` has 17).
        for &n in nodes {
            let number = |lw: &Self, l: &NodeId, any: bool| matches!(&lw.rep[l], Rep::Slot(s) if matches!(&lw.slots[*s].enc, SlotEnc::Num { points } if any || points.is_none()));
            let leaves = self.leaf_list(n);
            if let Some(Rep::Inline) = self.rep.get(&n)
                && (leaves.iter().any(|l| number(self, l, false)) || (leaves.len() == 1 && number(self, &leaves[0], true)))
                && matches!(self.sets.get(&n), Some(ValueSet::Finite(_)))
            {
                let s = self.materialise(n)?;
                self.set_rep(n, Rep::Slot(s));
            }
        }
        let mut leaves = BTreeSet::new();
        for &n in nodes {
            self.leaves_of(n, &mut leaves);
        }
        let views = self.categorical_leaves(&leaves)?;
        let eval_all = |lw: &Self, env: &HashMap<NodeId, Atom>| -> Option<Vec<Atom>> { nodes.iter().map(|&n| lw.eval_inline(n, env)).collect() };
        let result = if views.is_empty() {
            (TOK, vec![eval_all(self, &HashMap::new())])
        } else if views.len() == 1 {
            let (l, s, vals) = &views[0];
            (*s, vals.iter().map(|a| eval_all(self, &HashMap::from([(*l, a.clone())]))).collect())
        } else {
            let product = views.iter().fold(1usize, |p, v| p.saturating_mul(v.2.len().max(1)));
            if product > MAX_COMBINATIONS {
                return Err(self
                    .err(nodes[0], "compile::too_many_combinations", "a selector compares too many combinations of values".to_string())
                    .with_label("one of the s-ops compared together")
                    .with_note(format!(
                        "its operands {} combine more than {MAX_COMBINATIONS} values; `and` of separate selects avoids the combination",
                        nodes.iter().map(|n| format!("`{}`", self.label(*n))).collect::<Vec<_>>().join(", ")
                    )));
            }
            let mut combos: Vec<(Vec<usize>, Vec<Atom>)> = vec![];
            let mut tuples: Vec<Vec<Atom>> = vec![];
            let mut idx = vec![0usize; views.len()];
            'combos: loop {
                let env: HashMap<NodeId, Atom> = views.iter().enumerate().map(|(j, (l, _, vals))| (*l, vals[idx[j]].clone())).collect();
                if crate::positional::reachable(self.g, &env)
                    && let Some(t) = eval_all(self, &env)
                {
                    if !tuples.contains(&t) {
                        tuples.push(t.clone());
                    }
                    combos.push((idx.clone(), t));
                }
                if !next_combination(&mut idx, |j| views[j].2.len()) {
                    break 'combos;
                }
            }
            let label = format!("({})", nodes.iter().map(|n| self.label(*n).to_string()).collect::<Vec<_>>().join(", "));
            let names: Vec<Atom> = tuples.iter().map(|t| Atom::Str(format!("({})", t.iter().map(Atom::repr).collect::<Vec<_>>().join(", ")))).collect();
            let d = names.len();
            let out = self.new_slot(label.clone(), SlotEnc::Cat(names), vec![0.0; d]);
            let k = views.len();
            let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
            for (ix, t) in &combos {
                let c = mlp.hidden;
                mlp.hidden += 1;
                // All k hold: `relu(2·Σ - (2k - 1))`, tolerating a leak under 1/2 (`tree.rs`).
                for (j, (_, s, _)) in views.iter().enumerate() {
                    mlp.w_in.push(In::new(*s, ix[j], c, 2.0));
                }
                mlp.b_in.push(-(2.0 * k as f64 - 1.0));
                let Some(j) = tuples.iter().position(|x| x == t) else { return Err(self.internal(nodes[0], "a tuple value is missing")) };
                mlp.w_out.push(Out::new(c, out, j, 1.0));
            }
            self.push_block(BlockKind::Mlp(mlp), out, format!("{label} as one one-hot"));
            (out, tuples.into_iter().map(Some).collect())
        };
        self.tuples.insert(nodes.to_vec(), result.clone());
        Ok(result)
    }

    /// One side (keys or queries) of a score term: a categorical reading (tuple per dim), or a
    /// numerical slot with its finite points.
    fn side(&mut self, nodes: &[NodeId]) -> Result<Side, Diagnostic> {
        if nodes.len() == 1 {
            let v = self.view(nodes[0])?;
            if let SlotEnc::Num { points: Some(points) } = self.slots[v.slot].enc.clone() {
                let atoms = match self.num_atoms.get(&v.slot) {
                    Some(g) => g.iter().map(|x| x[0].clone()).collect(),
                    None => points.iter().map(|&p| Atom::Float(p)).collect(),
                };
                return Ok(Side::Num(v.slot, points, atoms));
            }
        }
        let (s, t) = self.tuple_view(nodes)?;
        Ok(Side::Cat(s, t))
    }

    /// A categorical slot holding which class of `classes` (one class id per point) a
    /// numerical slot's value falls in: a staircase with steps only where the class changes.
    fn classes(&mut self, num: SlotId, points: &[f64], class_of: &[usize]) -> SlotId {
        if let Some(&c) = self.class_slots.get(&(num, class_of.to_vec())) {
            return c;
        }
        // A class per value, in order: the slot's one-hot, shared with the maps that read it
        // (a select on `bal == bal` beside a lookup of `bal` built both, 192 dims each).
        if class_of.iter().enumerate().all(|(i, &c)| i == c) && matches!(&self.slots[num].enc, SlotEnc::Num { points: Some(p) } if p.as_slice() == points) {
            return self.one_hot_of_points(num, points);
        }
        let n = class_of.iter().max().map_or(0, |m| m + 1);
        let names: Vec<Atom> = (0..n)
            .map(|c| {
                let members: Vec<String> = points.iter().zip(class_of).filter(|(_, k)| **k == c).map(|(p, _)| raspc_lang::atom::float_repr(*p)).collect();
                let shown = if members.len() > 4 { format!("{}, ..., {} ({} values)", members[0], members[members.len() - 1], members.len()) } else { members.join(", ") };
                Atom::Str(format!("{{{shown}}}"))
            })
            .collect();
        let outputs: Vec<Vec<f64>> = class_of.iter().map(|&k| (0..n).map(|j| (j == k) as u8 as f64).collect()).collect();
        let label = format!("{}:classes", self.slots[num].label);
        let out = self.new_slot(label.clone(), SlotEnc::Cat(names), vec![0.0; n]);
        let mlp = self.staircase(num, points, &outputs, out);
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = which class of values `{}` is in", self.slots[num].label));
        self.class_slots.insert((num, class_of.to_vec()), out);
        out
    }

    /// A staircase over a grid of possible values of a numerical slot that has no finite set
    /// ([`crate::numeric::Grid`]): only the points next to a change of output are kept (the
    /// ramps between true neighbours are the same), and the slot records the smallest gap a
    /// step spans and its largest value, from which emission derives the error its writers may
    /// leave ([`Plan::grid_reads`]).
    fn grid_steps(&mut self, slot: SlotId, points: &[f64], outputs: Vec<Vec<f64>>) -> (Vec<f64>, Vec<Vec<f64>>) {
        let n = points.len();
        let keep = |j: usize| j == 0 || j + 1 == n || outputs[j] != outputs[j - 1] || outputs[j] != outputs[j + 1];
        self.note_steps(slot, points, &outputs);
        let kept: Vec<usize> = (0..n).filter(|&j| keep(j)).collect();
        (kept.iter().map(|&j| points[j]).collect(), kept.into_iter().map(|j| outputs[j].clone()).collect())
    }

    /// Records the smallest gap between neighbouring points of `slot` that a step lies between
    /// and the largest magnitude ([`Plan::grid_reads`]): emission checks that the slot's error,
    /// f32 rounding included, stays within a quarter of that gap.
    fn note_steps(&mut self, slot: SlotId, points: &[f64], outputs: &[Vec<f64>]) {
        let mut gap = f64::INFINITY;
        for j in 1..points.len() {
            if outputs[j] != outputs[j - 1] {
                gap = gap.min(points[j] - points[j - 1]);
            }
        }
        let magnitude = points.iter().fold(0.0f64, |m, p| m.max(p.abs()));
        let e = self.grid_reads.entry(slot).or_insert((f64::INFINITY, 0.0));
        *e = (e.0.min(gap), e.1.max(magnitude));
    }

    /// [`staircase`], with its steps recorded ([`Self::note_steps`]).
    fn staircase(&mut self, input: SlotId, points: &[f64], outputs: &[Vec<f64>], out: SlotId) -> Mlp {
        self.note_steps(input, points, outputs);
        staircase(input, points, outputs, out)
    }

    /// Builds the query/key entries of a selector; returns (q, k, columns used, number of terms).
    fn scores(&mut self, sel: Option<NodeId>) -> Result<(Vec<In>, Vec<In>, usize, usize), Diagnostic> {
        self.scores_with(sel, false)
    }

    /// `select(k, q1, ==) or select(k, q2, ==)`, the whole selector of an aggregate: its score
    /// as the sum `[k = q1] + [k = q2]` over k's one-hot (columns: k's values), not one term
    /// over the one-hot of the pairs (q1, q2) (helper w30: a rotation by a count written as
    /// `select(indices, indices - c, ==) or select(indices, indices - c + length, ==)` read 392
    /// pairs at max-len 16, 2.19 M parameters, and 217.9 M at 64). A key equal to both scores 2,
    /// but then q1 = q2 and no other key scores: the selected keys are still those of highest
    /// score. (Not for a width, whose BOS must tie with every selected key.) The columns, or
    /// None when the key is not a one-hot or a side's values are floats that differ only by
    /// rounding.
    #[allow(clippy::type_complexity)]
    fn additive_or(&mut self, or: NodeId) -> Result<Option<(Vec<In>, Vec<In>, usize)>, Diagnostic> {
        let NodeKind::SelectOr(a, b) = self.g.node(or).kind else { return Ok(None) };
        let eq = |lw: &Self, s: NodeId| match lw.g.node(s).kind {
            NodeKind::Select { keys, queries, cmp: raspc_lang::ast::Cmp::Eq } => Some((keys, queries)),
            _ => None,
        };
        let (Some((k1, q1)), Some((k2, q2))) = (eq(self, a), eq(self, b)) else { return Ok(None) };
        if k1 != k2 || q1 == q2 {
            return Ok(None);
        }
        // A query computed from the other (`q2 = q1 + length`) gets its one-hot first, from the
        // inputs they share, not from q1's own: a layer less.
        let (side1, side2) = if self.g.ancestors(q2).contains(&q1) {
            let side2 = self.side(&[q2])?;
            (self.side(&[q1])?, side2)
        } else {
            let side1 = self.side(&[q1])?;
            (side1, self.side(&[q2])?)
        };
        let Side::Cat(ks, kv) = self.side(&[k1])? else { return Ok(None) };
        if self.cat_alts.contains_key(&ks) {
            return Ok(None);
        }
        // One column per value of k (a view of a wider one-hot, `indices % 3`, has several dims
        // per value: review rv30c, 17 columns for 3 values).
        let mut by_value: Vec<(Atom, Vec<usize>)> = vec![];
        for (d, key) in kv.iter().enumerate() {
            let Some([key]) = key.as_deref() else { continue };
            match by_value.iter_mut().find(|(a, _)| a == key) {
                Some((_, dims)) => dims.push(d),
                None => by_value.push((key.clone(), vec![d])),
            }
        }
        // Per query side: its one-hot slot and, per dim, which values of k it selects. A
        // numerical query (a sum slot, `indices - c`) is read through the classes of its values
        // by the key value they equal (helper w30's rotation at max-len 64: the two queries
        // enumerated as one-hots of 128 and 191 values, 13.3 M parameters).
        let mut sides = vec![];
        for (select, qn, side) in [(a, q1, side1), (b, q2, side2)] {
            let matches = |lw: &Self, v: &Atom| -> Vec<bool> {
                by_value.iter().map(|(key, _)| lw.eval_selector(select, &|n: NodeId| (n == k1).then(|| key.clone()), &|n: NodeId| (n == qn).then(|| v.clone()))).collect()
            };
            match side {
                Side::Cat(s, vals) => {
                    if self.cat_alts.contains_key(&s) {
                        return Ok(None);
                    }
                    let rows = vals
                        .iter()
                        .map(|v| match v.as_deref() {
                            Some([v]) => matches(self, v),
                            _ => vec![false; by_value.len()],
                        })
                        .collect::<Vec<_>>();
                    sides.push((s, rows, None));
                }
                Side::Num(slot, points, atoms) => {
                    // Every float a point stands for must select the same keys (the interpreter
                    // compares exact floats): otherwise the plain lowering says why not.
                    let groups: Vec<Vec<Atom>> = match self.num_atoms.get(&slot) {
                        Some(g) if g.len() == atoms.len() => g.clone(),
                        _ => atoms.iter().map(|a| vec![a.clone()]).collect(),
                    };
                    let mut rows: Vec<Vec<bool>> = vec![];
                    for g in &groups {
                        let row = matches(self, &g[0]);
                        if g[1..].iter().any(|a| matches(self, a) != row) {
                            return Ok(None);
                        }
                        rows.push(row);
                    }
                    let (class_of, reps) = group_rows(&rows);
                    sides.push((slot, reps, Some((points, class_of))));
                }
            }
        }
        // (Classes only once both sides can be read: no block is left without a reader.)
        let sides: Vec<(SlotId, Vec<Vec<bool>>)> = sides
            .into_iter()
            .map(|(slot, rows, classes)| match classes {
                Some((points, class_of)) => (self.classes(slot, &points, &class_of), rows),
                None => (slot, rows),
            })
            .collect();
        let (mut q, mut k, mut cols) = (vec![], vec![], 0usize);
        for (j, (_, dims)) in by_value.iter().enumerate() {
            let matching: Vec<In> = sides.iter().flat_map(|(slot, rows)| rows.iter().enumerate().filter(|(_, r)| r[j]).map(|(e, _)| In::new(*slot, e, cols, 1.0))).collect();
            if matching.is_empty() {
                continue;
            }
            k.extend(dims.iter().map(|&d| In::new(ks, d, cols, 1.0)));
            q.extend(matching);
            cols += 1;
        }
        Ok(Some((q, k, cols)))
    }

    /// [`Self::scores`]; with `additive`, an aggregate's `or` of two `==` selects on one key is a
    /// sum of two terms ([`Self::additive_or`]).
    fn scores_with(&mut self, sel: Option<NodeId>, additive: bool) -> Result<(Vec<In>, Vec<In>, usize, usize), Diagnostic> {
        let (mut q, mut k, mut cols) = (vec![], vec![], 0usize);
        let Some(sel) = sel else { return Ok((q, k, 0, 0)) };
        if additive && let Some((q, k, cols)) = self.additive_or(sel)? {
            return Ok((q, k, cols, 1));
        }
        let groups = self.terms(sel);
        let r = groups.len();
        for (keys, queries, subtrees) in groups {
            let ks = self.side(&keys)?;
            let mut qs = self.side(&queries)?;
            // The atoms behind each dim or point of a side: a numerical point may stand for
            // several floats that differ only by rounding (`4/3 + 2` and `10/3`).
            let alternatives = |lw: &Self, s: &Side, nodes: &[NodeId]| -> Vec<Vec<Option<Vec<Atom>>>> {
                // A side that is an inline map of one slot (`round(n)`, `n + 1`) stands for the
                // map of each float the slot's dim stands for: `round(m * length)` takes 13 and
                // 12.999999999999998 both to 13 (it was refused as comparing floats that differ
                // only by rounding; helpers s, w).
                let through: Option<(NodeId, NodeId)> = match nodes {
                    [n] if matches!(lw.rep.get(n), Some(Rep::Inline)) => match lw.leaf_list(*n).as_slice() {
                        [l] => Some((*n, *l)),
                        _ => None,
                    },
                    _ => None,
                };
                match s {
                    // A one-hot dim may stand for floats too (`cat_alts`: a count from a mean,
                    // 14 and 14.000000000000002), when the side reads the slot's own values.
                    Side::Cat(slot, t) => match lw.cat_alts.get(slot).filter(|_| lw.same_input_alts.contains(slot)) {
                        Some(groups) if groups.len() == t.len() => groups
                            .iter()
                            .zip(t)
                            .map(|(g, x)| match (x, through) {
                                (Some(v), Some((n, l))) if v.len() == 1 && g.len() > 1 => {
                                    let mut out: Vec<Option<Vec<Atom>>> = vec![x.clone()];
                                    for a in g {
                                        let r = lw.eval_inline(n, &HashMap::from([(l, a.clone())])).map(|r| vec![r]);
                                        if !out.iter().any(|o| match (o, &r) {
                                            (Some(o), Some(r)) => o.len() == r.len() && o.iter().zip(r).all(|(p, q)| p == q),
                                            (None, None) => true,
                                            _ => false,
                                        }) {
                                            out.push(r);
                                        }
                                    }
                                    out
                                }
                                (Some(v), None) if v.len() == 1 && g.len() > 1 && g[0].py_eq(&v[0]) => g.iter().map(|a| Some(vec![a.clone()])).collect(),
                                _ => vec![x.clone()],
                            })
                            .collect(),
                        _ => t.iter().map(|x| vec![x.clone()]).collect(),
                    },
                    Side::Num(slot, _, atoms) => match lw.num_atoms.get(slot) {
                        Some(groups) if groups.len() == atoms.len() => groups.iter().map(|g| g.iter().map(|a| Some(vec![a.clone()])).collect()).collect(),
                        _ => atoms.iter().map(|a| vec![Some(vec![a.clone()])]).collect(),
                    },
                }
            };
            let (kalt, qalt) = (alternatives(self, &ks, &keys), alternatives(self, &qs, &queries));
            if let (Side::Num(..), Side::Num(slot, _, atoms)) = (&ks, &qs) {
                // Both numerical: the queries become one-hot, the keys classes.
                let c = self.categorical_of(*slot, queries[0])?;
                qs = Side::Cat(c, atoms.iter().map(|a| Some(vec![a.clone()])).collect());
            }
            let tuples = |s: &Side| -> Vec<Option<Vec<Atom>>> {
                match s {
                    Side::Cat(_, t) => t.clone(),
                    Side::Num(_, _, atoms) => atoms.iter().map(|a| Some(vec![a.clone()])).collect(),
                }
            };
            let (kvals, qvals) = (tuples(&ks), tuples(&qs));
            let holds = |a: usize, b: usize| -> bool {
                let (Some(x), Some(y)) = (&kvals[a], &qvals[b]) else { return false };
                let kf = |n: NodeId| keys.iter().position(|&m| m == n).map(|i| x[i].clone());
                let qf = |n: NodeId| queries.iter().position(|&m| m == n).map(|i| y[i].clone());
                subtrees.iter().all(|&t| self.eval_selector(t, &kf, &qf))
            };
            let mut p: Vec<Vec<bool>> = (0..kvals.len()).map(|a| (0..qvals.len()).map(|b| holds(a, b)).collect()).collect();
            // Floats a point stands for must agree: the interpreter compares the exact floats,
            // the model only the number.
            if kalt.iter().chain(&qalt).any(|x| x.len() > 1) && kalt.len() == kvals.len() && qalt.len() == qvals.len() {
                let holds_for = |x: &Option<Vec<Atom>>, y: &Option<Vec<Atom>>| -> bool {
                    let (Some(x), Some(y)) = (x, y) else { return false };
                    let kf = |n: NodeId| keys.iter().position(|&m| m == n).map(|i| x[i].clone());
                    let qf = |n: NodeId| queries.iter().position(|&m| m == n).map(|i| y[i].clone());
                    subtrees.iter().all(|&t| self.eval_selector(t, &kf, &qf))
                };
                for (a, ka) in kalt.iter().enumerate() {
                    for (b, qb) in qalt.iter().enumerate() {
                        if ka.len() == 1 && qb.len() == 1 {
                            continue;
                        }
                        for x in ka {
                            for y in qb {
                                if holds_for(x, y) != p[a][b] {
                                    let show = |t: &Option<Vec<Atom>>| t.as_ref().map_or(String::new(), |t| t.iter().map(Atom::repr).collect::<Vec<_>>().join(", "));
                                    let (kn, qn) = (
                                        keys.iter().map(|&n| crate::names::describe(self.g, n)).collect::<Vec<_>>().join(", "),
                                        queries.iter().map(|&n| crate::names::describe(self.g, n)).collect::<Vec<_>>().join(", "),
                                    );
                                    let (side, first, second, other, against) = if x != &ka[0] { (&kn, &ka[0], x, y, &qn) } else { (&qn, &qb[0], y, x, &kn) };
                                    return Err(self
                                        .err(sel, "compile::float_compare", format!("this selector compares {kn} with {qn} at numbers that differ only by rounding"))
                                        .with_label("this selector")
                                        .with_note(format!(
                                            "{side} can be {} or {}, the same number computed two ways; compared with {against} at {}, the interpreter tells them apart by their exact floats, a model cannot. Compare integers instead (scale the values and `round` them first)",
                                            show(first),
                                            show(second),
                                            show(other)
                                        )));
                                }
                            }
                        }
                    }
                }
            }
            // A numerical side is read through the classes of values the predicate tells apart.
            let group_by = group_rows;
            let kslot = match &ks {
                Side::Cat(s, _) => *s,
                Side::Num(slot, points, _) => {
                    let (class_of, reps) = group_by(&p);
                    p = reps;
                    self.classes(*slot, points, &class_of)
                }
            };
            let qslot = match &qs {
                Side::Cat(s, _) => *s,
                Side::Num(slot, points, _) => {
                    let cols_t: Vec<Vec<bool>> = (0..qvals.len()).map(|b| p.iter().map(|row| row[b]).collect()).collect();
                    let (class_of, reps) = group_by(&cols_t);
                    p = (0..p.len()).map(|a| reps.iter().map(|c| c[a]).collect()).collect();
                    self.classes(*slot, points, &class_of)
                }
            };
            let (nk, nq) = (p.len(), p.first().map_or(0, Vec::len));
            if nq <= nk {
                for b in 0..nq {
                    let rows: Vec<usize> = p.iter().enumerate().filter(|(_, row)| row[b]).map(|(a, _)| a).collect();
                    if rows.is_empty() {
                        continue;
                    }
                    q.push(In::new(qslot, b, cols, 1.0));
                    k.extend(rows.into_iter().map(|a| In::new(kslot, a, cols, 1.0)));
                    cols += 1;
                }
            } else {
                for (a, row) in p.iter().enumerate() {
                    let rows: Vec<usize> = (0..nq).filter(|&b| row[b]).collect();
                    if rows.is_empty() {
                        continue;
                    }
                    k.push(In::new(kslot, a, cols, 1.0));
                    q.extend(rows.into_iter().map(|b| In::new(qslot, b, cols, 1.0)));
                    cols += 1;
                }
            }
        }
        Ok((q, k, cols, r))
    }

    /// At most one key selected per query, provably: `==` on an injective function of indices.
    fn single(&mut self, sel: NodeId) -> bool {
        crate::infer::selects_one_by_position(self.g, sel, self.opts.max_len, &self.sets)
    }

    fn selector_text(&self, sel: Option<NodeId>) -> String {
        match sel {
            None => "all".into(),
            Some(s) => self.label(s).to_string(),
        }
    }

    /// selector_width (or `length` when `sel` is None): a head computing 1/(w+1), then a
    /// staircase to w.
    fn width(&mut self, id: NodeId, sel: Option<NodeId>) -> Result<SlotId, Diagnostic> {
        let label = self.label(id).to_string();
        let (mut q, mut k, cols, r) = self.scores(sel)?;
        let n = self.opts.max_len;
        let pts: Vec<f64> = (0..=n).rev().map(|w| 1.0 / (w as f64 + 1.0)).collect();
        let scratch = self.new_slot(format!("{label}:inverse"), SlotEnc::Num { points: Some(pts.clone()) }, vec![1.0]);
        if r > 0 {
            // BOS scores r, tying with fully selected keys.
            q.push(In::new(BOS, 0, cols, 1.0));
            q.push(In::new(TOK, 0, cols, 1.0));
            k.push(In::new(BOS, 0, cols, r as f64));
        } else {
            // `length`: every key ties at 0; only the BOS query gets a preference (for itself),
            // so the value at BOS is known.
            q.push(In::new(BOS, 0, cols, 1.0));
            k.push(In::new(BOS, 0, cols, 1.0));
        }
        let width = cols + 1;
        let head = Head { width, q, k, v: vec![In::new(BOS, 0, 0, 1.0)], o: vec![Out::new(0, scratch, 0, 1.0)], gap: 1.0, qk_terms: cols };
        self.push_block(BlockKind::Head(head), scratch, format!("{label}:inverse = 1/(1 + selector_width({}))", self.selector_text(sel)));
        // A non-integer count is what the interpreter computes where this width replaced a mean
        // times a count (`simplify_noting`): it stands with the integer it rounds to.
        let (vals, groups) = with_missed_floats(self.finite(id)?);
        let numerical = self.opts.numerical.contains(&label);
        // Point 1/(w+1) (ascending order: w descending) -> w.
        let ws: Vec<i64> = (0..=n as i64).rev().collect();
        let (enc, outputs): (SlotEnc, Vec<Vec<f64>>) = if numerical {
            (SlotEnc::Num { points: Some((0..=n).map(|w| w as f64).collect()) }, ws.iter().map(|&w| vec![w as f64]).collect())
        } else {
            let d = vals.len();
            let outs = ws.iter().map(|&w| {
                let i = index_of(&vals, &Atom::Int(w));
                (0..d).map(|j| (Some(j) == i) as u8 as f64).collect()
            });
            (SlotEnc::Cat(vals.clone()), outs.collect())
        };
        let dims = enc.dims();
        let out = self.new_slot(label.clone(), enc, vec![0.0; dims]);
        if numerical {
            // Count w's point stands for w and the floats grouped with it.
            let by_count: Vec<Vec<Atom>> = (0..=n as i64)
                .map(|w| groups.iter().find(|g| g[0].as_f64() == Some(w as f64)).cloned().filter(|g| matches!(g[0], Atom::Int(_))).unwrap_or_else(|| vec![Atom::Int(w)]))
                .collect();
            self.num_atoms.insert(out, by_count);
        } else if groups.iter().any(|g| g.len() > 1) {
            self.cat_alts.insert(out, groups);
            self.same_input_alts.insert(out);
        }
        let mlp = self.staircase(scratch, &pts, &outputs, out);
        self.push_block(BlockKind::Mlp(mlp), out, format!("{label} = selector_width({})", self.selector_text(sel)));
        Ok(out)
    }

    fn aggregate(&mut self, id: NodeId, sel: NodeId, values: NodeId, default: &Atom) -> Result<SlotId, Diagnostic> {
        let label = self.label(id).to_string();
        let value_atoms = self.finite(values).ok();
        // Values that hold strings and one other value (the library `sort`'s default 0 beside
        // string tokens, review w24): the interpreter averages only a sequence without strings
        // (it rejects one that mixes them), so every mean is of copies of that one value, which
        // a categorical aggregate copies: when the mean of 2..=max-len copies is that number
        // (review rv24: three copies of 0.1 average to 0.10000000000000002, and 2^53 + 1 comes
        // back another number), as the float it is (`mean_of_one`, an alternative of an integer).
        let mean_of_one = value_atoms.as_ref().and_then(|v| {
            let mut others = v.iter().filter(|a| !a.is_str());
            let (Some(x), None) = (others.next(), others.next()) else { return None };
            if !v.iter().any(Atom::is_str) {
                return None;
            }
            let want = x.as_f64()?;
            let means: Vec<f64> = (2..=self.opts.max_len.max(2)).map(|k| raspc_lang::interp::python_mean(&vec![x; k])).collect();
            means.iter().all(|m| *m == want && m.is_sign_negative() == want.is_sign_negative()).then(|| (x.clone(), Atom::Float(want)))
        });
        let one_beside_strings = mean_of_one.is_some();
        let can_mean = !one_beside_strings && value_atoms.as_ref().is_none_or(|v| v.iter().any(is_mean_capable));
        let single = self.single(sel);
        let want_num = self.opts.numerical.contains(&label);
        let want_cat = self.opts.categorical.contains(&label);
        let numerical = want_num || (can_mean && !single);
        let (mut q, mut k, cols, r) = self.scores_with(Some(sel), true)?;
        q.push(In::new(BOS, 0, cols, 1.0));
        q.push(In::new(TOK, 0, cols, 1.0));
        k.push(In::new(BOS, 0, cols, r as f64 - 0.5));
        let what = format!("{label} = aggregate({}, {})", self.label(sel), self.label(values));
        if numerical {
            let d = default.as_f64().filter(|_| !default.is_str()).ok_or_else(|| {
                self.err(id, "compile::default", format!("`{label}` averages numbers but its default {} is not a number", default.repr()))
                    .with_label("this aggregate")
                    .with_note("a numerical aggregate needs a numeric default")
            })?;
            let vv = self.view(values)?;
            let mut v = vec![];
            match &self.slots[vv.slot].enc {
                SlotEnc::Num { .. } => v.push(In::new(vv.slot, 0, 0, 1.0)),
                SlotEnc::Cat(_) => {
                    for (a, val) in self.view_values(&vv).into_iter().enumerate() {
                        let x = match val {
                            Some(Atom::Str(s)) => {
                                let numbers: Vec<String> = value_atoms.iter().flatten().filter(|a| !a.is_str()).take(4).map(Atom::repr).collect();
                                let mut e = self
                                    .err(id, "compile::mean", format!("`{label}` may average values that include the string {s:?}"))
                                    .with_label("this aggregate")
                                    .with_secondary(crate::names::place(self.g, values), "values defined here");
                                if !numbers.is_empty() {
                                    // (Review w24: a numeric default among strings, as the library
                                    // `sort`'s 0, was not named.)
                                    e = e.with_note(format!(
                                        "its values mix strings with numbers ({}; an aggregate's numeric default, such as the library `sort`'s 0, is one way to get them), so the compiler cannot rule out a mean; a string default (`aggregate(s, v, \"_\")`) keeps them strings",
                                        numbers.join(", ")
                                    ));
                                }
                                return Err(e);
                            }
                            Some(a) => a.as_f64().unwrap_or(0.0),
                            None => 0.0,
                        };
                        if x != 0.0 {
                            v.push(In::new(vv.slot, a, 0, x));
                        }
                    }
                }
            }
            if d != 0.0 {
                v.push(In::new(BOS, 0, 0, d));
            }
            let atoms = self.finite(id).ok();
            let pg = atoms.as_ref().and_then(|a| points_of(a));
            let s = self.new_slot(label.clone(), SlotEnc::Num { points: pg.as_ref().map(|p| p.0.clone()) }, vec![d]);
            if let Some((_, groups)) = pg {
                self.num_atoms.insert(s, groups);
            }
            let head = Head { width: (cols + 1).max(1), q, k, v, o: vec![Out::new(0, s, 0, 1.0)], gap: 0.5, qk_terms: cols };
            self.push_block(BlockKind::Head(head), s, what);
            if want_cat {
                return self.categorical_of(s, id);
            }
            return Ok(s);
        }
        // Categorical: a one-hot copy over {default} ∪ values.
        let mut outs = crate::infer::AtomSet::default();
        outs.insert(default.clone());
        let vv = self.cat_view(values)?;
        let vvals = self.view_values(&vv);
        for a in vvals.iter().flatten() {
            outs.insert(a.clone());
        }
        let outs: Vec<Atom> = outs.iter().cloned().collect();
        let m = outs.len();
        let mut v = vec![];
        for (a, val) in vvals.iter().enumerate() {
            if let Some(val) = val {
                let Some(j) = index_of(&outs, val) else { return Err(self.internal(id, "an aggregated value is missing")) };
                v.push(In::new(vv.slot, a, j, 1.0));
            }
        }
        let Some(di) = index_of(&outs, default) else { return Err(self.internal(id, "the default value is missing")) };
        v.push(In::new(BOS, 0, di, 1.0));
        let at_bos = (0..m).map(|j| (j == di) as u8 as f64).collect();
        // A value standing for floats the interpreter computes in its place (`cat_alts`: a
        // mean's 0.3 and 0.29999999999999993) still does in the copy (`shift`, a `==` select on
        // indices): the maps reading the copy must see them too.
        // A map of the slot that takes every float a dim stands for to one value (`round(f *
        // length)`: 13 and 12.999999999999998 to 13) copies no alternatives (it was refused as
        // aggregating "a map of numbers the interpreter may compute two ways"; helper w).
        let collapses = vv.map.is_some()
            && matches!(self.rep.get(&values), Some(Rep::Inline))
            && match (self.cat_alts.get(&vv.slot), self.leaf_list(values).as_slice()) {
                (Some(groups), [l]) if groups.len() == vvals.len() => {
                    groups.iter().zip(&vvals).all(|(g, x)| g.iter().all(|a| self.eval_inline(values, &HashMap::from([(*l, a.clone())])) == *x))
                }
                _ => false,
            };
        let alts = self
            .cat_alts
            .get(&vv.slot)
            .filter(|_| !collapses)
            .filter(|g| g.iter().any(|x| x.len() > 1))
            .map(|src| outs.iter().map(|o| src.iter().find(|g| g.first().is_some_and(|f| f.py_eq(o))).cloned().unwrap_or_else(|| vec![o.clone()])).collect::<Vec<_>>());
        if alts.is_some() && vv.map.is_some() {
            return Err(self
                .err(id, "compile::numeric_map", format!("`{label}` aggregates a map of numbers that the interpreter may compute two ways"))
                .with_label("this aggregate")
                .with_note(
                    "its values are floats that differ only by rounding, passed through a map a model cannot apply to both; round them first (`round(...)`), or compute with integers",
                ));
        }
        // The float a mean of copies of the one number gives stands with it (maps that tell
        // them apart, `str`, are then refused as for any number of two types).
        let alts = alts.or_else(|| {
            let (x, mean) = mean_of_one.as_ref().filter(|(x, mean)| x != mean)?;
            Some(outs.iter().map(|o| if o == x { vec![o.clone(), mean.clone()] } else { vec![o.clone()] }).collect())
        });
        let s = self.new_slot(label, SlotEnc::Cat(outs), at_bos);
        if let Some(groups) = alts {
            self.cat_alts.insert(s, groups);
            if self.same_input_alts.contains(&vv.slot) {
                self.same_input_alts.insert(s);
            }
        }
        let head = Head { width: (cols + 1).max(m), q, k, v, o: (0..m).map(|j| Out::new(j, s, j, 1.0)).collect(), gap: 0.5, qk_terms: cols };
        self.push_block(BlockKind::Head(head), s, what);
        Ok(s)
    }

    fn output_view(&mut self, root: NodeId) -> Result<OutputView, Diagnostic> {
        let v = self.view(root)?;
        match &self.slots[v.slot].enc {
            SlotEnc::Num { points } => Ok(OutputView { slot: v.slot, map: None, values: None, points: points.clone() }),
            SlotEnc::Cat(_) => {
                let per_dim = self.view_values(&v);
                let mut set = crate::infer::AtomSet::default();
                for a in per_dim.iter().flatten() {
                    set.insert(a.clone());
                }
                Ok(OutputView { slot: v.slot, map: Some(per_dim), values: Some(set.iter().cloned().collect()), points: None })
            }
        }
    }
}

/// The distinct rows, in order of first appearance, and each row's index among them: the
/// classes of a numerical side's values by the keys they select.
fn group_rows(rows: &[Vec<bool>]) -> (Vec<usize>, Vec<Vec<bool>>) {
    let mut reps: Vec<Vec<bool>> = vec![];
    let class_of = rows
        .iter()
        .map(|r| match reps.iter().position(|x| x == r) {
            Some(i) => i,
            None => {
                reps.push(r.clone());
                reps.len() - 1
            }
        })
        .collect();
    (class_of, reps)
}

/// An exact staircase MLP on a numerical slot: maps each of `points` (ascending) to the vector
/// `outputs[i]` over the dims of slot `out`. Between neighbouring points p < p' whose outputs
/// differ, two ReLUs make a ramp from 0 to 1 over the middle half of [p, p'], so the result is
/// exact at every point and tolerates input errors up to a quarter of the gap. Each ramp opens
/// towards the nearer end of the range, which keeps pre-activations (and f32 cancellation) small.
pub fn staircase(input: SlotId, points: &[f64], outputs: &[Vec<f64>], out: SlotId) -> Mlp {
    let dims = outputs.first().map_or(0, Vec::len);
    let mut mlp = Mlp { hidden: 0, w_in: vec![], b_in: vec![], w_out: vec![], gate: None };
    if points.is_empty() {
        return mlp;
    }
    let (lo, hi) = (points[0], points[points.len() - 1]);
    let mut constant = outputs[0].clone();
    let unit = |mlp: &mut Mlp, w: f64, b: f64, out_w: Vec<f64>| {
        let c = mlp.hidden;
        mlp.hidden += 1;
        mlp.w_in.push(In::new(input, 0, c, w));
        mlp.b_in.push(b);
        for (d, x) in out_w.into_iter().enumerate() {
            if x != 0.0 {
                mlp.w_out.push(Out::new(c, out, d, x));
            }
        }
    };
    for j in 1..points.len() {
        let delta: Vec<f64> = (0..dims).map(|d| outputs[j][d] - outputs[j - 1][d]).collect();
        if delta.iter().all(|&x| x == 0.0) {
            continue;
        }
        let t = (points[j - 1] + points[j]) / 2.0;
        let w = (points[j] - points[j - 1]) / 2.0;
        if (hi - t) <= (t - lo) {
            // up = relu((x-t)/w + 1/2) - relu((x-t)/w - 1/2)
            unit(&mut mlp, 1.0 / w, -t / w + 0.5, delta.clone());
            unit(&mut mlp, 1.0 / w, -t / w - 0.5, delta.iter().map(|x| -x).collect());
        } else {
            // down = relu((t-x)/w + 1/2) - relu((t-x)/w - 1/2) = 1 - up
            for d in 0..dims {
                constant[d] += delta[d];
            }
            unit(&mut mlp, -1.0 / w, t / w + 0.5, delta.iter().map(|x| -x).collect());
            unit(&mut mlp, -1.0 / w, t / w - 0.5, delta.clone());
        }
    }
    if constant.iter().any(|&x| x != 0.0) {
        let c = mlp.hidden;
        mlp.hidden += 1;
        mlp.w_in.push(In::new(TOK, 0, c, 1.0));
        mlp.b_in.push(0.0);
        for (d, x) in constant.into_iter().enumerate() {
            if x != 0.0 {
                mlp.w_out.push(Out::new(c, out, d, x));
            }
        }
    }
    mlp
}
