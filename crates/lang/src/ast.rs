//! The abstract syntax tree. Every node carries the [`Span`] of the text it came from.

use crate::span::Span;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
    Pos,
    Round,
    Indicator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Pow,
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    Eq,
    Le,
    Ge,
    Lt,
    Gt,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Pow => "^",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Eq => "==",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// The comparison of a `select`: key `k` is selected for query `q` iff `keys[k] op queries[q]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Expr>),
    Dict(Vec<(Expr, Expr)>),
    Index {
        target: Box<Expr>,
        index: Box<Expr>,
    },
    Call {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Select {
        keys: Box<Expr>,
        queries: Box<Expr>,
        cmp: Cmp,
    },
    Aggregate {
        sel: Box<Expr>,
        values: Box<Expr>,
        default: Option<Box<Expr>>,
    },
    Ternary {
        then: Box<Expr>,
        cond: Box<Expr>,
        otherwise: Box<Expr>,
    },
    Range(Vec<Expr>),
    Zip(Vec<Expr>),
    Len(Box<Expr>),
    ListComp {
        body: Box<Expr>,
        vars: Vec<Ident>,
        iter: Box<Expr>,
    },
    DictComp {
        key: Box<Expr>,
        value: Box<Expr>,
        vars: Vec<Ident>,
        iter: Box<Expr>,
    },
    In {
        item: Box<Expr>,
        container: Box<Expr>,
    },
    /// Placeholder left where the parser recovered from an error.
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncDef {
    pub name: Ident,
    pub params: Vec<Ident>,
    pub body: Vec<Stmt>,
    pub ret: Vec<Expr>,
    pub ret_span: Span,
}

/// A statement only the reference REPL understands; accepted and ignored with a note.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplKind {
    SetExample,
    ShowExample,
    ToggleExamples,
    FullSeqDisplay,
    Exit,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Expr(Expr),
    Assign { targets: Vec<Ident>, values: Vec<Expr> },
    Def(Rc<FuncDef>),
    For { vars: Vec<Ident>, iter: Expr, body: Rc<Vec<Stmt>> },
    Load { path: String, path_span: Span },
    Draw { target: Expr, input: Option<Expr> },
    Repl { kind: ReplKind, arg: Option<Expr> },
}

/// A parsed file.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub stmts: Vec<Stmt>,
    /// Empty statements: a `;` where a statement starts (`;;`, a leading `;`). raspc skips
    /// them; the reference's grammar has none, so it refuses the line.
    pub stray_semis: Vec<crate::span::Span>,
}
