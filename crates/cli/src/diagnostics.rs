//! Rendering of the language's diagnostics (source line, caret, labels): the only place
//! diagnostics become text.

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::{self, termcolor};
use raspc_lang::{Diagnostic, Severity, SourceMap};
use std::io::Write;

/// Renders diagnostics with the source line and a caret under the place.
pub fn render(sources: &SourceMap, diags: &[Diagnostic], color: bool) -> String {
    let mut files = SimpleFiles::new();
    for (_, f) in sources.files() {
        files.add(f.name.clone(), f.text.clone());
    }
    let config = term::Config::default();
    let mut buf = Vec::new();
    {
        let mut w: Box<dyn termcolor::WriteColor> = if color { Box::new(termcolor::Ansi::new(&mut buf)) } else { Box::new(termcolor::NoColor::new(&mut buf)) };
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
                    // The start of the built-in prelude is no place of the user's: a diagnostic
                    // about a built-in s-op (`y = tokens;` compiles `tokens`) or about the
                    // options names no line.
                    .filter(|l| !(l.span.start == 0 && sources.get(l.span.file).name == "<prelude>"))
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
