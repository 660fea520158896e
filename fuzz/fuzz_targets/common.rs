//! Shared by the checkpoint fuzz targets: budgets small enough for a fuzzer, and everything a
//! user can do with a loaded checkpoint (inspect, run hard and soft, decode, trace, capture).
#![allow(dead_code)]

use raspc_checkpoint::{Checkpoint, Limits};
use raspc_runtime::{Attention, Device, Model};

/// The default budgets, lowered so one input stays within a fuzzer's time and memory.
pub fn limits() -> Limits {
    Limits { max_d_model: 512, max_layers: 16, max_heads: 64, max_width: 4096, max_vocab: 512, max_seq_len: 64, max_params: 1 << 20, ..Limits::default() }
}

/// Inspects, loads and runs a checkpoint that passed validation: every outcome must be a value
/// or an error.
pub fn exercise(ck: Checkpoint) {
    let _ = raspc::inspect::summary(&ck, false);
    let _ = raspc::inspect::summary(&ck, true);
    for l in 0..ck.config.layers.len().min(2) {
        let _ = raspc::inspect::block(&ck, l, Some(0), false);
        let _ = raspc::inspect::block(&ck, l, None, true);
    }
    let Ok(model) = Model::new(ck, &Device::Cpu) else { return };
    let c = &model.checkpoint.config;
    let max = c.max_seq_len.min(4);
    if let Some(r) = &c.real_input {
        let inputs = [vec![serde_json::json!(r.lo)], (0..max).map(|p| serde_json::json!(r.bounds_at(p).1)).collect()];
        for input in inputs {
            let Ok(values) = model.encode_real(&input) else { continue };
            for a in [Attention::Hard, Attention::Soft] {
                if let Ok(t) = model.forward_real(std::slice::from_ref(&values), a) {
                    let _ = model.decode(&t);
                }
                let _ = model.trace_real(&values, a);
                let _ = model.run(&input, a);
            }
        }
        return;
    }
    let tokens: Vec<serde_json::Value> = c.vocab.iter().filter(|v| v.id != c.bos_id).map(|v| v.token.clone()).collect();
    let inputs = [tokens.iter().take(1).cloned().collect::<Vec<_>>(), tokens.iter().rev().cycle().take(max).cloned().collect()];
    for input in inputs {
        let Ok(ids) = model.encode(&input) else { continue };
        for a in [Attention::Hard, Attention::Soft] {
            if let Ok(t) = model.forward(std::slice::from_ref(&ids), a) {
                let _ = model.decode(&t);
            }
            let _ = model.trace(&ids, a);
            let _ = model.capture(&ids, a);
            let _ = model.run(&input, a);
        }
    }
}
