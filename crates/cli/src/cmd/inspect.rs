//! `raspc inspect`: the command around [`crate::inspect`].

use crate::cmd::*;
use crate::{inspect, Failure};
use std::io::Write;
use std::path::Path;

/// With `layer`, `head` picks the head, and `None` the layer's MLP (the command line requires one).
pub(crate) fn inspect_cmd(path: &Path, json: bool, layer: Option<usize>, head: Option<usize>, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    // JSON escapes control characters itself; text must not pass the file's through (a line
    // break in a label would start a line of its own).
    let ck = if json { ck } else { inspect::with_printable_strings(ck) };
    let text = match layer {
        None => inspect::summary(&ck, json),
        Some(l) => {
            // At a terminal, wide matrices fold into panels of the terminal's width (COLUMNS
            // when set, else the terminal's own size, else 100; at least 20); piped output
            // keeps one line per row.
            use std::io::IsTerminal;
            if std::io::stdout().is_terminal() && !json {
                let from_env = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok());
                let width = from_env.or_else(|| console::Term::stdout().size_checked().map(|(_, cols)| usize::from(cols))).unwrap_or(100).max(20);
                inspect::block_for_terminal(&ck, l, head, json, width)?
            } else {
                inspect::block(&ck, l, head, json)?
            }
        }
    };
    let text = if json { text } else { crate::inspect::printable_lines(&text) };
    let _ = write!(out, "{text}");
    Ok(())
}
