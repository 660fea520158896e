//! Raw bytes as a checkpoint file: parse and validate (within small budgets); when it loads,
//! inspect it, run it (hard and soft attention) on a couple of inputs, decode and trace.
//! Mutated files almost always fail the integrity hash: `checkpoint_structured` goes deeper.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = raspc_checkpoint::claims_raspc_format(data);
    if let Ok(ck) = raspc_checkpoint::Checkpoint::from_bytes_with(data, &common::limits()) {
        common::exercise(ck);
    }
});
