//! `raspc inspect`: the command around [`crate::inspect`].

use crate::cmd::*;
use crate::{inspect, Failure};
use std::io::Write;
use std::path::Path;

pub(crate) fn inspect_cmd(path: &Path, json: bool, layer: Option<usize>, head: Option<usize>, mlp: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let ck = read_checkpoint(path)?;
    let text = match layer {
        None => inspect::summary(&ck, json),
        Some(l) => {
            if head.is_none() && !mlp {
                return Err("--layer needs --head H or --mlp".to_string().into());
            }
            // At a terminal, wide matrices fold into panels of the terminal's width (COLUMNS,
            // else 100); piped output keeps one line per row.
            use std::io::IsTerminal;
            if std::io::stdout().is_terminal() && !json {
                let width = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()).filter(|&c| c >= 20).unwrap_or(100);
                inspect::block_for_terminal(&ck, l, head, json, width)?
            } else {
                inspect::block(&ck, l, head, json)?
            }
        }
    };
    let _ = write!(out, "{text}");
    Ok(())
}
