//! The syntax tree of a DQL query.

use crate::obsidian::dataview::Value;

/// A parsed query: its type, the optional `FROM` source and the data commands in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub header: Header,
    pub source: Option<Source>,
    pub commands: Vec<Command>,
}

/// The query type.
#[derive(Debug, Clone, PartialEq)]
pub enum Header {
    /// `LIST [WITHOUT ID] [expr]`.
    List {
        without_id: bool,
        expr: Option<Expr>,
    },
    /// `TABLE [WITHOUT ID] expr [AS name], ...`.
    Table {
        without_id: bool,
        columns: Vec<Column>,
    },
    /// `TASK`.
    Task,
    /// `CALENDAR expr`.
    Calendar(Expr),
}

/// A table column: its expression and its name (the `AS` name, else the expression's text).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub expr: Expr,
    pub name: String,
}

/// A `FROM` source.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `#tag` (with `#`): pages with the tag or a tag nested under it.
    Tag(String),
    /// `"folder"` or `"folder/file"`.
    Path(String),
    /// `[[note]]`: pages linking to the note (`[[]]` and `[[#]]`: the current page).
    Link(String),
    /// `outgoing([[note]])`: pages the note links to.
    Outgoing(String),
    And(Box<Source>, Box<Source>),
    Or(Box<Source>, Box<Source>),
    /// `-source` or `!source`.
    Not(Box<Source>),
}

/// A data command.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Where(Expr),
    /// Keys with `true` for descending.
    Sort(Vec<(Expr, bool)>),
    /// The expression and the name the key is also bound to.
    GroupBy(Expr, Option<String>),
    /// The expression and the name each element is bound to (default: the expression's text).
    Flatten(Expr, String),
    Limit(Expr),
}

/// An expression, with the byte offset where it starts in the query.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: u32,
}

/// The keywords of `date(...)` that depend on the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateKeyword {
    Today,
    Now,
    Tomorrow,
    Yesterday,
    Sow,
    Eow,
    Som,
    Eom,
    Soy,
    Eoy,
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Eq => "=",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// What an expression is.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// A constant (numbers, strings, links, `date(2021-04-18)`, `dur(1 day)`, `null`, booleans).
    Literal(Value),
    /// `date(today)` and the other clock keywords.
    DateKeyword(DateKeyword),
    /// A bare name.
    Field(String),
    /// `a.b`.
    Dot(Box<Expr>, String),
    /// `a[expr]`.
    Index(Box<Expr>, Box<Expr>),
    /// `f(a, b)`.
    Call(String, Vec<Expr>),
    /// `(x, y) => body`.
    Lambda(Vec<String>, Box<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{ a: 1, "b c": 2 }`.
    Object(Vec<(String, Expr)>),
    /// `-a`.
    Neg(Box<Expr>),
    /// `!a`.
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}
