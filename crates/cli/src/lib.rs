//! The `raspc` command line, as a library: [`run`] takes the arguments and two writers and
//! returns the exit code, so tests drive the whole CLI in-process; `main.rs` only wires it to
//! the real stdout and stderr.
//!
//! Layout: [`args`] (clap types and flag parsing), [`diagnostics`] (rendering; diagnostics become
//! text there and nowhere else), `cmd` (one module per command), and the logic the commands and
//! the tests share, usable without the binary: [`verify`], [`probe`], [`simulate`], [`inspect`],
//! [`plot`].

use clap::Parser;
use std::io::Write;

pub mod args;
mod cmd;
pub mod diagnostics;
pub mod inspect;
pub mod onnx;
pub mod plot;
pub mod probe;
pub mod simulate;
pub mod verify;

pub use args::{
    grid, limits, parse_bounds, parse_tokens, vocab_duplicate, AttentionArg, AttentionModes, Bounds, Cli, Command, DtypeArg, ExportFormat, MlpArg, PlotFormat, ProbeKind, Stage, Target,
};
pub use cmd::compile::{constant_token_warning, mixed_type_warning};
pub use cmd::eval::failure_text as eval_failure_text;
pub use cmd::output::{save_checkpoint, save_onnx};
pub use cmd::{entry_error_text, note_lines, program_hash, read_input_file};
pub use diagnostics::render;

/// Stack for the worker thread: parsing and host evaluation recurse over the program's nesting.
const STACK_BYTES: usize = 256 << 20;

/// Runs the CLI. Returns the process exit code: 0 success, 1 a user error, 2 a usage error,
/// 101 an internal error (a bug). The work runs on a thread with a large stack and writes to
/// `out` and `err` as it goes (nothing is held back until the end). Callers must not hold the
/// process's stderr lock while this runs: progress bars draw to stderr from the worker thread.
pub fn run<I: IntoIterator<Item = String>>(args: I, out: &mut (dyn Write + Send), err: &mut (dyn Write + Send), color: bool) -> i32 {
    let args: Vec<String> = args.into_iter().collect();
    let json = asks_json(&args);
    let result = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                let mut tracked = Tracked { inner: &mut *out, error: None };
                let mut code = run_here(args, &mut tracked, &mut *err, color);
                let _ = tracked.flush();
                // Output that could not be written (a full disk, /dev/full) is a failure, not
                // a silent success; a reader that went away (`| head -1`) took what it wanted.
                if let Some(e) = tracked.error
                    && e.kind() != std::io::ErrorKind::BrokenPipe
                {
                    let _ = writeln!(err, "error: could not write the output: {e}");
                    if code == 0 {
                        code = 1;
                    }
                }
                let _ = err.flush();
                code
            })
            .map(|h| h.join())
    });
    match result {
        Ok(Ok(code)) => code,
        _ => {
            let message = "internal error in raspc (this is a bug; please report it with the program that caused it)";
            let _ = writeln!(err, "error: {message}");
            // (With --json the failure is data too; a panic skipped the worker's own object.)
            if json {
                let _ = writeln!(out, "{}", json_error(message, 101, vec![], message.as_bytes()));
            }
            101
        }
    }
}

/// The standard output as the commands see it: the first write error is kept (the commands
/// write as they go and do not stop for one) and reported when the command ends.
struct Tracked<'a> {
    inner: &'a mut (dyn Write + Send),
    error: Option<std::io::Error>,
}

impl Tracked<'_> {
    fn keep<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        // (An interrupted write is retried by `write_all`: no failure.)
        if let Err(e) = &r
            && self.error.is_none()
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        r
    }
}

impl Write for Tracked<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.keep(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.keep(r)
    }
}

/// `(option, value)` when an option is followed by a negative number (`--seed -1`).
fn negative_number_misuse(args: &[String]) -> Option<(String, String)> {
    args.windows(2).find_map(|w| (w[0].starts_with("--") && !w[0].contains('=') && w[1].starts_with('-') && w[1][1..].parse::<f64>().is_ok()).then(|| (w[0].clone(), w[1].clone())))
}

/// The standard output as [`run_here`] sees it: whether a command wrote anything.
struct Counting<'a> {
    inner: &'a mut dyn Write,
    wrote: bool,
}

/// A command run with `--json` has not yet written to the standard output: a signal that ends
/// it then prints the error object there (helper t22: an interrupted `--json` command printed
/// nothing). Set only by [`run_here`] and cleared by its first write.
pub(crate) static JSON_PENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The error object of a `--json` command ended by a signal (exit status `code` = 128 + the
/// signal), when it has printed nothing yet.
pub(crate) fn json_interrupted(code: i32) -> Option<String> {
    if !JSON_PENDING.swap(false, std::sync::atomic::Ordering::SeqCst) {
        return None;
    }
    let signal = match code - 128 {
        2 => "SIGINT".to_string(),
        15 => "SIGTERM".to_string(),
        1 => "SIGHUP".to_string(),
        n => format!("signal {n}"),
    };
    Some(json_error(&format!("interrupted ({signal})"), code, vec![], b""))
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !buf.is_empty() {
            JSON_PENDING.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        self.wrote |= !buf.is_empty();
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The standard error of a command run with `--json`: passed through, and kept for the error
/// object on the standard output.
struct Capture<'a> {
    inner: &'a mut dyn Write,
    text: Vec<u8>,
}

impl Write for Capture<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.text.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Text without its terminal colour sequences (`ESC [ ... letter`).
fn without_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The line a command run with `--json` prints on the standard output when it fails before
/// printing its object: `{"error": {"message", "exit_code", "diagnostics", "stderr"}}`, the
/// diagnostics as data (code, message, file, line and column of each label) and `stderr` the
/// text the command wrote there, so a script reads the failure without parsing text.
fn json_error(message: &str, exit_code: i32, diagnostics: Vec<serde_json::Value>, stderr: &[u8]) -> String {
    let stderr = without_ansi(&String::from_utf8_lossy(stderr));
    let message = diagnostics
        .iter()
        .find(|d| d["severity"] == "error")
        .and_then(|d| d["message"].as_str())
        .map(str::to_string)
        .or_else(|| (!message.is_empty()).then(|| message.to_string()))
        .or_else(|| stderr.lines().find_map(|l| l.strip_prefix("error: ").or_else(|| l.strip_prefix("error[").and_then(|m| m.split_once("]: ")).map(|(_, m)| m)).map(str::to_string)))
        .unwrap_or_else(|| stderr.trim().to_string());
    // A message that announces a list (clap's "the following required arguments were not
    // provided:") carries the list, from the indented lines after it in stderr (helper c19:
    // the missing flag's name was only in `stderr`).
    let message = match message.strip_suffix(':') {
        Some(head) => {
            let listed: Vec<&str> = stderr.lines().skip_while(|l| !l.contains(&message)).skip(1).take_while(|l| l.starts_with(' ') && !l.trim().is_empty()).map(str::trim).collect();
            if listed.is_empty() {
                message
            } else {
                format!("{head}: {}", listed.join(", "))
            }
        }
        None => message,
    };
    serde_json::json!({ "error": { "message": message, "exit_code": exit_code, "diagnostics": diagnostics, "stderr": stderr } }).to_string()
}

/// Whether the command line asks for JSON (`--json` before any `--`).
fn asks_json(args: &[String]) -> bool {
    args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json")
}

fn run_here(args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> i32 {
    if !asks_json(&args) {
        return run_command(args, out, err, color);
    }
    // With --json a failure is data too: the error object on the standard output (unless the
    // command printed its own object, which says how it failed), the text on stderr as always.
    diagnostics::record(true);
    JSON_PENDING.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut counted = Counting { inner: out, wrote: false };
    let mut captured = Capture { inner: err, text: vec![] };
    let code = run_command(args, &mut counted, &mut captured, color);
    let diags = diagnostics::record(false);
    JSON_PENDING.store(false, std::sync::atomic::Ordering::SeqCst);
    if code != 0 && !counted.wrote {
        let line = json_error("", code, diags, &captured.text);
        let _ = writeln!(counted, "{line}");
    }
    code
}

fn run_command(args: Vec<String>, out: &mut dyn Write, err: &mut dyn Write, color: bool) -> i32 {
    let negative = negative_number_misuse(&args);
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            // A negative number for an option that takes one ≥ 0 (`--seed -1`): clap reads `-1`
            // as an unknown flag and tips `-- -1`, which does not work either (helper t).
            if e.kind() == clap::error::ErrorKind::UnknownArgument
                && let Some((opt, value)) = &negative
            {
                let _ = writeln!(err, "error: {opt} does not take a negative number (got {value})\n\nFor more information, try '--help'.");
                return 2;
            }
            let text = if color { e.render().ansi().to_string() } else { e.render().to_string() };
            // Rust's own words for a number that does not parse (`--max-len=-3`).
            let text = text.replace("invalid digit found in string", "expected a whole number (0, 1, 2, ...)");
            // (And past the integer's range: `--max-len 99999999999999999999`, helper ed25.)
            let text = text.replace("number too large to fit in target type", "too large a number");
            let code = if e.use_stderr() { 2 } else { 0 };
            if e.use_stderr() {
                let _ = write!(err, "{text}");
            } else {
                let _ = write!(out, "{text}");
            }
            return code;
        }
    };
    // `--input` belongs to `--target` (clap's `requires` on it is not enforced when `--target`
    // requires it back): without one, a given X was dropped and random ones simulated.
    let usage = |name: &str, message: &str, err: &mut dyn Write| {
        use clap::CommandFactory;
        let mut c = Cli::command();
        let mut sub = match c.find_subcommand_mut(name) {
            Some(s) => s.clone().bin_name(format!("raspc {name}")),
            None => c,
        };
        let e = sub.error(clap::error::ErrorKind::MissingRequiredArgument, message);
        let _ = write!(err, "{}", if color { e.render().ansi().to_string() } else { e.render().to_string() });
        2
    };
    if let Command::Simulate { target: None, input: Some(_), .. } = &cli.command {
        let message = "--input is X for --target (the attention layer to simulate); without --target, simulate draws random layers and inputs (--n, --d, --dv, --heads, --trials)";
        return usage("simulate", message, err);
    }
    // Which block --layer shows is part of the command line: a usage error like clap's own
    // (`--head` without `--layer`), exit 2 (it was 1; helper b10).
    if let Command::Inspect { layer: Some(_), head: None, mlp: false, .. } = &cli.command {
        return usage("inspect", "--layer needs --head H (an attention head) or --mlp", err);
    }
    let r = match cli.command {
        Command::Eval { program, entry, input, json, causal } => cmd::eval::eval(&program, entry.as_deref(), &input, json, causal, out, err, color),
        Command::Dump { program, entry, stage, vocab, input_grid, input_bounds, mlp, max_len, causal } => {
            let target = cmd::dump::CompileFlags { vocab, input_grid, input_bounds, mlp, max_len, causal };
            cmd::dump::dump(&program, entry.as_deref(), stage, &target, out, err, color)
        }
        Command::Compile { program, target, output, force, bounds, json } => cmd::compile::compile_cmd(&program, &target, &output, force, bounds, json, out, err, color),
        Command::Run { model, input, json, attention, device } => cmd::run::run_cmd(&model, &input, json, attention, &device, out, err),
        Command::Inspect { model, json, layer, head, .. } => cmd::inspect::inspect_cmd(&model, json, layer, head, out),
        Command::Plot { model, out: dir, json, format, symlog } => cmd::plot::plot_cmd(&model, &dir, format, symlog, json, out),
        Command::Export { model, to: ExportFormat::Onnx, output, attention, json } => cmd::export::export_cmd(&model, &output, attention, json, out, err),
        Command::Probe { kind } => cmd::probe::probe_cmd(kind, out, err, color),
        Command::Simulate { n, d, dv, heads, mlp, trials, seed, bound, x_bound, tolerance, dtype, pl_error, output, force, target, input, device, split, json } => {
            let a = cmd::simulate::SimArgs {
                shape: simulate::Shape { n, d, dv, h: heads },
                mlp,
                trials,
                seed,
                bound,
                x_bound,
                tolerance,
                f64: dtype == DtypeArg::F64,
                pl_error,
                output,
                force,
                device,
                split,
                json,
            };
            cmd::simulate::simulate_cmd(&a, target.as_deref().zip(input.as_deref()), out, err)
        }
        Command::Trace { model, input, program, entry, attention, json } => {
            cmd::trace::trace_cmd(&model, &input, program.as_deref(), entry.as_deref(), attention, json, out, err, color)
        }
        Command::Verify { program, target, exhaustive, samples, seed, attention, allow_rejected, json } => {
            cmd::verify::verify_cmd(&program, &target, &cmd::verify::VerifyArgs { exhaustive, samples, seed, attention, allow_rejected, json }, out, err, color)
        }
    };
    match r {
        Ok(()) => 0,
        Err(Failure::Reported | Failure::Silent) => 1,
        Err(Failure::Message(m)) => {
            // A message may quote a file's strings (a checkpoint's labels): their control
            // characters are escaped here as everywhere else (helper b10: an escape sequence in
            // a label reached the terminal through a metadata error).
            let _ = writeln!(err, "error: {}", inspect::printable_lines(&m));
            1
        }
    }
}

/// Handles SIGINT, SIGTERM and SIGHUP for the command-line program: removes the temporary
/// files of checkpoints being written, clears a progress bar at a terminal, and exits with 128
/// plus the signal. Library users (the Python package) do not call it: their host owns signals.
pub fn install_signal_handling() {
    cmd::output::install_cleanup();
}

enum Failure {
    /// Diagnostics were already written.
    Reported,
    /// The output already says what went wrong (exit 1).
    Silent,
    Message(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Message(s)
    }
}

/// The shared messages name the CLI's flags; in Python they are keyword arguments.
pub fn pythonic(msg: &str) -> String {
    const FLAGS: &[(&str, &str)] = &[
        ("`--mlp gated`", "`mlp=\"gated\"`"),
        ("--x-bound", "x_bound"),
        ("--bound", "bound"),
        ("--input-bounds", "input_bounds"),
        ("--max-len", "max_len"),
        ("use --samples", "use samples=N"),
        ("--samples", "samples"),
        ("--exhaustive", "exhaustive=True"),
        ("--entry NAME", "entry=NAME"),
        ("--entry", "entry"),
        ("--vocab", "vocab"),
        ("--encoding", "numerical/categorical"),
        ("drop --causal", "drop causal=True"),
        ("--causal", "causal=True"),
        ("-o `", "`"),
        ("--input-grid", "input_grid"),
        ("--pl-error", "pl_error"),
        ("`raspc eval PROGRAM --input ...`", "`raspc.eval(source, input)`"),
        ("`raspc compile --bounds` shows", "the command line's `raspc compile --bounds` shows"),
        ("(--force replaces it)", "(force=True replaces it)"),
        ("(--force does not change this: remove it first)", "(force=True does not change this: remove it first)"),
    ];
    // At each place the longest spelling that ends there as a whole word is replaced (one
    // table entry rewritten by an earlier, shorter one gave `raspc compile bounds`: helper
    // p22), and `--encoding NAME=KIND` becomes `KIND=["NAME"]`.
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    'scan: while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("--encoding ") {
            let name_len = after.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).unwrap_or(after.len());
            for kind in ["numerical", "categorical"] {
                if name_len > 0
                    && let Some(tail) = after[name_len..].strip_prefix('=').and_then(|t| t.strip_prefix(kind))
                    && !tail.starts_with(word)
                {
                    out.push_str(&format!("{kind}=[\"{}\"]", &after[..name_len]));
                    rest = tail;
                    continue 'scan;
                }
            }
        }
        let best =
            FLAGS.iter().filter(|(flag, _)| rest.starts_with(flag) && (flag.ends_with(|c: char| !word(c)) || !rest[flag.len()..].starts_with(word))).max_by_key(|(flag, _)| flag.len());
        match best {
            Some((flag, arg)) => {
                out.push_str(arg);
                rest = &rest[flag.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    // Several labels of one kind, one argument: `categorical=["a"] categorical=["b"]` (from
    // `--encoding a=categorical --encoding b=categorical`) is `categorical=["a", "b"]`.
    for kind in ["numerical", "categorical"] {
        let (open, join) = (format!("{kind}=[\""), format!("\"] {kind}=[\""));
        let mut from = 0;
        while let Some(i) = out[from..].find(&open).map(|i| from + i + open.len()) {
            // The list's end, and whether the same kind's list follows at once.
            let Some(end) = out[i..].find("\"]").map(|e| i + e) else { break };
            if out[end..].starts_with(&join) {
                out.replace_range(end..end + join.len(), "\", \"");
                from = i - open.len();
            } else {
                from = end;
            }
        }
    }
    out
}

#[cfg(test)]
mod pythonic_tests {
    use super::pythonic;

    /// Each flag becomes its argument whole, the longest spelling first (helper p22: `--bounds`
    /// read as `--bound` + "s" gave "`raspc compile bounds`"), and `--encoding NAME=KIND` the
    /// argument `KIND=["NAME"]`, lists of one kind joined (review rv22).
    #[test]
    fn flags_become_arguments() {
        let cases = [
            ("`raspc compile --bounds` shows where", "the command line's `raspc compile --bounds` shows where"),
            ("a smaller --vocab or --max-len", "a smaller vocab or max_len"),
            ("give --x-bound or --bound", "give x_bound or bound"),
            ("a categorical encoding (`--encoding x=categorical`) holds", "a categorical encoding (`categorical=[\"x\"]`) holds"),
            ("(`--encoding a=categorical --encoding b.c=categorical`)", "(`categorical=[\"a\", \"b.c\"]`)"),
            ("(`--encoding a=numerical --encoding b=categorical`)", "(`numerical=[\"a\"] categorical=[\"b\"]`)"),
            ("`--encoding NAME=numerical` on a named s-op", "`numerical=[\"NAME\"]` on a named s-op"),
            ("--encoding applies to s-ops", "numerical/categorical applies to s-ops"),
            ("--encoding x=numerically", "numerical/categorical x=numerically"),
            ("no flags here: a--b, x-bound", "no flags here: a--b, x-bound"),
            ("--causal and --samples", "causal=True and samples"),
        ];
        for (cli, py) in cases {
            assert_eq!(pythonic(cli), py, "{cli}");
        }
    }
}
