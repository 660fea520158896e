//! The compiler's intermediate form: residual *slots* and *blocks* (attention heads and MLPs)
//! described by sparse weight entries against slot dims. Offsets in the residual stream are
//! chosen later, by [`crate::emit`], so lowering never deals with absolute dims.

use raspc_lang::Atom;

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
}

/// `(slot, dim within slot, column, weight)`: a weight from a residual dim to a block column.
pub type In = (usize, usize, usize, f64);
/// `(column, slot, dim within slot, weight)`: a weight from a block column to a residual dim.
pub type Out = (usize, usize, usize, f64);

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
    pub reads: Vec<usize>,
    pub writes: usize,
    /// What it computes, for people: `aggregate(select(indices, opp, ==), tokens)`.
    pub what: String,
}

/// Bounds `(start, end, lo, hi)` of the input numbers at token positions `start..end`.
pub type BlockBounds = (usize, usize, f64, f64);

/// Slot index of the BOS indicator (1 at position 0 only).
pub const BOS: usize = 0;
/// Slot index of the token indicator (1 at every position but BOS).
pub const TOK: usize = 1;

/// Everything lowering produces.
#[derive(Clone, Debug)]
pub struct Plan {
    pub slots: Vec<Slot>,
    pub blocks: Vec<Block>,
    /// Slot of `tokens` and of `indices`, if created.
    pub tokens: Option<usize>,
    pub indices: Option<usize>,
    /// The output: a slot, and for a categorical slot the value each of its dims decodes to
    /// (a view through maps folded into the readout).
    pub output: OutputView,
    /// For numerical slots with a known finite set: the values as JSON atoms (for the layout).
    pub num_values: std::collections::BTreeMap<usize, Vec<serde_json::Value>>,
    /// The label of the compiled s-op.
    pub output_label: String,
    /// Slot dims the position embedding fills: (slot, dim, value per position, 0 = BOS).
    pub positional: Vec<(usize, usize, Vec<f64>)>,
    /// Slot dims the token embedding adds to: (slot, dim, value per vocabulary entry, in
    /// vocabulary order; BOS gets none).
    pub token_values: Vec<(usize, usize, Vec<f64>)>,
    /// Real-valued inputs: the slot holding the input number, the declared bounds, and
    /// narrower bounds for blocks of positions `(start, end, lo, hi)`.
    pub real_input: Option<(usize, f64, f64, Vec<BlockBounds>)>,
    /// Numerical output known to hold integers of this range (when too many to enumerate).
    pub output_ints: Option<(f64, f64)>,
    /// Numerical output: the certified bound on |model - program| (real-valued programs).
    pub output_bound: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct OutputView {
    pub slot: usize,
    /// For a categorical slot: per slot dim, the output value (None: unreachable).
    pub map: Option<Vec<Option<Atom>>>,
    /// The values the output can take, in readout order (categorical), or None (numerical).
    pub values: Option<Vec<Atom>>,
    /// Numerical outputs: the finite set of values, when known.
    pub points: Option<Vec<f64>>,
}
