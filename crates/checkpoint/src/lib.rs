//! raspc-checkpoint: the contract between the compiler and the runtime.
//!
//! A checkpoint is one safetensors file: named `F32` tensors (see [`names`]) plus a
//! `__metadata__` map of strings (see [`keys`]) holding the format version, the model config, the
//! residual layout and the output decoding as JSON. The runtime needs nothing but this file, and
//! other frameworks need nothing but the safetensors format and docs/checkpoint-format.md.
//!
//! [`Checkpoint::to_bytes`] writes the file itself (sorted metadata keys, tensors in name order),
//! so the same checkpoint always gives the same bytes. [`Checkpoint::from_bytes`] validates every
//! tensor's presence, shape and dtype and every metadata key, and reports each way a file can be
//! wrong as a [`CheckpointError`] naming the tensor or key.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

mod limits;
pub use limits::{Limits, LIMITS_ENV};

pub const FORMAT: &str = "raspc";
/// The newest format version this crate reads (and writes when a file needs it). Version 2
/// adds the `multi_hot` encoding to the layout; a file without one is written as version 1,
/// which readers of version 1 load as before.
pub const FORMAT_VERSION: u32 = 2;

/// `__metadata__` keys.
pub mod keys {
    pub const FORMAT: &str = "format";
    pub const FORMAT_VERSION: &str = "format_version";
    pub const CONFIG: &str = "config";
    pub const LAYOUT: &str = "layout";
    pub const OUTPUT: &str = "output";
    pub const PROGRAM_HASH: &str = "program_hash";
    pub const COMPILER_VERSION: &str = "compiler_version";
    /// `sha256:` and the hex SHA-256 of every byte after the header (the tensor data).
    pub const TENSOR_SHA256: &str = "tensor_sha256";
    /// `sha256:` and the hex SHA-256 of every other metadata key and value (see
    /// [`metadata_hash`](super::metadata_hash)): with `tensor_sha256` among them, it covers the
    /// whole file.
    pub const METADATA_SHA256: &str = "metadata_sha256";
    pub const ALL: [&str; 9] = [FORMAT, FORMAT_VERSION, CONFIG, LAYOUT, OUTPUT, PROGRAM_HASH, COMPILER_VERSION, TENSOR_SHA256, METADATA_SHA256];
}

/// Tensor names.
pub mod names {
    pub const TOKEN_EMBEDDING: &str = "embed.token";
    pub const POSITION_EMBEDDING: &str = "embed.position";
    pub const READOUT: &str = "readout";
    /// Real-valued inputs only: the residual direction a token's number is written along.
    pub const VALUE_EMBEDDING: &str = "embed.value";
    pub fn head(layer: usize, head: usize, which: &str) -> String {
        format!("layers.{layer}.attn.{head}.{which}")
    }
    pub fn mlp(layer: usize, which: &str) -> String {
        format!("layers.{layer}.mlp.{which}")
    }
}

/// One vocabulary entry: the token as a JSON atom (string, number or bool) and its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VocabEntry {
    pub token: serde_json::Value,
    pub id: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionSemantics {
    /// Each query averages the values of all keys whose score ties the maximum.
    Hard,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionConfig {
    pub semantics: AttentionSemantics,
    /// Scores within this distance of the row maximum count as tied (hard attention).
    pub tie_tolerance: f64,
    /// Inverse temperature of the soft variant: softmax(beta * scores).
    pub soft_beta: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MlpKind {
    /// out = W_out · ReLU(W_in · x + b_in) + b_out
    Relu,
    /// Gated (ReGLU): out = W_out · (ReLU(W_in · x + b_in) ⊙ (W_gate · x + b_gate)) + b_out
    Reglu,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MlpConfig {
    pub kind: MlpKind,
    pub hidden: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerConfig {
    /// Width of each head's query/key/value space, one entry per head.
    pub heads: Vec<usize>,
    pub mlp: Option<MlpConfig>,
    /// What each head computes (same order as `heads`); informational.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_info: Vec<BlockInfo>,
    /// The computations sharing the MLP, each with its range of hidden units; informational.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mlp_info: Vec<BlockInfo>,
}

/// A description of one head or one part of an MLP, for people and tools inspecting a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockInfo {
    /// What it computes, e.g. `reverse = aggregate(flip, tokens)`.
    pub what: String,
    /// Labels of the residual slots it reads (from the layout).
    pub reads: Vec<String>,
    /// Label of the slot it writes.
    pub writes: String,
    /// MLP parts: hidden units `[start, end)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<[usize; 2]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub d_model: usize,
    pub layers: Vec<LayerConfig>,
    pub vocab: Vec<VocabEntry>,
    pub bos_id: usize,
    /// Longest input, BOS excluded.
    pub max_seq_len: usize,
    pub causal: bool,
    pub attention: AttentionConfig,
    /// Width of the readout (number of output dims).
    pub readout_dims: usize,
    /// Present when the inputs are real numbers rather than vocabulary tokens: position p of
    /// the input (a number x) embeds as `embed.token[1] + x * embed.value + embed.position[p+1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_input: Option<RealInput>,
}

/// Declared range of real-valued inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RealInput {
    /// Every input number lies in [lo, hi]; the certified error bound assumes it.
    pub lo: f64,
    pub hi: f64,
    /// Narrower bounds for blocks of input positions (0-based, BOS excluded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<RealBlock>,
}

/// Input positions `start..end` hold numbers in [lo, hi].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RealBlock {
    pub start: usize,
    pub end: usize,
    pub lo: f64,
    pub hi: f64,
}

impl RealInput {
    /// The bounds of input position `p`.
    pub fn bounds_at(&self, p: usize) -> (f64, f64) {
        self.blocks.iter().rev().find(|b| b.start <= p && p < b.end).map_or((self.lo, self.hi), |b| (b.lo, b.hi))
    }
}

/// How an s-op is stored in the residual stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Encoding {
    /// One dim per value (one-hot); `values[i]` is what dim `offset + i` stands for.
    Categorical { values: Vec<serde_json::Value> },
    /// One dim per value, each 0 or 1 on its own: the values whose dims hold 1 form a set (a
    /// helper of real-valued heads: which key groups a query leaves out). Never an output.
    #[serde(rename = "multi_hot")]
    MultiHot { values: Vec<serde_json::Value> },
    /// One dim holding the number. `values`, when present, lists every value the s-op can
    /// take (JSON atoms, ascending).
    Numerical {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<Vec<serde_json::Value>>,
    },
}

impl Encoding {
    /// The set a multi-hot entry holds in its dims: the values whose dim is above 1/2.
    pub fn held_set(values: &[serde_json::Value], dims: impl IntoIterator<Item = f64>) -> Vec<serde_json::Value> {
        values.iter().zip(dims).filter(|(_, x)| *x > 0.5).map(|(v, _)| v.clone()).collect()
    }

    pub fn dims(&self) -> usize {
        match self {
            Encoding::Categorical { values } | Encoding::MultiHot { values } => values.len(),
            Encoding::Numerical { .. } => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SopLayout {
    pub label: String,
    pub offset: usize,
    pub encoding: Encoding,
    /// A numerical s-op stored as partial sums: the further dims whose numbers add to the one
    /// at `offset` (each also has an entry of its own, a part). Empty: the dim at `offset`
    /// holds the whole number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<usize>,
}

impl SopLayout {
    /// The number a numerical entry holds in one residual row (the sum of its parts), or None
    /// for a categorical or multi-hot entry or a dim past the row.
    pub fn number(&self, row: &[f32]) -> Option<f64> {
        if !matches!(self.encoding, Encoding::Numerical { .. }) {
            return None;
        }
        let mut x = f64::from(*row.get(self.offset)?);
        for &o in &self.parts {
            x += f64::from(*row.get(o)?);
        }
        Some(x)
    }
}

/// Where every s-op lives in the residual stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub sops: Vec<SopLayout>,
}

/// Which s-op is the output and how the readout decodes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    pub label: String,
    pub encoding: Encoding,
    /// Numerical outputs: a decoded number within this distance of the true value is correct
    /// (half the smallest gap between the output's possible values, when they are known).
    /// 0 for categorical outputs.
    #[serde(default)]
    pub tolerance: f64,
}

/// A dense `f32` tensor in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    pub fn zeros(shape: &[usize]) -> Tensor {
        Tensor { shape: shape.to_vec(), data: vec![0.0; shape.iter().product()] }
    }
}

/// A whole checkpoint in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub config: ModelConfig,
    pub layout: Layout,
    pub output: OutputSpec,
    pub program_hash: String,
    pub compiler_version: String,
    pub tensors: BTreeMap<String, Tensor>,
}

/// Bytes per element of a safetensors dtype (None for one this file format does not size).
fn dtype_size(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}

/// What is wrong with a safetensors file that the safetensors crate refuses, in terms of its
/// tensors (a named tensor's shape, offsets or size; a truncated file), when that can be said;
/// for readers of foreign files (`simulate --target`) as much as for checkpoints.
pub fn safetensors_problem(bytes: &[u8]) -> Option<String> {
    size_mismatch(bytes, u64::from_le_bytes(*bytes.first_chunk::<8>()?))
}

/// When a file's size is not what its header describes (a truncated download or copy): says so,
/// with both sizes; also a tensor whose shape's byte size overflows, or whose offsets do not fit
/// its shape. None when the header does not parse or nothing of this is wrong.
fn size_mismatch(bytes: &[u8], header_len: u64) -> Option<String> {
    let end = 8usize.checked_add(usize::try_from(header_len).ok()?)?;
    let header: serde_json::Value = serde_json::from_slice(bytes.get(8..end)?).ok()?;
    let data = header.as_object()?.iter().filter(|(k, _)| *k != "__metadata__").filter_map(|(_, t)| t.get("data_offsets")?.get(1)?.as_u64()).max().unwrap_or(0);
    let expected = (end as u64).checked_add(data)?;
    let found = bytes.len() as u64;
    // A shape whose byte size overflows (safetensors says only "overflow computing buffer size",
    // naming no tensor: helper b21).
    let overflow = header.as_object()?.iter().filter(|(k, _)| *k != "__metadata__").find_map(|(name, t)| {
        let shape: Vec<u64> = t.get("shape")?.as_array()?.iter().map(|d| d.as_u64()).collect::<Option<_>>()?;
        let size = dtype_size(t.get("dtype")?.as_str()?).unwrap_or(1);
        shape.iter().try_fold(size, |n, &d| n.checked_mul(d)).is_none().then(|| format!("tensor `{name}` has shape {shape:?}, whose size in bytes overflows 64 bits"))
    });
    if overflow.is_some() {
        return overflow;
    }
    if let Some(p) = offsets_problem(&header, found.saturating_sub(end as u64)) {
        return Some(p);
    }
    match found.cmp(&expected) {
        std::cmp::Ordering::Less => Some(format!("the file is truncated: its header describes {expected} bytes ({data} of tensor data), the file has {found}")),
        std::cmp::Ordering::Greater => Some(format!("the file has {} bytes after the {expected} its header describes", found - expected)),
        // The total fits: a tensor whose bytes do not fit its dtype and shape (a dtype edited
        // in the header, say).
        std::cmp::Ordering::Equal => header.as_object()?.iter().filter(|(k, _)| *k != "__metadata__").find_map(|(name, t)| {
            let dtype = t.get("dtype")?.as_str()?;
            let size = dtype_size(dtype)?;
            let shape: Vec<u64> = t.get("shape")?.as_array()?.iter().map(|d| d.as_u64()).collect::<Option<_>>()?;
            let offsets = t.get("data_offsets")?.as_array()?;
            let (a, b) = (offsets.first()?.as_u64()?, offsets.get(1)?.as_u64()?);
            let want = shape.iter().try_fold(size, |n, &d| n.checked_mul(d))?;
            (b.checked_sub(a) != Some(want))
                .then(|| format!("tensor `{name}` has dtype {dtype} and shape {shape:?} ({want} bytes), but its data_offsets [{a}, {b}] hold {} bytes", b.saturating_sub(a)))
        }),
    }
}

/// Tensor entries whose `data_offsets` do not tile the data region (`data_len` bytes) end to end,
/// named: offsets that run backwards, two tensors sharing bytes, or bytes no tensor holds (an
/// entry removed from the header). A removed `readout` was reported as "400 bytes after the
/// 13088 its header describes", an overlap as an invalid offset of the other, innocent tensor.
fn offsets_problem(header: &serde_json::Value, data_len: u64) -> Option<String> {
    let mut spans: Vec<(u64, u64, &str)> = vec![];
    for (name, t) in header.as_object()?.iter().filter(|(k, _)| *k != "__metadata__") {
        let offsets = t.get("data_offsets")?;
        let o = offsets.as_array()?;
        let (Some(a), Some(b), 2) = (o.first().and_then(|x| x.as_u64()), o.get(1).and_then(|x| x.as_u64()), o.len()) else {
            return Some(format!("tensor `{name}` has data_offsets {offsets}, not two byte offsets (whole numbers from 0)"));
        };
        if b < a {
            return Some(format!("tensor `{name}` has data_offsets [{a}, {b}], which run backwards"));
        }
        spans.push((a, b, name));
    }
    spans.sort();
    let mut at = 0u64;
    let mut last: Option<&str> = None;
    for &(a, b, name) in &spans {
        if a < at {
            return Some(format!("tensors `{}` and `{name}` share bytes {a}..{} of the data (data_offsets overlap)", last.unwrap_or("?"), at.min(b)));
        }
        if a > at {
            return Some(format!("no tensor holds bytes {at}..{a} of the data, before tensor `{name}` (a header entry removed, or data_offsets edited?)"));
        }
        at = b;
        last = Some(name);
    }
    (at < data_len).then(|| {
        format!(
            "no tensor holds the last {} bytes of the data, after {} (a header entry removed, or data_offsets edited?)",
            data_len - at,
            last.map_or("the header".to_string(), |n| format!("tensor `{n}`"))
        )
    })
}

/// Everything that can be wrong with a checkpoint file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CheckpointError {
    #[error("not a safetensors file: {0}")]
    NotSafetensors(String),
    #[error("metadata key `{0}` is missing")]
    MissingKey(&'static str),
    #[error("metadata key `{key}` is invalid: {reason}")]
    BadKey { key: &'static str, reason: String },
    #[error("format version {found} is not supported (this raspc reads versions 1 to {supported})")]
    UnsupportedVersion { found: String, supported: u32 },
    #[error("tensor `{0}` is missing")]
    MissingTensor(String),
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    WrongShape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor `{name}` (shape {shape:?}) has dtype {found}, expected F32")]
    WrongDtype { name: String, shape: Vec<usize>, found: String },
    #[error("tensor `{0}` is not part of this model's config")]
    UnexpectedTensor(String),
    #[error("tensor `{name}` (shape {shape:?}) holds {value} at {at:?} (flat index {index}): weights must be finite")]
    NonFinite { name: String, shape: Vec<usize>, at: Vec<usize>, index: usize, value: f32 },
    #[error("the residual layout is inconsistent: {0}")]
    BadLayout(String),
    #[error("{what} is {value}, over the budget of {limit} (raise it with {env}={name}=N; see docs/checkpoint-format.md)", env = LIMITS_ENV)]
    OverBudget { what: String, value: String, limit: String, name: &'static str },
    #[error("tensor `{name}` holds {value} at flat index {index} (its largest), beyond the budget of ±{limit} for weights (raise it with {env}=abs_weight=N)", env = LIMITS_ENV)]
    WeightTooLarge { name: String, index: usize, value: f32, limit: f32 },
    #[error("the tensor data does not match its integrity hash (`tensor_sha256` is {expected}, the data hashes to {found}): the file is corrupted")]
    Integrity { expected: String, found: String },
    #[error("the metadata does not match its integrity hash (`metadata_sha256` is {expected}, the metadata hashes to {found}): the file is corrupted, or its metadata was edited without updating the key (docs/checkpoint-format.md)")]
    MetadataIntegrity { expected: String, found: String },
    #[error("{0}")]
    Io(String),
    #[error("bad {env}: {0}", env = LIMITS_ENV)]
    BadLimits(String),
}

/// The `metadata_sha256` of a metadata map: SHA-256 over every other key in byte order, each
/// as its UTF-8 bytes, a NUL byte, its value's bytes and a NUL byte.
pub fn metadata_hash<'a>(meta: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    use sha2::Digest;
    let mut pairs: Vec<(&str, &str)> = meta.into_iter().filter(|(k, _)| *k != keys::METADATA_SHA256).collect();
    pairs.sort();
    let mut h = sha2::Sha256::new();
    for (k, v) in pairs {
        h.update(k.as_bytes());
        h.update([0u8]);
        h.update(v.as_bytes());
        h.update([0u8]);
    }
    format!("sha256:{:x}", h.finalize())
}

/// SHA-256 of tensor data, as written in the `tensor_sha256` metadata key.
pub fn tensor_hash(data: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(data))
}

/// Reads a checkpoint file's bytes, refusing before reading them whole anything that is not a
/// regular file (a FIFO, a device such as /dev/zero), a file larger than the budget, or a file
/// whose safetensors header is larger than the budget or than the file.
pub fn read_file(path: &Path, limits: &Limits) -> Result<Vec<u8>, CheckpointError> {
    use std::io::Read;
    let io = |e: std::io::Error| CheckpointError::Io(format!("cannot read `{}`: {}", path.display(), io_message(&e)));
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(CheckpointError::Io(format!("`{}` is not a regular file", path.display())));
    }
    let len = meta.len();
    if len > limits.max_file_bytes {
        return Err(CheckpointError::OverBudget {
            what: format!("the size of `{}`", path.display()),
            value: format!("{len} bytes"),
            limit: format!("{} bytes", limits.max_file_bytes),
            name: "file_bytes",
        });
    }
    let mut f = std::fs::File::open(path).map_err(io)?;
    if !f.metadata().map_err(io)?.is_file() {
        return Err(CheckpointError::Io(format!("`{}` is not a regular file", path.display())));
    }
    let mut head = [0u8; 8];
    if len < 8 || f.read_exact(&mut head).is_err() {
        return Err(CheckpointError::NotSafetensors(format!("`{}` is {len} bytes, too short for a safetensors header", path.display())));
    }
    check_header_size(u64::from_le_bytes(head), len, limits)?;
    let cap = usize::try_from(len).map_err(|_| CheckpointError::Io(format!("`{}` is too large for this machine", path.display())))?;
    let mut bytes = Vec::with_capacity(cap);
    bytes.extend_from_slice(&head);
    f.take(len - 8).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// An I/O error as a user reads it: "No such file or directory", without the OS's error
/// number (helper ed25: "(os error 2)").
pub fn io_message(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}

/// True when `bytes` is a safetensors file whose metadata says `format: raspc` (a checkpoint,
/// possibly of another version or damaged).
pub fn claims_raspc_format(bytes: &[u8]) -> bool {
    safetensors::SafeTensors::read_metadata(bytes).ok().and_then(|(_, m)| m.metadata().as_ref().and_then(|m| m.get(keys::FORMAT).cloned())).is_some_and(|f| f == FORMAT)
}

fn check_header_size(n: u64, len: u64, limits: &Limits) -> Result<(), CheckpointError> {
    // A header longer than the file is no safetensors file at all (a text file's first 8 bytes
    // read as a length are astronomically large): say that, not that a budget is exceeded.
    if n.saturating_add(8) > len {
        let text = n.to_le_bytes().iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace());
        // (Text is most often a RASP program given where a checkpoint goes, and an ONNX model
        // starts with its IR version field, byte 0x08: helper c19. A GGUF file starts with its
        // magic `GGUF`: helper s23.)
        let bytes = n.to_le_bytes();
        if text && !bytes.starts_with(b"GGUF") {
            // What the file is and what to do first; the byte count, which means nothing to
            // the user, last (helper ed25: the hint came after a 19-digit header size).
            return Err(CheckpointError::NotSafetensors(format!(
                "it starts with text (`{}`), not a safetensors header: a RASP program is compiled to a checkpoint first (`raspc compile`), or evaluated with `raspc eval` (read as safetensors, its first 8 bytes announce a {n}-byte header in a {len}-byte file)",
                String::from_utf8_lossy(&bytes).escape_debug()
            )));
        }
        let hint = if bytes.starts_with(b"GGUF") {
            // (Text too: "GGUF" and a small version number.)
            " (it is a GGUF language model: `raspc probe svflow` reads those; inspect, trace, plot, run and export read raspc's own safetensors checkpoints)".to_string()
        } else if bytes[0] == 0x08 {
            " (it may be an ONNX model: raspc reads its own safetensors checkpoints, not ONNX)".to_string()
        } else {
            String::new()
        };
        return Err(CheckpointError::NotSafetensors(format!("its first 8 bytes announce a {n}-byte header, but the file has {len} bytes{hint}")));
    }
    if n > limits.max_header_bytes {
        return Err(CheckpointError::OverBudget {
            what: "the safetensors header".into(),
            value: format!("{n} bytes"),
            limit: format!("{} bytes", limits.max_header_bytes),
            name: "header_bytes",
        });
    }
    Ok(())
}

impl ModelConfig {
    /// The name and shape of every tensor this config requires, in name order.
    pub fn expected_tensors(&self) -> BTreeMap<String, Vec<usize>> {
        let d = self.d_model;
        let mut m = BTreeMap::new();
        m.insert(names::TOKEN_EMBEDDING.to_string(), vec![self.vocab.len(), d]);
        m.insert(names::POSITION_EMBEDDING.to_string(), vec![self.max_seq_len.saturating_add(1), d]);
        m.insert(names::READOUT.to_string(), vec![d, self.readout_dims]);
        for (l, layer) in self.layers.iter().enumerate() {
            for (h, &dh) in layer.heads.iter().enumerate() {
                for w in ["w_q", "w_k", "w_v"] {
                    m.insert(names::head(l, h, w), vec![d, dh]);
                }
                m.insert(names::head(l, h, "w_o"), vec![dh, d]);
            }
            if let Some(mlp) = &layer.mlp {
                m.insert(names::mlp(l, "w_in"), vec![d, mlp.hidden]);
                m.insert(names::mlp(l, "b_in"), vec![mlp.hidden]);
                m.insert(names::mlp(l, "w_out"), vec![mlp.hidden, d]);
                m.insert(names::mlp(l, "b_out"), vec![d]);
                if mlp.kind == MlpKind::Reglu {
                    m.insert(names::mlp(l, "w_gate"), vec![d, mlp.hidden]);
                    m.insert(names::mlp(l, "b_gate"), vec![mlp.hidden]);
                }
            }
        }
        if self.real_input.is_some() {
            m.insert(names::VALUE_EMBEDDING.to_string(), vec![d]);
        }
        m
    }
}

impl ModelConfig {
    /// Checks every size and number of the config against the budgets, so that
    /// [`expected_tensors`](Self::expected_tensors) and everything sized by the config stay
    /// within them. Returns the total number of f32 values the config implies.
    pub fn check_budget(&self, limits: &Limits) -> Result<u64, CheckpointError> {
        let l = limits;
        l.size("config.d_model", self.d_model, l.max_d_model, "d_model")?;
        l.size("config.max_seq_len", self.max_seq_len, l.max_seq_len, "seq_len")?;
        l.size("the number of layers (config.layers)", self.layers.len(), l.max_layers, "layers")?;
        l.size("the vocabulary size (config.vocab)", self.vocab.len(), l.max_vocab, "vocab")?;
        l.size("config.readout_dims", self.readout_dims, l.max_width, "width")?;
        let heads: usize = self.layers.iter().map(|x| x.heads.len()).fold(0, usize::saturating_add);
        l.size("the number of heads over all layers", heads, l.max_heads, "heads")?;
        for (i, layer) in self.layers.iter().enumerate() {
            for (h, &dh) in layer.heads.iter().enumerate() {
                l.size(format!("config.layers[{i}].heads[{h}] (d_head)"), dh, l.max_width, "width")?;
            }
            if let Some(m) = &layer.mlp {
                l.size(format!("config.layers[{i}].mlp.hidden"), m.hidden, l.max_width, "width")?;
            }
        }
        // Now every product below is at most 2^24 * 2^24 per tensor and 2^16 heads: u64 holds it.
        let mut total: u64 = 0;
        for shape in self.expected_tensors().values() {
            total = total.saturating_add(shape.iter().fold(1u64, |a, &x| a.saturating_mul(x as u64)));
        }
        if total > l.max_params {
            return Err(CheckpointError::OverBudget {
                what: "the number of weights the config implies".into(),
                value: total.to_string(),
                limit: l.max_params.to_string(),
                name: "params",
            });
        }
        Ok(total)
    }
}

fn bad_config(reason: String) -> CheckpointError {
    CheckpointError::BadKey { key: keys::CONFIG, reason }
}

impl Checkpoint {
    /// Checks the config, layout and tensors against each other, within the budgets of
    /// [`Limits::from_env`].
    pub fn validate(&self) -> Result<(), CheckpointError> {
        self.validate_with(&Limits::from_env()?)
    }

    /// Checks the config, layout and tensors against each other and against `limits`.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), CheckpointError> {
        let c = &self.config;
        c.check_budget(limits)?;
        // The metadata's strings and lists, as loading checks them: a checkpoint that passes
        // here loads (a compiled 70,000-character token would otherwise be written, then refused).
        let json = |key: &'static str, v: Result<serde_json::Value, serde_json::Error>| -> Result<(), CheckpointError> {
            limits.json(key, &v.map_err(|e| CheckpointError::BadKey { key, reason: e.to_string() })?)
        };
        json(keys::CONFIG, serde_json::to_value(c))?;
        json(keys::LAYOUT, serde_json::to_value(&self.layout))?;
        json(keys::OUTPUT, serde_json::to_value(&self.output))?;
        for (what, s) in [("program_hash", &self.program_hash), ("compiler_version", &self.compiler_version)] {
            limits.size(format!("the length of metadata key `{what}`"), s.len(), limits.max_string_bytes, "string_bytes")?;
        }
        self.validate_config(limits)?;
        self.validate_layout()?;
        let expected = c.expected_tensors();
        for (name, shape) in &expected {
            let t = self.tensors.get(name).ok_or_else(|| CheckpointError::MissingTensor(name.clone()))?;
            if &t.shape != shape {
                return Err(CheckpointError::WrongShape { name: name.clone(), expected: shape.clone(), found: t.shape.clone() });
            }
            if t.data.len() != shape.iter().product::<usize>() {
                return Err(CheckpointError::WrongShape { name: name.clone(), expected: shape.clone(), found: vec![t.data.len()] });
            }
            check_values(name, &t.shape, &t.data, limits)?;
        }
        if let Some(extra) = self.tensors.keys().find(|k| !expected.contains_key(*k)) {
            return Err(CheckpointError::UnexpectedTensor(extra.clone()));
        }
        self.validate_readout()
    }

    fn validate_config(&self, limits: &Limits) -> Result<(), CheckpointError> {
        let c = &self.config;
        if c.d_model == 0 {
            return Err(bad_config("d_model is 0".into()));
        }
        if c.bos_id >= c.vocab.len() {
            return Err(bad_config(format!("bos_id {} is not a vocabulary id (vocabulary has {})", c.bos_id, c.vocab.len())));
        }
        if c.vocab.len() < 2 {
            return Err(bad_config(format!("the vocabulary has {} entries: it needs BOS and at least one input token", c.vocab.len())));
        }
        let mut tokens = std::collections::BTreeSet::new();
        for (i, v) in c.vocab.iter().enumerate() {
            if v.id != i {
                return Err(bad_config(format!("vocabulary entry {i} has id {} (ids must be 0..n in order)", v.id)));
            }
            if i == c.bos_id {
                continue;
            }
            if !(v.token.is_string() || v.token.is_number() || v.token.is_boolean()) {
                // A null token is BOS's: then `bos_id` is what is wrong (helper ck25).
                let bos = if v.token.is_null() { format!(" (null is BOS's token: is bos_id {} meant to be {i}?)", c.bos_id) } else { String::new() };
                return Err(bad_config(format!("vocabulary entry {i} has token {}: tokens are strings, numbers or booleans{bos}", v.token)));
            }
            if !tokens.insert(v.token.to_string()) {
                return Err(bad_config(format!("vocabulary token {} is listed twice", v.token)));
            }
        }
        if c.max_seq_len == 0 {
            return Err(bad_config("max_seq_len is 0".into()));
        }
        if let Some(r) = &c.real_input {
            let finite = r.lo.is_finite() && r.hi.is_finite() && r.lo <= r.hi;
            let blocks_ok = r.blocks.iter().all(|b| b.lo.is_finite() && b.hi.is_finite() && b.lo <= b.hi && b.start <= b.end);
            if !(finite && blocks_ok && c.vocab.len() == 2) {
                return Err(bad_config("real_input needs finite lo <= hi (also in every block, with start <= end) and a vocabulary of BOS plus one number token".into()));
            }
            // A block is a narrowing of the overall bounds over input positions that exist (a
            // wider block let `run` answer for inputs the certificate does not cover, as
            // `compile` refuses it: helper b21).
            if let Some(b) = r.blocks.iter().find(|b| b.lo < r.lo || b.hi > r.hi || b.end > c.max_seq_len) {
                return Err(bad_config(format!(
                    "real_input block [{}, {}] at positions {}..{} must lie inside the overall bounds [{}, {}] and within max_seq_len {}",
                    b.lo, b.hi, b.start, b.end, r.lo, r.hi, c.max_seq_len
                )));
            }
        }
        let a = &c.attention;
        if !(a.tie_tolerance.is_finite() && a.tie_tolerance >= 0.0 && a.soft_beta.is_finite() && a.soft_beta > 0.0) {
            return Err(bad_config(format!("attention tie_tolerance must be finite and >= 0 and soft_beta finite and > 0 (found {} and {})", a.tie_tolerance, a.soft_beta)));
        }
        if a.tie_tolerance > limits.max_tie_tolerance {
            return Err(CheckpointError::OverBudget {
                what: "config.attention.tie_tolerance".into(),
                value: format!("{:e}", a.tie_tolerance),
                limit: format!("{:e}", limits.max_tie_tolerance),
                name: "tie_tolerance",
            });
        }
        if a.soft_beta > limits.max_soft_beta {
            return Err(CheckpointError::OverBudget {
                what: "config.attention.soft_beta".into(),
                value: format!("{:e}", a.soft_beta),
                limit: format!("{:e}", limits.max_soft_beta),
                name: "soft_beta",
            });
        }
        for (i, layer) in c.layers.iter().enumerate() {
            if let Some(h) = layer.heads.iter().position(|&dh| dh == 0) {
                return Err(bad_config(format!("layers[{i}].heads[{h}] has d_head 0")));
            }
            if layer.head_info.len() > layer.heads.len() {
                return Err(bad_config(format!("layers[{i}] describes {} heads but has {}", layer.head_info.len(), layer.heads.len())));
            }
            match &layer.mlp {
                Some(m) if m.hidden == 0 => return Err(bad_config(format!("layers[{i}].mlp has 0 hidden units"))),
                Some(m) => {
                    if let Some((p, [a, b])) = layer.mlp_info.iter().find_map(|p| p.hidden.filter(|&[a, b]| a > b || b > m.hidden).map(|h| (p, h))) {
                        return Err(bad_config(format!("layers[{i}].mlp_info `{}` names hidden units [{a}, {b}], not a range inside 0..{}", p.writes, m.hidden)));
                    }
                }
                None => {}
            }
        }
        Ok(())
    }

    fn validate_layout(&self) -> Result<(), CheckpointError> {
        let c = &self.config;
        // Every entry is at least one dim wide and entries do not overlap: at most d_model.
        if self.layout.sops.len() > c.d_model {
            return Err(CheckpointError::BadLayout(format!("{} entries cannot fit in d_model {}", self.layout.sops.len(), c.d_model)));
        }
        let mut used = vec![None::<&str>; c.d_model];
        // A program's names label one slot each (trace decodes and compares them by label; the
        // compiler writes each once, `x`, `x_2`, ...): a repeated one made `trace --program`
        // report a divergence of the wrong slot (helper b21). Helper slots (labels with `.` or
        // `:`, such as the `prog.arg` of each argument a real-valued expression materialises)
        // may repeat: trace compares none of them (review rv21).
        let mut labels = std::collections::HashSet::new();
        let program_name = |l: &str| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '_');
        if let Some(s) = self.layout.sops.iter().filter(|s| program_name(&s.label)).find(|s| !labels.insert(s.label.as_str())) {
            return Err(CheckpointError::BadLayout(format!("two entries are labelled `{}` (a program's name labels one slot)", s.label)));
        }
        for s in &self.layout.sops {
            let width = s.encoding.dims();
            if width == 0 {
                return Err(CheckpointError::BadLayout(format!(
                    "s-op `{}` has a {} encoding with no values (0 dims)",
                    s.label,
                    if matches!(s.encoding, Encoding::MultiHot { .. }) { "multi_hot" } else { "categorical" }
                )));
            }
            let end = match s.offset.checked_add(width) {
                Some(e) if e <= c.d_model => e,
                _ => return Err(CheckpointError::BadLayout(format!("s-op `{}` occupies dims {}..{}+{width} beyond d_model {}", s.label, s.offset, s.offset, c.d_model))),
            };
            for (dim, slot) in used.iter_mut().enumerate().take(end).skip(s.offset) {
                if let Some(other) = slot {
                    return Err(CheckpointError::BadLayout(format!("dim {dim} is claimed by both `{other}` and `{}`", s.label)));
                }
                *slot = Some(&s.label);
            }
        }
        // The dims of numerical entries, once (parts are checked against it: a scan of the
        // layout per part would cost entries x parts on a large header).
        let numerical: std::collections::HashSet<usize> = self.layout.sops.iter().filter(|o| matches!(o.encoding, Encoding::Numerical { .. })).map(|o| o.offset).collect();
        for s in &self.layout.sops {
            if s.parts.is_empty() {
                continue;
            }
            if !matches!(s.encoding, Encoding::Numerical { .. }) {
                return Err(CheckpointError::BadLayout(format!("s-op `{}` is not numerical but lists parts", s.label)));
            }
            let mut seen = std::collections::BTreeSet::from([s.offset]);
            for &p in &s.parts {
                if p >= c.d_model {
                    return Err(CheckpointError::BadLayout(format!("s-op `{}`: part dim {p} is past d_model {}", s.label, c.d_model)));
                }
                if !seen.insert(p) {
                    let what = if p == s.offset { "the entry's own dim" } else { "listed twice" };
                    return Err(CheckpointError::BadLayout(format!("s-op `{}`: part dim {p} is {what}", s.label)));
                }
                // Each part is a numerical entry's own dim.
                if !numerical.contains(&p) {
                    return Err(CheckpointError::BadLayout(format!("s-op `{}`: part dim {p} is not a numerical entry of the layout", s.label)));
                }
            }
        }
        let out = &self.output;
        if matches!(out.encoding, Encoding::MultiHot { .. }) {
            return Err(CheckpointError::BadKey { key: keys::OUTPUT, reason: format!("output `{}` is multi_hot (a set of values): an output is categorical or numerical", out.label) });
        }
        if out.encoding.dims() == 0 {
            return Err(CheckpointError::BadKey { key: keys::OUTPUT, reason: format!("output `{}` is categorical with no values", out.label) });
        }
        if out.encoding.dims() != c.readout_dims {
            return Err(CheckpointError::BadKey { key: keys::OUTPUT, reason: format!("the output encoding has {} dims but the readout has {}", out.encoding.dims(), c.readout_dims) });
        }
        if !(out.tolerance.is_finite() && out.tolerance >= 0.0) {
            return Err(CheckpointError::BadKey { key: keys::OUTPUT, reason: format!("tolerance {} must be finite and >= 0", out.tolerance) });
        }
        Ok(())
    }

    /// The readout reads one layout entry: the output's own, or one with a different encoding
    /// that the readout converts (a relabelling such as `tokens == "a"` read from the `tokens`
    /// one-hot, or a categorical output read from a numerical s-op's `:categorical` helper).
    /// Checked after the tensors' shapes.
    fn validate_readout(&self) -> Result<(), CheckpointError> {
        let out = &self.output;
        let bad = |reason: String| CheckpointError::BadKey { key: keys::OUTPUT, reason };
        let own = self.layout.sops.iter().find(|s| s.label == out.label);
        let Some(r) = self.tensors.get(names::READOUT) else { return Ok(()) };
        let k = self.config.readout_dims.max(1);
        let rows: Vec<usize> = r.data.chunks(k).enumerate().filter(|(_, row)| row.iter().any(|&x| x != 0.0)).map(|(i, _)| i).collect();
        let (Some(&first), Some(&last)) = (rows.first(), rows.last()) else {
            return match own {
                Some(_) => Ok(()),
                None => Err(bad(format!("output label `{}` is not in the layout", out.label))),
            };
        };
        let Some(read) = self.layout.sops.iter().find(|s| s.offset <= first && last < s.offset + s.encoding.dims()) else {
            return Err(bad(format!("the readout reads dims {first}..={last}, which are not one layout entry")));
        };
        // Read unchanged: the same encoding, and each of the entry's dims goes to the readout
        // dim of the same index with weight 1 (a permutation of the same values, `3 - tokens`
        // over [1, 2], is a relabelling like any other).
        let identity = read.encoding == out.encoding
            && (0..read.encoding.dims())
                .all(|i| r.data.get((read.offset + i) * k..(read.offset + i + 1) * k).is_some_and(|row| row.iter().enumerate().all(|(j, &x)| x == if j == i { 1.0 } else { 0.0 })));
        match own {
            Some(o) if o.label == read.label => Ok(()),
            _ if !identity => Ok(()),
            Some(_) => Err(bad(format!("output `{}` is in the layout but the readout reads `{}` unchanged", out.label, read.label))),
            None => Err(bad(format!("output label `{}` is not in the layout (the readout reads `{}` unchanged)", out.label, read.label))),
        }
    }

    /// The metadata map, keys sorted (`tensor_sha256` hashes the tensors as [`to_bytes`](Self::to_bytes) writes them).
    pub fn metadata(&self) -> Result<BTreeMap<&'static str, String>, CheckpointError> {
        self.metadata_with_hash(tensor_hash(&self.data_bytes()))
    }

    /// The oldest format version that holds this checkpoint: 2 when its layout has a
    /// `multi_hot` entry (a reader of version 1 would not know the kind), else 1.
    pub fn format_version(&self) -> u32 {
        if self.layout.sops.iter().any(|s| matches!(s.encoding, Encoding::MultiHot { .. })) {
            2
        } else {
            1
        }
    }

    fn metadata_with_hash(&self, hash: String) -> Result<BTreeMap<&'static str, String>, CheckpointError> {
        // serde_json fails only on maps with non-string keys, which these types do not have;
        // the error is still reported (naming the key), never a panic.
        fn j<T: serde::Serialize>(key: &'static str, v: &T) -> Result<String, CheckpointError> {
            serde_json::to_string(v).map_err(|e| CheckpointError::BadKey { key, reason: format!("cannot be serialised: {e}") })
        }
        let mut meta = BTreeMap::from([
            (keys::FORMAT, FORMAT.to_string()),
            (keys::FORMAT_VERSION, self.format_version().to_string()),
            (keys::CONFIG, j(keys::CONFIG, &self.config)?),
            (keys::LAYOUT, j(keys::LAYOUT, &self.layout)?),
            (keys::OUTPUT, j(keys::OUTPUT, &self.output)?),
            (keys::PROGRAM_HASH, self.program_hash.clone()),
            (keys::COMPILER_VERSION, self.compiler_version.clone()),
            (keys::TENSOR_SHA256, hash),
        ]);
        let hash = metadata_hash(meta.iter().map(|(k, v)| (*k, v.as_str())));
        meta.insert(keys::METADATA_SHA256, hash);
        Ok(meta)
    }

    /// The tensor data section: every tensor in name order, little-endian f32.
    fn data_bytes(&self) -> Vec<u8> {
        let n: usize = self.tensors.values().map(|t| t.data.len() * 4).sum();
        let mut out = Vec::with_capacity(n);
        for t in self.tensors.values() {
            for x in &t.data {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out
    }

    /// Serialises to safetensors bytes: deterministic (sorted keys, tensors in name order,
    /// little-endian f32, header padded with spaces to a multiple of 8 bytes).
    pub fn to_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        self.validate()?;
        self.to_bytes_unchecked()
    }

    /// [`to_bytes`](Self::to_bytes) without validating first: what a damaged or hostile writer
    /// could produce, with a correct integrity hash. For tests and fuzzing of the reader.
    #[doc(hidden)]
    pub fn to_bytes_unchecked(&self) -> Result<Vec<u8>, CheckpointError> {
        let data = self.data_bytes();
        let mut header = serde_json::Map::new();
        let meta: serde_json::Map<String, serde_json::Value> =
            self.metadata_with_hash(tensor_hash(&data))?.into_iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v))).collect();
        header.insert("__metadata__".into(), serde_json::Value::Object(meta));
        let mut offset = 0usize;
        for (name, t) in &self.tensors {
            let bytes = t.data.len() * 4;
            header.insert(name.clone(), serde_json::json!({ "dtype": "F32", "shape": t.shape, "data_offsets": [offset, offset + bytes] }));
            offset += bytes;
        }
        // serde_json's Map is a BTreeMap (no preserve_order feature): keys come out sorted.
        let mut h = serde_json::Value::Object(header).to_string();
        while !(8 + h.len()).is_multiple_of(8) {
            h.push(' ');
        }
        let mut out = Vec::with_capacity(8 + h.len() + offset);
        out.extend_from_slice(&(h.len() as u64).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&data);
        Ok(out)
    }

    /// Reads and validates a checkpoint within the budgets of [`Limits::from_env`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        Checkpoint::from_bytes_with(bytes, &Limits::from_env()?)
    }

    /// Reads a checkpoint file (see [`read_file`]) and validates it.
    pub fn from_file(path: &Path, limits: &Limits) -> Result<Checkpoint, CheckpointError> {
        Checkpoint::from_bytes_with(&read_file(path, limits)?, limits)
    }

    /// Reads and validates a checkpoint. Every size is checked against `limits` before
    /// anything of that size is allocated; the tensor data is checked against its hash once the
    /// names, dtypes and shapes are known, before its values and the readout are.
    pub fn from_bytes_with(bytes: &[u8], limits: &Limits) -> Result<Checkpoint, CheckpointError> {
        let Some(head) = bytes.first_chunk::<8>() else {
            return Err(CheckpointError::NotSafetensors(format!("{} bytes is too short for a safetensors header", bytes.len())));
        };
        let header_len = u64::from_le_bytes(*head);
        check_header_size(header_len, bytes.len() as u64, limits)?;
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| CheckpointError::NotSafetensors(size_mismatch(bytes, header_len).unwrap_or_else(|| e.to_string())))?;
        let (_, md) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| CheckpointError::NotSafetensors(e.to_string()))?;
        let meta = md.metadata().clone().unwrap_or_default();
        let get = |k: &'static str| meta.get(k).cloned().ok_or(CheckpointError::MissingKey(k));
        let format = get(keys::FORMAT)?;
        if format != FORMAT {
            let shown: String = format.chars().take(40).collect();
            return Err(CheckpointError::BadKey { key: keys::FORMAT, reason: format!("expected \"{FORMAT}\", found {shown:?}") });
        }
        let version = get(keys::FORMAT_VERSION)?;
        if !(1..=FORMAT_VERSION).any(|v| version == v.to_string()) {
            return Err(CheckpointError::UnsupportedVersion { found: version.chars().take(40).collect(), supported: FORMAT_VERSION });
        }
        fn parse<T: serde::de::DeserializeOwned>(key: &'static str, text: &str, limits: &Limits) -> Result<T, CheckpointError> {
            let bad = |e: serde_json::Error| CheckpointError::BadKey { key, reason: e.to_string() };
            let v: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
            limits.json(key, &v)?;
            // (serde reads an array as a struct's fields in order: "invalid type: map, expected
            // usize" for a config given as an array, helper ck25.)
            if !v.is_object() {
                let kind = match &v {
                    serde_json::Value::Array(_) => "an array",
                    serde_json::Value::String(_) => "a string",
                    serde_json::Value::Number(_) => "a number",
                    serde_json::Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(CheckpointError::BadKey { key, reason: format!("expected a JSON object, found {kind}") });
            }
            serde_json::from_value(v).map_err(bad)
        }
        let config: ModelConfig = parse(keys::CONFIG, &get(keys::CONFIG)?, limits)?;
        config.check_budget(limits)?;
        // Before the tensors' shapes, which d_model sizes (helper ck25: `d_model: 0` was named
        // as a wrong shape of `embed.position`).
        if config.d_model == 0 {
            return Err(CheckpointError::BadKey { key: keys::CONFIG, reason: "d_model is 0 (it must be at least 1)".into() });
        }
        let layout: Layout = parse(keys::LAYOUT, &get(keys::LAYOUT)?, limits)?;
        let output: OutputSpec = parse(keys::OUTPUT, &get(keys::OUTPUT)?, limits)?;
        let program_hash = get(keys::PROGRAM_HASH)?;
        let compiler_version = get(keys::COMPILER_VERSION)?;
        for (what, s) in [("program_hash", &program_hash), ("compiler_version", &compiler_version)] {
            limits.size(format!("the length of metadata key `{what}`"), s.len(), limits.max_string_bytes, "string_bytes")?;
        }
        // Names, dtypes and shapes first (nothing is copied yet), then the values.
        let expected = config.expected_tensors();
        let mut views: Vec<(String, safetensors::tensor::TensorView)> = st.tensors();
        views.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, view) in &views {
            let Some(shape) = expected.get(name) else { return Err(CheckpointError::UnexpectedTensor(name.clone())) };
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(CheckpointError::WrongDtype { name: name.clone(), shape: view.shape().to_vec(), found: format!("{:?}", view.dtype()) });
            }
            if view.shape() != shape.as_slice() {
                return Err(CheckpointError::WrongShape { name: name.clone(), expected: shape.clone(), found: view.shape().to_vec() });
            }
        }
        if let Some(missing) = expected.keys().find(|k| views.binary_search_by(|v| v.0.as_str().cmp(k.as_str())).is_err()) {
            return Err(CheckpointError::MissingTensor(missing.clone()));
        }
        // The data's integrity before its values: a flipped byte is a corrupted file, not a NaN
        // weight or a readout that "reads dims 0..=51" (helper d6).
        let expected_hash = get(keys::TENSOR_SHA256)?;
        // The data section: everything after the header (8 + header_len <= len was checked).
        let data = usize::try_from(header_len).ok().and_then(|h| bytes.get(h.checked_add(8)?..));
        let found = tensor_hash(data.ok_or_else(|| CheckpointError::NotSafetensors("the header runs past the end of the file".into()))?);
        if found != expected_hash {
            return Err(CheckpointError::Integrity { expected: expected_hash.chars().take(80).collect(), found });
        }
        let mut tensors = BTreeMap::new();
        for (name, view) in views {
            // Whole 4-byte chunks by type (the dtype is F32 and safetensors checked the length).
            let data: Vec<f32> = view.data().as_chunks::<4>().0.iter().map(|c| f32::from_le_bytes(*c)).collect();
            check_values(&name, view.shape(), &data, limits)?;
            tensors.insert(name, Tensor { shape: view.shape().to_vec(), data });
        }
        let ck = Checkpoint { config, layout, output, program_hash, compiler_version, tensors };
        ck.validate_with(limits)?;
        // Last, so an edit that breaks the structure is named as such: what passes every check
        // must still be what the writer wrote (helper ck25: a flipped bit in the output's
        // values, `1` to `9`, was read out as 9; swapped vocabulary tokens were accepted).
        // A file written before the key existed has none and loads as it did (review rv25:
        // every older checkpoint was refused, and `compile -o` would not replace one).
        if let Some(expected_meta) = meta.get(keys::METADATA_SHA256) {
            let found = metadata_hash(meta.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            if &found != expected_meta {
                return Err(CheckpointError::MetadataIntegrity { expected: expected_meta.chars().take(80).collect(), found });
            }
        }
        Ok(ck)
    }
}

/// Every value finite and within the weight budget.
fn check_values(name: &str, shape: &[usize], data: &[f32], limits: &Limits) -> Result<(), CheckpointError> {
    if let Some(index) = data.iter().position(|x| !x.is_finite()) {
        // The position as indices of the shape, and the flat index (helper ck25: the flat
        // index alone, no shape).
        let mut at = vec![0; shape.len()];
        let mut rest = index;
        for (d, &n) in shape.iter().enumerate().rev() {
            at[d] = rest % n.max(1);
            rest /= n.max(1);
        }
        return Err(CheckpointError::NonFinite { name: name.to_string(), shape: shape.to_vec(), at, index, value: data[index] });
    }
    // The largest, not the first past the budget: a budget raised to the value named must then
    // pass (helper d10: raised to each value shown, it met the next larger one, six times).
    if let Some((index, &value)) = data.iter().enumerate().filter(|(_, x)| x.abs() > limits.max_abs_weight).max_by(|a, b| a.1.abs().total_cmp(&b.1.abs())) {
        return Err(CheckpointError::WeightTooLarge { name: name.to_string(), index, value, limit: limits.max_abs_weight });
    }
    Ok(())
}
