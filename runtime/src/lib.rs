//! raspc-runtime: loads a raspc checkpoint and runs it on candle.
//!
//! Knows nothing of the compiler: the checkpoint file (docs/checkpoint-format.md) is the whole
//! contract. [`Model::forward`] runs a batch of equal-length token-id sequences (BOS first) and
//! returns the readout; [`Model::run`] does the whole job for raw inputs: encode (BOS added),
//! forward, decode (BOS stripped).
//!
//! Attention: `Hard` averages the value vectors of every key whose score is within the
//! checkpoint's `tie_tolerance` of the row maximum; `Soft` is softmax(β·scores) with the
//! checkpoint's β. Causal checkpoints mask keys after the query. Scores are plain dot products
//! (no 1/√d scaling). CPU by default; with the `cuda` feature, [`device`] can return a GPU.
//!
//! Two backends compute the same thing ([`Backend`]): on the CPU, plain forward passes run on
//! the sparse kernels of [`fast`] (the default); candle runs CUDA models, traces and captures,
//! and CPU models switched to it with [`Model::set_backend`] (the cross-check). candle's tensors
//! of a CPU model are built on first use. Under hard attention, candle runs a head whose every
//! query keeps one key at positions alone (the fast backend's position patterns, computed on the
//! CPU for every device) as a row lookup instead of `[t, t]` scores: the same numbers.

use candle_core::D;
pub use candle_core::{DType, Device, Tensor};

pub mod fast;
pub mod svflow;
use raspc_checkpoint::{Checkpoint, CheckpointError, Encoding};
use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("input token {token} at position {position} is not in the model's vocabulary ({vocab}){hint}")]
    UnknownToken { position: usize, token: String, vocab: String, hint: String },
    #[error("input has {len} tokens but the model was compiled for at most {max} (--max-len)")]
    TooLong { len: usize, max: usize },
    #[error("the input is empty; RASP programs need at least one token")]
    Empty,
    #[error("all sequences of a batch must have the same length ({0})")]
    Ragged(String),
    #[error("device: {0}")]
    Device(String),
    #[error("input at position {position} is {value}; this model reads numbers in [{lo}, {hi}]")]
    BadNumber { position: usize, value: String, lo: f64, hi: f64 },
    #[error("this model reads {0} inputs")]
    WrongInputKind(&'static str),
    #[error("a readout row has {found} dims but the output encoding has {expected}")]
    ReadoutWidth { found: usize, expected: usize },
    #[error("the forward pass produced a non-finite activation (NaN or infinity), first in {stage}: the checkpoint's weights overflow f32 on this input")]
    NonFiniteActivation { stage: String },
    #[error("token id {id} is not in the model's vocabulary (ids 0..{vocab})")]
    BadId { id: u32, vocab: usize },
}

/// Attention semantics used for a forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    Hard,
    Soft,
}

/// `cpu`, or `cuda` (only in builds with the `cuda` feature).
pub fn device(name: &str) -> Result<Device, RuntimeError> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => {
            if cfg!(feature = "cuda") {
                Device::new_cuda(0).map_err(|e| {
                    // candle attaches a backtrace to driver errors; the user needs the error itself.
                    let e = match e {
                        candle_core::Error::WithBacktrace { inner, .. } => *inner,
                        e => e,
                    };
                    RuntimeError::Device(format!("cannot open CUDA device 0: {e}"))
                })
            } else {
                Err(RuntimeError::Device("this raspc was built without CUDA support; rebuild with `--features cuda`".into()))
            }
        }
        other => Err(RuntimeError::Device(format!("unknown device `{other}` (expected cpu or cuda)"))),
    }
}

#[derive(Debug)]
struct Head {
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    w_o: Tensor,
}

#[derive(Debug)]
struct Mlp {
    w_in: Tensor,
    b_in: Tensor,
    w_out: Tensor,
    b_out: Tensor,
    /// Gated (ReGLU) MLPs: `W_gate`, `b_gate`.
    gate: Option<(Tensor, Tensor)>,
}

#[derive(Debug)]
struct Layer {
    heads: Vec<Head>,
    mlp: Option<Mlp>,
}

/// One decoded output value.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// A categorical output: the value (JSON atom) of the largest readout dim.
    Value(serde_json::Value),
    /// A numerical output: the number, and the nearest of the output's known values when it
    /// lies within the checkpoint's tolerance.
    Number { raw: f64, snapped: Option<serde_json::Value> },
}

impl Decoded {
    /// The value as JSON: categorical values as they are, numbers snapped when possible.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Decoded::Value(v) => v.clone(),
            Decoded::Number { snapped: Some(v), .. } => v.clone(),
            Decoded::Number { raw, .. } => serde_json::json!(raw),
        }
    }
}

/// What one head did, for the probes: `weights[i][j]` multiplies key j's value at query i (0 for
/// keys a causal mask hides); `scores[j]` is key j's conditional score `(x_j W_V) W_O`.
#[derive(Clone, Debug)]
pub struct HeadCapture {
    pub weights: Vec<Vec<f64>>,
    pub scores: Vec<Vec<f64>>,
}

/// One layer's attention, captured: the residual entering it (`[len][d_model]`), each head,
/// and the attention sublayer's output (what it adds to the residual).
#[derive(Clone, Debug)]
pub struct LayerCapture {
    pub input: Vec<Vec<f64>>,
    pub heads: Vec<HeadCapture>,
    pub attention_output: Vec<Vec<f64>>,
}

/// The residual stream after one stage of a forward pass: its name and `[len][d_model]` values.
pub type Stage = (String, Vec<Vec<f32>>);

/// The candle tensors of a checkpoint (dense, in the model's dtype, on its device).
#[derive(Debug)]
struct CandleWeights {
    embed_token: Tensor,
    embed_pos: Tensor,
    embed_value: Option<Tensor>,
    layers: Vec<Layer>,
    readout: Tensor,
}

impl CandleWeights {
    fn new(checkpoint: &Checkpoint, device: &Device, dtype: DType) -> Result<CandleWeights, RuntimeError> {
        let t = |name: &str| -> Result<Tensor, RuntimeError> {
            let x = checkpoint.tensors.get(name).ok_or_else(|| CheckpointError::MissingTensor(name.to_string()))?;
            Ok(Tensor::from_slice(&x.data, x.shape.as_slice(), device)?.to_dtype(dtype)?)
        };
        let mut layers = vec![];
        for (l, lc) in checkpoint.config.layers.iter().enumerate() {
            let mut heads = vec![];
            for h in 0..lc.heads.len() {
                let n = |w: &str| raspc_checkpoint::names::head(l, h, w);
                heads.push(Head { w_q: t(&n("w_q"))?, w_k: t(&n("w_k"))?, w_v: t(&n("w_v"))?, w_o: t(&n("w_o"))? });
            }
            let mlp = match &lc.mlp {
                Some(_) => {
                    let n = |w: &str| raspc_checkpoint::names::mlp(l, w);
                    let gate = match lc.mlp.as_ref().map(|m| m.kind) {
                        Some(raspc_checkpoint::MlpKind::Reglu) => Some((t(&n("w_gate"))?, t(&n("b_gate"))?)),
                        _ => None,
                    };
                    Some(Mlp { w_in: t(&n("w_in"))?, b_in: t(&n("b_in"))?, w_out: t(&n("w_out"))?, b_out: t(&n("b_out"))?, gate })
                }
                None => None,
            };
            layers.push(Layer { heads, mlp });
        }
        Ok(CandleWeights {
            embed_token: t(raspc_checkpoint::names::TOKEN_EMBEDDING)?,
            embed_pos: t(raspc_checkpoint::names::POSITION_EMBEDDING)?,
            embed_value: match checkpoint.config.real_input {
                Some(_) => Some(t(raspc_checkpoint::names::VALUE_EMBEDDING)?),
                None => None,
            },
            readout: t(raspc_checkpoint::names::READOUT)?,
            layers,
        })
    }
}

/// Which implementation runs plain forward passes ([`Model::forward`], [`Model::forward_real`],
/// [`Model::run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The sparse CPU kernels of [`fast`] (the default on the CPU).
    Fast,
    /// candle (the only one on CUDA; the SVFlow captures always use it).
    Candle,
}

/// The fast path in the model's precision.
#[derive(Debug)]
enum FastKind {
    F32(fast::FastModel<f32>),
    F64(fast::FastModel<f64>),
}

/// `body` with `m` bound to the fast backend's model in either precision, or `none` without one.
macro_rules! with_fast {
    ($fast:expr, $m:ident => $body:expr, $none:expr) => {
        match $fast {
            Some(FastKind::F32($m)) => $body,
            Some(FastKind::F64($m)) => $body,
            None => $none,
        }
    };
}

/// A loaded checkpoint, ready to run.
#[derive(Debug)]
pub struct Model {
    pub checkpoint: Checkpoint,
    device: Device,
    /// candle's tensors, built on first use on the CPU (at load on CUDA).
    candle: std::sync::OnceLock<CandleWeights>,
    /// The sparse CPU path. On other devices it runs no forward pass: it only tells the candle
    /// path which heads keep one key per query ([`fast::FastModel::single_keys`]).
    fast: Option<FastKind>,
    backend: Backend,
    /// Whether the candle path reads the kept key's value row for heads whose every query keeps
    /// one key at positions alone, instead of scoring `[t, t]` (the same numbers; on by default).
    lookups: bool,
    /// The kept key of each query, by (layer, head, length), as an index tensor on the device
    /// (built once: U's 449 gathers at 64³ hold 22 MB of them).
    lookup_keys: std::sync::Mutex<std::collections::HashMap<(usize, usize, usize), Tensor>>,
    /// Lookup heads run so far (tests check that the path is taken).
    lookups_run: std::sync::atomic::AtomicUsize,
    /// Arithmetic of the forward pass (F32, or F64 on the stored f32 weights).
    dtype: DType,
    vocab: BTreeMap<String, u32>,
}

impl Model {
    /// Reads and validates a checkpoint file's bytes.
    pub fn load(bytes: &[u8], device: &Device) -> Result<Model, RuntimeError> {
        Model::new(Checkpoint::from_bytes(bytes)?, device)
    }

    /// Reads (regular files only, within the budgets of [`raspc_checkpoint::Limits::from_env`])
    /// and validates a checkpoint file.
    pub fn load_file(path: &std::path::Path, device: &Device) -> Result<Model, RuntimeError> {
        let limits = raspc_checkpoint::Limits::from_env()?;
        Model::new(Checkpoint::from_file(path, &limits)?, device)
    }

    pub fn new(checkpoint: Checkpoint, device: &Device) -> Result<Model, RuntimeError> {
        Model::with_dtype(checkpoint, device, DType::F32)
    }

    /// A model whose forward pass computes in `dtype` (F32 or F64; the weights are the stored
    /// f32 values either way).
    pub fn with_dtype(checkpoint: Checkpoint, device: &Device, dtype: DType) -> Result<Model, RuntimeError> {
        checkpoint.validate()?;
        let vocab = checkpoint.config.vocab.iter().filter(|v| v.id != checkpoint.config.bos_id).map(|v| (v.token.to_string(), v.id as u32)).collect();
        let candle = std::sync::OnceLock::new();
        // On the CPU the fast backend runs the forward pass; elsewhere it only finds the lookup
        // heads, so a checkpoint it cannot take still runs on candle (densely).
        let fast = match dtype {
            DType::F64 => Some(fast::FastModel::new(&checkpoint).map(FastKind::F64)),
            DType::F32 => Some(fast::FastModel::new(&checkpoint).map(FastKind::F32)),
            _ => None,
        };
        let fast = match fast {
            Some(f) if device.is_cpu() => Some(f?),
            Some(f) => f.ok(),
            None => None,
        };
        if !device.is_cpu() || fast.is_none() {
            let _ = candle.set(CandleWeights::new(&checkpoint, device, dtype)?);
        }
        let backend = if fast.is_some() && device.is_cpu() { Backend::Fast } else { Backend::Candle };
        Ok(Model { candle, fast, backend, lookups: true, lookup_keys: Default::default(), lookups_run: Default::default(), vocab, dtype, device: device.clone(), checkpoint })
    }

    /// The fast backend's path for each head's hard attention, by layer (None without a fast
    /// backend): "token" (scores depend on the tokens alone), "position" (on the positions alone)
    /// or "rows" (a score row per query).
    #[doc(hidden)]
    pub fn fast_head_kinds(&self) -> Option<Vec<Vec<&'static str>>> {
        with_fast!(&self.fast, m => Some(m.head_kinds()), None)
    }

    /// The fast backend's position heads with a cached pattern at length `t` (BOS included),
    /// and those left to the row scan once at that length for their many distinct rows.
    #[doc(hidden)]
    pub fn fast_patterns_cached(&self, t: usize) -> Option<(usize, usize)> {
        with_fast!(&self.fast, m => Some(m.patterns_cached(t)), None)
    }

    /// The fast backend's MLP units evaluated as piecewise-linear groups, and all of them, by
    /// layer (None without a fast backend; off the CPU it only finds candle's lookup heads).
    #[doc(hidden)]
    pub fn fast_mlp_groups(&self) -> Option<Vec<(usize, usize)>> {
        with_fast!(&self.fast, m => Some(m.mlp_groups()), None)
    }

    /// The fast backend's row heads with a per-length cache of shared queries, and with static
    /// key dims (None without a fast backend; tests check that they are found).
    #[doc(hidden)]
    pub fn fast_row_head_caches(&self) -> Option<(usize, usize)> {
        with_fast!(&self.fast, m => Some(m.row_head_caches()), None)
    }

    /// The implementation plain forward passes use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Chooses the implementation of plain forward passes; `Fast` needs a CPU model in F32 or
    /// F64.
    pub fn set_backend(&mut self, backend: Backend) -> Result<(), RuntimeError> {
        if backend == Backend::Fast && (self.fast.is_none() || !self.device.is_cpu()) {
            return Err(RuntimeError::Device("the fast backend runs on the CPU only, in F32 or F64".into()));
        }
        self.backend = backend;
        Ok(())
    }

    /// Caps the threads the fast backend may split a batch over (0: the machine's parallelism;
    /// 1: the calling thread only). candle's thread pool is its own.
    pub fn set_threads(&mut self, threads: usize) {
        with_fast!(&mut self.fast, m => m.set_threads(threads), ())
    }

    /// Whether the fast backend may run gated MLPs by blocks of positions (the default) or
    /// only position by position (the same numbers; tests compare the two).
    #[doc(hidden)]
    pub fn set_mlp_columns(&mut self, on: bool) {
        with_fast!(&mut self.fast, m => m.set_mlp_columns(on), ())
    }

    /// Whether the fast backend's row heads may use their per-length caches of shared queries
    /// and static keys (the default) or read every query and key from the residual stream (the
    /// same bits; tests compare the two).
    #[doc(hidden)]
    pub fn set_head_caches(&mut self, on: bool) {
        with_fast!(&mut self.fast, m => m.set_head_caches(on), ())
    }

    /// Whether the candle path may read one key's value row for the heads that keep one key per
    /// query (on by default; tests compare it with dense attention, which gives the same numbers).
    #[doc(hidden)]
    pub fn set_candle_lookups(&mut self, on: bool) {
        self.lookups = on;
    }

    /// How many heads the candle path runs as lookups at length `t` (BOS included) for
    /// sequences with BOS at position 0 only (tests check that U's gathers are found).
    #[doc(hidden)]
    pub fn candle_lookup_heads(&self, t: usize) -> usize {
        let c = &self.checkpoint.config;
        c.layers.iter().enumerate().map(|(l, lc)| (0..lc.heads.len()).filter(|&h| self.single_keys(l, h, t).is_some()).count()).sum()
    }

    /// Lookup heads the candle path has run (see [`Self::set_candle_lookups`]).
    #[doc(hidden)]
    pub fn candle_lookups_run(&self) -> usize {
        self.lookups_run.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`Self::single_keys`] as a device tensor, cached.
    fn lookup_index(&self, layer: usize, head: usize, t: usize) -> Result<Option<Tensor>, RuntimeError> {
        let mut cache = self.lookup_keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = cache.get(&(layer, head, t)) {
            return Ok(Some(idx.clone()));
        }
        let Some(single) = self.single_keys(layer, head, t) else { return Ok(None) };
        let idx = Tensor::from_slice(single, single.len(), &self.device)?;
        cache.insert((layer, head, t), idx.clone());
        Ok(Some(idx))
    }

    fn single_keys(&self, layer: usize, head: usize, t: usize) -> Option<&[u32]> {
        with_fast!(&self.fast, m => m.single_keys(layer, head, t), None)
    }

    fn bos_first_only(&self, ids: &[u32]) -> bool {
        with_fast!(&self.fast, m => m.bos_first_only(ids), false)
    }

    /// [`set_backend`](Self::set_backend), by value.
    pub fn with_backend(mut self, backend: Backend) -> Result<Model, RuntimeError> {
        self.set_backend(backend)?;
        Ok(self)
    }

    fn weights(&self) -> Result<&CandleWeights, RuntimeError> {
        if let Some(w) = self.candle.get() {
            return Ok(w);
        }
        let w = CandleWeights::new(&self.checkpoint, &self.device, self.dtype)?;
        Ok(self.candle.get_or_init(|| w))
    }

    /// The numbers of a real-valued input (JSON numbers within the declared bounds).
    pub fn encode_real(&self, input: &[serde_json::Value]) -> Result<Vec<f64>, RuntimeError> {
        let c = &self.checkpoint.config;
        let Some(r) = &c.real_input else { return Err(RuntimeError::WrongInputKind("vocabulary tokens, not numbers")) };
        if input.is_empty() {
            return Err(RuntimeError::Empty);
        }
        if input.len() > c.max_seq_len {
            return Err(RuntimeError::TooLong { len: input.len(), max: c.max_seq_len });
        }
        input
            .iter()
            .enumerate()
            .map(|(position, v)| {
                let (lo, hi) = r.bounds_at(position);
                match v.as_f64() {
                    Some(x) if x >= lo && x <= hi => Ok(x),
                    _ => Err(RuntimeError::BadNumber { position, value: v.to_string(), lo, hi }),
                }
            })
            .collect()
    }

    /// Runs a batch of equal-length real-valued inputs (BOS not included: it is added).
    /// Returns the readout, shape `[batch, len + 1, readout_dims]`, BOS first.
    pub fn forward_real(&self, batch: &[Vec<f64>], attention: Attention) -> Result<Tensor, RuntimeError> {
        let ids: Vec<Vec<u32>> = batch.iter().map(|v| self.real_ids(v.len())).collect();
        self.forward_inner(&ids, Some(batch), attention, None, None, false)
    }

    /// [`trace`](Self::trace) for a real-valued input.
    pub fn trace_real(&self, values: &[f64], attention: Attention) -> Result<Vec<Stage>, RuntimeError> {
        if let Some(states) = self.fast_trace(&self.real_ids(values.len()), Some(values), attention)? {
            return Ok(states);
        }
        let mut states = vec![];
        self.forward_inner(&[self.real_ids(values.len())], Some(&[values.to_vec()]), attention, Some(&mut states), None, true)?;
        states.into_iter().map(|(name, t)| Ok((name, t.to_dtype(DType::F32)?.to_vec2::<f32>()?))).collect()
    }

    /// The trace on the fast backend (None when the model runs on candle).
    fn fast_trace(&self, ids: &[u32], values: Option<&[f64]>, attention: Attention) -> Result<Option<Vec<Stage>>, RuntimeError> {
        let (t, d) = (ids.len(), self.checkpoint.config.d_model);
        let rows = |x: Vec<f64>| -> Vec<Vec<f32>> { (0..t).map(|p| x[p * d..(p + 1) * d].iter().map(|&v| v as f32).collect()).collect() };
        Ok(match (self.backend, &self.fast) {
            (Backend::Fast, Some(FastKind::F32(m))) => Some(m.trace(ids, values, attention)?.into_iter().map(|(n, x)| (n, rows(x.into_iter().map(f64::from).collect()))).collect()),
            (Backend::Fast, Some(FastKind::F64(m))) => Some(m.trace(ids, values, attention)?.into_iter().map(|(n, x)| (n, rows(x))).collect()),
            _ => None,
        })
    }

    /// BOS, then the number token at every position: the two vocabulary ids in whichever order
    /// the file gives them (a `bos_id` of 1 ran BOS's embedding at every position: helper c20).
    fn real_ids(&self, len: usize) -> Vec<u32> {
        let bos = self.checkpoint.config.bos_id as u32;
        let number = self.checkpoint.config.vocab.iter().map(|v| v.id as u32).find(|&id| id != bos).unwrap_or(1 - bos.min(1));
        std::iter::once(bos).chain(std::iter::repeat_n(number, len)).collect()
    }

    /// True when the model reads real numbers rather than vocabulary tokens.
    pub fn is_real(&self) -> bool {
        self.checkpoint.config.real_input.is_some()
    }

    /// A hint for a float input within a millionth (relative) of a number token: the token, how
    /// far it is, and that numbers match exactly (helper c13: `np.linspace(0, 1, 11)` gives
    /// 0.30000000000000004 for a grid's 0.3; a float32 array gives 0.10000000149011612 for 0.1).
    fn nearby_number(&self, tok: &serde_json::Value) -> Option<String> {
        let x = tok.as_f64().filter(|_| tok.is_f64())?;
        let (key, y) =
            self.vocab.keys().filter_map(|k| Some((k, serde_json::from_str::<serde_json::Value>(k).ok()?.as_f64()?))).min_by(|a, b| (a.1 - x).abs().total_cmp(&(b.1 - x).abs()))?;
        let gap = (y - x).abs();
        if gap > 1e-6 * x.abs().max(1.0) {
            return None;
        }
        let f32_note = if (y as f32) as f64 == x { " (it is the token's float32 value: give float64 numbers)" } else { "" };
        Some(format!("; the nearest token is {key}, {gap:.1e} away{f32_note}: numbers match a token exactly, so round the input to the token"))
    }

    /// A hint for a number whose digits are a string token, or a string whose text is a number
    /// token (helper p22: a vocabulary given as the string "0123" refused the input [0, 1, 2]
    /// without saying why, where `raspc eval` reads both alike).
    fn string_or_number(&self, tok: &serde_json::Value) -> Option<String> {
        match tok {
            serde_json::Value::Number(n) => {
                let quoted = serde_json::Value::String(n.to_string()).to_string();
                self.vocab
                    .contains_key(&quoted)
                    .then(|| format!("; the vocabulary has the string {quoted}: give the input as strings ([{quoted}, ...]), or compile with a vocabulary of numbers"))
            }
            serde_json::Value::String(text) => {
                let number: serde_json::Value = serde_json::from_str(text).ok().filter(serde_json::Value::is_number)?;
                let key = number.to_string();
                self.vocab.contains_key(&key).then(|| format!("; the vocabulary has the number {key}: give the input as numbers ([{key}, ...]), not strings"))
            }
            _ => None,
        }
    }

    /// Token ids for an input (JSON atoms), BOS first.
    pub fn encode(&self, input: &[serde_json::Value]) -> Result<Vec<u32>, RuntimeError> {
        let c = &self.checkpoint.config;
        if c.real_input.is_some() {
            return Err(RuntimeError::WrongInputKind("real numbers (use encode_real / forward_real)"));
        }
        if input.is_empty() {
            return Err(RuntimeError::Empty);
        }
        if input.len() > c.max_seq_len {
            return Err(RuntimeError::TooLong { len: input.len(), max: c.max_seq_len });
        }
        let mut ids = vec![c.bos_id as u32];
        for (position, tok) in input.iter().enumerate() {
            match self.vocab.get(&tok.to_string()) {
                Some(&id) => ids.push(id),
                None => {
                    // The same number spelled as the vocabulary spells it is a different token
                    // (programs read tokens as strings: "1" is not "1.0"): say so.
                    let hint = other_spelling(tok)
                        .filter(|o| self.vocab.contains_key(o))
                        .map(|o| format!("; the vocabulary has {o}: a token is spelled as it is listed, since programs read tokens as strings (`1` is not `1.0`)"))
                        .or_else(|| self.nearby_number(tok))
                        .or_else(|| self.string_or_number(tok))
                        .unwrap_or_default();
                    return Err(RuntimeError::UnknownToken { position, token: tok.to_string(), vocab: self.vocab_listing(), hint });
                }
            }
        }
        Ok(ids)
    }

    /// The vocabulary for a message: in id order (the order it was given), the first 24 tokens
    /// and a count past them (helper perf24: 4,096 tokens made a 31 KB line, in string order).
    fn vocab_listing(&self) -> String {
        let mut by_id: Vec<(&u32, &String)> = self.vocab.iter().map(|(t, id)| (id, t)).collect();
        by_id.sort();
        let shown: Vec<&str> = by_id.iter().take(24).map(|(_, t)| t.as_str()).collect();
        match by_id.len() {
            n if n > 24 => format!("{}, ... ({n} tokens)", shown.join(", ")),
            _ => shown.join(", "),
        }
    }

    /// Runs a batch of equal-length id sequences (each starting with BOS). Returns the readout,
    /// shape `[batch, len, readout_dims]`.
    pub fn forward(&self, batch: &[Vec<u32>], attention: Attention) -> Result<Tensor, RuntimeError> {
        self.forward_inner(batch, None, attention, None, None, false)
    }

    /// Runs one id sequence and captures, per layer, what the SVFlow probes need (see
    /// [`LayerCapture`]). Plain forward passes never pay for this.
    pub fn capture(&self, ids: &[u32], attention: Attention) -> Result<Vec<LayerCapture>, RuntimeError> {
        Ok(self.forward_capture(ids, attention)?.1)
    }

    /// [`capture`](Self::capture) and the readout (`[1, len, readout_dims]`) of the same pass.
    pub fn forward_capture(&self, ids: &[u32], attention: Attention) -> Result<(Tensor, Vec<LayerCapture>), RuntimeError> {
        let mut caps = vec![];
        let readout = self.forward_inner(&[ids.to_vec()], None, attention, None, Some(&mut caps), false)?;
        Ok((readout, caps))
    }

    /// Runs one id sequence and returns the residual stream (`[len, d_model]`, BOS first) after
    /// the embeddings and after every sublayer, named `embed`, `layer L attention`, `layer L mlp`.
    pub fn trace(&self, ids: &[u32], attention: Attention) -> Result<Vec<Stage>, RuntimeError> {
        if let Some(states) = self.fast_trace(ids, None, attention)? {
            return Ok(states);
        }
        let mut states = vec![];
        self.forward_inner(&[ids.to_vec()], None, attention, Some(&mut states), None, true)?;
        states.into_iter().map(|(name, t)| Ok((name, t.to_dtype(DType::F32)?.to_vec2::<f32>()?))).collect()
    }

    fn forward_inner(
        &self,
        batch: &[Vec<u32>],
        values: Option<&[Vec<f64>]>,
        attention: Attention,
        mut trace: Option<&mut Vec<(String, Tensor)>>,
        mut capture: Option<&mut Vec<LayerCapture>>,
        check_finite: bool,
    ) -> Result<Tensor, RuntimeError> {
        if let (Backend::Fast, Some(f), None, None) = (self.backend, &self.fast, &trace, &capture) {
            let b = batch.len();
            let t = batch.first().map_or(0, Vec::len);
            return Ok(match f {
                FastKind::F32(m) => Tensor::from_vec(m.forward(batch, values, attention, check_finite)?, (b, t, m.readout_dims()), &self.device)?,
                FastKind::F64(m) => Tensor::from_vec(m.forward(batch, values, attention, check_finite)?, (b, t, m.readout_dims()), &self.device)?,
            });
        }
        let cw = self.weights()?;
        // `0 * x` is 0 for finite values and NaN for NaN and infinities; the sum shows any. Rows
        // first: candle's CUDA reduction gives each output value one thread block, so `sum_all`
        // of a [t, t] score matrix ran in a single block (`raspc run` of U at n = d = 64 on an
        // H200: 19.9 s, 6.3 s summing rows first).
        let finite = |x: &Tensor, stage: &dyn Fn() -> String| -> Result<(), RuntimeError> {
            if check_finite && !x.affine(0.0, 0.0)?.sum_keepdim(D::Minus1)?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?.is_finite() {
                return Err(RuntimeError::NonFiniteActivation { stage: stage() });
            }
            Ok(())
        };
        let b = batch.len();
        let t = batch.first().map_or(0, Vec::len);
        if let Some(bad) = batch.iter().find(|s| s.len() != t) {
            return Err(RuntimeError::Ragged(format!("{} vs {}", t, bad.len())));
        }
        let c = &self.checkpoint.config;
        if t == 0 || t > c.max_seq_len + 1 {
            return Err(RuntimeError::TooLong { len: t.saturating_sub(1), max: c.max_seq_len });
        }
        let d = c.d_model;
        let flat: Vec<u32> = batch.iter().flatten().copied().collect();
        let ids = Tensor::from_vec(flat, b * t, &self.device)?;
        let pos = cw.embed_pos.narrow(0, 0, t)?;
        let x = cw.embed_token.index_select(&ids, 0)?.reshape((b, t, d))?;
        let mut x = x.broadcast_add(&pos)?.reshape((b * t, d))?;
        if let (Some(vals), Some(ev)) = (values, &cw.embed_value) {
            // BOS carries no number.
            let flat: Vec<f64> = vals.iter().flat_map(|v| std::iter::once(0.0).chain(v.iter().copied())).collect();
            if flat.len() != b * t {
                return Err(RuntimeError::Ragged(format!("{} numbers for {} positions", flat.len(), b * t)));
            }
            let col = Tensor::from_vec(flat, (b * t, 1), &self.device)?.to_dtype(self.dtype)?;
            x = (x + col.broadcast_mul(&ev.reshape((1, d))?)?)?;
        }
        finite(&x, &|| "the embeddings".into())?;
        if let Some(tr) = trace.as_deref_mut() {
            tr.push(("embed".into(), x.clone()));
        }
        // Additive mask: 0 where the key is visible, -inf after the query (causal).
        let mask = if c.causal {
            let m: Vec<f32> = (0..t).flat_map(|q| (0..t).map(move |k| if k <= q { 0.0 } else { f32::NEG_INFINITY })).collect();
            Some(Tensor::from_vec(m, (t, t), &self.device)?.to_dtype(self.dtype)?)
        } else {
            None
        };
        let tol = c.attention.tie_tolerance;
        let beta = c.attention.soft_beta;
        // Heads whose every query keeps one key (at positions alone: U's gathers) read that
        // key's value row: `1·v` plus exact zeros is `v`, so the same numbers as the dense path,
        // without `[t, t]` scores (U at n = d = 32 on this path, CPU: 17.2 s dense, 0.94 s so).
        // The kept keys are those the fast backend's row scan finds (compiled checkpoints leave
        // a quarter of the smallest score gap as tie tolerance, so rounding cannot move them).
        // Where a value row is not finite the dense path spreads it to every query (`0·inf` is
        // NaN) and a lookup only to the queries that keep it, as the fast backend does; `run`
        // refuses such a residual stream before it reaches the head.
        let lookups = self.lookups && attention == Attention::Hard && capture.is_none() && batch.iter().all(|s| self.bos_first_only(s));
        if lookups {
            with_fast!(&self.fast, m => m.prepare_lookups(t), ())
        }
        let rows = |t: &Tensor| -> Result<Vec<Vec<f64>>, RuntimeError> { Ok(t.to_dtype(DType::F64)?.to_vec2::<f64>()?) };
        for (l, layer) in cw.layers.iter().enumerate() {
            let mut delta: Option<Tensor> = None;
            let mut cap = match capture {
                Some(_) => Some(LayerCapture { input: rows(&x)?, heads: vec![], attention_output: vec![] }),
                None => None,
            };
            for (hi, h) in layer.heads.iter().enumerate() {
                let dh = h.w_q.dim(1)?;
                let v = x.matmul(&h.w_v)?.reshape((b, t, dh))?;
                let out = if let Some(idx) = if lookups { self.lookup_index(l, hi, t)? } else { None } {
                    self.lookups_run.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    v.index_select(&idx, 1)?.reshape((b * t, dh))?.matmul(&h.w_o)?
                } else {
                    let q = x.matmul(&h.w_q)?.reshape((b, t, dh))?;
                    let k = x.matmul(&h.w_k)?.reshape((b, t, dh))?;
                    let mut s = q.matmul(&k.transpose(1, 2)?.contiguous()?)?;
                    // Scores past f32 keep keys that mean nothing under hard attention (the weights
                    // stay finite): refused, as soft attention's weights are (helper d6).
                    finite(&s, &|| format!("layer {l} attention (attention scores)"))?;
                    if let Some(m) = &mask {
                        s = s.broadcast_add(m)?;
                    }
                    let max = s.max_keepdim(D::Minus1)?;
                    let w = match attention {
                        Attention::Hard => {
                            let keep = s.broadcast_ge(&(max - tol)?)?.to_dtype(self.dtype)?;
                            keep.broadcast_div(&keep.sum_keepdim(D::Minus1)?)?
                        }
                        Attention::Soft => {
                            let e = (s.broadcast_sub(&max)? * beta)?.exp()?;
                            e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?
                        }
                    };
                    finite(&w, &|| format!("layer {l} attention (attention weights)"))?;
                    if let Some(c) = cap.as_mut() {
                        let scores = v.reshape((b * t, dh))?.matmul(&h.w_o)?;
                        c.heads.push(HeadCapture { weights: rows(&w.reshape((b * t, t))?)?, scores: rows(&scores)? });
                    }
                    w.matmul(&v)?.reshape((b * t, dh))?.matmul(&h.w_o)?
                };
                delta = Some(match delta {
                    None => out,
                    Some(acc) => (acc + out)?,
                });
            }
            if let Some(dx) = delta {
                if let Some(c) = cap.as_mut() {
                    c.attention_output = rows(&dx)?;
                }
                x = (x + dx)?;
            } else if let Some(c) = cap.as_mut() {
                c.attention_output = vec![vec![0.0; d]; b * t];
            }
            if let (Some(c), Some(sink)) = (cap, capture.as_deref_mut()) {
                sink.push(c);
            }
            finite(&x, &|| format!("layer {l} attention"))?;
            if let Some(tr) = trace.as_deref_mut() {
                tr.push((format!("layer {l} attention"), x.clone()));
            }
            if let Some(m) = &layer.mlp {
                let mut hdn = x.matmul(&m.w_in)?.broadcast_add(&m.b_in)?.relu()?;
                if check_finite {
                    // ReLU maps -inf to 0: check the pre-activations, not only the residual.
                    finite(&x.matmul(&m.w_in)?.broadcast_add(&m.b_in)?, &|| format!("layer {l} mlp (hidden units)"))?;
                }
                if let Some((wg, bg)) = &m.gate {
                    hdn = (hdn * x.matmul(wg)?.broadcast_add(bg)?)?;
                }
                x = (x + hdn.matmul(&m.w_out)?.broadcast_add(&m.b_out)?)?;
                finite(&x, &|| format!("layer {l} mlp"))?;
            }
            if let Some(tr) = trace.as_deref_mut() {
                tr.push((format!("layer {l} mlp"), x.clone()));
            }
        }
        let r = cw.readout.dim(1)?;
        let y = x.matmul(&cw.readout)?.reshape((b, t, r))?;
        finite(&y, &|| "the readout".into())?;
        Ok(y)
    }

    /// Decodes a readout (`[batch, len, dims]`, BOS included) into values, BOS stripped.
    pub fn decode(&self, readout: &Tensor) -> Result<Vec<Vec<Decoded>>, RuntimeError> {
        let rows: Vec<Vec<Vec<f64>>> = readout.to_dtype(DType::F64)?.to_vec3()?;
        let out = &self.checkpoint.output;
        let expected = out.encoding.dims();
        // Every row must be as wide as the encoding: then `values[best]` and `dims[0]` below are
        // in range (a categorical encoding has >= 1 value, validated at load).
        if let Some(bad) = rows.iter().flatten().find(|d| d.len() != expected || d.is_empty()) {
            return Err(RuntimeError::ReadoutWidth { found: bad.len(), expected });
        }
        // A NaN or an infinity decodes to nothing meaningful (an argmax over NaN is the first
        // value): refuse it, as `run` refuses a non-finite activation at any stage.
        if rows.iter().any(|seq| seq.iter().skip(1).flatten().any(|x| !x.is_finite())) {
            return Err(RuntimeError::NonFiniteActivation { stage: "the readout".into() });
        }
        Ok(rows
            .into_iter()
            .map(|seq| {
                seq.into_iter()
                    .skip(1)
                    .map(|dims| match &out.encoding {
                        Encoding::Categorical { values } => {
                            let mut best = 0;
                            for (i, &x) in dims.iter().enumerate() {
                                if x > dims[best] {
                                    best = i;
                                }
                            }
                            Decoded::Value(values[best].clone())
                        }
                        // (A checkpoint's output is never multi-hot: refused at load. Decoded as
                        // the set it holds, the values whose dims are above 1/2.)
                        Encoding::MultiHot { values } => Decoded::Value(serde_json::Value::Array(Encoding::held_set(values, dims.iter().copied()))),
                        Encoding::Numerical { values } => {
                            let raw = dims[0];
                            let snapped = values.as_ref().and_then(|vs| {
                                // Booleans are the numbers 0 and 1 (as the compiler stores them).
                                vs.iter()
                                    .filter_map(|v| v.as_f64().or_else(|| v.as_bool().map(f64::from)).map(|x| (x, v)))
                                    .min_by(|a, b| (a.0 - raw).abs().total_cmp(&(b.0 - raw).abs()))
                                    .filter(|(x, _)| (x - raw).abs() <= out.tolerance)
                                    .map(|(_, v)| v.clone())
                            });
                            Decoded::Number { raw, snapped }
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// Encodes, runs and decodes one input.
    pub fn run(&self, input: &[serde_json::Value], attention: Attention) -> Result<Vec<Decoded>, RuntimeError> {
        // One input: check every stage for NaN and infinities and name the first.
        let r = if self.is_real() {
            let v = self.encode_real(input)?;
            self.forward_inner(&[self.real_ids(v.len())], Some(&[v]), attention, None, None, true)?
        } else {
            self.forward_inner(&[self.encode(input)?], None, attention, None, None, true)?
        };
        Ok(self.decode(&r)?.remove(0))
    }
}

/// The JSON text of the other spelling of a number: `1.0` for `1`, `1` for `1.0`.
fn other_spelling(tok: &serde_json::Value) -> Option<String> {
    let n = tok.as_number()?;
    if n.is_f64() {
        let x = n.as_f64()?;
        (x.fract() == 0.0 && x.abs() < 9.2e18).then(|| serde_json::Value::from(x as i64).to_string())
    } else {
        let x = n.as_i64().map(|i| i as f64).or_else(|| n.as_u64().map(|u| u as f64))?;
        Some(serde_json::Value::from(x).to_string())
    }
}
