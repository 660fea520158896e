//! The native half of the `raspc` Python package (`raspc._raspc`). The Python half
//! (`python/raspc/`) wraps it: everything that crosses the boundary is JSON text, raw
//! little-endian f32 bytes or plain numbers, and every failure is a `raspc.RaspcError` carrying
//! the diagnostic text `raspc` itself would print.
//!
//! Front end and compiler run on a worker thread with a 256 MiB stack (as the CLI does), so a
//! deeply nested program cannot overflow the interpreter's stack, and a panic becomes an error.

use candle_core::Tensor;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use raspc::pythonic;
use raspc_lang::{Atom, DiskLoader};
use raspc_runtime::{Attention, Decoded, Model};

create_exception!(_raspc, RaspcError, PyValueError, "An error reported by raspc (a ValueError); the message is raspc's diagnostic text.");

fn err(msg: impl Into<String>) -> PyErr {
    // Rendered diagnostics end with blank lines, which a traceback shows as they are.
    RaspcError::new_err(pythonic(msg.into().trim_end()))
}

/// The error for a failure whose text rendered `diags` (the program's diagnostics, as the
/// command line's `--json` writes them): besides the message it carries them as data, and the
/// first error's `code` and its place (`file`, `line`, `column`, `end_line`, `end_column`;
/// 1-based, columns in characters), so a notebook can point at the line. Otherwise those are None.
fn err_at(py: Python<'_>, msg: String, diags: Vec<serde_json::Value>) -> PyErr {
    let e = err(msg);
    let attach = || -> PyResult<()> {
        let v = e.value(py);
        let Some(first) = diags.iter().find(|d| d["severity"] == "error") else { return Ok(()) };
        v.setattr("code", first["code"].as_str())?;
        if let Some(at) = first["labels"].as_array().and_then(|ls| ls.iter().find(|l| l["primary"] == true)) {
            v.setattr("file", at["file"].as_str())?;
            for key in ["line", "column", "end_line", "end_column"] {
                v.setattr(key, at[key].as_u64())?;
            }
        }
        let data = py.import("json")?.call_method1("loads", (serde_json::Value::Array(diags.clone()).to_string(),))?;
        v.setattr("diagnostics", data)
    };
    // Only the attributes can fail here (never in practice); the message stands regardless.
    let _ = attach();
    e
}

/// Runs `f` on a thread with a large stack (a panic becomes an error), for long work
/// (`compile`, `universal`, `verify`): waits in slices of 100 ms without the GIL and checks
/// for Python signals between them, so Ctrl-C raises KeyboardInterrupt at once; the worker
/// is told to stop (`raspc_compiler::cancel`) and does at its next check.
fn big_stack_interruptible<T: Send + 'static>(py: Python<'_>, f: impl FnOnce() -> Result<T, String> + Send + 'static) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    // Set on Ctrl-C: the worker's loops (lowering, emitting, verifying) see it and stop, so an
    // interrupted call does not go on using the machine (helper c13).
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = cancel.clone();
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            raspc_compiler::cancel::watch(watched);
            raspc::diagnostics::record(true);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r.map(|r| r.map_err(|m| (m, raspc::diagnostics::record(false)))));
        })
        .map_err(|e| err(format!("cannot start a worker thread: {e}")))?;
    let mut rx = rx;
    loop {
        let (got, back) = py.detach(move || (rx.recv_timeout(std::time::Duration::from_millis(100)), rx));
        rx = back;
        match got {
            Ok(Ok(r)) => return r.map_err(|(m, diags)| err_at(py, m, diags)),
            Ok(Err(p)) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                return Err(err(format!("internal error (raspc panicked): {msg}")));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(e);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(err("internal error: the worker thread stopped without a result")),
        }
    }
}

/// What `compile` needs to rebuild the program (for `verify`): a program is re-evaluated on
/// demand, since its session is tied to the thread that evaluated it.
#[derive(Clone, Debug)]
struct Source {
    text: String,
    path: Option<String>,
    entry: Option<String>,
    opts: raspc_compiler::Options,
}

/// Evaluates the program and finds the entry; errors are rendered diagnostics.
fn session_of(src: &Source) -> Result<(raspc_lang::Session, raspc_lang::NodeId), String> {
    let name = src.path.clone().unwrap_or_else(|| "<source>".into());
    let (sources, r) = raspc_lang::evaluate_program(&name, src.path.as_deref().map(std::path::Path::new), &src.text, &DiskLoader);
    let mut session = r.map_err(|d| raspc::render(&sources, &d, false))?;
    let (_, root) = match session.compile_entry(src.entry.as_deref()) {
        Ok(r) => r,
        Err(msg) => return Err(raspc::entry_error_text(&session, src.entry.as_deref(), msg)),
    };
    Ok((session, root))
}

/// The checkpoint, its summary, and what `raspc compile` would print besides (each a warning
/// for Python): the program's notes, a rejection of some sampled inputs by the interpreter, an
/// output that is one number of two types, a certified bound that is loose.
fn compile_source(src: &Source) -> Result<(raspc_checkpoint::Checkpoint, String, Vec<String>), String> {
    let (session, root) = session_of(src)?;
    let shown = src.path.clone().unwrap_or_else(|| "<source>".into());
    let mut warnings: Vec<String> = raspc::note_lines(&session.sources, &session, &shown).into_iter().map(|n| pythonic(&n)).collect();
    match raspc_compiler::compile(&session.graph, root, &src.opts, &raspc::program_hash(&session)) {
        Ok(c) => {
            let r = if c.report.is_some() {
                raspc::verify::Rejections::default()
            } else {
                raspc::verify::sampled_rejections(&session.graph, root, &src.opts.vocab, src.opts.max_len, src.opts.causal)
            };
            let warning = if r.total() > 0 {
                let lines: Vec<String> = r.lines().iter().map(|l| format!("\n  {l}")).collect();
                format!(
                    "the interpreter rejects {} of {} sampled inputs (the model's output on such inputs means nothing; verify() counts them as rejected):{}",
                    r.total(),
                    raspc::verify::REJECTION_SAMPLES,
                    lines.concat()
                )
            } else {
                String::new()
            };
            warnings.extend((!warning.is_empty()).then_some(warning));
            warnings.extend(raspc::mixed_type_warning(&session.graph, root, &c, &src.opts.vocab, src.opts.max_len).map(|w| pythonic(w.trim_start_matches("warning: "))));
            warnings.extend(c.report.as_ref().and_then(|r| r.loose_bound_warning()).map(|w| pythonic(w.trim_start_matches("warning: "))));
            Ok((c.checkpoint, c.summary.to_string(), warnings))
        }
        Err(d) => Err(raspc::render(&session.sources, &d, false)),
    }
}

fn attention(name: &str) -> PyResult<Attention> {
    match name {
        "hard" => Ok(Attention::Hard),
        "soft" => Ok(Attention::Soft),
        other => Err(err(format!("attention must be \"hard\" or \"soft\", not {other:?}"))),
    }
}

/// Inputs of one length: their indices in the batch, and their token ids (BOS first) or, for
/// real-valued models, their numbers.
type Group = (Vec<usize>, Vec<Vec<u32>>, Vec<Vec<f64>>);

/// A compiled or loaded checkpoint (the Python class `raspc.Model` wraps it).
#[pyclass(module = "raspc._raspc")]
struct NativeModel {
    model: Model,
    source: Option<Source>,
    summary: String,
}

impl NativeModel {
    fn new(ck: raspc_checkpoint::Checkpoint, source: Option<Source>) -> PyResult<NativeModel> {
        let summary = raspc_compiler::summarize(&ck).to_string();
        let model = Model::new(ck, &raspc_runtime::Device::Cpu).map_err(|e| err(e.to_string()))?;
        Ok(NativeModel { model, source, summary })
    }

    /// Runs every group of equal-length inputs as one batch and turns each batch's readout into
    /// one JSON value per input (`each`), returned in input order as a JSON array.
    fn per_input(&self, py: Python<'_>, inputs_json: &str, attention_name: &str, each: impl Fn(&Tensor) -> PyResult<Vec<serde_json::Value>>) -> PyResult<String> {
        let mode = attention(attention_name)?;
        let inputs: Vec<Vec<serde_json::Value>> = serde_json::from_str(inputs_json).map_err(|e| err(format!("inputs must be lists of tokens: {e}")))?;
        let mut out = vec![serde_json::Value::Null; inputs.len()];
        for (idx, ids, vals) in self.groups(&inputs)? {
            let r = py.detach(|| if self.model.is_real() { self.model.forward_real(&vals, mode) } else { self.model.forward(&ids, mode) });
            let r = r.map_err(|e| err(e.to_string()))?;
            for (i, v) in idx.into_iter().zip(each(&r)?) {
                out[i] = v;
            }
        }
        Ok(serde_json::Value::Array(out).to_string())
    }

    /// Inputs (a JSON array of arrays of atoms) grouped by length.
    fn groups(&self, inputs: &[Vec<serde_json::Value>]) -> PyResult<Vec<Group>> {
        let mut by_len: std::collections::BTreeMap<usize, Group> = Default::default();
        for (i, inp) in inputs.iter().enumerate() {
            let g = by_len.entry(inp.len()).or_default();
            g.0.push(i);
            let what = |e: raspc_runtime::RuntimeError| err(format!("input {i}: {e}"));
            if self.model.is_real() {
                g.2.push(self.model.encode_real(inp).map_err(what)?);
            } else {
                g.1.push(self.model.encode(inp).map_err(what)?);
            }
        }
        Ok(by_len.into_values().collect())
    }
}

#[pymethods]
impl NativeModel {
    /// The checkpoint file's bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.model.checkpoint.to_bytes().map_err(|e| err(e.to_string()))?;
        Ok(PyBytes::new(py, &b))
    }

    fn config_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.model.checkpoint.config).map_err(|e| err(e.to_string()))
    }

    fn layout_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.model.checkpoint.layout).map_err(|e| err(e.to_string()))
    }

    fn output_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.model.checkpoint.output).map_err(|e| err(e.to_string()))
    }

    fn summary(&self) -> String {
        self.summary.clone()
    }

    fn program_hash(&self) -> String {
        self.model.checkpoint.program_hash.clone()
    }

    fn has_program(&self) -> bool {
        self.source.is_some()
    }

    /// Every tensor: (name, shape, little-endian f32 bytes), in name order.
    fn tensors<'py>(&self, py: Python<'py>) -> Vec<(String, Vec<usize>, Bound<'py, PyBytes>)> {
        self.model
            .checkpoint
            .tensors
            .iter()
            .map(|(n, t)| {
                let bytes: Vec<u8> = t.data.iter().flat_map(|x| x.to_le_bytes()).collect();
                (n.clone(), t.shape.clone(), PyBytes::new(py, &bytes))
            })
            .collect()
    }

    /// Runs a batch (JSON: an array of inputs, each an array of atoms or numbers) and returns the
    /// decoded outputs as JSON, one array per input. Inputs of equal length run as one batch.
    fn run(&self, py: Python<'_>, inputs_json: &str, attention_name: &str) -> PyResult<String> {
        self.per_input(py, inputs_json, attention_name, |t| {
            let decoded = self.model.decode(t).map_err(|e| err(e.to_string()))?;
            Ok(decoded.iter().map(|d| serde_json::Value::Array(d.iter().map(Decoded::to_json).collect())).collect())
        })
    }

    /// The raw readout of each input (`[len + 1, readout_dims]`, BOS first), as JSON.
    fn readout(&self, py: Python<'_>, inputs_json: &str, attention_name: &str) -> PyResult<String> {
        self.per_input(py, inputs_json, attention_name, |t| {
            let rows: Vec<Vec<Vec<f64>>> = t.to_dtype(raspc_runtime::DType::F64).and_then(|t| t.to_vec3()).map_err(|e| err(e.to_string()))?;
            Ok(rows.into_iter().map(|row| serde_json::json!(row)).collect())
        })
    }

    /// Decodes one readout (`[len + 1, dims]` row-major f64 values, BOS first) as `raspc run`
    /// does; returns JSON.
    fn decode(&self, values: Vec<f64>, len: usize) -> PyResult<String> {
        let dims = self.model.checkpoint.config.readout_dims;
        if values.len() != (len + 1) * dims {
            return Err(err(format!("decode: expected {} numbers ([{} + 1, {dims}]), got {}", (len + 1) * dims, len, values.len())));
        }
        let t = Tensor::from_vec(values, (1, len + 1, dims), &raspc_runtime::Device::Cpu).map_err(|e| err(e.to_string()))?;
        let d = self.model.decode(&t).map_err(|e| err(e.to_string()))?;
        Ok(serde_json::Value::Array(d[0].iter().map(Decoded::to_json).collect()).to_string())
    }

    /// Compares the model with the interpreter (`raspc verify`). Returns a JSON report.
    #[pyo3(signature = (samples, seed, modes, exhaustive=false))]
    fn verify(&self, py: Python<'_>, samples: usize, seed: u64, modes: Vec<String>, exhaustive: bool) -> PyResult<String> {
        let Some(src) = self.source.clone() else {
            return Err(err("verify needs the program, and this model has none (it was loaded from a checkpoint, copied or unpickled (a copy keeps the weights only), or built by raspc.universal): compile it with raspc.compile; for U, compare Universal.simulate with a direct computation"));
        };
        let modes: Vec<Attention> = modes.iter().map(|m| attention(m)).collect::<PyResult<_>>()?;
        // The CLI's budget (RASPC_LIMITS=samples=N raises it), before anything is allocated.
        let budget = raspc::limits().map_err(err)?.max_samples;
        if !exhaustive && samples as u64 > budget {
            return Err(err(format!("samples={samples} is over the budget of {budget} (raise it with the environment variable RASPC_LIMITS=samples=N)")));
        }
        let ck = self.model.checkpoint.clone();
        let r = big_stack_interruptible(py, move || {
            let (session, root) = session_of(&src)?;
            // The program is evaluated again from its files: verify only what was compiled.
            if raspc::program_hash(&session) != ck.program_hash {
                return Err("the program's files changed since it was compiled (a loaded file was edited, moved or deleted): compile it again to verify it".to_string());
            }
            let model = Model::new(ck, &raspc_runtime::Device::Cpu).map_err(|e| e.to_string())?;
            let show = |v: &[Atom]| serde_json::Value::Array(v.iter().map(Atom::to_json).collect());
            if model.is_real() {
                let r = raspc::verify::verify_real(&session.graph, root, &model, samples, seed, &mut |_| {})?;
                let ex: Vec<_> = r
                    .examples
                    .iter()
                    .map(|m| serde_json::json!({"input": show(&m.input), "expected": show(&m.expected), "got": m.got.iter().map(Decoded::to_json).collect::<Vec<_>>()}))
                    .collect();
                return Ok(serde_json::json!({
                    "asked": samples, "checked": r.checked, "failed": r.failed, "ok": r.failed == 0 && r.checked == samples, "max_err": r.max_err, "bound": r.bound, "interpreter_rounding": r.max_slack,
                    "rejected": r.rejections.total(), "rejections": r.rejections.lines(), "examples": ex,
                }));
            }
            let inputs = if exhaustive { raspc::verify::Inputs::Exhaustive } else { raspc::verify::Inputs::Random { count: samples, seed } };
            let seqs = raspc::verify::generate(&inputs, src.opts.vocab.len(), src.opts.max_len)?;
            let asked = seqs.len();
            let r = raspc::verify::verify(&session.graph, root, &model, &src.opts.vocab, &seqs, &modes, &mut |_| {})?;
            let per_mode: serde_json::Map<String, serde_json::Value> =
                r.per_mode.iter().map(|(m, f)| (if *m == Attention::Hard { "hard" } else { "soft" }.to_string(), serde_json::json!(f))).collect();
            let ex: Vec<_> = r
                .examples
                .iter()
                .map(|m| {
                    serde_json::json!({"attention": if m.attention == Attention::Hard { "hard" } else { "soft" },
                            "input": show(&m.input), "expected": show(&m.expected), "got": m.got.iter().map(Decoded::to_json).collect::<Vec<_>>()})
                })
                .collect();
            Ok(serde_json::json!({
                "asked": asked, "checked": r.checked, "failed": r.failed, "ok": r.failed == 0 && r.checked == asked, "per_mode": per_mode,
                "rejected": r.rejections.total(), "rejections": r.rejections.lines(), "examples": ex,
            }))
        })?;
        Ok(r.to_string())
    }

    /// Writes the checkpoint to `path` as `raspc compile -o` does: never over a file that is not
    /// a raspc checkpoint (`force`: also over one this raspc cannot read), atomically.
    fn save(&self, path: std::path::PathBuf, force: bool) -> PyResult<()> {
        let b = self.model.checkpoint.to_bytes().map_err(|e| err(e.to_string()))?;
        raspc::save_checkpoint(&path, &b, force).map_err(err)
    }

    /// Writes the ONNX graph to `path` (replacing only an ONNX file raspc wrote); returns it.
    fn save_onnx<'py>(&self, py: Python<'py>, path: std::path::PathBuf, attention_name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let mode = attention(attention_name)?;
        let b = raspc::onnx::export(&self.model.checkpoint, mode).map_err(err)?;
        raspc::save_onnx(&path, &b).map_err(err)?;
        Ok(PyBytes::new(py, &b))
    }

    /// Writes the model as an ONNX graph (see `raspc export`).
    fn to_onnx_bytes<'py>(&self, py: Python<'py>, attention_name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let mode = attention(attention_name)?;
        let b = raspc::onnx::export(&self.model.checkpoint, mode).map_err(err)?;
        Ok(PyBytes::new(py, &b))
    }
}

/// `raspc.compile`: `vocab_json` is a JSON array of tokens (empty for real-valued inputs).
#[pyfunction]
#[pyo3(signature = (source, vocab_json, max_len, causal=false, input_bounds=None, entry=None, path=None, mlp="relu", numerical=vec![], categorical=vec![], input_grid=None, pl_error=None))]
#[allow(clippy::too_many_arguments)]
fn compile(
    py: Python<'_>,
    source: String,
    vocab_json: Option<String>,
    max_len: usize,
    causal: bool,
    input_bounds: Option<String>,
    entry: Option<String>,
    path: Option<String>,
    mlp: &str,
    numerical: Vec<String>,
    categorical: Vec<String>,
    input_grid: Option<String>,
    pl_error: Option<f64>,
) -> PyResult<(NativeModel, String, Vec<String>)> {
    let mlp = match mlp {
        "relu" => raspc_compiler::real::MlpMode::Relu,
        "gated" => raspc_compiler::real::MlpMode::Gated,
        other => return Err(err(format!("mlp must be \"relu\" or \"gated\", not {other:?}"))),
    };
    let real = match &input_bounds {
        Some(b) => {
            let (lo, hi, blocks) = raspc::parse_bounds(b).map_err(err)?;
            Some(raspc_compiler::real::RealOptions { lo, hi, blocks, mlp, pl_error, f32_inputs: false, grids: vec![] })
        }
        None if pl_error.is_some() => return Err(err("pl_error is for real-valued programs (input_bounds)")),
        None => None,
    };
    let vocab = match (&vocab_json, &real, &input_grid) {
        (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => return Err(err("give one of vocab, input_grid and input_bounds")),
        (None, None, Some(g)) => raspc::args::grid(g).map_err(|e| err(e.replace("--input-grid", "input_grid").replace("LO,HI,STEP", "\"LO,HI,STEP\" or (lo, hi, step)")))?,
        (Some(_), Some(_), None) => return Err(err("give vocab (token inputs) or input_bounds (real-valued inputs), not both")),
        (None, Some(_), None) => vec![],
        (Some(v), None, None) => raspc_lang::parse_input(v).map_err(|m| err(format!("bad vocab: {m}")))?,
        (None, None, None) => return Err(err("give vocab (the tokens the model accepts), input_grid or input_bounds (real-valued inputs)")),
    };
    if vocab.is_empty() && real.is_none() {
        return Err(err("vocab is empty: give the tokens the model must accept"));
    }
    if let Some(e) = raspc::vocab_duplicate("vocab", &vocab) {
        return Err(err(e));
    }
    if max_len == 0 || max_len > 4096 {
        return Err(err(format!("max_len must be between 1 and 4096 (got {max_len})")));
    }
    let mut opts = raspc_compiler::Options { vocab, max_len, causal, real, ..Default::default() };
    opts.numerical.extend(numerical);
    opts.categorical.extend(categorical);
    if let Some(both) = opts.numerical.intersection(&opts.categorical).next() {
        return Err(err(format!("`{both}` is given both encodings")));
    }
    let src = Source { text: source, path, entry, opts };
    let s2 = src.clone();
    let (ck, summary, warnings) = big_stack_interruptible(py, move || compile_source(&s2))?;
    let m = NativeModel::new(ck, Some(src))?;
    Ok((m, summary, warnings))
}

/// `raspc.load`: the file checked as `raspc run` checks it (a regular file within the
/// `file_bytes` budget) before it is read.
#[pyfunction]
fn load_file(path: std::path::PathBuf) -> PyResult<NativeModel> {
    let limits = raspc_checkpoint::Limits::from_env().map_err(|e| err(e.to_string()))?;
    let ck = raspc_checkpoint::Checkpoint::from_file(&path, &limits).map_err(|e| err(format!("`{}`: {e}", path.display())))?;
    NativeModel::new(ck, None)
}

/// `raspc.compile_file`'s read: as the command line reads a program (a regular file, not a
/// device or a pipe, within the `text_bytes` budget), checked before reading.
#[pyfunction]
fn read_program_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Py<pyo3::types::PyBytes>> {
    let bytes = py.detach(|| raspc::read_input_file(&path)).map_err(err)?;
    Ok(pyo3::types::PyBytes::new(py, &bytes).unbind())
}

/// `raspc.from_bytes` (a checkpoint file's bytes).
#[pyfunction]
fn load_bytes(bytes: &[u8]) -> PyResult<NativeModel> {
    let ck = raspc_checkpoint::Checkpoint::from_bytes(bytes).map_err(|e| err(e.to_string()))?;
    NativeModel::new(ck, None)
}

/// The universal simulator U for the given shapes: (model, certified bound in f32). A's entries
/// in [-bound, bound], X's in [-x_bound, x_bound], V's in [-v_bound, v_bound] (both default to
/// `bound`).
/// `split`: U on the split input (`universal_split`, docs/universal-simulator.md "Split
/// scores"); the grid exponent e of the high parts is returned (None for the plain layout).
#[pyfunction]
#[pyo3(signature = (n, d, dv, heads, mlp="gated", bound=1.0, x_bound=None, v_bound=None, split=false))]
#[allow(clippy::too_many_arguments)]
fn universal(
    py: Python<'_>,
    n: usize,
    d: usize,
    dv: usize,
    heads: usize,
    mlp: &str,
    bound: f64,
    x_bound: Option<f64>,
    v_bound: Option<f64>,
    split: bool,
) -> PyResult<(NativeModel, f64, String, Option<i32>)> {
    let mode = match mlp {
        "relu" => raspc_compiler::real::MlpMode::Relu,
        "gated" => raspc_compiler::real::MlpMode::Gated,
        other => return Err(err(format!("mlp must be \"relu\" or \"gated\", not {other:?}"))),
    };
    let shape = raspc::simulate::Shape { n, d, dv, h: heads };
    let bounds = raspc::simulate::Bounds { x: x_bound.unwrap_or(bound), a: bound, v: v_bound.unwrap_or(bound) };
    let layout = if split { raspc::simulate::Layout::split_for(shape, bounds) } else { raspc::simulate::Layout::Plain };
    let u = big_stack_interruptible(py, move || raspc::simulate::build_layout(shape, mode, bounds, None, false, layout))?;
    let b = u.compiled.report.as_ref().map_or(f64::NAN, |r| r.output_bound);
    let summary = u.compiled.summary.to_string();
    let e = match layout {
        raspc::simulate::Layout::Split { e } => Some(e),
        raspc::simulate::Layout::Plain => None,
    };
    Ok((NativeModel::new(u.compiled.checkpoint, None)?, b, summary, e))
}

/// An atom as JSON for Python: a non-finite float (which JSON cannot hold) as `{"float": "inf"}`
/// (or `"-inf"`, `"nan"`), which the Python side turns back into the float.
fn atom_json(a: &Atom) -> serde_json::Value {
    match a {
        Atom::Float(f) if !f.is_finite() => serde_json::json!({ "float": if f.is_nan() { "nan" } else if *f > 0.0 { "inf" } else { "-inf" } }),
        a => a.to_json(),
    }
}

/// `raspc.eval`: the reference interpreter on one input (a JSON array of atoms), as `raspc eval`
/// runs it; the output as JSON (a selector as rows of 0/1). Errors are the rendered diagnostics,
/// with the input; the program's notes come back as warnings.
#[pyfunction]
#[pyo3(signature = (source, input_json, entry=None, path=None, causal=false))]
fn eval(py: Python<'_>, source: String, input_json: String, entry: Option<String>, path: Option<String>, causal: bool) -> PyResult<(String, Vec<String>)> {
    let tokens = raspc::parse_tokens("input", &input_json).map_err(err)?;
    let budget = raspc::limits().map_err(err)?.max_input_tokens;
    if tokens.len() > budget {
        return Err(err(format!("the input has {} tokens, over the budget of {budget} (raise it with RASPC_LIMITS=input_tokens=N)", tokens.len())));
    }
    big_stack_interruptible(py, move || {
        let name = path.clone().unwrap_or_else(|| "<source>".into());
        let (sources, r) = raspc_lang::evaluate_program(&name, path.as_deref().map(std::path::Path::new), &source, &DiskLoader);
        let session = r.map_err(|d| raspc::render(&sources, &d, false))?;
        let notes: Vec<String> = raspc::note_lines(&sources, &session, &name).into_iter().map(|n| pythonic(&n)).collect();
        let (_, node) = session.entry(entry.as_deref()).map_err(|msg| raspc::entry_error_text(&session, entry.as_deref(), msg))?;
        let shown = || tokens.iter().map(Atom::repr).collect::<Vec<_>>().join(", ");
        // Under `causal`, the program on each prefix (what a causal model outputs).
        let value =
            if causal { raspc::verify::expected_or_error(&session.graph, node, &tokens, true).map(raspc_lang::Value::Seq) } else { raspc_lang::evaluate(&session.graph, node, &tokens) };
        match value {
            Ok(raspc_lang::Value::Seq(v)) => Ok((serde_json::Value::Array(v.iter().map(atom_json).collect()).to_string(), notes)),
            Ok(sel) => Ok((sel.to_json().to_string(), notes)),
            Err(e) => Err(raspc::eval_failure_text(&session, &e, &format!("[{}]", shown()), None, false)),
        }
    })
}

/// ⟨T, X⟩ for U (zero-padded to its sequence length): `x` n×d, `a` h×d×d, `v` h×d×dv; with
/// `split` = e, in the split layout on the grid 2^e.
#[pyfunction]
#[pyo3(signature = (x, a, v, split=None))]
fn universal_encode(x: Vec<Vec<f64>>, a: Vec<Vec<Vec<f64>>>, v: Vec<Vec<Vec<f64>>>, split: Option<i32>) -> Vec<f64> {
    let layout = split.map_or(raspc::simulate::Layout::Plain, |e| raspc::simulate::Layout::Split { e });
    raspc::simulate::Instance { x, a, v }.encode_in(layout)
}

#[pymodule]
fn _raspc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let error = m.py().get_type::<RaspcError>();
    // Every RaspcError has these; an error about a place in a program sets them (`err_at`).
    for key in ["code", "file", "line", "column", "end_line", "end_column", "diagnostics"] {
        error.setattr(key, m.py().None())?;
    }
    m.add("RaspcError", error)?;
    m.add_class::<NativeModel>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(eval, m)?)?;
    m.add_function(wrap_pyfunction!(load_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(load_file, m)?)?;
    m.add_function(wrap_pyfunction!(read_program_file, m)?)?;
    m.add_function(wrap_pyfunction!(universal, m)?)?;
    m.add_function(wrap_pyfunction!(universal_encode, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
