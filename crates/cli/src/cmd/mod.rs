//! One module per command (`run_here` in lib.rs dispatches to them), and what several share:
//! reading input files and programs, building (evaluate + compile) a program, loading a
//! checkpoint, the attention flag.

pub(crate) mod compile;
pub(crate) mod dump;
pub(crate) mod eval;
pub(crate) mod export;
pub(crate) mod inspect;
pub mod output;
pub(crate) mod plot;
pub(crate) mod probe;
pub(crate) mod run;
pub(crate) mod simulate;
pub(crate) mod trace;
pub(crate) mod verify;

use crate::args::*;
use crate::diagnostics::render;
use crate::Failure;
use raspc_lang::DiskLoader;
use std::io::Write;
use std::path::Path;

/// Reads a file named on the command line: regular files only (a FIFO or a device would block
/// or never end), within the `text_bytes` budget, checked before reading.
pub fn read_input_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read `{shown}`: {}", raspc_checkpoint::io_message(&e)))?;
    if !meta.is_file() {
        return Err(format!("cannot read `{shown}`: not a regular file"));
    }
    let max = limits()?.max_text_bytes;
    if meta.len() > max {
        return Err(format!("`{shown}` is {} bytes, over the budget of {max} (raise it with RASPC_LIMITS=text_bytes=N)", meta.len()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {}", raspc_checkpoint::io_message(&e)))?;
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes).map_err(|e| format!("cannot read `{shown}`: {}", raspc_checkpoint::io_message(&e)))?;
    Ok(bytes)
}

/// The most bytes a command keeps of what it computes for one run (`trace`'s residual streams,
/// `probe`'s attention patterns), checked before the run.
const KEPT_BYTES: u128 = 2_000_000_000;

/// Refuses, before the work, keeping `bytes` (`what` says of what, and how many) over
/// [`KEPT_BYTES`]; `remedy` says what fits (helper b19: trace took 3.4 GB, probe over 7.5 GB).
pub(crate) fn within_kept_bytes(what: &str, bytes: u128, remedy: &str) -> Result<(), Failure> {
    if bytes > KEPT_BYTES {
        return Err(format!("{what} is about {:.1} GB, over {} GB; {remedy}", bytes as f64 / 1e9, KEPT_BYTES / 1_000_000_000).into());
    }
    Ok(())
}

pub(crate) fn read_program(path: &std::path::Path) -> Result<String, Failure> {
    if path.as_os_str() == "-" && !path.exists() {
        return Err(Failure::Message(
            "`-`: raspc reads a program from a file (its `load` statements are relative to it, and `verify` and `trace` read it again), not from standard input: save it first (`cat > prog.rasp`)".into(),
        ));
    }
    let bytes = read_input_file(path)?;
    // A checkpoint given where a program goes (helper c19): a safetensors file starts with its
    // header's length, then `{"`.
    let checkpoint = bytes.len() > 10 && bytes[8..10] == *b"{\"";
    String::from_utf8(bytes).map_err(|e| {
        let hint = if checkpoint { "; it looks like a safetensors checkpoint, which `raspc run`, `inspect` and `trace` read" } else { "" };
        Failure::Message(format!("`{}` is not valid UTF-8 ({}){hint}", path.display(), raspc_lang::utf8_place(e.as_bytes(), e.utf8_error().valid_up_to())))
    })
}

/// The notes about a program's own files (the program and what it loads, not the prelude), as
/// `raspc` prints them (`note: FILE:LINE:COL: message`, then `  = ` lines): at most 20, after
/// a line counting them when there are more (a program of thousands of one-line statement
/// pairs has a note for each).
pub fn note_lines(sources: &raspc_lang::SourceMap, s: &raspc_lang::Session, shown: &str) -> Vec<String> {
    let mut notes: Vec<_> = s.notes.iter().filter_map(|d| Some((d, d.primary_span()?))).filter(|(_, sp)| sp.file == s.main_file || sources.get(sp.file).path.is_some()).collect();
    // In the order of the source (the parser's notes came before the evaluator's: 1:12, 3:7,
    // 2:1; helper t22), files in the order they were read; a stable sort keeps notes of one
    // place in the order they were made.
    notes.sort_by_key(|(_, sp)| (sp.file, sp.start));
    const MAX_NOTES: usize = 20;
    let mut lines = vec![];
    if notes.len() > MAX_NOTES {
        lines.push(format!("note: {} notes about `{shown}`; the first {MAX_NOTES} follow", notes.len()));
    }
    for &(n, sp) in notes.iter().take(MAX_NOTES) {
        let (l, c) = sources.line_col(sp.file, sp.start);
        let mut line = format!("note: {}:{l}:{c}: {}", sources.get(sp.file).name, n.message);
        for more in &n.notes {
            line.push_str(&format!("\n  = {more}"));
        }
        lines.push(line);
    }
    lines
}

/// Parses and evaluates a program file; renders diagnostics on failure.
pub(crate) fn load(path: &std::path::Path, err: &mut dyn Write, color: bool) -> Result<raspc_lang::Session, Failure> {
    let text = read_program(path)?;
    let (sources, r) = raspc_lang::evaluate_program(&path.display().to_string(), Some(path), &text, &DiskLoader);
    match r {
        Ok(s) => {
            for note in note_lines(&sources, &s, &path.display().to_string()) {
                let _ = writeln!(err, "{note}");
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

/// A compiled program with what verification needs.
pub(crate) struct Built {
    pub(crate) session: raspc_lang::Session,
    pub(crate) root: raspc_lang::NodeId,
    pub(crate) vocab: Vec<raspc_lang::Atom>,
    pub(crate) compiled: raspc_compiler::Compiled,
    /// What it was compiled with (a note compiles it again with one encoding changed).
    pub(crate) opts: raspc_compiler::Options,
}

/// The program's identity recorded in a checkpoint: a hash of every source file it read
/// (the built-in libraries excluded).
pub fn program_hash(session: &raspc_lang::Session) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for (_, f) in session.sources.files() {
        if f.name == "<prelude>" || f.name == "<matrix>" {
            continue;
        }
        h.update((f.text.len() as u64).to_le_bytes());
        h.update(f.text.as_bytes());
    }
    format!("sha256:{:x}", h.finalize())
}

/// Whether the entry `root` of `session` is the program `ck` was compiled from: the same source
/// files (the program hash), or, for U written by `raspc simulate` (whose hash names its shapes),
/// the same s-op graph as `universal(n, d, dv, h)` (or `universal_split`) of those shapes,
/// however the file spells it.
pub(crate) fn compiled_from(session: &raspc_lang::Session, root: raspc_lang::NodeId, ck: &raspc_checkpoint::Checkpoint) -> bool {
    if program_hash(session) == ck.program_hash {
        return true;
    }
    let Some((shape, layout)) = crate::simulate::Shape::layout_from_hash(&ck.program_hash) else { return false };
    let text = crate::simulate::source_in(shape, layout);
    let (_, r) = raspc_lang::evaluate_program("<universal>", None, &text, &raspc_lang::MemoryLoader::default());
    let Some((u, uroot)) = r.ok().and_then(|u| u.entry(Some("u")).ok().map(|(_, root)| (u, root))) else { return false };
    u.graph.extract(uroot).0.dump() == session.graph.extract(root).0.dump()
}

/// An error of the entry `entry` of `session`: shown at the assignment it is about when the
/// main file made one (`Session::entry_place`), else as the message alone.
pub(crate) fn entry_failure(session: &raspc_lang::Session, entry: Option<&str>, msg: String, err: &mut dyn Write, color: bool) -> Failure {
    match session.entry_place(entry) {
        Some((span, label)) => {
            let d = raspc_lang::Diagnostic::error("eval::entry", msg, span).with_label(label);
            let _ = write!(err, "{}", render(&session.sources, &[d], color));
            Failure::Reported
        }
        None => msg.into(),
    }
}

/// The text of an entry error as [`entry_failure`] shows it (without colour), for the Python
/// package.
pub fn entry_error_text(session: &raspc_lang::Session, entry: Option<&str>, msg: String) -> String {
    let mut text = Vec::new();
    match entry_failure(session, entry, msg, &mut text, false) {
        Failure::Message(m) => m,
        _ => String::from_utf8_lossy(&text).trim_end().to_string(),
    }
}

/// [`raspc_lang::Session::entry`], its error placed by [`entry_failure`].
pub(crate) fn entry_of(session: &raspc_lang::Session, entry: Option<&str>, err: &mut dyn Write, color: bool) -> Result<(String, raspc_lang::NodeId), Failure> {
    session.entry(entry).map_err(|msg| entry_failure(session, entry, msg, err, color))
}

pub(crate) fn build(path: &Path, target: &Target, err: &mut dyn Write, color: bool) -> Result<Built, Failure> {
    let mut session = load(path, err, color)?;
    let entry = target.entry.as_deref();
    let (_, root) = match session.compile_entry(entry) {
        Ok(r) => r,
        Err(msg) => return Err(entry_failure(&session, entry, msg, err, color)),
    };
    let real = match &target.input_bounds {
        Some(b) => {
            let (lo, hi, blocks) = parse_bounds(b)?;
            Some(raspc_compiler::real::RealOptions { lo, hi, blocks, mlp: target.mlp.mode(), pl_error: target.pl_error, f32_inputs: false, grids: vec![] })
        }
        None => None,
    };
    let vocab = match (&target.vocab, &real, &target.input_grid) {
        (_, Some(_), _) => vec![],
        (Some(v), None, _) if v.trim_start().starts_with('{') => {
            return Err("--vocab takes a JSON array of tokens (`[\"a\", \"b\"]`) or a string of one-character tokens; this looks like a JSON object (a tokenizer's vocab.json?): pass its keys as an array".to_string().into());
        }
        (Some(v), None, _) => parse_tokens("--vocab", v)?,
        (None, None, Some(g)) => grid(g)?,
        (None, None, None) => return Err("give --vocab (token inputs), --input-grid or --input-bounds (real-valued inputs)".to_string().into()),
    };
    if real.is_none() && target.pl_error.is_some() {
        let _ = writeln!(err, "warning: --pl-error changes nothing here: it is for real-valued programs (--input-bounds); a token program's MLPs are exact lookups");
    }
    if real.is_none() && target.mlp == MlpArg::Gated {
        let _ = writeln!(err, "warning: --mlp gated changes nothing here: it is for real-valued programs (--input-bounds); a token program's MLPs are exact lookups either way");
    }
    if vocab.is_empty() && real.is_none() {
        return Err("--vocab is empty: give the tokens the model must accept, e.g. --vocab '[\"a\",\"b\"]'".to_string().into());
    }
    if vocab.len() > raspc_compiler::infer::MAX_VALUES {
        return Err(format!("--vocab has {} tokens; a token s-op's values are enumerated, at most {}", vocab.len(), raspc_compiler::infer::MAX_VALUES).into());
    }
    if let Some(e) = vocab_duplicate("--vocab", &vocab) {
        return Err(e.into());
    }
    // `--vocab 'a,b'` or `'a b'`: a separator read as a token of its own (helper ed25: silently).
    if let Some(v) = &target.vocab
        && !v.trim_start().starts_with('[')
        && vocab.len() > 1
        && let Some(sep) = vocab.iter().find_map(|a| match a {
            raspc_lang::Atom::Str(s) if s == "," || s == " " => Some(s.clone()),
            _ => None,
        })
    {
        let shown: Vec<String> = vocab.iter().take(8).map(raspc_lang::Atom::repr).collect();
        let _ = writeln!(
            err,
            "warning: --vocab is read one character per token, so {sep:?} is a token too ({}{}); for tokens of several characters give a JSON list, such as '[\"ab\", \"cd\"]'",
            shown.join(", "),
            if vocab.len() > 8 { ", …" } else { "" }
        );
    }
    if target.max_len == 0 {
        return Err("--max-len must be at least 1".to_string().into());
    }
    let budget = limits()?.max_input_tokens;
    if target.max_len > budget {
        return Err(format!("--max-len {} is too large (at most {budget}; raise it with RASPC_LIMITS=input_tokens=N)", target.max_len).into());
    }
    if let Some(e) = target.pl_error {
        finite_flag("--pl-error", e, e > 0.0, "> 0")?;
    }
    let mut opts = raspc_compiler::Options { vocab: vocab.clone(), max_len: target.max_len, causal: target.causal, real, ..Default::default() };
    // A name the program binds to an s-op that carries another label (`prog = fa;` labels the
    // s-op `prog`) means that s-op, unless it is itself the label of one.
    let labels: std::collections::HashSet<&str> = session.graph.ancestors(root).into_iter().map(|n| session.graph.node(n).label.as_str()).collect();
    let label_of = |l: &str| match session.get(l) {
        Some(raspc_lang::HostValue::Sop(n)) if !labels.contains(l) => session.graph.node(n).label.clone(),
        _ => l.to_string(),
    };
    for e in &target.encodings {
        match e.split_once('=') {
            Some((l, "numerical")) => {
                opts.numerical.insert(label_of(l));
            }
            Some((l, "categorical")) => {
                opts.categorical.insert(label_of(l));
            }
            _ => return Err(format!("bad --encoding `{e}`: expected LABEL=numerical or LABEL=categorical").into()),
        }
    }
    if let Some(both) = opts.numerical.intersection(&opts.categorical).next() {
        return Err(format!("--encoding gives `{both}` both encodings").into());
    }
    // A compile can take seconds (a wide one-hot at max-len 64: helper a20 saw 12 s of nothing):
    // say what is happening, at a terminal only (indicatif draws to stderr when it is one).
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_message(format!("compiling `{}` (max-len {})", path.display(), target.max_len));
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let compiled = raspc_compiler::compile(&session.graph, root, &opts, &program_hash(&session));
    spinner.finish_and_clear();
    match compiled {
        Ok(compiled) => Ok(Built { session, root, vocab, compiled, opts }),
        Err(diags) => {
            let _ = write!(err, "{}", render(&session.sources, &diags, color));
            let n = diags.iter().filter(|d| d.is_error()).count();
            let _ = writeln!(err, "error: could not compile `{}` due to {n} previous error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}

pub(crate) fn attention_of(a: AttentionArg) -> raspc_runtime::Attention {
    match a {
        AttentionArg::Hard => raspc_runtime::Attention::Hard,
        AttentionArg::Soft => raspc_runtime::Attention::Soft,
    }
}

pub(crate) fn read_checkpoint(path: &Path) -> Result<raspc_checkpoint::Checkpoint, Failure> {
    // An I/O error names the file already ("cannot read `x`: ..."); the others are about its contents.
    Ok(raspc_checkpoint::Checkpoint::from_file(path, &limits()?).map_err(|e| match e {
        raspc_checkpoint::CheckpointError::Io(m) => m,
        e => format!("`{}`: {e}", path.display()),
    })?)
}

/// A hint for an input the model refuses when `--input` was plain text, which is read one
/// character per token: a vocabulary of longer tokens (numbers, words) or a model reading real
/// numbers needs the tokens as a JSON array.
pub(crate) fn char_input_hint(input: &str, ck: &raspc_checkpoint::Checkpoint) -> String {
    let one_char = |v: &serde_json::Value| v.as_str().is_some_and(|s| s.chars().count() == 1);
    // The BOS entry's token is null.
    let tokens = || ck.config.vocab.iter().map(|e| &e.token).filter(|t| !t.is_null());
    let long_tokens = ck.config.real_input.is_some() || tokens().any(|t| !one_char(t));
    if input.trim_start().starts_with('[') || !long_tokens {
        return String::new();
    }
    if let Some(r) = &ck.config.real_input {
        let example = format!("{}, {}", num_json(r.lo), num_json(r.hi));
        return format!(" (`--input` text is read one character per token; this model reads numbers: give them as a JSON array, e.g. --input '[{example}]')");
    }
    let example = tokens().take(2).map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
    let example = if example.is_empty() { "-1.0, 0.5".to_string() } else { example };
    // (Numbers are tokens of their own, however short: helper b10 was told `[1, 2, 3]` were
    // "not all single characters".)
    let why = if tokens().any(|t| t.is_number() || t.is_boolean()) {
        "and this model's tokens include numbers (or booleans), which are not strings"
    } else {
        "and this model's tokens are not all single characters"
    };
    format!(" (`--input` text is read one character per token, {why}: give them as a JSON array, e.g. --input '[{example}]')")
}

/// A number as JSON writes it (`1` stays `1`, `0.5` stays `0.5`).
fn num_json(x: f64) -> String {
    serde_json::Value::from(x).to_string()
}
