//! `raspc run`: a checkpoint on one input.

use crate::args::*;
use crate::cmd::*;
use crate::{verify, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn run_cmd(model: &Path, input: &str, json: bool, attention: AttentionArg, device: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    let dev = raspc_runtime::device(device).map_err(|e| e.to_string())?;
    // The environment's budgets are checked first, so that their error is not blamed on the file.
    limits()?;
    // An I/O error names the file already.
    let m = raspc_runtime::Model::load_file(model, &dev).map_err(|e| match e {
        raspc_runtime::RuntimeError::Checkpoint(raspc_checkpoint::CheckpointError::Io(m)) => m,
        e => format!("`{}`: {e}", model.display()),
    })?;
    let tokens = parse_tokens("--input", input)?;
    input_file_warning(input, err);
    let values = tokens.iter().map(raspc_lang::Atom::to_json).collect::<Vec<_>>();
    let decoded = m.run(&values, attention_of(attention)).map_err(|e| format!("`{}`: {e}{}", model.display(), char_input_hint(input, &m.checkpoint)))?;
    if json {
        let line = serde_json::json!({ "output": decoded.iter().map(raspc_runtime::Decoded::to_json).collect::<Vec<_>>() });
        let _ = writeln!(out, "{line}");
    } else {
        let atoms: Vec<String> = decoded.iter().map(|d| verify::decoded_atom(d).repr()).collect();
        let _ = writeln!(out, "[{}]", atoms.join(", "));
    }
    Ok(())
}
