//! The `raspc` command line. Diagnostics are rendered here and nowhere else.
//!
//! [`run`] takes the arguments and two writers and returns the exit code, so tests drive the
//! whole CLI in-process; `main.rs` only wires it to the real stdout and stderr.

use clap::{Parser, Subcommand};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use raspc_lang::{Diagnostic, DiskLoader, Severity, SourceMap};
use std::io::Write;
use std::path::{Path, PathBuf};

pub mod inspect;
pub mod plot;
pub mod probe;
pub mod simulate;
pub mod verify;

#[derive(Debug, Parser)]
#[command(name = "raspc", version, about = "Compile RASP programs to transformer weights, and run them")]
pub struct Cli {
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
        #[arg(long)]
        input: String,
        /// Print exactly one line `{"output": [...]}`.
        #[arg(long)]
        json: bool,
    },
    /// Compile a program to a transformer checkpoint (.safetensors).
    Compile {
        program: PathBuf,
        #[command(flatten)]
        target: Target,
        /// Where to write the checkpoint.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Also replace an existing raspc checkpoint this raspc cannot read (another version, or
        /// damaged). Files that are not raspc checkpoints are never replaced.
        #[arg(long)]
        force: bool,
        /// Real-valued programs: also print every materialised s-op's interval and certified error.
        #[arg(long)]
        bounds: bool,
    },
    /// Run a compiled checkpoint on one input.
    Run {
        model: PathBuf,
        /// Same conventions as `raspc eval --input`; BOS is added and removed by raspc.
        #[arg(long)]
        input: String,
        #[arg(long)]
        json: bool,
        #[arg(long, value_enum, default_value = "hard")]
        attention: AttentionArg,
        /// cpu, or cuda (builds with the `cuda` feature).
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Compile, then compare the model with the interpreter on many inputs.
    Verify {
        program: PathBuf,
        #[command(flatten)]
        target: Target,
        /// Every input up to --max-len.
        #[arg(long, conflicts_with = "samples")]
        exhaustive: bool,
        /// Number of random inputs (lengths uniform in 1..=max-len).
        #[arg(long)]
        samples: Option<usize>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, value_enum, default_value = "both")]
        attention: AttentionModes,
        /// Succeed even when the interpreter rejects some of the inputs (they are counted and
        /// not checked); without it, verify fails unless every input asked for was checked.
        #[arg(long)]
        allow_rejected: bool,
    },
    /// Show what a checkpoint holds: config, residual layout, every head and MLP; or one block's
    /// matrices with labelled rows and columns.
    Inspect {
        model: PathBuf,
        #[arg(long)]
        json: bool,
        /// Show the matrices of one block of this layer (with --head or --mlp).
        #[arg(long)]
        layer: Option<usize>,
        #[arg(long, requires = "layer", conflicts_with = "mlp")]
        head: Option<usize>,
        #[arg(long, requires = "layer")]
        mlp: bool,
    },
    /// Draw PNG heatmaps of every head's QK and OV circuits and every MLP, plus an overview.
    Plot {
        model: PathBuf,
        /// Directory for the PNG files (created if needed).
        #[arg(long)]
        out: PathBuf,
    },
    /// Probes of a model's attention (docs/svflow.md).
    Probe {
        #[command(subcommand)]
        kind: ProbeKind,
    },
    /// Run a checkpoint and decode every s-op in the residual stream after every sublayer;
    /// with --program, compare each with the interpreter and mark the first divergence.
    Trace {
        model: PathBuf,
        #[arg(long)]
        input: String,
        /// The program the model was compiled from.
        #[arg(long)]
        program: Option<PathBuf>,
        #[arg(long, requires = "program")]
        entry: Option<String>,
        #[arg(long, value_enum, default_value = "hard")]
        attention: AttentionArg,
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
        #[arg(long, value_enum, default_value = "gated")]
        mlp: MlpArg,
        /// Random instances to check.
        #[arg(long, default_value_t = 100)]
        trials: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Entries of X, A and V are uniform in [-B, B]; U is certified for inputs in [-B, B].
        #[arg(long)]
        bound: Option<f64>,
        /// Entries of X in [-BX, BX] instead (A and V keep --bound); U is certified per block.
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
        /// Write U's checkpoint here.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Also replace an existing raspc checkpoint this raspc cannot read (see `compile --force`).
        #[arg(long)]
        force: bool,
        /// Simulate the attention layer in this safetensors file (tensors `A` and `V`, or
        /// `W_Q`, `W_K`, `W_V`; [d, ·] for one head or [h, d, ·]) instead of random ones.
        #[arg(long, requires = "input")]
        target: Option<PathBuf>,
        /// With --target: X as a JSON array of rows.
        #[arg(long, requires = "target")]
        input: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print an intermediate form of a program (the s-op graph of its entry).
    Dump {
        program: PathBuf,
        #[arg(long)]
        entry: Option<String>,
        /// Which stage to show.
        #[arg(long, value_enum, default_value = "graph")]
        stage: Stage,
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
        #[arg(long)]
        entry: Option<String>,
        /// Tokens per sequence (default: the model's max_seq_len; 128 for a language model).
        #[arg(long = "seq-len")]
        seq_len: Option<usize>,
        /// The last E tokens are scored and never moved (default: a quarter of the sequence).
        #[arg(long = "eval-window")]
        eval_window: Option<usize>,
        #[arg(long, value_delimiter = ',', default_value = "0,0.25,0.5,0.75,1")]
        levels: Vec<f64>,
        #[arg(long, default_value_t = 3)]
        seeds: u64,
        /// Random base sequences.
        #[arg(long, default_value_t = 8)]
        sequences: usize,
        #[arg(long, value_enum, default_value = "soft")]
        attention: AttentionArg,
        /// Divides the soft-attention β (values > 1 blur attention).
        #[arg(long = "attn-temp", default_value_t = 1.0)]
        attn_temp: f64,
        /// Standard deviation of Gaussian noise added to every layer weight (seeded per seed).
        #[arg(long = "weight-noise", default_value_t = 0.0)]
        weight_noise: f64,
        /// Write the full report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
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
    #[arg(long, required_unless_present_any = ["input_bounds", "input_grid"])]
    pub vocab: Option<String>,
    /// Numeric inputs from a finite grid, `LO,HI,STEP` (the vocabulary LO, LO+STEP, .., HI): every
    /// function of them compiles to an exact lookup.
    #[arg(long = "input-grid", value_name = "LO,HI,STEP", conflicts_with_all = ["vocab", "input_bounds"], allow_hyphen_values = true)]
    pub input_grid: Option<String>,
    /// Real-valued inputs: every input number lies in [LO, HI] (e.g. `--input-bounds=-1,1`).
    /// The program reads them through `tokens_float`; the compiler certifies an error bound.
    #[arg(long = "input-bounds", value_name = "LO,HI", conflicts_with = "vocab", allow_hyphen_values = true)]
    pub input_bounds: Option<String>,
    /// Real-valued programs: MLP kind (`relu`: products by piecewise-linear squares; `gated`:
    /// ReGLU units, products exact).
    #[arg(long, value_enum, default_value = "relu")]
    pub mlp: MlpArg,
    /// Real-valued programs: interpolation error per piecewise-linear function (default: chosen
    /// per function to minimise its certified error, interpolation plus f32 rounding).
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
    #[arg(long = "encoding", value_name = "LABEL=KIND")]
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
        return Err(format!("--input-grid `{s}` has {points:e} points (at most 4096)"));
    }
    let count = points as usize;
    Ok((0..count).map(|k| raspc_lang::Atom::Float(lo + k as f64 * step)).collect())
}

/// Real-valued bounds: (lo, hi, blocks).
pub type Bounds = (f64, f64, Vec<(usize, usize, f64, f64)>);

/// `LO,HI` (every position), optionally followed by `;LO,HI@START:END` blocks of input
/// positions with narrower bounds.
pub fn parse_bounds(s: &str) -> Result<Bounds, String> {
    let bad = || format!("bad --input-bounds `{s}`: expected LO,HI with LO <= HI (e.g. -1,1), then optionally ;LO,HI@START:END for blocks of positions");
    let pair = |p: &str| -> Result<(f64, f64), String> {
        let (a, b) = p.split_once(',').ok_or_else(bad)?;
        let (lo, hi): (f64, f64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
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
    if text.trim_start().starts_with('[')
        && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
    {
        return Err(format!(
            "bad {flag}: it starts with `[` but is not valid JSON ({e}); write a JSON array such as [1, 2] or [\"a\", \"b\"] (characters such as `[` can be given as [\"[\"])"
        ));
    }
    raspc_lang::parse_input(text).map_err(|m| format!("bad {flag}: {m}"))
}

/// The budgets for sizes from files and flags (docs/checkpoint-format.md, "Budgets").
pub fn limits() -> Result<raspc_checkpoint::Limits, String> {
    raspc_checkpoint::Limits::from_env().map_err(|e| e.to_string())
}

/// An error unless the flag's number is finite and satisfies `ok`.
fn finite_flag(flag: &str, x: f64, ok: bool, what: &str) -> Result<(), String> {
    if x.is_finite() && ok { Ok(()) } else { Err(format!("{flag} {} must be a finite number {what}", num(x))) }
}

/// A number for messages: scientific notation when it is very large or very small.
fn num(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) { format!("{x:e}") } else { format!("{x}") }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
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
    /// The parsed program.
    Ast,
    /// The graph of s-ops and selectors the entry depends on.
    Graph,
}

/// Renders diagnostics with the source line and a caret under the place.
pub fn render(sources: &SourceMap, diags: &[Diagnostic], color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (_, f) in sources.files() {
        files.add(f.name.clone(), f.text.clone());
    }
    let config = term::Config::default();
    let mut buf = Vec::new();
    {
        let mut w: Box<dyn termcolor::WriteColor> =
            if color { Box::new(termcolor::Ansi::new(&mut buf)) } else { Box::new(termcolor::NoColor::new(&mut buf)) };
        for d in diags {
            let cs = CsDiagnostic::new(match d.severity {
                Severity::Error => CsSeverity::Error,
                Severity::Warning => CsSeverity::Warning,
                Severity::Note => CsSeverity::Note,
            })
            .with_code(d.code)
            .with_message(&d.message)
            .with_labels(
                d.labels
                    .iter()
                    .map(|l| {
                        let f = l.span.file.0 as usize;
                        let len = sources.get(l.span.file).text.len();
                        let (s, e) = ((l.span.start as usize).min(len), (l.span.end as usize).min(len));
                        let lab = if l.primary { CsLabel::primary(f, s..e) } else { CsLabel::secondary(f, s..e) };
                        lab.with_message(&l.message)
                    })
                    .collect(),
            )
            .with_notes(d.notes.clone());
            if term::emit(w.as_mut(), &config, &files, &cs).is_err() {
                let _ = writeln!(w, "{}: {}", d.code, d.message);
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Stack for the worker thread: parsing and host evaluation recurse over the program's nesting.
const STACK_BYTES: usize = 256 << 20;

/// Runs the CLI. Returns the process exit code: 0 success, 1 a user error, 2 a usage error,
/// 101 an internal error (a bug). The work runs on a thread with a large stack and writes to
/// `out` and `err` as it goes (nothing is held back until the end). Callers must not hold the
/// process's stderr lock while this runs: progress bars draw to stderr from the worker thread.
pub fn run<I: IntoIterator<Item = String>>(args: I, out: &mut (dyn Write + Send), err: &mut (dyn Write + Send), color: bool) -> i32 {
    let args: Vec<String> = args.into_iter().collect();
    let result = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                let code = run_here(args, &mut *out, &mut *err, color);
                let _ = out.flush();
                let _ = err.flush();
                code
            })
            .map(|h| h.join())
    });
    match result {
        Ok(Ok(code)) => code,
        _ => {
            let _ = writeln!(err, "error: internal error in raspc (this is a bug; please report it with the program that caused it)");
            101
        }
    }
}

fn run_here(args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let text = if color { e.render().ansi().to_string() } else { e.render().to_string() };
            let code = if e.use_stderr() { 2 } else { 0 };
            if e.use_stderr() {
                let _ = write!(err, "{text}");
            } else {
                let _ = write!(out, "{text}");
            }
            return code;
        }
    };
    let r = match cli.command {
        Command::Eval { program, entry, input, json } => eval(&program, entry.as_deref(), &input, json, out, err, color),
        Command::Dump { program, entry, stage } => dump(&program, entry.as_deref(), stage, out, err, color),
        Command::Compile { program, target, output, force, bounds } => compile_cmd(&program, &target, &output, force, bounds, out, err, color),
        Command::Run { model, input, json, attention, device } => run_cmd(&model, &input, json, attention, &device, out),
        Command::Inspect { model, json, layer, head, mlp } => inspect_cmd(&model, json, layer, head, mlp, out),
        Command::Plot { model, out: dir } => plot_cmd(&model, &dir, out),
        Command::Probe { kind } => probe_cmd(kind, out, err, color),
        Command::Simulate { n, d, dv, heads, mlp, trials, seed, bound, x_bound, tolerance, dtype, pl_error, output, force, target, input, json } => {
            let a = SimArgs { shape: simulate::Shape { n, d, dv, h: heads }, mlp, trials, seed, bound, x_bound, tolerance, f64: dtype == DtypeArg::F64, pl_error, output, force, json };
            simulate_cmd(&a, target.as_deref().zip(input.as_deref()), out)
        }
        Command::Trace { model, input, program, entry, attention, json } => {
            trace_cmd(&model, &input, program.as_deref(), entry.as_deref(), attention, json, out, err, color)
        }
        Command::Verify { program, target, exhaustive, samples, seed, attention, allow_rejected } => {
            verify_cmd(&program, &target, &VerifyArgs { exhaustive, samples, seed, attention, allow_rejected }, out, err, color)
        }
    };
    match r {
        Ok(()) => 0,
        Err(Failure::Reported | Failure::Silent) => 1,
        Err(Failure::Message(m)) => {
            let _ = writeln!(err, "error: {m}");
            1
        }
    }
}

enum Failure {
    /// Diagnostics were already written.
    Reported,
    /// The output already says what went wrong (exit 1).
    Silent,
    Message(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Message(s)
    }
}

/// Reads a file named on the command line: regular files only (a FIFO or a device would block
/// or never end), within the `text_bytes` budget, checked before reading.
pub fn read_input_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("cannot read `{shown}`: not a regular file"));
    }
    let max = limits()?.max_text_bytes;
    if meta.len() > max {
        return Err(format!("`{shown}` is {} bytes, over the budget of {max} (raise it with RASPC_LIMITS=text_bytes=N)", meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    Ok(bytes)
}

fn read_program(path: &std::path::Path) -> Result<String, Failure> {
    let bytes = read_input_file(path)?;
    String::from_utf8(bytes).map_err(|e| {
        Failure::Message(format!("`{}` is not valid UTF-8 (first bad byte at offset {})", path.display(), e.utf8_error().valid_up_to()))
    })
}

/// Parses and evaluates a program file; renders diagnostics on failure.
fn load(path: &std::path::Path, err: &mut dyn Write, color: bool) -> Result<raspc_lang::Session, Failure> {
    let text = read_program(path)?;
    let (sources, r) = raspc_lang::evaluate_program(&path.display().to_string(), Some(path), &text, &DiskLoader);
    match r {
        Ok(s) => {
            let notes = s.notes.iter().filter_map(|d| Some((d, d.primary_span()?))).filter(|(_, sp)| sp.file == s.main_file);
            for (n, sp) in notes {
                let (l, c) = sources.line_col(sp.file, sp.start);
                let _ = writeln!(err, "note: {}:{l}:{c}: {}", sources.get(sp.file).name, n.message);
            }
            Ok(s)
        }
        Err(diags) => {
            let _ = write!(err, "{}", render(&sources, &diags, color));
            let n = diags.iter().filter(|d| d.is_error()).count();
            let _ = writeln!(err, "error: could not evaluate `{}` due to {n} previous error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}

fn eval(path: &std::path::Path, entry: Option<&str>, input: &str, json: bool, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    let session = load(path, err, color)?;
    let (_, node) = session.entry(entry)?;
    let tokens = parse_tokens("--input", input)?;
    let budget = limits()?.max_input_tokens;
    if tokens.len() > budget {
        return Err(format!("--input has {} tokens, over the budget of {budget} (raise it with RASPC_LIMITS=input_tokens=N)", tokens.len()).into());
    }
    match raspc_lang::evaluate(&session.graph, node, &tokens) {
        Ok(v) => {
            if json {
                let line = serde_json::json!({ "output": v.to_json() });
                let _ = writeln!(out, "{line}");
            } else {
                let _ = writeln!(out, "{}", v.to_text());
            }
            Ok(())
        }
        Err(e) if session.sources.get(e.span.file).name == "<prelude>" && e.span.start == 0 => {
            // A built-in s-op (such as `tokens_int`) failed: there is no program text to show.
            let at = e.position.map(|p| format!(" at position {p}")).unwrap_or_default();
            let _ = writeln!(err, "error[eval::runtime]: evaluating `{}` failed{at}: {}", e.label, e.message);
            let _ = writeln!(err, "  = input: {input}");
            Err(Failure::Reported)
        }
        Err(e) => {
            let at = e.position.map(|p| format!(" at position {p}")).unwrap_or_default();
            let d = Diagnostic::error("eval::runtime", format!("evaluating `{}` failed{at}: {}", e.label, e.message), e.span)
                .with_label("this operation failed")
                .with_note(format!("input: {input}"));
            let _ = write!(err, "{}", render(&session.sources, &[d], color));
            Err(Failure::Reported)
        }
    }
}

fn dump(path: &std::path::Path, entry: Option<&str>, stage: Stage, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    match stage {
        Stage::Ast => {
            let text = read_program(path)?;
            let mut sources = SourceMap::new();
            let f = sources.add(path.display().to_string(), Some(path.to_path_buf()), text.clone());
            let (prog, errs) = raspc_lang::parser::parse(f, &text);
            if !errs.is_empty() {
                let _ = write!(err, "{}", render(&sources, &errs, color));
                return Err(Failure::Reported);
            }
            let _ = writeln!(out, "{prog:#?}");
            Ok(())
        }
        Stage::Graph => {
            let session = load(path, err, color)?;
            let (_, node) = session.entry(entry)?;
            let (g, _) = session.graph.extract(node);
            let _ = write!(out, "{}", g.dump());
            Ok(())
        }
    }
}

/// A compiled program with what verification needs.
struct Built {
    session: raspc_lang::Session,
    root: raspc_lang::NodeId,
    vocab: Vec<raspc_lang::Atom>,
    compiled: raspc_compiler::Compiled,
}

fn program_hash(session: &raspc_lang::Session) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for (_, f) in session.sources.files() {
        if f.name == "<prelude>" || f.name == "<matrix>" {
            continue;
        }
        h.update((f.text.len() as u64).to_le_bytes());
        h.update(f.text.as_bytes());
    }
    format!("sha256:{:x}", h.finalize())
}

fn build(path: &Path, target: &Target, err: &mut dyn Write, color: bool) -> Result<Built, Failure> {
    let session = load(path, err, color)?;
    let (_, root) = session.entry(target.entry.as_deref())?;
    let real = match &target.input_bounds {
        Some(b) => {
            let (lo, hi, blocks) = parse_bounds(b)?;
            Some(raspc_compiler::real::RealOptions { lo, hi, blocks, mlp: target.mlp.mode(), pl_error: target.pl_error })
        }
        None => None,
    };
    let vocab = match (&target.vocab, &real, &target.input_grid) {
        (_, Some(_), _) => vec![],
        (Some(v), None, _) => parse_tokens("--vocab", v)?,
        (None, None, Some(g)) => grid(g)?,
        (None, None, None) => return Err("give --vocab (token inputs), --input-grid or --input-bounds (real-valued inputs)".to_string().into()),
    };
    if vocab.is_empty() && real.is_none() {
        return Err("--vocab is empty: give the tokens the model must accept, e.g. --vocab '[\"a\",\"b\"]'".to_string().into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in &vocab {
        if !seen.insert(a.to_json().to_string()) {
            return Err(format!("--vocab lists {} twice", a.repr()).into());
        }
    }
    if target.max_len == 0 {
        return Err("--max-len must be at least 1".to_string().into());
    }
    let budget = limits()?.max_input_tokens;
    if target.max_len > budget {
        return Err(format!("--max-len {} is too large (at most {budget}; raise it with RASPC_LIMITS=input_tokens=N)", target.max_len).into());
    }
    if let Some(e) = target.pl_error {
        finite_flag("--pl-error", e, e > 0.0, "> 0")?;
    }
    let mut opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: target.max_len, causal: target.causal, real, ..Default::default() };
    for e in &target.encodings {
        match e.split_once('=') {
            Some((l, "numerical")) => {
                opts.numerical.insert(l.to_string());
            }
            Some((l, "categorical")) => {
                opts.categorical.insert(l.to_string());
            }
            _ => return Err(format!("bad --encoding `{e}`: expected LABEL=numerical or LABEL=categorical").into()),
        }
    }
    if let Some(both) = opts.numerical.intersection(&opts.categorical).next() {
        return Err(format!("--encoding gives `{both}` both encodings").into());
    }
    match raspc_compiler::compile(&session.graph, root, &opts, &program_hash(&session)) {
        Ok(compiled) => Ok(Built { session, root, vocab, compiled }),
        Err(diags) => {
            let _ = write!(err, "{}", render(&session.sources, &diags, color));
            let n = diags.iter().filter(|d| d.is_error()).count();
            let _ = writeln!(err, "error: could not compile `{}` due to {n} previous error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn compile_cmd(path: &Path, target: &Target, output: &Path, force: bool, bounds: bool, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    if output.exists() && std::fs::canonicalize(output).ok() == std::fs::canonicalize(path).ok() {
        return Err(format!("-o `{}` is the program itself; refusing to overwrite it", output.display()).into());
    }
    check_output(output, force)?;
    let built = build(path, target, err, color)?;
    let bytes = built.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: the compiled checkpoint is invalid: {e}"))?;
    write_checkpoint(output, &bytes, force)?;
    let _ = writeln!(out, "compiled `{}` -> {}: {}", built.compiled.plan.output_label, output.display(), built.compiled.summary);
    if let Some(r) = &built.compiled.report {
        if bounds {
            for b in &r.sops {
                let _ = writeln!(out, "  {}: [{:.4}, {:.4}] err {:.3e} (f64: {:.3e})", b.label, b.lo, b.hi, b.err, b.err_f64);
            }
        }
        let _ = writeln!(
            out,
            "certified: |{} - program| <= {:.3e} in f32 ({:.3e} in f64) for inputs in [{}]",
            built.compiled.plan.output_label,
            r.output_bound,
            r.output_bound_f64,
            target.input_bounds.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

fn attention_of(a: AttentionArg) -> raspc_runtime::Attention {
    match a {
        AttentionArg::Hard => raspc_runtime::Attention::Hard,
        AttentionArg::Soft => raspc_runtime::Attention::Soft,
    }
}

fn run_cmd(model: &Path, input: &str, json: bool, attention: AttentionArg, device: &str, out: &mut dyn Write) -> Result<(), Failure> {
    let dev = raspc_runtime::device(device).map_err(|e| e.to_string())?;
    let m = raspc_runtime::Model::load_file(model, &dev).map_err(|e| format!("`{}`: {e}", model.display()))?;
    let tokens = parse_tokens("--input", input)?;
    let values = tokens.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    let decoded = m.run(&values, attention_of(attention)).map_err(|e| format!("`{}`: {e}", model.display()))?;
    if json {
        let line = serde_json::json!({ "output": decoded.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>() });
        let _ = writeln!(out, "{line}");
    } else {
        let atoms: Vec<String> = decoded.iter().map(|d| verify::decoded_atom(d).repr()).collect();
        let _ = writeln!(out, "[{}]", atoms.join(", "));
    }
    Ok(())
}

struct VerifyArgs {
    exhaustive: bool,
    samples: Option<usize>,
    seed: u64,
    attention: AttentionModes,
    allow_rejected: bool,
}

/// The closing lines of `verify`: the inputs the interpreter rejected, then the verdict. Fails
/// (exit 1) on a mismatch, when nothing was checked, or when fewer inputs than asked were
/// checked (unless `--allow-rejected`).
fn verify_verdict(asked: usize, checked: usize, failed: usize, rejections: &verify::Rejections, allow_rejected: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let rejected = rejections.total();
    if rejected > 0 {
        let _ = writeln!(out, "rejected: the interpreter rejects {rejected} of the {asked} inputs (not checked):");
        for l in rejections.lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    let _ = writeln!(out, "verified: {checked} inputs, {failed} mismatches");
    if failed > 0 {
        return Err(Failure::Silent);
    }
    if checked == 0 {
        return Err("no input was checked: the model was compared with the interpreter on nothing".to_string().into());
    }
    if rejected > 0 && !allow_rejected {
        return Err(format!("only {checked} of the {asked} inputs asked for were checked (pass --allow-rejected to accept that)").into());
    }
    Ok(())
}

fn verify_cmd(path: &Path, target: &Target, a: &VerifyArgs, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    if a.samples == Some(0) {
        return Err("--samples 0 checks nothing: give at least 1".to_string().into());
    }
    if let Some(n) = a.samples {
        let l = limits()?;
        if n as u64 > l.max_samples {
            return Err(format!("--samples {n} is over the budget of {} (raise it with RASPC_LIMITS=samples=N)", l.max_samples).into());
        }
        if (n as u64).saturating_mul(target.max_len as u64) > l.max_tokens {
            return Err(format!("--samples {n} x --max-len {} is over the budget of {} tokens (raise it with RASPC_LIMITS=tokens=N)", target.max_len, l.max_tokens).into());
        }
    }
    let built = build(path, target, err, color)?;
    if built.compiled.report.is_some() {
        let model = raspc_runtime::Model::new(built.compiled.checkpoint.clone(), &raspc_runtime::Device::Cpu).map_err(|e| format!("internal error: {e}"))?;
        let count = a.samples.unwrap_or(1000);
        let _ = writeln!(out, "compiled `{}`: {}", built.compiled.plan.output_label, built.compiled.summary);
        let bar = indicatif::ProgressBar::new(count as u64);
        let r = verify::verify_real(&built.session.graph, built.root, &model, count, a.seed, &mut |n| bar.set_position(n as u64))?;
        bar.finish_and_clear();
        for m in &r.examples {
            let show = |v: &[raspc_lang::Atom]| format!("[{}]", v.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "));
            let got: Vec<raspc_lang::Atom> = m.got.iter().map(verify::decoded_atom).collect();
            let _ = writeln!(out, "mismatch: input {}: expected {}, model {}", show(&m.input), show(&m.expected), show(&got));
        }
        let _ = writeln!(out, "max |model - program| {:.3e}, certified bound {:.3e}", r.max_err, r.bound);
        return verify_verdict(count, r.checked, r.failed, &r.rejections, a.allow_rejected, out);
    }
    let inputs = if a.exhaustive {
        verify::Inputs::Exhaustive
    } else {
        verify::Inputs::Random { count: a.samples.unwrap_or(1000), seed: a.seed }
    };
    let seqs = verify::generate(&inputs, built.vocab.len(), target.max_len)?;
    let model = raspc_runtime::Model::new(built.compiled.checkpoint.clone(), &raspc_runtime::device("cpu").map_err(|e| e.to_string())?)
        .map_err(|e| format!("internal error: {e}"))?;
    let modes = match a.attention {
        AttentionModes::Hard => vec![raspc_runtime::Attention::Hard],
        AttentionModes::Soft => vec![raspc_runtime::Attention::Soft],
        AttentionModes::Both => vec![raspc_runtime::Attention::Hard, raspc_runtime::Attention::Soft],
    };
    let _ = writeln!(out, "compiled `{}`: {}", built.compiled.plan.output_label, built.compiled.summary);
    let bar = indicatif::ProgressBar::new(seqs.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} inputs ({eta})").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
    let report = verify::verify(&built.session.graph, built.root, &model, &built.vocab, &seqs, &modes, &mut |n| bar.set_position(n as u64))?;
    bar.finish_and_clear();
    let c = &model.checkpoint.config;
    for (mode, f) in &report.per_mode {
        let detail = match mode {
            raspc_runtime::Attention::Hard => format!("tie tolerance {}", c.attention.tie_tolerance),
            raspc_runtime::Attention::Soft => format!("beta {}", c.attention.soft_beta),
        };
        let _ = writeln!(out, "{:?} attention ({detail}): {} inputs, {f} mismatches", mode, report.checked);
    }
    for m in &report.examples {
        let show = |v: &[raspc_lang::Atom]| format!("[{}]", v.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "));
        let got: Vec<raspc_lang::Atom> = m.got.iter().map(verify::decoded_atom).collect();
        let _ = writeln!(out, "mismatch ({:?}): input {}: expected {}, model {}", m.attention, show(&m.input), show(&m.expected), show(&got));
    }
    verify_verdict(seqs.len(), report.checked, report.failed, &report.rejections, a.allow_rejected, out)
}

struct SimArgs {
    shape: simulate::Shape,
    mlp: MlpArg,
    trials: usize,
    seed: u64,
    bound: Option<f64>,
    x_bound: Option<f64>,
    tolerance: f64,
    f64: bool,
    pl_error: Option<f64>,
    output: Option<PathBuf>,
    force: bool,
    json: bool,
}

/// Temporary files being written, removed if the process is interrupted (SIGINT, SIGTERM,
/// SIGHUP) before they are renamed into place.
static TEMP_FILES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
static CLEANUP: std::sync::Once = std::sync::Once::new();
static TEMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn install_cleanup() {
    CLEANUP.call_once(|| {
        // If another handler is already installed (a host program), its owner handles signals.
        let _ = ctrlc::set_handler(|| {
            if let Ok(files) = TEMP_FILES.lock() {
                for f in files.iter() {
                    let _ = std::fs::remove_file(f);
                }
            }
            std::process::exit(130);
        });
    });
}

fn forget_temp(tmp: &Path) {
    if let Ok(mut files) = TEMP_FILES.lock() {
        files.retain(|f| f != tmp);
    }
}

/// May `-o` be written? Nothing exists there, or a regular file that is a raspc checkpoint
/// (with `force`, also one this raspc cannot read: another version, or damaged). Directories,
/// devices, FIFOs, sockets, symbolic links and other files are never replaced.
fn check_output(output: &Path, force: bool) -> Result<(), Failure> {
    let shown = output.display();
    let meta = match std::fs::symlink_metadata(output) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect -o `{shown}`: {e}").into()),
    };
    if meta.is_dir() {
        return Err(format!("-o `{shown}` is a directory").into());
    }
    if !meta.is_file() {
        return Err(format!("-o `{shown}` exists and is not a regular file (a device, FIFO, socket or symbolic link); refusing to replace it").into());
    }
    let l = limits()?;
    let bytes = match raspc_checkpoint::read_file(output, &l) {
        Ok(b) => b,
        Err(e) => return Err(format!("`{shown}` exists and is not a raspc checkpoint ({e}); refusing to overwrite it").into()),
    };
    match raspc_checkpoint::Checkpoint::from_bytes_with(&bytes, &l) {
        Ok(_) => Ok(()),
        Err(_) if force && raspc_checkpoint::claims_raspc_format(&bytes) => Ok(()),
        Err(e) if raspc_checkpoint::claims_raspc_format(&bytes) => {
            Err(format!("`{shown}` is a raspc checkpoint this raspc cannot read ({e}); refusing to overwrite it (--force replaces it)").into())
        }
        Err(_) => Err(format!("`{shown}` exists and is not a raspc checkpoint; refusing to overwrite it (--force does not change this: remove it first)").into()),
    }
}

/// Checks `-o` (see [`check_output`]), then writes to a temporary file in the same directory
/// and renames it into place: a failed or interrupted write never leaves half a file, and the
/// temporary file is removed on errors and on SIGINT/SIGTERM/SIGHUP.
fn write_checkpoint(output: &Path, bytes: &[u8], force: bool) -> Result<(), Failure> {
    check_output(output, force)?;
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "checkpoint".into());
    let n = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}-{n}.raspc-tmp", std::process::id()));
    install_cleanup();
    if let Ok(mut files) = TEMP_FILES.lock() {
        files.push(tmp.clone());
    }
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, output)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    forget_temp(&tmp);
    result.map_err(|e| format!("cannot write `{}`: {e}", output.display()).into())
}

/// Flags of `simulate` checked before anything is built or allocated.
fn check_sim_args(a: &SimArgs) -> Result<(), String> {
    check_sim_shape(a.shape)?;
    let l = limits()?;
    if a.trials as u64 > l.max_samples {
        return Err(format!("--trials {} is over the budget of {} (raise it with RASPC_LIMITS=samples=N)", a.trials, l.max_samples));
    }
    finite_flag("--tolerance", a.tolerance, a.tolerance >= 0.0, ">= 0")?;
    for (flag, v) in [("--bound", a.bound), ("--x-bound", a.x_bound), ("--pl-error", a.pl_error)] {
        if let Some(x) = v {
            finite_flag(flag, x, x > 0.0, "> 0")?;
        }
    }
    Ok(())
}

/// U's shape within the `input_tokens` budget (flags, or the shape of a --target file).
fn check_sim_shape(s: simulate::Shape) -> Result<(), String> {
    let l = limits()?;
    for (flag, x) in [("--n", s.n), ("--d", s.d), ("--dv", s.dv), ("--heads", s.h)] {
        if x == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
        if x > l.max_input_tokens {
            return Err(format!("{flag} {x} is over the budget of {} (raise it with RASPC_LIMITS=input_tokens=N)", l.max_input_tokens));
        }
    }
    // U's sequence length (see simulate::Shape::seq_len), in u128: no overflow for any flags.
    let (n, d, dv, h) = (s.n as u128, s.d as u128, s.dv as u128, s.h as u128);
    let seq = (n * d + h * d * d + h * d * dv).max(h * n * n.max(d).max(dv));
    if seq > l.max_input_tokens as u128 {
        return Err(format!(
            "U for --n {} --d {} --dv {} --heads {} needs sequences of {seq} positions, over the budget of {} (raise it with RASPC_LIMITS=input_tokens=N)",
            s.n, s.d, s.dv, s.h, l.max_input_tokens
        ));
    }
    Ok(())
}

fn simulate_cmd(a: &SimArgs, target: Option<(&Path, &Path)>, out: &mut dyn Write) -> Result<(), Failure> {
    check_sim_args(a)?;
    if let Some(o) = &a.output {
        check_output(o, a.force)?;
    }
    let (instances, shape, bound, x_bound) = match target {
        Some((t, x)) => {
            let inst = simulate::load_target(t, x)?;
            let s = inst.shape();
            check_sim_shape(s).map_err(|e| format!("--target `{}`: {e}", t.display()))?;
            let b = a.bound.unwrap_or_else(|| inst.magnitude().max(1e-6));
            if inst.magnitude() > b {
                return Err(format!("--bound {b} is smaller than the largest entry {} of the target and input", inst.magnitude()).into());
            }
            (vec![inst], s, b, b)
        }
        None => {
            let b = a.bound.unwrap_or(1.0);
            let bx = a.x_bound.unwrap_or(b);
            let mut rng = verify::SplitMix(a.seed);
            let s = a.shape;
            ((0..a.trials).map(|_| simulate::Instance::random_with(s, bx, b, &mut rng)).collect::<Vec<_>>(), s, b, bx)
        }
    };
    let u = simulate::build_with(shape, a.mlp.mode(), bound, x_bound, a.pl_error)?;
    let sum = &u.compiled.summary;
    let report = u.compiled.report.clone().unwrap_or_default();
    if let Some(o) = &a.output {
        let bytes = u.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: {e}"))?;
        write_checkpoint(o, &bytes, a.force)?;
    }
    let dtype = if a.f64 { candle_core::DType::F64 } else { candle_core::DType::F32 };
    let model = raspc_runtime::Model::with_dtype(u.compiled.checkpoint.clone(), &raspc_runtime::Device::Cpu, dtype).map_err(|e| format!("internal error: {e}"))?;
    let bar = indicatif::ProgressBar::new(instances.len() as u64);
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let o = simulate::run_trials(&model, &u, &instances, a.f64, a.tolerance, &mut |k| bar.set_position(k as u64))?;
    bar.finish_and_clear();
    let s = shape;
    if a.json {
        let j = serde_json::json!({
            "n": s.n, "d": s.d, "dv": s.dv, "heads": s.h, "mlp": format!("{:?}", a.mlp).to_lowercase(),
            "dtype": if a.f64 { "f64" } else { "f32" }, "input_bound": bound, "seq_len": s.seq_len(),
            "layers": sum.layers, "attention_heads": sum.heads, "d_model": sum.d_model, "mlp_hidden": sum.mlp_hidden,
            "params": sum.params, "nonzero": sum.nonzero, "compile_ms": u.compile_ms,
            "certified_bound_f32": report.output_bound, "certified_bound_f64": report.output_bound_f64,
            "trials": o.trials, "failures": o.failures, "bound_violations": o.bound_violations,
            "max_abs_err": o.max_abs_err, "max_rel_err": o.max_rel_err, "bound": o.bound, "tolerance": a.tolerance,
        });
        let _ = writeln!(out, "{j}");
    } else {
        let xb = if x_bound != bound { format!(", X in [-{x_bound}, {x_bound}]") } else { String::new() };
        let _ = writeln!(out, "U for n={} d={} dv={} heads={} ({} MLPs, inputs in [-{bound}, {bound}]{xb}, {} positions): {sum}", s.n, s.d, s.dv, s.h, format!("{:?}", a.mlp).to_lowercase(), s.seq_len());
        let _ = writeln!(out, "compiled in {:.1} ms; certified |U - T| <= {:.3e} (f64 evaluation), {:.3e} (f32)", u.compile_ms, report.output_bound_f64, report.output_bound);
        if target.is_some() {
            let first = instances.first().ok_or_else(|| "no instance to show".to_string())?;
            let got = model.forward_real(&[first.encode()], raspc_runtime::Attention::Hard).map_err(|e| e.to_string())?;
            let rows: Vec<Vec<Vec<f64>>> = got.to_dtype(candle_core::DType::F64).and_then(|t| t.to_vec3()).map_err(|e| e.to_string())?;
            // U's readout has one row per output entry after BOS (its shape is U's own); a
            // missing one is shown as NaN rather than a panic.
            let at = |k: usize| rows.first().and_then(|r| r.get(k)).and_then(|r| r.first()).copied().unwrap_or(f64::NAN);
            for t in 0..s.h {
                let _ = writeln!(out, "head {t}: U(<T,X>) =");
                for i in 0..s.n {
                    let r: Vec<String> = (0..s.dv).map(|b| format!("{:.6}", at(1 + t * s.n * s.dv + i * s.dv + b))).collect();
                    let _ = writeln!(out, "  [{}]", r.join(", "));
                }
            }
        }
        let _ = writeln!(out, "{} trials ({}): max_abs_err {:.3e}, max_rel_err {:.3e}", o.trials, if a.f64 { "f64" } else { "f32" }, o.max_abs_err, o.max_rel_err);
        let _ = writeln!(out, "simulate: {} trials, {} failures, max_abs_err {:.3e}, bound {:.3e}", o.trials, o.failures, o.max_abs_err, o.bound);
    }
    if o.failures > 0 { Err(Failure::Silent) } else { Ok(()) }
}

fn read_checkpoint(path: &Path) -> Result<raspc_checkpoint::Checkpoint, Failure> {
    Ok(raspc_checkpoint::Checkpoint::from_file(path, &limits()?).map_err(|e| format!("`{}`: {e}", path.display()))?)
}

fn inspect_cmd(path: &Path, json: bool, layer: Option<usize>, head: Option<usize>, mlp: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let text = match layer {
        None => inspect::summary(&ck, json),
        Some(l) => {
            if head.is_none() && !mlp {
                return Err("--layer needs --head H or --mlp".to_string().into());
            }
            inspect::block(&ck, l, head, json)?
        }
    };
    let _ = write!(out, "{text}");
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn trace_cmd(
    path: &Path,
    input: &str,
    program: Option<&Path>,
    entry: Option<&str>,
    attention: AttentionArg,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
    color: bool,
) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let model = raspc_runtime::Model::new(ck.clone(), &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?;
    let mut tokens = parse_tokens("--input", input)?;
    let json_tokens = tokens.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    let states = if model.is_real() {
        let values = model.encode_real(&json_tokens).map_err(|e| e.to_string())?;
        // The interpreter sees the same numbers as floats (tokens_float).
        tokens = values.iter().map(|&v| raspc_lang::Atom::Float(v)).collect();
        model.trace_real(&values, attention_of(attention)).map_err(|e| e.to_string())?
    } else {
        let ids = model.encode(&json_tokens).map_err(|e| e.to_string())?;
        model.trace(&ids, attention_of(attention)).map_err(|e| e.to_string())?
    };
    // Real-valued models: an s-op agrees within the certified bound of the output (the bound of
    // the last s-op; earlier ones are certified tighter).
    let num_tol = if model.is_real() { ck.output.tolerance } else { 0.0 };
    // The interpreter's value of every named s-op, when the program is given.
    let mut reference: std::collections::HashMap<String, Vec<raspc_lang::Atom>> = std::collections::HashMap::new();
    if let Some(p) = program {
        let session = load(p, err, color)?;
        let (_, root) = session.entry(entry)?;
        let all = raspc_lang::interp::evaluate_all(&session.graph, root, &tokens).map_err(|e| format!("the interpreter rejects this input: {}: {}", e.label, e.message))?;
        for (id, v) in all {
            if let raspc_lang::Value::Seq(s) = v {
                reference.insert(session.graph.node(id).label.clone(), s);
            }
        }
    }
    // Which stage writes each slot.
    let mut written_at: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (l, layer) in ck.config.layers.iter().enumerate() {
        for i in &layer.head_info {
            written_at.insert(i.writes.clone(), format!("layer {l} attention"));
        }
        for i in &layer.mlp_info {
            written_at.insert(i.writes.clone(), format!("layer {l} mlp"));
        }
    }
    let mut first_divergence: Option<(String, String)> = None;
    let mut report = vec![];
    for (stage, x) in &states {
        for sop in &ck.layout.sops {
            let at = written_at.get(&sop.label).map(String::as_str).unwrap_or("embed");
            if at != stage || sop.label.starts_with('<') {
                continue;
            }
            // Rows are d_model wide and layout entries lie within d_model (validated at load):
            // `get` only turns a violation into null instead of a panic.
            let values: Vec<serde_json::Value> = x
                .iter()
                .skip(1)
                .map(|row| match &sop.encoding {
                    raspc_checkpoint::Encoding::Categorical { values } => {
                        let dims = row.get(sop.offset..sop.offset.saturating_add(values.len())).unwrap_or_default();
                        let best = dims.iter().enumerate().fold(None, |b: Option<(usize, f32)>, (i, &x)| if b.is_none_or(|(_, y)| x > y) { Some((i, x)) } else { b });
                        best.and_then(|(i, _)| values.get(i)).cloned().unwrap_or_default()
                    }
                    raspc_checkpoint::Encoding::Numerical { .. } => row.get(sop.offset).map_or(serde_json::Value::Null, |&x| serde_json::json!(x as f64)),
                })
                .collect();
            let expected = reference.get(&sop.label);
            let agrees = expected.map(|e| {
                e.len() == values.len()
                    && e.iter().zip(&values).all(|(w, g)| match (g.as_f64(), &sop.encoding) {
                        (Some(x), raspc_checkpoint::Encoding::Numerical { .. }) => w.as_f64().is_some_and(|y| (x - y).abs() <= (1e-3 * y.abs().max(1.0)).max(num_tol)),
                        _ => verify::decoded_atom(&raspc_runtime::Decoded::Value(g.clone())).py_eq(w),
                    })
            });
            if agrees == Some(false) && first_divergence.is_none() {
                first_divergence = Some((stage.clone(), sop.label.clone()));
            }
            report.push((stage.clone(), sop.label.clone(), values, expected.cloned(), agrees));
        }
    }
    if json {
        let rows: Vec<serde_json::Value> = report
            .iter()
            .map(|(stage, label, values, expected, agrees)| {
                serde_json::json!({
                    "stage": stage, "sop": label, "values": values,
                    "expected": expected.as_ref().map(|e| e.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>()),
                    "agrees": agrees,
                })
            })
            .collect();
        let fd = first_divergence.as_ref().map(|(s, l)| serde_json::json!({ "stage": s, "sop": l }));
        let _ = writeln!(out, "{}", serde_json::json!({ "trace": rows, "first_divergence": fd }));
        return Ok(());
    }
    let mut last_stage = String::new();
    for (stage, label, values, expected, agrees) in &report {
        if *stage != last_stage {
            let _ = writeln!(out, "{stage}:");
            last_stage = stage.clone();
        }
        let shown: Vec<String> = values.iter().map(|v| verify::decoded_atom(&raspc_runtime::Decoded::Value(v.clone())).repr()).collect();
        let mark = match (agrees, expected) {
            (Some(true), _) => "  (= interpreter)".to_string(),
            (Some(false), Some(e)) => {
                let first = first_divergence.as_ref().is_some_and(|(s, l)| s == stage && l == label);
                format!(
                    "  (interpreter: [{}]){}",
                    e.iter().map(raspc_lang::Atom::repr).collect::<Vec<_>>().join(", "),
                    if first { "  <-- first divergence" } else { "" }
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "  {label} = [{}]{mark}", shown.join(", "));
    }
    if program.is_some() {
        match &first_divergence {
            None => {
                let _ = writeln!(out, "trace: every s-op agrees with the interpreter");
            }
            Some((s, l)) => {
                let _ = writeln!(out, "trace: first divergence at `{l}` after {s}");
            }
        }
    }
    Ok(())
}

fn plot_cmd(path: &Path, dir: &Path, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let files = plot::plot(&ck, dir)?;
    let _ = writeln!(out, "wrote {} figures to {}", files.len(), dir.display());
    Ok(())
}

fn probe_cmd(kind: ProbeKind, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    let ProbeKind::Svflow { model, program, text, entry, seq_len, eval_window, levels, seeds, sequences, attention, attn_temp, weight_noise, json, plot: plot_dir } = kind;
    if levels.iter().any(|l| !(0.0..=1.0).contains(l)) || levels.is_empty() {
        return Err("--levels must be fractions between 0 and 1".to_string().into());
    }
    finite_flag("--attn-temp", attn_temp, attn_temp > 0.0, "> 0")?;
    finite_flag("--weight-noise", weight_noise, weight_noise >= 0.0, ">= 0")?;
    if seeds == 0 || sequences == 0 {
        return Err("--seeds and --sequences must be at least 1".to_string().into());
    }
    let budget = limits()?;
    let passes = (levels.len() as u128) * (seeds as u128) * (sequences as u128);
    if passes > budget.max_samples as u128 {
        return Err(format!(
            "--levels ({}) x --seeds ({seeds}) x --sequences ({sequences}) is {passes} forward passes, over the budget of {} (raise it with RASPC_LIMITS=samples=N)",
            levels.len(),
            budget.max_samples
        )
        .into());
    }
    if let Some(n) = seq_len
        && n > budget.max_input_tokens
    {
        return Err(format!("--seq-len {n} is over the budget of {} (raise it with RASPC_LIMITS=input_tokens=N)", budget.max_input_tokens).into());
    }
    let is_gguf = model.extension().is_some_and(|e| e == "gguf");
    let mk = |n: usize| probe::Settings {
        seq_len: n,
        eval_window: eval_window.unwrap_or((n / 4).max(1)),
        levels: levels.clone(),
        seeds,
        sequences,
        attention: attention_of(attention),
        attn_temp,
        weight_noise,
        readout_temp: 0.1,
    };
    let bar = indicatif::ProgressBar::new((levels.len() as u64) * seeds);
    // Layers with no attention heads (raspc checkpoints can have MLP-only layers).
    let mut headless: Vec<bool> = vec![];
    let (conds, layers, settings) = if is_gguf {
        if program.is_some() || weight_noise > 0.0 {
            return Err("--program and --weight-noise apply to raspc checkpoints, not to language models".to_string().into());
        }
        let lm = raspc_lm::LanguageModel::load(&model).map_err(|e| format!("`{}`: {e}", model.display()))?;
        let sample = match &text {
            Some(p) => String::from_utf8(read_input_file(p)?).map_err(|_| format!("`{}` is not valid UTF-8", p.display()))?,
            None => include_str!("sample.txt").to_string(),
        };
        let settings = mk(seq_len.unwrap_or(128));
        if settings.seq_len < 2 {
            return Err("--seq-len must be at least 2 for a language model".to_string().into());
        }
        let conds = probe::run_lm(&lm, &sample, &settings, &mut |d, _| bar.set_position(d as u64))?;
        (conds, lm.config.layers, settings)
    } else {
        let ck = read_checkpoint(&model)?;
        if ck.config.real_input.is_some() {
            return Err(format!("`{}` reads real numbers; probe svflow shuffles vocabulary tokens and needs a model with token inputs", model.display()).into());
        }
        let beta = ck.config.attention.soft_beta / attn_temp;
        if !(beta.is_finite() && beta <= budget.max_soft_beta) {
            return Err(format!(
                "--attn-temp {} makes the soft-attention beta {} (the model's {} / {}), over the budget of {} (raise it with RASPC_LIMITS=soft_beta=N)",
                num(attn_temp),
                num(beta),
                num(ck.config.attention.soft_beta),
                num(attn_temp),
                num(budget.max_soft_beta)
            )
            .into());
        }
        let session = match &program {
            Some(p) => Some(load(p, err, color)?),
            None => None,
        };
        let reference = match &session {
            Some(s) => Some((&s.graph, s.entry(entry.as_deref())?.1)),
            None => None,
        };
        let n = seq_len.unwrap_or(ck.config.max_seq_len);
        if n == 0 || n > ck.config.max_seq_len {
            return Err(format!("--seq-len {n} must be between 1 and the model's max_seq_len {}", ck.config.max_seq_len).into());
        }
        let vocab: Vec<raspc_lang::Atom> = ck
            .config
            .vocab
            .iter()
            .filter(|v| v.id != ck.config.bos_id)
            .map(|v| raspc_lang::parse_input(&format!("[{}]", v.token)).map(|mut a| a.remove(0)))
            .collect::<Result<_, _>>()?;
        let settings = mk(n);
        if program.is_none() {
            let _ = writeln!(out, "no --program: the task reference is the unperturbed model's own output (hard attention, no --attn-temp or --weight-noise) on each shuffled input");
        }
        let conds = probe::run(&ck, reference, &vocab, &settings, &mut |d, _| bar.set_position(d as u64))?;
        headless = ck.config.layers.iter().map(|l| l.heads.is_empty()).collect();
        (conds, ck.config.layers.len(), settings)
    };
    let n = settings.seq_len;
    bar.finish_and_clear();
    let _ = writeln!(out, "svflow probe: {} conditions ({} levels x {} seeds), {} sequences of {} tokens, last {} scored", conds.len(), settings.levels.len(), seeds, sequences, n, settings.eval_window);
    let _ = writeln!(out, "\ntask per level (mean over seeds):");
    let mut by_level: Vec<(f64, Vec<&probe::Condition>)> = vec![];
    for c in &conds {
        match by_level.iter_mut().find(|(l, _)| *l == c.level) {
            Some((_, v)) => v.push(c),
            None => by_level.push((c.level, vec![c])),
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    for (lv, cs) in &by_level {
        let _ = writeln!(
            out,
            "  level {lv:.2}: NLL {:.4} (perplexity {:.2}), accuracy {:.4}, ECE {:.4}",
            mean(&cs.iter().map(|c| c.nll).collect::<Vec<_>>()),
            mean(&cs.iter().map(|c| c.nll).collect::<Vec<_>>()).exp(),
            mean(&cs.iter().map(|c| c.accuracy).collect::<Vec<_>>()),
            mean(&cs.iter().map(|c| c.ece).collect::<Vec<_>>())
        );
    }
    let mut report = serde_json::Map::new();
    let mut correlations = serde_json::Map::new();
    let mut sens = serde_json::Map::new();
    // Why a layer has no value: no heads, or no finite value in any condition.
    let absent = |metric: &str, l: usize| -> Option<&'static str> {
        if headless.get(l).copied().unwrap_or(false) {
            Some("no attention heads")
        } else if conds.iter().all(|c| !c.layers.get(metric).and_then(|v| v.get(l)).is_some_and(|x| x.is_finite())) {
            Some("no finite value in any condition")
        } else {
            None
        }
    };
    let constant = |v: &[f64]| v.windows(2).all(|w| w[0] == w[1]);
    let spearman_text = |rho: f64, p: f64, a: &[f64], b: &[f64]| -> String {
        if rho.is_finite() {
            format!("{rho:.3} (p {p:.3})")
        } else if a.len() < 2 {
            "absent (fewer than 2 points)".into()
        } else if constant(a) {
            "absent (the metric is constant)".into()
        } else if constant(b) {
            "absent (the NLL is constant)".into()
        } else {
            "absent (undefined)".into()
        }
    };
    let spearman_json = |rho: f64, p: f64| -> serde_json::Value {
        if rho.is_finite() { serde_json::json!({ "rho": rho, "p": p }) } else { serde_json::json!({ "rho": null, "p": null, "absent": "constant or too short series" }) }
    };
    for metric in probe::METRICS {
        let _ = writeln!(out, "\n{metric} by layer (rows: levels):");
        for (lv, cs) in &by_level {
            let row: Vec<String> = (0..layers)
                .map(|l| {
                    let vals: Vec<f64> = cs.iter().filter_map(|c| c.layers.get(metric).and_then(|v| v.get(l)).copied()).filter(|x| x.is_finite()).collect();
                    if absent(metric, l).is_some() || vals.is_empty() { format!("{:>9}", "absent") } else { format!("{:>9.4}", mean(&vals)) }
                })
                .collect();
            let _ = writeln!(out, "  {lv:.2}: {}", row.join(" "));
        }
        let reasons: Vec<String> = (0..layers).filter_map(|l| absent(metric, l).map(|r| format!("layer {l}: {r}"))).collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "  absent: {}", reasons.join("; "));
        }
        let avg = |c: &probe::Condition| mean(&c.layers.get(metric).map_or(&[][..], Vec::as_slice).iter().copied().filter(|x| x.is_finite()).collect::<Vec<_>>());
        let (rho_c, p_c) = probe::spearman(&conds.iter().map(avg).collect::<Vec<_>>(), &conds.iter().map(|c| c.nll).collect::<Vec<_>>(), 999, 1);
        let lv_metric: Vec<f64> = by_level.iter().map(|(_, cs)| mean(&cs.iter().map(|c| avg(c)).collect::<Vec<_>>())).collect();
        let lv_nll: Vec<f64> = by_level.iter().map(|(_, cs)| mean(&cs.iter().map(|c| c.nll).collect::<Vec<_>>())).collect();
        let (rho_l, p_l) = probe::spearman(&lv_metric, &lv_nll, 999, 2);
        let cond_metric: Vec<f64> = conds.iter().map(avg).collect();
        let cond_nll: Vec<f64> = conds.iter().map(|c| c.nll).collect();
        let _ = writeln!(
            out,
            "  Spearman rho with NLL: across conditions {}, across levels {}",
            spearman_text(rho_c, p_c, &cond_metric, &cond_nll),
            spearman_text(rho_l, p_l, &lv_metric, &lv_nll)
        );
        let s = probe::sensitivity(&conds, metric, layers);
        let shown: Vec<String> = s
            .iter()
            .enumerate()
            .map(|(l, (z, regime))| match absent(metric, l) {
                Some(r) => format!("absent ({r})"),
                None => format!("{z:.2} ({regime})"),
            })
            .collect();
        let _ = writeln!(out, "  sensitivity z by layer: {}", shown.join(", "));
        correlations.insert(metric.into(), serde_json::json!({ "conditions": spearman_json(rho_c, p_c), "levels": spearman_json(rho_l, p_l) }));
        sens.insert(
            metric.into(),
            serde_json::json!(s
                .iter()
                .enumerate()
                .map(|(l, (z, regime))| match absent(metric, l) {
                    Some(r) => serde_json::json!({ "z": null, "absent": r }),
                    None => serde_json::json!({ "z": if z.is_finite() { serde_json::json!(z) } else { serde_json::json!(z.to_string()) }, "regime": regime }),
                })
                .collect::<Vec<_>>()),
        );
    }
    if let Some(path) = json {
        report.insert("conditions".into(), serde_json::to_value(&conds).map_err(|e| e.to_string())?);
        report.insert("spearman".into(), serde_json::Value::Object(correlations));
        report.insert("sensitivity".into(), serde_json::Value::Object(sens));
        std::fs::write(&path, serde_json::Value::Object(report).to_string()).map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        let _ = writeln!(out, "\nreport written to {}", path.display());
    }
    if let Some(dir) = plot_dir {
        let files = plot::probe_plots(&conds, layers, &dir)?;
        let _ = writeln!(out, "wrote {} plots to {}", files.len(), dir.display());
    }
    Ok(())
}
