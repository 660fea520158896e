//! `raspc dump`: an intermediate form of a program.

use crate::args::*;
use crate::cmd::*;
use crate::diagnostics::render;
use crate::Failure;
use raspc_lang::SourceMap;
use std::io::Write;

/// The compile options the compiler's stages need (a subset of `raspc compile`'s).
pub(crate) struct CompileFlags {
    pub vocab: Option<String>,
    pub input_grid: Option<String>,
    pub input_bounds: Option<String>,
    pub mlp: MlpArg,
    pub max_len: Option<usize>,
    pub causal: bool,
}

impl CompileFlags {
    fn target(&self, entry: Option<&str>, stage: Stage) -> Result<Target, Failure> {
        let Some(max_len) = self.max_len else {
            return Err(format!("--stage {} compiles the program: give --max-len (and --vocab, --input-grid or --input-bounds)", stage_name(stage)).into());
        };
        Ok(Target {
            entry: entry.map(str::to_string),
            vocab: self.vocab.clone(),
            input_grid: self.input_grid.clone(),
            input_bounds: self.input_bounds.clone(),
            mlp: self.mlp,
            pl_error: None,
            max_len,
            causal: self.causal,
            encodings: vec![],
        })
    }
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Ast => "ast",
        Stage::Graph => "graph",
        Stage::Simplified => "simplified",
        Stage::Values => "values",
        Stage::Plan => "plan",
        Stage::Schedule => "schedule",
    }
}

pub(crate) fn dump(path: &std::path::Path, entry: Option<&str>, stage: Stage, flags: &CompileFlags, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    // (Review b24: `dump prog.rasp --vocab abc` printed the graph, the vocabulary unused, without a word.)
    let given = flags.vocab.is_some() || flags.input_grid.is_some() || flags.input_bounds.is_some() || flags.max_len.is_some() || flags.causal;
    if given && matches!(stage, Stage::Ast | Stage::Graph) {
        let _ = writeln!(
            err,
            "warning: --stage {} does not compile the program: --vocab, --input-grid, --input-bounds, --max-len and --causal change nothing there (they are for the stages simplified, values, plan and schedule)",
            stage_name(stage)
        );
    }
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
            // Line starts once (line_col scans the text from its start on every call).
            let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
            let at = |s: raspc_lang::Span| {
                let off = raspc_lang::span::floor_char_boundary(&text, (s.start as usize).min(text.len()));
                let line = starts.partition_point(|&b| b <= off);
                let from = starts.get(line.saturating_sub(1)).copied().unwrap_or(0);
                (line, text.get(from..off).map_or(0, |t| t.chars().count()) + 1)
            };
            let _ = write!(out, "{}", raspc_lang::pretty::program(&prog, &at));
            Ok(())
        }
        Stage::Graph => {
            let session = load(path, err, color)?;
            let (_, node) = entry_of(&session, entry, err, color)?;
            let (g, _) = session.graph.extract(node);
            let _ = write!(out, "{}", g.dump());
            Ok(())
        }
        Stage::Simplified | Stage::Values => {
            let target = flags.target(entry, stage)?;
            if target.input_bounds.is_some() {
                return Err(format!("--stage {}: real-valued programs are not rewritten; use --stage plan", stage_name(stage)).into());
            }
            let vocab = match (&target.vocab, &target.input_grid) {
                (Some(v), _) => parse_tokens("--vocab", v)?,
                (None, Some(g)) => grid(g)?,
                (None, None) => return Err("give --vocab or --input-grid".to_string().into()),
            };
            let session = load(path, err, color)?;
            let (_, node) = entry_of(&session, entry, err, color)?;
            // The simplification compile lowers (of two, the one whose plan it keeps).
            let opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: target.max_len, causal: target.causal, ..Default::default() };
            let (g, root) = raspc_compiler::simplified(&session.graph, node, &opts);
            if matches!(stage, Stage::Simplified) {
                let (g, _) = g.extract(root);
                let _ = write!(out, "{}", g.dump());
            } else {
                let (sets, ivs) = raspc_compiler::infer::infer_with_intervals(&g, root, &vocab, target.max_len);
                let _ = write!(out, "{}", raspc_compiler::dump::values(&g, root, &sets, &ivs, target.max_len));
            }
            Ok(())
        }
        Stage::Plan | Stage::Schedule => {
            let target = flags.target(entry, stage)?;
            let built = build(path, &target, err, color)?;
            let c = &built.compiled;
            let text = match stage {
                Stage::Plan => raspc_compiler::dump::plan(&c.plan),
                _ => raspc_compiler::dump::schedule(&c.plan, &c.schedule),
            };
            let _ = write!(out, "{text}");
            Ok(())
        }
    }
}
