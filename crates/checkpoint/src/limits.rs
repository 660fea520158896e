//! Budgets for everything a checkpoint file can ask a reader to allocate or compute with.
//!
//! Every size in a file is checked against these before anything of that size is allocated;
//! the defaults are far above what `raspc compile` writes for the corpus and for the universal
//! simulator. [`LIMITS_ENV`] raises (or lowers) them: `RASPC_LIMITS=d_model=4000000,params=2e9`.

use crate::CheckpointError;

/// The environment variable that overrides [`Limits`] (`name=value`, comma separated).
pub const LIMITS_ENV: &str = "RASPC_LIMITS";

/// Budgets for a checkpoint (see docs/checkpoint-format.md, "Budgets").
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// `file_bytes`: size of the whole file.
    pub max_file_bytes: u64,
    /// `header_bytes`: size of the safetensors JSON header (metadata included).
    pub max_header_bytes: u64,
    /// `d_model`: width of the residual stream.
    pub max_d_model: usize,
    /// `layers`: number of layers.
    pub max_layers: usize,
    /// `heads`: heads over all layers.
    pub max_heads: usize,
    /// `width`: any other single dimension (d_head, MLP hidden units, readout dims).
    pub max_width: usize,
    /// `vocab`: vocabulary entries (BOS included).
    pub max_vocab: usize,
    /// `seq_len`: `max_seq_len`.
    pub max_seq_len: usize,
    /// `params`: total number of f32 values over all tensors.
    pub max_params: u64,
    /// `string_bytes`: any one string in the metadata JSON (labels, descriptions, tokens).
    pub max_string_bytes: usize,
    /// `list_len`: any one JSON list in the metadata (layout entries, values, vocabulary).
    pub max_list_len: usize,
    /// `abs_weight`: largest |weight|.
    pub max_abs_weight: f32,
    /// `soft_beta`: largest soft-attention β.
    pub max_soft_beta: f64,
    /// `tie_tolerance`: largest hard-attention tie tolerance.
    pub max_tie_tolerance: f64,
    /// Command line, `samples`: `verify --samples`, `simulate --trials`, and the forward passes
    /// of `probe svflow` (levels x seeds x sequences).
    pub max_samples: u64,
    /// Command line, `input_tokens`: tokens of one input (`eval --input`, `--max-len`, each
    /// shape flag of `simulate`).
    pub max_input_tokens: usize,
    /// Command line, `u_positions`: the sequence length of `simulate`'s U (32,768: about 7 GB
    /// of memory; 96³'s 27,648 took 5.8 GB, and n = 256 with d = 1 at 65,536 went past 11 GB:
    /// helper d13).
    pub max_u_positions: usize,
    /// Command line, `tokens`: tokens generated at once (`verify --samples` x `--max-len`).
    pub max_tokens: u64,
    /// Command line, `text_bytes`: a program, `probe --text`, `simulate --target/--input` file.
    pub max_text_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_bytes: 4 << 30,
            max_header_bytes: 16 << 20,
            max_d_model: 1 << 20,
            max_layers: 4096,
            max_heads: 1 << 16,
            max_width: 1 << 24,
            max_vocab: 1 << 20,
            max_seq_len: 1 << 20,
            max_params: 1 << 30,
            max_string_bytes: 64 << 10,
            max_list_len: 1 << 16,
            max_abs_weight: 1e15,
            max_soft_beta: 1e15,
            max_tie_tolerance: 1.0,
            max_samples: 1_000_000,
            max_input_tokens: 4096,
            max_u_positions: 1 << 15,
            max_tokens: 1 << 26,
            max_text_bytes: 64 << 20,
        }
    }
}

impl Limits {
    /// The defaults, overridden by [`LIMITS_ENV`] when it is set.
    pub fn from_env() -> Result<Limits, CheckpointError> {
        match std::env::var(LIMITS_ENV) {
            Ok(spec) => Limits::default().with(&spec),
            Err(std::env::VarError::NotPresent) => Ok(Limits::default()),
            Err(e) => Err(CheckpointError::BadLimits(e.to_string())),
        }
    }

    /// These limits with `name=value,...` applied (names as in docs/checkpoint-format.md;
    /// values may be written like `1e9`).
    pub fn with(mut self, spec: &str) -> Result<Limits, CheckpointError> {
        let mut seen: Vec<&str> = vec![];
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = |why: &str| CheckpointError::BadLimits(format!("`{item}`: {why}"));
            let (name, value) = item.split_once('=').ok_or_else(|| bad("expected NAME=VALUE"))?;
            // One value per budget: the last of two silently won (helper b21).
            if seen.contains(&name.trim()) {
                return Err(bad(&format!("`{}` is set twice", name.trim())));
            }
            seen.push(name.trim());
            let x: f64 = value.trim().parse().map_err(|_| bad("the value is not a number"))?;
            if !(x.is_finite() && x >= 0.0) {
                return Err(bad("the value must be a finite number >= 0"));
            }
            // Saturating float-to-int conversions: a huge value means "no practical limit".
            let int = x as u64;
            let size = x as usize;
            match name.trim() {
                "file_bytes" => self.max_file_bytes = int,
                "header_bytes" => self.max_header_bytes = int,
                "d_model" => self.max_d_model = size,
                "layers" => self.max_layers = size,
                "heads" => self.max_heads = size,
                "width" => self.max_width = size,
                "vocab" => self.max_vocab = size,
                "seq_len" => self.max_seq_len = size,
                "params" => self.max_params = int,
                "string_bytes" => self.max_string_bytes = size,
                "list_len" => self.max_list_len = size,
                "abs_weight" => self.max_abs_weight = x as f32,
                "soft_beta" => self.max_soft_beta = x,
                "tie_tolerance" => self.max_tie_tolerance = x,
                "samples" => self.max_samples = int,
                "input_tokens" => self.max_input_tokens = size,
                "u_positions" => self.max_u_positions = size,
                "tokens" => self.max_tokens = int,
                "text_bytes" => self.max_text_bytes = int,
                _ => return Err(bad("unknown budget (file_bytes, header_bytes, d_model, layers, heads, width, vocab, seq_len, params, string_bytes, list_len, abs_weight, soft_beta, tie_tolerance, samples, input_tokens, u_positions, tokens, text_bytes)")),
            }
        }
        Ok(self)
    }

    /// An error unless `value <= limit`, naming what is measured and the budget that limits it.
    pub fn size(&self, what: impl Into<String>, value: usize, limit: usize, name: &'static str) -> Result<(), CheckpointError> {
        if value > limit {
            return Err(CheckpointError::OverBudget { what: what.into(), value: value.to_string(), limit: limit.to_string(), name });
        }
        Ok(())
    }

    /// Checks every string and list of a metadata value against the budgets, before it is
    /// turned into config types (and before any size in it is used).
    pub(crate) fn json(&self, key: &'static str, v: &serde_json::Value) -> Result<(), CheckpointError> {
        fn walk(l: &Limits, key: &'static str, path: &mut String, v: &serde_json::Value, depth: usize) -> Result<(), CheckpointError> {
            if depth > 64 {
                return Err(CheckpointError::BadKey { key, reason: format!("nested more than 64 levels deep at {path}") });
            }
            match v {
                serde_json::Value::String(s) => l.size(format!("the length of string {key}{path}"), s.len(), l.max_string_bytes, "string_bytes"),
                serde_json::Value::Array(a) => {
                    l.size(format!("the length of list {key}{path}"), a.len(), l.max_list_len, "list_len")?;
                    for (i, x) in a.iter().enumerate() {
                        let n = path.len();
                        path.push_str(&format!("[{i}]"));
                        walk(l, key, path, x, depth + 1)?;
                        path.truncate(n);
                    }
                    Ok(())
                }
                serde_json::Value::Object(m) => {
                    for (k, x) in m {
                        l.size(format!("the length of a field name in {key}{path}"), k.len(), l.max_string_bytes, "string_bytes")?;
                        let n = path.len();
                        path.push('.');
                        path.push_str(k);
                        walk(l, key, path, x, depth + 1)?;
                        path.truncate(n);
                    }
                    Ok(())
                }
                _ => Ok(()),
            }
        }
        walk(self, key, &mut String::new(), v, 0)
    }
}
