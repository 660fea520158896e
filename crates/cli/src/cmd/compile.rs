//! `raspc compile`.

use crate::args::*;
use crate::cmd::*;
use crate::cmd::output::*;
use crate::Failure;
use std::io::Write;
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub(crate) fn compile_cmd(path: &Path, target: &Target, output: &Path, force: bool, bounds: bool, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    if output.exists() && std::fs::canonicalize(output).ok() == std::fs::canonicalize(path).ok() {
        return Err(format!("-o `{}` is the program itself; refusing to overwrite it", output.display()).into());
    }
    check_output(output, force)?;
    let built = build(path, target, err, color)?;
    let bytes = built.compiled.checkpoint.to_bytes().map_err(|e| format!("internal error: the compiled checkpoint is invalid: {e}"))?;
    write_checkpoint(output, &bytes, force)?;
    let _ = writeln!(out, "compiled `{}` -> {}: {}", built.compiled.plan.output_label, output.display(), built.compiled.summary);
    if let Some(r) = &built.compiled.report {
        if bounds {
            for b in &r.sops {
                let _ = writeln!(out, "  {}: [{:.4}, {:.4}] err {:.3e} (f64: {:.3e})", b.label, b.lo, b.hi, b.err, b.err_f64);
            }
        }
        let _ = writeln!(
            out,
            "certified: |{} - program| <= {:.3e} in f32 ({:.3e} in f64) for inputs in [{}]",
            built.compiled.plan.output_label,
            r.output_bound,
            r.output_bound_f64,
            target.input_bounds.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
