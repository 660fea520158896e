//! The command line's argument types (clap) and the parsing and checking of flag values.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "raspc", version, about = "Compile RASP programs to transformer weights, and run them")]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate a RASP program on one input with the reference interpreter.
    Eval {
        /// The program (.rasp).
        program: PathBuf,
        /// The s-op or selector to evaluate (default: `prog`, else the last s-op or selector assigned).
        #[arg(long)]
        entry: Option<String>,
        /// A JSON array (`[1,2,3]`, `["a","b"]`) or a plain string split into characters.
        #[arg(long, allow_hyphen_values = true)]
        input: String,
        /// Print exactly one line: `{"output": [...]}`, or `{"error": {...}}` (exit status 1 or 2)
        /// when it fails.
        #[arg(long)]
        json: bool,
        /// What a model compiled with `--causal` outputs: at each position i, the program's value
        /// at i on the prefix ending at i.
        #[arg(long)]
        causal: bool,
    },
    /// Compile a program to a transformer checkpoint (.safetensors).
    Compile {
        /// The program (.rasp).
        program: PathBuf,
        /// What to compile.
        #[command(flatten)]
        target: Target,
        /// Where to write the checkpoint (`--output` is accepted too).
        #[arg(short = 'o', long = "out", alias = "output")]
        output: PathBuf,
        /// Also replace an existing raspc checkpoint this raspc cannot read (another version, or
        /// damaged). Files that are not raspc checkpoints are never replaced.
        #[arg(long)]
        force: bool,
        /// Real-valued programs: also print every materialised s-op's interval and certified error.
        #[arg(long)]
        bounds: bool,
        /// Print one JSON object (what was compiled, where, its size and certified bounds) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a compiled checkpoint on one input.
    Run {
        /// The checkpoint (.safetensors) to run.
        model: PathBuf,
        /// Same conventions as `raspc eval --input`; BOS is added and removed by raspc.
        #[arg(long, allow_hyphen_values = true)]
        input: String,
        /// Print exactly one line: `{"output": [...]}`, or `{"error": {...}}` (exit status 1 or 2)
        /// when it fails.
        #[arg(long)]
        json: bool,
        /// Attention semantics: hard (the compiled semantics) or soft (softmax with the checkpoint's β).
        #[arg(long, value_enum, default_value = "hard")]
        attention: AttentionArg,
        /// cpu, or cuda (builds with the `cuda` feature).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
        device: String,
    },
    /// Compile, then compare the model with the interpreter on many inputs.
    Verify {
        /// The program (.rasp).
        program: PathBuf,
        /// What to compile.
        #[command(flatten)]
        target: Target,
        /// Every input up to --max-len (at most 2,000,000 inputs; past that, --samples).
        #[arg(long, conflicts_with = "samples")]
        exhaustive: bool,
        /// Number of random inputs (lengths uniform in 1..=max-len; 1000 when neither this nor
        /// --exhaustive is given). When there are no more inputs than this, every one is
        /// checked once instead.
        #[arg(long)]
        samples: Option<usize>,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Which attention semantics to check: hard, soft or both.
        #[arg(long, value_enum, default_value = "both")]
        attention: AttentionModes,
        /// Succeed even when the interpreter rejects some of the inputs (they are counted and
        /// not checked); without it, verify fails unless every input asked for was checked.
        #[arg(long)]
        allow_rejected: bool,
        /// Print one JSON object (counts per attention mode, mismatches, rejections, verdict) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show what a checkpoint holds: config, residual layout, every head and MLP; or one block's
    /// matrices with labelled rows and columns.
    Inspect {
        /// The checkpoint (.safetensors) to inspect.
        model: PathBuf,
        /// Print JSON instead of text: one object for the whole model, an array of matrices for one block (--layer with --head or --mlp).
        #[arg(long)]
        json: bool,
        /// Show the matrices of one block of this layer (with --head or --mlp).
        #[arg(long)]
        layer: Option<usize>,
        /// Show this head's W_Q, W_K, W_V and W_O (with --layer).
        #[arg(long, requires = "layer", conflicts_with = "mlp")]
        head: Option<usize>,
        /// Show the MLP's weights and biases (with --layer).
        #[arg(long, requires = "layer")]
        mlp: bool,
    },
    /// Draw heatmaps (PNG, or SVG with --format svg) of every head's QK and OV circuits and every MLP, plus an overview.
    Plot {
        /// The checkpoint (.safetensors) to draw.
        model: PathBuf,
        /// Directory for the figures (created if needed; `--output` is accepted too).
        #[arg(short = 'o', long, alias = "output")]
        out: PathBuf,
        /// File format of the figures.
        #[arg(long, value_enum, default_value = "png")]
        format: PlotFormat,
        /// Symmetric-log colour scale, so small weights show next to large ones.
        #[arg(long)]
        symlog: bool,
        /// Print one JSON object (`{"files": [...], "stale": [...]}`: the figures written, and the
        /// figures an earlier plot (of any model, in either format) left in the folder that this
        /// run did not replace) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a checkpoint in another format: `--to onnx` (an ONNX graph; docs/checkpoint-format.md, "ONNX export").
    Export {
        /// The checkpoint (.safetensors) to convert.
        model: PathBuf,
        /// The format to write.
        #[arg(long, value_enum)]
        to: ExportFormat,
        /// The file to write (`--output` is accepted too).
        #[arg(short = 'o', long = "out", alias = "output")]
        output: PathBuf,
        /// Attention baked into the graph (default: soft, or hard for a real-valued model,
        /// whose certified bound holds for hard attention only).
        #[arg(long, value_enum)]
        attention: Option<AttentionArg>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Probes of a model's attention (docs/svflow.md).
    Probe {
        /// Which probe.
        #[command(subcommand)]
        kind: ProbeKind,
    },
    /// Run a checkpoint and decode every s-op in the residual stream after every sublayer;
    /// with --program, compare each with the interpreter and mark the first divergence.
    Trace {
        /// The checkpoint (.safetensors) to trace.
        model: PathBuf,
        /// Same conventions as `raspc eval --input`.
        #[arg(long, allow_hyphen_values = true)]
        input: String,
        /// The program the model was compiled from.
        #[arg(long)]
        program: Option<PathBuf>,
        /// The s-op of --program the model computes (default as in `eval`).
        #[arg(long, requires = "program")]
        entry: Option<String>,
        /// Attention semantics: hard or soft.
        #[arg(long, value_enum, default_value = "hard")]
        attention: AttentionArg,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Build the universal simulator U for the given shapes (docs/universal-simulator.md),
    /// compile it, run it on random attention layers T and inputs X, and compare U(<T,X>)
    /// with T(X) = softmax(X A Xᵀ) X V computed directly (candle, f64).
    Simulate {
        /// Rows of X (sequence length of the simulated attention).
        #[arg(long, default_value_t = 2)]
        n: usize,
        /// Columns of X (model width).
        #[arg(long, default_value_t = 2)]
        d: usize,
        /// Columns of V.
        #[arg(long, default_value_t = 2)]
        dv: usize,
        /// Number of heads.
        #[arg(long, default_value_t = 1)]
        heads: usize,
        /// MLPs of U: gated (ReGLU, products exact) or relu (piecewise-linear products).
        #[arg(long, value_enum, default_value = "gated")]
        mlp: MlpArg,
        /// Random instances to check (at least 1).
        #[arg(long, default_value_t = 100)]
        trials: usize,
        /// Seed of the random attention layers and inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Entries of X, A and V are uniform in [-B, B]; U is certified for inputs in [-B, B]
        /// (default: 1). With --target: the bound for A and V (default: their own largest entries).
        #[arg(long)]
        bound: Option<f64>,
        /// Entries of X in [-BX, BX] instead (A and V keep --bound); U is certified per block.
        /// With --target: the bound for X (default: its largest entry).
        #[arg(long = "x-bound")]
        x_bound: Option<f64>,
        /// Gated MLPs: largest relative error allowed (max|U - T| / max|T| per trial).
        #[arg(long, default_value_t = 1e-4)]
        tolerance: f64,
        /// Arithmetic of U's forward pass (the certified bound is for this precision).
        #[arg(long, value_enum, default_value = "f64")]
        dtype: DtypeArg,
        /// Interpolation error per piecewise-linear function (default: automatic).
        #[arg(long = "pl-error")]
        pl_error: Option<f64>,
        /// Write U's checkpoint here (`--output` is accepted too).
        #[arg(short = 'o', long = "out", alias = "output")]
        output: Option<PathBuf>,
        /// Also replace an existing raspc checkpoint this raspc cannot read (see `compile --force`).
        #[arg(long)]
        force: bool,
        /// Simulate the attention layer in this safetensors file (tensors `A` and `V`, or
        /// `W_Q`, `W_K`, `W_V`; [d, ·] for one head or [h, d, ·]) instead of random ones.
        /// Every entry (X's too, and A = W_Q·W_Kᵀ) is taken as its nearest f32 number, what U
        /// reads, and T(X) is computed from those. U is certified for X's, A's and V's own
        /// largest entries (per block); other tensors in the file (biases, W_O) are not used.
        #[arg(long, requires = "input", conflicts_with_all = ["n", "d", "dv", "heads", "trials", "seed"])]
        target: Option<PathBuf>,
        /// With --target: X as a JSON array of rows, inline (`[[1, 0], [0, 1]]`) or in a file.
        #[arg(long, requires = "target")]
        input: Option<PathBuf>,
        /// Where U runs: cpu, or cuda (builds with the `cuda` feature; T(X) itself is always
        /// computed on the CPU in f64, so the comparison checks the device's forward pass).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
        device: String,
        /// Build U on the split input (`universal_split`): X and A given as their nearest
        /// multiples of a coarse power of two plus the remainders, so that the scores' high
        /// part is exact and only small cross terms round: a smaller f32 bound, for 7 layers,
        /// about 1.6x the heads, 1.7x the positions and twice the forward time
        /// (docs/universal-simulator.md, "Split scores").
        #[arg(long)]
        split: bool,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print an intermediate form of a program (the s-op graph of its entry).
    Dump {
        /// The program (.rasp).
        program: PathBuf,
        /// The s-op or selector to dump (default as in `eval`).
        #[arg(long)]
        entry: Option<String>,
        /// Which stage to show.
        #[arg(long, value_enum, default_value = "graph")]
        stage: Stage,
        /// For the compiler's stages (simplified, values, plan, schedule): the input vocabulary,
        /// as for `raspc compile`.
        #[arg(long, allow_hyphen_values = true)]
        vocab: Option<String>,
        /// For the compiler's stages: numeric inputs from a finite grid, as for `raspc compile`.
        #[arg(long = "input-grid", value_name = "LO,HI,STEP", conflicts_with_all = ["vocab", "input_bounds"], allow_hyphen_values = true, value_parser = grid_syntax)]
        input_grid: Option<String>,
        /// For the compiler's stages: real-valued inputs in [LO, HI], as for `raspc compile`.
        #[arg(long = "input-bounds", value_name = "LO,HI", conflicts_with = "vocab", allow_hyphen_values = true, value_parser = bounds_syntax)]
        input_bounds: Option<String>,
        /// For the compiler's stages on real-valued programs: MLP kind, as for `raspc compile`.
        #[arg(long, value_enum, default_value = "relu")]
        mlp: MlpArg,
        /// For the compiler's stages: the longest input.
        #[arg(long = "max-len")]
        max_len: Option<usize>,
        /// For the compiler's stages: causal masking.
        #[arg(long)]
        causal: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProbeKind {
    /// SVFlow metrics per layer and head under prefix shuffling, against the task score.
    Svflow {
        /// A raspc checkpoint (.safetensors) or a llama-architecture language model (.gguf).
        model: PathBuf,
        /// For raspc checkpoints: the program it was compiled from (the task score is agreement
        /// with the interpreter).
        #[arg(long)]
        program: Option<PathBuf>,
        /// For language models: the text to score (default: a sample shipped with raspc).
        #[arg(long)]
        text: Option<PathBuf>,
        /// The s-op of --program the model computes (default as in `eval`).
        #[arg(long, requires = "program")]
        entry: Option<String>,
        /// Tokens per sequence (default: the model's max_seq_len; 128 for a language model).
        #[arg(long = "seq-len")]
        seq_len: Option<usize>,
        /// The last E tokens are scored and never moved (default: a quarter of the sequence).
        #[arg(long = "eval-window")]
        eval_window: Option<usize>,
        /// Shuffling levels: the fraction of the prefix shuffled (comma separated, each in [0, 1]).
        #[arg(long, value_delimiter = ',', default_value = "0,0.25,0.5,0.75,1")]
        levels: Vec<f64>,
        /// Seeds per level.
        #[arg(long, default_value_t = 3)]
        seeds: u64,
        /// Random base sequences.
        #[arg(long, default_value_t = 8)]
        sequences: usize,
        /// Attention semantics of the perturbed runs: soft (default) or hard.
        #[arg(long, value_enum, default_value = "soft")]
        attention: AttentionArg,
        /// Divides the soft-attention β (values > 1 blur attention).
        #[arg(long = "attn-temp", default_value_t = 1.0)]
        attn_temp: f64,
        /// Standard deviation of Gaussian noise added to every layer weight (seeded per seed).
        #[arg(long = "weight-noise", default_value_t = 0.0)]
        weight_noise: f64,
        /// Print the full report as one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the full JSON report to this file (`--output` is accepted too).
        #[arg(short = 'o', long, alias = "output")]
        out: Option<PathBuf>,
        /// Write PNG plots of each metric against depth, one line per level.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
}

/// What to compile: entry, vocabulary, length, masking, encodings.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The s-op to compile (default: `prog`, else the last s-op assigned).
    #[arg(long)]
    pub entry: Option<String>,
    /// The input vocabulary: a JSON array (`["a","b"]`, `[0,1,2]`) or a string of characters.
    /// A vocabulary of numbers is a finite grid: maps of it compile to exact lookups.
    #[arg(long, allow_hyphen_values = true, required_unless_present_any = ["input_bounds", "input_grid"])]
    pub vocab: Option<String>,
    /// Numeric inputs from a finite grid, `LO,HI,STEP` (the vocabulary LO, LO+STEP, .., HI, as
    /// floats: `0,3,1` is 0.0, 1.0, 2.0, 3.0, which `run --input` spells `[0.0, 1.0]`): every
    /// function of them compiles to an exact lookup. (`--vocab '[0,1,2,3]'` gives integers.)
    #[arg(long = "input-grid", value_name = "LO,HI,STEP", conflicts_with_all = ["vocab", "input_bounds"], allow_hyphen_values = true, value_parser = grid_syntax)]
    pub input_grid: Option<String>,
    /// Real-valued inputs: every input number lies in [LO, HI] (e.g. `--input-bounds=-1,1`).
    /// The program reads them through `tokens_float`; the compiler certifies an error bound.
    #[arg(long = "input-bounds", value_name = "LO,HI", conflicts_with = "vocab", allow_hyphen_values = true, value_parser = bounds_syntax)]
    pub input_bounds: Option<String>,
    /// Real-valued programs: MLP kind (`relu`: products by piecewise-linear squares; `gated`:
    /// ReGLU units, products exact).
    #[arg(long, value_enum, default_value = "relu")]
    pub mlp: MlpArg,
    /// Real-valued programs: interpolation error per piecewise-linear function (default: per
    /// function, the one that gives the smallest f32 bound with its units' rounding; relative
    /// for exp and reciprocals; docs/compiler.md. A smaller value can tighten a bound at the cost of
    /// more units, up to a point: more units also round more in f32, so a much smaller value
    /// can loosen it; `compile --bounds` prints the bound).
    #[arg(long = "pl-error")]
    pub pl_error: Option<f64>,
    /// Longest input the model accepts.
    #[arg(long = "max-len")]
    pub max_len: usize,
    /// Causal masking: position i sees only positions <= i, and computes the program on the
    /// prefix ending at i.
    #[arg(long)]
    pub causal: bool,
    /// Force an s-op's encoding: `LABEL=numerical` or `LABEL=categorical` (repeatable).
    #[arg(long = "encoding", value_name = "LABEL=KIND", value_parser = encoding_syntax)]
    pub encodings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DtypeArg {
    F32,
    F64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MlpArg {
    Relu,
    Gated,
}

impl MlpArg {
    pub fn mode(self) -> raspc_compiler::real::MlpMode {
        match self {
            MlpArg::Relu => raspc_compiler::real::MlpMode::Relu,
            MlpArg::Gated => raspc_compiler::real::MlpMode::Gated,
        }
    }
}

/// The first token of `vocab` that repeats an earlier one, as the message that refuses it
/// (`what` names the argument). Tokens are the same when a Python dict would hold them under one
/// key, as the value sets do: the same string, or equal numbers (`0`, `0.0` and `-0.0`; `1`,
/// `1.0` and `true`).
pub fn vocab_duplicate(what: &str, vocab: &[raspc_lang::Atom]) -> Option<String> {
    let mut seen: std::collections::HashMap<raspc_lang::atom::AtomKey, &raspc_lang::Atom> = std::collections::HashMap::new();
    for a in vocab {
        if let Some(first) = seen.insert(a.key(), a) {
            let (x, y) = (first.to_json().to_string(), a.to_json().to_string());
            return Some(if x == y {
                // `--vocab '"abc"'`: a JSON string read as characters, quotes included.
                let quoted = vocab.first().is_some_and(|f| f.repr() == "'\"'") && vocab.last().is_some_and(|l| l.repr() == "'\"'");
                let listed = [",", " "].iter().any(|sep| a.repr() == format!("'{sep}'"));
                let hint = if quoted {
                    " (a quoted string is read one character per token, quotes included: write --vocab abc, or a JSON list such as '[\"abc\"]' for one token)"
                } else if listed {
                    // `--vocab 'a,b,c'` (helper ed25: nothing said a plain string is split).
                    " (a plain string is read one character per token, separators included: write --vocab abc, or a JSON list such as '[\"a\", \"b\"]')"
                } else {
                    ""
                };
                format!("{what} lists {} twice{hint}", a.repr())
            } else {
                format!("{what} lists {x} and {y}, the same token (equal numbers, as Python's sets and dicts see them)")
            });
        }
    }
    None
}

/// `--input-grid`'s form, checked by the command-line parser (a malformed value is a usage
/// error, exit status 2, as `--max-len abc` is; helper c19: it was 1); three numbers that
/// make no grid (a step of 0, LO > HI) or too many points are refused later ([`grid`]), exit
/// status 1, as values that parse but are refused are (README; helper t22).
fn grid_syntax(s: &str) -> Result<String, String> {
    let parts: Option<Vec<f64>> = s.split(',').map(|p| p.trim().parse::<f64>().ok()).collect();
    match parts.as_deref() {
        Some(&[lo, hi, step]) if lo.is_finite() && hi.is_finite() && step.is_finite() => Ok(s.to_string()),
        _ => Err(format!("bad --input-grid `{s}`: expected LO,HI,STEP (three finite numbers) with LO <= HI and STEP > 0, e.g. -1,1,0.25")),
    }
}

/// `--input-bounds`'s form, checked by the command-line parser ([`parse_bounds`]).
fn bounds_syntax(s: &str) -> Result<String, String> {
    parse_bounds_with(s, false).map(|_| s.to_string())
}

/// `--encoding`'s form: `LABEL=numerical` or `LABEL=categorical`.
fn encoding_syntax(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((l, "numerical" | "categorical")) if !l.is_empty() => Ok(s.to_string()),
        _ => Err(format!("bad --encoding `{s}`: expected LABEL=numerical or LABEL=categorical")),
    }
}

/// `LO,HI,STEP` -> the numbers LO, LO + STEP, ..., up to HI (at most 4096).
pub fn grid(s: &str) -> Result<Vec<raspc_lang::Atom>, String> {
    let bad = || format!("bad --input-grid `{s}`: expected LO,HI,STEP with LO <= HI and STEP > 0, e.g. -1,1,0.25");
    let parts: Vec<f64> = s.split(',').map(|p| p.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|_| bad())?;
    let [lo, hi, step] = parts[..] else { return Err(bad()) };
    if !(lo.is_finite() && hi.is_finite() && step.is_finite() && lo <= hi && step > 0.0) {
        return Err(bad());
    }
    // Count in f64 first: (hi - lo) / step can be far beyond usize (or infinite).
    let points = ((hi - lo) / step + 1e-9).floor() + 1.0;
    if points > 4096.0 {
        // (A grid is a vocabulary of numbers, whose one-hot encodings are a dim per point: the
        // same fixed limit as --vocab's; helper d13 asked whether it could be raised.)
        return Err(format!(
            "--input-grid `{s}` has {} points (at most 4096, a fixed limit: every point is a token with a dim of its own); a larger STEP or a narrower range fits, or --input-bounds compiles the program for every number in a range",
            if points < 1e15 { format!("{}", points as u64) } else { format!("{points:e}") }
        ));
    }
    let count = points as usize;
    // The points as typed: `0,1,0.1` gives 0.3, not 0.30000000000000004 (the decimals of the
    // arguments, when written without an exponent).
    let decimals = s.split(',').map(|p| p.trim()).try_fold(0usize, |m, p| if p.contains(['e', 'E']) { None } else { Some(m.max(p.split_once('.').map_or(0, |(_, f)| f.len()))) });
    let point = |k: usize| {
        let x = lo + k as f64 * step;
        match decimals {
            Some(dp) if dp <= 15 => format!("{x:.dp$}").parse::<f64>().unwrap_or(x),
            _ => x,
        }
    };
    let points: Vec<f64> = (0..count).map(point).collect();
    if let Some(last) = points.last()
        && (hi - last).abs() > step * 1e-9
    {
        return Err(format!("bad --input-grid `{s}`: HI is not on the grid (LO + k·STEP stops at {last}); give a HI that is, e.g. `{lo},{last},{step}`"));
    }
    Ok(points.into_iter().map(raspc_lang::Atom::Float).collect())
}

/// Real-valued bounds: (lo, hi, blocks).
pub type Bounds = (f64, f64, Vec<(usize, usize, f64, f64)>);

/// `LO,HI` (every position), optionally followed by `;LO,HI@START:END` blocks of input
/// positions with narrower bounds.
pub fn parse_bounds(s: &str) -> Result<Bounds, String> {
    parse_bounds_with(s, true)
}

/// [`parse_bounds`]; without `ordered`, only the form (the command-line parser's check: a
/// range with LO > HI is a value refused later, exit status 1, as `--input-grid`'s is).
fn parse_bounds_with(s: &str, ordered: bool) -> Result<Bounds, String> {
    let bad = || format!("bad --input-bounds `{s}`: expected LO,HI with LO <= HI (e.g. -1,1), then optionally ;LO,HI@START:END for blocks of positions");
    let pair = |p: &str| -> Result<(f64, f64), String> {
        let (a, b) = p.split_once(',').ok_or_else(bad)?;
        let (lo, hi): (f64, f64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if !(lo.is_finite() && hi.is_finite() && (lo <= hi || !ordered)) {
            return Err(bad());
        }
        Ok((lo, hi))
    };
    let mut parts = s.split(';');
    let (lo, hi) = pair(parts.next().unwrap_or_default())?;
    let mut blocks = vec![];
    for p in parts {
        let (b, range) = p.split_once('@').ok_or_else(bad)?;
        let (l, h) = pair(b)?;
        let (start, end) = range.split_once(':').ok_or_else(bad)?;
        let (start, end): (usize, usize) = (start.trim().parse().map_err(|_| bad())?, end.trim().parse().map_err(|_| bad())?);
        blocks.push((start, end, l, h));
    }
    Ok((lo, hi, blocks))
}

/// Parses `--input` / `--vocab`: a JSON array, or a plain string split into characters. Text
/// that starts with `[` must be valid JSON (a typo is an error, not a string of characters).
pub fn parse_tokens(flag: &str, text: &str) -> Result<Vec<raspc_lang::Atom>, String> {
    // The value may start with `-` (`--vocab '-0+'`), so a flag right after it is taken as its
    // value: refuse what looks like one (a long flag name), and say how to give it if meant.
    if let Some(name) = text.strip_prefix("--")
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
    {
        return Err(format!("{flag} needs a value, and got `{text}`, which is a flag (to give the characters `{text}` as tokens, write {flag}='[\"-\", \"-\", ...]' as a JSON array)"));
    }
    if text.trim_start().starts_with('[')
        && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
    {
        return Err(format!(
            "bad {flag}: it starts with `[` but is not valid JSON ({e}); write a JSON array such as [1, 2] or [\"a\", \"b\"] (characters such as `[` can be given as [\"[\"])"
        ));
    }
    raspc_lang::parse_input(text).map_err(|m| format!("bad {flag}: {m}"))
}

/// A warning when `--input` text names an existing file: the flag takes the input itself, so
/// `--input in.json` runs on the 7 characters of the name (helper c19: `simulate --input` reads
/// a file, and a user who learnt that got `eval` of the file's name, exit status 0).
pub fn input_file_warning(input: &str, err: &mut dyn std::io::Write) {
    // A JSON object (helper ed25: `--input '{"a":1}'` ran on its 7 characters, unremarked).
    if input.trim_start().starts_with('{') && serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(input).is_ok() {
        let _ = writeln!(
            err,
            "warning: --input is a JSON object, which is read as its {} characters; an input is a string of one-character tokens or a JSON array of tokens (`[\"a\", 1]`)",
            input.chars().count()
        );
    }
    if !input.trim_start().starts_with('[') && std::path::Path::new(input).is_file() {
        let _ = writeln!(
            err,
            "warning: `{input}` is a file, but --input takes the input itself: this runs on the {} characters of its name (to read the file: --input \"$(cat {input})\")",
            input.chars().count()
        );
    }
}

/// The budgets for sizes from files and flags (docs/checkpoint-format.md, "Budgets").
pub fn limits() -> Result<raspc_checkpoint::Limits, String> {
    raspc_checkpoint::Limits::from_env().map_err(|e| e.to_string())
}

/// An error unless the flag's number is finite and satisfies `ok`.
pub(crate) fn finite_flag(flag: &str, x: f64, ok: bool, what: &str) -> Result<(), String> {
    if x.is_finite() && ok {
        Ok(())
    } else {
        Err(format!("{flag} {} must be a finite number {what}", num(x)))
    }
}

/// A number for messages: scientific notation when it is very large or very small.
pub(crate) fn num(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    Onnx,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PlotFormat {
    Png,
    Svg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AttentionArg {
    Hard,
    Soft,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum AttentionModes {
    Hard,
    Soft,
    Both,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Stage {
    /// The parsed program, written back as RASP: every operation in parentheses, each statement
    /// followed by `# line:col`
    Ast,
    /// The graph of s-ops and selectors the entry depends on.
    Graph,
    /// The graph after the compiler's algebraic rewrites (needs --max-len and --vocab or
    /// --input-grid).
    Simplified,
    /// The value set of every s-op of the rewritten graph (needs --max-len and --vocab or
    /// --input-grid).
    Values,
    /// The lowered plan: residual slots and blocks (heads, MLPs) with what they compute (needs
    /// --max-len and --vocab, --input-grid or --input-bounds).
    Plan,
    /// Layers, the blocks of each sublayer, and the residual stream layout (needs --max-len and
    /// --vocab, --input-grid or --input-bounds).
    Schedule,
}
