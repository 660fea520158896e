//! The `raspc` command line. Diagnostics are rendered here and nowhere else.
//!
//! [`run`] takes the arguments and two writers and returns the exit code, so tests drive the
//! whole CLI in-process; `main.rs` only wires it to the real stdout and stderr.

use clap::{Parser, Subcommand};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use raspc_lang::{Diagnostic, DiskLoader, Severity, SourceMap};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "raspc", version, about = "Compile RASP programs to transformer weights, and run them")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate a RASP program on one input with the reference interpreter.
    Eval {
        /// The program (.rasp).
        program: PathBuf,
        /// The s-op or selector to evaluate (default: `prog`, else the last s-op or selector assigned).
        #[arg(long)]
        entry: Option<String>,
        /// A JSON array (`[1,2,3]`, `["a","b"]`) or a plain string split into characters.
        #[arg(long)]
        input: String,
        /// Print exactly one line `{"output": [...]}`.
        #[arg(long)]
        json: bool,
    },
    /// Print an intermediate form of a program (the s-op graph of its entry).
    Dump {
        program: PathBuf,
        #[arg(long)]
        entry: Option<String>,
        /// Which stage to show.
        #[arg(long, value_enum, default_value = "graph")]
        stage: Stage,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Stage {
    /// The parsed program.
    Ast,
    /// The graph of s-ops and selectors the entry depends on.
    Graph,
}

/// Renders diagnostics with the source line and a caret under the place.
pub fn render(sources: &SourceMap, diags: &[Diagnostic], color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (_, f) in sources.files() {
        files.add(f.name.clone(), f.text.clone());
    }
    let config = term::Config::default();
    let mut buf = Vec::new();
    {
        let mut w: Box<dyn termcolor::WriteColor> =
            if color { Box::new(termcolor::Ansi::new(&mut buf)) } else { Box::new(termcolor::NoColor::new(&mut buf)) };
        for d in diags {
            let cs = CsDiagnostic::new(match d.severity {
                Severity::Error => CsSeverity::Error,
                Severity::Warning => CsSeverity::Warning,
                Severity::Note => CsSeverity::Note,
            })
            .with_code(d.code)
            .with_message(&d.message)
            .with_labels(
                d.labels
                    .iter()
                    .map(|l| {
                        let f = l.span.file.0 as usize;
                        let len = sources.get(l.span.file).text.len();
                        let (s, e) = ((l.span.start as usize).min(len), (l.span.end as usize).min(len));
                        let lab = if l.primary { CsLabel::primary(f, s..e) } else { CsLabel::secondary(f, s..e) };
                        lab.with_message(&l.message)
                    })
                    .collect(),
            )
            .with_notes(d.notes.clone());
            if term::emit(w.as_mut(), &config, &files, &cs).is_err() {
                let _ = writeln!(w, "{}: {}", d.code, d.message);
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Stack for the worker thread: parsing and host evaluation recurse over the program's nesting.
const STACK_BYTES: usize = 256 << 20;

/// Runs the CLI. Returns the process exit code: 0 success, 1 a user error, 2 a usage error,
/// 101 an internal error (a bug). The work runs on a thread with a large stack; its output is
/// buffered and then written to `out` and `err`.
pub fn run<I: IntoIterator<Item = String>>(args: I, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> i32 {
    let args: Vec<String> = args.into_iter().collect();
    let result = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                let (mut o, mut e) = (Vec::new(), Vec::new());
                let code = run_here(args, &mut o, &mut e, color);
                (code, o, e)
            })
            .map(|h| h.join())
    });
    match result {
        Ok(Ok((code, o, e))) => {
            let _ = out.write_all(&o);
            let _ = err.write_all(&e);
            code
        }
        _ => {
            let _ = writeln!(err, "error: internal error in raspc (this is a bug; please report it with the program that caused it)");
            101
        }
    }
}

fn run_here(args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let text = if color { e.render().ansi().to_string() } else { e.render().to_string() };
            let code = if e.use_stderr() { 2 } else { 0 };
            if e.use_stderr() {
                let _ = write!(err, "{text}");
            } else {
                let _ = write!(out, "{text}");
            }
            return code;
        }
    };
    let r = match cli.command {
        Command::Eval { program, entry, input, json } => eval(&program, entry.as_deref(), &input, json, out, err, color),
        Command::Dump { program, entry, stage } => dump(&program, entry.as_deref(), stage, out, err, color),
    };
    match r {
        Ok(()) => 0,
        Err(Failure::Reported) => 1,
        Err(Failure::Message(m)) => {
            let _ = writeln!(err, "error: {m}");
            1
        }
    }
}

enum Failure {
    /// Diagnostics were already written.
    Reported,
    Message(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Message(s)
    }
}

fn read_program(path: &std::path::Path) -> Result<String, Failure> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        Failure::Message(format!("`{}` is not valid UTF-8 (first bad byte at offset {})", path.display(), e.utf8_error().valid_up_to()))
    })
}

/// Parses and evaluates a program file; renders diagnostics on failure.
fn load(path: &std::path::Path, err: &mut dyn Write, color: bool) -> Result<raspc_lang::Session, Failure> {
    let text = read_program(path)?;
    let (sources, r) = raspc_lang::evaluate_program(&path.display().to_string(), Some(path), &text, &DiskLoader);
    match r {
        Ok(s) => {
            let notes: Vec<Diagnostic> = s.notes.iter().filter(|d| d.primary_span().is_some_and(|sp| sp.file == s.main_file)).cloned().collect();
            for n in &notes {
                let sp = n.primary_span().expect("filtered on a span");
                let (l, c) = sources.line_col(sp.file, sp.start);
                let _ = writeln!(err, "note: {}:{l}:{c}: {}", sources.get(sp.file).name, n.message);
            }
            Ok(s)
        }
        Err(diags) => {
            let _ = write!(err, "{}", render(&sources, &diags, color));
            let n = diags.iter().filter(|d| d.is_error()).count();
            let _ = writeln!(err, "error: could not evaluate `{}` due to {n} previous error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}

fn eval(path: &std::path::Path, entry: Option<&str>, input: &str, json: bool, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
    let session = load(path, err, color)?;
    let (_, node) = session.entry(entry)?;
    let tokens = raspc_lang::parse_input(input).map_err(|m| format!("bad --input: {m}"))?;
    match raspc_lang::evaluate(&session.graph, node, &tokens) {
        Ok(v) => {
            if json {
                let line = serde_json::json!({ "output": v.to_json() });
                let _ = writeln!(out, "{line}");
            } else {
                let _ = writeln!(out, "{}", v.to_text());
            }
            Ok(())
        }
        Err(e) if session.sources.get(e.span.file).name == "<prelude>" && e.span.start == 0 => {
            // A built-in s-op (such as `tokens_int`) failed: there is no program text to show.
            let at = e.position.map(|p| format!(" at position {p}")).unwrap_or_default();
            let _ = writeln!(err, "error[eval::runtime]: evaluating `{}` failed{at}: {}", e.label, e.message);
            let _ = writeln!(err, "  = input: {input}");
            Err(Failure::Reported)
        }
        Err(e) => {
            let at = e.position.map(|p| format!(" at position {p}")).unwrap_or_default();
            let d = Diagnostic::error("eval::runtime", format!("evaluating `{}` failed{at}: {}", e.label, e.message), e.span)
                .with_label("this operation failed")
                .with_note(format!("input: {input}"));
            let _ = write!(err, "{}", render(&session.sources, &[d], color));
            Err(Failure::Reported)
        }
    }
}

fn dump(path: &std::path::Path, entry: Option<&str>, stage: Stage, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> Result<(), Failure> {
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
