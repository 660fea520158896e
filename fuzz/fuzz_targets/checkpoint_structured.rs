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

/// True with probability 1/n, and false when the input is used up: every choice below
/// defaults to "no mutation" (Unstructured gives the lower bound, false and zeros once the
/// bytes run out), so short inputs still make valid checkpoints that reach the runtime.
fn rare(u: &mut Unstructured, n: u32) -> Result<bool> {
    Ok(u.int_in_range(0..=n - 1)? == n - 1)
}

/// A consistent checkpoint by default (distinct tokens, a layout of `tokens`, `indices` and the
/// output `out`, a readout reading `out`), with rare mutations of every part.
fn checkpoint(u: &mut Unstructured) -> Result<Checkpoint> {
    let real = rare(u, 6)?;
    let n_tok = if real { 1 } else { 1 + u.int_in_range(0..=3)? };
    let mut tokens: Vec<Value> = (0..n_tok).map(|i| if real { json!(1.0) } else { json!(format!("t{i}")) }).collect();
    for t in tokens.iter_mut() {
        if rare(u, 8)? {
            *t = atom(u)?;
        }
    }
    let out_values: Vec<Value> = (0..1 + u.int_in_range(0..=2)?).map(|i| json!(i)).collect();
    let numerical_out = rare(u, 3)?;
    let out_encoding = if numerical_out { Encoding::Numerical { values: Some(out_values.clone()) } } else { Encoding::Categorical { values: out_values } };
    let k = out_encoding.dims();
    let extra = u.int_in_range(0..=3)?;
    let mut d_model = n_tok + 1 + k + extra;
    if rare(u, 20)? {
        d_model = u.int_in_range(0..=12)?;
    }
    let mut sops = vec![
        SopLayout { label: "tokens".into(), offset: 0, encoding: Encoding::Categorical { values: tokens.clone() }, parts: vec![] },
        SopLayout { label: "indices".into(), offset: n_tok, encoding: Encoding::Numerical { values: None }, parts: vec![] },
        SopLayout { label: "out".into(), offset: n_tok + 1, encoding: out_encoding.clone(), parts: vec![] },
    ];
    for _ in 0..u.int_in_range(0..=2)? {
        // Sometimes with parts (valid or not: past d_model, repeated, on a categorical entry).
        let parts = if rare(u, 4)? { (0..u.int_in_range(1..=3)?).map(|_| u.int_in_range(0..=d_model + 1)).collect::<Result<Vec<usize>>>()? } else { vec![] };
        sops.push(SopLayout { label: label(u)?, offset: u.int_in_range(0..=d_model + 1)?, encoding: encoding(u)?, parts });
    }
    for s in sops.iter_mut() {
        if rare(u, 20)? {
            s.offset = u.int_in_range(0..=d_model + 1)?;
        }
        if rare(u, 20)? {
            s.encoding = encoding(u)?;
        }
    }
    let mut layers = vec![];
    for _ in 0..u.int_in_range(0..=3)? {
        let heads: Vec<usize> = (0..u.int_in_range(0..=2)?).map(|_| Ok(if rare(u, 30)? { 0 } else { 1 + u.int_in_range(0..=3)? })).collect::<Result<_>>()?;
        let mlp = match u.int_in_range(0..=2)? {
            0 => None,
            k => Some(MlpConfig { kind: if k == 1 { MlpKind::Relu } else { MlpKind::Reglu }, hidden: if rare(u, 30)? { 0 } else { 1 + u.int_in_range(0..=5)? } }),
        };
        let head_info = if rare(u, 4)? { (0..u.int_in_range(0..=heads.len() + 1)?).map(|_| info(u, false)).collect::<Result<_>>()? } else { vec![] };
        let mlp_info = if rare(u, 4)? { (0..u.int_in_range(0..=2)?).map(|_| info(u, true)).collect::<Result<_>>()? } else { vec![] };
        layers.push(LayerConfig { heads, mlp, head_info, mlp_info });
    }
    let mut vocab = vec![VocabEntry { token: json!("<bos>"), id: 0 }];
    vocab.extend(tokens.iter().enumerate().map(|(i, t)| VocabEntry { token: t.clone(), id: i + 1 }));
    if rare(u, 20)? {
        let i = u.choose_index(vocab.len())?;
        vocab[i].id = u.int_in_range(0..=6)?;
    }
    let real_input = if real {
        let (lo, hi) = if rare(u, 4)? { (float(u)? - 2.0, float(u)?) } else { (-1.0, 1.0) };
        let blocks = (0..u.int_in_range(0..=2)?)
            .map(|_| Ok(RealBlock { start: u.int_in_range(0..=4)?, end: u.int_in_range(0..=5)?, lo: float(u)? - 1.0, hi: float(u)? }))
            .collect::<Result<_>>()?;
        Some(RealInput { lo, hi, blocks })
    } else {
        None
    };
    let mut output = OutputSpec { label: "out".into(), encoding: out_encoding, tolerance: if numerical_out { 0.5 } else { 0.0 } };
    if rare(u, 20)? {
        output.label = label(u)?;
    }
    if rare(u, 20)? {
        output.encoding = encoding(u)?;
    }
    if rare(u, 20)? {
        output.tolerance = float(u)?;
    }
    let readout_dims = if rare(u, 20)? { u.int_in_range(0..=5)? } else { output.encoding.dims() };
    let config = ModelConfig {
        d_model,
        layers,
        vocab,
        bos_id: if rare(u, 20)? { u.int_in_range(0..=6)? } else { 0 },
        max_seq_len: if rare(u, 20)? { 0 } else { 1 + u.int_in_range(0..=4)? },
        causal: u.arbitrary()?,
        attention: AttentionConfig {
            semantics: AttentionSemantics::Hard,
            tie_tolerance: if rare(u, 4)? { float(u)? } else { 1e-3 },
            soft_beta: if rare(u, 4)? { float(u)? } else { 100.0 },
        },
        readout_dims,
        real_input,
    };
    let mut tensors = BTreeMap::new();
    for (name, mut shape) in config.expected_tensors() {
        if rare(u, 40)? {
            match u.int_in_range(0..=2)? {
                0 => continue,
                1 => shape.push(1),
                _ => shape = shape.iter().map(|&x| x + 1).collect(),
            }
        }
        let mode = u.int_in_range(0..=4)?;
        let n: usize = shape.iter().product();
        let mut data: Vec<f32> = (0..n).map(|_| weight(u, mode)).collect::<Result<_>>()?;
        if name == names::READOUT && !rare(u, 4)? && shape.len() == 2 {
            // The readout reads `out` (rows n_tok+1.., one column per output dim) unless mutated.
            let cols = shape[1];
            data = vec![0.0; n];
            for c in 0..cols.min(k) {
                if let Some(x) = data.get_mut((n_tok + 1 + c) * cols + c) {
                    *x = 1.0;
                }
            }
        }
        tensors.insert(name, Tensor { shape, data });
    }
    if rare(u, 40)? {
        tensors.insert("extra".into(), Tensor { shape: vec![1], data: vec![0.0] });
    }
    Ok(Checkpoint { config, layout: Layout { sops }, output, program_hash: "fuzz".into(), compiler_version: "fuzz".into(), tensors })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(ck) = checkpoint(&mut u) else { return };
    let limits = common::limits();
    let Ok(bytes) = ck.to_bytes_unchecked() else { return };
    let loaded = Checkpoint::from_bytes_with(&bytes, &limits);
    // RASPC_FUZZ_VERBOSE=1: one line per input saying how far it got (to tune the generator:
    // run the binary on the corpus with -runs=0 and count).
    if std::env::var_os("RASPC_FUZZ_VERBOSE").is_some() {
        eprintln!("outcome: {}", loaded.as_ref().map_or_else(|e| format!("{e}").chars().take(60).collect::<String>(), |_| "loaded".into()));
    }
    let Ok(loaded) = loaded else { return };
    assert!(loaded.validate_with(&limits).is_ok(), "a checkpoint that loads validates");
    assert!(loaded.to_bytes_unchecked().is_ok_and(|b| b == bytes), "writing what was read gives the same bytes");
    common::exercise(loaded);
});
