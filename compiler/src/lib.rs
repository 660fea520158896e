//! raspc-compiler: program graph -> transformer weights.
//!
//! Stages (docs/architecture.md): [`infer`] (value sets) -> [`lower`] (support check,
//! encodings, heads and MLPs as [`plan`] blocks) -> [`emit::schedule`] (layers) ->
//! [`emit::emit`] (tensors, config, layout) -> `raspc_checkpoint` bytes.

pub mod cancel;
pub mod domain;
pub mod dump;
pub mod emit;
pub mod infer;
pub mod lower;
pub mod names;
pub mod numeric;
pub mod plan;
pub mod positional;
pub mod real;
pub mod simplify;

pub use lower::Options;
use raspc_checkpoint::Checkpoint;
use raspc_lang::{Atom, Diagnostic, Graph, NodeId, NodeKind};

/// Size figures of a compiled model, as `raspc compile` prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub layers: usize,
    pub heads: usize,
    pub d_model: usize,
    pub mlp_hidden: usize,
    /// Attention sublayers with at least one head / layers with an MLP.
    pub attn_sublayers: usize,
    pub mlp_sublayers: usize,
    pub params: usize,
    pub nonzero: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "layers {} ({} attention, {} MLP), heads {}, d_model {}, MLP hidden {}, params {}, nonzero {}",
            self.layers, self.attn_sublayers, self.mlp_sublayers, self.heads, self.d_model, self.mlp_hidden, self.params, self.nonzero
        )
    }
}

pub fn summarize(ck: &Checkpoint) -> Summary {
    let c = &ck.config;
    Summary {
        layers: c.layers.len(),
        heads: c.layers.iter().map(|l| l.heads.len()).sum(),
        d_model: c.d_model,
        mlp_hidden: c.layers.iter().filter_map(|l| l.mlp.as_ref().map(|m| m.hidden)).sum(),
        attn_sublayers: c.layers.iter().filter(|l| !l.heads.is_empty()).count(),
        mlp_sublayers: c.layers.iter().filter(|l| l.mlp.is_some()).count(),
        params: ck.tensors.values().map(|t| t.data.len()).sum(),
        nonzero: ck.tensors.values().map(|t| t.data.iter().filter(|&&x| x != 0.0).count()).sum(),
    }
}

/// Largest model emitted (dense f32 parameters): 400 M, i.e. 1.6 GB.
pub const MAX_PARAMS: usize = 400_000_000;

/// The compiler's parameter limit: [`MAX_PARAMS`], or the `params` budget when `RASPC_LIMITS`
/// sets one (the same name raises what the loaders accept).
pub fn params_cap() -> usize {
    let set = std::env::var(raspc_checkpoint::LIMITS_ENV).is_ok_and(|s| s.split(',').any(|kv| kv.trim().starts_with("params=")));
    match raspc_checkpoint::Limits::from_env() {
        Ok(l) if set => usize::try_from(l.max_params).unwrap_or(usize::MAX),
        _ => MAX_PARAMS,
    }
}

/// Dense parameter count of the checkpoint a plan and schedule would produce, without building it.
fn estimated_params(plan: &plan::Plan, sched: &emit::Schedule, opts: &Options) -> usize {
    let d = sched.d_model;
    let mut n = (opts.vocab.len() + 2 + opts.max_len + 1) * d + d * 16;
    for &b in sched.time.keys() {
        n = n.saturating_add(match &plan.blocks[b].kind {
            plan::BlockKind::Head(h) => 4 * d * h.width,
            plan::BlockKind::Mlp(m) => (2 + m.gate.is_some() as usize) * d * m.hidden + 2 * m.hidden + d,
        });
    }
    n
}

/// A compiled program.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub checkpoint: Checkpoint,
    /// Real-valued programs: the intervals and certified error bounds.
    pub report: Option<real::Report>,
    pub plan: plan::Plan,
    pub schedule: emit::Schedule,
    pub summary: Summary,
}

/// Names the output `name`. When the readout reads its slot unchanged (no view, or a view that
/// maps every dim to the slot's own value, like `round` of an integer s-op), the checkpoint
/// contract wants the layout entry to carry the output's label: the slot takes the name (a slot
/// that already holds it gets the slot's old label), except `tokens` and `indices`, which keep
/// theirs: a program whose output is an input read unchanged (`prog = tokens;`, `indices % 100`
/// at max-len 100) is named after that input.
fn rename_output(plan: &mut plan::Plan, name: &str) {
    let out = plan.output.slot;
    let unchanged = match (&plan.output.map, &plan.slots[out].enc) {
        (None, _) => true,
        (Some(per_dim), plan::SlotEnc::Cat(vals)) => per_dim.len() == vals.len() && per_dim.iter().zip(vals).all(|(p, a)| p.as_ref() == Some(a)),
        (Some(_), _) => false,
    };
    let input = Some(out) == plan.tokens || Some(out) == plan.indices;
    if unchanged && input {
        plan.output_label = plan.slots[out].label.clone();
        return;
    }
    if unchanged && plan.slots[out].label != name {
        let old = std::mem::replace(&mut plan.slots[out].label, name.to_string());
        if let Some(other) = plan.slots.iter_mut().enumerate().find(|(i, s)| *i != out.0 && s.label == name) {
            other.1.label = old;
        }
    }
    plan.output_label = name.to_string();
}

/// The user's name of a slot: a slot of the compiler's own (`m:categorical`) holds the s-op
/// before the colon.
fn user_name(label: &str) -> String {
    label.split(':').next().unwrap_or(label).to_string()
}

/// A value that is inf, NaN (a product past f64's range, inf - inf) or, as a number, past
/// f32's range: a checkpoint's JSON has no spelling for the first two, and a weight or an
/// activation would be inf. One-hot values are labels, not weights: only inf and NaN there.
fn non_finite_value(graph: &Graph, root: NodeId, plan: &plan::Plan) -> Option<Diagnostic> {
    let in_slots = plan.slots.iter().find_map(|slot| {
        let bad = match &slot.enc {
            plan::SlotEnc::Cat(values) => values.iter().find_map(|a| match a {
                Atom::Float(x) if !x.is_finite() => Some(*x),
                _ => None,
            }),
            plan::SlotEnc::Num { points: Some(p) } => p.iter().copied().find(|x| !x.is_finite() || x.abs() > f32::MAX as f64),
            plan::SlotEnc::Num { points: None } => None,
        };
        bad.map(|x| (user_name(&slot.label), x))
    });
    let in_output = || {
        plan.output.values.iter().flatten().find_map(|a| match a {
            Atom::Float(x) if !x.is_finite() => Some((plan.output_label.clone(), *x)),
            _ => None,
        })
    };
    let (name, x) = in_slots.or_else(in_output)?;
    let (who, span) = user_place(graph, root, &name);
    let what = if x.is_finite() { format!("{x:e}, past f32's range (about 3.4e38)") } else { format!("{x}") };
    Some(
        Diagnostic::error("compile::non_finite", format!("{who} can be {what}, which a model cannot hold"), span)
            .with_label("here")
            .with_note("weights and activations are finite f32 numbers; a vocabulary of smaller numbers (or a program that stays within f64's range) keeps every value finite"),
    )
}

/// A numerical slot whose values f32 cannot tell apart ([`emit::precision_problem`]), with the
/// advice that helps: a categorical encoding, except for a mean (attention computes it as a
/// number whatever its encoding) or an s-op already categorical.
fn precision_refusal(graph: &Graph, root: NodeId, simplified: Option<&(Graph, NodeId)>, plan: &plan::Plan, schedule: &emit::Schedule, opts: &Options) -> Option<Diagnostic> {
    if plan.output_bound.is_some() {
        return None;
    }
    // (A staircase problem: the rounding of many blocks adds up in what a staircase reads.)
    let (pp, added_up) = match emit::precision_problem(plan, schedule) {
        Some(pp) => (pp, false),
        None => (emit::staircase_problem(plan, schedule)?, true),
    };
    let node = graph.node(root);
    let name = user_name(&pp.label);
    let num = |x: f64| if x.fract() == 0.0 && x.abs() < 1e15 { format!("{x}") } else { format!("{x:.3e}") };
    // Named as the user knows it, where it is (`selector_width_8` is a name the compiler made
    // for `selector_width(smaller)`, which the caret then points at): helper t.
    let user_named = graph.ancestors(root).into_iter().any(|n| graph.node(n).label == name && graph.node(n).named);
    // (A node simplification made, `selector_width_8` of `target_pos = selector_width(a or b)`:
    // described and placed through the simplified graph, whose nodes keep the user's spans.)
    let made = simplified.and_then(|(g, r)| g.ancestors(*r).into_iter().find(|&n| g.node(n).label == name).map(|n| (names::describe(g, n), names::place(g, n))));
    let (who, span) = if user_named || name == node.label {
        (format!("`{name}`"), node.span)
    } else if let Some((who, span)) = made.filter(|(w, _)| !w.starts_with('`')) {
        (who, span)
    } else {
        user_place(graph, root, &name)
    };
    let this = if name == node.label {
        "this s-op".to_string()
    } else if user_named {
        format!("`{name}` feeds this s-op")
    } else {
        "this value".to_string()
    };
    // A mean: written by heads only. A slot that heads and MLPs both write is a sum of a mean
    // and other terms (`count(...) * 100000 + indicator(...)`, helpers sc23 and w23: told "is a
    // mean", which the user had not written).
    let head_writes = plan.blocks.iter().any(|b| matches!(&b.kind, plan::BlockKind::Head(h) if h.o.iter().any(|o| o.slot == pp.slot)));
    let mlp_writes = plan.blocks.iter().any(|b| matches!(&b.kind, plan::BlockKind::Mlp(m) if m.w_out.iter().any(|o| o.slot == pp.slot)));
    let mean = head_writes && !mlp_writes;
    // Two values a few ulps of f64 apart are one number the interpreter computes two ways
    // (7 and 7.000000000000001 from k/n·n): no encoding tells them apart, rounding merges them
    // (helper a6: `--encoding` was suggested, and then refused as too many combinations).
    let advice = if added_up {
        format!(
            "{who} adds up the outputs of many blocks (or reads others that do), each rounded in f32, and is then compared or looked up exactly; fewer or smaller terms, or a smaller --max-len (than {}), keep the rounding within reach",
            opts.max_len
        )
    } else if pp.gap <= 64.0 * f64::EPSILON * pp.magnitude.abs().max(1.0) {
        "the two values are one number computed two ways (they differ only by f64 rounding, as k/n·n does): round what it is computed from first (`round(...)`: a count from a mean, `round(frac * length)`), so that it is one value".to_string()
    } else if pp.label.ends_with(":inverse") {
        // selector_width (and `length`, a width) is read from the mean 1/(w+1).
        format!(
            "{who} is a selector width, which a head computes as the mean 1/(w+1): at --max-len {}, 1/(k+1) and 1/(k+2) for the largest k are closer together than f32 tells apart; a smaller --max-len compiles (widths up to 417 do)",
            opts.max_len
        )
    } else if head_writes && mlp_writes {
        format!("{who} adds a mean, which attention computes as a number whatever its encoding, to other terms, in one number: smaller numbers keep its values apart (a large factor on one term leaves f32 too few digits for the others; a term that is a fraction makes steps as small as that fraction)")
    } else if mean {
        format!("{who} is a mean, which attention computes as a number whatever its encoding, so no encoding avoids it; smaller numbers do (averaging `x - c` and adding `c` after, for a large common offset c, keeps the mean's own rounding small)")
    } else if opts.categorical.contains(&name) {
        format!("{who} is computed as a number before it is stored categorically, so no encoding avoids it; smaller or fewer distinct numbers do")
    } else if user_named || name == node.label {
        format!("smaller numbers keep them apart, or a categorical encoding (`--encoding {name}=categorical`) holds each value in a dim of its own")
    } else {
        "smaller numbers keep them apart, or a categorical encoding of the s-op that holds it (`--encoding NAME=categorical`, NAME bound to it with `NAME = ...;`) holds each value in a dim of its own".to_string()
    };
    Some(
        Diagnostic::error(
            "compile::precision",
            if added_up {
                format!(
                    "{who} may be off by more than f32 lets the model tell its values apart: its readers tell values {} apart, at magnitudes up to {}",
                    num(pp.gap),
                    num(pp.magnitude)
                )
            } else {
                format!("the values of {who} are too close together for f32: two of them are {} apart at magnitude {}", num(pp.gap), num(pp.magnitude))
            },
            span,
        )
        .with_label(this)
        .with_note(format!(
            "weights and activations are f32: the model holds them only to within about {}, and telling its values apart needs less than {}, so it would give a neighbouring value",
            num(pp.error),
            num(pp.tol)
        ))
        .with_note(advice),
    )
    .map(|d| {
        // The largest magnitude is an aggregate's default, larger than any value it averages
        // (helper w29: a first position defaulting to 99 at max-len 16; a default of 16 compiles).
        let default_at = graph.ancestors(root).into_iter().find_map(|n| match &graph.node(n).kind {
            NodeKind::Aggregate { default, .. } if default.as_f64().is_some_and(|x| x.abs() >= pp.magnitude.abs() && x.abs() > opts.max_len as f64) => Some((n, default)),
            _ => None,
        });
        match default_at {
            Some((n, default)) => d
                .with_secondary(names::place(graph, n), format!("the default {} sets the magnitude", default.repr()))
                .with_note(format!("a default nearer the values it stands beside (-1, or {}) keeps every magnitude smaller", opts.max_len)),
            None => d,
        }
    })
}

/// How to name the s-op a slot labelled `label` holds, and where: the node of `graph` (above
/// `root`) with that label, as the user knows it (`an expression in `prog``), or `root`'s place
/// when simplification renamed it away.
fn user_place(graph: &Graph, root: NodeId, label: &str) -> (String, raspc_lang::Span) {
    match graph.ancestors(root).into_iter().find(|&n| graph.node(n).label == label) {
        Some(n) => (names::describe(graph, n), names::place(graph, n)),
        None if graph.node(root).named => (format!("a value computed for `{}`", graph.node(root).label), graph.node(root).span),
        None => ("a value this program computes".to_string(), graph.node(root).span),
    }
}

/// A plan and, once asked for, its size: (layers, d_model, estimated parameters). Each
/// candidate is scheduled at most once however many comparisons it meets.
struct Candidate {
    plan: plan::Plan,
    /// The plan's schedule, computed once for both questions below.
    schedule: std::cell::OnceCell<emit::Schedule>,
    size: std::cell::OnceCell<(usize, usize, usize)>,
    sound: std::cell::OnceCell<bool>,
}

impl Candidate {
    fn new(plan: plan::Plan) -> Candidate {
        Candidate { plan, schedule: std::cell::OnceCell::new(), size: std::cell::OnceCell::new(), sound: std::cell::OnceCell::new() }
    }

    fn schedule(&self) -> &emit::Schedule {
        self.schedule.get_or_init(|| emit::schedule(&self.plan))
    }

    /// Whether every staircase over a grid of a number's values tolerates the error of what it
    /// reads ([`emit::staircase_problem`]), and f32 tells every numerical slot's values apart
    /// ([`emit::precision_problem`]): a plan that does not is kept only when no other plan does
    /// (review rv30c: a minimum of two large means as a relu was refused for precision, where
    /// the plan with a lookup compiled).
    fn sound(&self) -> bool {
        *self.sound.get_or_init(|| emit::staircase_problem(&self.plan, self.schedule()).is_none() && emit::precision_problem(&self.plan, self.schedule()).is_none())
    }

    /// (The estimate reads only the vocabulary and max-len of `opts`.)
    fn size(&self, opts: &Options) -> (usize, usize, usize) {
        *self.size.get_or_init(|| {
            let s = self.schedule();
            (s.layers, s.d_model, estimated_params(&self.plan, s, opts))
        })
    }
}

/// The candidate to compile among plans of one program: a sound plan ([`Candidate::sound`])
/// over any that is not, then the least `parameters · 4^layers` (estimated; a layer more is
/// worth it for a quarter of the parameters: a lookup over four widths saves a layer with 826 k
/// parameters where adding them first takes 54 k), then the fewest layers, the narrowest, and
/// the earliest. One rule over all candidates at once, so the choice does not depend on the
/// order they are compared in (review rv29a: pairwise choices kept 3 layers, d_model 193 and
/// 173,866 parameters over 2 layers, 40 and 150,397).
fn best<T>(cands: Vec<(Candidate, T)>, opts: &Options) -> Option<(Candidate, T)> {
    let any_sound = cands.iter().any(|(c, _)| c.sound());
    let cost = |c: &Candidate| {
        let (l, d, p) = c.size(opts);
        ((p as u128).saturating_mul(4u128.saturating_pow(l.min(60) as u32)), l, d, p)
    };
    // (`min_by_key` keeps the first of equal costs: the earliest.)
    cands.into_iter().filter(|(c, _)| c.sound() == any_sound).min_by_key(|(c, _)| cost(c))
}

/// The plan of a token program, and the simplified graph it was lowered from. Comparisons with
/// means of integers are rewritten onto the integer grid when enumerating them would take more
/// than 8,192 combinations; below that, the plans with every such comparison rewritten are
/// candidates too ([`best`]; Dyck-2 at max-len 64: 31.5 M parameters and 9 layers enumerating,
/// 6.8 M and 8 with the grid; Dyck-1 is a little smaller enumerating).
fn choose_plan(graph: &Graph, root: NodeId, opts: &Options) -> Result<(plan::Plan, Graph, NodeId), Vec<Diagnostic>> {
    let pinned: Vec<String> = opts.numerical.iter().chain(&opts.categorical).cloned().collect();
    let (simple, simple_root, inexact, grid_skipped) = simplify::simplify_choosing(graph, root, &opts.vocab, opts.max_len, false, &pinned);
    let first = plan_of(graph, root, &simple, simple_root, &inexact, opts);
    let (second, grid) = if grid_skipped {
        let (grid, grid_root, grid_inexact, _) = simplify::simplify_choosing(graph, root, &opts.vocab, opts.max_len, true, &pinned);
        (plan_of(graph, root, &grid, grid_root, &grid_inexact, opts).unwrap_or_default(), Some((grid, grid_root)))
    } else {
        (vec![], None)
    };
    let (mut cands, err): (Vec<(Candidate, bool)>, _) = match first {
        Ok(c) => (c.into_iter().map(|c| (c, false)).collect(), vec![]),
        Err(e) => (vec![], e),
    };
    cands.extend(second.into_iter().map(|c| (c, true)));
    match (best(cands, opts), grid) {
        (Some((c, true)), Some((grid, grid_root))) => Ok((c.plan, grid, grid_root)),
        (Some((c, _)), _) => Ok((c.plan, simple, simple_root)),
        (None, _) => Err(err),
    }
}

/// The simplified graph `compile` lowers for these options (what `raspc dump --stage
/// simplified` shows); the plain simplification when the program does not compile.
pub fn simplified(graph: &Graph, root: NodeId, opts: &Options) -> (Graph, NodeId) {
    match choose_plan(graph, root, opts) {
        Ok((_, g, r)) => (g, r),
        Err(_) => {
            let pinned: Vec<String> = opts.numerical.iter().chain(&opts.categorical).cloned().collect();
            simplify::simplify(graph, root, &opts.vocab, opts.max_len, &pinned)
        }
    }
}

/// The plans of a simplified graph (`simple`, from `graph`'s `root`) that [`best`] chooses
/// among: lowered as is, and, when that enumerated a sum it could add in a sum slot, lowered
/// with eager sums and lookup sums too ([`lower::Choices`]); each again with the entry's map
/// stored as one number. At least one candidate, or the plain lowering's errors.
fn plan_of(
    graph: &Graph,
    root: NodeId,
    simple: &Graph,
    simple_root: NodeId,
    inexact: &std::collections::HashMap<NodeId, Vec<Atom>>,
    opts: &Options,
) -> Result<Vec<Candidate>, Vec<Diagnostic>> {
    // An --encoding override may name an s-op that simplification rewrote away (a mean
    // that became a sum of widths, say): it has no slot of its own to encode any more,
    // so the override has nothing to act on; names the program never had stay errors.
    let labels = |g: &Graph, r: NodeId| -> std::collections::HashSet<String> { g.ancestors(r).into_iter().map(|id| g.node(id).label.clone()).collect() };
    let (before, after) = (labels(graph, root), labels(simple, simple_root));
    let gone = |name: &String| before.contains(name) && !after.contains(name);
    let mut o = opts.clone();
    o.numerical.retain(|n| !gone(n));
    o.categorical.retain(|n| !gone(n));
    // Sums of two s-ops enumerated up to 8,192 value combinations, or added in a sum slot from
    // 1,024 on (eager sums; Tracr's sort at max-len 64: 3.2 M parameters enumerating a 65 x 65
    // sum, 0.19 M adding it), and sums read by a large lookup added first (lookup sums, a
    // layer deeper): neither is better everywhere (a sum read one-hot can need a layer more).
    // The further lowerings only when an earlier one would lower something differently (or
    // the plain one failed).
    // Each cascade also says whether a long `and`/`or` was lowered as a threshold: then the
    // whole cascade runs again without (review rv30b: the threshold can cost a layer where a
    // lookup fuses the node into its reader, and the plan kept before was an eager-sums one).
    let cascade = |o: &Options| -> (Result<Vec<Candidate>, Vec<Diagnostic>>, (bool, bool)) {
        let lower = |o: &lower::Options| lower::lower_noting_choices(simple, simple_root, o, inexact);
        let mut cands = vec![];
        let (err, mut choices) = match lower(o) {
            Ok((p, c)) => {
                cands.push(Candidate::new(p));
                (None, c)
            }
            // (A failed lowering may have failed through a threshold or a relu: review rv30c, a
            // minimum of two large means refused for precision, which the lookup compiled.)
            Err(e) => (Some(e), lower::Choices { eager_sums: true, lookup_sums: false, logic_threshold: true, few_valued_products: true }),
        };
        let mut logic = choices.logic_threshold;
        let mut products = choices.few_valued_products;
        if choices.eager_sums
            && let Ok((p, c)) = lower(&lower::Options { eager_sums: true, ..o.clone() })
        {
            cands.push(Candidate::new(p));
            choices.lookup_sums |= c.lookup_sums;
            logic |= c.logic_threshold;
            products |= c.few_valued_products;
        }
        if choices.lookup_sums
            && let Ok((p, c)) = lower(&lower::Options { eager_sums: true, lookup_sums: true, ..o.clone() })
        {
            cands.push(Candidate::new(p));
            logic |= c.logic_threshold;
            products |= c.few_valued_products;
        }
        let result = match err {
            // Refused with the product of a mean and `length`: the lookup over both instead.
            Some(e) if cands.is_empty() && !o.no_length_product => {
                lower::lower_noting(simple, simple_root, &lower::Options { no_length_product: true, ..o.clone() }, inexact).map(|p| vec![Candidate::new(p)]).map_err(|_| e)
            }
            Some(e) if cands.is_empty() => Err(e),
            _ => Ok(cands),
        };
        (result, (logic, products && !o.few_valued_products))
    };
    // Each cascade also says whether a conditional of a few-valued number was left to a lookup:
    // then a cascade with products for it runs too.
    let lowered = |o: &Options| -> Result<Vec<Candidate>, Vec<Diagnostic>> {
        let (mut all, (logic, products)) = cascade(o);
        let mut more = |o: lower::Options| {
            let (next, _) = cascade(&o);
            all = match (std::mem::replace(&mut all, Ok(vec![])), next) {
                (Ok(mut a), Ok(b)) => {
                    a.extend(b);
                    Ok(a)
                }
                (Ok(a), Err(_)) => Ok(a),
                (Err(_), Ok(b)) => Ok(b),
                (Err(e), Err(_)) => Err(e),
            };
        };
        if logic {
            more(lower::Options { no_logic_threshold: true, ..o.clone() });
        }
        if products {
            more(lower::Options { few_valued_products: true, ..o.clone() });
        }
        all
    };
    let first = lowered(&o);
    // A map's result read out as one number instead of one dim per value, when that is no
    // larger (or the only way that compiles) and f32 holds its values apart: `x * ((indices +
    // 1) / length)` at max-len 16 lists 1,673 fractions (28.5 M parameters read out one-hot,
    // 2.7 M as a number), and at 64 the floats of `x * (indices + 1) / length` that differ only
    // by rounding are one value as a number but two dims one-hot (refused; 1.9 M now).
    let Some(numerical) = numerical_output(simple, simple_root, &o, inexact) else { return first };
    let second: Vec<Candidate> = lowered(&numerical).unwrap_or_default().into_iter().filter(|c| emit::precision_problem(&c.plan, c.schedule()).is_none() && c.sound()).collect();
    match first {
        Ok(mut a) => {
            a.extend(second);
            Ok(a)
        }
        Err(_) if !second.is_empty() => Ok(second),
        Err(e) => Err(e),
    }
}

/// `opts` with the entry's map stored as a number, where that may be tried: the entry is a map
/// the options leave to the compiler, and its values are numbers (not booleans or strings) with
/// no integer and float of the same value (`2` and `2.0`, which one number cannot tell apart
/// and a one-hot readout does).
fn numerical_output(g: &Graph, root: NodeId, opts: &Options, inexact: &std::collections::HashMap<NodeId, Vec<Atom>>) -> Option<Options> {
    let label = &g.node(root).label;
    if !matches!(g.node(root).kind, NodeKind::Map { .. }) || opts.numerical.contains(label) || opts.categorical.contains(label) || opts.real.is_some() {
        return None;
    }
    let (sets, _) = crate::infer::infer_seeded(g, root, &opts.vocab, opts.max_len, inexact);
    let Some(infer::ValueSet::Finite(set)) = sets.get(&root) else { return None };
    // (One number per value: an integer and a float of it, or 0.0 and -0.0, would print as one.)
    let mut seen: std::collections::HashMap<u64, (bool, bool)> = std::collections::HashMap::new();
    for a in set.iter() {
        let (x, int) = match a {
            Atom::Int(i) => (*i as f64, true),
            Atom::Float(x) => (*x, false),
            _ => return None,
        };
        let key = if x == 0.0 { 0 } else { x.to_bits() };
        if *seen.entry(key).or_insert((int, x.is_sign_negative())) != (int, x.is_sign_negative()) {
            return None;
        }
    }
    let mut o = opts.clone();
    o.numerical.insert(label.clone());
    Some(o)
}

/// Compiles the s-op `root` of `graph`. `program_hash` identifies the source (recorded in the
/// checkpoint). Every problem found is returned at once.
pub fn compile(graph: &Graph, root: NodeId, opts: &Options, program_hash: &str) -> Result<Compiled, Vec<Diagnostic>> {
    compile_reporting(graph, root, opts, program_hash).map_err(|mut ds| {
        // One problem met through several paths (a host loop builds the same refused s-op once
        // per iteration: helper w29 got 15 identical `compile::causal` errors) is said once.
        let mut seen: Vec<Diagnostic> = vec![];
        ds.retain(|d| {
            let new = !seen.contains(d);
            if new {
                seen.push(d.clone());
            }
            new
        });
        ds
    })
}

fn compile_reporting(graph: &Graph, root: NodeId, opts: &Options, program_hash: &str) -> Result<Compiled, Vec<Diagnostic>> {
    let mut simplified: Option<(Graph, NodeId)> = None;
    let (plan, report) = match &opts.real {
        Some(_) if opts.causal => {
            let node = graph.node(root);
            return Err(vec![Diagnostic::error("compile::causal", "--causal is not supported with real-valued inputs (--input-bounds)", node.span)
                .with_label("compiled here")
                .with_note("real-valued programs compile for full sequences; drop --causal")]);
        }
        Some(r) => {
            let (p, rep) = real::lower(graph, root, opts.max_len, r)?;
            (p, Some(rep))
        }
        None => {
            domain::check(graph, root, &opts.vocab, opts.max_len).map_err(|d| vec![d])?;
            let (plan, simple, simple_root) = choose_plan(graph, root, opts)?;
            simplified = Some((simple, simple_root));
            (plan, None)
        }
    };
    // The output is named after the entry as the caller's graph labels it (the user's name),
    // not after whatever node simplification left at the root (`sequencemap_5`).
    let mut plan = plan;
    rename_output(&mut plan, &graph.node(root).label);
    if let Some(d) = non_finite_value(graph, root, &plan) {
        return Err(vec![d]);
    }
    let problems = plan.verify();
    if !problems.is_empty() {
        let node = graph.node(root);
        return Err(vec![Diagnostic::error(
            "compile::internal",
            format!("internal error: the plan for `{}` is inconsistent (this is a bug in raspc; please report it with the program)", node.label),
            node.span,
        )
        .with_note(problems.join("\n"))]);
    }
    let schedule = emit::schedule(&plan);
    let params = estimated_params(&plan, &schedule, opts);
    let cap = params_cap();
    if params > cap {
        let node = graph.node(root);
        return Err(vec![Diagnostic::error(
            "compile::too_large",
            format!("the model for `{}` would have about {params} parameters (the limit is {cap})", node.label),
            node.span,
        )
        .with_label("this s-op")
        .with_note(format!("d_model would be {}; a smaller --max-len or vocabulary shrinks the one-hot encodings", schedule.d_model))
        .with_note("the limit keeps a compile within memory (dense f32 tensors); `RASPC_LIMITS=params=N` raises it with the loaders' budget of the same name (docs/checkpoint-format.md, \"Budgets\")")]);
    }
    if let Some(d) = precision_refusal(graph, root, simplified.as_ref(), &plan, &schedule, opts) {
        return Err(vec![d]);
    }
    let inputs = emit::EmitInputs { vocab: &opts.vocab, max_len: opts.max_len, causal: opts.causal, program_hash: program_hash.to_string() };
    let checkpoint = emit::emit(&plan, &schedule, &inputs).map_err(|e| {
        let node = graph.node(root);
        vec![Diagnostic::error(
            "compile::internal",
            format!("internal error while emitting `{}`: {e} (this is a bug in raspc; please report it with the program)", node.label),
            node.span,
        )]
    })?;
    if let Err(e) = checkpoint.validate() {
        let node = graph.node(root);
        // Weights beyond f32 (or the loaders' budget) come from extreme real-valued bounds;
        // anything else the checkpoint's own checks refuse is a bug of the compiler's.
        return Err(vec![match e {
            raspc_checkpoint::CheckpointError::OverBudget { .. } => {
                Diagnostic::error("compile::too_large", format!("the checkpoint for `{}` would not load: {e}", node.label), node.span)
                    .with_label("this s-op")
                    .with_note("the budgets bound what a loader accepts (docs/checkpoint-format.md, \"Budgets\"): a smaller vocabulary, --max-len or shorter tokens and names fit them")
            }
            raspc_checkpoint::CheckpointError::NonFinite { .. } | raspc_checkpoint::CheckpointError::WeightTooLarge { .. } => Diagnostic::error(
                "compile::too_large",
                format!("the weights for `{}` do not fit in f32: {e}", node.label),
                node.span,
            )
            .with_label("this s-op")
            .with_note(if opts.real.is_some() {
                "narrower --input-bounds keep every weight finite and within the loaders' budget (RASPC_LIMITS)"
            } else {
                "the program's values set the weights: smaller numbers in --vocab (or scaled down in the program) keep every weight finite and within the loaders' budget (RASPC_LIMITS)"
            }),
            _ => Diagnostic::error(
                "compile::internal",
                format!("internal error: the checkpoint for `{}` fails its own checks: {e} (this is a bug in raspc; please report it with the program)", node.label),
                node.span,
            ),
        }]);
    }
    let summary = summarize(&checkpoint);
    Ok(Compiled { checkpoint, report, plan, schedule, summary })
}
