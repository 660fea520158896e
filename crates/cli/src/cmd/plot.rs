//! `raspc plot`: the command around [`crate::plot`].

use crate::cmd::*;
use crate::{plot, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn plot_cmd(path: &Path, dir: &Path, format: PlotFormat, symlog: bool, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let format = match format {
        PlotFormat::Png => plot::Format::Png,
        PlotFormat::Svg => plot::Format::Svg,
    };
    let files = plot::plot_with(&ck, dir, &plot::Options { format, symlog })?;
    if json {
        let _ = writeln!(out, "{}", serde_json::json!({ "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>() }));
        return Ok(());
    }
    let _ = writeln!(out, "wrote {} figures to {}", files.len(), dir.display());
    Ok(())
}
