//! `raspc export`: a checkpoint in another format (ONNX, [`crate::onnx`]).

use crate::cmd::*;
use crate::{onnx, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn export_cmd(model: &Path, output: &Path, attention: Option<AttentionArg>, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(model)?;
    // A real-valued model's certified bound is for hard attention: soft is not the default there
    // (helper d6: a soft export was 4.8x the stated tolerance).
    let real = ck.config.real_input.is_some();
    let attention = attention.unwrap_or(if real { AttentionArg::Hard } else { AttentionArg::Soft });
    if real && attention == AttentionArg::Soft {
        let _ = writeln!(
            err,
            "warning: `{}` is real-valued: its certified bound (output tolerance {}) holds for hard attention only; soft attention's error is not bounded",
            model.display(),
            ck.output.tolerance
        );
    }
    if output.is_dir() {
        return Err(format!("-o `{}` is a directory", output.display()).into());
    }
    let onnx = onnx::export(&ck, attention_of(attention))?;
    // (The CLI removes its temporary file on Ctrl-C; library callers own their signals.)
    crate::cmd::output::install_cleanup();
    // An export of another model replaced is not replaced silently (helper dt26), as with
    // `compile -o` over a checkpoint of another program.
    let before = std::fs::symlink_metadata(output).ok().filter(|m| m.is_file()).and_then(|_| std::fs::read(output).ok()).and_then(|b| onnx::program_of(&b));
    crate::cmd::output::save_onnx(output, &onnx)?;
    if let Some(old) = before.filter(|old| *old != ck.program_hash) {
        let _ = writeln!(err, "note: replaced `{}`, an ONNX export of another program ({old})", output.display());
    }
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({ "model": model.display().to_string(), "out": output.display().to_string(), "format": "onnx", "opset": 17, "attention": format!("{attention:?}").to_lowercase(), "bytes": onnx.len() })
        );
    } else {
        let _ = writeln!(out, "exported {} -> {} (ONNX opset 17, {} attention, {} bytes)", model.display(), output.display(), format!("{attention:?}").to_lowercase(), onnx.len());
    }
    Ok(())
}
