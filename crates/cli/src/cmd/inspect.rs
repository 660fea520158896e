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
            // At a terminal, wide matrices fold into panels of the terminal's width; piped
            // output keeps one line per row.
            match terminal_width() {
                Some(width) if !json => inspect::block_for_terminal(&ck, l, head, json, width)?,
                _ => inspect::block(&ck, l, head, json)?,
            }
        }
    };
    let text = if json { text } else { crate::inspect::printable_lines(&text) };
    let _ = write!(out, "{text}");
    Ok(())
}

/// The width text folds to when stdout is a terminal: COLUMNS when set, else the terminal's own
/// size, else 100; at least 20. None when stdout is not a terminal (piped output keeps one line
/// per row).
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let from_env = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok());
    Some(from_env.or_else(|| console::Term::stdout().size_checked().map(|(_, cols)| usize::from(cols))).unwrap_or(100).max(20))
}
