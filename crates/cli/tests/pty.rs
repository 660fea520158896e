//! The real `raspc` binary in a terminal: progress bars draw live when stderr is a terminal,
//! stay silent when it is a pipe, and the command finishes (it once hung forever because the
//! main thread held the stderr lock while the worker's progress bar waited for it).
//!
//! The pseudo-terminal comes from util-linux `script`; without it the test prints why and
//! passes without checking anything.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);

fn dyck2() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/tracr/dyck2.rasp")
}

fn find_script() -> Option<PathBuf> {
    ["/usr/bin/script", "/bin/script"].iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Waits for the child with a deadline, reading stdout and stderr on threads so that a full pipe
/// never blocks it. Kills it and fails the test when the deadline passes.
fn wait_bounded(mut child: Child, what: &str) -> (std::process::ExitStatus, String, String) {
    let mut so = child.stdout.take().expect("stdout is piped");
    let mut se = child.stderr.take().expect("stderr is piped");
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for raspc") {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {TIMEOUT:?} (hang?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = String::from_utf8_lossy(&t_out.join().expect("stdout reader")).into_owned();
    let err = String::from_utf8_lossy(&t_err.join().expect("stderr reader")).into_owned();
    (status, out, err)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn verify_args() -> Vec<String> {
    let p = dyck2();
    ["verify", p.to_str().expect("utf-8 path"), "--vocab", "(){}", "--max-len", "5", "--samples", "200"].map(String::from).to_vec()
}

#[test]
fn verify_in_a_terminal_finishes_and_draws_progress() {
    let Some(script) = find_script() else {
        println!("skipped: util-linux `script` is not installed (no pseudo-terminal available)");
        return;
    };
    let bin = env!("CARGO_BIN_EXE_raspc");
    let cmd = std::iter::once(shell_quote(bin)).chain(verify_args().iter().map(|a| shell_quote(a))).collect::<Vec<_>>().join(" ");
    let child = Command::new(script)
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start script");
    let (status, out, err) = wait_bounded(child, "raspc verify under a pseudo-terminal");
    assert!(status.success(), "exit {status}\nstdout:\n{out}\nstderr:\n{err}");
    // Everything raspc writes (stdout and stderr) reaches the terminal, which `script` copies
    // to its stdout.
    assert!(out.contains("verified: 200 inputs, 0 mismatches"), "no summary in terminal output:\n{out}");
    assert!(out.contains("/200 inputs"), "no progress bar was drawn on the terminal:\n{out}");
}

#[test]
fn verify_with_piped_stderr_draws_no_progress() {
    let child = Command::new(env!("CARGO_BIN_EXE_raspc")).args(verify_args()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start raspc");
    let (status, out, err) = wait_bounded(child, "raspc verify with pipes");
    assert!(status.success(), "exit {status}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("verified: 200 inputs, 0 mismatches"), "{out}");
    assert!(!err.contains("inputs") && !err.contains('\u{2588}') && !err.contains("\x1b["), "progress text on a piped stderr:\n{err}");
    assert!(!out.contains("/200 inputs"), "progress text on stdout:\n{out}");
}
