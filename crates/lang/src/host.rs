//! Host-level evaluation: AST -> program graph.
//!
//! Runs everything that exists only at compile time — functions (closures, nesting, several
//! return values), `for` loops, list and dict comprehensions, `range`/`zip`/`len`, lists and
//! dicts, ternaries on host values (lazy), `load` — and records every s-op and selector
//! operation as a node of the [`Graph`]. Names live in one global scope shared by the
//! built-ins, the prelude library and the program (as in the reference), so a program may rebind
//! `tokens` or redefine any library function. Functions close over the scope they were defined
//! in and see later changes to it (Python's late binding).
//!
//! Runaway programs are stopped cleanly: evaluation has a step budget, a call-depth limit and
//! size limits on lists, strings and the graph.

use crate::ast::*;
use crate::atom::{self, Atom, AtomKey};
use crate::diag::Diagnostic;
use crate::graph::{Convert, Graph, MapOp, NodeId, NodeKind, Operand, Table};
use crate::interp;
use crate::lexer::Tok;
use crate::parser::parse;
use crate::span::{FileId, SourceMap, Span};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Evaluation steps allowed before a program is stopped.
pub const MAX_STEPS: u64 = 20_000_000;
/// Deepest chain of function calls.
pub const MAX_CALL_DEPTH: usize = 64;
/// Longest host list (`range`, comprehensions, `+`).
pub const MAX_LIST: usize = 1_000_000;
/// Bytes of host lists, dicts and strings a program may build in all (counted as they are
/// built, never given back): bounds what one evaluation can allocate, whatever the shapes.
pub const MAX_HOST_BYTES: u64 = 256 << 20;

/// What one host value costs in a list: its slot, plus a string's bytes (nested lists and
/// dicts are shared, and counted when they were built).
fn weight(v: &HostValue) -> u64 {
    std::mem::size_of::<HostValue>() as u64
        + match v {
            HostValue::Atom(Atom::Str(s)) => s.len() as u64,
            _ => 0,
        }
}

/// A host-level value.
#[derive(Clone, Debug)]
pub enum HostValue {
    Atom(Atom),
    List(Rc<Vec<HostValue>>),
    Dict(Rc<Dict>),
    Func(Rc<Closure>),
    Builtin(Builtin),
    Sop(NodeId),
    Sel(NodeId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    SelectorWidth,
    AggregateMax,
}

/// A dict with atom keys, in insertion order (Python's).
#[derive(Clone, Debug, Default)]
pub struct Dict {
    pub entries: Vec<(Atom, HostValue)>,
    index: HashMap<AtomKey, usize>,
}

impl Dict {
    fn insert(&mut self, k: Atom, v: HostValue) {
        match self.index.get(&k.key()) {
            Some(&i) => self.entries[i].1 = v,
            None => {
                self.index.insert(k.key(), self.entries.len());
                self.entries.push((k, v));
            }
        }
    }
    fn get(&self, k: &Atom) -> Option<&HostValue> {
        self.index.get(&k.key()).map(|&i| &self.entries[i].1)
    }
}

#[derive(Debug)]
pub struct Closure {
    pub def: Rc<FuncDef>,
    pub env: Env,
}

/// A scope: variables plus the enclosing scope. The top-level scope of a `load`ed file also
/// passes every name it binds on to the scope that loaded it (`steal`), except names starting
/// with `_` (private to the file), as the reference's environments do.
#[derive(Debug, Default)]
pub struct Scope {
    vars: HashMap<String, HostValue>,
    parent: Option<Env>,
    steal: Option<Env>,
}

pub type Env = Rc<RefCell<Scope>>;

fn nested(parent: &Env) -> Env {
    Rc::new(RefCell::new(Scope { vars: HashMap::new(), parent: Some(parent.clone()), steal: None }))
}

/// Files a chain of `load`s may nest (the program is the first).
pub const MAX_LOAD_DEPTH: usize = 256;

/// Names the reference reserves: its built-in s-ops and `True`/`False` cannot be rebound.
pub const RESERVED: [&str; 8] = ["tokens_asis", "tokens_str", "tokens_int", "tokens_bool", "tokens_float", "indices", "True", "False"];

fn check_name(id: &Ident) -> R<()> {
    if RESERVED.contains(&id.name.as_str()) {
        return Err(Box::new(
            Diagnostic::error("eval::reserved", format!("cannot assign to the reserved name `{}`", id.name), id.span)
                .with_label("reserved")
                .with_note("the built-in s-ops and True/False cannot be rebound (as in the reference); `tokens` and `length` can"),
        ));
    }
    Ok(())
}

/// Is `name` kept private to the file that binds it (not passed on to the loading file)?
fn is_private(name: &str) -> bool {
    name.starts_with('_') || name == "out"
}

/// Binds `name` in `env`, and in the scopes that loaded it, unless the name is private.
fn set_var(env: &Env, name: &str, value: HostValue) {
    let mut cur = env.clone();
    loop {
        let next = {
            let mut s = cur.borrow_mut();
            s.vars.insert(name.to_string(), value.clone());
            match &s.steal {
                Some(up) if !is_private(name) => up.clone(),
                _ => return,
            }
        };
        cur = next;
    }
}

/// The visible name nearest to a misspelt one (at most a third of its letters off, and at least
/// one), for "did you mean".
/// The built-ins the lexer reads as keywords with their `(` (`select(`), are candidates too
/// (helper ed25: `aggreagte(...)` had no suggestion).
fn nearest_name(env: &Env, name: &str) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    let mut consider = |n: &str| {
        let d = edit_distance(name, n);
        if d <= (name.chars().count() / 3).max(1) && best.as_ref().is_none_or(|(bd, bn)| (d, n) < (*bd, bn.as_str())) {
            best = Some((d, n.to_string()));
        }
    };
    for n in ["select", "aggregate", "range", "zip", "len"] {
        consider(n);
    }
    let mut cur = Some(env.clone());
    while let Some(e) = cur {
        let s = e.borrow();
        for n in s.vars.keys() {
            consider(n);
        }
        cur = s.parent.clone();
    }
    best.map(|(_, n)| n)
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1).min(row[j] + 1).min(diag + usize::from(ca != cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

fn lookup(env: &Env, name: &str) -> Option<HostValue> {
    let mut cur = env.clone();
    loop {
        let next = {
            let s = cur.borrow();
            if let Some(v) = s.vars.get(name) {
                return Some(v.clone());
            }
            s.parent.clone()
        };
        cur = next?;
    }
}

impl HostValue {
    /// The kind with its article: "an int", "a list", "an s-op".
    pub fn a_kind(&self) -> String {
        let k = self.kind_name();
        let vowel = k.starts_with(['a', 'e', 'i', 'o', 'u']) || k == "s-op";
        format!("{} {k}", if vowel { "an" } else { "a" })
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            HostValue::Atom(a) => a.type_name(),
            HostValue::List(_) => "list",
            HostValue::Dict(_) => "dict",
            HostValue::Func(_) | HostValue::Builtin(_) => "function",
            HostValue::Sop(_) => "s-op",
            HostValue::Sel(_) => "selector",
        }
    }

    fn describe(&self) -> String {
        match self {
            HostValue::Atom(a) => format!("{} {}", a.type_name(), a.repr()),
            other => other.kind_name().to_string(),
        }
    }
}

/// Reads files named by `load`. The default reads from disk; tests can supply files in memory.
/// A file that does not exist must give `ErrorKind::NotFound` (the next candidate path is tried).
pub trait FileLoader {
    fn read(&self, path: &Path) -> std::io::Result<String>;
}

/// Largest file `load` reads.
pub const MAX_LOAD_BYTES: u64 = 16 << 20;

#[derive(Debug, Default)]
pub struct DiskLoader;

impl FileLoader for DiskLoader {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        use std::io::Read;
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
        }
        if meta.len() > MAX_LOAD_BYTES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("larger than {MAX_LOAD_BYTES} bytes")));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        std::fs::File::open(path)?.take(MAX_LOAD_BYTES + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_LOAD_BYTES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("larger than {MAX_LOAD_BYTES} bytes")));
        }
        String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not valid UTF-8 ({})", crate::utf8_place(e.as_bytes(), e.utf8_error().valid_up_to()))))
    }
}

/// In-memory files, keyed by path.
#[derive(Debug, Default)]
pub struct MemoryLoader(pub HashMap<PathBuf, String>);

impl FileLoader for MemoryLoader {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.0.get(path).cloned().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
    }
}

/// The outcome of evaluating a program: its graph and its global names.
#[derive(Debug)]
pub struct Session {
    pub sources: SourceMap,
    pub graph: Graph,
    pub globals: Env,
    /// Names assigned at the top level of the main file, in order.
    pub assigned: Vec<String>,
    /// Where each of `assigned` was last assigned (its name in that statement).
    pub assigned_spans: HashMap<String, Span>,
    /// Notes and warnings (e.g. ignored REPL statements).
    pub notes: Vec<Diagnostic>,
    pub main_file: FileId,
    /// Each file a `load` read, and that `load` (the first one that read it).
    pub loaded_at: Vec<(FileId, Span)>,
    /// Keeps the scopes that closures hold, to break their reference cycles on drop.
    _scopes: Scopes,
}

/// Every scope a function was defined in, with its enclosing scopes. A closure stored in (a
/// scope reachable from) its own defining scope forms a reference cycle; clearing these scopes
/// when evaluation is over frees them.
#[derive(Debug, Default)]
struct Scopes {
    all: Vec<Env>,
    seen: std::collections::HashSet<*const RefCell<Scope>>,
}

impl Scopes {
    fn register(&mut self, env: &Env) {
        let mut cur = Some(env.clone());
        while let Some(e) = cur {
            if !self.seen.insert(Rc::as_ptr(&e)) {
                return;
            }
            cur = e.borrow().parent.clone();
            self.all.push(e);
        }
    }
}

impl Drop for Scopes {
    fn drop(&mut self) {
        for e in &self.all {
            if let Ok(mut s) = e.try_borrow_mut() {
                s.vars.clear();
                s.parent = None;
                s.steal = None;
            }
        }
    }
}

/// The prelude: our own RASP definitions of the reference library's functions.
pub const PRELUDE: &str = include_str!("prelude.rasp");
/// The matrix library (real-valued matrices, the universal simulator), loaded after the prelude.
pub const MATRIX: &str = include_str!("matrix.rasp");

type R<T> = Result<T, Box<Diagnostic>>;

struct Evaluator<'l> {
    sources: SourceMap,
    graph: Graph,
    /// The library scope: built-ins, the prelude and the matrix library. Library functions
    /// close over it, so a program that redefines a library name does not change what the
    /// other library functions call; every loaded file starts from it.
    library: Env,
    /// The main program's scope: starts as a copy of the library's names.
    globals: Env,
    /// Top-level scopes of files already loaded (by canonical path): loading a file again
    /// re-binds its names without evaluating it again (its names depend only on the library).
    loaded: HashMap<PathBuf, Env>,
    notes: Vec<Diagnostic>,
    /// An `exit` or `quit` ran: no later statement runs (the reference stops reading there).
    stopped: bool,
    steps: u64,
    depth: usize,
    loading: Vec<PathBuf>,
    loader: &'l dyn FileLoader,
    main_file: FileId,
    current_file: FileId,
    scopes: Scopes,
    /// Names assigned at the top level of the main file, in order of their last assignment (an
    /// earlier one of a name reassigned is None), and where each one's entry is: a reassignment
    /// costs O(1) (a scan of the list per assignment made 80,000 names take 16 s: helper b21).
    assigned: Vec<Option<String>>,
    assigned_at: HashMap<String, usize>,
    assigned_spans: HashMap<String, Span>,
    /// Bytes of host data built so far (see [`MAX_HOST_BYTES`]).
    host_bytes: u64,
    /// The prelude's and the matrix library's files.
    library_files: Vec<FileId>,
    /// While a library function called from the user's code runs: that call and the function's
    /// name (the place and the name of the nodes it builds; see [`crate::graph::Origin`]).
    call_site: Option<(Span, String)>,
    /// The outermost call, in the user's files, of a function they define (see
    /// [`crate::graph::Node::called_at`]).
    user_call: Option<Span>,
    /// Each file a `load` read, with that `load` ([`Session::loaded_at`]).
    loaded_at: Vec<(FileId, Span)>,
}

/// Evaluates a program text. `path` (if any) anchors relative `load`s. On failure returns
/// every parse error, or the first evaluation error.
pub fn evaluate_program(name: &str, path: Option<&Path>, text: &str, loader: &dyn FileLoader) -> (SourceMap, Result<Session, Vec<Diagnostic>>) {
    let mut ev = Evaluator {
        sources: SourceMap::new(),
        graph: Graph::new(),
        library: Rc::new(RefCell::new(Scope::default())),
        globals: Rc::new(RefCell::new(Scope::default())),
        loaded: HashMap::new(),
        notes: vec![],
        stopped: false,
        steps: 0,
        depth: 0,
        loading: vec![],
        loader,
        main_file: FileId(0),
        scopes: Scopes::default(),
        current_file: FileId(0),
        assigned: vec![],
        assigned_at: HashMap::new(),
        assigned_spans: HashMap::new(),
        host_bytes: 0,
        library_files: vec![],
        call_site: None,
        user_call: None,
        loaded_at: vec![],
    };
    let (library, globals) = (ev.library.clone(), ev.globals.clone());
    ev.scopes.register(&library);
    ev.scopes.register(&globals);
    let prelude_file = ev.sources.add("<prelude>", None, PRELUDE);
    ev.library_files.push(prelude_file);
    // A UTF-8 byte-order mark (as some editors write) is not part of the program.
    let text = source_text(text);
    let text = text.as_ref();
    let main = ev.sources.add(name, path.map(Path::to_path_buf), text);
    ev.main_file = main;
    if let Err(d) = ev.install_builtins(prelude_file) {
        return (ev.sources.clone(), Err(vec![*d]));
    }
    let library_names = ev.library.borrow().vars.clone();
    ev.globals.borrow_mut().vars = library_names;
    let (prog, errs) = parse(main, text);
    if !errs.is_empty() {
        return (ev.sources.clone(), Err(errs));
    }
    ev.notes.extend(reference_reading_notes(main, text, &prog));
    if let Some(p) = path {
        ev.loading.push(canonical(p));
    }
    ev.current_file = main;
    let globals = ev.globals.clone();
    let r = ev.exec_block(&prog.stmts, &globals, true);
    let sources = ev.sources.clone();

    match r {
        Ok(()) => (
            sources.clone(),
            Ok(Session {
                sources,
                graph: ev.graph,
                globals: ev.globals,
                assigned: ev.assigned.into_iter().flatten().collect(),
                assigned_spans: ev.assigned_spans,
                notes: ev.notes,
                main_file: main,
                loaded_at: ev.loaded_at,
                _scopes: ev.scopes,
            }),
        ),
        Err(d) => (sources, Err(vec![*d])),
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Session {
    /// Looks up a global name.
    pub fn get(&self, name: &str) -> Option<HostValue> {
        lookup(&self.globals, name)
    }

    /// The entry name: `prog` when bound, else the last name assigned in the main file that
    /// holds an s-op or selector, else `out` (the last expression statement's value) when it
    /// holds one.
    pub fn default_entry(&self) -> Option<String> {
        if self.globals.borrow().vars.contains_key("prog") {
            return Some("prog".into());
        }
        let is_graph = |n: &String| matches!(self.get(n), Some(HostValue::Sop(_) | HostValue::Sel(_)));
        self.assigned.iter().rev().find(|n| is_graph(n)).cloned().or_else(|| Some("out".to_string()).filter(is_graph))
    }

    /// [`entry`](Self::entry) for compiling: the entry's node also takes the entry's name as its
    /// label (see [`Graph::claim_label`]), so the checkpoint names the output as the user did.
    /// Without a name, the default is `prog`, else the last name assigned that holds an s-op
    /// (a selector cannot be compiled: a selector assigned after it is skipped, review b24).
    pub fn compile_entry(&mut self, name: Option<&str>) -> Result<(String, NodeId), String> {
        let last_sop = || -> Option<String> {
            if self.globals.borrow().vars.contains_key("prog") {
                return None;
            }
            self.assigned.iter().rev().find(|n| matches!(self.get(n), Some(HostValue::Sop(_)))).cloned()
        };
        let name = match name {
            Some(n) => Some(n.to_string()),
            None => last_sop(),
        };
        let (entry, root) = self.entry(name.as_deref())?;
        self.graph.claim_label(root, &entry);
        Ok((entry, root))
    }

    /// The main file's functions of no arguments, as a hint to call one (empty when none).
    fn call_hint(&self) -> String {
        let mut found: Vec<(u32, String)> = self
            .globals
            .borrow()
            .vars
            .iter()
            .filter_map(|(n, v)| match v {
                // (Not a name assigned a function, `hist = make_hist;`: the function is named.)
                HostValue::Func(c) if c.def.params.is_empty() && c.def.name.span.file == self.main_file && c.def.name.name == *n => Some((c.def.name.span.start, n.clone())),
                _ => None,
            })
            .collect();
        found.sort();
        match found.first() {
            None => String::new(),
            Some((_, first)) => format!(
                "; it defines {} of no arguments: call one (`prog = {first}();`)",
                match found.len() {
                    1 => format!("the function `{first}`"),
                    k if k <= 8 => format!("functions {}", found.iter().map(|(_, n)| format!("`{n}`")).collect::<Vec<_>>().join(", ")),
                    k => format!("functions {} (and {} more)", found[..8].iter().map(|(_, n)| format!("`{n}`")).collect::<Vec<_>>().join(", "), k - 8),
                }
            ),
        }
    }

    /// Where an error of [`entry`](Self::entry) is best shown (helper ed25: "entry `prog` is a
    /// list" and "the last name assigned, `hist`, is a function" had no place): the last
    /// assignment of the entry named, or by default of `prog` or else of the last name assigned,
    /// with a label saying what it holds. None when that name was not assigned in the main file.
    pub fn entry_place(&self, name: Option<&str>) -> Option<(Span, String)> {
        let name = match name {
            Some(n) => n.to_string(),
            None => self.default_entry().or_else(|| self.assigned.last().cloned())?,
        };
        let span = *self.assigned_spans.get(&name)?;
        let label = match self.get(&name)? {
            HostValue::Func(c) if c.def.params.is_empty() => format!("`{name}` is the function `{}` here, not its result: call it, `{name} = {}();`", c.def.name.name, c.def.name.name),
            HostValue::Func(c) => format!(
                "`{name}` is the function `{}` here, not an s-op: call it with its {} argument{}",
                c.def.name.name,
                c.def.params.len(),
                if c.def.params.len() == 1 { "" } else { "s" }
            ),
            v => format!("`{name}` is {} here", v.a_kind()),
        };
        Some((span, label))
    }

    /// Resolves the entry to a graph node, with an error message if it is not an s-op or selector.
    pub fn entry(&self, name: Option<&str>) -> Result<(String, NodeId), String> {
        let name = match name {
            Some(n) => n.to_string(),
            None => self.default_entry().ok_or_else(|| match self.assigned.last() {
                // A file of definitions and example lists (as written for the reference's REPL;
                // the TMA paper's files define functions of no arguments only: helper a21).
                Some(last) => format!(
                    "the program assigns no s-op or selector to a name (the last name assigned, `{last}`, is {}); assign one (`prog = ...;`) or pass --entry NAME{}",
                    self.get(last).map_or("undefined".to_string(), |v| v.a_kind()),
                    self.call_hint()
                ),
                // (`--entry` cannot help there: helper c19.)
                None => format!("the program assigns no name, so there is nothing to run: assign an s-op to a name (`prog = ...;`){}", self.call_hint()),
            })?,
        };
        match self.get(&name) {
            Some(HostValue::Sop(n)) | Some(HostValue::Sel(n)) => Ok((name, n)),
            Some(HostValue::Func(c)) if c.def.params.is_empty() => {
                // (The function's own name: `prog = make;` was told to add `prog = prog();`.)
                Err(format!("entry `{name}` is a function of no arguments, not an s-op or selector: add `prog = {}();` to the program and run `prog` (or no --entry)", c.def.name.name))
            }
            Some(v) => Err(format!("entry `{name}` is {}, not an s-op or selector", v.a_kind())),
            // `--entry 'f()'`: a call, not a name.
            None if name.strip_suffix("()").is_some_and(|f| matches!(self.get(f), Some(HostValue::Func(c)) if c.def.params.is_empty())) => {
                Err(format!("--entry takes a name, not a call: add `prog = {name};` to the program and run `prog` (or no --entry)"))
            }
            None => {
                // Name what could be compiled: the s-ops and selectors the program assigned.
                let mut names: Vec<&String> = vec![];
                let mut seen = std::collections::HashSet::new();
                for n in &self.assigned {
                    if matches!(self.get(n), Some(HostValue::Sop(_) | HostValue::Sel(_))) && seen.insert(n) {
                        names.push(n);
                    }
                }
                let list = match names.len() {
                    0 => " (it assigns no s-op or selector)".to_string(),
                    k if k <= 12 => format!("; its s-ops and selectors: {}", names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")),
                    k => format!("; its s-ops and selectors include {} (and {} more)", names[..12].iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "), k - 12),
                };
                Err(format!("entry `{name}` is not defined by the program{list}"))
            }
        }
    }
}

impl<'l> Evaluator<'l> {
    fn node(&mut self, kind: NodeKind, span: Span) -> R<NodeId> {
        let before = self.graph.len();
        let id = self
            .graph
            .add(kind, span)
            .ok_or_else(|| Box::new(Diagnostic::error("eval::too-big", "program graph too large", span).with_label(format!("more than {} nodes", crate::graph::MAX_NODES))))?;
        // A new node built by library code is placed at the user's call of the library function.
        if self.graph.len() > before && self.library_files.contains(&span.file) {
            let (place, function) = match &self.call_site {
                Some((site, name)) => (*site, Some(name.clone())),
                None => (span, None),
            };
            self.graph.set_origin(id, place, Some(crate::graph::Origin { span, function }));
        } else if self.graph.len() > before
            && let Some(call) = self.user_call
        {
            self.graph.set_called_at(id, call);
        }
        Ok(id)
    }

    fn install_builtins(&mut self, prelude: FileId) -> R<()> {
        let sp = Span::new(prelude, 0, 0);
        let tokens = self.node(NodeKind::Tokens, sp)?;
        let indices = self.node(NodeKind::Indices, sp)?;
        let length = self.node(NodeKind::Length, sp)?;
        let set = |n: &str, v: HostValue| {
            self.library.borrow_mut().vars.insert(n.to_string(), v);
        };
        set("tokens_asis", HostValue::Sop(tokens));
        set("indices", HostValue::Sop(indices));
        set("length", HostValue::Sop(length));
        set("True", HostValue::Atom(Atom::Bool(true)));
        set("False", HostValue::Atom(Atom::Bool(false)));
        set("selector_width", HostValue::Builtin(Builtin::SelectorWidth));
        set("aggregate_max", HostValue::Builtin(Builtin::AggregateMax));
        for (name, c) in [("tokens_str", Convert::Str), ("tokens_int", Convert::Int), ("tokens_float", Convert::Float), ("tokens_bool", Convert::Bool)] {
            let id = self.node(NodeKind::Map { op: MapOp::Convert(c), args: vec![Operand::Sop(tokens)] }, sp)?;
            self.graph.name(id, name);
            self.library.borrow_mut().vars.insert(name.to_string(), HostValue::Sop(id));
            if c == Convert::Str {
                self.library.borrow_mut().vars.insert("tokens".to_string(), HostValue::Sop(id));
            }
        }
        let (prog, errs) = parse(prelude, PRELUDE);
        if let Some(e) = errs.into_iter().next() {
            return Err(Box::new(e));
        }
        self.current_file = prelude;
        let g = self.library.clone();
        self.exec_block(&prog.stmts, &g, false)?;
        let matrix = self.sources.add("<matrix>", None, MATRIX);
        self.library_files.push(matrix);
        let (prog, errs) = parse(matrix, MATRIX);
        if let Some(e) = errs.into_iter().next() {
            return Err(Box::new(e));
        }
        self.current_file = matrix;
        self.exec_block(&prog.stmts, &g, false)?;
        Ok(())
    }

    /// Counts `bytes` of host data against [`MAX_HOST_BYTES`].
    fn charge(&mut self, bytes: u64, span: Span) -> R<()> {
        self.host_bytes = self.host_bytes.saturating_add(bytes);
        if self.host_bytes > MAX_HOST_BYTES {
            return Err(Box::new(
                Diagnostic::error("eval::too-big", "program builds too much host data", span)
                    .with_label(format!("more than {} MiB of lists, dicts and strings in all, reached here", MAX_HOST_BYTES >> 20))
                    .with_note("host lists and strings are built at compile time; check for runaway comprehensions or copies"),
            ));
        }
        Ok(())
    }

    fn charge_items(&mut self, items: &[HostValue], span: Span) -> R<()> {
        let bytes = items.iter().map(weight).sum();
        self.charge(bytes, span)
    }

    fn tick(&mut self, span: Span) -> R<()> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Box::new(
                Diagnostic::error("eval::step-limit", "program takes too long to evaluate", span)
                    .with_label(format!("stopped here after {MAX_STEPS} evaluation steps"))
                    .with_note("host-level loops and recursion run at compile time; check for runaway loops"),
            ));
        }
        Ok(())
    }

    fn exec_block(&mut self, stmts: &[Stmt], env: &Env, top_of_main: bool) -> R<()> {
        for s in stmts {
            if self.stopped {
                break;
            }
            self.exec(s, env, top_of_main)?;
        }
        Ok(())
    }

    fn exec(&mut self, s: &Stmt, env: &Env, top_of_main: bool) -> R<()> {
        self.tick(s.span)?;
        match &s.kind {
            StmtKind::Expr(e) => {
                // As in the reference, an expression statement's value is `out` (readable by
                // later statements and as `--entry out`); it names no node and is not the
                // default entry.
                // `prog == tokens;` where an assignment was meant (helper w31: "unknown name
                // `prog`" only).
                let v = self.eval(e, env).map_err(|d| {
                    if let ExprKind::Binary { op: BinOp::Eq, lhs, .. } = &e.kind
                        && let ExprKind::Name(n) = &lhs.kind
                        && d.code == "eval::unknown-name"
                        && d.labels.first().is_some_and(|l| l.span == lhs.span)
                    {
                        Box::new(d.with_note(format!("`==` compares; to assign, write `{n} = ...;` with one `=`")))
                    } else {
                        d
                    }
                })?;
                set_var(env, "out", v);
            }
            StmtKind::Assign { targets, values } => {
                targets.iter().try_for_each(check_name)?;
                let mut vals = Vec::with_capacity(values.len());
                for v in values {
                    vals.push(self.eval(v, env)?);
                }
                let value = match (vals.pop(), vals.is_empty()) {
                    (Some(v), true) => v,
                    (last, _) => {
                        vals.extend(last);
                        HostValue::List(Rc::new(vals))
                    }
                };
                if targets.len() == 1 {
                    self.bind(env, &targets[0], value, top_of_main);
                } else {
                    // Any value with items unpacks, as in the reference (Python's unpacking):
                    // a string into its characters, a dict into its keys (helper a13).
                    let items = match unpack_items(&value) {
                        Some(l) if l.len() == targets.len() => l,
                        other_items => {
                            let got = match other_items {
                                Some(items) => format!("{} values", items.len()),
                                None => format!("one {}", value.kind_name()),
                            };
                            return Err(Box::new(
                                Diagnostic::error("eval::unpack", format!("expected {} values to assign, got {got}", targets.len()), s.span)
                                    .with_label(format!("{} names on the left", targets.len())),
                            ));
                        }
                    };
                    for (t, v) in targets.iter().zip(items.iter()) {
                        self.bind(env, t, v.clone(), top_of_main);
                    }
                }
            }
            StmtKind::Def(def) => {
                check_name(&def.name)?;
                def.params.iter().try_for_each(check_name)?;
                let f = HostValue::Func(Rc::new(Closure { def: def.clone(), env: env.clone() }));
                self.scopes.register(env);
                set_var(env, &def.name.name, f);
            }
            StmtKind::For { vars, iter, body } => {
                vars.iter().try_for_each(check_name)?;
                let it = self.eval(iter, env)?;
                let items = self.iterate(&it, iter.span, "a `for` loop")?;
                for item in items {
                    self.bind_vars(env, vars, item, iter.span)?;
                    self.exec_block(body, env, top_of_main)?;
                }
            }
            StmtKind::Load { path, path_span } => self.load(path, *path_span, env)?,
            StmtKind::Draw { target, input } => {
                self.eval(target, env)?;
                if let Some(i) = input {
                    self.eval(i, env)?;
                }
                self.notes.push(Diagnostic::note_at("eval::draw-ignored", "`draw` is ignored: raspc does not draw computation flows", s.span));
            }
            StmtKind::Repl { kind: crate::ast::ReplKind::Exit, .. } => {
                // The reference stops reading input at `exit`/`quit`: nothing after it runs in
                // this file (a file that loaded it goes on: `load`).
                self.stopped = true;
                let text = self.statement_text(s.span);
                let mut note = Diagnostic::note_at("eval::exit", format!("`{text}`: the statements after it in this file are not run (as in the reference)"), s.span);
                if self.sources.get(s.span.file).text.get(s.span.start as usize..s.span.end as usize).is_some_and(|t| t.trim_end().ends_with(';')) {
                    // The reference's `exit` takes no `;`: `exit;` is a syntax error there.
                    // (Named as written: `quit();` was told about `exit;`, helper b26.)
                    note = note
                        .with_note(format!("but the reference reads `{text};` (with the `;`) as a syntax error and goes on with the next line: write it without `;` to stop in both"));
                }
                self.notes.push(note);
            }
            StmtKind::Repl { .. } => {
                let text = self.statement_text(s.span);
                self.notes.push(Diagnostic::note_at("eval::repl-ignored", format!("REPL-only statement `{text}` ignored"), s.span));
            }
        }
        Ok(())
    }

    /// A statement's source text for a note: one line, at most 40 characters, without `;`.
    fn statement_text(&self, span: Span) -> String {
        let text = self.sources.get(span.file).text.get(span.start as usize..span.end as usize).unwrap_or("");
        let line = text.lines().next().unwrap_or("").trim().trim_end_matches(';').trim_end();
        let mut shown: String = line.chars().take(40).collect();
        if line.chars().count() > 40 {
            shown.push_str("...");
        }
        shown
    }

    fn bind(&mut self, env: &Env, target: &Ident, value: HostValue, top_of_main: bool) {
        if let HostValue::Sop(n) | HostValue::Sel(n) = &value {
            self.graph.name(*n, &target.name);
            if self.current_file == self.main_file {
                self.graph.named_at(*n, target.span);
            }
        }
        if top_of_main && self.current_file == self.main_file {
            if let Some(at) = self.assigned_at.insert(target.name.clone(), self.assigned.len()) {
                self.assigned[at] = None;
            }
            self.assigned.push(Some(target.name.clone()));
            self.assigned_spans.insert(target.name.clone(), target.span);
        }
        set_var(env, &target.name, value);
    }

    fn bind_vars(&mut self, env: &Env, vars: &[Ident], item: HostValue, span: Span) -> R<()> {
        vars.iter().try_for_each(check_name)?;
        if vars.len() == 1 {
            set_var(env, &vars[0].name, item);
            return Ok(());
        }
        match (unpack_items(&item), &item) {
            (Some(l), _) if l.len() == vars.len() => {
                for (v, x) in vars.iter().zip(l.iter()) {
                    set_var(env, &v.name, x.clone());
                }
                Ok(())
            }
            (_, other) => Err(Box::new(
                Diagnostic::error("eval::unpack", format!("cannot unpack {} into {} names", other.describe(), vars.len()), span)
                    .with_label("the items of this iterable do not match the loop variables"),
            )),
        }
    }

    fn iterate(&mut self, v: &HostValue, span: Span, what: &str) -> R<Vec<HostValue>> {
        if let HostValue::List(l) = v {
            self.charge_items(l, span)?;
        }
        match unpack_items(v) {
            Some(items) => Ok(items),
            None => Err(Box::new(Diagnostic::error("eval::not-iterable", format!("{what} needs a list or dict, got {}", v.describe()), span).with_label("not iterable"))),
        }
    }

    /// Where `load "name";` may find its file, in order: relative to the including file, then
    /// to the working directory; each first with `.rasp` appended (what the reference opens),
    /// then as written (`load "lib.rasp";` too).
    fn load_candidates(&self, path: &str, span: Span) -> Vec<PathBuf> {
        let mut names = vec![];
        if !path.ends_with(".rasp") {
            names.push(PathBuf::from(format!("{path}.rasp")));
        }
        names.push(PathBuf::from(path));
        let mut out: Vec<PathBuf> = vec![];
        if let Some(dir) = self.sources.get(span.file).path.as_ref().and_then(|b| b.parent()) {
            out.extend(names.iter().map(|n| dir.join(n)));
        }
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    /// `load "name";`: runs the file in a scope of its own (which sees the library, not the
    /// loading program's names) and binds every name it defines in the loading scope, except
    /// names starting with `_`, which stay private to the file.
    fn load(&mut self, path: &str, span: Span, env: &Env) -> R<()> {
        let mut found = None;
        for cand in self.load_candidates(path, span) {
            match self.loader.read(&cand) {
                Ok(text) => {
                    found = Some((cand, text));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Box::new(Diagnostic::error("eval::load", format!("cannot load `{}`: {e}", cand.display()), span).with_label("loaded here")));
                }
            }
        }
        let Some((full, text)) = found else {
            let tried: Vec<String> = self.load_candidates(path, span).iter().map(|p| format!("`{}`", p.display())).collect();
            return Err(Box::new(
                Diagnostic::error("eval::load", format!("cannot load `{path}`: no such file"), span).with_label("loaded here").with_note(format!("tried {}", tried.join(", "))),
            ));
        };
        let key = canonical(&full);
        // Loads nested deeper than anyone writes (a chain of 5,000 files took 30 s and 1.4 GB:
        // each file's names pass up through every loader) are refused at the load.
        if self.loading.len() > MAX_LOAD_DEPTH {
            return Err(Box::new(
                Diagnostic::error("eval::load", format!("loads nested more than {MAX_LOAD_DEPTH} files deep"), span)
                    .with_label("this load")
                    .with_note("load the files from one place instead of each from the one before"),
            ));
        }
        if self.loading.contains(&key) {
            self.notes.push(
                Diagnostic::note_at("eval::load-cycle", format!("`{path}` is already being loaded; this load is skipped"), span).with_note("loads that form a cycle are executed once"),
            );
            return Ok(());
        }
        if let Some(file_env) = self.loaded.get(&key).cloned() {
            let mut names: Vec<(String, HostValue)> = file_env.borrow().vars.iter().filter(|(n, _)| !is_private(n)).map(|(n, v)| (n.clone(), v.clone())).collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (n, v) in names {
                set_var(env, &n, v);
            }
            return Ok(());
        }
        let text = source_text(&text).into_owned();
        let file = self.sources.add(full.display().to_string(), Some(full.clone()), text.clone());
        self.loaded_at.push((file, span));
        let (prog, errs) = parse(file, &text);
        if errs.is_empty() {
            self.notes.extend(reference_reading_notes(file, &text, &prog));
        }
        if let Some(first) = errs.into_iter().next() {
            if full.extension().is_some_and(|e| e == "rasp") {
                return Err(Box::new(first.with_secondary(span, "in the file loaded here")));
            }
            // Not named as a RASP file: say where it fails to parse, without showing its text.
            let (line, col) = first.primary_span().map(|s| self.sources.line_col(s.file, s.start)).unwrap_or((1, 1));
            return Err(Box::new(
                Diagnostic::error("eval::load", format!("`{}` is not a RASP program (it does not parse at line {line}, column {col})", full.display()), span).with_label("loaded here"),
            ));
        }
        let file_env = Rc::new(RefCell::new(Scope { vars: HashMap::new(), parent: Some(self.library.clone()), steal: Some(env.clone()) }));
        self.scopes.register(&file_env);
        self.loading.push(key.clone());
        let prev = self.current_file;
        self.current_file = file;
        // An error inside the loaded file also shows the `load` that read it (a parse error
        // there did; helper t22), unless it already shows a place in the loading file.
        let r = self.exec_block(&prog.stmts, &file_env, false).map_err(|d| {
            if d.labels.iter().any(|l| l.span.file == prev) {
                d
            } else {
                Box::new(d.with_secondary(span, "in the file loaded here"))
            }
        });
        // An `exit` ends the loaded file only: the reference runs a loaded file as a REPL
        // session of its own, whose stop does not reach the file that loaded it.
        self.stopped = false;
        self.current_file = prev;
        self.loading.pop();
        // The cached scope no longer passes names on: a later load re-binds them itself.
        file_env.borrow_mut().steal = None;
        self.loaded.insert(key, file_env);
        r
    }

    /// The line (1-based) of the first statement after `at` in its file that assigns `name`
    /// (`name = ...`, `name, other = ...`) or defines it (`def name(`).
    fn assigned_later(&self, name: &str, at: Span) -> Option<usize> {
        let text = &self.sources.get(at.file).text;
        let after = text.get(at.end as usize..)?;
        let skip = text[..at.end as usize].matches('\n').count() + 1;
        for (k, line) in after.lines().enumerate().skip(1) {
            let t = line.trim_start();
            let def = t.strip_prefix("def ").is_some_and(|r| r.trim_start().strip_prefix(name).is_some_and(|r| r.trim_start().starts_with('(')));
            let assigns = t
                .split('=')
                .next()
                .is_some_and(|lhs| t.len() > lhs.len() && !t[lhs.len()..].starts_with("==") && lhs.split(',').any(|v| v.trim() == name) && !lhs.contains(['(', '[', '"']));
            if def || assigns {
                return Some(skip + k);
            }
        }
        None
    }

    /// The name a call's text starts with (`length` in `length(tokens)`), if it is one.
    fn callee_name(&self, call: Span) -> Option<String> {
        let text = &self.sources.get(call.file).text;
        let s = text.get(call.start as usize..call.end as usize)?;
        let name: String = s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        (!name.is_empty() && s[name.len()..].trim_start().starts_with('(')).then_some(name)
    }

    fn err(&self, code: &'static str, msg: impl Into<String>, span: Span, label: impl Into<String>) -> Box<Diagnostic> {
        Box::new(Diagnostic::error(code, msg, span).with_label(label))
    }

    /// An s-op operand: an s-op or an atom (broadcast to a constant s-op).
    fn operand(&self, v: &HostValue, span: Span, role: &str) -> R<Operand> {
        match v {
            HostValue::Sop(n) => Ok(Operand::Sop(*n)),
            HostValue::Atom(a) => Ok(Operand::Const(a.clone())),
            other => Err(self.err("eval::type", format!("{role} must be an s-op or an atom, got {}", other.describe()), span, format!("this is {}", other.a_kind()))),
        }
    }

    fn sop_node(&mut self, v: &HostValue, span: Span, role: &str) -> R<NodeId> {
        match self.operand(v, span, role)? {
            Operand::Sop(n) => Ok(n),
            Operand::Const(a) => self.node(NodeKind::Const(a), span),
        }
    }

    fn map(&mut self, op: MapOp, args: Vec<Operand>, span: Span) -> R<HostValue> {
        // All-constant maps are folded on the host.
        if args.iter().all(|a| matches!(a, Operand::Const(_))) {
            let atoms: Vec<Atom> = args.iter().filter_map(|a| if let Operand::Const(c) = a { Some(c.clone()) } else { None }).collect();
            return interp::apply_map(&op, &atoms).map(HostValue::Atom).map_err(|e| self.err("eval::op", e.0, span, "evaluated here"));
        }
        Ok(HostValue::Sop(self.node(NodeKind::Map { op, args }, span)?))
    }

    fn eval(&mut self, e: &Expr, env: &Env) -> R<HostValue> {
        self.tick(e.span)?;
        let span = e.span;
        match &e.kind {
            ExprKind::Error => Err(self.err("eval::internal", "internal error: evaluating a parse error", span, "here")),
            ExprKind::Name(n) => lookup(env, n).ok_or_else(|| {
                let mut d = Diagnostic::error("eval::unknown-name", format!("unknown name `{n}`"), span).with_label("not defined here");
                // A loaded file's private name (helper a21: "not defined here", no hint).
                let private_in = || {
                    let mut files: Vec<&PathBuf> = self.loaded.iter().filter(|(_, e)| e.borrow().vars.contains_key(n.as_str())).map(|(p, _)| p).collect();
                    files.sort();
                    files.first().map(|p| p.display().to_string())
                };
                if ["select", "aggregate", "range", "zip", "len"].contains(&n.as_str()) {
                    d = d.with_note(format!("write `{n}(` with no space before the parenthesis"));
                } else if let Some(file) = n.starts_with('_').then(private_in).flatten() {
                    d = d.with_note(format!(
                        "`{file}` defines `{n}`, but a name starting with `_` stays private to the file that defines it (as in the reference): rename it there to share it"
                    ));
                } else if let Some(line) = self.assigned_later(n, span) {
                    // (Helper ed25: a name used before its line said only "not defined here".)
                    d = d.with_note(format!("`{n}` is assigned later, on line {line}: RASP runs statements in order, so define it before this line"));
                } else if let Some(near) = nearest_name(env, n) {
                    d = d.with_note(format!("did you mean `{near}`?"));
                }
                Box::new(d)
            }),
            ExprKind::Int(i) => Ok(HostValue::Atom(Atom::Int(*i))),
            ExprKind::Float(f) => Ok(HostValue::Atom(Atom::Float(*f))),
            ExprKind::Str(s) => Ok(HostValue::Atom(Atom::Str(s.clone()))),
            ExprKind::List(items) => {
                let mut v = Vec::with_capacity(items.len());
                for i in items {
                    v.push(self.eval(i, env)?);
                }
                self.charge_items(&v, span)?;
                Ok(HostValue::List(Rc::new(v)))
            }
            ExprKind::Dict(items) => {
                let mut d = Dict::default();
                for (k, v) in items {
                    let key = self.dict_key(k, env)?;
                    let val = self.eval(v, env)?;
                    self.charge(2 * weight(&val), span)?;
                    d.insert(key, val);
                }
                Ok(HostValue::Dict(Rc::new(d)))
            }
            ExprKind::Index { target, index } => {
                let t = self.eval(target, env)?;
                let i = self.eval(index, env)?;
                self.index(t, i, target.span, index.span, span, env)
            }
            ExprKind::Call { callee, args } => {
                let f = self.eval(callee, env)?;
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a, env)?);
                }
                self.call(f, vals, callee.span, args, span)
            }
            ExprKind::Unary { op, operand } => {
                let v = self.eval(operand, env)?;
                self.unary(*op, v, operand.span, span)
            }
            ExprKind::Binary { op, lhs, rhs } => {
                let a = self.eval(lhs, env)?;
                let b = self.eval(rhs, env)?;
                self.binary(*op, a, b, lhs.span, rhs.span, span)
            }
            ExprKind::Select { keys, queries, cmp } => {
                let k = self.eval(keys, env)?;
                let q = self.eval(queries, env)?;
                let k = self.sop_node(&k, keys.span, "the keys of `select`")?;
                let q = self.sop_node(&q, queries.span, "the queries of `select`")?;
                Ok(HostValue::Sel(self.node(NodeKind::Select { keys: k, queries: q, cmp: *cmp }, span)?))
            }
            ExprKind::Aggregate { sel, values, default } => {
                let s = self.eval(sel, env)?;
                let HostValue::Sel(s) = s else {
                    return Err(self.err("eval::type", format!("the first argument of `aggregate` must be a selector, got {}", s.describe()), sel.span, "expected a selector"));
                };
                let v = self.eval(values, env)?;
                let v = self.sop_node(&v, values.span, "the values of `aggregate`")?;
                let d = match default {
                    None => Atom::Int(0),
                    Some(d) => match self.eval(d, env)? {
                        HostValue::Atom(a) => a,
                        other => return Err(self.err("eval::type", format!("the default of `aggregate` must be an atom, got {}", other.describe()), d.span, "expected an atom")),
                    },
                };
                Ok(HostValue::Sop(self.node(NodeKind::Aggregate { sel: s, values: v, default: d }, span)?))
            }
            ExprKind::Ternary { then, cond, otherwise } => {
                let c = self.eval(cond, env)?;
                match c {
                    HostValue::Sop(c) => {
                        let t = self.eval(then, env)?;
                        let o = self.eval(otherwise, env)?;
                        let t = self.operand(&t, then.span, "a branch of an s-op `if`")?;
                        let o = self.operand(&o, otherwise.span, "a branch of an s-op `if`")?;
                        self.map(MapOp::Ternary, vec![t, Operand::Sop(c), o], span)
                    }
                    HostValue::Sel(_) => Err(self.err("eval::type", "the condition of `if` cannot be a selector", cond.span, "a selector")),
                    other => {
                        if self.truthy(&other, cond.span)? {
                            self.eval(then, env)
                        } else {
                            self.eval(otherwise, env)
                        }
                    }
                }
            }
            ExprKind::Range(args) => {
                let mut ints = vec![];
                for a in args {
                    match self.eval(a, env)? {
                        HostValue::Atom(Atom::Int(i)) => ints.push(i),
                        // A boolean is an integer to Python's `range` (the reference checks
                        // `isinstance(v, int)`): `range(True)` is `[0]` (helper sc23).
                        HostValue::Atom(Atom::Bool(b)) => ints.push(i64::from(b)),
                        other => return Err(self.err("eval::type", format!("`range` takes integers, got {}", other.describe()), a.span, "not an integer")),
                    }
                }
                let (start, stop, step) = match ints.as_slice() {
                    [b] => (0, *b, 1),
                    [a, b] => (*a, *b, 1),
                    [a, b, c] => (*a, *b, *c),
                    _ => return Err(self.err("eval::arity", format!("`range` takes 1, 2 or 3 arguments, got {}", ints.len()), span, "here")),
                };
                if step == 0 {
                    return Err(self.err("eval::range", "`range` step must not be zero", span, "here"));
                }
                let count = if step > 0 {
                    if stop > start {
                        ((stop as i128 - start as i128 + step as i128 - 1) / step as i128) as u128
                    } else {
                        0
                    }
                } else if start > stop {
                    ((start as i128 - stop as i128 + (-(step as i128)) - 1) / (-(step as i128))) as u128
                } else {
                    0
                };
                if count > MAX_LIST as u128 {
                    return Err(self.err("eval::too-big", format!("`range` of {count} items is too long"), span, format!("at most {MAX_LIST} items")));
                }
                self.charge(count as u64 * std::mem::size_of::<HostValue>() as u64, span)?;
                Ok(HostValue::List(Rc::new((0..count as i64).map(|k| HostValue::Atom(Atom::Int(start + k * step))).collect())))
            }
            ExprKind::Zip(args) => {
                let mut lists = vec![];
                for a in args {
                    match self.eval(a, env)? {
                        HostValue::List(l) => lists.push(l),
                        other => return Err(self.err("eval::type", format!("`zip` takes lists, got {}", other.describe()), a.span, "not a list")),
                    }
                }
                if lists.is_empty() {
                    return Err(self.err("eval::arity", "`zip` needs at least one list", span, "here"));
                }
                let n = lists[0].len();
                if let Some((i, l)) = lists.iter().enumerate().find(|(_, l)| l.len() != n) {
                    return Err(self.err("eval::zip", format!("`zip` of lists of different lengths ({n} and {})", l.len()), args[i].span, format!("this list has {} items", l.len())));
                }
                self.charge((n as u64) * (lists.len() as u64 + 1) * std::mem::size_of::<HostValue>() as u64, span)?;
                Ok(HostValue::List(Rc::new((0..n).map(|k| HostValue::List(Rc::new(lists.iter().map(|l| l[k].clone()).collect()))).collect())))
            }
            ExprKind::Len(x) => match self.eval(x, env)? {
                HostValue::List(l) => Ok(HostValue::Atom(Atom::Int(l.len() as i64))),
                HostValue::Dict(d) => Ok(HostValue::Atom(Atom::Int(d.entries.len() as i64))),
                HostValue::Atom(Atom::Str(s)) => Ok(HostValue::Atom(Atom::Int(s.chars().count() as i64))),
                other => {
                    let d = self.err("eval::type", format!("`len` takes a list, dict or string, got {}", other.describe()), x.span, "has no length");
                    // (Helper w31: Python's `len(tokens)` got no pointer to `length`.)
                    Err(if matches!(other, HostValue::Sop(_)) {
                        Box::new(d.with_note(
                            "the number of positions of the input is `length` (an s-op with that number at every position); the number where a condition holds is `selector_width(select(c, True, ==))`",
                        ))
                    } else {
                        d
                    })
                }
            },
            ExprKind::ListComp { body, vars, iter } => {
                let it = self.eval(iter, env)?;
                let items = self.iterate(&it, iter.span, "a list comprehension")?;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let inner = nested(env);
                    self.bind_vars(&inner, vars, item, iter.span)?;
                    let v = self.eval(body, &inner)?;
                    self.charge(weight(&v), span)?;
                    out.push(v);
                }
                Ok(HostValue::List(Rc::new(out)))
            }
            ExprKind::DictComp { key, value, vars, iter } => {
                let it = self.eval(iter, env)?;
                let items = self.iterate(&it, iter.span, "a dict comprehension")?;
                let mut d = Dict::default();
                for item in items {
                    let inner = nested(env);
                    self.bind_vars(&inner, vars, item, iter.span)?;
                    let k = self.dict_key(key, &inner)?;
                    let v = self.eval(value, &inner)?;
                    self.charge(2 * weight(&v), span)?;
                    d.insert(k, v);
                }
                Ok(HostValue::Dict(Rc::new(d)))
            }
            ExprKind::In { item, container } => {
                let x = self.eval(item, env)?;
                let c = self.eval(container, env)?;
                self.contains(x, c, item.span, container.span, span)
            }
        }
    }

    fn dict_key(&mut self, k: &Expr, env: &Env) -> R<Atom> {
        match self.eval(k, env)? {
            HostValue::Atom(a) => Ok(a),
            other => Err(self.err("eval::type", format!("dict keys must be atoms, got {}", other.describe()), k.span, "not an atom")),
        }
    }

    fn truthy(&self, v: &HostValue, span: Span) -> R<bool> {
        match v {
            HostValue::Atom(a) => Ok(a.truthy()),
            HostValue::List(l) => Ok(!l.is_empty()),
            HostValue::Dict(d) => Ok(!d.entries.is_empty()),
            other => Err(self.err("eval::type", format!("{} has no truth value at compile time", other.a_kind()), span, "used as a condition here")),
        }
    }

    fn index(&mut self, t: HostValue, i: HostValue, tspan: Span, ispan: Span, span: Span, env: &Env) -> R<HostValue> {
        match (&t, &i) {
            (HostValue::List(_) | HostValue::Atom(Atom::Str(_)), HostValue::Atom(a)) => {
                // Python's booleans are the integers 0 and 1: `[1, 2][True]` is 2.
                let Some(k) = &a.as_int() else {
                    return Err(self.err("eval::type", format!("index into {} must be an integer, got {}", t.a_kind(), i.describe()), ispan, "not an integer"));
                };
                let len = match &t {
                    HostValue::List(l) => l.len(),
                    HostValue::Atom(Atom::Str(s)) => s.chars().count(),
                    _ => 0,
                } as i64;
                let j = if *k < 0 { k + len } else { *k };
                // Index in place: no copy of the list or string.
                let item = match &t {
                    HostValue::List(l) if j >= 0 => l.get(j as usize).cloned(),
                    HostValue::Atom(Atom::Str(s)) if j >= 0 => s.chars().nth(j as usize).map(|c| HostValue::Atom(Atom::Str(c.to_string()))),
                    _ => None,
                };
                item.ok_or_else(|| self.err("eval::index", format!("index {k} out of range for {} of length {len}", t.a_kind()), ispan, "out of range"))
            }
            (HostValue::Dict(d), HostValue::Atom(a)) => d.get(a).cloned().ok_or_else(|| self.err("eval::index", format!("key {} not in dict", a.repr()), ispan, "missing key")),
            (HostValue::Sop(s), HostValue::Atom(a @ (Atom::Int(_) | Atom::Bool(_)))) => {
                // `sop[True]` is `sop[1]`, as in Python.
                let k = &a.as_int().unwrap_or_default();
                // sop[k]: the value at position k (negative: from the end), everywhere.
                let indices = self.node(NodeKind::Indices, span)?;
                let target = if *k >= 0 {
                    self.node(NodeKind::Const(Atom::Int(*k)), span)?
                } else {
                    // The reference computes `length + k` with `length` as bound where the
                    // indexing is written (a program may rebind it).
                    let length = match lookup(env, "length") {
                        Some(HostValue::Sop(l)) => l,
                        Some(other) => {
                            return Err(self.err(
                                "eval::type",
                                format!("a negative index reads `length` (the reference computes `length - {}`), and `length` is {} here", k.unsigned_abs(), other.describe()),
                                ispan,
                                "negative index",
                            ))
                        }
                        None => self.node(NodeKind::Length, span)?,
                    };
                    self.node(NodeKind::Map { op: MapOp::Binary(BinOp::Add), args: vec![Operand::Sop(length), Operand::Const(Atom::Int(*k))] }, span)?
                };
                let sel = self.node(NodeKind::Select { keys: indices, queries: target, cmp: Cmp::Eq }, span)?;
                Ok(HostValue::Sop(self.node(NodeKind::Aggregate { sel, values: *s, default: Atom::Int(0) }, span)?))
            }
            (HostValue::List(_) | HostValue::Dict(_) | HostValue::Atom(Atom::Str(_)), HostValue::Sop(x)) => {
                let table = match &t {
                    HostValue::List(l) => Table::List(self.atoms_of(l, tspan, "a list indexed by an s-op")?),
                    HostValue::Atom(Atom::Str(s)) => Table::List(s.chars().map(|c| Atom::Str(c.to_string())).collect()),
                    HostValue::Dict(d) => {
                        let mut pairs = vec![];
                        for (k, v) in &d.entries {
                            match v {
                                HostValue::Atom(a) => pairs.push((k.clone(), a.clone())),
                                other => {
                                    return Err(self.err("eval::type", format!("a dict indexed by an s-op must map to atoms, found {}", other.a_kind()), tspan, "not a table of atoms"))
                                }
                            }
                        }
                        Table::Dict(pairs)
                    }
                    _ => return Err(self.err("eval::type", format!("cannot index {} with an s-op", t.a_kind()), span, "unsupported indexing")),
                };
                self.map(MapOp::Lookup(table), vec![Operand::Sop(*x)], span)
            }
            // `tokens[indices - 1]`: the value at another position is a select (helper w30).
            (HostValue::Sop(_), HostValue::Sop(_)) => Err(Box::new(
                (*self.err("eval::type", "cannot index an s-op with an s-op", span, "unsupported indexing"))
                    .with_note("to read an s-op at the position another s-op gives, select that position: `aggregate(select(indices, POSITION, ==), SOP)` (the library's `load_from_location(SOP, POSITION)`)"),
            )),
            _ => Err(self.err("eval::type", format!("cannot index {} with {}", t.a_kind(), i.a_kind()), span, "unsupported indexing")),
        }
    }

    fn atoms_of(&self, l: &[HostValue], span: Span, what: &str) -> R<Vec<Atom>> {
        l.iter()
            .map(|v| match v {
                HostValue::Atom(a) => Ok(a.clone()),
                other => Err(self.err("eval::type", format!("{what} must hold only atoms, found {}", other.a_kind()), span, "not a list of atoms")),
            })
            .collect()
    }

    fn call(&mut self, f: HostValue, args: Vec<HostValue>, fspan: Span, arg_exprs: &[Expr], span: Span) -> R<HostValue> {
        match f {
            HostValue::Func(c) => {
                let def = &c.def;
                if args.len() != def.params.len() {
                    return Err(Box::new(
                        Diagnostic::error("eval::arity", format!("`{}` takes {} argument(s), got {}", def.name.name, def.params.len(), args.len()), span)
                            .with_label("wrong number of arguments")
                            .with_secondary(def.name.span, "defined here"),
                    ));
                }
                if self.depth >= MAX_CALL_DEPTH {
                    return Err(self.err("eval::recursion", format!("function calls nested more than {MAX_CALL_DEPTH} deep"), span, "while calling this"));
                }
                let scope = nested(&c.env);
                for (p, v) in def.params.iter().zip(args) {
                    scope.borrow_mut().vars.insert(p.name.clone(), v);
                }
                self.depth += 1;
                // The outermost call of a library function from the user's files.
                let outer = self.call_site.is_none() && self.library_files.contains(&def.name.span.file) && !self.library_files.contains(&span.file);
                if outer {
                    self.call_site = Some((span, def.name.name.clone()));
                }
                let user_outer = self.user_call.is_none() && !self.library_files.contains(&def.name.span.file) && !self.library_files.contains(&span.file);
                if user_outer {
                    self.user_call = Some(span);
                }
                let r = (|| {
                    self.exec_block(&def.body, &scope, false)?;
                    let mut out = Vec::with_capacity(def.ret.len());
                    for e in &def.ret {
                        out.push(self.eval(e, &scope)?);
                    }
                    Ok(match (out.pop(), out.is_empty()) {
                        (Some(v), true) => v,
                        (last, _) => {
                            out.extend(last);
                            HostValue::List(Rc::new(out))
                        }
                    })
                })();
                if outer {
                    self.call_site = None;
                }
                if user_outer {
                    self.user_call = None;
                }
                self.depth -= 1;
                // An error in the body says which call reached it (helper ed25: a type error in a
                // function showed the body only), the innermost few calls of a nest.
                r.map_err(|mut d: Box<Diagnostic>| {
                    let calls = d.labels.iter().filter(|l| l.message == "in this call").count();
                    if d.severity == crate::diag::Severity::Error && calls < 3 && d.labels.iter().all(|l| l.span != span) && !matches!(d.code, "eval::recursion") {
                        d.labels.push(crate::diag::Label { span, message: "in this call".into(), primary: false });
                    }
                    d
                })
            }
            HostValue::Builtin(Builtin::SelectorWidth) => match args.as_slice() {
                [HostValue::Sel(s)] => Ok(HostValue::Sop(self.node(NodeKind::SelectorWidth(*s), span)?)),
                [other] => Err(self.err("eval::type", format!("`selector_width` takes a selector, got {}", other.describe()), arg_exprs[0].span, "expected a selector")),
                _ => Err(self.err("eval::arity", format!("`selector_width` takes 1 argument, got {}", args.len()), span, "wrong number of arguments")),
            },
            HostValue::Builtin(Builtin::AggregateMax) => {
                if !(2..=3).contains(&args.len()) {
                    return Err(self.err("eval::arity", format!("`aggregate_max` takes 2 or 3 arguments, got {}", args.len()), span, "wrong number of arguments"));
                }
                let HostValue::Sel(sel) = args[0] else {
                    return Err(self.err(
                        "eval::type",
                        format!("the first argument of `aggregate_max` must be a selector, got {}", args[0].describe()),
                        arg_exprs[0].span,
                        "expected a selector",
                    ));
                };
                let values = self.sop_node(&args[1], arg_exprs[1].span, "the values of `aggregate_max`")?;
                let default = match args.get(2) {
                    None => Atom::Int(0),
                    Some(HostValue::Atom(a)) => a.clone(),
                    Some(other) => {
                        return Err(self.err("eval::type", format!("the default of `aggregate_max` must be an atom, got {}", other.describe()), arg_exprs[2].span, "expected an atom"))
                    }
                };
                Ok(HostValue::Sop(self.node(NodeKind::AggregateMax { sel, values, default }, span)?))
            }
            HostValue::Sop(n) | HostValue::Sel(n) => {
                if args.len() != 1 {
                    return Err(self.err("eval::arity", format!("an s-op is applied to one input, got {} arguments", args.len()), span, "wrong number of arguments"));
                }
                let input = host_input(&args[0]).map_err(|m| {
                    let d = self.err("eval::type", m, arg_exprs[0].span, "not a valid input");
                    // `length(tokens)`, `indices(x)`: a call of an s-op on an s-op (helper ed25:
                    // the message never said the callee is no function).
                    match (&args[0], &self.callee_name(span)) {
                        (HostValue::Sop(_) | HostValue::Sel(_), Some(name)) => Box::new(d.with_note(format!(
                            "`{name}` is an s-op, not a function: calling it runs it on an example input (`{name}(\"abc\")`); to use its value at every position, write `{name}` alone"
                        ))),
                        _ => d,
                    }
                })?;
                match interp::evaluate(&self.graph, n, &input) {
                    Ok(interp::Value::Seq(v)) => Ok(HostValue::List(Rc::new(v.into_iter().map(HostValue::Atom).collect()))),
                    Ok(interp::Value::Sel(m)) => {
                        Ok(HostValue::List(Rc::new(m.into_iter().map(|r| HostValue::List(Rc::new(r.into_iter().map(|b| HostValue::Atom(Atom::Bool(b))).collect()))).collect())))
                    }
                    Err(e) => Err(Box::new(
                        Diagnostic::error(
                            "eval::runtime",
                            format!("evaluating `{}` failed{}: {}", e.label, e.position.map(|p| format!(" at position {p}")).unwrap_or_default(), e.message),
                            e.span,
                        )
                        .with_label("this operation failed")
                        .with_secondary(span, "while applying the program to an input here"),
                    )),
                }
            }
            other => Err(self.err("eval::type", format!("{} cannot be called", other.a_kind()), fspan, "not a function")),
        }
    }

    fn unary(&mut self, op: UnaryOp, v: HostValue, vspan: Span, span: Span) -> R<HostValue> {
        let mop = match op {
            UnaryOp::Not => MapOp::Not,
            UnaryOp::Neg => MapOp::Neg,
            UnaryOp::Pos => MapOp::Pos,
            UnaryOp::Round => MapOp::Round,
            UnaryOp::Indicator => MapOp::Indicator,
        };
        match v {
            HostValue::Sop(n) => self.map(mop, vec![Operand::Sop(n)], span),
            HostValue::Atom(a) => self.map(mop, vec![Operand::Const(a)], span),
            HostValue::Sel(s) if op == UnaryOp::Not => Ok(HostValue::Sel(self.node(NodeKind::SelectNot(s), span)?)),
            ref other @ (HostValue::List(_) | HostValue::Dict(_)) if op == UnaryOp::Not => Ok(HostValue::Atom(Atom::Bool(!self.truthy(other, vspan)?))),
            other => Err(self.err("eval::type", format!("`{}` cannot be applied to {}", unary_name(op), other.a_kind()), vspan, format!("this is {}", other.a_kind()))),
        }
    }

    fn binary(&mut self, op: BinOp, a: HostValue, b: HostValue, aspan: Span, bspan: Span, span: Span) -> R<HostValue> {
        use HostValue as H;
        let is_sel = |v: &H| matches!(v, H::Sel(_));
        let is_sop = |v: &H| matches!(v, H::Sop(_));
        if matches!(op, BinOp::And | BinOp::Or) && (is_sel(&a) || is_sel(&b)) {
            return match (&a, &b) {
                (H::Sel(x), H::Sel(y)) => {
                    let kind = if op == BinOp::And { NodeKind::SelectAnd(*x, *y) } else { NodeKind::SelectOr(*x, *y) };
                    Ok(H::Sel(self.node(kind, span)?))
                }
                _ => {
                    let (bad, bspan2) = if is_sel(&a) { (&b, bspan) } else { (&a, aspan) };
                    Err(self.err("eval::type", format!("`{}` between a selector and {}", op.symbol(), bad.a_kind()), bspan2, "both sides must be selectors"))
                }
            };
        }
        if is_sel(&a) || is_sel(&b) {
            let s = if is_sel(&a) { aspan } else { bspan };
            let d = self.err("eval::type", format!("`{}` cannot be applied to a selector", op.symbol()), s, "a selector");
            // (Helper w31: `select(...) + 1` got no hint of what a selector is for.)
            return Err(Box::new(
                d.with_note("a selector says which keys each query attends to, not a value: `selector_width(sel)` counts them, `aggregate(sel, values)` averages their values"),
            ));
        }
        // An s-op compared with a list, a dict or a function: no position's value equals it
        // (the reference compares each value with the object, as Python's `1 == [1]`, False): a
        // constant False s-op, built as `x and False` (helper sc23: refused).
        if op == BinOp::Eq && (is_sop(&a) || is_sop(&b)) {
            let (sop, other) = if is_sop(&a) { (&a, &b) } else { (&b, &a) };
            if let (H::Sop(x), H::List(_) | H::Dict(_) | H::Func(_) | H::Builtin(_)) = (sop, other) {
                return self.map(MapOp::Binary(BinOp::And), vec![Operand::Sop(*x), Operand::Const(Atom::Bool(false))], span);
            }
        }
        if is_sop(&a) || is_sop(&b) {
            let x = self.operand(&a, aspan, &format!("the left side of `{}`", op.symbol()))?;
            let y = self.operand(&b, bspan, &format!("the right side of `{}`", op.symbol()))?;
            return self.map(MapOp::Binary(op), vec![x, y], span);
        }
        match (&a, &b) {
            (H::Atom(x), H::Atom(y)) => {
                let r = atom::binary(op, x, y).map(H::Atom).map_err(|e| self.err("eval::op", e.0, span, "evaluated here"))?;
                if let H::Atom(Atom::Str(s)) = &r {
                    self.charge(s.len() as u64, span)?;
                }
                Ok(r)
            }
            (H::List(x), H::List(y)) if op == BinOp::Add => {
                if x.len() + y.len() > MAX_LIST {
                    return Err(self.err("eval::too-big", "list too long", span, format!("at most {MAX_LIST} items")));
                }
                self.charge_items(x, span)?;
                self.charge_items(y, span)?;
                Ok(H::List(Rc::new(x.iter().chain(y.iter()).cloned().collect())))
            }
            (H::List(_) | H::Dict(_), _) | (_, H::List(_) | H::Dict(_)) if matches!(op, BinOp::And | BinOp::Or) => {
                let ta = self.truthy(&a, aspan)?;
                Ok(if (op == BinOp::And) == ta { b } else { a })
            }
            // Python's `==` between host values of any kinds: a list is never an atom (helper
            // a13: `[1] == 1` is False in the reference).
            (H::List(_) | H::Dict(_), _) | (_, H::List(_) | H::Dict(_)) if op == BinOp::Eq => Ok(H::Atom(Atom::Bool(host_eq(&a, &b)))),
            // A list repeated (`[0] * n`, Python's), a count below 1 giving the empty list.
            (H::List(l), H::Atom(n @ (Atom::Int(_) | Atom::Bool(_)))) | (H::Atom(n @ (Atom::Int(_) | Atom::Bool(_))), H::List(l)) if op == BinOp::Mul => {
                let times = match n {
                    Atom::Int(i) => (*i).max(0) as u128,
                    _ => u128::from(n.truthy()),
                };
                // (An empty list stays empty however many times: not a loop of 2^63 rounds.)
                if l.is_empty() {
                    return Ok(H::List(Rc::new(vec![])));
                }
                if times * l.len() as u128 > MAX_LIST as u128 {
                    return Err(self.err("eval::too-big", "list too long", span, format!("at most {MAX_LIST} items")));
                }
                let out: Vec<HostValue> = (0..times).flat_map(|_| l.iter().cloned()).collect();
                self.charge_items(&out, span)?;
                Ok(H::List(Rc::new(out)))
            }
            // Lists compare as Python's do: item by item, the first difference deciding, else the
            // shorter first.
            (H::List(_), H::List(_)) if matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge) => {
                let r = host_compare(op, &a, &b).map_err(|m| self.err("eval::type", format!("`{}` between lists: {m}", op.symbol()), span, "compared here"))?;
                Ok(H::Atom(Atom::Bool(r)))
            }
            _ => Err(self.err("eval::type", format!("`{}` between {} and {}", op.symbol(), a.a_kind(), b.a_kind()), span, "unsupported operand types")),
        }
    }

    fn contains(&mut self, x: HostValue, c: HostValue, xspan: Span, cspan: Span, span: Span) -> R<HostValue> {
        match (&x, &c) {
            (HostValue::Sop(n), HostValue::List(l)) => {
                let atoms = self.atoms_of(l, cspan, "the list after `in`")?;
                self.map(MapOp::In(atoms), vec![Operand::Sop(*n)], span)
            }
            (HostValue::Sop(n), HostValue::Dict(d)) => {
                let atoms = d.entries.iter().map(|(k, _)| k.clone()).collect();
                self.map(MapOp::In(atoms), vec![Operand::Sop(*n)], span)
            }
            (HostValue::Atom(a), HostValue::List(l)) => Ok(HostValue::Atom(Atom::Bool(l.iter().any(|v| matches!(v, HostValue::Atom(b) if b.py_eq(a)))))),
            (HostValue::Atom(a), HostValue::Dict(d)) => Ok(HostValue::Atom(Atom::Bool(d.get(a).is_some()))),
            (HostValue::Atom(Atom::Str(a)), HostValue::Atom(Atom::Str(s))) => Ok(HostValue::Atom(Atom::Bool(s.contains(a.as_str())))),
            (HostValue::Atom(a), HostValue::Sop(s)) => {
                // `atom in sop`: some position equals the atom.
                let zero = self.node(NodeKind::Const(Atom::Int(0)), span)?;
                let full = self.node(NodeKind::Select { keys: zero, queries: zero, cmp: Cmp::Eq }, span)?;
                let eq = self.node(NodeKind::Map { op: MapOp::Binary(BinOp::Eq), args: vec![Operand::Sop(*s), Operand::Const(a.clone())] }, span)?;
                let ind = self.node(NodeKind::Map { op: MapOp::Indicator, args: vec![Operand::Sop(eq)] }, span)?;
                let frac = self.node(NodeKind::Aggregate { sel: full, values: ind, default: Atom::Int(0) }, span)?;
                self.map(MapOp::Binary(BinOp::Gt), vec![Operand::Sop(frac), Operand::Const(Atom::Int(0))], span)
            }
            (HostValue::Sop(_), other) => Err(self.err("eval::type", format!("`s-op in X` needs X to be a list of atoms, got {}", other.describe()), cspan, "not a list")),
            _ => Err(self.err("eval::type", format!("`in` between {} and {}", x.a_kind(), c.a_kind()), xspan.to(cspan), "unsupported")),
        }
    }
}

fn unary_name(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Not => "not",
        UnaryOp::Neg => "-",
        UnaryOp::Pos => "+",
        UnaryOp::Round => "round",
        UnaryOp::Indicator => "indicator",
    }
}

/// `a op b` for an ordering `op` as CPython compares: atoms by the operator itself (NaN is
/// neither below nor above anything), lists item by item, the first pair that is not equal
/// deciding by `op` (review rv18: a three-way ordering made `[nan] >= [1]` True), else the
/// lengths.
fn host_compare(op: BinOp, a: &HostValue, b: &HostValue) -> Result<bool, String> {
    match (a, b) {
        (HostValue::Atom(x), HostValue::Atom(y)) => match atom::binary(op, x, y) {
            Ok(Atom::Bool(t)) => Ok(t),
            Ok(_) => Ok(false),
            Err(e) => Err(e.0),
        },
        (HostValue::List(x), HostValue::List(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                if !host_eq(p, q) {
                    return host_compare(op, p, q);
                }
            }
            let (n, m) = (x.len(), y.len());
            Ok(match op {
                BinOp::Lt => n < m,
                BinOp::Le => n <= m,
                BinOp::Gt => n > m,
                _ => n >= m,
            })
        }
        _ => Err(format!("{} and {} are not ordered", a.a_kind(), b.a_kind())),
    }
}

fn host_eq(a: &HostValue, b: &HostValue) -> bool {
    match (a, b) {
        (HostValue::Atom(x), HostValue::Atom(y)) => x.py_eq(y),
        (HostValue::List(x), HostValue::List(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| host_eq(p, q)),
        (HostValue::Dict(x), HostValue::Dict(y)) => x.entries.len() == y.entries.len() && x.entries.iter().all(|(k, v)| y.get(k).is_some_and(|w| host_eq(v, w))),
        (HostValue::Sop(x), HostValue::Sop(y)) | (HostValue::Sel(x), HostValue::Sel(y)) => x == y,
        _ => false,
    }
}

/// Converts a host value used as a program input: a string is split into characters.
pub fn host_input(v: &HostValue) -> Result<Vec<Atom>, String> {
    match v {
        HostValue::Atom(Atom::Str(s)) => Ok(s.chars().map(|c| Atom::Str(c.to_string())).collect()),
        HostValue::List(l) => l
            .iter()
            .map(|x| match x {
                HostValue::Atom(a) => Ok(a.clone()),
                other => Err(format!("an input list must hold atoms, found {}", other.a_kind())),
            })
            .collect(),
        other => Err(format!("an input must be a string or a list of atoms, got {}", other.describe())),
    }
}

/// Notes on a file's text that the reference's line-by-line reader would not run as raspc does
/// (raspc runs them; the note says what the reference does instead): two statements sharing a
/// line (the reference refuses a line holding more than one statement, and none of them runs),
/// and a `#` comment after code inside a statement (its grammar takes a comment only after a
/// whole statement: a syntax error, and the statement is skipped; a line that is only a
/// comment is blanked by its reader, so it is not one).
fn reference_reading_notes(file: FileId, text: &str, prog: &crate::ast::Program) -> Vec<Diagnostic> {
    // (A scan of the file per statement made 100,000 statements take 38 s.)
    let lines = crate::span::LineBreaks::new(text);
    let line_of = |offset: u32| lines.line_of(offset as usize);
    // Comment starts: a `#` between two tokens, after code on its line. The reference's line
    // reader blanks a line that is only a comment before parsing (helper a13: such a line
    // inside a statement was noted as skipping it, and the reference runs it).
    let (tokens, _) = crate::lexer::lex(file, text);
    let mut comments = vec![];
    let mut prev_end = 0usize;
    for t in &tokens {
        let gap = text.get(prev_end..(t.span.start as usize).max(prev_end)).unwrap_or("");
        if let Some(i) = gap.find('#') {
            let at = prev_end + i;
            let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
            if !text[line_start..at].trim().is_empty() {
                comments.push(at as u32);
            }
        }
        prev_end = t.span.end as usize;
    }
    let mut notes = vec![];
    fn leaves(stmts: &[Stmt], out: &mut Vec<Span>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Def(f) => {
                    leaves(&f.body, out);
                    out.push(f.ret_span);
                }
                StmtKind::For { body, .. } => leaves(body, out),
                _ => out.push(s.span),
            }
        }
    }
    let mut spans = vec![];
    leaves(&prog.stmts, &mut spans);
    for span in spans {
        // Comments are in file order: the first one after the statement's start.
        if let Some(&c) = comments.get(comments.partition_point(|&c| c <= span.start)).filter(|&&c| c < span.end) {
            notes.push(
                Diagnostic::note_at("eval::reference-skips", "a `#` comment inside a statement: the reference skips this statement", Span::new(file, c as usize, c as usize + 1))
                    .with_label("comment here")
                    .with_secondary(span, "the statement")
                    .with_note("the reference's grammar takes a comment only after a whole statement, so there this is a syntax error and the statement does not run; raspc reads the comment as a space (put it at the end of the statement's last line to run the same in both)"),
            );
        }
    }
    for &semi in &prog.stray_semis {
        notes.push(
            Diagnostic::note_at("eval::reference-skips", "a stray `;`: the reference skips this line", semi)
                .with_label("an empty statement")
                .with_note("the reference's grammar has no empty statement, so a line with `;;` or a leading `;` is a syntax error there and none of its statements runs; raspc ignores the `;` (remove it to run the same in both)"),
        );
    }
    // `s-op` written without spaces: one word to the reference's lexer (its REPL commands'
    // `set s-op example`), so an expression `s-op` does not parse there.
    for (i, w) in tokens.windows(3).enumerate() {
        let word = |t: &crate::lexer::Token, want: &str| matches!(&t.tok, Tok::Ident(x) if x == want);
        let repl = i.checked_sub(1).is_some_and(|j| word(&tokens[j], "set") || word(&tokens[j], "show")) || tokens.get(i + 3).is_some_and(|t| word(t, "example") || word(t, "examples"));
        if word(&w[0], "s") && w[1].tok == Tok::Minus && word(&w[2], "op") && w[0].span.end == w[1].span.start && w[1].span.end == w[2].span.start && !repl {
            notes.push(
                Diagnostic::note_at("eval::reference-skips", "`s-op` without spaces: the reference skips this statement", Span::new(file, w[0].span.start as usize, w[2].span.end as usize))
                    .with_label("raspc reads `s - op`")
                    .with_note("the reference's lexer reads `s-op` as one word (a keyword of its REPL commands), so there this line is a syntax error and does not run; write `s - op` to run the same in both"),
            );
        }
    }
    for w in prog.stmts.windows(2) {
        if line_of(w[1].span.start) == line_of(w[0].span.end.saturating_sub(1)) {
            notes.push(
                Diagnostic::note_at("eval::reference-skips", "two statements on one line: the reference runs neither", w[1].span)
                    .with_label("this statement starts on the line where the previous one ends")
                    .with_secondary(w[0].span, "the previous statement")
                    .with_note("the reference reads a file line by line and refuses a line that completes more than one statement; raspc runs both (one statement per line runs the same in both)"),
            );
        }
    }
    notes
}

/// A program file's text as read: without a UTF-8 byte-order mark (as some editors write), and
/// with old Mac line ends (a lone `\r`) read as line breaks, as Python (and so the reference)
/// reads them. `\r\n` becomes `\n` too (lines and columns stay those of the file), so that a
/// program's hash (and a checkpoint compiled from it) does not depend on the line endings an
/// editor or a Windows checkout wrote (helper dt26: the same program with CRLF gave a
/// checkpoint of other bytes, and `trace` said it was not compiled from it).
fn source_text(text: &str) -> std::borrow::Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The items of a value that has them, as Python iterates it: a list's items, a dict's keys, a
/// string's characters.
fn unpack_items(v: &HostValue) -> Option<Vec<HostValue>> {
    match v {
        HostValue::List(l) => Some(l.as_ref().clone()),
        HostValue::Dict(d) => Some(d.entries.iter().map(|(k, _)| HostValue::Atom(k.clone())).collect()),
        HostValue::Atom(Atom::Str(s)) => Some(s.chars().map(|c| HostValue::Atom(Atom::Str(c.to_string()))).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod assigned_tests {
    use super::{evaluate_program, MemoryLoader};

    /// Names in order of their last top-level assignment in the main file, each once (kept with
    /// O(1) work per assignment; the default entry is the last one holding an s-op).
    #[test]
    fn reassigned_names_move_to_the_end_once() {
        let text = "a = tokens; b = 1; c = indices; a = a + 1; def f(x) { d = x; return d; } e = f(tokens); b = 2;";
        let (_, s) = evaluate_program("t.rasp", None, text, &MemoryLoader::default());
        let s = s.expect("evaluates");
        assert_eq!(s.assigned, ["c", "a", "e", "b"]);
        assert_eq!(s.default_entry().as_deref(), Some("e"));
    }

    /// A file of functions of no arguments (the TMA paper's style) says how to run one, with or
    /// without `--entry` (helper a21: "is a function", and `f()` "is not defined").
    #[test]
    fn functions_of_no_arguments_are_named_as_entries_to_call() {
        let text = "A = [1, 2];\ndef g(x) { return x; }\ndef Transpose() { return g(tokens); }\ndef Other() { return indices; }\n";
        let (_, s) = evaluate_program("t.rasp", None, text, &MemoryLoader::default());
        let s = s.expect("evaluates");
        let e = s.entry(None).unwrap_err();
        assert!(e.ends_with("; it defines functions `Transpose`, `Other` of no arguments: call one (`prog = Transpose();`)"), "{e}");
        let e = s.entry(Some("Transpose")).unwrap_err();
        assert_eq!(e, "entry `Transpose` is a function of no arguments, not an s-op or selector: add `prog = Transpose();` to the program and run `prog` (or no --entry)");
        assert!(s.entry(Some("Other()")).unwrap_err().starts_with("--entry takes a name, not a call: add `prog = Other();`"));
        // A function of arguments and an unknown call are said as before.
        assert_eq!(s.entry(Some("g")).unwrap_err(), "entry `g` is a function, not an s-op or selector");
        assert!(s.entry(Some("h()")).unwrap_err().starts_with("entry `h()` is not defined by the program"));
        // A call of a function that takes arguments, or a call of a call, is no such hint.
        assert!(s.entry(Some("g()")).unwrap_err().starts_with("entry `g()` is not defined by the program"));
        assert!(s.entry(Some("Other()()")).unwrap_err().starts_with("entry `Other()()` is not defined by the program"));
        // A file of definitions only (the TMA paper's files: review rv21).
        let (_, s) = evaluate_program("t.rasp", None, "def T() { return tokens; }\ndef U(x) { return x; }\n", &MemoryLoader::default());
        let e = s.expect("evaluates").entry(None).unwrap_err();
        assert!(e.starts_with("the program assigns no name") && e.ends_with("; it defines the function `T` of no arguments: call one (`prog = T();`)"), "{e}");
    }
}
