//! The expression language of Bases filters and formulas: a lexer and a precedence-climbing
//! parser into [`Expr`], bounded in length and depth.
//!
//! The grammar is JavaScript's expression subset that Obsidian documents: literals (numbers,
//! strings in either quote, `true`/`false`/`null`, lists `[..]`, objects `{"k": v}`, regular
//! expressions `/re/flags`), names, member access (`a.b`, `a["b"]`, `a[0]`), calls (`f(x)`,
//! `a.m(x)`), unary `!` and `-`, and the binary operators by JavaScript precedence:
//! `||` < `&&` < `==` `!=` < `<` `<=` `>` `>=` < `+` `-` < `*` `/` `%`.

use std::fmt;
use std::sync::Arc;

use super::value::{Pattern, Value};

/// Longest expression accepted, in bytes.
pub const MAX_EXPR_BYTES: usize = 16 * 1024;
/// Deepest nesting of an expression (parentheses, calls, operators).
pub const MAX_DEPTH: usize = 64;
/// Largest compiled regular expression, in bytes (the `regex` crate's size limit).
pub const MAX_REGEX_BYTES: usize = 256 * 1024;

/// A parse error: what went wrong and where (0-based byte offset in the expression).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Byte offset in the expression.
    pub pos: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (column {})", self.message, self.pos + 1)
    }
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
}

impl BinOp {
    fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne => 3,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        }
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

/// A parsed expression node with its position (byte offset in the source).
#[derive(Debug, Clone)]
pub struct Expr {
    /// What the node is.
    pub kind: ExprKind,
    /// Byte offset of the node in the expression.
    pub pos: u32,
}

/// The kinds of [`Expr`].
#[derive(Debug, Clone)]
pub enum ExprKind {
    /// A literal value (number, string, boolean, null, regular expression).
    Lit(Value),
    /// A bare name: `price`, `file`, `this`, `value`.
    Name(Arc<str>),
    /// `object.field`.
    Member(Box<Expr>, Arc<str>),
    /// `object[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `name(args)`: a global function.
    Call(Arc<str>, Vec<Expr>),
    /// `receiver.name(args)`: a method.
    Method(Box<Expr>, Arc<str>, Vec<Expr>),
    /// `!x`
    Not(Box<Expr>),
    /// `-x`
    Neg(Box<Expr>),
    /// `a op b`
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `[a, b]`
    List(Vec<Expr>),
    /// `{"k": v}`
    Object(Vec<(Arc<str>, Expr)>),
}

impl Expr {
    /// Every `formula.NAME` this expression refers to.
    pub fn formula_refs(&self, out: &mut Vec<Arc<str>>) {
        match &self.kind {
            ExprKind::Member(obj, name) => {
                if matches!(&obj.kind, ExprKind::Name(n) if &**n == "formula") {
                    out.push(name.clone());
                } else {
                    obj.formula_refs(out);
                }
            }
            ExprKind::Index(obj, idx) => {
                if let (ExprKind::Name(n), ExprKind::Lit(Value::String(s))) = (&obj.kind, &idx.kind)
                    && &**n == "formula"
                {
                    out.push(s.clone());
                }
                obj.formula_refs(out);
                idx.formula_refs(out);
            }
            ExprKind::Call(_, args) | ExprKind::List(args) => {
                args.iter().for_each(|a| a.formula_refs(out));
            }
            ExprKind::Method(recv, _, args) => {
                recv.formula_refs(out);
                args.iter().for_each(|a| a.formula_refs(out));
            }
            ExprKind::Not(e) | ExprKind::Neg(e) => e.formula_refs(out),
            ExprKind::Binary(_, a, b) => {
                a.formula_refs(out);
                b.formula_refs(out);
            }
            ExprKind::Object(items) => items.iter().for_each(|(_, e)| e.formula_refs(out)),
            ExprKind::Lit(_) | ExprKind::Name(_) => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(Arc<str>),
    Ident(Arc<str>),
    Regex(Arc<str>, Arc<str>),
    Punct(&'static str),
    End,
}

/// Parses one expression.
///
/// ```
/// use capvault::obsidian::bases::expr::parse;
///
/// assert!(parse(r#"file.hasTag("book") && rating > 4"#).is_ok());
/// let err = parse("price +").unwrap_err();
/// assert_eq!(err.pos, 7);
/// ```
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if src.len() > MAX_EXPR_BYTES {
        return Err(ParseError {
            message: format!("expression longer than {} KiB", MAX_EXPR_BYTES / 1024),
            pos: 0,
        });
    }
    let mut p = Parser {
        src,
        at: 0,
        tok: Tok::End,
        tok_pos: 0,
        depth: 0,
    };
    p.advance(true)?;
    let e = p.expr(0)?;
    if p.tok != Tok::End {
        return Err(p.error(format!("unexpected {}", p.describe())));
    }
    Ok(e)
}

struct Parser<'s> {
    src: &'s str,
    /// Byte offset after the current token.
    at: usize,
    tok: Tok,
    tok_pos: usize,
    depth: usize,
}

const PUNCTS: &[&str] = &[
    "&&", "||", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "!", "<", ">",
    "+", "-", "*", "/", "%",
];

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            message: message.into(),
            pos: self.tok_pos,
        }
    }

    fn describe(&self) -> String {
        match &self.tok {
            Tok::End => "end of expression".into(),
            Tok::Num(_) => "number".into(),
            Tok::Str(_) => "string".into(),
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Regex(..) => "regular expression".into(),
            Tok::Punct(p) => format!("`{p}`"),
        }
    }

    /// Reads the next token; `operand` says an operand is expected (so `/` starts a regex).
    fn advance(&mut self, operand: bool) -> Result<(), ParseError> {
        let bytes = self.src.as_bytes();
        while self.at < bytes.len() && (bytes[self.at] as char).is_ascii_whitespace() {
            self.at += 1;
        }
        self.tok_pos = self.at;
        let Some(c) = self.src[self.at..].chars().next() else {
            self.tok = Tok::End;
            return Ok(());
        };
        if c.is_ascii_digit() {
            let start = self.at;
            let mut end = start;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            if end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit() {
                end += 1;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
            }
            if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
                let mut e = end + 1;
                if e < bytes.len() && (bytes[e] == b'+' || bytes[e] == b'-') {
                    e += 1;
                }
                if e < bytes.len() && bytes[e].is_ascii_digit() {
                    while e < bytes.len() && bytes[e].is_ascii_digit() {
                        e += 1;
                    }
                    end = e;
                }
            }
            let n: f64 = self.src[start..end]
                .parse()
                .map_err(|_| self.error("malformed number"))?;
            self.at = end;
            self.tok = Tok::Num(n);
            return Ok(());
        }
        if c == '"' || c == '\'' {
            let s = self.string(c)?;
            self.tok = Tok::Str(s.into());
            return Ok(());
        }
        if c == '/' && operand {
            return self.regex();
        }
        if c.is_alphabetic() || c == '_' || c == '$' {
            let start = self.at;
            let end = self.src[start..]
                .char_indices()
                .find(|&(_, ch)| !(ch.is_alphanumeric() || ch == '_' || ch == '$'))
                .map_or(self.src.len(), |(i, _)| start + i);
            self.at = end;
            self.tok = Tok::Ident(self.src[start..end].into());
            return Ok(());
        }
        for p in PUNCTS {
            if self.src[self.at..].starts_with(p) {
                self.at += p.len();
                self.tok = Tok::Punct(p);
                return Ok(());
            }
        }
        Err(self.error(format!("unexpected character `{c}`")))
    }

    fn string(&mut self, quote: char) -> Result<String, ParseError> {
        let mut out = String::new();
        let mut chars = self.src[self.at + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.at += 1 + i + 1;
                return Ok(out);
            }
            if c == '\\' {
                let Some((_, e)) = chars.next() else { break };
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    other => other,
                });
            } else {
                out.push(c);
            }
        }
        Err(self.error("unterminated string"))
    }

    fn regex(&mut self) -> Result<(), ParseError> {
        let body_start = self.at + 1;
        let mut in_class = false;
        let mut chars = self.src[body_start..].char_indices();
        let mut body_end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '[' => in_class = true,
                ']' => in_class = false,
                '/' if !in_class => {
                    body_end = Some(body_start + i);
                    break;
                }
                '\n' => break,
                _ => {}
            }
        }
        let Some(body_end) = body_end else {
            return Err(self.error("unterminated regular expression"));
        };
        let flags_start = body_end + 1;
        let flags_end = self.src[flags_start..]
            .char_indices()
            .find(|&(_, c)| !c.is_ascii_alphabetic())
            .map_or(self.src.len(), |(i, _)| flags_start + i);
        self.tok = Tok::Regex(
            self.src[body_start..body_end].into(),
            self.src[flags_start..flags_end].into(),
        );
        self.at = flags_end;
        Ok(())
    }

    fn eat(&mut self, p: &str, operand_next: bool) -> Result<bool, ParseError> {
        if self.tok == Tok::Punct(punct(p)) {
            self.advance(operand_next)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect(&mut self, p: &'static str, operand_next: bool) -> Result<(), ParseError> {
        if !self.eat(p, operand_next)? {
            return Err(self.error(format!("expected `{p}`, found {}", self.describe())));
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("expression nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    fn binop(&self) -> Option<BinOp> {
        let Tok::Punct(p) = self.tok else { return None };
        Some(match p {
            "||" => BinOp::Or,
            "&&" => BinOp::And,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            "<" => BinOp::Lt,
            "<=" => BinOp::Le,
            ">" => BinOp::Gt,
            ">=" => BinOp::Ge,
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "%" => BinOp::Rem,
            _ => return None,
        })
    }

    fn expr(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        self.enter()?;
        let mut left = self.unary()?;
        while let Some(op) = self.binop() {
            let prec = op.precedence();
            if prec <= min_prec {
                break;
            }
            let pos = self.tok_pos as u32;
            self.advance(true)?;
            let right = self.expr(prec)?;
            left = Expr {
                kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
                pos,
            };
        }
        self.depth -= 1;
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let pos = self.tok_pos as u32;
        if self.eat("!", true)? {
            self.enter()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(e)),
                pos,
            });
        }
        if self.eat("-", true)? {
            self.enter()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(e)),
                pos,
            });
        }
        if self.eat("+", true)? {
            return self.unary();
        }
        let primary = self.primary()?;
        self.postfix(primary)
    }

    fn postfix(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        let mut chain = 0;
        loop {
            let pos = self.tok_pos as u32;
            if self.eat(".", false)? {
                let Tok::Ident(name) = self.tok.clone() else {
                    return Err(self.error(format!(
                        "expected a name after `.`, found {}",
                        self.describe()
                    )));
                };
                self.advance(false)?;
                if self.eat("(", true)? {
                    let args = self.args(")")?;
                    e = Expr {
                        kind: ExprKind::Method(Box::new(e), name, args),
                        pos,
                    };
                } else {
                    e = Expr {
                        kind: ExprKind::Member(Box::new(e), name),
                        pos,
                    };
                }
            } else if self.eat("[", true)? {
                self.enter()?;
                let idx = self.expr(0)?;
                self.depth -= 1;
                self.expect("]", false)?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), Box::new(idx)),
                    pos,
                };
            } else {
                return Ok(e);
            }
            chain += 1;
            if chain > MAX_DEPTH {
                return Err(self.error(format!("more than {MAX_DEPTH} accesses in a row")));
            }
        }
    }

    fn args(&mut self, close: &'static str) -> Result<Vec<Expr>, ParseError> {
        self.enter()?;
        let mut args = Vec::new();
        if !self.eat(close, false)? {
            loop {
                args.push(self.expr(0)?);
                if self.eat(close, false)? {
                    break;
                }
                self.expect(",", true)?;
                // A trailing comma before the closing bracket.
                if self.eat(close, false)? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Ok(args)
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let pos = self.tok_pos as u32;
        let kind = match self.tok.clone() {
            Tok::Num(n) => {
                self.advance(false)?;
                ExprKind::Lit(Value::Number(n))
            }
            Tok::Str(s) => {
                self.advance(false)?;
                ExprKind::Lit(Value::String(s))
            }
            Tok::Regex(body, flags) => {
                let pattern = Pattern::new(&body, &flags).map_err(|e| self.error(e.to_string()))?;
                self.advance(false)?;
                ExprKind::Lit(Value::Regex(Arc::new(pattern)))
            }
            Tok::Ident(name) => {
                self.advance(false)?;
                match &*name {
                    "true" => ExprKind::Lit(Value::Bool(true)),
                    "false" => ExprKind::Lit(Value::Bool(false)),
                    "null" | "undefined" => ExprKind::Lit(Value::Null),
                    _ => {
                        if self.eat("(", true)? {
                            let args = self.args(")")?;
                            ExprKind::Call(name, args)
                        } else {
                            ExprKind::Name(name)
                        }
                    }
                }
            }
            Tok::Punct("(") => {
                self.advance(true)?;
                self.enter()?;
                let e = self.expr(0)?;
                self.depth -= 1;
                self.expect(")", false)?;
                return Ok(e);
            }
            Tok::Punct("[") => {
                self.advance(true)?;
                ExprKind::List(self.args("]")?)
            }
            Tok::Punct("{") => {
                self.advance(true)?;
                self.enter()?;
                let mut items = Vec::new();
                if !self.eat("}", false)? {
                    loop {
                        let key: Arc<str> = match self.tok.clone() {
                            Tok::Str(s) | Tok::Ident(s) => s,
                            _ => {
                                return Err(self.error(format!(
                                    "expected an object key, found {}",
                                    self.describe()
                                )));
                            }
                        };
                        self.advance(false)?;
                        self.expect(":", true)?;
                        items.push((key, self.expr(0)?));
                        if self.eat("}", false)? {
                            break;
                        }
                        self.expect(",", false)?;
                    }
                }
                self.depth -= 1;
                ExprKind::Object(items)
            }
            _ => {
                return Err(self.error(format!("expected a value, found {}", self.describe())));
            }
        };
        Ok(Expr { kind, pos })
    }
}

/// The `'static` spelling of a punctuation token.
fn punct(p: &str) -> &'static str {
    PUNCTS.iter().find(|q| **q == p).copied().unwrap_or("")
}
