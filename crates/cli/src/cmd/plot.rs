//! `raspc plot`: the command around [`crate::plot`].

use crate::cmd::*;
use crate::{plot, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn plot_cmd(path: &Path, dir: &Path, format: PlotFormat, symlog: bool, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    if dir.as_os_str() == "-" {
        return Err("`-o -`: plot writes figures into a directory, not to standard output; give a directory (`./-` for one named `-`)".to_string().into());
    }
    let ck = read_checkpoint(path)?;
    // A figure being drawn when the user interrupts is removed, not left half written.
    super::output::install_cleanup();
    let format = match format {
        PlotFormat::Png => plot::Format::Png,
        PlotFormat::Svg => plot::Format::Svg,
    };
    let files = plot::plot_with(&ck, dir, &plot::Options { format, symlog })?;
    let stale = stale_figures(dir, &files);
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({ "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(), "stale": stale.iter().map(|f| f.display().to_string()).collect::<Vec<_>>() })
        );
        return Ok(());
    }
    let _ = writeln!(out, "wrote {} figures to {}", files.len(), dir.display());
    if let Some(first) = stale.first() {
        let _ = writeln!(
            out,
            "note: {} other figure{} in {} (e.g. `{}`) {} left by an earlier `raspc plot` (of any model, in either format) and not replaced by this one",
            stale.len(),
            if stale.len() == 1 { "" } else { "s" },
            dir.display(),
            first.file_name().unwrap_or_default().to_string_lossy(),
            if stale.len() == 1 { "is" } else { "are" }
        );
    }
    Ok(())
}

/// Figures of an earlier plot (marked as raspc's, PNG or SVG) in `dir` that this one did not write.
fn stale_figures(dir: &Path, written: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    let mut stale: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !written.contains(p))
        .filter(|p| {
            let format = match p.extension().and_then(|e| e.to_str()) {
                Some("png") => plot::Format::Png,
                Some("svg") => plot::Format::Svg,
                _ => return false,
            };
            let mut head = vec![0u8; 64];
            let n = std::fs::File::open(p).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
            plot::is_our_figure(&head[..n], format)
        })
        .collect();
    stale.sort();
    stale
}
