//! Evaluating expressions against one file of a [`Source`], within a [`Budget`].
//!
//! Names resolve as Obsidian documents: `file` is the row's file, `note` its properties,
//! `formula.X` another formula of the base (memoised per row, cycles reported), `this` the
//! note the base is shown in, `value`/`index`/`acc` inside `filter`, `map` and `reduce`,
//! `values` in summaries; any other bare name is a note property. Property values are typed by
//! the vault's `.obsidian/types.json` ([`PropertyType`]) and wikilinks in them become links.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::Arc;

use chrono::{NaiveDateTime, Timelike};

use super::expr::{BinOp, Expr, ExprKind, ParseError};
use super::value::{
    Date, Duration, ENTRY, FileRef, LINK, LIST, Link, SHARED, SLOT, SortKey, Value,
};
use crate::markdown::tag_matches;
use crate::obsidian::budget::Spent;

mod functions;
mod methods;

#[cfg(test)]
pub(super) use methods::METHODS;
pub(super) use methods::UNIQUE_PER_VALUE;

/// Most evaluation steps (nodes visited, list elements walked) in one query, and longest a
/// query may evaluate.
pub use crate::obsidian::budget::{MAX_QUERY_TIME, MAX_STEPS};
/// Largest list an expression may build.
pub const MAX_LIST_LEN: usize = 100_000;
/// Largest string an expression may build, in bytes.
pub const MAX_STRING_BYTES: usize = 1024 * 1024;
/// Bytes of a list of [`MAX_LIST_LEN`] values: the bound a refused list names.
const MAX_LIST_BYTES: u64 = MAX_LIST_LEN as u64 * SLOT;
/// Deepest evaluation (formulas calling formulas, lambdas in lambdas).
pub const MAX_EVAL_DEPTH: usize = 128;

/// A property type from `.obsidian/types.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertyType {
    /// `text`
    Text,
    /// `multitext`, `tags`, `aliases`: lists of text.
    List,
    /// `number`
    Number,
    /// `checkbox`
    Checkbox,
    /// `date`
    Date,
    /// `datetime`
    DateTime,
}

impl PropertyType {
    /// The type named in `types.json`, if known.
    pub fn from_name(name: &str) -> Option<PropertyType> {
        Some(match name {
            "text" => PropertyType::Text,
            "multitext" | "tags" | "aliases" => PropertyType::List,
            "number" => PropertyType::Number,
            "checkbox" => PropertyType::Checkbox,
            "date" => PropertyType::Date,
            "datetime" => PropertyType::DateTime,
            _ => return None,
        })
    }
}

/// A link as the source reports it.
#[derive(Debug, Clone)]
pub struct SourceLink {
    /// The target as written.
    pub target: String,
    /// The display text, if any.
    pub display: Option<String>,
    /// Where it resolves.
    pub file: Option<FileRef>,
}

/// What the evaluator knows about the vault: files, their facts, and link resolution.
/// Implemented over the vault model (`notes::bases`); tests implement it over a table.
pub trait Source: Sync {
    /// The vault-relative path.
    fn path(&self, f: FileRef) -> &str;
    /// Size in bytes.
    fn size(&self, f: FileRef) -> u64;
    /// Last modification.
    fn mtime(&self, f: FileRef) -> Option<NaiveDateTime>;
    /// Creation (birth) time, when the file system knows it.
    fn ctime(&self, f: FileRef) -> Option<NaiveDateTime>;
    /// A frontmatter property, raw.
    fn property(&self, f: FileRef, key: &str) -> Option<&serde_json::Value>;
    /// Every frontmatter property, raw, in key order.
    fn properties(&self, f: FileRef) -> Vec<(&str, &serde_json::Value)>;
    /// The type `types.json` gives `key`.
    fn property_type(&self, key: &str) -> Option<PropertyType>;
    /// Tags of the file (frontmatter and inline), without `#`, each once, in order.
    fn tags(&self, f: FileRef) -> Vec<Arc<str>>;
    /// Does the file carry `tag` or a tag nested under it?
    fn has_tag(&self, f: FileRef, tag: &str) -> bool {
        self.tags(f).iter().any(|t| tag_matches(t, tag))
    }
    /// Which files carry `tag` (or a tag nested under it), indexed by file id, when the source
    /// keeps such a table: `hasTag` then reads one entry per row. `None`: ask [`Self::has_tag`].
    fn tag_table(&self, _tag: &str) -> Option<Arc<Vec<bool>>> {
        None
    }
    /// Links of the file (frontmatter ones included); embeds instead when `embeds`.
    fn links(&self, f: FileRef, embeds: bool) -> Vec<SourceLink>;
    /// Does any link or embed of `f` resolve to `to`?
    fn links_to(&self, f: FileRef, to: FileRef) -> bool;
    /// Files with a link or embed resolving to `f`.
    fn backlinks(&self, f: FileRef) -> Vec<FileRef>;
    /// Resolves a link target as Obsidian would from `from`.
    fn resolve(&self, target: &str, from: Option<FileRef>) -> Option<FileRef>;
    /// The file at a vault path.
    fn by_path(&self, path: &str) -> Option<FileRef>;
    /// The current local time (`now()`).
    fn now(&self) -> NaiveDateTime;
}

/// Why an evaluation failed: a message and a byte offset in the expression.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    /// What went wrong.
    pub message: String,
    /// Byte offset in the expression.
    pub pos: u32,
    /// The request's budget is spent (why): the whole query stops, not just this value.
    pub spent: Option<crate::obsidian::budget::Spent>,
}

impl EvalError {
    fn at(pos: u32, message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
            pos,
            spent: None,
        }
    }

    /// True when the whole query must stop.
    pub fn fatal(&self) -> bool {
        self.spent.is_some()
    }
}

pub use crate::obsidian::budget::Budget;

/// Steps an evaluator counts on its own before charging the shared budget (and reading the clock).
pub const CHARGE_BATCH: u64 = crate::obsidian::budget::CHECK_EVERY;

/// The error a spent budget gives a Bases query.
pub(super) fn spent(e: Spent, pos: u32) -> EvalError {
    EvalError {
        message: match e {
            Spent::Steps(max) => format!("query stopped after {max} evaluation steps"),
            Spent::Time(_) => "query took too long and was stopped".to_owned(),
            other => format!("query {other}"),
        },
        pos,
        spent: Some(e),
    }
}

/// Bytes of one link as the source gives it.
const SOURCE_LINK: u64 = std::mem::size_of::<SourceLink>() as u64;

/// A string of `len` bytes is refused past [`MAX_STRING_BYTES`].
fn check_text_len(len: u64, pos: u32) -> Result<(), EvalError> {
    if len > MAX_STRING_BYTES as u64 {
        return Err(EvalError {
            message: format!(
                "string too long: a value holds at most {} MiB of text",
                MAX_STRING_BYTES >> 20
            ),
            pos,
            spent: Some(Spent::Bytes(MAX_STRING_BYTES as u64)),
        });
    }
    Ok(())
}

/// Bytes of string an evaluator handles for one step: string methods charge their input and
/// output by size, so a long string is not one step.
const BYTES_PER_STEP: u64 = 64;

/// The formulas of a base, compiled.
pub type Formulas = [(Arc<str>, Result<Expr, ParseError>)];

#[derive(Debug, Clone)]
enum Memo {
    Todo,
    Running,
    Done(Result<Value, EvalError>),
}

/// Evaluates expressions for one row at a time.
///
/// Every value it builds is charged to the request's [`Budget`] before it is built, from the
/// size computed from its inputs ([`Evaluator::alloc`]): a string past [`MAX_STRING_BYTES`], a
/// list past [`MAX_LIST_LEN`], or anything past the budget's bytes, is refused (a fatal
/// [`EvalError`] with [`Spent::Bytes`]) and never built. Copies of values already built (a
/// property read, a lambda's `value`) share them and cost nothing.
pub struct Evaluator<'a> {
    src: &'a dyn Source,
    formulas: &'a Formulas,
    budget: &'a Budget,
    this: Option<FileRef>,
    row: Option<FileRef>,
    memo: Vec<Memo>,
    locals: Vec<(&'static str, Value)>,
    depth: usize,
    /// Steps not yet charged to the shared budget.
    pending: u64,
    /// The tag tables `hasTag` used, by the tag as written (a handful per query).
    tag_tables: Vec<(String, Option<Arc<Vec<bool>>>)>,
    /// Bytes this evaluator charged to the budget (what a row built is given back after it).
    bytes: Cell<u64>,
}

/// Tag tables an evaluator keeps at most.
const MAX_TAG_TABLES: usize = 16;

impl Drop for Evaluator<'_> {
    fn drop(&mut self) {
        self.budget.add(self.pending);
    }
}

type R = Result<Value, EvalError>;

impl<'a> Evaluator<'a> {
    /// An evaluator over `src` with the base's formulas; `this` is the note the base is shown in.
    pub fn new(
        src: &'a dyn Source,
        formulas: &'a Formulas,
        budget: &'a Budget,
        this: Option<FileRef>,
    ) -> Evaluator<'a> {
        Evaluator {
            src,
            formulas,
            budget,
            this,
            row: None,
            memo: vec![Memo::Todo; formulas.len()],
            locals: Vec::new(),
            depth: 0,
            pending: 0,
            tag_tables: Vec::new(),
            bytes: Cell::new(0),
        }
    }

    /// Charges `n` bytes about to be allocated: refused (fatal) past the request's budget.
    pub(super) fn alloc(&self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.alloc_bytes(n).map_err(|e| spent(e, pos))
    }

    /// Charges `n` bytes the caller is about to allocate for what it keeps of this evaluator's
    /// values (a query's rows and summaries), counted as this evaluator's.
    pub fn alloc_bytes(&self, n: u64) -> Result<(), Spent> {
        self.budget.alloc(n)?;
        self.bytes.set(self.bytes.get().saturating_add(n));
        Ok(())
    }

    /// The request's budget.
    pub fn budget(&self) -> &'a Budget {
        self.budget
    }

    /// Bytes this evaluator has charged so far (a mark for [`Evaluator::release_since`]).
    pub fn bytes_charged(&self) -> u64 {
        self.bytes.get()
    }

    /// Gives back what was charged since `mark`: the values built then are dropped (a row's
    /// filters and formulas once the row is done).
    pub fn release_since(&self, mark: u64) {
        let n = self.bytes.get().saturating_sub(mark);
        self.budget.release(n);
        self.bytes.set(mark);
    }

    /// Before a string of `len` bytes is written and made a value: refused past
    /// [`MAX_STRING_BYTES`], else charged twice (written, then copied into the shared value).
    pub(super) fn alloc_text(&self, len: u64, pos: u32) -> Result<(), EvalError> {
        check_text_len(len, pos)?;
        self.alloc(2 * len + SHARED, pos)
    }

    /// Before `len` bytes of a string at hand are copied into a value.
    pub(super) fn alloc_copy(&self, len: u64, pos: u32) -> Result<(), EvalError> {
        check_text_len(len, pos)?;
        self.alloc(len + SHARED, pos)
    }

    /// Before a list of `n` values is built: refused past [`MAX_LIST_LEN`], else its slots are
    /// charged (what the values hold is charged by whoever builds them).
    pub(super) fn alloc_list(&self, n: u64, pos: u32) -> Result<(), EvalError> {
        if n > MAX_LIST_LEN as u64 {
            return Err(EvalError {
                message: format!(
                    "list too long: a list holds at most {MAX_LIST_LEN} values (it would hold {n})"
                ),
                pos,
                spent: Some(Spent::Bytes(MAX_LIST_BYTES)),
            });
        }
        self.alloc(LIST + n * SLOT, pos)
    }

    /// The length of `v`'s text, at most [`MAX_STRING_BYTES`] + 1 (refused past it), the
    /// values read to know it charged as steps.
    fn text_len(&mut self, v: &Value, pos: u32) -> Result<u64, EvalError> {
        let src = self.src;
        let (len, read) = v.text_bound(&|f| src.path(f).len(), MAX_STRING_BYTES as u64);
        self.charge(read / 8, pos)?;
        check_text_len(len, pos)?;
        Ok(len)
    }

    /// `v` as text (`toString()`, `+`, an argument read as text): a string as it is, anything
    /// else written once its length is charged.
    pub(super) fn text_of<'v>(
        &mut self,
        v: &'v Value,
        pos: u32,
    ) -> Result<Cow<'v, str>, EvalError> {
        match v {
            Value::String(s) | Value::Html(s) | Value::Image(s) | Value::Icon(s) => {
                return Ok(Cow::Borrowed(s));
            }
            Value::Link(l) if l.display.is_none() => return Ok(Cow::Borrowed(&l.target)),
            _ => {}
        }
        let len = self.text_len(v, pos)?;
        self.alloc(len, pos)?;
        let mut out = String::with_capacity(len as usize);
        v.write_text(&|f| self.file_name(f), &mut out);
        Ok(Cow::Owned(out))
    }

    /// `v`'s text as a string value (`toString()`, `html()`): a string is itself.
    pub(super) fn text_value(&mut self, v: &Value, pos: u32) -> Result<Arc<str>, EvalError> {
        if let Value::String(s) = v {
            return Ok(s.clone());
        }
        let len = self.text_len(v, pos)?;
        self.alloc_text(len, pos)?;
        let mut out = String::with_capacity(len as usize);
        v.write_text(&|f| self.file_name(f), &mut out);
        Ok(out.into())
    }

    /// The key a view or `sort()` orders `v` by ([`Value::sort_key`]), its text charged.
    pub fn sort_key(&mut self, v: &Value, pos: u32) -> Result<SortKey, EvalError> {
        if v.is_empty()
            || matches!(
                v,
                Value::Number(_) | Value::Duration(_) | Value::Date(_) | Value::Bool(_)
            )
        {
            return Ok(v.sort_key(&|_| String::new()));
        }
        let len = self.text_len(v, pos)?;
        // The text, and its lower case (up to three times as long, grown as it is written).
        self.alloc(len + 4 * len, pos)?;
        let src = self.src;
        Ok(v.sort_key(&|f| src.path(f).to_owned()))
    }

    /// Does `f` carry `tag` (or one nested under it)? Through the source's table for the tag,
    /// fetched once per evaluator.
    fn row_has_tag(&mut self, f: FileRef, tag: &str) -> bool {
        let at = match self.tag_tables.iter().position(|(t, _)| t == tag) {
            Some(i) => i,
            None if self.tag_tables.len() < MAX_TAG_TABLES => {
                self.tag_tables
                    .push((tag.to_owned(), self.src.tag_table(tag)));
                self.tag_tables.len() - 1
            }
            None => return self.src.has_tag(f, tag),
        };
        match &self.tag_tables[at].1 {
            Some(bits) => bits.get(f.0 as usize).copied().unwrap_or(false),
            None => self.src.has_tag(f, tag),
        }
    }

    /// Counts `n` steps, charging the shared budget every [`CHARGE_BATCH`].
    fn charge(&mut self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.pending += n;
        if self.pending >= CHARGE_BATCH {
            let n = std::mem::take(&mut self.pending);
            self.budget.charge(n).map_err(|e| spent(e, pos))?;
        }
        Ok(())
    }

    /// Moves to another row (`None`: no row, as in summaries); formula results are forgotten.
    pub fn set_row(&mut self, row: Option<FileRef>) {
        self.row = row;
        self.memo.iter_mut().for_each(|m| *m = Memo::Todo);
    }

    /// Binds `values` (summaries) for the next evaluations.
    pub fn set_values(&mut self, values: Vec<Value>) {
        self.locals.retain(|(n, _)| *n != "values");
        self.locals.push(("values", Value::List(Arc::new(values))));
    }

    /// Evaluates `e` for the current row.
    pub fn eval(&mut self, e: &Expr) -> R {
        self.charge(1, e.pos)?;
        self.depth += 1;
        if self.depth > MAX_EVAL_DEPTH {
            self.depth -= 1;
            return Err(EvalError::at(
                e.pos,
                format!("evaluation nested deeper than {MAX_EVAL_DEPTH}"),
            ));
        }
        let out = self.eval_inner(e);
        self.depth -= 1;
        out
    }

    /// The value of formula `name` for the current row.
    pub fn formula(&mut self, name: &str, pos: u32) -> R {
        let Some(i) = self.formulas.iter().position(|(n, _)| &**n == name) else {
            return Err(EvalError::at(pos, format!("no formula named `{name}`")));
        };
        match &self.memo[i] {
            Memo::Done(r) => return r.clone(),
            Memo::Running => {
                return Err(EvalError::at(
                    pos,
                    format!("formula `{name}` refers to itself (a cycle)"),
                ));
            }
            Memo::Todo => {}
        }
        self.memo[i] = Memo::Running;
        let formulas = self.formulas;
        let r = match &formulas[i].1 {
            Ok(expr) => {
                // Locals of the caller (a lambda's `value`) are not visible in another formula.
                let saved = std::mem::take(&mut self.locals);
                let r = self.eval(expr).map_err(|e| {
                    if e.fatal() || e.message.starts_with("in formula") {
                        e
                    } else {
                        EvalError {
                            message: format!(
                                "in formula `{name}`: {} (column {})",
                                e.message,
                                e.pos + 1
                            ),
                            pos,
                            spent: None,
                        }
                    }
                });
                self.locals = saved;
                r
            }
            Err(e) => Err(EvalError::at(
                pos,
                format!("formula `{name}` does not parse: {e}"),
            )),
        };
        self.memo[i] = Memo::Done(r.clone());
        r
    }

    fn local(&self, name: &str) -> Option<&Value> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    fn eval_inner(&mut self, e: &Expr) -> R {
        let pos = e.pos;
        match &e.kind {
            ExprKind::Lit(v) => Ok(v.clone()),
            ExprKind::Name(n) => self.name(n, pos),
            ExprKind::Member(obj, field) => {
                if let ExprKind::Name(n) = &obj.kind
                    && &**n == "formula"
                    && self.local("formula").is_none()
                {
                    return self.formula(field, pos);
                }
                let v = self.eval(obj)?;
                self.member(&v, field, pos)
            }
            ExprKind::Index(obj, idx) => {
                let i = self.eval(idx)?;
                if let (ExprKind::Name(n), Value::String(s)) = (&obj.kind, &i)
                    && &**n == "formula"
                {
                    return self.formula(s, pos);
                }
                let v = self.eval(obj)?;
                self.index(&v, &i, pos)
            }
            ExprKind::Call(name, args) => self.call(name, args, pos),
            ExprKind::Method(recv, name, args) => {
                let r = self.eval(recv)?;
                self.method(r, name, args, pos)
            }
            ExprKind::Not(x) => Ok(Value::Bool(!self.eval(x)?.truthy())),
            ExprKind::Neg(x) => match self.eval(x)? {
                Value::Null => Ok(Value::Null),
                Value::Duration(d) => Ok(Value::Duration(Duration {
                    months: -d.months,
                    ms: -d.ms,
                })),
                v => match v.as_number() {
                    Some(n) => Ok(Value::Number(-n)),
                    None => Err(EvalError::at(
                        pos,
                        format!("cannot negate a {}", v.type_name()),
                    )),
                },
            },
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, pos),
            ExprKind::List(items) => {
                self.alloc_list(items.len() as u64, pos)?;
                let mut out = Vec::with_capacity(items.len());
                for x in items {
                    out.push(self.eval(x)?);
                }
                Ok(Value::List(Arc::new(out)))
            }
            ExprKind::Object(items) => {
                self.alloc(LIST + items.len() as u64 * ENTRY, pos)?;
                let mut out: Vec<(Arc<str>, Value)> = Vec::with_capacity(items.len());
                for (k, x) in items {
                    let v = self.eval(x)?;
                    out.retain(|(k2, _)| k2 != k);
                    out.push((k.clone(), v));
                }
                Ok(Value::Object(Arc::new(out)))
            }
        }
    }

    fn name(&mut self, n: &str, pos: u32) -> R {
        if let Some(v) = self.local(n) {
            return Ok(v.clone());
        }
        Ok(match n {
            "file" => self.row.map_or(Value::Null, Value::File),
            "note" => self.row.map_or(Value::Null, Value::Note),
            "this" => self.this.map_or(Value::Null, Value::Note),
            "formula" => {
                return Err(EvalError::at(pos, "`formula` needs a name: `formula.NAME`"));
            }
            _ => match self.row {
                Some(f) => return self.property(f, n, pos),
                None => Value::Null,
            },
        })
    }

    /// A note property as a typed value (a copy of the note's: charged).
    pub fn property(&self, f: FileRef, key: &str, pos: u32) -> R {
        match self.src.property(f, key) {
            Some(raw) => {
                self.alloc(json_cost(raw), pos)?;
                Ok(self.convert(raw, self.src.property_type(key), f))
            }
            None => Ok(Value::Null),
        }
    }

    fn convert(&self, raw: &serde_json::Value, ty: Option<PropertyType>, from: FileRef) -> Value {
        use serde_json::Value as J;
        match raw {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
            J::String(s) => self.convert_str(s, ty, from),
            J::Array(items) => Value::List(Arc::new(
                items
                    .iter()
                    .take(MAX_LIST_LEN)
                    .map(|x| self.convert(x, ty, from))
                    .collect(),
            )),
            J::Object(map) => Value::Object(Arc::new(
                map.iter()
                    .map(|(k, v)| (Arc::from(k.as_str()), self.convert(v, None, from)))
                    .collect(),
            )),
        }
    }

    fn convert_str(&self, s: &str, ty: Option<PropertyType>, from: FileRef) -> Value {
        let t = s.trim();
        if let Some(inner) = t.strip_prefix("[[").and_then(|x| x.strip_suffix("]]"))
            && !inner.contains("[[")
        {
            return self.make_link(inner, None, Some(from));
        }
        match ty {
            Some(PropertyType::Date | PropertyType::DateTime) | None => {
                if let Some(d) = Date::parse(t)
                    && t.len() >= 10
                    && t.as_bytes()[4] == b'-'
                {
                    return Value::Date(d);
                }
            }
            Some(PropertyType::Number) => {
                if let Ok(n) = t.parse::<f64>() {
                    return Value::Number(n);
                }
            }
            Some(PropertyType::Checkbox) => match t {
                "true" => return Value::Bool(true),
                "false" => return Value::Bool(false),
                _ => {}
            },
            _ => {}
        }
        Value::str(s)
    }

    /// A link value from `[[target|display]]`'s inside (or a plain target), resolved from `from`.
    fn make_link(&self, inner: &str, display: Option<Value>, from: Option<FileRef>) -> Value {
        let (target, shown) = match inner.split_once('|') {
            Some((t, d)) => (t, Some(Value::str(d))),
            None => (inner, None),
        };
        let path = target.split('#').next().unwrap_or(target).trim();
        let file = if crate::markdown::is_external_url(target) {
            None
        } else if path.is_empty() {
            from
        } else {
            self.src.resolve(path, from)
        };
        Value::Link(Arc::new(Link {
            target: target.trim().into(),
            display: display.or(shown),
            file,
        }))
    }

    fn file_name(&self, f: FileRef) -> String {
        self.src.path(f).to_owned()
    }

    fn member(&mut self, v: &Value, field: &str, pos: u32) -> R {
        Ok(match v {
            Value::File(f) => return self.file_field(*f, field, pos),
            Value::Note(f) => match field {
                "file" => Value::File(*f),
                _ => return self.property(*f, field, pos),
            },
            Value::Object(o) => o
                .iter()
                .find(|(k, _)| &**k == field)
                .map_or(Value::Null, |(_, v)| v.clone()),
            Value::Date(_) | Value::Duration(_) => v.time_field(field).unwrap_or(Value::Null),
            Value::String(s) if field == "length" => Value::Number(s.encode_utf16().count() as f64),
            Value::List(l) if field == "length" => Value::Number(l.len() as f64),
            Value::Link(l) => match l.file {
                Some(f) if field == "file" => Value::File(f),
                _ => Value::Null,
            },
            _ => Value::Null,
        })
    }

    /// `file.FIELD` of file `f` (a column or sort key naming a file property).
    pub fn file_property(&mut self, f: FileRef, field: &str) -> R {
        self.file_field(f, field, 0)
    }

    fn file_field(&mut self, f: FileRef, field: &str, pos: u32) -> R {
        let path = self.src.path(f);
        let name = path.rsplit('/').next().unwrap_or(path);
        // A text field is a copy of part of the path.
        if matches!(field, "name" | "basename" | "path" | "folder" | "ext") {
            self.alloc_copy(path.len() as u64, pos)?;
        }
        Ok(match field {
            // A note's name is shown without `.md` (other files keep their extension), as
            // Obsidian's own bases rely on: see "Bases" in docs/obsidian.md.
            "name" => Value::str(name.strip_suffix(".md").unwrap_or(name)),
            "basename" => Value::str(match name.rfind('.') {
                Some(i) if i > 0 => &name[..i],
                _ => name,
            }),
            "path" => Value::str(path),
            "folder" => Value::str(match path.rfind('/') {
                Some(i) => &path[..i],
                None => "/",
            }),
            "ext" => Value::str(match name.rfind('.') {
                Some(i) if i > 0 => &name[i + 1..],
                _ => "",
            }),
            "size" => Value::Number(self.src.size(f) as f64),
            "mtime" => self
                .src
                .mtime(f)
                .map_or(Value::Null, |at| Value::Date(Date { at, time: true })),
            "ctime" => self
                .src
                .ctime(f)
                .map_or(Value::Null, |at| Value::Date(Date { at, time: true })),
            "tags" => {
                let tags = self.src.tags(f);
                // The source's list (already built for this call), then the value's.
                self.alloc(tags.len() as u64 * SHARED, pos)?;
                self.alloc_list(tags.len() as u64, pos)?;
                Value::List(Arc::new(tags.into_iter().map(Value::String).collect()))
            }
            "links" | "embeds" => {
                let mut links = self.src.links(f, field == "embeds");
                links.truncate(MAX_LIST_LEN);
                self.alloc_list(links.len() as u64, pos)?;
                // Each link, and the source's (already built for this call) it is made from.
                self.alloc(
                    links
                        .iter()
                        .map(|l| {
                            let text = l.target.len() + l.display.as_ref().map_or(0, String::len);
                            let shown = l.display.as_ref().map_or(0, |_| SHARED);
                            LINK + SOURCE_LINK + 2 * text as u64 + SHARED + shown
                        })
                        .sum(),
                    pos,
                )?;
                Value::List(Arc::new(
                    links
                        .into_iter()
                        .map(|l| {
                            Value::Link(Arc::new(Link {
                                target: l.target.into(),
                                display: l.display.map(Value::str),
                                file: l.file,
                            }))
                        })
                        .collect(),
                ))
            }
            "backlinks" => {
                let mut from = self.src.backlinks(f);
                from.truncate(MAX_LIST_LEN);
                self.alloc(from.len() as u64 * size_of::<FileRef>() as u64, pos)?;
                self.alloc_list(from.len() as u64, pos)?;
                let mut out = Vec::with_capacity(from.len());
                for b in from {
                    out.push(self.file_link(b, None, pos)?);
                }
                Value::List(Arc::new(out))
            }
            "properties" => {
                let props = self.src.properties(f);
                self.alloc(
                    LIST + props
                        .iter()
                        .map(|(k, raw)| ENTRY + k.len() as u64 + json_cost(raw))
                        .sum::<u64>(),
                    pos,
                )?;
                Value::Object(Arc::new(
                    props
                        .into_iter()
                        .map(|(k, raw)| {
                            let v = self.convert(raw, self.src.property_type(k), f);
                            (Arc::from(k), v)
                        })
                        .collect(),
                ))
            }
            "file" => Value::File(f),
            _ => Value::Null,
        })
    }

    /// A link to `f` (its path without `.md`), charged.
    fn file_link(&self, f: FileRef, display: Option<Value>, pos: u32) -> R {
        let path = self.src.path(f);
        let target = path.strip_suffix(".md").unwrap_or(path);
        self.alloc(LINK + target.len() as u64 + SHARED, pos)?;
        Ok(Value::Link(Arc::new(Link {
            target: target.into(),
            display,
            file: Some(f),
        })))
    }

    fn index(&mut self, v: &Value, i: &Value, pos: u32) -> R {
        Ok(match (v, i) {
            (Value::List(l), Value::Number(n)) => {
                if *n >= 0.0 && n.fract() == 0.0 {
                    l.get(*n as usize).cloned().unwrap_or(Value::Null)
                } else {
                    Value::Null
                }
            }
            (Value::String(s), Value::Number(n)) if *n >= 0.0 && n.fract() == 0.0 => {
                self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
                match s.char_indices().nth(*n as usize) {
                    Some((at, c)) => {
                        self.alloc_copy(c.len_utf8() as u64, pos)?;
                        Value::str(&s[at..at + c.len_utf8()])
                    }
                    None => Value::Null,
                }
            }
            (_, Value::String(k)) => return self.member(v, k, pos),
            _ => Value::Null,
        })
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, pos: u32) -> R {
        match op {
            BinOp::And => {
                let x = self.eval(a)?;
                if !x.truthy() {
                    return Ok(x);
                }
                return self.eval(b);
            }
            BinOp::Or => {
                let x = self.eval(a)?;
                if x.truthy() {
                    return Ok(x);
                }
                return self.eval(b);
            }
            _ => {}
        }
        let x = self.eval(a)?;
        let y = self.eval(b)?;
        use std::cmp::Ordering::*;
        let cmp = |want: &[std::cmp::Ordering]| {
            Ok(Value::Bool(
                x.compare(&y).is_some_and(|o| want.contains(&o)),
            ))
        };
        match op {
            BinOp::Eq => Ok(Value::Bool(x.equals(&y))),
            BinOp::Ne => Ok(Value::Bool(!x.equals(&y))),
            BinOp::Lt => cmp(&[Less]),
            BinOp::Le => cmp(&[Less, Equal]),
            BinOp::Gt => cmp(&[Greater]),
            BinOp::Ge => cmp(&[Greater, Equal]),
            BinOp::Add => self.add(x, y, pos),
            BinOp::Sub => self.sub(x, y, pos),
            BinOp::Mul | BinOp::Div | BinOp::Rem => arith(op, &x, &y, pos),
            // Handled above, before either side is evaluated.
            BinOp::And | BinOp::Or => Ok(Value::Null),
        }
    }

    fn add(&mut self, x: Value, y: Value, pos: u32) -> R {
        match (&x, &y) {
            (Value::Null, Value::String(_)) | (Value::String(_), Value::Null) => {}
            (Value::Null, _) | (_, Value::Null) => return Ok(Value::Null),
            _ => {}
        }
        match (&x, &y) {
            (Value::Date(d), other) => {
                let dur = as_duration(other).ok_or_else(|| {
                    EvalError::at(pos, format!("cannot add a {} to a date", other.type_name()))
                })?;
                d.add(dur, 1)
                    .map(Value::Date)
                    .ok_or_else(|| EvalError::at(pos, "date out of range"))
            }
            (Value::Duration(a), Value::Duration(b)) => Ok(Value::Duration(Duration {
                months: a.months.saturating_add(b.months),
                ms: a.ms + b.ms,
            })),
            (Value::Number(a), Value::Number(b)) => Ok(Value::Number(a + b)),
            (Value::String(_), _) | (_, Value::String(_)) => {
                // Both texts' lengths, charged before either is written.
                let len = self.text_len(&x, pos)? + self.text_len(&y, pos)?;
                self.alloc_text(len, pos)?;
                let mut s = String::with_capacity(len as usize);
                let names = |f: FileRef| self.file_name(f);
                x.write_text(&names, &mut s);
                y.write_text(&names, &mut s);
                Ok(Value::str(s))
            }
            (Value::List(a), Value::List(b)) => {
                self.alloc_list((a.len() + b.len()) as u64, pos)?;
                let mut out = Vec::with_capacity(a.len() + b.len());
                out.extend(a.iter().cloned());
                out.extend(b.iter().cloned());
                Ok(Value::List(Arc::new(out)))
            }
            _ => arith(BinOp::Add, &x, &y, pos),
        }
    }

    fn sub(&self, x: Value, y: Value, pos: u32) -> R {
        if matches!(x, Value::Null) || matches!(y, Value::Null) {
            return Ok(Value::Null);
        }
        match (&x, &y) {
            (Value::Date(a), Value::Date(b)) => Ok(Value::Duration(Duration {
                months: 0,
                ms: (a.millis() - b.millis()) as f64,
            })),
            (Value::Date(a), Value::String(s)) if Date::parse(s).is_some() => {
                let b = Date::parse(s).unwrap_or(*a);
                Ok(Value::Duration(Duration {
                    months: 0,
                    ms: (a.millis() - b.millis()) as f64,
                }))
            }
            (Value::Date(d), other) => {
                let dur = as_duration(other).ok_or_else(|| {
                    EvalError::at(
                        pos,
                        format!("cannot subtract a {} from a date", other.type_name()),
                    )
                })?;
                d.add(dur, -1)
                    .map(Value::Date)
                    .ok_or_else(|| EvalError::at(pos, "date out of range"))
            }
            (Value::Duration(a), Value::Duration(b)) => Ok(Value::Duration(Duration {
                months: a.months.saturating_sub(b.months),
                ms: a.ms - b.ms,
            })),
            _ => arith(BinOp::Sub, &x, &y, pos),
        }
    }

    fn args(&mut self, args: &[Expr]) -> Result<Vec<Value>, EvalError> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    fn arg(&mut self, args: &[Expr], i: usize) -> R {
        match args.get(i) {
            Some(a) => self.eval(a),
            None => Ok(Value::Null),
        }
    }

    fn lookup_file(&self, s: &str) -> Option<FileRef> {
        let s = s.trim();
        let inner = s
            .strip_prefix("[[")
            .and_then(|x| x.strip_suffix("]]"))
            .map(|x| x.split('|').next().unwrap_or(x));
        match inner {
            Some(t) => self.src.resolve(t, self.row.or(self.this)),
            None => self
                .src
                .by_path(s)
                .or_else(|| self.src.by_path(&format!("{s}.md")))
                .or_else(|| self.src.resolve(s, self.row.or(self.this))),
        }
    }
}

/// What reading a frontmatter value as a [`Value`] allocates, at most: a string copied (or
/// made a link with its display), list slots, object entries.
fn json_cost(raw: &serde_json::Value) -> u64 {
    use serde_json::Value as J;
    let mut total = 0u64;
    let mut stack = vec![raw];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            J::Null | J::Bool(_) | J::Number(_) => 0,
            J::String(s) => 2 * s.len() as u64 + LINK + 2 * SHARED,
            J::Array(items) => {
                let items = &items[..items.len().min(MAX_LIST_LEN)];
                stack.extend(items.iter());
                LIST + items.len() as u64 * SLOT
            }
            J::Object(map) => {
                stack.extend(map.values());
                LIST + map.keys().map(|k| k.len() as u64 + ENTRY).sum::<u64>()
            }
        });
    }
    total
}

/// A duration from a duration value, a duration string (`"1d"`) or a number of milliseconds.
fn as_duration(v: &Value) -> Option<Duration> {
    match v {
        Value::Duration(d) => Some(*d),
        Value::String(s) => Duration::parse(s),
        Value::Number(n) => Some(Duration { months: 0, ms: *n }),
        _ => None,
    }
}

fn arith(op: BinOp, x: &Value, y: &Value, pos: u32) -> R {
    if matches!(x, Value::Null) || matches!(y, Value::Null) {
        return Ok(Value::Null);
    }
    if let Value::Duration(d) = x
        && let Some(k) = y.as_number()
        && matches!(op, BinOp::Mul | BinOp::Div)
        && !matches!(y, Value::Duration(_))
    {
        let k = if op == BinOp::Div { 1.0 / k } else { k };
        let months = d.months as f64 * k;
        return Ok(Value::Duration(
            if months.fract() == 0.0 && months.abs() < 1e9 {
                Duration {
                    months: months as i64,
                    ms: d.ms * k,
                }
            } else {
                Duration {
                    months: 0,
                    ms: d.total_ms() * k,
                }
            },
        ));
    }
    let ok = |v: &Value| {
        matches!(
            v,
            Value::Number(_)
                | Value::Bool(_)
                | Value::String(_)
                | Value::Duration(_)
                | Value::Date(_)
        )
    };
    let (Some(a), Some(b)) = (
        ok(x).then(|| x.as_number()).flatten(),
        ok(y).then(|| y.as_number()).flatten(),
    ) else {
        return Err(EvalError::at(
            pos,
            format!(
                "cannot apply `{}` to a {} and a {}",
                op.symbol(),
                x.type_name(),
                y.type_name()
            ),
        ));
    };
    Ok(Value::Number(match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        _ => a % b,
    }))
}

/// Moment's `fromNow()`: "a few seconds ago", "3 days ago", "in 2 hours".
pub fn relative(at: NaiveDateTime, now: NaiveDateTime) -> String {
    let secs = (now - at).num_seconds();
    let future = secs < 0;
    let s = secs.unsigned_abs() as f64;
    let round = |x: f64| x.round() as u64;
    let phrase = if s < 45.0 {
        "a few seconds".to_owned()
    } else if s < 90.0 {
        "a minute".to_owned()
    } else if s < 45.0 * 60.0 {
        format!("{} minutes", round(s / 60.0))
    } else if s < 90.0 * 60.0 {
        "an hour".to_owned()
    } else if s < 22.0 * 3600.0 {
        format!("{} hours", round(s / 3600.0))
    } else if s < 36.0 * 3600.0 {
        "a day".to_owned()
    } else if s < 26.0 * 86400.0 {
        format!("{} days", round(s / 86400.0))
    } else if s < 45.0 * 86400.0 {
        "a month".to_owned()
    } else if s < 320.0 * 86400.0 {
        format!("{} months", round(s / (30.4375 * 86400.0)).max(2))
    } else if s < 548.0 * 86400.0 {
        "a year".to_owned()
    } else {
        format!("{} years", round(s / (365.25 * 86400.0)).max(2))
    };
    if future {
        format!("in {phrase}")
    } else {
        format!("{phrase} ago")
    }
}

/// The local time, as `now()` sees it.
pub fn local_now() -> NaiveDateTime {
    let t = chrono::Local::now().naive_local();
    t.with_nanosecond(t.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(t)
}
