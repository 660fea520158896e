//! Writing checkpoints (`compile -o`, `simulate -o`): never over anything that is not a regular
//! raspc checkpoint, through a temporary file in the same directory that is removed on signals.

use crate::args::*;
use crate::Failure;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Temporary files being written, removed if the process is interrupted (SIGINT, SIGTERM,
/// SIGHUP) before they are renamed into place.
pub(crate) static TEMP_FILES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
pub(crate) static CLEANUP: std::sync::Once = std::sync::Once::new();
pub(crate) static TEMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn install_cleanup() {
    CLEANUP.call_once(|| {
        // On Unix, one thread waits for the signals and exits with 128 + the signal received
        // (helper b10: SIGTERM and SIGHUP exited with SIGINT's 130), after removing temporary
        // files and clearing a progress bar's line at a terminal (Ctrl-C left the bar, and the
        // prompt came after it on the same line).
        #[cfg(unix)]
        {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
            if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
                let _ = std::thread::Builder::new().name("raspc-signals".into()).spawn(move || {
                    if let Some(sig) = signals.forever().next() {
                        interrupted(128 + sig);
                    }
                });
            }
        }
        // Elsewhere one handler for all three (If another handler is already installed, by a
        // host program, its owner handles signals.)
        #[cfg(not(unix))]
        {
            let _ = ctrlc::set_handler(|| interrupted(130));
        }
    });
}

/// What an interrupted run does before exiting with `code`.
fn interrupted(code: i32) -> ! {
    if let Ok(files) = TEMP_FILES.lock() {
        for f in files.iter() {
            let _ = std::fs::remove_file(f);
        }
    }
    // A `--json` command that printed nothing yet prints its error object, as a failure does.
    if let Some(line) = crate::json_interrupted(code) {
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        // (A bar or spinner is the only partial line raspc leaves on a terminal.)
        let _ = std::io::Write::write_all(&mut std::io::stderr(), b"\r\x1b[2K");
    }
    std::process::exit(code);
}

pub(crate) fn forget_temp(tmp: &Path) {
    if let Ok(mut files) = TEMP_FILES.lock() {
        files.retain(|f| f != tmp);
    }
}

/// May `-o` be written? Nothing exists there, or a regular file that is a raspc checkpoint
/// (with `force`, also one this raspc cannot read: another version, or damaged). Directories,
/// devices, FIFOs, sockets, symbolic links and other files are never replaced.
pub(crate) fn check_output(output: &Path, force: bool) -> Result<(), Failure> {
    plain_file_path(output)?;
    parent_usable(output)?;
    let shown = output.display();
    let meta = match std::fs::symlink_metadata(output) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect -o `{shown}`: {e}").into()),
    };
    if meta.is_dir() {
        return Err(format!("-o `{shown}` is a directory").into());
    }
    if !meta.is_file() {
        return Err(format!("-o `{shown}` exists and is not a regular file (a device, FIFO, socket or symbolic link); refusing to replace it").into());
    }
    writable_file(output, &meta)?;
    // A file too short for the header its first 8 bytes announce is no safetensors file at all
    // (a text file, say): say so, rather than quote a size budget.
    let mut head = [0u8; 8];
    let announced = std::fs::File::open(output).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).map(|()| u64::from_le_bytes(head)).ok();
    // A raspc checkpoint cut short (a full disk, an interrupted copy) still says so at its start:
    // its header, whole or cut, holds `"format":"raspc"`. That is damage `--force` replaces.
    // Read once, whole (a single `read` may return less), however many checks below ask.
    let cut = std::cell::OnceCell::new();
    let cut_raspc = || -> bool {
        *cut.get_or_init(|| {
            let n = announced.map_or(0, |n| n.min(1 << 20));
            let mut buf = vec![];
            let _ = std::fs::File::open(output).and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 8 + n), &mut buf));
            // Its header as a safetensors header starts: a JSON object right after the length,
            // holding the metadata that names the format (a text file that merely quotes it
            // does not start so; helper rv).
            let text = String::from_utf8_lossy(buf.get(8..).unwrap_or_default());
            buf.get(8) == Some(&b'{') && text.contains("\"__metadata__\"") && text.contains(&format!("\"{}\":\"{}\"", raspc_checkpoint::keys::FORMAT, raspc_checkpoint::FORMAT))
        })
    };
    if announced.is_none_or(|n| n > meta.len().saturating_sub(8)) {
        if announced.is_some() && cut_raspc() {
            if force {
                return Ok(());
            }
            return Err(format!("`{shown}` is a damaged raspc checkpoint (its header is cut short); refusing to overwrite it (--force replaces it)").into());
        }
        return Err(
            format!("`{shown}` exists and is not a raspc checkpoint (nor any safetensors file); refusing to overwrite it (--force does not change this: remove it first)").into()
        );
    }
    let l = limits()?;
    let bytes = match raspc_checkpoint::read_file(output, &l) {
        Ok(b) => b,
        Err(_) if force && cut_raspc() => return Ok(()),
        Err(e) if cut_raspc() => return Err(format!("`{shown}` is a damaged raspc checkpoint ({e}); refusing to overwrite it (--force replaces it)").into()),
        Err(e) => return Err(format!("`{shown}` exists and is not a raspc checkpoint ({e}); refusing to overwrite it").into()),
    };
    match raspc_checkpoint::Checkpoint::from_bytes_with(&bytes, &l) {
        Ok(_) => Ok(()),
        Err(_) if force && (raspc_checkpoint::claims_raspc_format(&bytes) || cut_raspc()) => Ok(()),
        Err(e) if raspc_checkpoint::claims_raspc_format(&bytes) || cut_raspc() => {
            Err(format!("`{shown}` is a raspc checkpoint this raspc cannot read ({e}); refusing to overwrite it (--force replaces it)").into())
        }
        Err(_) => Err(format!("`{shown}` exists and is not a raspc checkpoint; refusing to overwrite it (--force does not change this: remove it first)").into()),
    }
}

/// Checks `-o` (see [`check_output`]), then writes to a temporary file in the same directory
/// and renames it into place: a failed or interrupted write never leaves half a file, and the
/// temporary file is removed on errors and on SIGINT/SIGTERM/SIGHUP.
///
/// Says (Some: a line for the user) when the file replaced was a checkpoint of another program:
/// a model replaced by another one is not replaced silently (review b24: `simulate -o` over a
/// compiled `reverse` said nothing).
pub(crate) fn write_checkpoint(output: &Path, bytes: &[u8], force: bool) -> Result<Option<String>, Failure> {
    check_output(output, force)?;
    let before = header_of(output).and_then(|h| program_of(&h));
    install_cleanup();
    write_atomic(output, bytes)?;
    Ok(match (before, program_of(bytes)) {
        (Some(old), Some(new)) if old != new => Some(format!("note: replaced `{}`, a checkpoint of another program ({old})", output.display())),
        _ => None,
    })
}

/// The first bytes of the file at `path` up to the end of its safetensors header (the length
/// and the JSON), not the tensors after it.
fn header_of(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).ok()?;
    let n = usize::try_from(u64::from_le_bytes(len)).ok()?.min(100 << 20);
    let mut bytes = len.to_vec();
    f.take(n as u64).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The `program_hash` a checkpoint's header declares (a hash, or U's shape), read from the
/// header alone; None when the bytes hold none.
fn program_of(bytes: &[u8]) -> Option<String> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let header = bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)?;
    let json: serde_json::Value = serde_json::from_slice(header).ok()?;
    json.get("__metadata__")?.get(raspc_checkpoint::keys::PROGRAM_HASH)?.as_str().map(str::to_string)
}

/// Writes a checkpoint file as `raspc compile -o` does, for library users (the Python package):
/// refuses to replace anything but a raspc checkpoint (with `force`, also one this raspc
/// cannot read), and writes through a temporary file renamed into place. Installs no signal
/// handler (the host program owns its signals).
pub fn save_checkpoint(output: &Path, bytes: &[u8], force: bool) -> Result<(), String> {
    check_output(output, force).and_then(|()| write_atomic(output, bytes)).map_err(failure_text)
}

/// Writes an ONNX file (`raspc export`, `Model.to_onnx`): replaces only a regular file that an
/// ONNX export of raspc wrote (its model proto starts with the IR version and the producer name
/// `raspc`), never another file, a link or a device; through a temporary file.
pub fn save_onnx(output: &Path, bytes: &[u8]) -> Result<(), String> {
    save_file(output, bytes, "an ONNX file raspc wrote", &written_by_raspc_onnx)
}

/// `08 <varint> 12 05 "raspc"`: field 1 (ir_version), then field 2 (producer_name) = "raspc".
fn written_by_raspc_onnx(head: &[u8]) -> bool {
    let Some((&0x08, rest)) = head.split_first() else { return false };
    let Some(end) = rest.iter().position(|b| b & 0x80 == 0) else { return false };
    rest[end + 1..].starts_with(b"\x12\x05raspc")
}

/// May a file raspc writes for the user (a figure, a report, an ONNX export) go to `path`? Nothing is there, or
/// a regular file whose content `ours` recognises as one of raspc's own (its format, written by
/// an earlier run). Directories, links, devices and other files are never replaced, nor written
/// through.
pub fn may_replace(path: &Path, what: &str, ours: &dyn Fn(&[u8]) -> bool) -> Result<(), String> {
    plain_file_path(path)?;
    parent_usable(path)?;
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect `{shown}`: {e}")),
        Ok(m) if m.is_dir() => Err(format!("`{shown}` is a directory")),
        Ok(m) if !m.is_file() => Err(format!("`{shown}` exists and is not a regular file (a device, FIFO, socket or symbolic link); refusing to replace it")),
        Ok(m) => {
            writable_file(path, &m)?;
            let mut head = vec![0u8; 4096];
            let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
            if ours(&head[..n]) {
                Ok(())
            } else {
                Err(format!("`{shown}` exists and is not {what}; refusing to overwrite it (remove it or write elsewhere)"))
            }
        }
    }
}

/// Writes `bytes` to `path` if [`may_replace`] allows it, through a temporary file.
pub fn save_file(path: &Path, bytes: &[u8], what: &str, ours: &dyn Fn(&[u8]) -> bool) -> Result<(), String> {
    may_replace(path, what, ours)?;
    write_atomic(path, bytes).map_err(failure_text)
}

/// A file nobody may write (`chmod a-w`) is not replaced, as `cp` would not replace it either
/// (helper dt26: renaming over it replaced a 0444 checkpoint, ONNX file or figure, for an
/// ordinary user too, since only the folder's permissions matter to a rename).
fn writable_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    if meta.permissions().readonly() {
        return Err(format!("`{}` is read-only; refusing to replace it (make it writable, e.g. `chmod u+w`, or write elsewhere)", path.display()));
    }
    Ok(())
}

/// The folder an output goes to is one, or can be made (checked before the work that produces
/// the output): the nearest part of its path that exists is a folder; and when that is the
/// output's own folder, raspc may write in it (helper dt26: a read-only folder was found only
/// after `simulate` had computed for seconds and `probe` had printed its whole report; tried
/// with an empty file, removed at once, so that it holds for root and read-only file systems
/// alike; a folder still to be made is not tried in the folders above it).
fn parent_usable(path: &Path) -> Result<(), String> {
    let mut dir = path.parent();
    let mut own = true;
    loop {
        let d = match dir {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() && !own => return Ok(()),
            Ok(m) if m.is_dir() => {
                let n = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let probe = d.join(format!(".raspc-write-check.{}-{n}.raspc-tmp", std::process::id()));
                return match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
                    Ok(_) => {
                        let _ = std::fs::remove_file(&probe);
                        Ok(())
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem) => {
                        Err(format!("cannot write `{}`: the folder `{}` is not writable ({})", path.display(), d.display(), io_reason(&e)))
                    }
                    // (Anything else, a full disk say, is reported when the file is written.)
                    Err(_) => Ok(()),
                };
            }
            Ok(_) => return Err(format!("cannot write `{}`: `{}` is not a folder", path.display(), d.display())),
            Err(_) if d == Path::new(".") => return Ok(()),
            Err(_) => {
                dir = d.parent();
                own = false;
            }
        }
    }
}

/// An I/O error's text without Rust's "(os error N)".
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// What identifies the file at `path` (None: nothing there), to see whether another program
/// wrote it meanwhile.
fn identity(path: &Path) -> Option<(u64, Option<std::time::SystemTime>, u64)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok(), ino))
}

/// `path` names a file to write: `-` is not standard output here (raspc writes files only, and
/// a file named `-` is more likely a mistake than a wish; `./-` still names one), and a path
/// ending in a separator, `.` or `..` names a folder.
fn plain_file_path(path: &Path) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return Err("`-o -`: raspc writes this output to a file, not to standard output; give a path (`./-` for a file named `-`)".into());
    }
    // A path that ends in a separator (or `.`, `..`) names a folder: said before the work, not
    // as "Not a directory (os error 20)" after it (helper t22).
    let text = path.to_string_lossy();
    if text.ends_with(std::path::is_separator) || path.file_name().is_none() || text.ends_with("/.") {
        return Err(format!(
            "cannot write `{}`: the path names a folder (it ends with `{}`); give the path of a file (in that folder or another)",
            path.display(),
            if text.ends_with("..") {
                ".."
            } else if text.ends_with('.') {
                "."
            } else {
                "/"
            }
        ));
    }
    Ok(())
}

fn failure_text(f: Failure) -> String {
    match f {
        Failure::Message(m) => m,
        Failure::Reported | Failure::Silent => "the file was not written".to_string(),
    }
}

/// Removes the temporary files an earlier raspc left for `name` in `dir` when it was killed
/// outright (SIGKILL: no handler runs; a 205 MB `.NAME.PID-N.raspc-tmp` stayed): only files of
/// exactly that pattern whose process no longer exists here (Linux's /proc tells; elsewhere
/// nothing is removed) and that nobody has written to for an hour (a folder shared with another
/// machine or container, whose processes this one cannot see, keeps its writers' files).
pub(crate) fn remove_stale_temps(dir: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        // A checkpoint's `.NAME.PID-N.raspc-tmp`, or a figure's `.NAME.PID.raspc-tmp.EXT`
        // (`plot`, whose encoder goes by the extension; helper dt26: a killed plot's stayed).
        let pid = file.strip_prefix(&prefix).and_then(|rest| match rest.strip_suffix(".raspc-tmp") {
            Some(r) => r.split_once('-').and_then(|(p, n)| {
                n.parse::<u64>().ok()?;
                p.parse::<u32>().ok()
            }),
            None => rest.split_once(".raspc-tmp.").filter(|(_, ext)| !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric())).and_then(|(p, _)| p.parse::<u32>().ok()),
        });
        let Some(pid) = pid else {
            continue;
        };
        let idle = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|d| d > std::time::Duration::from_secs(3600));
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() && idle && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Writes `bytes` to a temporary file in `output`'s directory and renames it into place: a
/// failed or interrupted write never leaves half a file.
fn write_atomic(output: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Missing folders are made, as `plot -o` and `probe --plot` make theirs (helper c19: `probe
    // -o new/report.json` ran the whole probe and then could not write).
    if !dir.exists() {
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the folder `{}` for `{}`: {}", dir.display(), output.display(), io_reason(&e)))?;
    }
    let name = output.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "checkpoint".into());
    remove_stale_temps(&dir, &name);
    let n = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}-{n}.raspc-tmp", std::process::id()));
    if let Ok(mut files) = TEMP_FILES.lock() {
        files.push(tmp.clone());
    }
    // What is at `output` now was checked; a file another program puts there while this one
    // writes is not replaced (helper dt26: a text file written at `-o` during a 1 s write of
    // a large checkpoint was lost).
    let before = identity(output);
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        // A file replaced keeps its permissions (a private 0600 checkpoint stayed private only
        // until the next compile: the new file had the umask's 0644).
        if let Ok(old) = std::fs::metadata(output) {
            f.set_permissions(old.permissions())?;
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    let changed = written.is_ok() && identity(output) != before;
    let result = if changed { Ok(()) } else { written.and_then(|()| std::fs::rename(&tmp, output)) };
    if changed || result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    forget_temp(&tmp);
    if changed {
        return Err(format!(
            "`{}` was written by another program while raspc wrote its file; it was left as it is, and nothing was written (run again to replace it)",
            output.display()
        )
        .into());
    }
    result.map_err(|e| format!("cannot write `{}`: {}", output.display(), io_reason(&e)).into())
}
