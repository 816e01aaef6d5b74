//! The DQL parser: a hand-written recursive descent over the query's bytes, one token of
//! look-ahead (a lambda's parameter list is the only place read twice, and that scan stops at
//! the first character that is not a name, comma or space), so time is linear in the query.

use super::ast::{BinOp, Column, Command, DateKeyword, Expr, ExprKind, Header, Query, Source};
use crate::obsidian::dataview::Value;
use crate::obsidian::dataview::value::{
    date as date_literal, duration as duration_literal, embed_link,
};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;
/// Deepest nesting of expressions (parentheses, lists, objects, calls, operators' operands).
pub const MAX_DEPTH: usize = 64;

/// Deepest expression tree accepted (evaluation recurses on it).
pub const MAX_TREE_DEPTH: usize = 200;

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The text does not follow the grammar.
    Syntax,
    /// Longer than [`MAX_QUERY_BYTES`].
    TooLong,
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// `dataviewjs` or `$=`: JavaScript, which capvault never runs.
    JavaScript,
}

/// A query that could not be parsed: where (byte offset, 1-based line and column in
/// characters) and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub offset: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn at(
        src: &str,
        offset: usize,
        kind: ParseErrorKind,
        message: String,
    ) -> ParseError {
        let offset = offset.min(src.len());
        let mut o = offset;
        while !src.is_char_boundary(o) {
            o -= 1;
        }
        let before = &src[..o];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        ParseError {
            kind,
            offset,
            line,
            column,
            message,
        }
    }
}

/// Refuses JavaScript (`$=` inline queries).
fn refuse_js(text: &str) -> Result<(), ParseError> {
    if text.trim_start().starts_with("$=") {
        return Err(ParseError::at(
            text,
            0,
            ParseErrorKind::JavaScript,
            "this is a DataviewJS query (`$=`): capvault never runs JavaScript".into(),
        ));
    }
    Ok(())
}

/// Parses a DQL query (the body of a ```` ```dataview ```` block).
pub fn parse_query(text: &str) -> Result<Query, ParseError> {
    refuse_js(text)?;
    let mut p = Parser::new(text)?;
    let q = p.query()?;
    let mut exprs: Vec<&Expr> = Vec::new();
    match &q.header {
        Header::List { expr, .. } => exprs.extend(expr.iter()),
        Header::Table { columns, .. } => exprs.extend(columns.iter().map(|c| &c.expr)),
        Header::Task => {}
        Header::Calendar(e) => exprs.push(e),
    }
    for c in &q.commands {
        match c {
            Command::Where(e)
            | Command::Limit(e)
            | Command::GroupBy(e, _)
            | Command::Flatten(e, _) => exprs.push(e),
            Command::Sort(keys) => exprs.extend(keys.iter().map(|(e, _)| e)),
        }
    }
    for e in exprs {
        check_tree_depth(text, e)?;
    }
    Ok(q)
}

/// Refuses an expression whose tree is deeper than [`MAX_TREE_DEPTH`] (walked without
/// recursion).
fn check_tree_depth(text: &str, e: &Expr) -> Result<(), ParseError> {
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        if d > MAX_TREE_DEPTH {
            return Err(ParseError::at(
                text,
                e.pos as usize,
                ParseErrorKind::TooDeep,
                format!("the expression nests deeper than {MAX_TREE_DEPTH} levels"),
            ));
        }
        let d = d + 1;
        match &e.kind {
            ExprKind::Literal(_) | ExprKind::DateKeyword(_) | ExprKind::Field(_) => {}
            ExprKind::Dot(b, _) | ExprKind::Neg(b) | ExprKind::Not(b) | ExprKind::Lambda(_, b) => {
                stack.push((b, d))
            }
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
                stack.push((a, d));
                stack.push((b, d));
            }
            ExprKind::Call(_, items) | ExprKind::List(items) => {
                stack.extend(items.iter().map(|i| (i, d)))
            }
            ExprKind::Object(entries) => stack.extend(entries.iter().map(|(_, v)| (v, d))),
        }
    }
    Ok(())
}

/// Parses the body of a code block in `language`: `dataview` is a query, `dataviewjs` is
/// refused (JavaScript is never run).
pub fn parse_block(language: &str, body: &str) -> Result<Query, ParseError> {
    if language.trim().eq_ignore_ascii_case("dataviewjs") {
        return Err(ParseError::at(
            body,
            0,
            ParseErrorKind::JavaScript,
            "`dataviewjs` blocks are JavaScript, which capvault never runs".into(),
        ));
    }
    parse_query(body)
}

/// Parses one expression (an inline query's text after `=`, or a test's expression).
pub fn parse_expression(text: &str) -> Result<Expr, ParseError> {
    refuse_js(text)?;
    let mut p = Parser::new(text)?;
    p.skip_ws();
    let e = p.expr()?;
    p.skip_ws();
    if p.pos < p.b.len() {
        return Err(p.error("an operator or the end of the expression"));
    }
    check_tree_depth(text, &e)?;
    Ok(e)
}

/// Words that start a clause: a column or a list's expression cannot be one of them.
const CLAUSE_WORDS: [&str; 6] = ["from", "where", "sort", "group", "flatten", "limit"];
/// Names that cannot be variables (Dataview's own list).
const RESERVED: [&str; 5] = ["from", "where", "limit", "group", "flatten"];

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
}

/// A letter or an emoji (an identifier's first character).
fn ident_start(c: char) -> bool {
    c.is_alphabetic() || is_emoji(c)
}

fn ident_char(c: char) -> bool {
    ident_start(c) || c.is_ascii_digit() || c == '_' || c == '-' || c.is_numeric()
}

/// Pictographs, symbols and their modifiers (an approximation of Unicode's emoji set).
fn is_emoji(c: char) -> bool {
    matches!(c as u32, 0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0xFE0F | 0x200D | 0x2300..=0x23FF)
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Result<Parser<'a>, ParseError> {
        if src.len() > MAX_QUERY_BYTES {
            return Err(ParseError::at(
                src,
                MAX_QUERY_BYTES,
                ParseErrorKind::TooLong,
                format!("the query is longer than {MAX_QUERY_BYTES} bytes"),
            ));
        }
        Ok(Parser {
            src,
            b: src.as_bytes(),
            pos: 0,
            depth: 0,
        })
    }

    fn error(&self, expected: &str) -> ParseError {
        let word: String = self.src[self.pos..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(12)
            .collect();
        let found = if self.pos >= self.b.len() {
            "the end of the query".to_owned()
        } else if word.is_empty() {
            "white space".to_owned()
        } else {
            format!("`{word}`")
        };
        ParseError::at(
            self.src,
            self.pos,
            ParseErrorKind::Syntax,
            format!("expected {expected}, found {found}"),
        )
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek_at(&self, off: usize) -> Option<u8> {
        self.b.get(self.pos + off).copied()
    }

    /// White space and `//` comment lines.
    fn skip_ws(&mut self) {
        loop {
            while let Some(c) = self.peek() {
                if c.is_whitespace() {
                    self.pos += c.len_utf8();
                } else {
                    break;
                }
            }
            // Only spaces and tabs are between the line's start and the cursor (the cursor
            // sits after all white space, so this walks back over the indent only).
            let indent = self.b[..self.pos]
                .iter()
                .rev()
                .take_while(|c| matches!(c, b' ' | b'\t'))
                .count();
            let line_start =
                self.pos == indent || matches!(self.b[self.pos - indent - 1], b'\n' | b'\r');
            if line_start && self.src[self.pos..].starts_with("//") {
                self.pos = self.src[self.pos..]
                    .find('\n')
                    .map_or(self.b.len(), |i| self.pos + i);
                continue;
            }
            break;
        }
    }

    /// Skips spaces and tabs only (inside a line).
    fn skip_inline_ws(&mut self) {
        while matches!(self.peek_at(0), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.src[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(&format!("`{s}`")))
        }
    }

    /// Is the keyword `word` (any case) at the cursor, followed by a non-name character?
    fn at_keyword(&self, word: &str) -> bool {
        let rest = &self.b[self.pos..];
        rest.len() >= word.len()
            && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
            && !self.src[self.pos + word.len()..]
                .chars()
                .next()
                .is_some_and(ident_char)
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        if self.at_keyword(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn at_clause(&self) -> bool {
        CLAUSE_WORDS.iter().any(|w| self.at_keyword(w))
    }

    fn deeper(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::at(
                self.src,
                self.pos,
                ParseErrorKind::TooDeep,
                format!("the query nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    // ---- queries ----

    fn query(&mut self) -> Result<Query, ParseError> {
        self.skip_ws();
        let header = self.header()?;
        let mut source = None;
        let mut commands = Vec::new();
        loop {
            self.skip_ws();
            if self.pos >= self.b.len() {
                break;
            }
            let start = self.pos;
            if self.eat_keyword("from") {
                if source.is_some() || !commands.is_empty() {
                    self.pos = start;
                    return Err(self.error("FROM only once, right after the query type"));
                }
                self.skip_ws();
                source = Some(self.source()?);
            } else if self.eat_keyword("where") {
                self.skip_ws();
                commands.push(Command::Where(self.expr()?));
            } else if self.eat_keyword("sort") {
                let mut keys = Vec::new();
                loop {
                    self.skip_ws();
                    let e = self.expr()?;
                    self.skip_ws();
                    let desc = if self.eat_keyword("descending") || self.eat_keyword("desc") {
                        true
                    } else {
                        let _ = self.eat_keyword("ascending") || self.eat_keyword("asc");
                        false
                    };
                    keys.push((e, desc));
                    self.skip_ws();
                    if !self.eat(",") {
                        break;
                    }
                }
                commands.push(Command::Sort(keys));
            } else if self.eat_keyword("group") {
                self.skip_ws();
                if !self.eat_keyword("by") {
                    return Err(self.error("`BY` after `GROUP`"));
                }
                self.skip_ws();
                let (e, name) = self.named_expr()?;
                commands.push(Command::GroupBy(e, name));
            } else if self.eat_keyword("flatten") {
                self.skip_ws();
                let text_start = self.pos;
                let (e, name) = self.named_expr()?;
                let name = name.unwrap_or_else(|| self.raw_text(text_start, &e));
                commands.push(Command::Flatten(e, name));
            } else if self.eat_keyword("limit") {
                self.skip_ws();
                commands.push(Command::Limit(self.expr()?));
            } else {
                return Err(self
                    .error("FROM, WHERE, SORT, GROUP BY, FLATTEN, LIMIT or the end of the query"));
            }
        }
        Ok(Query {
            header,
            source,
            commands,
        })
    }

    /// The text of an expression parsed from `start` to the cursor (white space trimmed,
    /// lines joined), Dataview's default name for a column.
    fn raw_text(&self, start: usize, _e: &Expr) -> String {
        self.src[start..self.pos]
            .split(['\r', '\n'])
            .map(str::trim)
            .collect::<String>()
    }

    /// `expr [AS name]`, the name an identifier or a string.
    fn named_expr(&mut self) -> Result<(Expr, Option<String>), ParseError> {
        let e = self.expr()?;
        let save = self.pos;
        self.skip_ws();
        if self.eat_keyword("as") {
            self.skip_ws();
            let name = if self.peek() == Some('"') {
                self.string()?
            } else {
                self.identifier()
                    .ok_or_else(|| self.error("a name or a quoted string after AS"))?
            };
            return Ok((e, Some(name)));
        }
        self.pos = save;
        Ok((e, None))
    }

    fn without_id(&mut self) -> bool {
        let save = self.pos;
        if self.eat_keyword("without") {
            self.skip_ws();
            if self.eat_keyword("id") {
                return true;
            }
        }
        self.pos = save;
        false
    }

    fn header(&mut self) -> Result<Header, ParseError> {
        if self.eat_keyword("list") {
            self.skip_ws();
            let without_id = self.without_id();
            self.skip_ws();
            let expr = if self.pos >= self.b.len() || self.at_clause() {
                None
            } else {
                Some(self.expr()?)
            };
            Ok(Header::List { without_id, expr })
        } else if self.eat_keyword("table") {
            self.skip_ws();
            let without_id = self.without_id();
            let mut columns = Vec::new();
            self.skip_ws();
            if !(self.pos >= self.b.len() || self.at_clause()) {
                loop {
                    self.skip_ws();
                    let start = self.pos;
                    let (expr, name) = self.named_expr()?;
                    let name = name.unwrap_or_else(|| self.raw_text(start, &expr));
                    columns.push(Column { expr, name });
                    let save = self.pos;
                    self.skip_ws();
                    if !self.eat(",") {
                        self.pos = save;
                        break;
                    }
                }
            }
            Ok(Header::Table {
                without_id,
                columns,
            })
        } else if self.eat_keyword("task") {
            Ok(Header::Task)
        } else if self.eat_keyword("calendar") {
            self.skip_ws();
            let (e, _) = self.named_expr()?;
            Ok(Header::Calendar(e))
        } else {
            Err(self.error("a query type (TABLE, LIST, TASK or CALENDAR)"))
        }
    }

    // ---- sources ----

    fn source(&mut self) -> Result<Source, ParseError> {
        let mut left = self.source_atom()?;
        loop {
            let save = self.pos;
            self.skip_ws();
            let op = if self.eat_keyword("and") || self.eat("&") {
                true
            } else if self.eat_keyword("or") || self.eat("|") {
                false
            } else {
                self.pos = save;
                return Ok(left);
            };
            self.skip_ws();
            let right = self.source_atom()?;
            left = if op {
                Source::And(Box::new(left), Box::new(right))
            } else {
                Source::Or(Box::new(left), Box::new(right))
            };
        }
    }

    fn source_atom(&mut self) -> Result<Source, ParseError> {
        self.deeper()?;
        let r = self.source_atom_inner();
        self.depth -= 1;
        r
    }

    fn source_atom_inner(&mut self) -> Result<Source, ParseError> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                self.skip_ws();
                let s = self.source()?;
                self.skip_ws();
                self.expect(")")?;
                Ok(s)
            }
            Some('-' | '!') => {
                self.pos += 1;
                Ok(Source::Not(Box::new(self.source_atom()?)))
            }
            Some('"') => Ok(Source::Path(self.string()?)),
            Some('#') => {
                let start = self.pos;
                self.pos += 1;
                while let Some(c) = self.peek() {
                    if c.is_whitespace() || "()&|,\"'!#$%*+.:;<=>?@^`{}~[]\\".contains(c) {
                        break;
                    }
                    self.pos += c.len_utf8();
                }
                if self.pos == start + 1 {
                    return Err(self.error("a tag name after `#`"));
                }
                Ok(Source::Tag(self.src[start..self.pos].to_owned()))
            }
            Some('[') => Ok(Source::Link(self.link_path()?)),
            _ if self.at_keyword("outgoing") => {
                self.pos += "outgoing".len();
                self.skip_inline_ws();
                self.expect("(")?;
                self.skip_ws();
                let path = self.link_path()?;
                self.skip_ws();
                self.expect(")")?;
                Ok(Source::Outgoing(path))
            }
            _ => Err(self.error(
                "a source: `#tag`, `\"folder\"`, `[[note]]`, `outgoing([[note]])`, `-` or `(`",
            )),
        }
    }

    /// `[[path|display]]`: the path (subpath dropped).
    fn link_path(&mut self) -> Result<String, ParseError> {
        match embed_link(self.src, self.pos) {
            Some((Value::Link(l), end)) => {
                self.pos = end;
                Ok(l.path)
            }
            _ => Err(self.error("a link `[[...]]`")),
        }
    }

    // ---- expressions ----

    /// A quoted string: `\"` and `\\` unescaped, other escapes kept as written (so `"\w+"`
    /// is the regex `\w+`), as Dataview reads strings.
    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.pos;
        self.expect("\"")?;
        let mut out = String::new();
        let mut chars = self.src[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    Some((_, e)) => {
                        out.push('\\');
                        out.push(e);
                    }
                    None => break,
                },
                c => out.push(c),
            }
        }
        self.pos = start;
        Err(self.error("a string closed by `\"`"))
    }

    fn identifier(&mut self) -> Option<String> {
        let start = self.pos;
        let first = self.peek()?;
        if !ident_start(first) {
            return None;
        }
        self.pos += first.len_utf8();
        while let Some(c) = self.peek() {
            if !ident_char(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        Some(self.src[start..self.pos].to_owned())
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.deeper()?;
        let r = self.boolean();
        self.depth -= 1;
        r
    }

    /// Peeks a binary operator of a level after optional white space; consumes it when found.
    fn binary_op(&mut self, level: u8) -> Option<BinOp> {
        let save = self.pos;
        self.skip_ws();
        let op = match level {
            0 => {
                if self.eat_keyword("and") || self.eat("&") {
                    Some(BinOp::And)
                } else if self.eat_keyword("or") || self.eat("|") {
                    Some(BinOp::Or)
                } else {
                    None
                }
            }
            1 => {
                if self.eat(">=") {
                    Some(BinOp::Ge)
                } else if self.eat("<=") {
                    Some(BinOp::Le)
                } else if self.eat("!=") {
                    Some(BinOp::Ne)
                } else if self.peek_at(0) == Some(b'=') && self.peek_at(1) != Some(b'>') {
                    self.pos += 1;
                    Some(BinOp::Eq)
                } else if self.eat(">") {
                    Some(BinOp::Gt)
                } else if self.eat("<") {
                    Some(BinOp::Lt)
                } else {
                    None
                }
            }
            2 => {
                if self.eat("+") {
                    Some(BinOp::Add)
                } else if self.eat("-") {
                    Some(BinOp::Sub)
                } else {
                    None
                }
            }
            _ => {
                if self.eat("*") {
                    Some(BinOp::Mul)
                } else if self.peek_at(0) == Some(b'/') && self.peek_at(1) != Some(b'/') {
                    self.pos += 1;
                    Some(BinOp::Div)
                } else if self.eat("%") {
                    Some(BinOp::Mod)
                } else {
                    None
                }
            }
        };
        if op.is_none() {
            self.pos = save;
        }
        op
    }

    /// `and`/`or` share one level, left to right, as in Dataview.
    fn boolean(&mut self) -> Result<Expr, ParseError> {
        self.level(0)
    }

    fn level(&mut self, level: u8) -> Result<Expr, ParseError> {
        let mut left = if level == 3 {
            self.unary()?
        } else {
            self.level(level + 1)?
        };
        let mut count = 0usize;
        while let Some(op) = self.binary_op(level) {
            self.skip_ws();
            let right = if level == 3 {
                self.unary()?
            } else {
                self.level(level + 1)?
            };
            let pos = left.pos;
            left = Expr {
                kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
                pos,
            };
            count += 1;
            // The tree is left-deep: evaluation recurses on it, so bound its depth too.
            if count > MAX_TREE_DEPTH {
                return Err(ParseError::at(
                    self.src,
                    self.pos,
                    ParseErrorKind::TooDeep,
                    format!("more than {MAX_TREE_DEPTH} operators in a row"),
                ));
            }
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let pos = self.pos as u32;
        if self.peek_at(0) == Some(b'!') && !self.src[self.pos..].starts_with("![[") {
            self.pos += 1;
            self.deeper()?;
            let inner = self.unary();
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(inner?)),
                pos,
            });
        }
        if self.peek_at(0) == Some(b'-') && !self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            self.deeper()?;
            let inner = self.unary();
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(inner?)),
                pos,
            });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.atom()?;
        let mut count = 0usize;
        loop {
            let pos = e.pos;
            if self.peek_at(0) == Some(b'.') {
                let save = self.pos;
                self.pos += 1;
                match self.identifier() {
                    Some(name) => {
                        e = Expr {
                            kind: ExprKind::Dot(Box::new(e), name),
                            pos,
                        }
                    }
                    None => {
                        self.pos = save;
                        return Err(self.error("a field name after `.`"));
                    }
                }
            } else if self.peek_at(0) == Some(b'[') {
                self.pos += 1;
                self.skip_ws();
                let idx = self.expr()?;
                self.skip_ws();
                self.expect("]")?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), Box::new(idx)),
                    pos,
                };
            } else if self.call_follows(&e) {
                self.skip_inline_ws();
                let ExprKind::Field(name) = &e.kind else {
                    return Err(self.error("an operator (only named functions can be called)"));
                };
                let name = name.clone();
                self.pos += 1;
                let args = self.args(")")?;
                e = Expr {
                    kind: ExprKind::Call(name, args),
                    pos,
                };
            } else {
                return Ok(e);
            }
            count += 1;
            if count > MAX_DEPTH * 4 {
                return Err(ParseError::at(
                    self.src,
                    self.pos,
                    ParseErrorKind::TooDeep,
                    format!("more than {} postfix operations in a row", MAX_DEPTH * 4),
                ));
            }
        }
    }

    /// A `(` right after the expression, or after spaces when the expression is a bare name
    /// (`list (1, 2)`, as the functions page writes it).
    fn call_follows(&self, e: &Expr) -> bool {
        if self.peek_at(0) == Some(b'(') {
            return true;
        }
        if !matches!(e.kind, ExprKind::Field(_)) {
            return false;
        }
        let rest = &self.src[self.pos..];
        let trimmed = rest.trim_start_matches([' ', '\t']);
        trimmed.len() < rest.len() && trimmed.starts_with('(')
    }

    /// Comma-separated expressions up to `close` (already past the opening bracket).
    fn args(&mut self, close: &str) -> Result<Vec<Expr>, ParseError> {
        self.deeper()?;
        let mut out = Vec::new();
        self.skip_ws();
        if self.eat(close) {
            self.depth -= 1;
            return Ok(out);
        }
        loop {
            self.skip_ws();
            out.push(self.expr()?);
            self.skip_ws();
            if self.eat(close) {
                break;
            }
            if !self.eat(",") {
                return Err(self.error(&format!("`,` or `{close}`")));
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    /// Is a lambda's parameter list `(a, b) =>` at the cursor?
    fn at_lambda(&self) -> bool {
        let rest = &self.src[self.pos + 1..];
        let end = rest
            .find(|c: char| !(ident_char(c) || c == ',' || c.is_whitespace()))
            .unwrap_or(rest.len());
        rest[end..].starts_with(')') && rest[end + 1..].trim_start().starts_with("=>")
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        let pos = self.pos as u32;
        let lit = |v: Value| Expr {
            kind: ExprKind::Literal(v),
            pos,
        };
        let Some(c) = self.peek() else {
            return Err(self.error("an expression"));
        };
        match c {
            '!' | '['
                if self.src[self.pos..].starts_with("![[")
                    || self.src[self.pos..].starts_with("[[") =>
            {
                match embed_link(self.src, self.pos) {
                    Some((v, end)) => {
                        self.pos = end;
                        Ok(lit(v))
                    }
                    None if c == '[' => {
                        // `[[1, 2], [3, 4]]`: a list of lists.
                        self.pos += 1;
                        let items = self.args("]")?;
                        Ok(Expr {
                            kind: ExprKind::List(items),
                            pos,
                        })
                    }
                    None => Err(self.error("a link closed by `]]`")),
                }
            }
            '[' => {
                self.pos += 1;
                let items = self.args("]")?;
                Ok(Expr {
                    kind: ExprKind::List(items),
                    pos,
                })
            }
            '{' => {
                self.pos += 1;
                self.deeper()?;
                let mut entries = Vec::new();
                self.skip_ws();
                if !self.eat("}") {
                    loop {
                        self.skip_ws();
                        let key = if self.peek() == Some('"') {
                            self.string()?
                        } else {
                            self.identifier()
                                .ok_or_else(|| self.error("an object key"))?
                        };
                        self.skip_ws();
                        self.expect(":")?;
                        self.skip_ws();
                        let v = self.expr()?;
                        entries.retain(|(k, _): &(String, Expr)| *k != key);
                        entries.push((key, v));
                        self.skip_ws();
                        if self.eat("}") {
                            break;
                        }
                        if !self.eat(",") {
                            return Err(self.error("`,` or `}`"));
                        }
                    }
                }
                self.depth -= 1;
                Ok(Expr {
                    kind: ExprKind::Object(entries),
                    pos,
                })
            }
            '(' => {
                if self.at_lambda() {
                    self.pos += 1;
                    let mut params = Vec::new();
                    loop {
                        self.skip_ws();
                        if self.eat(")") {
                            break;
                        }
                        let name = self
                            .identifier()
                            .ok_or_else(|| self.error("a parameter name"))?;
                        params.push(name);
                        self.skip_ws();
                        if !self.eat(",") {
                            self.expect(")")?;
                            break;
                        }
                    }
                    self.skip_ws();
                    self.expect("=>")?;
                    self.skip_ws();
                    let body = self.expr()?;
                    return Ok(Expr {
                        kind: ExprKind::Lambda(params, Box::new(body)),
                        pos,
                    });
                }
                self.pos += 1;
                self.skip_ws();
                let e = self.expr()?;
                self.skip_ws();
                self.expect(")")?;
                Ok(e)
            }
            '"' => Ok(lit(Value::Text(self.string()?))),
            c if c.is_ascii_digit() || c == '-' => {
                let b = self.b;
                let mut end = self.pos + usize::from(c == '-');
                let int_start = end;
                while b.get(end).is_some_and(u8::is_ascii_digit) {
                    end += 1;
                }
                if end == int_start {
                    return Err(self.error("a number"));
                }
                if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
                    end += 1;
                    while b.get(end).is_some_and(u8::is_ascii_digit) {
                        end += 1;
                    }
                }
                let n: f64 = self.src[self.pos..end]
                    .parse()
                    .map_err(|_| self.error("a number"))?;
                self.pos = end;
                Ok(lit(Value::Number(n)))
            }
            _ => {
                if self.at_keyword("true") {
                    self.pos += 4;
                    return Ok(lit(Value::Bool(true)));
                }
                if self.at_keyword("false") {
                    self.pos += 5;
                    return Ok(lit(Value::Bool(false)));
                }
                if self.at_keyword("null") {
                    self.pos += 4;
                    return Ok(lit(Value::Null));
                }
                if let Some(e) = self.date_or_dur_literal(pos)? {
                    return Ok(e);
                }
                let save = self.pos;
                let Some(name) = self.identifier() else {
                    return Err(self.error("an expression"));
                };
                if RESERVED.iter().any(|w| w.eq_ignore_ascii_case(&name)) {
                    self.pos = save;
                    return Err(self.error("an expression (FROM, WHERE, LIMIT, GROUP and FLATTEN are keywords; write `row[\"name\"]`)"));
                }
                Ok(Expr {
                    kind: ExprKind::Field(name),
                    pos,
                })
            }
        }
    }

    /// `date(<date or keyword>)` and `dur(<duration>)` written bare; anything else inside
    /// those parentheses is left to the functions of the same names.
    fn date_or_dur_literal(&mut self, pos: u32) -> Result<Option<Expr>, ParseError> {
        let rest = &self.src[self.pos..];
        let (is_date, open) = if rest.starts_with("date(") {
            (true, 5)
        } else if rest.starts_with("dur(") {
            (false, 4)
        } else {
            return Ok(None);
        };
        let mut i = self.pos + open;
        while self.b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        let found: Option<(ExprKind, usize)> = if is_date {
            keyword_at(self.src, i)
                .map(|(k, end)| (ExprKind::DateKeyword(k), end))
                .or_else(|| date_literal(self.src, i).map(|(v, end)| (ExprKind::Literal(v), end)))
        } else {
            duration_literal(self.src, i).map(|(v, end)| (ExprKind::Literal(v), end))
        };
        let Some((kind, mut end)) = found else {
            return Ok(None);
        };
        while self.b.get(end).is_some_and(|c| c.is_ascii_whitespace()) {
            end += 1;
        }
        if self.b.get(end) != Some(&b')') {
            return Ok(None);
        }
        self.pos = end + 1;
        Ok(Some(Expr { kind, pos }))
    }
}

/// The clock keywords of `date(...)`, longest first.
fn keyword_at(src: &str, i: usize) -> Option<(DateKeyword, usize)> {
    const WORDS: [(&str, DateKeyword); 16] = [
        ("start-of-month", DateKeyword::Som),
        ("start-of-week", DateKeyword::Sow),
        ("start-of-year", DateKeyword::Soy),
        ("end-of-month", DateKeyword::Eom),
        ("end-of-week", DateKeyword::Eow),
        ("end-of-year", DateKeyword::Eoy),
        ("yesterday", DateKeyword::Yesterday),
        ("tomorrow", DateKeyword::Tomorrow),
        ("today", DateKeyword::Today),
        ("now", DateKeyword::Now),
        ("sow", DateKeyword::Sow),
        ("eow", DateKeyword::Eow),
        ("som", DateKeyword::Som),
        ("eom", DateKeyword::Eom),
        ("soy", DateKeyword::Soy),
        ("eoy", DateKeyword::Eoy),
    ];
    let rest = src.get(i..)?;
    WORDS
        .iter()
        .find(|(w, _)| rest.starts_with(w))
        .map(|(w, k)| (*k, i + w.len()))
}
