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

pub const FORMAT: &str = "raspc";
pub const FORMAT_VERSION: u32 = 1;

/// `__metadata__` keys.
pub mod keys {
    pub const FORMAT: &str = "format";
    pub const FORMAT_VERSION: &str = "format_version";
    pub const CONFIG: &str = "config";
    pub const LAYOUT: &str = "layout";
    pub const OUTPUT: &str = "output";
    pub const PROGRAM_HASH: &str = "program_hash";
    pub const COMPILER_VERSION: &str = "compiler_version";
    pub const ALL: [&str; 7] = [FORMAT, FORMAT_VERSION, CONFIG, LAYOUT, OUTPUT, PROGRAM_HASH, COMPILER_VERSION];
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
    /// One dim holding the number. `values`, when present, lists every value the s-op can
    /// take (JSON atoms, ascending).
    Numerical {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<Vec<serde_json::Value>>,
    },
}

impl Encoding {
    pub fn dims(&self) -> usize {
        match self {
            Encoding::Categorical { values } => values.len(),
            Encoding::Numerical { .. } => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SopLayout {
    pub label: String,
    pub offset: usize,
    pub encoding: Encoding,
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

/// Everything that can be wrong with a checkpoint file.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CheckpointError {
    #[error("not a safetensors file: {0}")]
    NotSafetensors(String),
    #[error("metadata key `{0}` is missing")]
    MissingKey(&'static str),
    #[error("metadata key `{key}` is invalid: {reason}")]
    BadKey { key: &'static str, reason: String },
    #[error("format version {found} is not supported (this raspc reads version {supported})")]
    UnsupportedVersion { found: String, supported: u32 },
    #[error("tensor `{0}` is missing")]
    MissingTensor(String),
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    WrongShape { name: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tensor `{name}` has dtype {found}, expected F32")]
    WrongDtype { name: String, found: String },
    #[error("tensor `{0}` is not part of this model's config")]
    UnexpectedTensor(String),
    #[error("tensor `{name}` holds a non-finite value at flat index {index}")]
    NonFinite { name: String, index: usize },
    #[error("the residual layout is inconsistent: {0}")]
    BadLayout(String),
}

impl ModelConfig {
    /// The name and shape of every tensor this config requires, in name order.
    pub fn expected_tensors(&self) -> BTreeMap<String, Vec<usize>> {
        let d = self.d_model;
        let mut m = BTreeMap::new();
        m.insert(names::TOKEN_EMBEDDING.to_string(), vec![self.vocab.len(), d]);
        m.insert(names::POSITION_EMBEDDING.to_string(), vec![self.max_seq_len + 1, d]);
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

impl Checkpoint {
    /// Checks the config, layout and tensors against each other.
    pub fn validate(&self) -> Result<(), CheckpointError> {
        let c = &self.config;
        if c.bos_id >= c.vocab.len() {
            return Err(CheckpointError::BadKey { key: keys::CONFIG, reason: format!("bos_id {} is not a vocabulary id (vocabulary has {})", c.bos_id, c.vocab.len()) });
        }
        for (i, v) in c.vocab.iter().enumerate() {
            if v.id != i {
                return Err(CheckpointError::BadKey { key: keys::CONFIG, reason: format!("vocabulary entry {i} has id {} (ids must be 0..n in order)", v.id) });
            }
        }
        if let Some(r) = &c.real_input
            && !(r.lo.is_finite() && r.hi.is_finite() && r.lo <= r.hi && c.vocab.len() == 2)
        {
            return Err(CheckpointError::BadKey { key: keys::CONFIG, reason: "real_input needs finite lo <= hi and a vocabulary of BOS plus one number token".into() });
        }
        if !(c.attention.tie_tolerance.is_finite() && c.attention.tie_tolerance >= 0.0 && c.attention.soft_beta.is_finite() && c.attention.soft_beta > 0.0) {
            return Err(CheckpointError::BadKey { key: keys::CONFIG, reason: "attention tie_tolerance must be >= 0 and soft_beta > 0".into() });
        }
        let mut used = vec![None::<&str>; c.d_model];
        for s in &self.layout.sops {
            let end = s.offset + s.encoding.dims();
            if end > c.d_model {
                return Err(CheckpointError::BadLayout(format!("s-op `{}` occupies dims {}..{end} beyond d_model {}", s.label, s.offset, c.d_model)));
            }
            for (dim, slot) in used.iter_mut().enumerate().take(end).skip(s.offset) {
                if let Some(other) = slot {
                    return Err(CheckpointError::BadLayout(format!("dim {dim} is claimed by both `{other}` and `{}`", s.label)));
                }
                *slot = Some(&s.label);
            }
        }
        if self.output.encoding.dims() != c.readout_dims {
            return Err(CheckpointError::BadKey {
                key: keys::OUTPUT,
                reason: format!("the output encoding has {} dims but the readout has {}", self.output.encoding.dims(), c.readout_dims),
            });
        }
        let expected = c.expected_tensors();
        for (name, shape) in &expected {
            let t = self.tensors.get(name).ok_or_else(|| CheckpointError::MissingTensor(name.clone()))?;
            if &t.shape != shape {
                return Err(CheckpointError::WrongShape { name: name.clone(), expected: shape.clone(), found: t.shape.clone() });
            }
            if t.data.len() != shape.iter().product::<usize>() {
                return Err(CheckpointError::WrongShape { name: name.clone(), expected: shape.clone(), found: vec![t.data.len()] });
            }
            if let Some(index) = t.data.iter().position(|x| !x.is_finite()) {
                return Err(CheckpointError::NonFinite { name: name.clone(), index });
            }
        }
        if let Some(extra) = self.tensors.keys().find(|k| !expected.contains_key(*k)) {
            return Err(CheckpointError::UnexpectedTensor(extra.clone()));
        }
        Ok(())
    }

    /// The metadata map, keys sorted.
    pub fn metadata(&self) -> BTreeMap<&'static str, String> {
        let j = |v: &dyn erased::Json| v.json();
        BTreeMap::from([
            (keys::FORMAT, FORMAT.to_string()),
            (keys::FORMAT_VERSION, FORMAT_VERSION.to_string()),
            (keys::CONFIG, j(&self.config)),
            (keys::LAYOUT, j(&self.layout)),
            (keys::OUTPUT, j(&self.output)),
            (keys::PROGRAM_HASH, self.program_hash.clone()),
            (keys::COMPILER_VERSION, self.compiler_version.clone()),
        ])
    }

    /// Serialises to safetensors bytes: deterministic (sorted keys, tensors in name order,
    /// little-endian f32, header padded with spaces to a multiple of 8 bytes).
    pub fn to_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        self.validate()?;
        let mut header = serde_json::Map::new();
        let meta: serde_json::Map<String, serde_json::Value> =
            self.metadata().into_iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v))).collect();
        header.insert("__metadata__".into(), serde_json::Value::Object(meta));
        let mut offset = 0usize;
        for (name, t) in &self.tensors {
            let bytes = t.data.len() * 4;
            header.insert(name.clone(), serde_json::json!({ "dtype": "F32", "shape": t.shape, "data_offsets": [offset, offset + bytes] }));
            offset += bytes;
        }
        // serde_json's Map is a BTreeMap (no preserve_order feature): keys come out sorted.
        let mut h = serde_json::to_string(&serde_json::Value::Object(header)).expect("JSON of strings and numbers");
        while !(8 + h.len()).is_multiple_of(8) {
            h.push(' ');
        }
        let mut out = Vec::with_capacity(8 + h.len() + offset);
        out.extend_from_slice(&(h.len() as u64).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        for t in self.tensors.values() {
            for x in &t.data {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        Ok(out)
    }

    /// Reads and validates a checkpoint.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| CheckpointError::NotSafetensors(e.to_string()))?;
        let (_, md) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| CheckpointError::NotSafetensors(e.to_string()))?;
        let meta = md.metadata().clone().unwrap_or_default();
        let get = |k: &'static str| meta.get(k).cloned().ok_or(CheckpointError::MissingKey(k));
        let format = get(keys::FORMAT)?;
        if format != FORMAT {
            return Err(CheckpointError::BadKey { key: keys::FORMAT, reason: format!("expected \"{FORMAT}\", found {format:?}") });
        }
        let version = get(keys::FORMAT_VERSION)?;
        if version != FORMAT_VERSION.to_string() {
            return Err(CheckpointError::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
        }
        fn parse<T: serde::de::DeserializeOwned>(key: &'static str, text: &str) -> Result<T, CheckpointError> {
            serde_json::from_str(text).map_err(|e| CheckpointError::BadKey { key, reason: e.to_string() })
        }
        let config: ModelConfig = parse(keys::CONFIG, &get(keys::CONFIG)?)?;
        let layout: Layout = parse(keys::LAYOUT, &get(keys::LAYOUT)?)?;
        let output: OutputSpec = parse(keys::OUTPUT, &get(keys::OUTPUT)?)?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(CheckpointError::WrongDtype { name, found: format!("{:?}", view.dtype()) });
            }
            let data = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            tensors.insert(name, Tensor { shape: view.shape().to_vec(), data });
        }
        let ck = Checkpoint {
            config,
            layout,
            output,
            program_hash: get(keys::PROGRAM_HASH)?,
            compiler_version: get(keys::COMPILER_VERSION)?,
            tensors,
        };
        ck.validate()?;
        Ok(ck)
    }
}

mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).expect("config types serialise")
        }
    }
}
