//! Source files and byte spans.
//!
//! Every AST node and every graph node carries a [`Span`]: a file id plus a byte range.
//! [`SourceMap`] owns the text of every file that was read (the main program, the prelude,
//! and each `load`ed file) so diagnostics can be rendered with line and column.

use std::path::PathBuf;

/// Identifies one file inside a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A half-open byte range `[start, end)` in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start: start as u32, end: end as u32 }
    }

    /// The smallest span covering both (they must be in the same file).
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// One source file: its display name, its path on disk (if any) and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub path: Option<PathBuf>,
    pub text: String,
}

/// All files read while evaluating one program.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, path: Option<PathBuf>, text: impl Into<String>) -> FileId {
        self.files.push(SourceFile { name: name.into(), path, text: text.into() });
        FileId((self.files.len() - 1) as u32)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(i as u32), f))
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, file: FileId, offset: u32) -> (usize, usize) {
        let text = &self.get(file).text;
        let offset = (offset as usize).min(text.len());
        let before = &text[..floor_char_boundary(text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }

    /// The source text a span covers.
    pub fn snippet(&self, span: Span) -> &str {
        let text = &self.get(span.file).text;
        let s = floor_char_boundary(text, span.start as usize);
        let e = floor_char_boundary(text, span.end as usize).max(s);
        &text[s..e]
    }
}

/// The largest character boundary of `s` at or below `i` (clamped to its length).
pub fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The lines of one text by byte offset, answered by binary search over its line breaks (a scan
/// per question made files of many statements or many diagnostics quadratic).
pub(crate) struct LineBreaks(Vec<usize>);

impl LineBreaks {
    pub(crate) fn new(text: &str) -> LineBreaks {
        LineBreaks(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i).collect())
    }

    /// 0-based line of a byte offset (an offset past the end is on the last line).
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.0.partition_point(|&b| b < offset)
    }
}
