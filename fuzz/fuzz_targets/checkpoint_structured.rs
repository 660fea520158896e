//! Structured checkpoints: an `arbitrary`-generated config (small d_model, layers, heads, MLP
//! kinds, layout entries, vocabulary, attention parameters, real-valued inputs) and tensors
//! whose values include NaN, infinities and huge numbers, written by the checkpoint crate's own
//! writer (so the integrity hash is right and the reader's deep validation and the runtime are
//! reached). The bytes are then read back within small budgets and, when they load, inspected,
//! run (hard and soft), decoded and traced.
//!
//! Properties beyond "no panic": a file that loads validates in memory too, and writing what
//! was read gives the same bytes.
#![no_main]

mod common;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use raspc_checkpoint::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn float(u: &mut Unstructured) -> Result<f64> {
    Ok(match u.int_in_range(0..=9)? {
        0 => 0.0,
        1 => f64::NAN,
        2 => f64::INFINITY,
        3 => -1.0,
        4 => 1e300,
        5 => 1e16,
        6 => f64::from(u.int_in_range(0..=40u8)?) / 4.0,
        7 => f64::MIN_POSITIVE,
        8 => f64::from_bits(u.arbitrary()?),
        _ => 1.0,
    })
}

fn weight(u: &mut Unstructured, mode: u8) -> Result<f32> {
    Ok(match mode {
        0 => 0.0,
        1 => f32::from(u.int_in_range(0..=8u8)?) - 4.0,
        2 => match u.int_in_range(0..=7)? {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => 1e30,
            4 => -1e15,
            5 => f32::MAX,
            6 => 1e-45,
            _ => 1e7,
        },
        3 => f32::from_bits(u.arbitrary()?),
        _ => f32::from(u.int_in_range(0..=200u8)?) * 1e5 - 1e7,
    })
}

fn atom(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=7)? {
        0 => json!(["a", "b", "c", "(", ")", "", "é"][u.int_in_range(0..=6)?]),
        1 => json!(u.int_in_range(-3..=5i64)?),
        2 => serde_json::Number::from_f64(float(u)?).map_or(Value::Null, Value::Number),
        3 => json!(u.arbitrary::<bool>()?),
        4 => Value::Null,
        5 => json!([1]),
        6 => json!(u.arbitrary::<String>()?.chars().take(8).collect::<String>()),
        _ => json!(u.int_in_range(0..=3u8)?.to_string()),
    })
}

fn encoding(u: &mut Unstructured) -> Result<Encoding> {
    Ok(if u.ratio(1, 3)? {
        let values = if u.arbitrary()? { Some((0..u.int_in_range(0..=4)?).map(|_| atom(u)).collect::<Result<_>>()?) } else { None };
        Encoding::Numerical { values }
    } else {
        Encoding::Categorical { values: (0..u.int_in_range(0..=4)?).map(|_| atom(u)).collect::<Result<_>>()? }
    })
}

fn label(u: &mut Unstructured) -> Result<String> {
    Ok(["tokens", "indices", "out", "x", "one", "out:categorical"][u.int_in_range(0..=5)?].to_string())
}

fn info(u: &mut Unstructured, hidden: bool) -> Result<BlockInfo> {
    Ok(BlockInfo {
        what: label(u)?,
        reads: vec![label(u)?],
        writes: label(u)?,
        hidden: if hidden && u.arbitrary()? { Some([u.int_in_range(0..=8)?, u.int_in_range(0..=8)?]) } else { None },
    })
}

fn checkpoint(u: &mut Unstructured) -> Result<Checkpoint> {
    let d_model = u.int_in_range(0..=12)?;
    let mut layers = vec![];
    for _ in 0..u.int_in_range(0..=3)? {
        let heads: Vec<usize> = (0..u.int_in_range(0..=2)?).map(|_| u.int_in_range(0..=4)).collect::<Result<_>>()?;
        let mlp = match u.int_in_range(0..=2)? {
            0 => None,
            k => Some(MlpConfig { kind: if k == 1 { MlpKind::Relu } else { MlpKind::Reglu }, hidden: u.int_in_range(0..=6)? }),
        };
        let head_info = (0..u.int_in_range(0..=heads.len() + 1)?).map(|_| info(u, false)).collect::<Result<_>>()?;
        let mlp_info = (0..u.int_in_range(0..=2)?).map(|_| info(u, true)).collect::<Result<_>>()?;
        layers.push(LayerConfig { heads, mlp, head_info, mlp_info });
    }
    let n_vocab = u.int_in_range(0..=5)?;
    let mut vocab = vec![];
    for i in 0..n_vocab {
        let token = if i == 0 { json!("<bos>") } else { atom(u)? };
        let id = if u.ratio(1, 20)? { u.int_in_range(0..=6)? } else { i };
        vocab.push(VocabEntry { token, id });
    }
    let real_input = if u.ratio(1, 4)? {
        let (lo, hi) = (float(u)? - 2.0, float(u)?);
        let blocks = (0..u.int_in_range(0..=2)?)
            .map(|_| Ok(RealBlock { start: u.int_in_range(0..=4)?, end: u.int_in_range(0..=5)?, lo: float(u)? - 1.0, hi: float(u)? }))
            .collect::<Result<_>>()?;
        Some(RealInput { lo, hi, blocks })
    } else {
        None
    };
    let output = OutputSpec { label: label(u)?, encoding: encoding(u)?, tolerance: if u.arbitrary()? { 0.0 } else { float(u)? } };
    let readout_dims = if u.ratio(1, 10)? { u.int_in_range(0..=5)? } else { output.encoding.dims() };
    let config = ModelConfig {
        d_model,
        layers,
        vocab,
        bos_id: if u.ratio(1, 20)? { u.int_in_range(0..=6)? } else { 0 },
        max_seq_len: u.int_in_range(0..=5)?,
        causal: u.arbitrary()?,
        attention: AttentionConfig {
            semantics: AttentionSemantics::Hard,
            tie_tolerance: if u.arbitrary()? { 1e-3 } else { float(u)? },
            soft_beta: if u.arbitrary()? { 100.0 } else { float(u)? },
        },
        readout_dims,
        real_input,
    };
    let mut sops = vec![];
    for _ in 0..u.int_in_range(0..=4)? {
        sops.push(SopLayout { label: label(u)?, offset: u.int_in_range(0..=d_model + 1)?, encoding: encoding(u)? });
    }
    let mut tensors = BTreeMap::new();
    for (name, mut shape) in config.expected_tensors() {
        match u.int_in_range(0..=40)? {
            0 => continue,
            1 => shape.push(1),
            2 => shape = shape.iter().map(|&x| x + 1).collect(),
            _ => {}
        }
        let mode = u.int_in_range(0..=4)?;
        let n: usize = shape.iter().product();
        let data = (0..n).map(|_| weight(u, mode)).collect::<Result<_>>()?;
        tensors.insert(name, Tensor { shape, data });
    }
    if u.ratio(1, 40)? {
        tensors.insert("extra".into(), Tensor { shape: vec![1], data: vec![0.0] });
    }
    Ok(Checkpoint { config, layout: Layout { sops }, output, program_hash: "fuzz".into(), compiler_version: "fuzz".into(), tensors })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(ck) = checkpoint(&mut u) else { return };
    let limits = common::limits();
    let Ok(bytes) = ck.to_bytes_unchecked() else { return };
    let Ok(loaded) = Checkpoint::from_bytes_with(&bytes, &limits) else { return };
    assert!(loaded.validate_with(&limits).is_ok(), "a checkpoint that loads validates");
    assert!(loaded.to_bytes_unchecked().is_ok_and(|b| b == bytes), "writing what was read gives the same bytes");
    common::exercise(loaded);
});
