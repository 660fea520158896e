//! A llama-architecture causal language model read from a GGUF file (SmolLM2-135M-Instruct,
//! fetched by scripts/fetch-smollm2.sh), run on candle with every head's attention exposed for
//! the SVFlow probes.
//!
//! Weights are dequantized to f32 at load. The forward pass: token embedding; per block
//! RMSNorm -> grouped-query attention with rotary position embedding on interleaved pairs (GGUF
//! stores llama Q/K rows permuted for that form) and a causal mask -> residual; RMSNorm ->
//! SwiGLU feed-forward -> residual; final RMSNorm; logits through the tied embedding. The
//! tokenizer is the byte-level BPE stored in the file (vocabulary and merges), with the GPT-2
//! pre-tokenizer split and single digits.

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor, D};

#[derive(Debug, thiserror::Error)]
pub enum LmError {
    #[error("cannot read `{path}`: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("GGUF: {0}")]
    Gguf(String),
    #[error("tensor computation: {}", plain(.0))]
    Candle(#[from] candle_core::Error),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}

type Result<T> = std::result::Result<T, LmError>;

/// A candle error's message without the backtrace candle attaches when `RUST_BACKTRACE` is set
/// (helper c19: a stack trace reached the user, and the `--json` error object).
pub fn plain(e: &candle_core::Error) -> String {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => plain(inner),
        candle_core::Error::Context { inner, context } => format!("{} ({context})", plain(inner)),
        e => e.to_string(),
    }
}

#[derive(Debug)]
struct Block {
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    ffn_norm: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
}

/// Model shape read from the GGUF metadata.
#[derive(Clone, Debug)]
pub struct Config {
    pub layers: usize,
    pub d_model: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rope_base: f32,
    pub rms_eps: f64,
    pub vocab: usize,
}

/// Captured attention uses the runtime's types: per layer the residual entering it, each head's
/// weights `[query][key]` and conditional scores `W_O^h v_j`, and the attention sublayer output.
pub use raspc_runtime::{HeadCapture, LayerCapture};

pub struct LanguageModel {
    pub config: Config,
    embed: Tensor,
    blocks: Vec<Block>,
    out_norm: Tensor,
    tokenizer: tokenizers::Tokenizer,
    device: Device,
}

impl std::fmt::Debug for LanguageModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageModel").field("config", &self.config).finish()
    }
}

fn meta_u32(c: &gguf_file::Content, k: &str) -> Result<usize> {
    c.metadata.get(k).ok_or_else(|| LmError::Gguf(format!("metadata key `{k}` is missing")))?.to_u32().map(|x| x as usize).map_err(|e| LmError::Gguf(format!("{k}: {}", plain(&e))))
}

fn meta_f32(c: &gguf_file::Content, k: &str) -> Result<f32> {
    c.metadata.get(k).ok_or_else(|| LmError::Gguf(format!("metadata key `{k}` is missing")))?.to_f32().map_err(|e| LmError::Gguf(format!("{k}: {}", plain(&e))))
}

fn meta_strings(c: &gguf_file::Content, k: &str) -> Result<Vec<String>> {
    let v = c.metadata.get(k).ok_or_else(|| LmError::Gguf(format!("metadata key `{k}` is missing")))?;
    let arr = v.to_vec().map_err(|e| LmError::Gguf(format!("{k}: {}", plain(&e))))?;
    arr.iter().map(|x| x.to_string().cloned().map_err(|e| LmError::Gguf(format!("{k}: {}", plain(&e))))).collect()
}

/// The value of `general.alignment` as candle reads it (an 8-, 16- or 32-bit integer; other
/// types leave candle's default), from the metadata before candle parses it: candle divides by
/// it (an alignment of 0 panicked, helper b21). Walks the header by the GGUF layout (magic,
/// version, counts, key/value pairs), keys compared as candle stores them (trailing NULs
/// dropped: review rv21), through a buffer; an unreadable header is left to candle's own errors
/// (None).
fn declared_alignment(file: &mut std::fs::File) -> Option<i64> {
    use std::io::Read;
    type In<'a> = std::io::BufReader<&'a mut std::fs::File>;
    fn take<const N: usize>(f: &mut In) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        f.read_exact(&mut b).ok()?;
        Some(b)
    }
    fn skip(f: &mut In, n: u64) -> Option<()> {
        f.seek_relative(i64::try_from(n).ok()?).ok()
    }
    // Version 1 writes lengths and counts as u32, later versions as u64.
    fn len(f: &mut In, v1: bool) -> Option<u64> {
        Some(if v1 { u32::from_le_bytes(take(f)?) as u64 } else { u64::from_le_bytes(take(f)?) })
    }
    fn width(ty: u32) -> Option<u64> {
        match ty {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }
    fn skip_value(f: &mut In, ty: u32, v1: bool, depth: u32) -> Option<()> {
        if let Some(w) = width(ty) {
            return skip(f, w);
        }
        match ty {
            8 => {
                let n = len(f, v1)?;
                skip(f, n)
            }
            9 if depth < 4 => {
                let inner = u32::from_le_bytes(take(f)?);
                let n = len(f, v1)?;
                if let Some(w) = width(inner) {
                    return skip(f, n.checked_mul(w)?);
                }
                // Strings or arrays: element by element (each reads at least 4 bytes, so a
                // count past the file ends at its end).
                for _ in 0..n {
                    skip_value(f, inner, v1, depth + 1)?;
                }
                Some(())
            }
            _ => None,
        }
    }
    std::io::Seek::rewind(file).ok()?;
    let f = &mut std::io::BufReader::with_capacity(1 << 16, file);
    if &take::<4>(f)? != b"GGUF" {
        return None;
    }
    let v1 = u32::from_le_bytes(take(f)?) == 1;
    let _tensors = len(f, v1)?;
    let kvs = len(f, v1)?;
    let mut found = None;
    for _ in 0..kvs {
        let n = len(f, v1)?;
        // Only keys short enough to be `general.alignment` (with some NULs) are read.
        let key = if n <= 64 {
            let mut k = vec![0u8; n as usize];
            f.read_exact(&mut k).ok()?;
            while k.last() == Some(&0) {
                k.pop();
            }
            k
        } else {
            skip(f, n)?;
            vec![]
        };
        let ty = u32::from_le_bytes(take(f)?);
        if key == b"general.alignment" && ty <= 5 {
            // The last one wins, as in candle's map.
            found = Some(match ty {
                0 => u8::from_le_bytes(take(f)?) as i64,
                1 => i8::from_le_bytes(take(f)?) as i64,
                2 => u16::from_le_bytes(take(f)?) as i64,
                3 => i16::from_le_bytes(take(f)?) as i64,
                4 => u32::from_le_bytes(take(f)?) as i64,
                _ => i32::from_le_bytes(take(f)?) as i64,
            });
        } else {
            if key == b"general.alignment" {
                found = None;
            }
            skip_value(f, ty, v1, 0)?;
        }
    }
    found
}

/// Budgets for a GGUF file (checked before any tensor is read or allocated).
pub mod limits {
    /// Layers.
    pub const MAX_LAYERS: usize = 1024;
    /// d_model, heads, vocabulary and any single tensor dimension.
    pub const MAX_DIM: usize = 1 << 20;
    /// Elements of one tensor (2^30 f32 values: 4 GiB once dequantized).
    pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 30;
}

/// Checks a tensor's declared shape and size before it is read: every dimension and the
/// element count within budget, the byte size computable without overflow and inside the file.
fn check_tensor(c: &gguf_file::Content, name: &str, file_len: u64) -> Result<()> {
    let info = c.tensor_infos.get(name).ok_or_else(|| LmError::Gguf(format!("tensor `{name}` is missing")))?;
    let dims = info.shape.dims();
    let bad = |why: String| LmError::Gguf(format!("tensor `{name}` with dims {dims:?}: {why}"));
    if let Some(&d) = dims.iter().find(|&&d| d > limits::MAX_DIM) {
        return Err(bad(format!("dimension {d} is over the budget of {}", limits::MAX_DIM)));
    }
    let elems = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).ok_or_else(|| bad("the element count overflows".into()))?;
    if elems > limits::MAX_TENSOR_ELEMENTS {
        return Err(bad(format!("{elems} elements, over the budget of {}", limits::MAX_TENSOR_ELEMENTS)));
    }
    let block = info.ggml_dtype.block_size() as u64;
    if block == 0 || elems % block != 0 {
        return Err(bad(format!("{elems} elements are not a whole number of {block}-element blocks")));
    }
    let bytes = (elems / block).checked_mul(info.ggml_dtype.type_size() as u64).ok_or_else(|| bad("the byte size overflows".into()))?;
    let start = c.tensor_data_offset.checked_add(info.offset).ok_or_else(|| bad("the data offset overflows".into()))?;
    if start.checked_add(bytes).is_none_or(|end| end > file_len) {
        return Err(bad(format!("its {bytes} bytes at offset {start} lie beyond the end of the file ({file_len} bytes)")));
    }
    Ok(())
}

/// Checks a tensor's shape against the one the config implies.
fn check_shape(c: &gguf_file::Content, name: &str, want: &[usize]) -> Result<()> {
    match c.tensor_infos.get(name) {
        Some(info) if info.shape.dims() == want => Ok(()),
        Some(info) => Err(LmError::Gguf(format!("tensor `{name}` has shape {:?}, expected {want:?}", info.shape.dims()))),
        None => Err(LmError::Gguf(format!("tensor `{name}` is missing"))),
    }
}

impl LanguageModel {
    pub fn load(path: &std::path::Path) -> Result<LanguageModel> {
        let device = Device::Cpu;
        let io = |e| LmError::Io { path: path.display().to_string(), source: e };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(LmError::Gguf(format!("`{}` is not a regular file", path.display())));
        }
        let file_len = meta.len();
        let mut f = std::fs::File::open(path).map_err(io)?;
        // What the file is when it is not GGUF: a safetensors file (a raspc checkpoint given the
        // wrong name, say) starts with its header's length and then `{`.
        let mut head = vec![];
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut f, 9), &mut head).map_err(io)?;
        if head.len() < 4 || &head[..4] != b"GGUF" {
            let what = if head.get(8) == Some(&b'{') { ": it looks like a safetensors file (a raspc checkpoint is read by its `.safetensors` name)" } else { "" };
            return Err(LmError::Gguf(format!("`{}` is not a GGUF file (it does not start with `GGUF`){what}", path.display())));
        }
        if declared_alignment(&mut f) == Some(0) {
            return Err(LmError::Gguf("general.alignment is 0: the tensor data's alignment must be positive".into()));
        }
        std::io::Seek::rewind(&mut f).map_err(io)?;
        let c = gguf_file::Content::read(&mut f).map_err(|e| LmError::Gguf(plain(&e).trim_start_matches("gguf: ").to_string()))?;
        let arch = c.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned().unwrap_or_default();
        if arch != "llama" {
            return Err(LmError::Gguf(format!("architecture `{arch}` is not supported (llama only)")));
        }
        let heads = meta_u32(&c, "llama.attention.head_count")?;
        let d_model = meta_u32(&c, "llama.embedding_length")?;
        let kv_heads = meta_u32(&c, "llama.attention.head_count_kv")?;
        for (k, v) in [("llama.attention.head_count", heads), ("llama.embedding_length", d_model), ("llama.attention.head_count_kv", kv_heads)] {
            if v > limits::MAX_DIM {
                return Err(LmError::Gguf(format!("{k} = {v} is over the budget of {}", limits::MAX_DIM)));
            }
        }
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 || d_model % heads != 0 || (d_model / heads) % 2 != 0 {
            return Err(LmError::Gguf(format!(
                "unsupported shape: {heads} heads, {kv_heads} key/value heads, d_model {d_model} (heads must be a multiple of key/value heads and divide d_model into even head sizes)"
            )));
        }
        let config = Config {
            layers: meta_u32(&c, "llama.block_count")?,
            d_model,
            heads,
            kv_heads,
            head_dim: d_model / heads,
            rope_base: meta_f32(&c, "llama.rope.freq_base").unwrap_or(10000.0),
            rms_eps: meta_f32(&c, "llama.attention.layer_norm_rms_epsilon")? as f64,
            vocab: meta_u32(&c, "llama.vocab_size")?,
        };
        // Settings that make every activation NaN or infinite without a non-finite weight.
        if !(config.rms_eps.is_finite() && config.rms_eps > 0.0) {
            return Err(LmError::Gguf(format!("llama.attention.layer_norm_rms_epsilon = {} must be a positive finite number", config.rms_eps as f32)));
        }
        if !(config.rope_base.is_finite() && config.rope_base > 0.0) {
            return Err(LmError::Gguf(format!("llama.rope.freq_base = {} must be a positive finite number", config.rope_base)));
        }
        if config.layers > limits::MAX_LAYERS {
            return Err(LmError::Gguf(format!("llama.block_count = {} is over the budget of {}", config.layers, limits::MAX_LAYERS)));
        }
        if config.vocab == 0 || config.vocab > limits::MAX_DIM {
            return Err(LmError::Gguf(format!("llama.vocab_size = {} must be between 1 and {}", config.vocab, limits::MAX_DIM)));
        }
        // Every tensor's size and shape, before any is read.
        let (d, kvd) = (config.d_model, config.kv_heads * config.head_dim);
        check_tensor(&c, "token_embd.weight", file_len)?;
        check_shape(&c, "token_embd.weight", &[config.vocab, d])?;
        check_tensor(&c, "output_norm.weight", file_len)?;
        check_shape(&c, "output_norm.weight", &[d])?;
        let mut ff = None;
        for l in 0..config.layers {
            let n = |w: &str| format!("blk.{l}.{w}.weight");
            for w in ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"] {
                check_tensor(&c, &n(w), file_len)?;
            }
            let hidden = *ff.get_or_insert(c.tensor_infos.get(&n("ffn_up")).and_then(|i| i.shape.dims().first().copied()).unwrap_or(0));
            for (w, shape) in [
                ("attn_norm", vec![d]),
                ("attn_q", vec![d, d]),
                ("attn_k", vec![kvd, d]),
                ("attn_v", vec![kvd, d]),
                ("attn_output", vec![d, d]),
                ("ffn_norm", vec![d]),
                ("ffn_gate", vec![hidden, d]),
                ("ffn_up", vec![hidden, d]),
                ("ffn_down", vec![d, hidden]),
            ] {
                check_shape(&c, &n(w), &shape)?;
            }
        }
        let mut t = |name: &str| -> Result<Tensor> {
            let q = c.tensor(&mut f, name, &device).map_err(|e| LmError::Gguf(format!("{name}: {}", plain(&e))))?;
            let w = q.dequantize(&device)?.to_dtype(DType::F32)?;
            // A NaN or infinite weight makes every probe and score meaningless: refused here,
            // as raspc checkpoints are, with the tensor named. (0·w sums to NaN exactly when
            // some weight is not finite: one reduction, the index looked for only then.)
            if !w.affine(0.0, 0.0)?.sum_all()?.to_scalar::<f32>()?.is_finite()
                && let Some(bad) = w.flatten_all()?.to_vec1::<f32>()?.iter().position(|x| !x.is_finite())
            {
                return Err(LmError::Gguf(format!("tensor `{name}` holds a non-finite weight at flat index {bad}")));
            }
            Ok(w)
        };
        let embed = t("token_embd.weight")?;
        let mut blocks = vec![];
        for l in 0..config.layers {
            let n = |w: &str| format!("blk.{l}.{w}.weight");
            blocks.push(Block {
                attn_norm: t(&n("attn_norm"))?,
                wq: t(&n("attn_q"))?,
                wk: t(&n("attn_k"))?,
                wv: t(&n("attn_v"))?,
                wo: t(&n("attn_output"))?,
                ffn_norm: t(&n("ffn_norm"))?,
                w_gate: t(&n("ffn_gate"))?,
                w_up: t(&n("ffn_up"))?,
                w_down: t(&n("ffn_down"))?,
            });
        }
        let out_norm = t("output_norm.weight")?;
        let tokenizer = build_tokenizer(&c, config.vocab)?;
        Ok(LanguageModel { config, embed, blocks, out_norm, tokenizer, device })
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.tokenizer.encode(text, false).map_err(|e| LmError::Tokenizer(e.to_string()))?.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer.decode(ids, false).map_err(|e| LmError::Tokenizer(e.to_string()))
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor) -> Result<Tensor> {
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        Ok(x.broadcast_div(&(ms + self.config.rms_eps)?.sqrt()?)?.broadcast_mul(w)?)
    }

    /// Rotary embedding on interleaved pairs (2i, 2i+1) of each head: x is [heads, T, head_dim].
    fn rope(&self, x: &Tensor) -> Result<Tensor> {
        let (h, t, hd) = x.dims3()?;
        let half = hd / 2;
        let mut cos = vec![0f32; t * half];
        let mut sin = vec![0f32; t * half];
        for p in 0..t {
            for i in 0..half {
                let theta = p as f32 * self.config.rope_base.powf(-(2.0 * i as f32) / hd as f32);
                cos[p * half + i] = theta.cos();
                sin[p * half + i] = theta.sin();
            }
        }
        let cos = Tensor::from_vec(cos, (1, t, half), &self.device)?;
        let sin = Tensor::from_vec(sin, (1, t, half), &self.device)?;
        let pairs = x.reshape((h, t, half, 2))?;
        let a = pairs.narrow(3, 0, 1)?.squeeze(3)?;
        let b = pairs.narrow(3, 1, 1)?.squeeze(3)?;
        let ra = (a.broadcast_mul(&cos)? - b.broadcast_mul(&sin)?)?;
        let rb = (a.broadcast_mul(&sin)? + b.broadcast_mul(&cos)?)?;
        Ok(Tensor::stack(&[ra, rb], 3)?.reshape((h, t, hd))?)
    }

    /// Logits `[T, vocab]` for a token sequence; with `capture`, each layer's attention too.
    pub fn forward(&self, ids: &[u32], capture: Option<&mut Vec<LayerCapture>>) -> Result<Tensor> {
        self.forward_with(ids, capture, 1.0)
    }

    /// As [`forward`](Self::forward), with attention scores divided by `attn_temp`.
    pub fn forward_with(&self, ids: &[u32], mut capture: Option<&mut Vec<LayerCapture>>, attn_temp: f64) -> Result<Tensor> {
        let c = &self.config;
        let t = ids.len();
        let ids_t = Tensor::from_vec(ids.to_vec(), t, &self.device)?;
        let mut x = self.embed.index_select(&ids_t, 0)?;
        let mask: Vec<f32> = (0..t).flat_map(|q| (0..t).map(move |k| if k <= q { 0.0 } else { f32::NEG_INFINITY })).collect();
        let mask = Tensor::from_vec(mask, (1, t, t), &self.device)?;
        let rows = |x: &Tensor| -> Result<Vec<Vec<f64>>> { Ok(x.to_dtype(DType::F64)?.to_vec2::<f64>()?) };
        let group = c.heads / c.kv_heads;
        for b in &self.blocks {
            let h = self.rms_norm(&x, &b.attn_norm)?;
            let q = h.matmul(&b.wq.t()?)?.reshape((t, c.heads, c.head_dim))?.transpose(0, 1)?.contiguous()?;
            let k = h.matmul(&b.wk.t()?)?.reshape((t, c.kv_heads, c.head_dim))?.transpose(0, 1)?.contiguous()?;
            let v = h.matmul(&b.wv.t()?)?.reshape((t, c.kv_heads, c.head_dim))?.transpose(0, 1)?.contiguous()?;
            let (q, k) = (self.rope(&q)?, self.rope(&k)?);
            // Repeat each kv head for its group of query heads.
            let k = Tensor::cat(&(0..c.heads).map(|hh| k.narrow(0, hh / group, 1)).collect::<candle_core::Result<Vec<_>>>()?, 0)?;
            let v = Tensor::cat(&(0..c.heads).map(|hh| v.narrow(0, hh / group, 1)).collect::<candle_core::Result<Vec<_>>>()?, 0)?;
            let s = (q.matmul(&k.transpose(1, 2)?.contiguous()?)? / ((c.head_dim as f64).sqrt() * attn_temp))?.broadcast_add(&mask)?;
            let m = s.max_keepdim(D::Minus1)?;
            let e = s.broadcast_sub(&m)?.exp()?;
            let w = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
            let o = w.matmul(&v)?; // [heads, T, head_dim]
            let attn = o.transpose(0, 1)?.contiguous()?.reshape((t, c.d_model))?.matmul(&b.wo.t()?)?;
            if let Some(caps) = capture.as_deref_mut() {
                let mut heads = vec![];
                for hh in 0..c.heads {
                    let wo_h = b.wo.narrow(1, hh * c.head_dim, c.head_dim)?; // [d, head_dim]
                    let scores = v.narrow(0, hh, 1)?.squeeze(0)?.matmul(&wo_h.t()?)?; // [T, d]
                    heads.push(HeadCapture { weights: rows(&w.narrow(0, hh, 1)?.squeeze(0)?)?, scores: rows(&scores)? });
                }
                caps.push(LayerCapture { input: rows(&x)?, heads, attention_output: rows(&attn)? });
            }
            x = (x + attn)?;
            let h2 = self.rms_norm(&x, &b.ffn_norm)?;
            let gate = h2.matmul(&b.w_gate.t()?)?;
            let silu = (&gate * candle_core::Tensor::ones_like(&gate)?.broadcast_div(&(gate.neg()?.exp()? + 1.0)?)?)?;
            let ffn = (silu * h2.matmul(&b.w_up.t()?)?)?.matmul(&b.w_down.t()?)?;
            x = (x + ffn)?;
        }
        let x = self.rms_norm(&x, &self.out_norm)?;
        Ok(x.matmul(&self.embed.t()?)?)
    }

    /// Mean negative log-likelihood (nats) of each next token of `ids`.
    pub fn nll(&self, ids: &[u32]) -> Result<f64> {
        if ids.len() < 2 {
            return Err(LmError::Tokenizer(format!("need at least 2 tokens to score, got {}", ids.len())));
        }
        let logits = self.forward(ids, None)?;
        let lp = log_softmax_rows(&logits)?;
        let n = ids.len() - 1;
        // One log-softmax row per position; a next-token id outside the vocabulary is an error.
        let mut total = 0.0;
        for (i, (row, &next)) in lp.iter().zip(ids.iter().skip(1)).enumerate() {
            let lp_next = row.get(next as usize).ok_or_else(|| LmError::Tokenizer(format!("token id {next} at position {} is not in the vocabulary ({} entries)", i + 1, row.len())))?;
            total -= lp_next;
        }
        Ok(total / n as f64)
    }

    /// Greedy continuation of `ids` by `steps` tokens.
    pub fn greedy(&self, ids: &[u32], steps: usize) -> Result<Vec<u32>> {
        if ids.is_empty() {
            return Err(LmError::Tokenizer("greedy continuation needs a non-empty prompt".into()));
        }
        let mut ids = ids.to_vec();
        for _ in 0..steps {
            let logits = self.forward(&ids, None)?;
            let last = logits.narrow(0, ids.len() - 1, 1)?.squeeze(0)?.argmax(0)?.to_scalar::<u32>()?;
            ids.push(last);
        }
        Ok(ids)
    }
}

/// Row-wise log-softmax of a `[T, V]` tensor, in f64.
pub fn log_softmax_rows(logits: &Tensor) -> Result<Vec<Vec<f64>>> {
    let rows: Vec<Vec<f32>> = logits.to_vec2()?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let z = r.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln() + m;
            r.iter().map(|&x| x as f64 - z).collect()
        })
        .collect())
}

fn build_tokenizer(c: &gguf_file::Content, vocab_size: usize) -> Result<tokenizers::Tokenizer> {
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::{byte_level::ByteLevel, digits::Digits, sequence::Sequence, PreTokenizerWrapper};
    let tokens = meta_strings(c, "tokenizer.ggml.tokens")?;
    // An id past the embedding failed only at run time, naming neither file nor key (helper b21).
    if tokens.len() > vocab_size {
        return Err(LmError::Gguf(format!("tokenizer.ggml.tokens lists {} tokens, more than llama.vocab_size = {vocab_size} (the embedding's rows)", tokens.len())));
    }
    let merges = meta_strings(c, "tokenizer.ggml.merges")?;
    let vocab: ahash::AHashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let merges: Vec<(String, String)> = merges.iter().filter_map(|m| m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string()))).collect();
    // A merge whose parts or result is not a token made the tokenizers crate panic (a slice past
    // its buffer, helper b21's follow-up): refused here, the merge named.
    for (i, (a, b)) in merges.iter().enumerate() {
        if let Some(missing) = [a.clone(), b.clone(), format!("{a}{b}")].into_iter().find(|t| !vocab.contains_key(t)) {
            return Err(LmError::Gguf(format!("tokenizer.ggml.merges[{i}] `{a} {b}`: `{}` is not in tokenizer.ggml.tokens", missing.escape_debug())));
        }
    }
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| LmError::Tokenizer(e.to_string()))?;
    let mut tok = tokenizers::Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
    ]))));
    tok.with_decoder(Some(tokenizers::decoders::byte_level::ByteLevel::default()));
    Ok(tok)
}
