//! `raspc dump`: an intermediate form of a program.

use crate::args::*;
use crate::cmd::*;
use crate::diagnostics::render;
use crate::Failure;
use raspc_lang::SourceMap;
use std::io::Write;

pub(crate) fn dump(path: &std::path::Path, entry: Option<&str>, stage: Stage, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    match stage {
        Stage::Ast => {
            let text = read_program(path)?;
            let mut sources = SourceMap::new();
            let f = sources.add(path.display().to_string(), Some(path.to_path_buf()), text.clone());
            let (prog, errs) = raspc_lang::parser::parse(f, &text);
            if !errs.is_empty() {
                let _ = write!(err, "{}", render(&sources, &errs, color));
                return Err(Failure::Reported);
            }
            let _ = writeln!(out, "{prog:#?}");
            Ok(())
        }
        Stage::Graph => {
            let session = load(path, err, color)?;
            let (_, node) = session.entry(entry)?;
            let (g, _) = session.graph.extract(node);
            let _ = write!(out, "{}", g.dump());
            Ok(())
        }
    }
}
