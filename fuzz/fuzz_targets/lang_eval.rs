//! The language front end on arbitrary text: parse, evaluate at host level (with two files
//! in memory for `load`), run the entry on a few inputs, and compile it for a tiny vocabulary.
//! Every outcome must be a value or a diagnostic: no panic, no hang, no unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raspc_lang::{Atom, MemoryLoader};
use std::path::{Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let loader = MemoryLoader(
        [
            (PathBuf::from("/f/lib.rasp"), "_p = 2;\ndef twice(x) { return x * _p; }\nshared = indices + 1;\n".to_string()),
            (PathBuf::from("/f/loop.rasp"), "load \"main\";\nload \"lib\";\n".to_string()),
        ]
        .into_iter()
        .collect(),
    );
    let (_, r) = raspc_lang::evaluate_program("main.rasp", Some(Path::new("/f/main.rasp")), text, &loader);
    let Ok(session) = r else { return };
    let Ok((_, root)) = session.entry(None) else { return };
    for input in [vec![Atom::Str("a".into())], vec![Atom::Int(1), Atom::Int(0), Atom::Int(2)], vec![Atom::Str("b".into()), Atom::Str("a".into())]] {
        let _ = raspc_lang::evaluate(&session.graph, root, &input);
    }
    if session.graph.len() > 2_000 {
        return;
    }
    let opts = raspc_compiler::Options { vocab: vec![Atom::Str("a".into()), Atom::Str("b".into()), Atom::Int(1)], max_len: 3, ..Default::default() };
    if let Ok(c) = raspc_compiler::compile(&session.graph, root, &opts, "fuzz") {
        let model = raspc_runtime::Model::new(c.checkpoint, &raspc_runtime::Device::Cpu).expect("a compiled checkpoint loads");
        let ids = model.encode(&[Atom::Str("a".into()).to_json(), Atom::Int(1).to_json()]).expect("vocabulary tokens encode");
        let _ = model.forward(&[ids], raspc_runtime::Attention::Hard);
    }
});

