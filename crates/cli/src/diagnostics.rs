//! Rendering of the language's diagnostics (source line, caret, labels): the only place
//! diagnostics become text.

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use raspc_lang::{Diagnostic, Severity, SourceMap};
use std::cell::RefCell;
use std::io::Write;

thread_local! {
    /// With `--json`, every diagnostic rendered on this thread, as JSON (see [`record`]).
    static RECORDED: RefCell<Option<Vec<serde_json::Value>>> = const { RefCell::new(None) };
}

/// Starts (`true`) or stops recording the diagnostics [`render`] shows on this thread, so a
/// command run with `--json` can report them as data; returns what was recorded.
pub fn record(on: bool) -> Vec<serde_json::Value> {
    RECORDED.with(|r| std::mem::replace(&mut *r.borrow_mut(), on.then(Vec::new)).unwrap_or_default())
}

/// A diagnostic as data: severity, code, message, each label's file, line and column (1-based,
/// columns in characters) to its end, and the notes.
fn to_json(sources: &SourceMap, d: &Diagnostic) -> serde_json::Value {
    let labels: Vec<serde_json::Value> = d
        .labels
        .iter()
        .filter(|l| !(l.span.start == 0 && sources.get(l.span.file).name == "<prelude>"))
        .map(|l| {
            let (line, column) = sources.line_col(l.span.file, l.span.start);
            let (end_line, end_column) = sources.line_col(l.span.file, l.span.end.max(l.span.start));
            serde_json::json!({
                "file": sources.get(l.span.file).name,
                "line": line,
                "column": column,
                "end_line": end_line,
                "end_column": end_column,
                "primary": l.primary,
                "message": l.message,
            })
        })
        .collect();
    let severity = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    };
    serde_json::json!({ "severity": severity, "code": d.code, "message": d.message, "labels": labels, "notes": d.notes })
}

/// Source lines longer than this many characters are shown as a window around the labels.
const MAX_LINE: usize = 160;
/// Characters kept either side of the labels in a shortened line.
const CONTEXT: usize = 50;
/// Diagnostics rendered in full; the rest are counted (30,000 parse errors took 30 s to render
/// and printed 4 MB).
const MAX_RENDERED: usize = 50;

/// A piece of source as shown: control and invisible format characters (an escape sequence
/// would reach the user's terminal; a zero-width character would get no caret) become `?`s of
/// the same byte length, so every offset still maps one to one.
fn printable(piece: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| c != '\n' && c != '\t' && crate::inspect::hidden(c);
    if !piece.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(piece);
    }
    // A line's `\r\n` keeps its `\r` (the renderer ends the line there).
    let mut out = String::with_capacity(piece.len());
    let mut chars = piece.chars().peekable();
    while let Some(c) = chars.next() {
        if hidden(c) && !(c == '\r' && chars.peek() == Some(&'\n')) {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A file's text as shown, with long lines cut to a window (`…` marks a cut), and the map from
/// offsets in the original text to offsets in the shown one.
struct Shown {
    text: String,
    /// Kept pieces: (start in the original, end in the original, start in the shown text).
    kept: Vec<(usize, usize, usize)>,
    /// Cut pieces: (start, end in the original; where an offset in them is shown: the edge of
    /// the window beside them).
    cut: Vec<(usize, usize, usize)>,
}

impl Shown {
    fn new(text: &str, marks: &[(usize, usize)]) -> Shown {
        let mut shown = Shown { text: String::with_capacity(text.len().min(1 << 16)), kept: vec![], cut: vec![] };
        let mut start = 0;
        for line in text.split_inclusive('\n') {
            let end = start + line.len();
            let body = line.trim_end_matches(['\n', '\r']);
            let chars = body.chars().count();
            if chars <= MAX_LINE {
                shown.keep(text, start, end);
            } else {
                // The labels that start on this line (or at the end of a last line without a
                // line break), clipped to it.
                let on_line: Vec<(usize, usize)> = marks
                    .iter()
                    .filter(|&&(s, _)| s >= start && (s < end || (s == end && end == text.len())))
                    .map(|&(s, e)| (s - start, e.max(s).min(start + body.len()).max(start) - start))
                    .collect();
                // Offsets inside a character (or in the line break) count up to it.
                let char_at = |byte: usize| body[..raspc_lang::span::floor_char_boundary(body, byte)].chars().count();
                let byte_at = |ch: usize| body.char_indices().nth(ch).map_or(body.len(), |(b, _)| b);
                // A label longer than the window is shown from its start (a 300 KB expression
                // is not printed whole).
                let (lo, hi) = match (on_line.iter().map(|m| m.0).min(), on_line.iter().map(|m| char_at(m.1).min(char_at(m.0) + MAX_LINE)).max()) {
                    (Some(lo), Some(hi)) => (char_at(lo).saturating_sub(CONTEXT), (hi + CONTEXT).min(chars)),
                    _ => (0, MAX_LINE),
                };
                let (a, b) = (byte_at(lo), byte_at(hi));
                if a > 0 {
                    shown.text.push('…');
                    shown.cut.push((start, start + a, shown.text.len()));
                }
                shown.keep(text, start + a, start + b);
                if b < body.len() {
                    shown.cut.push((start + b, end, shown.text.len()));
                    shown.text.push('…');
                }
                shown.text.push_str(&line[body.len()..]);
            }
            start = end;
        }
        shown
    }

    fn keep(&mut self, text: &str, from: usize, to: usize) {
        self.kept.push((from, to, self.text.len()));
        self.text.push_str(&printable(&text[from..to]));
    }

    /// An original offset in the shown text (one in a cut moves to the nearest kept piece).
    fn map(&self, pos: usize) -> usize {
        if let Some(&(_, _, at)) = self.cut.iter().find(|c| c.0 <= pos && pos < c.1) {
            return at;
        }
        // Otherwise the last kept piece that starts at or before it (the line ends between
        // pieces are kept whole after them).
        // An offset past the end of a piece lies in the line break after it, or at the end of
        // the file after a cut line: never past the shown text, nor inside a character.
        let at = match self.kept.iter().rev().find(|k| k.0 <= pos) {
            Some(&(s, e, n)) => n + (pos.min(e) - s) + pos.saturating_sub(e),
            None => 0,
        };
        raspc_lang::span::floor_char_boundary(&self.text, at)
    }
}

/// Renders diagnostics with the source line and a caret under the place. Lines longer than
/// `MAX_LINE` characters are shown around the labels, with the true line and column in the
/// location.
pub fn render(sources: &SourceMap, diags: &[Diagnostic], color: bool) -> String {
    RECORDED.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.extend(diags.iter().map(|d| to_json(sources, d)));
        }
    });
    let config = term::Config::default();
    let mut out = String::new();
    for d in diags.iter().take(MAX_RENDERED) {
        // The start of the built-in prelude is no place of the user's: a diagnostic about a
        // built-in s-op (`y = tokens;` compiles `tokens`) or about the options names no line.
        let labels: Vec<_> = d.labels.iter().filter(|l| !(l.span.start == 0 && sources.get(l.span.file).name == "<prelude>")).collect();
        let mut files = SimpleFiles::new();
        let mut shown = vec![];
        // Where codespan will put a location that a cut moved, and where it truly is.
        let mut fixes: Vec<(String, String)> = vec![];
        for (id, f) in sources.files() {
            // Only the files this diagnostic points into are shown (the others stay empty).
            if !labels.iter().any(|l| l.span.file == id) {
                files.add(f.name.clone(), String::new());
                shown.push(Shown { text: String::new(), kept: vec![], cut: vec![] });
                continue;
            }
            let clip = |p: u32| (p as usize).min(f.text.len());
            let marks: Vec<(usize, usize)> = labels.iter().filter(|l| l.span.file == id).map(|l| (clip(l.span.start), clip(l.span.end))).collect();
            let s = Shown::new(&f.text, &marks);
            for l in labels.iter().filter(|l| l.span.file == id) {
                let (line, col) = sources.line_col(id, l.span.start);
                let at = s.map(clip(l.span.start));
                let shown_col = s.text[..at].rsplit('\n').next().map_or(0, |x| x.chars().count()) + 1;
                if shown_col != col {
                    fixes.push((format!("{}:{line}:{shown_col}", f.name), format!("{}:{line}:{col}", f.name)));
                }
            }
            files.add(f.name.clone(), s.text.clone());
            shown.push(s);
        }
        let cs = CsDiagnostic::new(match d.severity {
            Severity::Error => CsSeverity::Error,
            Severity::Warning => CsSeverity::Warning,
            Severity::Note => CsSeverity::Note,
        })
        .with_code(d.code)
        .with_message(&d.message)
        .with_labels(
            labels
                .iter()
                .map(|l| {
                    let f = l.span.file.0 as usize;
                    let s = &shown[f];
                    let len = sources.get(l.span.file).text.len();
                    let (a, b) = (s.map((l.span.start as usize).min(len)), s.map((l.span.end as usize).min(len)));
                    let lab = if l.primary { CsLabel::primary(f, a..b.max(a)) } else { CsLabel::secondary(f, a..b.max(a)) };
                    lab.with_message(&l.message)
                })
                .collect(),
        )
        .with_notes(d.notes.clone());
        let mut buf = Vec::new();
        {
            let mut w: Box<dyn termcolor::WriteColor> = if color { Box::new(termcolor::Ansi::new(&mut buf)) } else { Box::new(termcolor::NoColor::new(&mut buf)) };
            if term::emit(w.as_mut(), &config, &files, &cs).is_err() {
                let _ = writeln!(w, "{}: {}", d.code, d.message);
            }
        }
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        for (from, to) in &fixes {
            text = text.replacen(from, to, 1);
        }
        out.push_str(&text);
    }
    if diags.len() > MAX_RENDERED {
        let more = &diags[MAX_RENDERED..];
        let errors = more.iter().filter(|d| d.severity == Severity::Error).count();
        out.push_str(&format!("note: {} more diagnostics ({errors} errors) not shown; the first {MAX_RENDERED} are above\n\n", more.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use raspc_lang::Span;

    fn one(text: &str, start: usize, end: usize, secondary: Option<(usize, usize)>) -> String {
        let mut sources = SourceMap::new();
        let f = sources.add("p.rasp", None, text);
        let mut d = Diagnostic::error("test::place", "here", Span::new(f, start, end)).with_label("this");
        if let Some((s, e)) = secondary {
            d = d.with_secondary(Span::new(f, s, e), "that");
        }
        render(&sources, &[d], false)
    }

    #[test]
    fn a_long_line_is_shown_around_its_label_with_the_true_column() {
        // 'é' is two bytes: columns count characters.
        let line = format!("x = {}BAD{};\n", "é + ".repeat(100), " + 1".repeat(100));
        let start = line.find("BAD").unwrap();
        let col = line[..start].chars().count() + 1;
        let out = one(&line, start, start + 3, None);
        assert!(out.contains(&format!("p.rasp:1:{col}\n")), "{out}");
        let shown = out.lines().find(|l| l.contains("BAD")).unwrap();
        assert!(shown.contains("│ …") && shown.contains("é + BAD") && shown.trim_end().ends_with('…') && shown.chars().count() < 2 * CONTEXT + 20, "{shown}");
        // The caret is under the label.
        let caret = out.lines().find(|l| l.contains("^^^")).unwrap();
        assert_eq!(caret.chars().position(|c| c == '^'), shown.chars().position(|c| c == 'B'), "{out}");
    }

    #[test]
    fn a_label_at_the_end_of_a_file_whose_last_line_is_cut() {
        // The last line has no line break and is longer than MAX_LINE; a label at the very end
        // of the file (an unexpected end) sits after the cut, beside the closing `…`.
        for tail in ["", "é", "\n"] {
            let text = format!("x = {}ENDMARK +{tail}", "set y (".repeat(40));
            // (Two labels far apart: the window spans both.)
            let out = one(&text, text.len(), text.len(), Some((4, 7)));
            assert!(out.contains("p.rasp:") && out.contains("ENDMARK") && out.contains("that"), "{out}");
            let out = one(&text, text.len(), text.len(), None);
            assert!(out.contains("here"), "{out}");
            // The window is around the end (the place), not the line's start.
            if tail != "\n" {
                assert!(out.contains("ENDMARK +") && out.contains(&format!("p.rasp:1:{}", text.chars().count() + 1)), "{out}");
            }
        }
        // A label longer than the window (a 300 KB expression) is shown from its start, cut.
        let text = format!("x = 1{};\n", " if True else 1".repeat(20_000));
        let out = one(&text, 4, text.len() - 2, None);
        assert!(out.len() < 2_000 && out.contains("p.rasp:1:5") && out.contains("x = 1 if True"), "{}", out.len());
    }

    #[test]
    fn any_labels_on_any_text_render() {
        // Offsets past the end, inside a character, or spanning lines never panic.
        let texts = ["", "é", &"é(".repeat(200), &format!("{}\n{}", "a".repeat(300), "…".repeat(170)), &format!("{}\r\n\r\n{}", "ab".repeat(90), "x")];
        for text in texts {
            let n = text.len();
            for start in [0, 1, 2, n / 3, n / 2, n.saturating_sub(2), n.saturating_sub(1), n, n + 5] {
                for end in [start, start + 1, start + 3, n, n + 1] {
                    let out = one(text, start, end, Some((end.min(n) / 2, n)));
                    assert!(out.contains("test::place"), "{out}");
                }
            }
        }
    }

    #[test]
    fn short_lines_and_labels_at_a_long_line_end_are_shown_whole() {
        let text = "y = 1;\nz = oops;\n";
        let at = text.find("oops").unwrap();
        let out = one(text, at, at + 4, None);
        assert!(out.contains("p.rasp:2:5\n") && out.contains("z = oops;") && !out.contains('…'), "{out}");
        // A label running to the end of a long line (and its line break) keeps the line's end.
        let line = format!("w = {}END\nv = 2;\n", "1 + ".repeat(80));
        let end = line.find('\n').unwrap();
        let out = one(&line, end - 3, end + 1, Some((4, 5)));
        assert!(out.contains("END") && out.contains("p.rasp:1:"), "{out}");
    }
}
