//! The compiler's intermediate form: residual *slots* and *blocks* (attention heads and MLPs)
//! described by sparse weight entries against slot dims. Offsets in the residual stream are
//! chosen later, by [`crate::emit`], so lowering never deals with absolute dims.

use raspc_lang::Atom;

/// The id of a residual slot: its index in [`Plan::slots`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotId(pub usize);

impl std::fmt::Display for SlotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The id of a block (attention head or MLP): its index in [`Plan::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub usize);

impl std::fmt::Display for BlockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Index<BlockId> for Vec<Block> {
    type Output = Block;
    fn index(&self, b: BlockId) -> &Block {
        &self[b.0]
    }
}

impl std::ops::IndexMut<BlockId> for Vec<Block> {
    fn index_mut(&mut self, b: BlockId) -> &mut Block {
        &mut self[b.0]
    }
}

impl std::ops::Index<SlotId> for Vec<Slot> {
    type Output = Slot;
    fn index(&self, s: SlotId) -> &Slot {
        &self[s.0]
    }
}

impl std::ops::IndexMut<SlotId> for Vec<Slot> {
    fn index_mut(&mut self, s: SlotId) -> &mut Slot {
        &mut self[s.0]
    }
}

/// How a slot holds its s-op.
#[derive(Clone, Debug, PartialEq)]
pub enum SlotEnc {
    /// One dim per value, one-hot.
    Cat(Vec<Atom>),
    /// One dim holding a number; `points` is the finite set of values it can hold, when known
    /// (sorted ascending, distinct).
    Num { points: Option<Vec<f64>> },
}

impl SlotEnc {
    pub fn dims(&self) -> usize {
        match self {
            SlotEnc::Cat(v) => v.len(),
            SlotEnc::Num { .. } => 1,
        }
    }
}

/// A region of the residual stream holding one s-op (or a helper value).
#[derive(Clone, Debug)]
pub struct Slot {
    pub label: String,
    pub enc: SlotEnc,
    /// The vector this slot holds at the BOS position, known at compile time. Readers subtract
    /// it (through the BOS dim), so every block sees zeros at BOS. Empty for the two special
    /// slots, which are never compensated.
    pub at_bos: Vec<f64>,
    /// A categorical slot whose dims are 0 or 1 each on their own (a set of its values, not one
    /// of them): written to the layout as `multi_hot`. Only real-valued heads' `.unselected`
    /// helpers (which key groups a query leaves out).
    pub multi_hot: bool,
}

/// A weight `w` from dim `dim` of residual slot `slot` to column `col` of a block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct In {
    pub slot: SlotId,
    pub dim: usize,
    pub col: usize,
    pub w: f64,
}

impl In {
    pub fn new(slot: SlotId, dim: usize, col: usize, w: f64) -> Self {
        In { slot, dim, col, w }
    }
}

/// A weight `w` from column `col` of a block to dim `dim` of residual slot `slot`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Out {
    pub col: usize,
    pub slot: SlotId,
    pub dim: usize,
    pub w: f64,
}

impl Out {
    pub fn new(col: usize, slot: SlotId, dim: usize, w: f64) -> Self {
        Out { col, slot, dim, w }
    }
}

#[derive(Clone, Debug)]
pub struct Head {
    pub width: usize,
    pub q: Vec<In>,
    pub k: Vec<In>,
    pub v: Vec<In>,
    pub o: Vec<Out>,
    /// Smallest score difference between an attended key and an unattended one.
    pub gap: f64,
    /// Columns of the query/key product that carry selector terms (for the soft-attention bound).
    pub qk_terms: usize,
}

#[derive(Clone, Debug)]
pub struct Mlp {
    pub hidden: usize,
    pub w_in: Vec<In>,
    pub b_in: Vec<f64>,
    pub w_out: Vec<Out>,
    /// Gated (ReGLU) units: hidden = ReLU(w_in·x + b_in) ⊙ (gate·x + b_gate). None: plain ReLU.
    pub gate: Option<Gate>,
}

/// The second factor of gated MLP units.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    pub w: Vec<In>,
    pub b: Vec<f64>,
}

#[derive(Clone, Debug)]
pub enum BlockKind {
    Head(Head),
    Mlp(Mlp),
}

/// One attention head or one MLP: reads some slots, writes one.
#[derive(Clone, Debug)]
pub struct Block {
    pub kind: BlockKind,
    pub reads: Vec<SlotId>,
    pub writes: SlotId,
    /// What it computes, for people: `aggregate(select(indices, opp, ==), tokens)`.
    pub what: String,
}

/// One embedding row: what an embedding adds to dim `dim` of slot `slot`, per position (0 =
/// BOS) for the position embedding, per vocabulary entry (in vocabulary order; BOS gets none)
/// for the token embedding.
#[derive(Clone, Debug)]
pub struct EmbedRow {
    pub slot: SlotId,
    pub dim: usize,
    pub values: Vec<f64>,
}

/// A real-valued input: the slot holding the input number, its declared bounds `[lo, hi]`,
/// and narrower bounds for blocks of token positions.
#[derive(Clone, Debug)]
pub struct RealInput {
    pub slot: SlotId,
    pub lo: f64,
    pub hi: f64,
    pub blocks: Vec<BlockBounds>,
}

/// Bounds `(start, end, lo, hi)` of the input numbers at token positions `start..end`.
pub type BlockBounds = (usize, usize, f64, f64);

/// Slot index of the BOS indicator (1 at position 0 only).
pub const BOS: SlotId = SlotId(0);
/// Slot index of the token indicator (1 at every position but BOS).
pub const TOK: SlotId = SlotId(1);

/// Everything lowering produces.
#[derive(Clone, Debug)]
pub struct Plan {
    pub slots: Vec<Slot>,
    pub blocks: Vec<Block>,
    /// Slot of `tokens` and of `indices`, if created.
    pub tokens: Option<SlotId>,
    pub indices: Option<SlotId>,
    /// The output: a slot, and for a categorical slot the value each of its dims decodes to
    /// (a view through maps folded into the readout).
    pub output: OutputView,
    /// For numerical slots with a known finite set: the values as JSON atoms (for the layout).
    pub num_values: std::collections::BTreeMap<SlotId, Vec<serde_json::Value>>,
    /// The label of the compiled s-op.
    pub output_label: String,
    /// Slot dims the position embedding fills: one value per position, 0 = BOS.
    pub positional: Vec<EmbedRow>,
    /// Slot dims the token embedding adds to: one value per vocabulary entry, in vocabulary
    /// order (BOS gets none).
    pub token_values: Vec<EmbedRow>,
    /// Real-valued inputs: the input number's slot and bounds.
    pub real_input: Option<RealInput>,
    /// Numerical output known to hold integers of this range (when too many to enumerate).
    pub output_ints: Option<(f64, f64)>,
    /// Numerical output: the certified bound on |model - program| (real-valued programs).
    pub output_bound: Option<f64>,
    /// Numerical slots that staircases read, over their finite set of values or over a grid of
    /// the values they can take (means of integers): (smallest gap between neighbouring values
    /// a step lies between, largest magnitude). Their error, f32 rounding included, must stay
    /// within a quarter of that gap.
    pub grid_reads: std::collections::BTreeMap<SlotId, (f64, f64)>,
    /// Numerical values stored as partial sums: a slot, and the further slots whose numbers
    /// add to its own (the checkpoint layout lists them as the entry's `parts`).
    pub parts: std::collections::BTreeMap<SlotId, Vec<SlotId>>,
    /// The longest input (positions after BOS): a head averages at most max_len + 1 values.
    pub max_len: usize,
}

#[derive(Clone, Debug)]
pub struct OutputView {
    pub slot: SlotId,
    /// For a categorical slot: per slot dim, the output value (None: unreachable).
    pub map: Option<Vec<Option<Atom>>>,
    /// The values the output can take, in readout order (categorical), or None (numerical).
    pub values: Option<Vec<Atom>>,
    /// Numerical outputs: the finite set of values, when known.
    pub points: Option<Vec<f64>>,
}

impl Plan {
    /// Checks the plan's internal consistency between lowering and emission: every weight
    /// entry names an existing slot, a dim inside it and a column inside its block; every slot
    /// a block's weights read is among its `reads`; its outputs write its own slot (`writes`,
    /// owned by it alone) or add into sum slots (slots no block owns); blocks read only slots
    /// every writer of which comes earlier (or the embeddings), so the plan is acyclic; BOS
    /// vectors, positional and token-embedding rows and the output view fit their slots.
    /// Returns every violation found (empty: consistent).
    pub fn verify(&self) -> Vec<String> {
        let mut errs = vec![];
        let n = self.slots.len();
        for (i, s) in self.slots.iter().enumerate() {
            if i > TOK.0 && s.at_bos.len() != s.enc.dims() {
                errs.push(format!("slot {i} `{}`: BOS vector has {} entries for {} dims", s.label, s.at_bos.len(), s.enc.dims()));
            }
        }
        let dim_ok = |slot: SlotId, dim: usize| slot.0 < n && dim < self.slots[slot].enc.dims();
        // Each slot has at most one owner (the block that `writes` it). A slot no block owns
        // may be a *sum slot*: blocks add their contributions into it through output entries.
        let mut owner: Vec<Option<usize>> = vec![None; n];
        for (b, block) in self.blocks.iter().enumerate() {
            if block.writes.0 >= n {
                errs.push(format!("block {b} `{}` writes slot {} of {n}", block.what, block.writes));
                continue;
            }
            if let Some(w) = owner[block.writes.0] {
                errs.push(format!("slot {} `{}` is owned by blocks {w} and {b}", block.writes, self.slots[block.writes].label));
            }
            owner[block.writes.0] = Some(b);
        }
        // The last block writing each slot (owner or adder).
        let mut last_writer: Vec<Option<usize>> = vec![None; n];
        for (b, block) in self.blocks.iter().enumerate() {
            let outs = match &block.kind {
                BlockKind::Head(h) => &h.o,
                BlockKind::Mlp(m) => &m.w_out,
            };
            for t in outs.iter().map(|o| o.slot).chain(std::iter::once(block.writes)).filter(|&t| t.0 < n) {
                last_writer[t.0] = Some(b);
            }
        }
        for (b, block) in self.blocks.iter().enumerate() {
            let what = &block.what;
            let mut check_in = |ins: &[In], cols: usize, part: &str| {
                for &In { slot, dim, col, w } in ins {
                    if !dim_ok(slot, dim) {
                        errs.push(format!("block {b} `{what}` {part}: slot {slot} dim {dim} does not exist"));
                    } else if slot > TOK && !block.reads.contains(&slot) {
                        errs.push(format!("block {b} `{what}` {part}: reads slot {slot} `{}` not listed in its reads", self.slots[slot].label));
                    }
                    if col >= cols {
                        errs.push(format!("block {b} `{what}` {part}: column {col} of {cols}"));
                    }
                    if !w.is_finite() {
                        errs.push(format!("block {b} `{what}` {part}: weight {w}"));
                    }
                }
            };
            let (outs, cols) = match &block.kind {
                BlockKind::Head(h) => {
                    check_in(&h.q, h.width, "query");
                    check_in(&h.k, h.width, "key");
                    check_in(&h.v, h.width, "value");
                    (&h.o, h.width)
                }
                BlockKind::Mlp(m) => {
                    check_in(&m.w_in, m.hidden, "input");
                    if let Some(g) = &m.gate {
                        check_in(&g.w, m.hidden, "gate");
                        if g.b.len() != m.hidden {
                            errs.push(format!("block {b} `{what}`: {} gate biases for {} units", g.b.len(), m.hidden));
                        }
                    }
                    if m.b_in.len() != m.hidden {
                        errs.push(format!("block {b} `{what}`: {} biases for {} units", m.b_in.len(), m.hidden));
                    }
                    (&m.w_out, m.hidden)
                }
            };
            for &Out { col, slot, dim, w } in outs {
                let target_ok = slot == block.writes || (slot.0 < n && owner[slot.0].is_none());
                if col >= cols || !dim_ok(slot, dim) || !target_ok || !w.is_finite() {
                    errs.push(format!(
                        "block {b} `{what}` output: column {col} -> slot {slot} dim {dim} (weight {w}); the block owns slot {}, and may add only into slots no block owns",
                        block.writes
                    ));
                }
            }
            for &r in &block.reads {
                if r.0 >= n {
                    errs.push(format!("block {b} `{what}` reads slot {r} of {n}"));
                } else if let Some(w) = last_writer[r.0]
                    && w >= b
                {
                    errs.push(format!("block {b} `{what}` reads slot {r} `{}`, written by the later block {w}", self.slots[r].label));
                }
            }
        }
        for EmbedRow { slot, dim, values: rows } in &self.token_values {
            if !dim_ok(*slot, *dim) {
                errs.push(format!("token-embedding entry for slot {slot} dim {dim} does not exist"));
            } else if rows.iter().any(|x| !x.is_finite()) {
                errs.push(format!("token-embedding entry for slot {slot} `{}` is not finite", self.slots[*slot].label));
            }
        }
        for EmbedRow { slot, dim, values: rows } in &self.positional {
            if !dim_ok(*slot, *dim) {
                errs.push(format!("positional entry for slot {slot} dim {dim} does not exist"));
            } else if rows.iter().any(|x| !x.is_finite()) {
                errs.push(format!("positional entry for slot {slot} `{}` is not finite", self.slots[*slot].label));
            }
        }
        let out = &self.output;
        if out.slot.0 >= n {
            errs.push(format!("output slot {} of {n}", out.slot));
        } else if let Some(map) = &out.map
            && map.len() != self.slots[out.slot].enc.dims()
        {
            errs.push(format!("output view has {} entries for {} dims of `{}`", map.len(), self.slots[out.slot].enc.dims(), self.slots[out.slot].label));
        }
        errs
    }
}
