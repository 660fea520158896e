//! Diagnostics as data.
//!
//! Every stage reports problems as [`Diagnostic`] values: a severity, a stable code, a message,
//! a primary span and optional secondary labels and notes. Nothing here renders text with line
//! and column carets: that happens in one place, the CLI.

use crate::span::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

/// A labelled span: the primary label says what is wrong there, secondary ones give context.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
    pub primary: bool,
}

/// One problem found in a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `parse::expected`.
    pub code: &'static str,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic { severity: Severity::Error, code, message: message.into(), labels: vec![Label { span, message: String::new(), primary: true }], notes: vec![] }
    }

    pub fn note_at(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic { severity: Severity::Note, ..Diagnostic::error(code, message, span) }
    }

    /// Sets the text of the primary label.
    pub fn with_label(mut self, text: impl Into<String>) -> Diagnostic {
        if let Some(l) = self.labels.iter_mut().find(|l| l.primary) {
            l.message = text.into();
        }
        self
    }

    pub fn with_secondary(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: text.into(), primary: false });
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn primary_span(&self) -> Option<Span> {
        self.labels.iter().find(|l| l.primary).map(|l| l.span)
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}
