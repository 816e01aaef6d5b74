//! Evaluating DQL over any [`DvSource`] of pages, within a [`Budget`].

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

use super::ast::{BinOp, DateKeyword, Expr, ExprKind};
use crate::obsidian::bases::value::Date;
use crate::obsidian::dataview::value::Duration;
use crate::obsidian::dataview::{DataviewNote, DvDate, Link, ListItem, Subpath, Value};

/// Bytes in one list slot or object entry beyond what its value holds on the heap.
pub const SLOT: u64 = std::mem::size_of::<Value>() as u64;

/// The bytes a copy of `v` allocates on the heap (strings, list and object slots, link parts),
/// counted without recursion, so a deeply nested value costs no stack.
pub fn heap_size(v: &Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            Value::Text(s) => s.len() as u64,
            Value::Link(l) => link_size(l),
            Value::Date(d) => match &d.zone {
                Some(crate::obsidian::dataview::value::Zone::Named(n)) => n.len() as u64,
                _ => 0,
            },
            Value::List(items) => {
                stack.extend(items.iter());
                items.len() as u64 * SLOT
            }
            Value::Object(o) => {
                stack.extend(o.iter().map(|(_, v)| v));
                o.iter()
                    .map(|(k, _)| k.len() as u64 + SLOT + 24)
                    .sum::<u64>()
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Duration(_) => 0,
        });
    }
    total
}

/// Bytes of one object entry (its key's `String` and its value) in the object's vector.
const ENTRY: u64 = std::mem::size_of::<(String, Value)>() as u64;

/// What an object entry costs beyond its value's heap: the key's text and the entry (objects
/// built here are made with room for every entry).
fn entry_cost(key: &str) -> u64 {
    key.len() as u64 + ENTRY
}

/// What [`DataviewNote::page_fields`] copies out of `note`: each frontmatter value and inline
/// field, under at most two names (the key as written and its sanitised form).
pub(crate) fn fields_cost(note: &DataviewNote) -> u64 {
    let front: u64 = note
        .frontmatter
        .iter()
        .map(|(k, v)| 2 * entry_cost(k) + heap_size(v))
        .sum();
    let inline: u64 = note
        .items
        .iter()
        .filter(|i| i.task.is_none())
        .flat_map(|i| &i.fields)
        .chain(&note.fields)
        .map(|f| entry_cost(&f.key) + entry_cost(&f.canonical) + 2 * heap_size(&f.value))
        .sum();
    front.saturating_add(inline)
}

/// Names [`Ev::item_object`] gives every item.
const ITEM_NAMES: [&str; 17] = [
    "text",
    "status",
    "checked",
    "completed",
    "fullyCompleted",
    "task",
    "line",
    "lineCount",
    "path",
    "section",
    "link",
    "blockId",
    "tags",
    "outlinks",
    "parent",
    "annotated",
    "children",
];

/// What [`Ev::item_object`] builds for `item` of the page at `path`, its children aside (each
/// is charged when it is built): the names, the text, three links to the page, the tags, the
/// links, and the inline fields under both their names.
fn item_cost(item: &ListItem, path: &str) -> u64 {
    let names: u64 = ITEM_NAMES.iter().map(|n| entry_cost(n)).sum();
    let section = item.section.as_ref().map_or(0, |s| s.len() as u64);
    let block = item.block_id.as_ref().map_or(0, |b| b.len() as u64);
    let tags: u64 = item.tags.iter().map(|t| t.len() as u64 + SLOT).sum();
    let links: u64 = item.outlinks.iter().map(|l| link_size(l) + SLOT).sum();
    let fields: u64 = item
        .fields
        .iter()
        .map(|f| entry_cost(&f.key) + entry_cost(&f.canonical) + 2 * heap_size(&f.value))
        .sum();
    names
        .saturating_add(item.text.len() as u64)
        .saturating_add(3 * (path.len() as u64 + 64) + 2 * section + 2 * block)
        .saturating_add(tags + links + fields)
        .saturating_add(item.children.len() as u64 * SLOT)
}

/// What [`raw_json`] builds from `v`, counted without recursion.
pub(crate) fn json_cost(v: &serde_json::Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            serde_json::Value::String(s) => s.len() as u64,
            serde_json::Value::Array(a) => {
                stack.extend(a.iter());
                a.len() as u64 * SLOT
            }
            serde_json::Value::Object(m) => {
                stack.extend(m.values());
                m.keys().map(|k| entry_cost(k)).sum()
            }
            _ => 0,
        });
    }
    total
}

fn link_size(l: &Link) -> u64 {
    let sub = match &l.subpath {
        Some(Subpath::Heading(s) | Subpath::Block(s)) => s.len(),
        None => 0,
    };
    (l.path.len() + sub + l.display.as_ref().map_or(0, String::len)) as u64
}

/// An upper bound on the length of the text Dataview renders for `v` (a date or duration is at
/// most a few dozen characters; a link adds its brackets; a list its separators).
pub fn text_bound(v: &Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            Value::Text(s) => s.len() as u64,
            Value::Link(l) => link_size(l).saturating_mul(2) + 8,
            Value::List(items) => {
                stack.extend(items.iter());
                items.len() as u64 * 2 + 4
            }
            Value::Object(o) => {
                stack.extend(o.iter().map(|(_, v)| v));
                o.iter().map(|(k, _)| k.len() as u64 + 6).sum::<u64>() + 4
            }
            Value::Date(_) | Value::Duration(_) | Value::Number(_) => 96,
            Value::Null | Value::Bool(_) => 8,
        });
    }
    total
}

/// A page of the source, as the source numbers it.
pub type PageId = usize;

/// What the evaluator needs from a vault. Capvault's vault model implements it; tests use a
/// small table.
pub trait DvSource {
    /// Every Markdown page.
    fn pages(&self) -> Vec<PageId>;
    /// True when [`DvSource::pages`] gives the pages in path order already (the evaluator then
    /// does not sort them again).
    fn pages_in_path_order(&self) -> bool {
        false
    }
    /// The vault-relative path (`folder/Note.md`).
    fn path(&self, p: PageId) -> &str;
    /// Size in bytes.
    fn size(&self, p: PageId) -> u64;
    /// Last modification, local time.
    fn mtime(&self, p: PageId) -> Option<NaiveDateTime>;
    /// Creation, local time, when known.
    fn ctime(&self, p: PageId) -> Option<NaiveDateTime>;
    /// The raw frontmatter (a JSON object), if any.
    fn frontmatter(&self, p: PageId) -> Option<&serde_json::Value>;
    /// The page's Dataview data ([`crate::obsidian::dataview::parse_note`]).
    fn note(&self, p: PageId) -> Option<&DataviewNote>;
    /// Explicit tags (frontmatter and body), with `#`, each once.
    fn tags(&self, p: PageId) -> Vec<String>;
    /// Links of the page as written (body and frontmatter).
    fn outlinks(&self, p: PageId) -> Vec<Link>;
    /// Resolves a link target as Obsidian does from `from`.
    fn resolve(&self, target: &str, from: Option<PageId>) -> Option<PageId>;
    /// Pages with a link resolving to `p`.
    fn inlinks(&self, p: PageId) -> Vec<PageId>;
    /// Pages carrying `tag` (with `#`) or a tag nested under it, compared case-insensitively,
    /// when the source keeps such an index (`FROM #tag` then reads it instead of every page's
    /// tags). `None`: ask [`Self::tags`] page by page.
    fn pages_with_tag(&self, _tag: &str) -> Option<Vec<PageId>> {
        None
    }
    /// Bookmarked (`file.starred`); `None` when unknown.
    fn starred(&self, _p: PageId) -> Option<bool> {
        None
    }
    /// One page field as [`Ev::page_field`] finds it in [`Self::note`], when the source can
    /// find it without building the page's whole [`DataviewNote`] (a `WHERE` over many pages
    /// asks one field of each). `None`: ask [`Self::note`].
    fn page_field(&self, _p: PageId, _name: &str) -> Option<Option<Value>> {
        None
    }
    /// Why the source stopped building pages: it charges what a page's [`DataviewNote`] will
    /// hold to the query's budget before building it, and a refused page reads as no page.
    /// The evaluator checks this at every charge, so a query never answers from a page that
    /// was left out.
    fn spent(&self) -> Option<crate::obsidian::budget::Spent> {
        None
    }
    /// The bytes the source has charged for what it keeps for the rest of the query (its
    /// pages' data): a `WHERE` gives back what a row's condition built, never these.
    fn kept_bytes(&self) -> u64 {
        0
    }
}

/// Most evaluation steps one query may take, and longest it may evaluate.
pub use crate::obsidian::budget::{MAX_QUERY_TIME, MAX_STEPS};
/// Most rows a query may hold at any step (FLATTEN multiplies them).
pub const MAX_ROWS: usize = 200_000;
/// Largest list or string an expression may build.
pub const MAX_VALUE_LEN: usize = 1_000_000;
/// Largest compiled regular expression.
pub const MAX_REGEX_BYTES: usize = 1 << 20;
/// Deepest lambda and link-following recursion.
pub const MAX_CALL_DEPTH: usize = 64;

/// Why evaluation failed: a message and the byte offset of the expression in the query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {pos})")]
pub struct EvalError {
    pub message: String,
    pub pos: u32,
    /// The whole query must stop (why: budget spent, cancelled); else only this row failed.
    pub spent: Option<crate::obsidian::budget::Spent>,
}

impl EvalError {
    pub(crate) fn new(message: impl Into<String>, pos: u32) -> EvalError {
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

/// The error a spent budget gives a DQL query.
fn spent(e: crate::obsidian::budget::Spent, pos: u32) -> EvalError {
    use crate::obsidian::budget::Spent;
    EvalError {
        message: match e {
            Spent::Steps(max) => format!(
                "stopped after {max} evaluation steps; narrow its source (FROM a folder or a tag)"
            ),
            Spent::Time(t) => format!(
                "stopped at its time limit ({:.1} s); narrow its source (FROM a folder or a tag)",
                t.as_secs_f64()
            ),
            Spent::Bytes(_) => {
                format!("{e}; narrow its source (FROM a folder or a tag) or build smaller values")
            }
            other => other.to_string(),
        },
        pos,
        spent: Some(e),
    }
}

/// How a query is evaluated: the clock, the page it is shown in (`this`), the settings, the
/// budget and the row cap. Make one per query: the query spends its budget.
#[derive(Debug)]
pub struct Context {
    /// "Now", local time (`date(now)`, `date(today)`...).
    pub now: NaiveDateTime,
    /// The page the query is in (`this`, `[[]]`).
    pub this: Option<PageId>,
    pub settings: super::DataviewSettings,
    /// The request's budget, which every query of the request shares.
    pub budget: std::sync::Arc<Budget>,
    /// Most rows at any step (at most [`MAX_ROWS`]).
    pub max_rows: usize,
}

impl Context {
    /// Default settings and budget, no current page.
    pub fn new(now: NaiveDateTime) -> Context {
        Context {
            now,
            this: None,
            settings: super::DataviewSettings::default(),
            budget: std::sync::Arc::new(Budget::new()),
            max_rows: MAX_ROWS,
        }
    }
}

/// A row of a query: a page, a task of a page, or a group; plus the names FLATTEN and GROUP
/// BY bound.
#[derive(Debug, Clone, Default)]
pub(crate) struct Row {
    pub page: Option<PageId>,
    /// Index of the task in the page's items.
    pub task: Option<usize>,
    pub bound: Vec<(String, Value)>,
    /// The rows of a group.
    pub members: Option<Rc<Vec<Row>>>,
}

/// The evaluator of one query.
pub(crate) struct Ev<'a, S: DvSource + ?Sized> {
    pub src: &'a S,
    pub ctx: &'a Context,
    fields: RefCell<HashMap<PageId, Fields>>,
    pub(crate) locals: RefCell<Vec<(String, Value)>>,
    depth: std::cell::Cell<usize>,
    /// The pages whose data the values evaluated so far were read from, while recording
    /// ([`Ev::record`]): where an answer's text comes from, for its provenance.
    read: RefCell<std::collections::BTreeSet<PageId>>,
    recording: std::cell::Cell<bool>,
    /// The patterns compiled so far, by their text.
    pub(crate) regexes: RefCell<HashMap<String, regex::Regex>>,
    /// Bytes charged for [`Ev::page_fields`]' merged fields, kept until the query ends.
    kept: std::cell::Cell<u64>,
    /// Why a charge made where no error could be returned was refused ([`Ev::page_fields`]):
    /// the query stops at its next charge.
    refused: std::cell::Cell<Option<crate::obsidian::budget::Spent>>,
}

type R = Result<Value, EvalError>;
/// A page's merged fields, shared.
type Fields = Rc<Vec<(String, Value)>>;

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::Text(_) => "string",
        Value::Date(_) => "date",
        Value::Duration(_) => "duration",
        Value::Link(_) => "link",
        Value::List(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Dataview's truthiness.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => *n != 0.0 && !n.is_nan(),
        Value::Text(s) => !s.is_empty(),
        Value::Date(_) | Value::Link(_) => true,
        Value::Duration(d) => d.months != 0 || d.ms != 0.0,
        Value::List(l) => !l.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A date's instant in UTC milliseconds when its zone is an offset, else wall-clock.
pub(crate) fn date_millis(d: &DvDate) -> i64 {
    let m = d.date.millis();
    match d.zone {
        Some(crate::obsidian::dataview::Zone::Offset(min)) => m - i64::from(min) * 60_000,
        _ => m,
    }
}

const DAY_MS: i64 = 86_400_000;

/// `a - b` as Dataview computes it: Luxon's `diff` in years, months, days, hours, minutes,
/// seconds and milliseconds, then normalised as Dataview normalises every duration (Luxon's
/// `shiftToAll().normalize()`, with its casual units: days roll up into weeks of 7, weeks into
/// months of 4, months into years of 12). `date(2026-12-07) - date(2026-01-01)` is 11 months
/// and 6 days; 28 days from January 1st are a month. When `a` is before `b`, every part is
/// negative (the negation of `b - a`). Dates too far apart for the calendar: milliseconds.
pub(crate) fn date_diff(a: &DvDate, b: &DvDate) -> Duration {
    let (ia, ib) = (date_millis(a), date_millis(b));
    let (earlier, later, sign) = if ib > ia { (a, b, -1) } else { (b, a, 1) };
    let Some((months, days, rest)) = calendar_diff(earlier, later) else {
        return Duration {
            months: 0,
            ms: (ia - ib) as f64,
        };
    };
    let (days, rest) = (days + rest / DAY_MS, rest % DAY_MS);
    let (weeks, days) = (days / 7, days % 7);
    let (months, weeks) = (months + weeks / 4, weeks % 4);
    Duration {
        months: sign * months,
        ms: (sign * ((weeks * 7 + days) * DAY_MS + rest)) as f64,
    }
}

/// Luxon's diff from `earlier` to `later` (not before it), in the earlier date's zone: the
/// years, then the months between their local calendar fields, then the days between their
/// local dates, each one less while adding it to `earlier` (its day kept within the month)
/// goes past `later`; then the milliseconds left. Whole months, days, and milliseconds.
fn calendar_diff(earlier: &DvDate, later: &DvDate) -> Option<(i64, i64, i64)> {
    let (e, l) = (earlier.date.at, later.date.at);
    let end = date_millis(later);
    // `earlier` moved by `months` (its day clamped to the month's end) and `days`.
    let moved = |months: i64, days: i64| -> Option<NaiveDateTime> {
        let n = chrono::Months::new(u32::try_from(months.unsigned_abs()).ok()?);
        let at = if months >= 0 {
            e.checked_add_months(n)?
        } else {
            e.checked_sub_months(n)?
        };
        at.checked_add_signed(chrono::TimeDelta::try_days(days)?)
    };
    let instant = |months: i64, days: i64| -> Option<i64> {
        let at = moved(months, days)?;
        Some(date_millis(&DvDate {
            date: Date {
                at,
                time: earlier.date.time,
            },
            zone: earlier.zone.clone(),
        }))
    };
    // A count of a unit, backed off while it overshoots `later` (twice at most, as Luxon).
    let back_off = |mut n: i64, reach: &dyn Fn(i64) -> Option<i64>| -> Option<i64> {
        for _ in 0..2 {
            if reach(n)? > end {
                n -= 1;
            }
        }
        Some(n)
    };
    let years = back_off(i64::from(l.year() - e.year()), &|y| instant(12 * y, 0))?;
    let c = moved(12 * years, 0)?;
    let month_fields =
        i64::from(l.month()) - i64::from(c.month()) + 12 * i64::from(l.year() - c.year());
    let months = 12 * years + back_off(month_fields, &|m| instant(12 * years + m, 0))?;
    let c = moved(months, 0)?;
    let days = back_off((l.date() - c.date()).num_days(), &|d| instant(months, d))?;
    let rest = end - instant(months, days)?;
    (rest >= 0).then_some((months, days, rest))
}

pub(crate) fn dv_date(at: NaiveDateTime, time: bool) -> Value {
    Value::Date(DvDate {
        date: Date { at, time },
        zone: None,
    })
}

/// Strings compared as a locale would, roughly: case-insensitively first, then lower case
/// before upper case.
pub(crate) fn locale_cmp(a: &str, b: &str) -> Ordering {
    let la = a.chars().flat_map(char::to_lowercase);
    let lb = b.chars().flat_map(char::to_lowercase);
    la.cmp(lb).then_with(|| b.cmp(a))
}

/// The file name without folder and extension.
pub(crate) fn page_name(path: &str) -> &str {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.strip_suffix(".md").unwrap_or(base)
}

pub(crate) fn page_link(path: &str) -> Value {
    Value::Link(Link {
        path: path.to_owned(),
        subpath: None,
        display: None,
        embed: false,
    })
}

fn obj_get<'v>(o: &'v [(String, Value)], key: &str) -> Option<&'v Value> {
    o.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A date in a file name: `yyyy-mm-dd` or `yyyymmdd`.
fn date_in_name(name: &str) -> Option<NaiveDate> {
    let b = name.as_bytes();
    for i in 0..b.len() {
        if i > 0 && b[i - 1].is_ascii_digit() {
            continue;
        }
        let d = |r: std::ops::Range<usize>| -> Option<u32> {
            let s = b.get(r)?;
            s.iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        if let (Some(y), Some(m), Some(day)) = (d(i..i + 4), d(i + 5..i + 7), d(i + 8..i + 10))
            && b.get(i + 4) == Some(&b'-')
            && b.get(i + 7) == Some(&b'-')
            && !b.get(i + 10).is_some_and(u8::is_ascii_digit)
            && let Some(date) = NaiveDate::from_ymd_opt(y as i32, m, day)
        {
            return Some(date);
        }
        if let (Some(y), Some(m), Some(day)) = (d(i..i + 4), d(i + 4..i + 6), d(i + 6..i + 8))
            && !b.get(i + 8).is_some_and(u8::is_ascii_digit)
            && let Some(date) = NaiveDate::from_ymd_opt(y as i32, m, day)
        {
            return Some(date);
        }
    }
    None
}

/// The index of the item starting on `line` (items are in line order).
pub(crate) fn item_at(note: &DataviewNote, line: usize) -> Option<usize> {
    note.items.binary_search_by_key(&line, |x| x.line).ok()
}

/// Expands `#a/b` into `#a`, `#a/b` (each once, in order).
pub(crate) fn expand_tags(tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Seen prefixes by value: a page of thousands of tags is expanded in linear time.
    let mut seen = std::collections::HashSet::new();
    for t in tags {
        let mut end = 0;
        loop {
            let next = t[end..].find('/').map(|i| end + i);
            let prefix = &t[..next.unwrap_or(t.len())];
            if seen.insert(prefix) {
                out.push(prefix.to_owned());
            }
            match next {
                Some(i) => end = i + 1,
                None => break,
            }
        }
    }
    out
}

impl<'a, S: DvSource + ?Sized> Ev<'a, S> {
    pub fn new(src: &'a S, ctx: &'a Context) -> Ev<'a, S> {
        Ev {
            src,
            ctx,
            fields: RefCell::new(HashMap::new()),
            locals: RefCell::new(Vec::new()),
            depth: std::cell::Cell::new(0),
            read: RefCell::new(Default::default()),
            recording: std::cell::Cell::new(false),
            regexes: RefCell::new(HashMap::new()),
            kept: std::cell::Cell::new(0),
            refused: std::cell::Cell::new(None),
        }
    }

    /// Starts or stops recording the pages whose data values are read from (what was
    /// recorded is kept).
    pub fn record(&self, on: bool) {
        self.recording.set(on);
    }

    /// The pages recorded, in id order.
    pub fn pages_read(&self) -> Vec<PageId> {
        self.read.borrow().iter().copied().collect()
    }

    fn note_read(&self, p: PageId) {
        if self.recording.get() {
            self.read.borrow_mut().insert(p);
        }
    }

    pub fn charge(&self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.ctx.budget.charge(n).map_err(|e| spent(e, pos))?;
        self.source_spent(pos)
    }

    /// The source's refusal to build a page ([`DvSource::spent`]), as the query's error.
    pub fn source_spent(&self, pos: u32) -> Result<(), EvalError> {
        match self.refused.get().or_else(|| self.src.spent()) {
            Some(e) => Err(spent(e, pos)),
            None => Ok(()),
        }
    }

    /// Bytes charged for what lives as long as the query (the source's pages, the merged
    /// fields): a `WHERE` does not give them back with what a condition built.
    pub fn kept_bytes(&self) -> u64 {
        self.kept.get().saturating_add(self.src.kept_bytes())
    }

    /// The page's fields, merged as Dataview merges them (cached).
    pub fn page_fields(&self, p: PageId) -> Rc<Vec<(String, Value)>> {
        self.note_read(p);
        if let Some(f) = self.fields.borrow().get(&p) {
            return f.clone();
        }
        let note = self.src.note(p);
        // The merged fields are copies of the page's frontmatter and inline fields, each under
        // at most two names, charged before they are made; when the budget refuses them the
        // page has no fields and the query stops at its next charge.
        let cost = note.map_or(0, fields_cost);
        if cost > 0
            && let Err(e) = self.ctx.budget.alloc(cost)
        {
            self.refused.set(Some(e));
            return Rc::new(Vec::new());
        }
        self.kept.set(self.kept.get().saturating_add(cost));
        let f = Rc::new(note.map(DataviewNote::page_fields).unwrap_or_default());
        self.fields.borrow_mut().insert(p, f.clone());
        f
    }

    /// One page field, as [`Self::page_fields`] would give it, found without building the
    /// merged map: the values of the raw key `name`, else those of every raw key whose
    /// sanitised form is `name` (one value, or a list of several).
    pub fn page_field(&self, p: PageId, name: &str) -> Option<Value> {
        self.note_read(p);
        if let Some(found) = self.src.page_field(p, name) {
            return found;
        }
        let note = self.src.note(p)?;
        let raw = || {
            note.frontmatter
                .iter()
                .map(|(k, v)| (k.as_str(), None, v))
                .chain(
                    note.items
                        .iter()
                        .filter(|i| i.task.is_none())
                        .flat_map(|i| &i.fields)
                        .chain(&note.fields)
                        .map(|f| (f.key.as_str(), Some(f.canonical.as_str()), &f.value)),
                )
        };
        let mut found: Vec<Value> = raw()
            .filter(|(k, _, _)| *k == name)
            .map(|(_, _, v)| v.clone())
            .collect();
        if found.is_empty() {
            found = raw()
                .filter(|(k, c, _)| match c {
                    Some(c) => *c == name,
                    None => crate::obsidian::dataview::canonical_is(k, name),
                })
                .map(|(_, _, v)| v.clone())
                .collect();
        }
        match found.len() {
            0 => None,
            1 => found.pop(),
            _ => Some(Value::List(found)),
        }
    }

    /// Resolves a link value to a page.
    pub fn resolve_link(&self, l: &Link) -> Option<PageId> {
        if l.path.is_empty() {
            return self.ctx.this;
        }
        self.src.resolve(&l.path, self.ctx.this)
    }

    // ---- implicit fields ----

    /// `file.<name>` of a page.
    pub fn file_field(&self, p: PageId, name: &str, pos: u32) -> R {
        self.note_read(p);
        let path = self.src.path(p);
        Ok(match name {
            "name" => Value::Text(page_name(path).to_owned()),
            "folder" => Value::Text(path.rsplit_once('/').map_or("", |(f, _)| f).to_owned()),
            "path" => Value::Text(path.to_owned()),
            "ext" => Value::Text(
                path.rsplit('/')
                    .next()
                    .and_then(|b| b.rsplit_once('.'))
                    .map_or("", |(_, e)| e)
                    .to_owned(),
            ),
            "link" => page_link(path),
            "size" => Value::Number(self.src.size(p) as f64),
            "ctime" => self.src.ctime(p).map_or(Value::Null, |t| dv_date(t, true)),
            "cday" => self.src.ctime(p).map_or(Value::Null, |t| {
                dv_date(t.date().and_time(NaiveTime::MIN), false)
            }),
            "mtime" => self.src.mtime(p).map_or(Value::Null, |t| dv_date(t, true)),
            "mday" => self.src.mtime(p).map_or(Value::Null, |t| {
                dv_date(t.date().and_time(NaiveTime::MIN), false)
            }),
            "tags" => {
                let tags = self.src.tags(p);
                // `#a/b/c` gives at most three prefixes, each at most as long.
                self.alloc(
                    tags.iter()
                        .map(|t| (t.len() as u64 + SLOT) * (1 + t.matches('/').count() as u64))
                        .sum(),
                    pos,
                )?;
                Value::List(expand_tags(&tags).into_iter().map(Value::Text).collect())
            }
            "etags" => {
                let tags = self.src.tags(p);
                self.alloc(tags.iter().map(|t| t.len() as u64 + SLOT).sum(), pos)?;
                Value::List(tags.into_iter().map(Value::Text).collect())
            }
            "inlinks" => {
                let ins = self.src.inlinks(p);
                self.charge(ins.len() as u64, pos)?;
                // Each a link to the page: its path, and its name as the display text.
                self.alloc(
                    ins.iter()
                        .map(|i| 2 * self.src.path(*i).len() as u64 + SLOT + 64)
                        .sum(),
                    pos,
                )?;
                Value::List(
                    ins.into_iter()
                        .map(|i| page_link(self.src.path(i)))
                        .collect(),
                )
            }
            "outlinks" => {
                let outs = self.src.outlinks(p);
                self.charge(outs.len() as u64, pos)?;
                let mut list = Vec::with_capacity(outs.len());
                for l in outs {
                    let target = self.src.resolve(&l.path, Some(p)).map(|t| self.src.path(t));
                    // The link as written, or one to the page it resolves to, charged first.
                    self.alloc(
                        link_size(&l) + 2 * target.map_or(0, |t| t.len() as u64) + SLOT + 64,
                        pos,
                    )?;
                    list.push(match target {
                        Some(t) if l.subpath.is_none() => page_link(t),
                        Some(t) => Value::Link(Link {
                            path: t.to_owned(),
                            ..l
                        }),
                        None => Value::Link(l),
                    });
                }
                Value::List(list)
            }
            "aliases" => {
                let fm = self.src.frontmatter(p);
                let a = fm.and_then(|f| f.get("aliases").or_else(|| f.get("alias")));
                // The copy below and the list made of it.
                self.alloc(2 * a.map_or(0, json_cost), pos)?;
                let a = a.cloned().unwrap_or(serde_json::Value::Null);
                match a {
                    serde_json::Value::Array(items) => Value::List(
                        items
                            .iter()
                            .filter_map(|i| i.as_str().map(|s| Value::Text(s.to_owned())))
                            .collect(),
                    ),
                    serde_json::Value::String(s) => Value::List(
                        s.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(|s| Value::Text(s.to_owned()))
                            .collect(),
                    ),
                    _ => Value::List(Vec::new()),
                }
            }
            "tasks" | "lists" => {
                let Some(note) = self.src.note(p) else {
                    return Ok(Value::List(Vec::new()));
                };
                let tasks = name == "tasks";
                self.alloc(note.items.len() as u64 * SLOT, pos)?;
                let mut out = Vec::with_capacity(note.items.len());
                for (i, item) in note.items.iter().enumerate() {
                    if tasks && item.task.is_none() {
                        continue;
                    }
                    out.push(self.item_object(p, i, pos)?);
                }
                Value::List(out)
            }
            "frontmatter" => match self.src.frontmatter(p) {
                Some(fm) => {
                    self.alloc(json_cost(fm), pos)?;
                    raw_json(fm)
                }
                None => Value::Object(Vec::new()),
            },
            "day" => {
                if let Some(d) = date_in_name(page_name(path)) {
                    dv_date(d.and_time(NaiveTime::MIN), false)
                } else {
                    match self.page_field(p, "date") {
                        Some(v @ Value::Date(_)) => v,
                        _ => Value::Null,
                    }
                }
            }
            "starred" => self.src.starred(p).map_or(Value::Null, Value::Bool),
            _ => Value::Null,
        })
    }

    /// The whole `file` object of a page.
    pub fn file_object(&self, p: PageId, pos: u32) -> R {
        const NAMES: [&str; 20] = [
            "name",
            "folder",
            "path",
            "ext",
            "link",
            "size",
            "ctime",
            "cday",
            "mtime",
            "mday",
            "tags",
            "etags",
            "inlinks",
            "outlinks",
            "aliases",
            "tasks",
            "lists",
            "frontmatter",
            "day",
            "starred",
        ];
        // The names and the small fields (name, folder, path, extension, link, dates); the
        // lists charge themselves as they are built.
        let path = self.src.path(p).len() as u64;
        self.alloc(
            NAMES.iter().map(|n| entry_cost(n)).sum::<u64>() + 6 * path + 512,
            pos,
        )?;
        let mut out = Vec::with_capacity(NAMES.len());
        for n in NAMES {
            out.push((n.to_owned(), self.file_field(p, n, pos)?));
        }
        Ok(Value::Object(out))
    }

    fn item<'n>(&self, p: PageId, i: usize) -> Option<&'n ListItem>
    where
        'a: 'n,
    {
        self.src.note(p).and_then(|n| n.items.get(i))
    }

    /// A field of a list item or task (`text`, `completed`, `due`... and its inline fields).
    pub fn item_field(&self, p: PageId, i: usize, name: &str, pos: u32) -> Option<R> {
        let note = self.src.note(p)?;
        let item = note.items.get(i)?;
        let path = self.src.path(p);
        let link_at = |sub: Option<Subpath>| {
            Value::Link(Link {
                path: path.to_owned(),
                subpath: sub,
                display: None,
                embed: false,
            })
        };
        let state = item.task;
        let v = match name {
            "text" => Value::Text(item.text.clone()),
            "status" => state.map_or(Value::Null, |t| Value::Text(t.status.to_string())),
            "checked" => Value::Bool(state.is_some_and(|t| t.checked)),
            "completed" => Value::Bool(state.is_some_and(|t| t.completed)),
            "fullyCompleted" => Value::Bool(state.is_some_and(|t| t.fully_completed)),
            "task" => Value::Bool(state.is_some()),
            "line" => Value::Number(item.line as f64),
            "lineCount" => Value::Number(item.line_count as f64),
            "path" => Value::Text(path.to_owned()),
            "section" => link_at(item.section.clone().map(Subpath::Heading)),
            "link" => match &item.block_id {
                Some(b) => link_at(Some(Subpath::Block(b.clone()))),
                None => link_at(item.section.clone().map(Subpath::Heading)),
            },
            "blockId" => item.block_id.clone().map_or(Value::Null, Value::Text),
            "tags" => Value::List(item.tags.iter().cloned().map(Value::Text).collect()),
            "outlinks" => Value::List(item.outlinks.iter().cloned().map(Value::Link).collect()),
            "parent" => item.parent.map_or(Value::Null, |l| Value::Number(l as f64)),
            "annotated" => Value::Bool(!item.fields.is_empty()),
            "children" => {
                let mut out = Vec::new();
                for &line in &item.children {
                    if let Some(ci) = item_at(note, line) {
                        match self.item_object(p, ci, pos) {
                            Ok(o) => out.push(o),
                            Err(e) => return Some(Err(e)),
                        }
                    }
                }
                Value::List(out)
            }
            _ => {
                let mut vals: Vec<Value> = item
                    .fields
                    .iter()
                    .filter(|f| f.key == name || f.canonical == name)
                    .map(|f| f.value.clone())
                    .collect();
                return match vals.len() {
                    0 => None,
                    1 => vals.pop().map(Ok),
                    _ => Some(Ok(Value::List(vals))),
                };
            }
        };
        Some(Ok(v))
    }

    /// A list item as an object.
    pub fn item_object(&self, p: PageId, i: usize, pos: u32) -> R {
        self.note_read(p);
        self.depth_in(pos)?;
        let r = (|| {
            self.charge(1, pos)?;
            let Some(item) = self.item(p, i) else {
                return Ok(Value::Null);
            };
            self.alloc(item_cost(item, self.src.path(p)), pos)?;
            let mut out = Vec::with_capacity(ITEM_NAMES.len() + 2 * item.fields.len());
            for n in ITEM_NAMES {
                if let Some(v) = self.item_field(p, i, n, pos) {
                    out.push((n.to_owned(), v?));
                }
            }
            for f in &item.fields {
                for k in [&f.key, &f.canonical] {
                    if obj_get(&out, k).is_none() {
                        out.push((k.clone(), f.value.clone()));
                    }
                }
            }
            Ok(Value::Object(out))
        })();
        self.depth_out();
        r
    }

    fn depth_in(&self, pos: u32) -> Result<(), EvalError> {
        let d = self.depth.get() + 1;
        if d > MAX_CALL_DEPTH {
            return Err(EvalError::new(
                format!("nested deeper than {MAX_CALL_DEPTH} levels"),
                pos,
            ));
        }
        self.depth.set(d);
        Ok(())
    }

    fn depth_out(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    /// A page as an object: its fields and `file`.
    pub fn page_object(&self, p: PageId, pos: u32) -> R {
        let fields = self.page_fields(p);
        self.charge(fields.len() as u64 + 1, pos)?;
        self.alloc(
            fields
                .iter()
                .map(|(k, v)| entry_cost(k) + heap_size(v))
                .sum(),
            pos,
        )?;
        let mut out: Vec<(String, Value)> = Vec::with_capacity(fields.len() + 1);
        out.extend(fields.iter().filter(|(k, _)| k != "file").cloned());
        out.push(("file".into(), self.file_object(p, pos)?));
        Ok(Value::Object(out))
    }

    /// A row as an object (`row`, and each of a group's `rows`).
    pub fn row_object(&self, row: &Row, pos: u32) -> R {
        let mut out = match (row.page, row.task) {
            (Some(p), Some(i)) => match self.item_object(p, i, pos)? {
                Value::Object(mut o) => {
                    let fields = self.page_fields(p);
                    // Pushed onto the item's object, which may grow to twice their entries.
                    self.alloc(
                        fields
                            .iter()
                            .map(|(k, v)| entry_cost(k) + ENTRY + heap_size(v))
                            .sum::<u64>()
                            + 2 * ENTRY,
                        pos,
                    )?;
                    for (k, v) in fields.iter() {
                        if obj_get(&o, k).is_none() {
                            o.push((k.clone(), v.clone()));
                        }
                    }
                    o.push(("file".into(), self.file_object(p, pos)?));
                    o
                }
                _ => Vec::new(),
            },
            (Some(p), None) => match self.page_object(p, pos)? {
                Value::Object(o) => o,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        if let Some(m) = &row.members {
            out.push(("rows".into(), self.members_value(m, pos)?));
        }
        for (k, v) in &row.bound {
            self.alloc_value(v, pos)?;
            out.retain(|(key, _)| key != k);
            out.push((k.clone(), v.clone()));
        }
        Ok(Value::Object(out))
    }

    fn members_value(&self, m: &[Row], pos: u32) -> R {
        self.check_count(m.len(), pos)?;
        self.alloc(m.len() as u64 * SLOT, pos)?;
        let mut out = Vec::with_capacity(m.len());
        for r in m {
            out.push(self.row_object(r, pos)?);
        }
        Ok(Value::List(out))
    }

    // ---- names ----

    /// A lambda's parameter, its copy charged before it is made.
    fn local(&self, name: &str, pos: u32) -> Result<Option<Value>, EvalError> {
        let locals = self.locals.borrow();
        match locals.iter().rev().find(|(k, _)| k == name) {
            Some((_, v)) => {
                self.alloc_value(v, pos)?;
                Ok(Some(v.clone()))
            }
            None => Ok(None),
        }
    }

    /// Resolves `root.k1.k2...` on a row without building more than it needs.
    pub fn path(&self, row: &Row, root: &str, keys: &[&str], pos: u32) -> R {
        self.charge(1, pos)?;
        if let Some(v) = self.local(root, pos)? {
            return self.index_path(v, keys, pos);
        }
        if let Some((_, v)) = row.bound.iter().rev().find(|(k, _)| k == root) {
            self.alloc_value(v, pos)?;
            return self.index_path(v.clone(), keys, pos);
        }
        if root == "rows"
            && let Some(m) = &row.members
        {
            if let Some((first, rest)) = keys.split_first() {
                self.check_count(m.len(), pos)?;
                self.alloc(m.len() as u64 * SLOT, pos)?;
                let mut out = Vec::with_capacity(m.len());
                for r in m.iter() {
                    out.push(self.path(r, first, rest, pos)?);
                }
                return Ok(Value::List(out));
            }
            return self.members_value(m, pos);
        }
        if root == "this" {
            return match self.ctx.this {
                Some(t) => {
                    let r = Row {
                        page: Some(t),
                        ..Row::default()
                    };
                    match keys.split_first() {
                        Some((first, rest)) => self.path(&r, first, rest, pos),
                        None => self.page_object(t, pos),
                    }
                }
                None => Ok(Value::Null),
            };
        }
        if root == "row" {
            return match keys.split_first() {
                Some((first, rest)) => self.path(row, first, rest, pos),
                None => self.row_object(row, pos),
            };
        }
        if let (Some(p), Some(i)) = (row.page, row.task)
            && root != "file"
            && let Some(v) = self.item_field(p, i, root, pos)
        {
            return self.index_path(v?, keys, pos);
        }
        if let Some(p) = row.page {
            if root == "file" {
                return match keys.split_first() {
                    Some((first, rest)) => {
                        let v = self.file_field(p, first, pos)?;
                        self.index_path(v, rest, pos)
                    }
                    None => self.file_object(p, pos),
                };
            }
            if let Some(v) = self.page_field(p, root) {
                return self.index_path(v, keys, pos);
            }
        }
        Ok(Value::Null)
    }

    /// `v.k1.k2...`: links are followed to their page, lists swizzled.
    pub fn index_path(&self, v: Value, keys: &[&str], pos: u32) -> R {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(v);
        };
        match v {
            Value::Link(l) => match self.resolve_link(&l) {
                Some(p) => {
                    self.depth_in(pos)?;
                    let r = self.path(
                        &Row {
                            page: Some(p),
                            ..Row::default()
                        },
                        first,
                        rest,
                        pos,
                    );
                    self.depth_out();
                    r
                }
                None => Ok(Value::Null),
            },
            Value::List(items) => {
                self.charge(items.len() as u64, pos)?;
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(self.index_path(it, keys, pos)?);
                }
                Ok(Value::List(out))
            }
            other => {
                let next = self.index_key(&other, &Value::Text((*first).to_owned()), pos)?;
                self.index_path(next, rest, pos)
            }
        }
    }

    /// `v[key]`.
    pub fn index_key(&self, v: &Value, key: &Value, pos: u32) -> R {
        Ok(match (v, key) {
            (Value::Object(o), Value::Text(k)) => obj_get(o, k).cloned().unwrap_or(Value::Null),
            (Value::List(l), Value::Number(n)) => {
                let i = if *n < 0.0 { *n + l.len() as f64 } else { *n };
                if i >= 0.0 && i.fract() == 0.0 {
                    l.get(i as usize).cloned().unwrap_or(Value::Null)
                } else {
                    Value::Null
                }
            }
            (Value::List(_) | Value::Link(_), Value::Text(k)) => {
                return self.index_path(v.clone(), &[k.as_str()], pos);
            }
            (Value::Text(s), Value::Number(n)) => {
                if *n >= 0.0 && n.fract() == 0.0 {
                    s.chars()
                        .nth(*n as usize)
                        .map_or(Value::Null, |c| Value::Text(c.to_string()))
                } else {
                    Value::Null
                }
            }
            (Value::Date(d), Value::Text(k)) => date_field(d, k),
            (Value::Duration(d), Value::Text(k)) => duration_field(d, k),
            _ => Value::Null,
        })
    }

    // ---- expressions ----

    pub fn eval(&self, e: &Expr, row: &Row) -> R {
        self.charge(1, e.pos)?;
        match &e.kind {
            ExprKind::Literal(v) => {
                self.alloc_value(v, e.pos)?;
                Ok(v.clone())
            }
            ExprKind::DateKeyword(k) => Ok(self.date_keyword(*k)),
            ExprKind::Field(name) => self.path(row, name, &[], e.pos),
            ExprKind::Dot(..) => {
                let mut keys: Vec<&str> = Vec::new();
                let mut base = e;
                while let ExprKind::Dot(inner, k) = &base.kind {
                    keys.push(k);
                    base = inner;
                }
                keys.reverse();
                match &base.kind {
                    ExprKind::Field(root) => self.path(row, root, &keys, e.pos),
                    _ => {
                        let v = self.eval(base, row)?;
                        self.index_path(v, &keys, e.pos)
                    }
                }
            }
            ExprKind::Index(base, idx) => {
                let b = self.eval(base, row)?;
                let i = self.eval(idx, row)?;
                self.index_key(&b, &i, e.pos)
            }
            ExprKind::Call(name, args) => super::functions::call(self, name, args, row, e.pos),
            ExprKind::Lambda(..) => Err(EvalError::new(
                "a lambda can only be passed to a function",
                e.pos,
            )),
            ExprKind::List(items) => {
                self.alloc(items.len() as u64 * SLOT, e.pos)?;
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(self.eval(it, row)?);
                }
                Ok(Value::List(out))
            }
            ExprKind::Object(entries) => {
                self.alloc(entries.len() as u64 * (SLOT + 24), e.pos)?;
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    out.push((k.clone(), self.eval(v, row)?));
                }
                Ok(Value::Object(out))
            }
            ExprKind::Neg(inner) => match self.eval(inner, row)? {
                Value::Number(n) => Ok(Value::Number(-n)),
                Value::Duration(d) => Ok(Value::Duration(Duration {
                    months: -d.months,
                    ms: -d.ms,
                })),
                Value::Null => Ok(Value::Null),
                v => Err(EvalError::new(
                    format!("cannot negate a {}", type_name(&v)),
                    e.pos,
                )),
            },
            ExprKind::Not(inner) => Ok(Value::Bool(!truthy(&self.eval(inner, row)?))),
            ExprKind::Binary(op, l, r) => {
                let a = self.eval(l, row)?;
                match op {
                    BinOp::And if !truthy(&a) => return Ok(Value::Bool(false)),
                    BinOp::Or if truthy(&a) => return Ok(Value::Bool(true)),
                    _ => {}
                }
                let b = self.eval(r, row)?;
                self.binary(*op, &a, &b, e.pos)
            }
        }
    }

    /// Calls a lambda with arguments.
    pub fn call_lambda(&self, f: &Expr, args: Vec<Value>, row: &Row) -> R {
        let ExprKind::Lambda(params, body) = &f.kind else {
            return Err(EvalError::new("expected a lambda `(x) => ...`", f.pos));
        };
        self.depth_in(f.pos)?;
        let n = params.len();
        {
            let mut l = self.locals.borrow_mut();
            for (name, v) in params
                .iter()
                .zip(args.into_iter().chain(std::iter::repeat(Value::Null)))
            {
                l.push((name.clone(), v));
            }
        }
        let r = self.eval(body, row);
        {
            let mut l = self.locals.borrow_mut();
            let len = l.len();
            l.truncate(len.saturating_sub(n));
        }
        self.depth_out();
        r
    }

    pub fn date_keyword(&self, k: DateKeyword) -> Value {
        let now = self.ctx.now;
        let today = now.date();
        let day = |d: NaiveDate| dv_date(d.and_time(NaiveTime::MIN), false);
        let end = |d: NaiveDate| {
            dv_date(
                d.and_time(
                    NaiveTime::from_hms_milli_opt(23, 59, 59, 999).unwrap_or(NaiveTime::MIN),
                ),
                true,
            )
        };
        let sow = today - chrono::Days::new(u64::from(today.weekday().num_days_from_monday()));
        let som = today.with_day(1).unwrap_or(today);
        let soy = NaiveDate::from_ymd_opt(today.year(), 1, 1).unwrap_or(today);
        let eom = som
            .checked_add_months(chrono::Months::new(1))
            .and_then(|d| d.pred_opt())
            .unwrap_or(today);
        match k {
            DateKeyword::Now => dv_date(now, true),
            DateKeyword::Today => day(today),
            DateKeyword::Tomorrow => day(today.succ_opt().unwrap_or(today)),
            DateKeyword::Yesterday => day(today.pred_opt().unwrap_or(today)),
            DateKeyword::Sow => day(sow),
            DateKeyword::Eow => end(sow + chrono::Days::new(6)),
            DateKeyword::Som => day(som),
            DateKeyword::Eom => end(eom),
            DateKeyword::Soy => day(soy),
            DateKeyword::Eoy => end(NaiveDate::from_ymd_opt(today.year(), 12, 31).unwrap_or(today)),
        }
    }

    /// Dataview's ordering: null first, different types by type name, then by value.
    pub fn compare(&self, a: &Value, b: &Value) -> Ordering {
        match (a, b) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
            (Value::Number(x), Value::Number(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Value::Text(x), Value::Text(y)) => locale_cmp(x, y),
            (Value::Date(x), Value::Date(y)) => date_millis(x).cmp(&date_millis(y)),
            (Value::Duration(x), Value::Duration(y)) => x
                .total_ms()
                .partial_cmp(&y.total_ms())
                .unwrap_or(Ordering::Equal),
            (Value::Link(x), Value::Link(y)) => {
                let px = self.resolve_link(x);
                let py = self.resolve_link(y);
                let path_order = match (px, py) {
                    (Some(i), Some(j)) if i == j => Ordering::Equal,
                    _ => {
                        let nx = px.map_or(x.path.as_str(), |i| self.src.path(i));
                        let ny = py.map_or(y.path.as_str(), |i| self.src.path(i));
                        locale_cmp(nx, ny)
                    }
                };
                path_order.then_with(|| {
                    let sx = x.subpath.as_ref().map(subpath_text);
                    let sy = y.subpath.as_ref().map(subpath_text);
                    sx.cmp(&sy)
                })
            }
            (Value::List(x), Value::List(y)) => {
                for (i, j) in x.iter().zip(y) {
                    let o = self.compare(i, j);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                x.len().cmp(&y.len())
            }
            (Value::Object(x), Value::Object(y)) => {
                let mut kx: Vec<&String> = x.iter().map(|(k, _)| k).collect();
                let mut ky: Vec<&String> = y.iter().map(|(k, _)| k).collect();
                kx.sort();
                ky.sort();
                kx.cmp(&ky).then_with(|| {
                    for k in kx {
                        let o = self.compare(
                            obj_get(x, k).unwrap_or(&Value::Null),
                            obj_get(y, k).unwrap_or(&Value::Null),
                        );
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    Ordering::Equal
                })
            }
            _ => type_name(a).cmp(type_name(b)),
        }
    }

    pub fn binary(&self, op: BinOp, a: &Value, b: &Value, pos: u32) -> R {
        let cmp = |o: fn(Ordering) -> bool| Ok(Value::Bool(o(self.compare(a, b))));
        match op {
            BinOp::Eq => return cmp(|o| o == Ordering::Equal),
            BinOp::Ne => return cmp(|o| o != Ordering::Equal),
            BinOp::Lt => return cmp(|o| o == Ordering::Less),
            BinOp::Le => return cmp(|o| o != Ordering::Greater),
            BinOp::Gt => return cmp(|o| o == Ordering::Greater),
            BinOp::Ge => return cmp(|o| o != Ordering::Less),
            BinOp::And => return Ok(Value::Bool(truthy(a) && truthy(b))),
            BinOp::Or => return Ok(Value::Bool(truthy(a) || truthy(b))),
            _ => {}
        }
        let fail = || {
            Err(EvalError::new(
                format!(
                    "no implementation of `{}` for {} and {}",
                    op.symbol(),
                    type_name(a),
                    type_name(b)
                ),
                pos,
            ))
        };
        let date_out = |d: &DvDate, dur: &Duration, sign: i64| match d.date.add(*dur, sign) {
            Some(nd) => Ok(Value::Date(DvDate {
                date: nd,
                zone: d.zone.clone(),
            })),
            None => Err(EvalError::new("date out of range", pos)),
        };
        match (op, a, b) {
            (_, Value::Null, _) | (_, _, Value::Null) => Ok(Value::Null),
            (_, Value::Number(x), Value::Number(y)) => Ok(Value::Number(match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => x / y,
                _ => x % y,
            })),
            (BinOp::Add, Value::Text(x), y) => {
                let y = self.text_of(y, pos)?;
                self.check_len(x.len().saturating_add(y.len()), pos)?;
                Ok(Value::Text(format!("{x}{y}")))
            }
            (BinOp::Add, x, Value::Text(y)) => {
                let x = self.text_of(x, pos)?;
                self.check_len(x.len().saturating_add(y.len()), pos)?;
                Ok(Value::Text(format!("{x}{y}")))
            }
            (BinOp::Mul, Value::Text(s), Value::Number(n))
            | (BinOp::Mul, Value::Number(n), Value::Text(s)) => {
                let count = if n.is_finite() && *n > 0.0 {
                    *n as usize
                } else {
                    0
                };
                self.check_len(s.len().saturating_mul(count), pos)?;
                self.charge((s.len().saturating_mul(count) / 64) as u64, pos)?;
                Ok(Value::Text(s.repeat(count)))
            }
            (BinOp::Add, Value::Date(d), Value::Duration(u))
            | (BinOp::Add, Value::Duration(u), Value::Date(d)) => date_out(d, u, 1),
            (BinOp::Sub, Value::Date(d), Value::Duration(u)) => date_out(d, u, -1),
            (BinOp::Sub, Value::Date(x), Value::Date(y)) => Ok(Value::Duration(date_diff(x, y))),
            (BinOp::Add | BinOp::Sub, Value::Duration(x), Value::Duration(y)) => {
                let s = if op == BinOp::Add { 1 } else { -1 };
                Ok(Value::Duration(Duration {
                    months: x.months.saturating_add(s * y.months),
                    ms: x.ms + s as f64 * y.ms,
                }))
            }
            (BinOp::Mul | BinOp::Div, Value::Duration(d), Value::Number(n))
            | (BinOp::Mul, Value::Number(n), Value::Duration(d)) => {
                let f = if op == BinOp::Mul { *n } else { 1.0 / n };
                let months = d.months as f64 * f;
                let whole = months.trunc();
                Ok(Value::Duration(Duration {
                    months: whole.clamp(-1e15, 1e15) as i64,
                    ms: d.ms * f + (months - whole) * 365.25 * 86_400_000.0 / 12.0,
                }))
            }
            (BinOp::Add, Value::List(x), Value::List(y)) => {
                self.check_count(x.len() + y.len(), pos)?;
                self.charge((x.len() + y.len()) as u64, pos)?;
                self.alloc_value(a, pos)?;
                self.alloc_value(b, pos)?;
                Ok(Value::List(x.iter().chain(y).cloned().collect()))
            }
            (BinOp::Add, Value::Object(x), Value::Object(y)) => {
                self.alloc_value(a, pos)?;
                self.alloc_value(b, pos)?;
                let mut out = x.clone();
                for (k, v) in y {
                    out.retain(|(key, _)| key != k);
                    out.push((k.clone(), v.clone()));
                }
                Ok(Value::Object(out))
            }
            _ => fail(),
        }
    }

    /// Before a string of `n` bytes is built: refused past [`MAX_VALUE_LEN`], else its bytes
    /// are charged to the request's budget.
    pub fn check_len(&self, n: usize, pos: u32) -> Result<(), EvalError> {
        self.check_count(n, pos)?;
        self.alloc(n as u64, pos)
    }

    /// Before a list of `n` elements is built: refused past [`MAX_VALUE_LEN`], else its slots
    /// are charged (what the elements hold is charged by whoever builds or copies them).
    pub fn check_count(&self, n: usize, pos: u32) -> Result<(), EvalError> {
        if n > MAX_VALUE_LEN {
            return Err(EvalError {
                message: format!("a value would exceed {MAX_VALUE_LEN} elements or bytes"),
                pos,
                spent: Some(crate::obsidian::budget::Spent::Bytes(MAX_VALUE_LEN as u64)),
            });
        }
        Ok(())
    }

    /// Charges `n` bytes about to be allocated.
    pub fn alloc(&self, n: u64, pos: u32) -> Result<(), EvalError> {
        self.ctx.budget.alloc(n).map_err(|e| spent(e, pos))?;
        self.source_spent(pos)
    }

    /// Charges what a copy of `v` allocates, before it is copied.
    pub fn alloc_value(&self, v: &Value, pos: u32) -> Result<(), EvalError> {
        self.alloc(heap_size(v), pos)
    }

    /// Dataview's text of a value (`string()`, `+` with text, `join`).
    pub fn to_text(&self, v: &Value) -> String {
        super::render::value_text(v, &self.ctx.settings)
    }

    /// [`Ev::to_text`], its bytes charged before it is written: the text of a value is at most
    /// [`text_bound`] of it.
    pub fn text_of(&self, v: &Value, pos: u32) -> Result<String, EvalError> {
        if let Value::Text(s) = v {
            self.alloc(s.len() as u64, pos)?;
            return Ok(s.clone());
        }
        self.alloc(text_bound(v), pos)?;
        Ok(self.to_text(v))
    }
}

fn subpath_text(s: &Subpath) -> String {
    match s {
        Subpath::Heading(h) => h.clone(),
        Subpath::Block(b) => format!("^{b}"),
    }
}

/// The raw frontmatter as values (no date or link typing).
pub(crate) fn raw_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::Text(s.clone()),
        serde_json::Value::Array(a) => Value::List(a.iter().map(raw_json).collect()),
        serde_json::Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), raw_json(v))).collect())
        }
    }
}

/// `date.year`, `.month`, `.day`, `.hour`, `.minute`, `.second`, `.millisecond`, `.week`,
/// `.weekday` (1 Monday to 7 Sunday), `.weekyear`, `.quarter`.
fn date_field(d: &DvDate, k: &str) -> Value {
    let at = d.date.at;
    let n = |x: u32| Value::Number(f64::from(x));
    match k {
        "year" => Value::Number(f64::from(at.year())),
        "month" => n(at.month()),
        "day" => n(at.day()),
        "hour" => n(at.hour()),
        "minute" => n(at.minute()),
        "second" => n(at.second()),
        "millisecond" => n(at.nanosecond() / 1_000_000),
        "week" | "weekNumber" => n(at.iso_week().week()),
        "weekday" => n(at.weekday().number_from_monday()),
        "weekyear" => Value::Number(f64::from(at.iso_week().year())),
        "quarter" => n((at.month() - 1) / 3 + 1),
        "ordinal" => n(at.ordinal()),
        _ => Value::Null,
    }
}

/// `dur.days`... : the duration in that unit, as Luxon's `shiftTo(unit)` gives it with the
/// casual lengths Dataview's durations use: a year is 365 days or 52 weeks, a month 30 days or
/// 4 weeks (`(date(2026-12-07) - date(2026-01-01)).days`, 11 months and 6 days, is 336).
fn duration_field(d: &Duration, k: &str) -> Value {
    const DAY: f64 = 86_400_000.0;
    const WEEK: f64 = 7.0 * DAY;
    let (years, months) = ((d.months / 12) as f64, (d.months % 12) as f64);
    // The whole weeks of the milliseconds, and the days and time left.
    let weeks = (d.ms / WEEK).trunc();
    let rest = d.ms - weeks * WEEK;
    // The years and months in days, for the units of a day and below.
    let calendar_days = years * 365.0 + months * 30.0;
    let v = match k {
        "years" => years + months / 12.0 + weeks / 52.0 + rest / (365.0 * DAY),
        "months" => years * 12.0 + months + weeks / 4.0 + rest / (30.0 * DAY),
        "weeks" => years * 52.0 + months * 4.0 + d.ms / WEEK,
        "days" => calendar_days + d.ms / DAY,
        "hours" => calendar_days * 24.0 + d.ms / 3_600_000.0,
        "minutes" => calendar_days * 1440.0 + d.ms / 60_000.0,
        "seconds" => calendar_days * 86_400.0 + d.ms / 1000.0,
        "milliseconds" => calendar_days * DAY + d.ms,
        _ => return Value::Null,
    };
    Value::Number(v)
}
