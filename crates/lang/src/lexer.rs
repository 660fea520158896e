//! Lexer: text -> tokens with spans.
//!
//! Follows the reference grammar's lexical rules: `INT [0-9]+`, `FLOAT [0-9]+.[0-9]+`,
//! `STRING "..."` without escapes or newlines, `#` comments to end of line, identifiers
//! `[a-zA-Z_][a-zA-Z_0-9]*`. `select(`, `aggregate(`, `range(`, `zip(` and `len(` are single
//! tokens (the parenthesis must follow the word directly). Bad characters are reported and
//! skipped, so lexing never stops early.

use crate::diag::Diagnostic;
use crate::span::{FileId, Span};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    // keywords
    Def,
    Return,
    For,
    In,
    If,
    Else,
    Not,
    And,
    Or,
    Load,
    Draw,
    Round,
    Indicator,
    // words that take their parenthesis with them
    SelectParen,
    AggregateParen,
    RangeParen,
    ZipParen,
    LenParen,
    // punctuation
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Colon,
    Assign,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Caret,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Eof,
}

impl Tok {
    /// How the token is shown in "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::Int(i) => format!("integer `{i}`"),
            Tok::Float(f) => format!("number `{f}`"),
            Tok::Str(s) => format!("string \"{s}\""),
            Tok::Eof => "end of file".to_string(),
            other => format!("`{}`", other.text()),
        }
    }

    pub fn text(&self) -> &'static str {
        match self {
            Tok::Def => "def",
            Tok::Return => "return",
            Tok::For => "for",
            Tok::In => "in",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::Not => "not",
            Tok::And => "and",
            Tok::Or => "or",
            Tok::Load => "load",
            Tok::Draw => "draw",
            Tok::Round => "round",
            Tok::Indicator => "indicator",
            Tok::SelectParen => "select(",
            Tok::AggregateParen => "aggregate(",
            Tok::RangeParen => "range(",
            Tok::ZipParen => "zip(",
            Tok::LenParen => "len(",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Semi => ";",
            Tok::Colon => ":",
            Tok::Assign => "=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Caret => "^",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Ident(_) => "identifier",
            Tok::Int(_) => "integer",
            Tok::Float(_) => "number",
            Tok::Str(_) => "string",
            Tok::Eof => "end of file",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Tokens a file may have (a 63 MB file of `x = 1;` ran the parser out of memory, about 700
/// bytes of syntax tree per statement): past it, lexing stops with an error at that place.
pub const MAX_TOKENS: usize = 5_000_000;

/// Splits `text` into tokens. Always ends with one `Eof` token; lexical errors are collected.
pub fn lex(file: FileId, text: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut errs = Vec::new();
    let mut reported_names = std::collections::HashSet::new();
    let mut i = 0;
    let sp = |s: usize, e: usize| Span::new(file, s, e);
    while i < bytes.len() {
        if toks.len() >= MAX_TOKENS {
            errs.push(
                Diagnostic::error("lex::too-big", format!("the program has more than {MAX_TOKENS} tokens"), sp(i, i))
                    .with_label("reading stopped here")
                    .with_note("a program this long would need gigabytes to hold; split the work, or generate a loop (`for`) instead of its unrolled statements"),
            );
            break;
        }
        let c = bytes[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let is_float = i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit();
                if is_float {
                    i += 1;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                // `1e5`, `2.5E-3`: an exponent, which RASP's numbers do not have (the letters
                // would lex as a name and the number end there, a confusing "expected `;`").
                let exp = i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') && {
                    let j = i + 1 + usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
                    bytes.get(j).is_some_and(u8::is_ascii_digit)
                };
                if exp {
                    let mut j = i + 1;
                    if matches!(bytes.get(j), Some(b'+' | b'-')) {
                        j += 1;
                    }
                    while j < bytes.len() && bytes[j].is_ascii_digit() {
                        j += 1;
                    }
                    errs.push(
                        Diagnostic::error("lex::exponent", format!("`{}`: numbers in RASP have no exponent", &text[start..j]), sp(start, j))
                            .with_label("exponent notation")
                            .with_note("write the number out (`100000`, `0.0025`), or compute it (`10 ^ 5`)"),
                    );
                    i = j;
                    toks.push(Token { tok: Tok::Int(0), span: sp(start, j) });
                } else if is_float {
                    let f: f64 = text[start..i].parse().unwrap_or(f64::INFINITY);
                    toks.push(Token { tok: Tok::Float(f), span: sp(start, i) });
                } else if bytes.get(i) == Some(&b'.') && !bytes.get(i + 1).is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_') {
                    // `5.`: a number with nothing after its point (helper ed25: "unexpected
                    // character `.`"); read as the number it means, so the rest parses.
                    i += 1;
                    errs.push(
                        Diagnostic::error("lex::number-form", format!("`{}` is not a RASP number", &text[start..i]), sp(start, i)).with_label(format!("write `{}0`", &text[start..i])),
                    );
                    toks.push(Token { tok: Tok::Float(text[start..i - 1].parse().unwrap_or(f64::INFINITY)), span: sp(start, i) });
                } else {
                    match text[start..i].parse::<i64>() {
                        Ok(v) => toks.push(Token { tok: Tok::Int(v), span: sp(start, i) }),
                        Err(_) => {
                            errs.push(
                                Diagnostic::error("lex::int-too-large", "integer literal is too large", sp(start, i))
                                    .with_label("does not fit in 64 bits")
                                    .with_note("raspc integers are 64-bit signed; the largest is 9223372036854775807"),
                            );
                            toks.push(Token { tok: Tok::Int(0), span: sp(start, i) });
                        }
                    }
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
                if i < bytes.len() && bytes[i] == b'"' {
                    toks.push(Token { tok: Tok::Str(text[start + 1..i].to_string()), span: sp(start, i + 1) });
                    i += 1;
                } else {
                    errs.push(
                        Diagnostic::error("lex::unterminated-string", "unterminated string", sp(start, i))
                            .with_label("this string has no closing `\"` on its line")
                            .with_note("RASP strings cannot span lines and have no escape sequences"),
                    );
                    toks.push(Token { tok: Tok::Str(text[start + 1..i].to_string()), span: sp(start, i) });
                }
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                // `.5`: a number without its leading digit.
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let digits = &text[start + 1..i];
                errs.push(Diagnostic::error("lex::number-form", format!("`.{digits}` is not a RASP number"), sp(start, i)).with_label(format!("write `0.{digits}`")));
                toks.push(Token { tok: Tok::Float(format!("0.{digits}").parse().unwrap_or(0.0)), span: sp(start, i) });
            }
            // A name that starts with a letter outside ASCII (`épaisseur`).
            _ if c >= 0x80 && is_word_start(&text[start..]) => i = non_ascii_name(file, text, start, &mut reported_names, &mut errs, &mut toks),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                // ... or goes on outside ASCII (`naïve`).
                if bytes.get(i).is_some_and(|b| *b >= 0x80) && text[i..].chars().next().is_some_and(char::is_alphanumeric) {
                    i = non_ascii_name(file, text, start, &mut reported_names, &mut errs, &mut toks);
                    continue;
                }
                let word = &text[start..i];
                let paren_follows = i < bytes.len() && bytes[i] == b'(';
                let paren_tok = match word {
                    "select" => Some(Tok::SelectParen),
                    "aggregate" => Some(Tok::AggregateParen),
                    "range" => Some(Tok::RangeParen),
                    "zip" => Some(Tok::ZipParen),
                    "len" => Some(Tok::LenParen),
                    _ => None,
                };
                let tok = match (paren_tok, paren_follows) {
                    (Some(t), true) => {
                        i += 1;
                        t
                    }
                    _ => match word {
                        "def" => Tok::Def,
                        "return" => Tok::Return,
                        "for" => Tok::For,
                        "in" => Tok::In,
                        "if" => Tok::If,
                        "else" => Tok::Else,
                        "not" => Tok::Not,
                        "and" => Tok::And,
                        "or" => Tok::Or,
                        "load" => Tok::Load,
                        "draw" => Tok::Draw,
                        "round" => Tok::Round,
                        "indicator" => Tok::Indicator,
                        _ => Tok::Ident(word.to_string()),
                    },
                };
                toks.push(Token { tok, span: sp(start, i) });
            }
            _ => {
                let two = if i + 1 < bytes.len() { &bytes[i..i + 2] } else { &bytes[i..i + 1] };
                let (tok, len) = match two {
                    b"==" => (Some(Tok::EqEq), 2),
                    b"!=" => (Some(Tok::NotEq), 2),
                    b"<=" => (Some(Tok::Le), 2),
                    b">=" => (Some(Tok::Ge), 2),
                    _ => (
                        match c {
                            b'(' => Some(Tok::LParen),
                            b')' => Some(Tok::RParen),
                            b'[' => Some(Tok::LBracket),
                            b']' => Some(Tok::RBracket),
                            b'{' => Some(Tok::LBrace),
                            b'}' => Some(Tok::RBrace),
                            b',' => Some(Tok::Comma),
                            b';' => Some(Tok::Semi),
                            b':' => Some(Tok::Colon),
                            b'=' => Some(Tok::Assign),
                            b'+' => Some(Tok::Plus),
                            b'-' => Some(Tok::Minus),
                            b'*' => Some(Tok::Star),
                            b'/' => Some(Tok::Slash),
                            b'%' => Some(Tok::Percent),
                            b'^' => Some(Tok::Caret),
                            b'<' => Some(Tok::Lt),
                            b'>' => Some(Tok::Gt),
                            _ => None,
                        },
                        1,
                    ),
                };
                // Another language's spelling (helper ed25: `&&` was two errors, `'a'` two, `!`
                // no hint): one error naming RASP's word, and the token it means, so the rest of
                // the line parses.
                // (`+=` and `**` start with an operator of their own.)
                let foreign = if tok.is_none() || matches!(c, b'+' | b'-' | b'*' | b'/' | b'%' | b'^') { other_language(text, start) } else { None };
                match (tok, foreign) {
                    (_, Some((len, tok, msg, label))) => {
                        i = start + len;
                        errs.push(Diagnostic::error("lex::other-language", msg, sp(start, i)).with_label(label));
                        toks.push(Token { tok, span: sp(start, i) });
                    }
                    (Some(t), None) => {
                        toks.push(Token { tok: t, span: sp(start, start + len) });
                        i += len;
                    }
                    (None, None) => {
                        // skip one whole UTF-8 character
                        let ch = text[start..].chars().next().unwrap_or('\u{fffd}');
                        i += ch.len_utf8().max(1);
                        while i < bytes.len() && !text.is_char_boundary(i) {
                            i += 1;
                        }
                        let mut d = Diagnostic::error("lex::bad-char", format!("unexpected character `{}`", ch.escape_debug()), sp(start, i)).with_label("not part of any RASP token");
                        // Typographic look-alikes of RASP's operators and quotes (helper w31:
                        // `≥` got no hint), as a word processor or a paper writes them.
                        let ascii = match ch {
                            '≥' => Some(">="),
                            '≤' => Some("<="),
                            '≠' => Some("!="),
                            '×' | '·' | '∗' => Some("*"),
                            '÷' => Some("/"),
                            '−' | '–' | '—' => Some("-"),
                            '“' | '”' | '„' => Some("\""),
                            '‘' | '’' => Some("'"),
                            '¬' => Some("not"),
                            '∧' => Some("and"),
                            '∨' => Some("or"),
                            _ => None,
                        };
                        if let Some(a) = ascii {
                            d = d.with_note(format!("did you mean `{a}`?"));
                        }
                        errs.push(d);
                    }
                }
            }
        }
    }
    // The end of the file is placed just after its last text, not on the empty line a final
    // newline starts (helper t22: "expected `)`" pointed at line 2 of a one-line program).
    let end = text.trim_end().len();
    toks.push(Token { tok: Tok::Eof, span: sp(end, end) });
    (toks, errs)
}

/// A name with letters outside ASCII at byte `start` (`épaisseur`, `naïve`): one error for the
/// name, at its first use, not one per character and use (helper ed25); it is read as a name so
/// that the rest parses. Returns where the name ends.
fn non_ascii_name(file: FileId, text: &str, start: usize, reported: &mut std::collections::HashSet<String>, errs: &mut Vec<Diagnostic>, toks: &mut Vec<Token>) -> usize {
    let len: usize = text[start..].chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').map(char::len_utf8).sum();
    let end = start + len;
    let word = &text[start..end];
    if reported.insert(word.to_string()) {
        errs.push(
            Diagnostic::error("lex::non-ascii-name", format!("`{word}`: RASP names are ASCII"), Span::new(file, start, end))
                .with_label("a name with letters outside ASCII")
                .with_note("a name is ASCII letters, digits and `_` (as in the reference's grammar): rename it, e.g. without accents"),
        );
    }
    toks.push(Token { tok: Tok::Ident(word.to_string()), span: Span::new(file, start, end) });
    end
}

/// Whether `rest` starts a name: a letter (of any script) or `_`.
fn is_word_start(rest: &str) -> bool {
    rest.chars().next().is_some_and(|ch| ch.is_alphabetic() || ch == '_')
}

/// A spelling from another language at byte `at` of `text` that RASP writes another way: its
/// length in bytes, the RASP token it means, the message and the label.
fn other_language(text: &str, at: usize) -> Option<(usize, Tok, String, String)> {
    let rest = &text[at..];
    let word = |len: usize, tok: Tok, theirs: &str, ours: &str| Some((len, tok, format!("`{theirs}` is not RASP: write `{ours}`"), format!("write `{ours}`")));
    // Compound assignment: RASP assigns with `=` only (helper ed25: "expected an expression,
    // found `=`"). Read as `=`, so `x += 1` goes on as `x = 1`, already reported.
    for op in ["+=", "-=", "*=", "/=", "%=", "^="] {
        if rest.starts_with(op) {
            let bare = &op[..1];
            return Some((2, Tok::Assign, format!("`{op}` is not RASP: write `x = x {bare} ...`"), format!("RASP assigns with `=` only: `x = x {bare} ...`")));
        }
    }
    if rest.starts_with("**") {
        return word(2, Tok::Caret, "**", "^");
    }
    // A string in typographic quotes, as a word processor or a paper prints it (review rv31b:
    // `“a”` was an error per quote): one error, and the string it means.
    for (open, close) in [('“', '”'), ('‘', '’'), ('„', '“')] {
        if let Some(body) = rest.strip_prefix(open)
            && let Some(end) = body.find(close)
            && !body[..end].contains('\n')
        {
            let inner = &body[..end];
            let len = open.len_utf8() + end + close.len_utf8();
            return Some((len, Tok::Str(inner.to_string()), format!("typographic quotes are not RASP: write `\"{inner}\"`"), format!("write `\"{inner}\"`")));
        }
    }
    if rest.starts_with('?') {
        // C's `c ? a : b`: RASP's (and Python's) conditional is `a if c else b`.
        return Some((1, Tok::If, "`c ? a : b` is not RASP: write `a if c else b`".to_string(), "write `a if c else b`".to_string()));
    }
    if rest.starts_with("&&") {
        return word(2, Tok::And, "&&", "and");
    }
    if rest.starts_with("||") {
        return word(2, Tok::Or, "||", "or");
    }
    if rest.starts_with('&') {
        return word(1, Tok::And, "&", "and");
    }
    if rest.starts_with('|') {
        return word(1, Tok::Or, "|", "or");
    }
    if rest.starts_with('!') {
        return word(1, Tok::Not, "!", "not");
    }
    // A single-quoted string on one line: RASP's strings are in double quotes.
    if let Some(body) = rest.strip_prefix('\'')
        && let Some(end) = body.find(['\'', '\n'])
        && body[end..].starts_with('\'')
        && !body[..end].contains('"')
    {
        let inner = &body[..end];
        return Some((end + 2, Tok::Str(inner.to_string()), "RASP writes strings in double quotes".to_string(), format!("write \"{inner}\"")));
    }
    None
}
