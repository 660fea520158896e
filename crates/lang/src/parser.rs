//! Parser: tokens -> [`Program`] (AST with spans).
//!
//! A precedence-climbing parser for the reference grammar. Precedence, loosest first:
//! `in` < `if/else` < `and`/`or` < comparisons < `+ -` < `%` < `* /` < `^` < unary `not - +`
//! < postfix indexing and calls. Binary operators are left-associative (as in the reference,
//! whose ANTLR grammar makes `a if c else b if d else e` mean `(a if c else b) if d else e`).
//!
//! Errors are collected, not thrown: after an error the parser skips to the next `;` or `}`
//! and carries on, so one run reports every error it can recover from.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::lexer::{lex, Tok, Token};
use crate::span::{FileId, Span};
use std::rc::Rc;

const PREC_IN: u8 = 1;
const PREC_TERNARY: u8 = 2;
const PREC_ANDOR: u8 = 3;
const PREC_CMP: u8 = 4;
const PREC_ADD: u8 = 5;
const PREC_MOD: u8 = 6;
const PREC_MUL: u8 = 7;
const PREC_POW: u8 = 8;
const PREC_UNARY: u8 = 9;

/// Deepest expression or block nesting accepted; deeper input is reported, never overflows.
pub const MAX_NESTING: usize = 100;
/// Most operators (binary, indexing, calls) one expression may chain at one level: a chain
/// `a + b + c + ...` nests its tree as deeply as it is long, and evaluation recurses over it.
pub const MAX_CHAIN: usize = 10_000;

/// Marker: an error was recorded and the caller should recover.
struct Fail;
type PResult<T> = Result<T, Fail>;

/// Parses one file. Returns the statements that parsed and every diagnostic found.
pub fn parse(file: FileId, text: &str) -> (Program, Vec<Diagnostic>) {
    let (tokens, mut errs) = lex(file, text);
    let mut p = Parser { toks: tokens, pos: 0, errs: vec![], text, depth: 0, stray_semis: vec![] };
    let stmts = p.statements(true);
    // A line with a lexical error (a stray `!`, `1e5`) gets only that error: what the parser
    // then says about the line ("expected `;`") follows from it and misleads.
    let lines = crate::span::LineBreaks::new(text);
    let line_of = |d: &Diagnostic| d.primary_span().map(|s| lines.line_of(s.start as usize));
    let bad_lines: std::collections::HashSet<usize> = errs.iter().filter_map(line_of).collect();
    p.errs.retain(|d| line_of(d).is_none_or(|l| !bad_lines.contains(&l)));
    errs.append(&mut p.errs);
    errs.sort_by_key(|d| d.primary_span().map(|s| s.start));
    (Program { stmts, stray_semis: p.stray_semis }, errs)
}

struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    errs: Vec<Diagnostic>,
    text: &'a str,
    depth: usize,
    /// See [`Program::stray_semis`].
    stray_semis: Vec<Span>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos].span
    }
    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }
    fn ident_is(&self, k: usize, word: &str) -> bool {
        matches!(self.peek_at(k), Tok::Ident(s) if s == word)
    }

    /// The innermost bracket still open before the current token, within this statement (a
    /// `;` or a brace at depth 0 ends the search): its token and the token before it.
    fn open_bracket(&self) -> Option<usize> {
        let mut depth = 0usize;
        for i in (0..self.pos).rev() {
            match self.toks[i].tok {
                Tok::RParen | Tok::RBracket => depth += 1,
                Tok::LParen | Tok::LBracket | Tok::SelectParen | Tok::AggregateParen | Tok::RangeParen | Tok::ZipParen | Tok::LenParen => {
                    if depth == 0 {
                        return Some(i);
                    }
                    depth -= 1;
                }
                Tok::Semi | Tok::LBrace | Tok::RBrace if depth == 0 => return None,
                _ => {}
            }
        }
        None
    }

    /// `select(a, b)`, `aggregate(s, v, 0, 1)`: the built-in form `name`, opened at `open`, given
    /// `given` arguments where it takes `takes` (helper w29: these read as an unclosed bracket).
    fn arity(&mut self, open: Span, name: &str, takes: &str, given: &str) -> Fail {
        let at = self.span();
        let d = Diagnostic::error("parse::arity", format!("`{name}` takes {takes}; this call has {given}"), open.to(at))
            .with_label(format!("{given} argument{}", if given == "1" { "" } else { "s" }));
        let d = if name == "select" && given == "2" { d.with_note("the third argument compares each key with the query: `select(keys, queries, ==)`".to_string()) } else { d };
        self.errs.push(d);
        Fail
    }

    fn error_expected(&mut self, what: &str) -> Fail {
        let found = self.peek().clone();
        let mut span = self.span();
        // A missing `)` or `]` is found at the next line's first token (helper ed25: "expected
        // `)`, found identifier `prog`" on the line after the mistake): say it where it is
        // missing, just after the last token, and show the bracket left open.
        let closing = what.contains("`)`") || what.contains("`]`") || found == Tok::Eof;
        let open = self.open_bracket();
        let opener = open.filter(|_| closing);
        let after_newline = self.pos > 0 && self.text.get(self.prev_span().end as usize..span.start as usize).is_some_and(|g| g.contains('\n'));
        let moved = opener.is_some() && after_newline && found != Tok::Eof;
        if moved {
            let prev = self.prev_span();
            span = Span { file: prev.file, start: prev.end, end: prev.end };
        }
        let mut d = Diagnostic::error("parse::expected", format!("expected {what}, found {}", found.describe()), span).with_label(format!("expected {what}"));
        if moved {
            d = d.with_secondary(self.span(), format!("{} comes next", found.describe()));
        }
        if let Some(i) = opener {
            let t = &self.toks[i];
            let text = self.text.get(t.span.start as usize..t.span.end as usize).unwrap_or("(");
            d = d.with_secondary(t.span, format!("this `{text}` is not closed"));
        }
        // `selct(a, b, ==)`: a comparison is an argument only of `select` (helper ed25: the
        // error named `==`, never the misspelt name).
        if matches!(found, Tok::EqEq | Tok::NotEq | Tok::Lt | Tok::Le | Tok::Gt | Tok::Ge)
            && let Some(i) = open
            && self.toks[i].tok == Tok::LParen
            && let Some(Tok::Ident(w)) = i.checked_sub(1).map(|j| &self.toks[j].tok)
        {
            d = d.with_note(format!("only `select(keys, queries, {})` takes a comparison as an argument; `{w}` is not `select`", found.text()));
        }
        if let Tok::Ident(w) = &found
            && ["select", "aggregate", "range", "zip", "len"].contains(&w.as_str())
        {
            d = d.with_note(format!("write `{w}(` with no space before the parenthesis"));
        }
        // `// comment` (C, JavaScript) at the start of a line (helper ed25: no mention of `#`).
        let line_start = self.pos == 0 || self.text.get(self.prev_span().end as usize..span.start as usize).is_some_and(|g| g.contains('\n'));
        if found == Tok::Slash && self.peek_at(1) == &Tok::Slash && line_start {
            d = d.with_note("RASP comments start with `#` (`# ...`), not `//`".to_string());
        }
        // `a // b` (Python's floor division) reads as `a /` followed by an expression starting
        // with `/` (helper a6).
        if found == Tok::Slash && self.pos > 0 && self.toks.get(self.pos - 1).is_some_and(|t| t.tok == Tok::Slash) {
            d = d.with_note("RASP has no `//`: for a floor division of non-negative integers write `(a - a % b) / b`, or `round(a / b)` for the nearest integer".to_string());
        }
        // `aggregate(s, v, default=0)`, as Python (and a signature in prose) writes it (helper a21).
        // Only in a call's arguments: after `f(` or `,` (not `(x = 2)` or `if (x = 1)`, typos
        // of `==`: review rv21).
        let tok_at = |back: usize| self.pos.checked_sub(back).and_then(|i| self.toks.get(i)).map(|t| &t.tok);
        let in_call = match tok_at(2) {
            Some(Tok::Comma | Tok::SelectParen | Tok::AggregateParen | Tok::RangeParen | Tok::ZipParen | Tok::LenParen) => true,
            Some(Tok::LParen) => matches!(tok_at(3), Some(Tok::Ident(_) | Tok::RParen)),
            _ => false,
        };
        if found == Tok::Assign && matches!(tok_at(1), Some(Tok::Ident(_))) && in_call && what.contains("`)`") {
            d = d.with_note("RASP has no keyword arguments: pass every argument by position (a default of 0: `aggregate(sel, values, 0)`)".to_string());
        }
        // `if c { ... }` / `if c:` as a statement (helper w31: "expected an expression, found
        // `if`" said nothing of the conditional expression).
        if found == Tok::If && what == "an expression" && line_start {
            d = d.with_note("RASP has no `if` statement: choose a value with `a if c else b` (position by position on s-ops: `prog = tokens if length > 3 else \"-\";`)".to_string());
        }
        // `[f(x) for x in xs if c]`: the `if` reads as the start of `a if c else b`.
        if what == "`else`" && found == Tok::RBracket {
            d = d.with_note("a list comprehension takes no `if` filter in RASP: choose the value instead (`[x if c else 0 for x in xs]`)".to_string());
        }
        self.errs.push(d);
        Fail
    }

    /// Expects `t`; on failure reports it, pointing just after the previous token for `;`.
    /// `def f(x):` or `for x in xs:`: Python's colon where RASP opens a block with `{` (helper
    /// ed25: "expected `{`, found `:`" said nothing of braces).
    fn python_colon(&mut self, keyword: &str) -> PResult<()> {
        if self.peek() != &Tok::Colon {
            return Ok(());
        }
        let s = self.span();
        let example = if keyword == "def" { "def f(x) { y = x + 1; return y; }" } else { "for i in range(3) { ... }" };
        self.errs.push(
            Diagnostic::error("parse::python-block", format!("expected `{{`, found `:`: a `{keyword}` body is in braces"), s)
                .with_label("write `{` here, and `}` after the body")
                .with_note(format!("RASP's blocks are in braces, not opened by `:` and indentation: `{example}`")),
        );
        Err(Fail)
    }

    fn expect_tok(&mut self, t: Tok, what: &str) -> PResult<Span> {
        if self.peek() == &t {
            return Ok(self.bump().span);
        }
        // `prog = (tokens));`: a closing bracket where the statement could end opens nothing
        // (helper ed25: "expected `;`, found `)`").
        if t == Tok::Semi && matches!(self.peek(), Tok::RParen | Tok::RBracket) {
            let s = self.span();
            let close = if self.peek() == &Tok::RParen { "`)`" } else { "`]`" };
            let open = if self.peek() == &Tok::RParen { "`(`" } else { "`[`" };
            self.errs.push(Diagnostic::error("parse::unmatched", format!("unmatched {close}"), s).with_label(format!("no {open} opens this")));
            return Err(Fail);
        }
        if t == Tok::Semi && self.pos > 0 {
            let prev = self.prev_span();
            let at = Span { file: prev.file, start: prev.end, end: prev.end };
            let found = self.peek().describe();
            // On the statement's own line the next token does not start a statement (helper
            // ed25: `prog = tokens = "a"` said "the next statement starts here" at the `=`).
            let same_line = self.text.get(prev.end as usize..self.span().start as usize).is_some_and(|g| !g.contains('\n'));
            let next = match self.peek() {
                Tok::RBrace => "the block ends here".to_string(),
                Tok::Eof => "the file ends here".to_string(),
                _ if same_line => format!("{found} cannot continue the statement here"),
                _ => "the next statement starts here".to_string(),
            };
            let mut d = Diagnostic::error("parse::missing-semicolon", format!("expected `;`, found {found}"), at).with_label("expected `;` here").with_secondary(self.span(), next);
            // `import rasp` / `from x import y`: Python's, not RASP's.
            let first = |w: &str| {
                self.pos >= 1
                    && matches!(&self.toks[self.pos - 1].tok, Tok::Ident(x) if x == w)
                    && (self.pos == 1 || matches!(self.toks[self.pos - 2].tok, Tok::Semi | Tok::RBrace | Tok::LBrace))
            };
            if first("import") || first("from") {
                d = d.with_note("RASP has no `import`: `load \"file.rasp\";` runs another RASP file; the built-ins need nothing".to_string());
            }
            self.errs.push(d);
            return Err(Fail);
        }
        Err(self.error_expected(what))
    }

    /// Skip to just after the next `;` (or to a `}` / end of file, not consumed).
    fn synchronize(&mut self) {
        let mut depth = 0i32;
        loop {
            match self.peek() {
                Tok::Eof => return,
                Tok::Semi if depth <= 0 => {
                    self.bump();
                    return;
                }
                Tok::RBrace if depth <= 0 => return,
                Tok::LBrace | Tok::LParen | Tok::LBracket | Tok::SelectParen | Tok::AggregateParen | Tok::RangeParen | Tok::ZipParen | Tok::LenParen => depth += 1,
                Tok::RParen | Tok::RBracket | Tok::RBrace => depth -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    fn statements(&mut self, top: bool) -> Vec<Stmt> {
        let mut out = vec![];
        loop {
            match self.peek() {
                Tok::Eof => break,
                Tok::RBrace if !top => break,
                Tok::Return if !top => break,
                Tok::RBrace => {
                    let s = self.span();
                    self.errs.push(Diagnostic::error("parse::unmatched", "unmatched `}`", s).with_label("no `{` opens this"));
                    self.bump();
                    continue;
                }
                _ => {}
            }
            let before = self.pos;
            match self.statement() {
                Ok(Some(s)) => out.push(s),
                Ok(None) => {}
                Err(Fail) => {
                    self.synchronize();
                    if self.pos == before && !matches!(self.peek(), Tok::Eof | Tok::RBrace) {
                        self.bump();
                    }
                }
            }
        }
        out
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            let s = self.span();
            self.errs.push(Diagnostic::error("parse::too-deep", "program is nested too deeply", s).with_label(format!("more than {MAX_NESTING} levels of nesting here")));
            self.depth -= 1;
            // Skip everything: deep nesting cannot be recovered from locally.
            while self.peek() != &Tok::Eof {
                self.bump();
            }
            return Err(Fail);
        }
        Ok(())
    }

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.enter()?;
        let r = self.statements(false);
        self.depth -= 1;
        Ok(r)
    }

    fn optional_semi(&mut self) {
        self.eat(&Tok::Semi);
    }

    /// `s-op` or `selector` as a REPL qualifier, if present at offset k; returns its token count.
    fn subset_len(&self, k: usize) -> usize {
        if self.ident_is(k, "s") && self.peek_at(k + 1) == &Tok::Minus && self.ident_is(k + 2, "op") {
            3
        } else if self.ident_is(k, "selector") {
            1
        } else {
            0
        }
    }

    fn repl_statement(&mut self) -> PResult<Option<Stmt>> {
        let start = self.span();
        let on_off = |p: &Parser, k: usize| p.ident_is(k, "on") || p.ident_is(k, "off");
        // set [s-op|selector] example EXPR
        if self.ident_is(0, "set") || self.ident_is(0, "show") {
            let set = self.ident_is(0, "set");
            let q = self.subset_len(1);
            if self.ident_is(1 + q, "example") {
                for _ in 0..(2 + q) {
                    self.bump();
                }
                // `set example` with nothing after it on its line: say so there, instead of
                // reading the next line as its value.
                let cur = self.span();
                let gap = self.text.get(self.prev_span().end as usize..cur.start as usize).unwrap_or("");
                if set && (matches!(self.peek(), Tok::Semi | Tok::Eof) || gap.contains('\n')) {
                    let at = self.prev_span();
                    self.errs.push(
                        Diagnostic::error("parse::expected", "`set example` needs a value: the example input, e.g. `set example \"hello\"`", at)
                            .with_label("expected a value after this"),
                    );
                    return Err(Fail);
                }
                let arg = if set { Some(self.expr(PREC_IN)?) } else { None };
                self.optional_semi();
                let kind = if set { ReplKind::SetExample } else { ReplKind::ShowExample };
                return Ok(Some(Stmt { kind: StmtKind::Repl { kind, arg }, span: start.to(self.prev_span()) }));
            }
        }
        if self.ident_is(0, "full") && self.ident_is(1, "seq") && self.ident_is(2, "display") && on_off(self, 3) {
            for _ in 0..4 {
                self.bump();
            }
            self.optional_semi();
            return Ok(Some(Stmt { kind: StmtKind::Repl { kind: ReplKind::FullSeqDisplay, arg: None }, span: start.to(self.prev_span()) }));
        }
        let q = self.subset_len(0);
        if self.ident_is(q, "examples") && on_off(self, q + 1) {
            for _ in 0..(q + 2) {
                self.bump();
            }
            self.optional_semi();
            return Ok(Some(Stmt { kind: StmtKind::Repl { kind: ReplKind::ToggleExamples, arg: None }, span: start.to(self.prev_span()) }));
        }
        if self.ident_is(0, "exit") || self.ident_is(0, "quit") {
            let call = self.peek_at(1) == &Tok::LParen && self.peek_at(2) == &Tok::RParen;
            let bare = matches!(self.peek_at(1), Tok::Semi | Tok::Eof);
            let newline = {
                let cur = self.toks[self.pos].span;
                let next = self.toks[(self.pos + 1).min(self.toks.len() - 1)].span;
                self.text.get(cur.end as usize..next.start as usize).is_some_and(|g| g.contains('\n'))
            };
            if call || bare || newline {
                self.bump();
                if call {
                    self.bump();
                    self.bump();
                }
                self.optional_semi();
                return Ok(Some(Stmt { kind: StmtKind::Repl { kind: ReplKind::Exit, arg: None }, span: start.to(self.prev_span()) }));
            }
        }
        Ok(None)
    }

    fn statement(&mut self) -> PResult<Option<Stmt>> {
        let start = self.span();
        if let Some(s) = self.repl_statement()? {
            return Ok(Some(s));
        }
        match self.peek().clone() {
            Tok::Semi => {
                self.stray_semis.push(start);
                self.bump();
                Ok(None)
            }
            Tok::Def => {
                self.bump();
                if let Tok::SelectParen | Tok::AggregateParen | Tok::RangeParen | Tok::ZipParen | Tok::LenParen = self.peek() {
                    // `def select(...)`: a built-in's name (helper ed25: "expected a name, found
                    // `select(`").
                    let s = self.span();
                    let word = self.text.get(s.start as usize..s.end as usize - 1).unwrap_or("select").to_string();
                    self.errs.push(
                        Diagnostic::error("parse::builtin-name", format!("`{word}` is a built-in: a function cannot be named `{word}`"), Span { end: s.end - 1, ..s })
                            .with_label("a built-in's name")
                            .with_note(format!("choose another name, e.g. `my_{word}`")),
                    );
                    return Err(Fail);
                }
                let name = self.ident()?;
                self.expect_tok(Tok::LParen, "`(`")?;
                let params = if self.peek() == &Tok::RParen { vec![] } else { self.idents()? };
                self.expect_tok(Tok::RParen, "`)`")?;
                self.python_colon("def")?;
                let lbrace = self.expect_tok(Tok::LBrace, "`{`")?;
                let errs_before = self.errs.len();
                let body = self.block()?;
                if self.peek() != &Tok::Return {
                    if self.peek() == &Tok::RBrace {
                        // (After an error in the body its recovery may have taken the `return`:
                        // review rv31b, an `if` statement before `return 0;`.)
                        if self.errs.len() > errs_before {
                            self.bump();
                            return Ok(None);
                        }
                        let s = self.span();
                        self.errs.push(
                            Diagnostic::error("parse::missing-return", format!("function `{}` has no return statement", name.name), s)
                                .with_label("expected `return ...;` before this `}`")
                                .with_secondary(name.span, "function defined here")
                                .with_note("every RASP function ends with a return statement"),
                        );
                        self.bump();
                        return Ok(None);
                    }
                    return Err(self.error_expected("`return`"));
                }
                let ret_start = self.bump().span;
                let ret = self.exprs()?;
                if self.expect_tok(Tok::Semi, "`;`").is_err() {
                    // `return x }`: the `;` is reported; the `}` still closes the function (else
                    // it would be reported again, as unmatched).
                    if self.peek() == &Tok::RBrace {
                        self.bump();
                        return Ok(None);
                    }
                    return Err(Fail);
                }
                let ret_span = ret_start.to(self.prev_span());
                if self.peek() != &Tok::RBrace {
                    // Either a statement after `return` or a `}` left out (helper ed25: the
                    // `}` was never mentioned): say both, and where the body opened.
                    let s = self.span();
                    let found = self.peek().describe();
                    self.errs.push(
                        Diagnostic::error("parse::after-return", format!("expected `}}` after the return statement of `{}`, found {found}", name.name), s)
                            .with_label("a function body ends with its return statement: is a `}` missing?")
                            .with_secondary(ret_span, "the return statement")
                            .with_secondary(lbrace, format!("`{}`'s body opens here", name.name)),
                    );
                    return Err(Fail);
                }
                self.bump();
                let span = start.to(self.prev_span());
                Ok(Some(Stmt { kind: StmtKind::Def(Rc::new(FuncDef { name, params, body, ret, ret_span })), span }))
            }
            Tok::For => {
                self.bump();
                let vars = self.idents()?;
                self.expect_tok(Tok::In, "`in`")?;
                let iter = self.expr(PREC_IN)?;
                self.python_colon("for")?;
                self.expect_tok(Tok::LBrace, "`{`")?;
                let lbrace_end = self.prev_span().end as usize;
                let errs_before = self.errs.len();
                let mut body = self.block()?;
                // A `return` in the loop is reported and passed over, and the loop read on to its
                // `}`: failing there ended the function at the loop's `}` and reported the code
                // after it (helper a13: three more errors, all about correct code).
                while self.peek() == &Tok::Return {
                    let s = self.span();
                    self.errs.push(Diagnostic::error("parse::return-in-loop", "`return` inside a `for` loop", s).with_label("only a function body may end with `return`"));
                    self.bump();
                    self.exprs()?;
                    self.expect_tok(Tok::Semi, "`;`")?;
                    body.extend(self.block()?);
                }
                self.expect_tok(Tok::RBrace, "`}`")?;
                // A body whose statements all failed to parse is not empty: its errors say why.
                // A body of comments only is the reference's too (its grammar takes a comment
                // as a statement list; helper a13): a loop that does nothing.
                let inside = self.text.get(lbrace_end..(self.prev_span().start as usize).max(lbrace_end)).unwrap_or("");
                if body.is_empty() && self.errs.len() == errs_before && !inside.contains('#') {
                    let s = start.to(self.prev_span());
                    self.errs.push(Diagnostic::error("parse::empty-loop", "`for` loop with an empty body", s).with_label("the body needs at least one statement"));
                    return Err(Fail);
                }
                Ok(Some(Stmt { kind: StmtKind::For { vars, iter, body: Rc::new(body) }, span: start.to(self.prev_span()) }))
            }
            Tok::Load => {
                self.bump();
                let t = self.bump();
                let Tok::Str(path) = t.tok else {
                    self.pos -= 1;
                    return Err(self.error_expected("a file name in quotes"));
                };
                self.expect_tok(Tok::Semi, "`;`")?;
                Ok(Some(Stmt { kind: StmtKind::Load { path, path_span: t.span }, span: start.to(self.prev_span()) }))
            }
            Tok::Draw => {
                self.bump();
                self.expect_tok(Tok::LParen, "`(`")?;
                let target = self.expr(PREC_IN)?;
                let input = if self.eat(&Tok::Comma) { Some(self.expr(PREC_IN)?) } else { None };
                self.expect_tok(Tok::RParen, "`)`")?;
                self.expect_tok(Tok::Semi, "`;`")?;
                Ok(Some(Stmt { kind: StmtKind::Draw { target, input }, span: start.to(self.prev_span()) }))
            }
            Tok::Return => {
                let s = self.span();
                self.errs.push(Diagnostic::error("parse::stray-return", "`return` outside a function", s).with_label("only a function body may end with `return`"));
                Err(Fail)
            }
            _ => {
                let exprs = self.exprs()?;
                if self.peek() == &Tok::Assign {
                    let eq = self.bump().span;
                    let mut targets = vec![];
                    let mut bad = false;
                    for e in &exprs {
                        match &e.kind {
                            ExprKind::Name(n) => targets.push(Ident { name: n.clone(), span: e.span }),
                            _ => {
                                self.errs.push(
                                    Diagnostic::error("parse::bad-target", "cannot assign to this expression", e.span)
                                        .with_label("only names can be assigned")
                                        .with_secondary(eq, "assignment here"),
                                );
                                bad = true;
                            }
                        }
                    }
                    let values = self.exprs()?;
                    self.expect_tok(Tok::Semi, "`;`")?;
                    if bad {
                        return Err(Fail);
                    }
                    return Ok(Some(Stmt { kind: StmtKind::Assign { targets, values }, span: start.to(self.prev_span()) }));
                }
                if exprs.len() > 1 {
                    let s = exprs[1].span;
                    self.errs.push(
                        Diagnostic::error("parse::expr-list", "a list of expressions is not a statement", s)
                            .with_label("unexpected second expression")
                            .with_note("did you mean an assignment `a, b = ...;`?"),
                    );
                    self.synchronize();
                    return Err(Fail);
                }
                self.expect_tok(Tok::Semi, "`;`")?;
                // exprs() parses at least one expression or fails.
                let Some(e) = exprs.into_iter().next() else { return Err(Fail) };
                Ok(Some(Stmt { span: start.to(self.prev_span()), kind: StmtKind::Expr(e) }))
            }
        }
    }

    fn ident(&mut self) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let span = self.bump().span;
                Ok(Ident { name, span })
            }
            _ => Err(self.error_expected("a name")),
        }
    }

    fn idents(&mut self) -> PResult<Vec<Ident>> {
        let mut v = vec![self.ident()?];
        while self.eat(&Tok::Comma) {
            v.push(self.ident()?);
        }
        Ok(v)
    }

    fn exprs(&mut self) -> PResult<Vec<Expr>> {
        let mut v = vec![self.expr(PREC_IN)?];
        while self.eat(&Tok::Comma) {
            v.push(self.expr(PREC_IN)?);
        }
        Ok(v)
    }

    fn args_until(&mut self, close: Tok, what: &str) -> PResult<Vec<Expr>> {
        if self.eat(&close) {
            return Ok(vec![]);
        }
        let v = self.exprs()?;
        self.expect_tok(close, what)?;
        Ok(v)
    }

    fn expr(&mut self, min: u8) -> PResult<Expr> {
        self.enter()?;
        let r = self.expr_inner(min);
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.prefix()?;
        let mut chained = 0usize;
        loop {
            chained += 1;
            if chained > MAX_CHAIN {
                let s = self.span();
                self.errs.push(
                    Diagnostic::error("parse::too-long", "expression is too long", lhs.span.to(s))
                        .with_label(format!("more than {MAX_CHAIN} operators chained here"))
                        .with_note("build long sums with a `for` loop or a function instead"),
                );
                while self.peek() != &Tok::Eof {
                    self.bump();
                }
                return Err(Fail);
            }
            let tok = self.peek().clone();
            let bin = match tok {
                Tok::Caret => Some((BinOp::Pow, PREC_POW)),
                Tok::Star => Some((BinOp::Mul, PREC_MUL)),
                Tok::Slash => Some((BinOp::Div, PREC_MUL)),
                Tok::Percent => Some((BinOp::Mod, PREC_MOD)),
                Tok::Plus => Some((BinOp::Add, PREC_ADD)),
                Tok::Minus => Some((BinOp::Sub, PREC_ADD)),
                Tok::EqEq => Some((BinOp::Eq, PREC_CMP)),
                Tok::Le => Some((BinOp::Le, PREC_CMP)),
                Tok::Ge => Some((BinOp::Ge, PREC_CMP)),
                Tok::Lt => Some((BinOp::Lt, PREC_CMP)),
                Tok::Gt => Some((BinOp::Gt, PREC_CMP)),
                Tok::And => Some((BinOp::And, PREC_ANDOR)),
                Tok::Or => Some((BinOp::Or, PREC_ANDOR)),
                _ => None,
            };
            if let Some((op, prec)) = bin {
                if prec < min {
                    break;
                }
                self.bump();
                let rhs = self.expr(prec + 1)?;
                let span = lhs.span.to(rhs.span);
                lhs = Expr { kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span };
                continue;
            }
            match tok {
                Tok::NotEq => {
                    let s = self.span();
                    self.errs.push(
                        Diagnostic::error("parse::not-equal", "`!=` is only allowed as the comparison of a `select`", s)
                            .with_label("not an operator here")
                            .with_note("write `not (a == b)` instead"),
                    );
                    return Err(Fail);
                }
                Tok::LBracket => {
                    self.bump();
                    let index = self.expr(PREC_IN)?;
                    self.expect_tok(Tok::RBracket, "`]`")?;
                    let span = lhs.span.to(self.prev_span());
                    lhs = Expr { kind: ExprKind::Index { target: Box::new(lhs), index: Box::new(index) }, span };
                }
                Tok::LParen => {
                    self.bump();
                    let args = self.args_until(Tok::RParen, "`)`")?;
                    let span = lhs.span.to(self.prev_span());
                    lhs = Expr { kind: ExprKind::Call { callee: Box::new(lhs), args }, span };
                }
                Tok::If if PREC_TERNARY >= min => {
                    self.bump();
                    let cond = self.expr(PREC_IN)?;
                    self.expect_tok(Tok::Else, "`else`")?;
                    let otherwise = self.expr(PREC_TERNARY + 1)?;
                    let span = lhs.span.to(otherwise.span);
                    lhs = Expr { kind: ExprKind::Ternary { then: Box::new(lhs), cond: Box::new(cond), otherwise: Box::new(otherwise) }, span };
                }
                Tok::In if PREC_IN >= min => {
                    self.bump();
                    let container = self.expr(PREC_IN + 1)?;
                    let span = lhs.span.to(container.span);
                    lhs = Expr { kind: ExprKind::In { item: Box::new(lhs), container: Box::new(container) }, span };
                }
                _ => break,
            }
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> PResult<Expr> {
        let start = self.span();
        let tok = self.peek().clone();
        let done = |p: &Parser, kind: ExprKind| Ok(Expr { kind, span: start.to(p.prev_span()) });
        match tok {
            Tok::Int(v) => {
                self.bump();
                done(self, ExprKind::Int(v))
            }
            Tok::Float(v) => {
                self.bump();
                done(self, ExprKind::Float(v))
            }
            Tok::Str(s) => {
                self.bump();
                done(self, ExprKind::Str(s))
            }
            Tok::Ident(n) if self.peek_at(1) == &Tok::LParen && ["select", "aggregate", "range", "zip", "len"].contains(&n.as_str()) => {
                // `select (` with a space: the reference lexer would not see `select(`. Report it,
                // then parse it as intended so later errors are still found.
                let paren = self.toks[self.pos + 1].span;
                self.errs.push(
                    Diagnostic::error("parse::space-before-paren", format!("`{n}` must be followed directly by `(`"), start.to(paren))
                        .with_label(format!("write `{n}(` with no space"))
                        .with_note(format!("`{n}(` is a single token in RASP")),
                );
                self.toks[self.pos + 1].tok = match n.as_str() {
                    "select" => Tok::SelectParen,
                    "aggregate" => Tok::AggregateParen,
                    "range" => Tok::RangeParen,
                    "zip" => Tok::ZipParen,
                    _ => Tok::LenParen,
                };
                self.bump();
                self.prefix()
            }
            Tok::Ident(n) if n == "lambda" && matches!(self.peek_at(1), Tok::Ident(_) | Tok::Colon) => {
                // Python's (and Tracr's) anonymous functions: RASP 0.1 has none.
                self.errs.push(
                    Diagnostic::error("parse::lambda", "RASP 0.1 has no `lambda`", start)
                        .with_label("a Python (Tracr) anonymous function")
                        .with_note("apply operators to s-ops directly (`tokens + 1`, `indices % 2 == 0`, `x if c else y`), or define a function with `def f(x) { return x + 1; }` and call it on the s-op"),
                );
                Err(Fail)
            }
            Tok::Ident(n)
                if (n == "numerical" || n == "categorical") && matches!(self.peek_at(1), Tok::AggregateParen | Tok::SelectParen | Tok::Ident(_) | Tok::Indicator | Tok::Round) =>
            {
                // The RASP paper's notation: RASP 0.1 has no such word (it tells numerical from
                // categorical by the values). Report it, then parse what follows so later
                // errors are still found.
                let d = if self.peek_at(1) == &Tok::AggregateParen {
                    Diagnostic::error("parse::paper-notation", format!("`{n} aggregate(...)` is the RASP paper's notation, not RASP 0.1's"), start)
                        .with_note("RASP 0.1 (the reference interpreter) and raspc write `aggregate(sel, values)`: where several keys are selected it averages them (numbers only), where one is it gives that value, of any type")
                } else {
                    let what = match self.peek_at(1) {
                        Tok::Ident(w) if w == "map" || w == "zipmap" => format!("`{n} {w}(...)`"),
                        _ => format!("`{n}` before an expression"),
                    };
                    Diagnostic::error("parse::paper-notation", format!("{what} is the RASP paper's notation, not RASP 0.1's"), start).with_note(
                        "RASP 0.1 (the reference interpreter) and raspc mark no s-op as numerical or categorical: an s-op is numerical when its values are numbers (`indices + 1`, an `aggregate` of numbers)",
                    )
                };
                self.errs.push(d.with_label(format!("remove `{n}`")));
                self.bump();
                self.prefix()
            }
            Tok::Ident(n) => {
                self.bump();
                done(self, ExprKind::Name(n))
            }
            Tok::LParen => {
                self.bump();
                let e = self.expr(PREC_IN)?;
                self.expect_tok(Tok::RParen, "`)`")?;
                Ok(Expr { kind: e.kind, span: start.to(self.prev_span()) })
            }
            Tok::Not | Tok::Minus | Tok::Plus => {
                self.bump();
                let op = match tok {
                    Tok::Not => UnaryOp::Not,
                    Tok::Minus => UnaryOp::Neg,
                    _ => UnaryOp::Pos,
                };
                let operand = self.expr(PREC_UNARY)?;
                done(self, ExprKind::Unary { op, operand: Box::new(operand) })
            }
            Tok::Round | Tok::Indicator => {
                self.bump();
                self.expect_tok(Tok::LParen, "`(`")?;
                let operand = self.expr(PREC_IN)?;
                self.expect_tok(Tok::RParen, "`)`")?;
                let op = if tok == Tok::Round { UnaryOp::Round } else { UnaryOp::Indicator };
                done(self, ExprKind::Unary { op, operand: Box::new(operand) })
            }
            Tok::LBracket => {
                self.bump();
                if self.eat(&Tok::RBracket) {
                    return done(self, ExprKind::List(vec![]));
                }
                let first = self.expr(PREC_IN)?;
                if self.eat(&Tok::For) {
                    let vars = self.idents()?;
                    self.expect_tok(Tok::In, "`in`")?;
                    let iter = self.expr(PREC_IN)?;
                    self.expect_tok(Tok::RBracket, "`]`")?;
                    return done(self, ExprKind::ListComp { body: Box::new(first), vars, iter: Box::new(iter) });
                }
                let mut items = vec![first];
                while self.eat(&Tok::Comma) {
                    items.push(self.expr(PREC_IN)?);
                }
                self.expect_tok(Tok::RBracket, "`,` or `]`")?;
                done(self, ExprKind::List(items))
            }
            Tok::LBrace => {
                self.bump();
                if self.eat(&Tok::RBrace) {
                    return done(self, ExprKind::Dict(vec![]));
                }
                let k = self.expr(PREC_IN)?;
                self.expect_tok(Tok::Colon, "`:`")?;
                let v = self.expr(PREC_IN)?;
                if self.eat(&Tok::For) {
                    let vars = self.idents()?;
                    self.expect_tok(Tok::In, "`in`")?;
                    let iter = self.expr(PREC_IN)?;
                    self.expect_tok(Tok::RBrace, "`}`")?;
                    return done(self, ExprKind::DictComp { key: Box::new(k), value: Box::new(v), vars, iter: Box::new(iter) });
                }
                let mut items = vec![(k, v)];
                while self.eat(&Tok::Comma) {
                    let k = self.expr(PREC_IN)?;
                    self.expect_tok(Tok::Colon, "`:`")?;
                    let v = self.expr(PREC_IN)?;
                    items.push((k, v));
                }
                self.expect_tok(Tok::RBrace, "`,` or `}`")?;
                done(self, ExprKind::Dict(items))
            }
            Tok::SelectParen => {
                let open = self.span();
                let what = "3 arguments (keys, queries, comparison)";
                self.bump();
                let keys = self.expr(PREC_IN)?;
                if self.peek() == &Tok::RParen {
                    return Err(self.arity(open, "select", what, "1"));
                }
                self.expect_tok(Tok::Comma, "`,`")?;
                let queries = self.expr(PREC_IN)?;
                if self.peek() == &Tok::RParen {
                    return Err(self.arity(open, "select", what, "2"));
                }
                self.expect_tok(Tok::Comma, "`,`")?;
                let cmp = match self.peek() {
                    Tok::EqEq => Cmp::Eq,
                    Tok::NotEq => Cmp::Ne,
                    Tok::Lt => Cmp::Lt,
                    Tok::Le => Cmp::Le,
                    Tok::Gt => Cmp::Gt,
                    Tok::Ge => Cmp::Ge,
                    _ => {
                        // `=<`, `=>`, `=`, `<>`: the comparison meant, said (helper w30).
                        let meant = match (self.peek(), self.peek_at(1)) {
                            (Tok::Assign, Tok::Lt) => Some("<="),
                            (Tok::Assign, Tok::Gt) => Some(">="),
                            (Tok::Assign, _) => Some("=="),
                            (Tok::Lt, Tok::Gt) => Some("!="),
                            _ => None,
                        };
                        let e = self.error_expected("a comparison (`==`, `!=`, `<`, `<=`, `>` or `>=`)");
                        if let (Some(m), Some(d)) = (meant, self.errs.last_mut()) {
                            *d = d.clone().with_note(format!("did you mean `{m}`?"));
                        }
                        return Err(e);
                    }
                };
                self.bump();
                if self.peek() == &Tok::Comma {
                    return Err(self.arity(open, "select", what, "more than 3"));
                }
                self.expect_tok(Tok::RParen, "`)`")?;
                done(self, ExprKind::Select { keys: Box::new(keys), queries: Box::new(queries), cmp })
            }
            Tok::AggregateParen => {
                let open = self.span();
                let what = "2 or 3 arguments (selector, values, and optionally a default)";
                self.bump();
                let sel = self.expr(PREC_IN)?;
                if self.peek() == &Tok::RParen {
                    return Err(self.arity(open, "aggregate", what, "1"));
                }
                self.expect_tok(Tok::Comma, "`,`")?;
                let values = self.expr(PREC_IN)?;
                let default = if self.eat(&Tok::Comma) { Some(Box::new(self.expr(PREC_IN)?)) } else { None };
                if default.is_some() && self.peek() == &Tok::Comma {
                    return Err(self.arity(open, "aggregate", what, "more than 3"));
                }
                self.expect_tok(Tok::RParen, "`)`")?;
                done(self, ExprKind::Aggregate { sel: Box::new(sel), values: Box::new(values), default })
            }
            Tok::RangeParen => {
                self.bump();
                let args = self.args_until(Tok::RParen, "`)`")?;
                done(self, ExprKind::Range(args))
            }
            Tok::ZipParen => {
                self.bump();
                let args = self.args_until(Tok::RParen, "`)`")?;
                done(self, ExprKind::Zip(args))
            }
            Tok::LenParen => {
                self.bump();
                let e = self.expr(PREC_IN)?;
                self.expect_tok(Tok::RParen, "`)`")?;
                done(self, ExprKind::Len(Box::new(e)))
            }
            _ => Err(self.error_expected("an expression")),
        }
    }
}
