//! Raw bytes as a GGUF language model: load (the API reads a path, so the bytes go to a file in
//! a per-process temporary directory), then tokenize, run and capture a few tokens.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn path() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("raspc-fuzz-gguf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        dir.join("model.gguf")
    })
}

fuzz_target!(|data: &[u8]| {
    let p = path();
    if std::fs::write(p, data).is_err() {
        return;
    }
    let Ok(lm) = raspc_lm::LanguageModel::load(p) else { return };
    let Ok(ids) = lm.encode("ab cd ab") else { return };
    let ids: Vec<u32> = ids.into_iter().take(8).collect();
    let _ = lm.decode(&ids);
    let mut caps = vec![];
    let _ = lm.forward(&ids, Some(&mut caps));
    let _ = lm.forward_with(&ids, None, 2.0);
    let _ = lm.nll(&ids);
    let _ = lm.greedy(&ids, 2);
});
