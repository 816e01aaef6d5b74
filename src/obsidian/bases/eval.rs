//! Evaluating expressions against one file of a [`Source`], within a [`Budget`].
//!
//! Names resolve as Obsidian documents: `file` is the row's file, `note` its properties,
//! `formula.X` another formula of the base (memoised per row, cycles reported), `this` the
//! note the base is shown in, `value`/`index`/`acc` inside `filter`, `map` and `reduce`,
//! `values` in summaries; any other bare name is a note property. Property values are typed by
//! the vault's `.obsidian/types.json` ([`PropertyType`]) and wikilinks in them become links.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use chrono::{NaiveDateTime, Timelike};

use super::expr::{BinOp, Expr, ExprKind, ParseError};
use super::value::{Date, Duration, FileRef, Link, Value, number_text};
use crate::markdown::tag_matches;
use crate::obsidian::moment;

/// Most evaluation steps (nodes visited, list elements walked) in one query.
pub const MAX_STEPS: u64 = 20_000_000;
/// Longest a query may evaluate.
pub const MAX_QUERY_TIME: std::time::Duration = std::time::Duration::from_secs(3);
/// Largest list an expression may build.
pub const MAX_LIST_LEN: usize = 100_000;
/// Largest string an expression may build, in bytes.
pub const MAX_STRING_BYTES: usize = 1024 * 1024;
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
    /// The query's budget is spent: the whole query stops, not just this value.
    pub fatal: bool,
}

impl EvalError {
    fn at(pos: u32, message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
            pos,
            fatal: false,
        }
    }
}

/// The budget of one query: steps and a deadline, shared by the evaluators of every thread
/// (each charges it in batches of [`CHARGE_BATCH`] steps).
#[derive(Debug)]
pub struct Budget {
    steps: AtomicU64,
    max_steps: u64,
    deadline: Instant,
}

/// Steps an evaluator counts on its own before charging the shared budget (and reading the clock).
pub const CHARGE_BATCH: u64 = 1024;

impl Budget {
    /// The default budget ([`MAX_STEPS`], [`MAX_QUERY_TIME`]).
    pub fn new() -> Budget {
        Budget::with(MAX_STEPS, MAX_QUERY_TIME)
    }

    /// A budget of `steps` and `time`.
    pub fn with(steps: u64, time: std::time::Duration) -> Budget {
        Budget {
            steps: AtomicU64::new(0),
            max_steps: steps,
            deadline: Instant::now() + time,
        }
    }

    /// Steps charged so far.
    pub fn used(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    fn charge(&self, n: u64, pos: u32) -> Result<(), EvalError> {
        let s = self.steps.fetch_add(n, Ordering::Relaxed) + n;
        if s > self.max_steps {
            return Err(EvalError {
                message: format!("query stopped after {} evaluation steps", self.max_steps),
                pos,
                fatal: true,
            });
        }
        self.check_time(pos)
    }

    /// An error once the deadline has passed.
    fn check_time(&self, pos: u32) -> Result<(), EvalError> {
        if Instant::now() > self.deadline {
            return Err(EvalError {
                message: "query took too long and was stopped".into(),
                pos,
                fatal: true,
            });
        }
        Ok(())
    }
}

/// Bytes of string an evaluator handles for one step: string methods charge their input and
/// output by size, so a long string is not one step.
const BYTES_PER_STEP: u64 = 64;

impl Default for Budget {
    fn default() -> Self {
        Budget::new()
    }
}

/// The formulas of a base, compiled.
pub type Formulas = [(Arc<str>, Result<Expr, ParseError>)];

#[derive(Debug, Clone)]
enum Memo {
    Todo,
    Running,
    Done(Result<Value, EvalError>),
}

/// Evaluates expressions for one row at a time.
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
}

/// Tag tables an evaluator keeps at most.
const MAX_TAG_TABLES: usize = 16;

impl Drop for Evaluator<'_> {
    fn drop(&mut self) {
        self.budget.steps.fetch_add(self.pending, Ordering::Relaxed);
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
        }
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
            self.budget.charge(n, pos)?;
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
                    if e.fatal || e.message.starts_with("in formula") {
                        e
                    } else {
                        EvalError {
                            message: format!(
                                "in formula `{name}`: {} (column {})",
                                e.message,
                                e.pos + 1
                            ),
                            pos,
                            fatal: false,
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
                Ok(self.member(&v, field))
            }
            ExprKind::Index(obj, idx) => {
                let i = self.eval(idx)?;
                if let (ExprKind::Name(n), Value::String(s)) = (&obj.kind, &i)
                    && &**n == "formula"
                {
                    return self.formula(s, pos);
                }
                let v = self.eval(obj)?;
                Ok(self.index(&v, &i))
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
                if items.len() > MAX_LIST_LEN {
                    return Err(EvalError::at(pos, "list too long"));
                }
                let mut out = Vec::with_capacity(items.len());
                for x in items {
                    out.push(self.eval(x)?);
                }
                Ok(Value::List(Arc::new(out)))
            }
            ExprKind::Object(items) => {
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
                Some(f) => self.property(f, n),
                None => Value::Null,
            },
        })
    }

    /// A note property as a typed value.
    pub fn property(&self, f: FileRef, key: &str) -> Value {
        match self.src.property(f, key) {
            Some(raw) => self.convert(raw, self.src.property_type(key), f),
            None => Value::Null,
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

    fn member(&mut self, v: &Value, field: &str) -> Value {
        match v {
            Value::File(f) => self.file_field(*f, field),
            Value::Note(f) => match field {
                "file" => Value::File(*f),
                _ => self.property(*f, field),
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
        }
    }

    /// `file.FIELD` of file `f` (a column or sort key naming a file property).
    pub fn file_property(&mut self, f: FileRef, field: &str) -> Value {
        self.file_field(f, field)
    }

    fn file_field(&mut self, f: FileRef, field: &str) -> Value {
        let path = self.src.path(f);
        let name = path.rsplit('/').next().unwrap_or(path);
        match field {
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
            "tags" => Value::List(Arc::new(
                self.src.tags(f).into_iter().map(Value::String).collect(),
            )),
            "links" | "embeds" => Value::List(Arc::new(
                self.src
                    .links(f, field == "embeds")
                    .into_iter()
                    .take(MAX_LIST_LEN)
                    .map(|l| {
                        Value::Link(Arc::new(Link {
                            target: l.target.into(),
                            display: l.display.map(Value::str),
                            file: l.file,
                        }))
                    })
                    .collect(),
            )),
            "backlinks" => Value::List(Arc::new(
                self.src
                    .backlinks(f)
                    .into_iter()
                    .take(MAX_LIST_LEN)
                    .map(|b| self.file_link(b, None))
                    .collect(),
            )),
            "properties" => Value::Object(Arc::new(
                self.src
                    .properties(f)
                    .into_iter()
                    .map(|(k, raw)| {
                        let v = self.convert(raw, self.src.property_type(k), f);
                        (Arc::from(k), v)
                    })
                    .collect(),
            )),
            "file" => Value::File(f),
            _ => Value::Null,
        }
    }

    fn file_link(&self, f: FileRef, display: Option<Value>) -> Value {
        let path = self.src.path(f);
        let target = path.strip_suffix(".md").unwrap_or(path);
        Value::Link(Arc::new(Link {
            target: target.into(),
            display,
            file: Some(f),
        }))
    }

    fn index(&mut self, v: &Value, i: &Value) -> Value {
        match (v, i) {
            (Value::List(l), Value::Number(n)) => {
                if *n >= 0.0 && n.fract() == 0.0 {
                    l.get(*n as usize).cloned().unwrap_or(Value::Null)
                } else {
                    Value::Null
                }
            }
            (Value::String(s), Value::Number(n)) if *n >= 0.0 && n.fract() == 0.0 => s
                .chars()
                .nth(*n as usize)
                .map_or(Value::Null, |c| Value::str(c.to_string())),
            (_, Value::String(k)) => self.member(v, k),
            _ => Value::Null,
        }
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

    fn add(&self, x: Value, y: Value, pos: u32) -> R {
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
                let names = |f: FileRef| self.file_name(f);
                let mut s = x.text(&names);
                s.push_str(&y.text(&names));
                if s.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Ok(Value::str(s))
            }
            (Value::List(a), Value::List(b)) => {
                if a.len() + b.len() > MAX_LIST_LEN {
                    return Err(EvalError::at(pos, "list too long"));
                }
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

    fn text(&self, v: &Value) -> String {
        v.text(&|f| self.file_name(f))
    }

    /// A global function.
    fn call(&mut self, name: &str, args: &[Expr], pos: u32) -> R {
        let arity = |min: usize, max: usize| -> Result<(), EvalError> {
            if args.len() < min || args.len() > max {
                let want = if min == max {
                    format!("{min}")
                } else if max == usize::MAX {
                    format!("at least {min}")
                } else {
                    format!("{min} to {max}")
                };
                return Err(EvalError::at(
                    pos,
                    format!("{name}() takes {want} argument(s), got {}", args.len()),
                ));
            }
            Ok(())
        };
        match name {
            "if" => {
                arity(2, 3)?;
                if self.eval(&args[0])?.truthy() {
                    self.eval(&args[1])
                } else {
                    self.arg(args, 2)
                }
            }
            "now" => {
                arity(0, 0)?;
                Ok(Value::Date(Date {
                    at: self.src.now(),
                    time: true,
                }))
            }
            "today" => {
                arity(0, 0)?;
                Ok(Value::Date(Date::day(self.src.now().date())))
            }
            "date" => {
                arity(1, 1)?;
                match self.eval(&args[0])? {
                    Value::Date(d) => Ok(Value::Date(d)),
                    Value::Number(n) => chrono::DateTime::from_timestamp_millis(n as i64)
                        .map(|t| {
                            Value::Date(Date {
                                at: t.naive_utc(),
                                time: true,
                            })
                        })
                        .ok_or_else(|| EvalError::at(pos, "date out of range")),
                    Value::Null => Ok(Value::Null),
                    v => {
                        let s = self.text(&v);
                        Date::parse(&s).map(Value::Date).ok_or_else(|| {
                            EvalError::at(pos, format!("cannot read `{}` as a date", short(&s)))
                        })
                    }
                }
            }
            "duration" => {
                arity(1, 1)?;
                match self.eval(&args[0])? {
                    Value::Duration(d) => Ok(Value::Duration(d)),
                    Value::Number(n) => Ok(Value::Duration(Duration { months: 0, ms: n })),
                    v => {
                        let s = self.text(&v);
                        Duration::parse(&s).map(Value::Duration).ok_or_else(|| {
                            EvalError::at(pos, format!("cannot read `{}` as a duration", short(&s)))
                        })
                    }
                }
            }
            "number" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                if let Value::Null = v {
                    return Ok(Value::Null);
                }
                v.as_number().map(Value::Number).ok_or_else(|| {
                    EvalError::at(
                        pos,
                        format!("cannot read `{}` as a number", short(&self.text(&v))),
                    )
                })
            }
            "list" => {
                arity(1, 1)?;
                Ok(match self.eval(&args[0])? {
                    Value::List(l) => Value::List(l),
                    Value::Null => Value::List(Arc::new(Vec::new())),
                    v => Value::List(Arc::new(vec![v])),
                })
            }
            "link" => {
                arity(1, 2)?;
                let target = self.eval(&args[0])?;
                let display = match args.get(1) {
                    Some(a) => Some(self.eval(a)?),
                    None => None,
                };
                match target {
                    Value::File(f) | Value::Note(f) => Ok(self.file_link(f, display)),
                    Value::Link(l) => Ok(Value::Link(Arc::new(Link {
                        target: l.target.clone(),
                        display: display.or_else(|| l.display.clone()),
                        file: l.file,
                    }))),
                    Value::Null => Ok(Value::Null),
                    v => {
                        let s = self.text(&v);
                        let inner = s
                            .trim()
                            .strip_prefix("[[")
                            .and_then(|x| x.strip_suffix("]]"))
                            .unwrap_or(s.trim());
                        Ok(self.make_link(inner, display, self.row.or(self.this)))
                    }
                }
            }
            "file" => {
                arity(1, 1)?;
                Ok(match self.eval(&args[0])? {
                    Value::File(f) | Value::Note(f) => Value::File(f),
                    Value::Link(l) => l.file.map_or(Value::Null, Value::File),
                    Value::Null => Value::Null,
                    v => {
                        let s = self.text(&v);
                        self.lookup_file(&s).map_or(Value::Null, Value::File)
                    }
                })
            }
            "max" | "min" => {
                let mut best: Option<f64> = None;
                for v in self.args(args)? {
                    let items: Vec<Value> = match v {
                        Value::List(l) => l.to_vec(),
                        other => vec![other],
                    };
                    for item in items {
                        if let Value::Null = item {
                            continue;
                        }
                        let Some(n) = item.as_number() else {
                            return Err(EvalError::at(
                                pos,
                                format!("{name}() takes numbers, got a {}", item.type_name()),
                            ));
                        };
                        best = Some(match best {
                            None => n,
                            Some(b) if name == "max" => b.max(n),
                            Some(b) => b.min(n),
                        });
                    }
                }
                Ok(best.map_or(Value::Null, Value::Number))
            }
            // From Obsidian's first Bases releases, still found in vaults (kepano's Shows.base:
            // `not(empty(note.last))`).
            "not" => {
                arity(1, 1)?;
                Ok(Value::Bool(!self.eval(&args[0])?.truthy()))
            }
            "empty" => {
                arity(1, 1)?;
                Ok(Value::Bool(self.eval(&args[0])?.is_empty()))
            }
            "random" => {
                arity(0, 0)?;
                Ok(Value::Number(pseudo_random(
                    self.budget.used() + self.pending,
                )))
            }
            "escapeHTML" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                Ok(Value::str(escape_html(&self.text(&v))))
            }
            "html" | "image" | "icon" => {
                arity(1, 1)?;
                let v = self.eval(&args[0])?;
                let s: Arc<str> = match &v {
                    Value::File(f) | Value::Note(f) if name == "image" => self.src.path(*f).into(),
                    Value::Link(l) if name == "image" => match l.file {
                        Some(f) => self.src.path(f).into(),
                        None => l.target.clone(),
                    },
                    _ => self.text(&v).into(),
                };
                Ok(match name {
                    "html" => Value::Html(s),
                    "image" => Value::Image(s),
                    _ => Value::Icon(s),
                })
            }
            _ => Err(EvalError::at(pos, format!("unknown function `{name}()`"))),
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

    /// Runs `body` with `value` and `index` bound to each element.
    fn lambda_each(
        &mut self,
        items: &[Value],
        body: &Expr,
        mut f: impl FnMut(&Value, Value) -> bool,
    ) -> Result<(), EvalError> {
        self.charge(items.len() as u64, body.pos)?;
        for (i, item) in items.iter().enumerate() {
            self.locals.push(("value", item.clone()));
            self.locals.push(("index", Value::Number(i as f64)));
            let r = self.eval(body);
            self.locals.truncate(self.locals.len() - 2);
            if !f(item, r?) {
                break;
            }
        }
        Ok(())
    }

    /// A method call `recv.name(args)`.
    fn method(&mut self, recv: Value, name: &str, args: &[Expr], pos: u32) -> R {
        // Any type.
        match name {
            "isTruthy" => return Ok(Value::Bool(recv.truthy())),
            "isType" => {
                let t = self.arg(args, 0)?;
                let want = self.text(&t).to_lowercase();
                let is = match (want.as_str(), &recv) {
                    ("string" | "text", Value::String(_)) => true,
                    ("file", Value::File(_) | Value::Note(_)) => true,
                    ("regexp" | "regex", Value::Regex(_)) => true,
                    ("null" | "undefined", Value::Null) => true,
                    ("array", Value::List(_)) => true,
                    (w, v) => w == v.type_name(),
                };
                return Ok(Value::Bool(is));
            }
            "toString" => return Ok(Value::str(self.text(&recv))),
            "isEmpty" => return Ok(Value::Bool(recv.is_empty())),
            _ => {}
        }
        match recv {
            Value::String(s) => self.string_method(&s, name, args, pos),
            Value::Number(n) => self.number_method(n, name, args, pos),
            Value::List(l) => self.list_method(&l, name, args, pos),
            Value::Date(d) => self.date_method(d, name, args, pos),
            Value::Object(o) => match name {
                "keys" => Ok(Value::List(Arc::new(
                    o.iter().map(|(k, _)| Value::String(k.clone())).collect(),
                ))),
                "values" => Ok(Value::List(Arc::new(
                    o.iter().map(|(_, v)| v.clone()).collect(),
                ))),
                _ => Err(no_method("object", name, pos)),
            },
            Value::Regex(p) => match name {
                "matches" => {
                    let v = self.arg(args, 0)?;
                    Ok(Value::Bool(p.regex.is_match(&self.text(&v))))
                }
                _ => Err(no_method("regular expression", name, pos)),
            },
            Value::File(f) | Value::Note(f) => self.file_method(f, name, args, pos),
            Value::Link(l) => match name {
                "asFile" => Ok(l.file.map_or(Value::Null, Value::File)),
                "linksTo" => {
                    let other = self.arg(args, 0)?;
                    let to = self.target_of(&other);
                    Ok(Value::Bool(match (l.file, to) {
                        (Some(f), Some(t)) => self.src.links_to(f, t),
                        _ => false,
                    }))
                }
                // Other methods see the link as its text, as Obsidian's string functions do.
                _ => {
                    let s: Arc<str> = self.text(&Value::Link(l)).into();
                    self.string_method(&s, name, args, pos)
                }
            },
            Value::Null => match name {
                // Methods on a missing property give nothing, as Obsidian shows an empty cell.
                _ if is_known_method(name) => Ok(Value::Null),
                _ => Err(no_method("null", name, pos)),
            },
            Value::Duration(d) => match name {
                "abs" => Ok(Value::Duration(Duration {
                    months: d.months.abs(),
                    ms: d.ms.abs(),
                })),
                _ => self.number_method(d.total_ms(), name, args, pos),
            },
            other => Err(no_method(other.type_name(), name, pos)),
        }
    }

    fn target_of(&self, v: &Value) -> Option<FileRef> {
        match v {
            Value::String(s) => self.lookup_file(s),
            other => other.file(),
        }
    }

    fn file_method(&mut self, f: FileRef, name: &str, args: &[Expr], pos: u32) -> R {
        match name {
            "asLink" => {
                let display = match args.first() {
                    Some(a) => Some(self.eval(a)?),
                    None => None,
                };
                Ok(self.file_link(f, display))
            }
            "hasLink" => {
                let other = self.arg(args, 0)?;
                Ok(Value::Bool(
                    self.target_of(&other)
                        .is_some_and(|t| self.src.links_to(f, t)),
                ))
            }
            "hasProperty" => {
                let k = self.arg(args, 0)?;
                Ok(Value::Bool(self.src.property(f, &self.text(&k)).is_some()))
            }
            "hasTag" => {
                for v in self.args(args)? {
                    let items = match v {
                        Value::List(l) => l.to_vec(),
                        other => vec![other],
                    };
                    for t in items {
                        let tag = self.text(&t);
                        if self.row_has_tag(f, &tag) {
                            return Ok(Value::Bool(true));
                        }
                    }
                }
                Ok(Value::Bool(false))
            }
            "inFolder" => {
                let v = self.arg(args, 0)?;
                let folder = self.text(&v);
                let folder = folder.trim_matches('/');
                let path = self.src.path(f);
                Ok(Value::Bool(
                    folder.is_empty()
                        || path
                            .strip_prefix(folder)
                            .is_some_and(|rest| rest.starts_with('/')),
                ))
            }
            "linksTo" => {
                let other = self.arg(args, 0)?;
                Ok(Value::Bool(
                    self.target_of(&other)
                        .is_some_and(|t| self.src.links_to(f, t)),
                ))
            }
            _ => Err(no_method("file", name, pos)),
        }
    }

    /// Counts one regex search (and the bytes it passed over) in a loop over the matches of
    /// `split` or `replace`, and reads the clock: the regex crate bounds each search, not an
    /// iteration (a pattern matching the empty string everywhere may read the rest of the string
    /// at every position), so the deadline is checked between searches.
    fn charge_search(&mut self, bytes: usize, pos: u32) -> Result<(), EvalError> {
        self.charge(1 + bytes as u64 / BYTES_PER_STEP, pos)?;
        self.budget.check_time(pos)
    }

    /// `s.split(re)`, at most `limit` parts, within the budget.
    fn split_regex(&mut self, s: &str, re: &regex::Regex, limit: usize, pos: u32) -> R {
        let mut parts = Vec::new();
        let mut last = 0;
        for m in re.find_iter(s) {
            self.charge_search(m.end().saturating_sub(last), pos)?;
            if parts.len() >= limit {
                break;
            }
            parts.push(Value::str(&s[last..m.start()]));
            last = m.end();
        }
        if parts.len() < limit {
            parts.push(Value::str(&s[last..]));
        }
        Ok(Value::List(Arc::new(parts)))
    }

    /// `s.replace(re, rep)` (every match when `global`), within the budget and the string cap.
    fn replace_regex(
        &mut self,
        s: &str,
        re: &regex::Regex,
        rep: &str,
        global: bool,
        pos: u32,
    ) -> Result<String, EvalError> {
        let mut out = String::new();
        let mut last = 0;
        if !rep.contains('$') {
            // Nothing to expand: no capture groups needed.
            for m in re.find_iter(s) {
                self.charge_search(m.end().saturating_sub(last) + rep.len(), pos)?;
                out.push_str(&s[last..m.start()]);
                out.push_str(rep);
                last = m.end();
                if out.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                if !global {
                    break;
                }
            }
            out.push_str(&s[last..]);
            return Ok(out);
        }
        for caps in re.captures_iter(s) {
            let Some(m) = caps.get(0) else { continue };
            self.charge_search(m.end().saturating_sub(last) + rep.len(), pos)?;
            out.push_str(&s[last..m.start()]);
            caps.expand(rep, &mut out);
            last = m.end();
            if out.len() > MAX_STRING_BYTES {
                return Err(EvalError::at(pos, "string too long"));
            }
            if !global {
                break;
            }
        }
        out.push_str(&s[last..]);
        Ok(out)
    }

    fn string_method(&mut self, s: &Arc<str>, name: &str, args: &[Expr], pos: u32) -> R {
        // Every string method reads its string (most in full): charged by size.
        self.charge(s.len() as u64 / BYTES_PER_STEP, pos)?;
        let texts = |ev: &mut Self| -> Result<Vec<String>, EvalError> {
            let vals = ev.args(args)?;
            Ok(vals.iter().map(|v| ev.text(v)).collect())
        };
        Ok(match name {
            "contains" => Value::Bool(texts(self)?.iter().take(1).all(|t| s.contains(&**t))),
            "containsAll" => Value::Bool(texts(self)?.iter().all(|t| s.contains(&**t))),
            "containsAny" => Value::Bool(texts(self)?.iter().any(|t| s.contains(&**t))),
            "startsWith" => Value::Bool(texts(self)?.first().is_some_and(|t| s.starts_with(&**t))),
            "endsWith" => Value::Bool(texts(self)?.first().is_some_and(|t| s.ends_with(&**t))),
            "lower" | "toLowerCase" => Value::str(s.to_lowercase()),
            "upper" | "toUpperCase" => Value::str(s.to_uppercase()),
            "trim" => Value::str(s.trim()),
            "title" => Value::str(title_case(s)),
            "reverse" => Value::str(s.chars().rev().collect::<String>()),
            "repeat" => {
                let n = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=1e9).contains(&n) {
                    return Err(EvalError::at(pos, "repeat() count must be 0 or more"));
                }
                let n = n as usize;
                if s.len().saturating_mul(n) > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(s.repeat(n))
            }
            "slice" => {
                let chars: Vec<char> = s.chars().collect();
                let (a, b) = self.slice_bounds(args, chars.len())?;
                Value::str(chars[a..b].iter().collect::<String>())
            }
            "split" => {
                let sep = self.arg(args, 0)?;
                let n = match args.get(1) {
                    Some(a) => self.eval(a)?.as_number().map(|n| n.max(0.0) as usize),
                    None => None,
                };
                let limit = n.unwrap_or(MAX_LIST_LEN).min(MAX_LIST_LEN);
                let parts: Vec<Value> = match &sep {
                    Value::Regex(p) => return self.split_regex(s, &p.regex, limit, pos),
                    other => {
                        let sep = self.text(other);
                        if sep.is_empty() {
                            s.chars()
                                .take(limit)
                                .map(|c| Value::str(c.to_string()))
                                .collect()
                        } else {
                            s.split(&*sep).take(limit).map(Value::str).collect()
                        }
                    }
                };
                Value::List(Arc::new(parts))
            }
            "replace" => {
                let pat = self.arg(args, 0)?;
                let rep = self.arg(args, 1)?;
                let rep = self.text(&rep);
                let out = match &pat {
                    Value::Regex(p) => {
                        let rep = js_replacement(&rep);
                        self.replace_regex(s, &p.regex, &rep, p.global, pos)?
                    }
                    other => {
                        let from = self.text(other);
                        if from.is_empty() {
                            s.to_string()
                        } else {
                            s.replace(&*from, &rep)
                        }
                    }
                };
                if out.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(out)
            }
            _ => return Err(no_method("string", name, pos)),
        })
    }

    fn slice_bounds(&mut self, args: &[Expr], len: usize) -> Result<(usize, usize), EvalError> {
        let norm = |n: f64| -> usize {
            if n < 0.0 {
                (len as f64 + n).max(0.0) as usize
            } else {
                (n as usize).min(len)
            }
        };
        let a = norm(self.arg(args, 0)?.as_number().unwrap_or(0.0).trunc());
        let b = match args.get(1) {
            Some(e) => match self.eval(e)?.as_number() {
                Some(n) => norm(n.trunc()),
                None => len,
            },
            None => len,
        };
        Ok((a, b.max(a)))
    }

    fn number_method(&mut self, n: f64, name: &str, args: &[Expr], pos: u32) -> R {
        Ok(match name {
            "abs" => Value::Number(n.abs()),
            "ceil" => Value::Number(n.ceil()),
            "floor" => Value::Number(n.floor()),
            "round" => {
                let digits = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=20.0).contains(&digits) {
                    return Err(EvalError::at(pos, "round() takes 0 to 20 digits"));
                }
                let f = 10f64.powi(digits as i32);
                // JavaScript's Math.round: halves go up.
                Value::Number((n * f + 0.5).floor() / f)
            }
            "toFixed" => {
                let p = self.arg(args, 0)?.as_number().unwrap_or(0.0);
                if !(0.0..=100.0).contains(&p) {
                    return Err(EvalError::at(pos, "toFixed() takes 0 to 100 digits"));
                }
                if !n.is_finite() {
                    Value::str(number_text(n))
                } else {
                    Value::str(format!("{:.*}", p as usize, n))
                }
            }
            _ => return Err(no_method("number", name, pos)),
        })
    }

    fn list_method(&mut self, l: &Arc<Vec<Value>>, name: &str, args: &[Expr], pos: u32) -> R {
        self.charge(l.len() as u64 / 8, pos)?;
        Ok(match name {
            "contains" => {
                let v = self.arg(args, 0)?;
                Value::Bool(l.iter().any(|x| x.equals(&v)))
            }
            "containsAll" => {
                let vs = self.args(args)?;
                // Each value is looked for in the whole list.
                self.charge((l.len() * vs.len()) as u64 / 8, pos)?;
                Value::Bool(vs.iter().all(|v| l.iter().any(|x| x.equals(v))))
            }
            "containsAny" => {
                let vs = self.args(args)?;
                self.charge((l.len() * vs.len()) as u64 / 8, pos)?;
                Value::Bool(vs.iter().any(|v| l.iter().any(|x| x.equals(v))))
            }
            "filter" | "map" => {
                let Some(body) = args.first() else {
                    return Err(EvalError::at(pos, format!("{name}() needs an expression")));
                };
                let mut out = Vec::new();
                let keep = name == "filter";
                self.lambda_each(l, body, |item, r| {
                    if keep {
                        if r.truthy() {
                            out.push(item.clone());
                        }
                    } else {
                        out.push(r);
                    }
                    true
                })?;
                Value::List(Arc::new(out))
            }
            "reduce" => {
                let Some(body) = args.first() else {
                    return Err(EvalError::at(pos, "reduce() needs an expression"));
                };
                let mut acc = self.arg(args, 1)?;
                self.charge(l.len() as u64, pos)?;
                for (i, item) in l.iter().enumerate() {
                    self.locals.push(("value", item.clone()));
                    self.locals.push(("index", Value::Number(i as f64)));
                    self.locals.push(("acc", acc.clone()));
                    let r = self.eval(body);
                    self.locals.truncate(self.locals.len() - 3);
                    acc = r?;
                }
                acc
            }
            "flat" => {
                let mut out = Vec::new();
                for x in l.iter() {
                    match x {
                        Value::List(inner) => out.extend(inner.iter().cloned()),
                        other => out.push(other.clone()),
                    }
                    if out.len() > MAX_LIST_LEN {
                        return Err(EvalError::at(pos, "list too long"));
                    }
                }
                Value::List(Arc::new(out))
            }
            "join" => {
                let sep = match args.first() {
                    Some(a) => {
                        let v = self.eval(a)?;
                        self.text(&v)
                    }
                    None => ",".to_owned(),
                };
                let parts: Vec<String> = l.iter().map(|v| self.text(v)).collect();
                let s = parts.join(&sep);
                if s.len() > MAX_STRING_BYTES {
                    return Err(EvalError::at(pos, "string too long"));
                }
                Value::str(s)
            }
            "reverse" => Value::List(Arc::new(l.iter().rev().cloned().collect())),
            // Not on the Functions page, but the Bases syntax page's custom summary uses
            // `values.mean()`: the numbers of the list (others skipped).
            "mean" | "sum" | "min" | "max" => {
                let nums: Vec<f64> = l
                    .iter()
                    .filter(|v| matches!(v, Value::Number(_)))
                    .filter_map(Value::as_number)
                    .collect();
                let r = match name {
                    "sum" => Some(nums.iter().sum()),
                    "mean" => {
                        (!nums.is_empty()).then(|| nums.iter().sum::<f64>() / nums.len() as f64)
                    }
                    "min" => nums.iter().copied().reduce(f64::min),
                    _ => nums.iter().copied().reduce(f64::max),
                };
                r.map_or(Value::Null, Value::Number)
            }
            "slice" => {
                let (a, b) = self.slice_bounds(args, l.len())?;
                Value::List(Arc::new(l[a..b].to_vec()))
            }
            "sort" => {
                let mut out = l.to_vec();
                let names = |f: FileRef| self.file_name(f);
                out.sort_by(|a, b| a.sort_cmp(b, false, &names));
                Value::List(Arc::new(out))
            }
            "unique" => {
                self.charge(l.len() as u64, pos)?;
                let kept = super::value::distinct(l);
                Value::List(Arc::new(kept.into_iter().map(|i| l[i].clone()).collect()))
            }
            _ => return Err(no_method("list", name, pos)),
        })
    }

    fn date_method(&mut self, d: Date, name: &str, args: &[Expr], pos: u32) -> R {
        Ok(match name {
            "date" => Value::Date(Date::day(d.at.date())),
            "time" => Value::str(d.at.format("%H:%M:%S").to_string()),
            "format" => {
                let f = self.arg(args, 0)?;
                let f = self.text(&f);
                // A date without a time formats time tokens as midnight, as Moment does.
                let out = moment::format_datetime(&f, d.at);
                Value::str(out.map_err(|e| EvalError::at(pos, format!("format(): {e}")))?)
            }
            "relative" => Value::str(relative(d.at, self.src.now())),
            _ => return Err(no_method("date", name, pos)),
        })
    }
}

fn no_method(ty: &str, name: &str, pos: u32) -> EvalError {
    EvalError::at(pos, format!("a {ty} has no method `{name}()`"))
}

/// Every method name some type has (so `missing.lower()` is empty, not an error).
fn is_known_method(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "contains",
        "containsAll",
        "containsAny",
        "startsWith",
        "endsWith",
        "lower",
        "upper",
        "toLowerCase",
        "toUpperCase",
        "trim",
        "title",
        "reverse",
        "repeat",
        "slice",
        "split",
        "replace",
        "abs",
        "ceil",
        "floor",
        "round",
        "toFixed",
        "filter",
        "map",
        "reduce",
        "flat",
        "join",
        "sort",
        "unique",
        "mean",
        "sum",
        "min",
        "max",
        "date",
        "time",
        "format",
        "relative",
        "keys",
        "values",
        "matches",
        "asFile",
        "linksTo",
        "asLink",
        "hasLink",
        "hasProperty",
        "hasTag",
        "inFolder",
    ];
    NAMES.contains(&name)
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

fn short(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_owned()
    }
}

fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
            start = false;
        } else {
            out.push(c);
            start = c.is_whitespace();
        }
    }
    out
}

/// JavaScript's `$1`, `$&` in a replacement, written for the `regex` crate (`${1}`, `${0}`);
/// a literal `$` otherwise.
pub(super) fn js_replacement(rep: &str) -> String {
    let mut out = String::with_capacity(rep.len());
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(d) if d.is_ascii_digit() => {
                let mut n = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    n.push(d);
                    chars.next();
                    if n.len() == 2 {
                        break;
                    }
                }
                out.push_str(&format!("${{{n}}}"));
            }
            Some('&') => {
                chars.next();
                out.push_str("${0}");
            }
            Some('$') => {
                chars.next();
                out.push_str("$$");
            }
            _ => out.push_str("$$"),
        }
    }
    out
}

/// A number in [0, 1) that changes between queries and rows (not for security).
fn pseudo_random(salt: u64) -> f64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = t ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
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
