//! `raspc export`: a checkpoint in another format (ONNX, [`crate::onnx`]).

use crate::cmd::*;
use crate::{onnx, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn export_cmd(model: &Path, output: &Path, attention: AttentionArg, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(model)?;
    if output.is_dir() {
        return Err(format!("-o `{}` is a directory", output.display()).into());
    }
    let onnx = onnx::export(&ck, attention_of(attention))?;
    // (The CLI removes its temporary file on Ctrl-C; library callers own their signals.)
    crate::cmd::output::install_cleanup();
    crate::cmd::output::save_onnx(output, &onnx)?;
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({ "model": model.display().to_string(), "out": output.display().to_string(), "format": "onnx", "opset": 17, "attention": format!("{attention:?}").to_lowercase(), "bytes": onnx.len() })
        );
    } else {
        let _ = writeln!(out, "exported {} -> {} (ONNX opset 17, {attention:?} attention, {} bytes)", model.display(), output.display(), onnx.len());
    }
    Ok(())
}
