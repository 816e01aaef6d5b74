//! The Tasks query language, parsed into a [`Query`] (docs/Queries/*).
//!
//! One instruction per line; `#` starts a comment line; a line ending in `\` continues on the
//! next (`\\` at the very end is one literal backslash). Keywords are case-insensitive, except
//! the Boolean operators `AND`, `OR`, `XOR`, `NOT`, which must be capitals as in the plugin.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use chrono::NaiveDate;
use regex::Regex;

use crate::obsidian::budget::{Budget, Spent};
use crate::obsidian::jsregex::JsRegexError;

use super::dates::{DateRange, parse_range};
use super::settings::StatusType;

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// Most instruction lines in a query (after joining continuations).
pub const MAX_QUERY_LINES: usize = 1_000;
/// Longest regex pattern in a `regex matches` filter, in bytes.
pub const MAX_REGEX_BYTES: usize = 1_000;
/// Compiled size limit of one regex (its program, and apart its lazy DFA).
pub const MAX_REGEX_COMPILED: usize = 1 << 20;
/// Bytes charged to the request's budget before a regex of a query is compiled: what its
/// program and its lazy DFA may grow to. A pattern written several times is compiled (and
/// charged) once per query.
pub const REGEX_CHARGE: u64 = crate::obsidian::jsregex::footprint(MAX_REGEX_COMPILED);
/// Deepest nesting of Boolean sub-expressions.
pub const MAX_NESTING: usize = 32;
/// Most `sort by` and most `group by` instructions.
pub const MAX_SORTS: usize = 32;

/// Why a query could not be parsed. `line` is 1-based, the first physical line of the
/// instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    #[error("the query is {size} bytes, over the {max}-byte limit")]
    TooLong { size: usize, max: usize },
    #[error("the query has over {max} instructions")]
    TooManyLines { max: usize },
    #[error("line {line}: do not understand query instruction `{instruction}`")]
    Unknown { line: usize, instruction: String },
    #[error("line {line}: invalid instruction `{instruction}`: {reason}")]
    Invalid {
        line: usize,
        instruction: String,
        reason: String,
    },
    #[error(
        "line {line}: `{instruction}` needs JavaScript (Tasks' scripting), which capvault does not run: it reads tasks without executing code from the vault"
    )]
    Scripting { line: usize, instruction: String },
    /// The request's budget ran out while the query was read (each new regex is charged
    /// [`REGEX_CHARGE`] bytes before it is compiled).
    #[error("line {line}, reading the query: {spent}")]
    Spent { line: usize, spent: Spent },
}

impl QueryError {
    /// The spent budget that stopped the parse, if that is what stopped it.
    pub fn spent(&self) -> Option<Spent> {
        match self {
            QueryError::Spent { spent, .. } => Some(*spent),
            _ => None,
        }
    }
}

/// A Tasks date field; `Happens` is any of start, scheduled and due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateField {
    Due,
    Scheduled,
    Start,
    Created,
    Done,
    Cancelled,
    Happens,
}

impl DateField {
    pub fn name(self) -> &'static str {
        match self {
            DateField::Due => "due",
            DateField::Scheduled => "scheduled",
            DateField::Start => "start",
            DateField::Created => "created",
            DateField::Done => "done",
            DateField::Cancelled => "cancelled",
            DateField::Happens => "happens",
        }
    }

    fn parse(word: &str) -> Option<DateField> {
        Some(match word {
            "due" => DateField::Due,
            "scheduled" => DateField::Scheduled,
            "start" | "starts" => DateField::Start,
            "created" => DateField::Created,
            "done" => DateField::Done,
            "cancelled" => DateField::Cancelled,
            "happens" => DateField::Happens,
            _ => return None,
        })
    }
}

/// How a date compares with the searched range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateOp {
    /// Before the range's start.
    Before,
    /// After the range's end.
    After,
    /// Inside the range, ends included (`on`, `in`, or nothing).
    In,
    /// Up to the range's end (`on or before`, `in or before`).
    InOrBefore,
    /// From the range's start (`on or after`, `in or after`).
    InOrAfter,
}

/// Fields searched by text filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextField {
    Description,
    Path,
    Root,
    Folder,
    Filename,
    Heading,
    Tags,
    StatusName,
    Recurrence,
    Id,
}

/// A text filter's test.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Case-insensitive substring (held lower-cased).
    Includes(String),
    /// Shared by every filter of the query written with the same `/pattern/flags`.
    Regex(Arc<Regex>),
}

/// A task priority level as queries name it, most important first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PriorityLevel {
    Highest,
    High,
    Medium,
    None,
    Low,
    Lowest,
}

impl PriorityLevel {
    pub fn name(self) -> &'static str {
        match self {
            PriorityLevel::Highest => "Highest",
            PriorityLevel::High => "High",
            PriorityLevel::Medium => "Medium",
            PriorityLevel::None => "Normal",
            PriorityLevel::Low => "Low",
            PriorityLevel::Lowest => "Lowest",
        }
    }
}

/// `priority is ...`'s comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityCmp {
    Is,
    Above,
    Below,
    Not,
}

/// One filter, or a Boolean combination of them.
#[derive(Debug, Clone)]
pub enum Filter {
    /// `done` (true) / `not done` (false).
    Done(bool),
    Date {
        field: DateField,
        op: DateOp,
        range: DateRange,
    },
    /// `has <field> date` (true) / `no <field> date` (false).
    HasDate(DateField, bool),
    /// `<field> date is invalid`.
    InvalidDate(DateField),
    Priority(PriorityCmp, PriorityLevel),
    Text {
        field: TextField,
        negate: bool,
        matcher: Matcher,
    },
    /// `status.type is` (false) / `is not` (true).
    StatusType {
        negate: bool,
        status: StatusType,
    },
    Recurring(bool),
    Blocked(bool),
    Blocking(bool),
    HasTags(bool),
    HasId(bool),
    HasDependsOn(bool),
    ExcludeSubItems,
    Not(Box<Filter>),
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Xor(Box<Filter>, Box<Filter>),
}

/// What `sort by` and `group by` order on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Done or Todo.
    Status,
    StatusName,
    StatusType,
    Urgency,
    Date(DateField),
    Priority,
    Path,
    Root,
    Folder,
    Filename,
    Heading,
    Backlink,
    Description,
    Recurring,
    Recurrence,
    /// `sort by tag [N]` (1-based tag index) / `group by tags`.
    Tag(usize),
    Id,
    Random,
}

/// A `sort by` or `group by` instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    pub key: Key,
    pub reverse: bool,
}

/// Task and query elements `hide` / `show` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    Id,
    DependsOn,
    Priority,
    CancelledDate,
    CreatedDate,
    StartDate,
    ScheduledDate,
    DueDate,
    DoneDate,
    RecurrenceRule,
    OnCompletion,
    Tags,
    Backlink,
    Urgency,
    TaskCount,
    /// Accepted and ignored: the edit and postpone buttons, toolbar, tree, nested backlink,
    /// group count only exist in Obsidian's view.
    Other,
}

/// A parsed query.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// All must match (lines are ANDed).
    pub filters: Vec<Filter>,
    /// The user's sorts, before the default ones.
    pub sorts: Vec<Order>,
    pub groups: Vec<Order>,
    pub limit: Option<usize>,
    pub limit_groups: Option<usize>,
    /// `hide` (false) / `show` (true), in order; later ones win.
    pub layout: Vec<(Element, bool)>,
    pub short_mode: bool,
    pub explain: bool,
    pub ignore_global_query: bool,
    /// The instructions as read, for `explain`.
    pub lines: Vec<Line>,
}

/// One instruction of a query as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its physical lines, continuations kept.
    pub raw: String,
    /// The instruction, continuations joined with one space.
    pub text: String,
    pub kind: LineKind,
}

/// What an instruction is, for `explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineKind {
    /// A filter: the text of each of its simple filters, in the order written (one for a
    /// line that is not Boolean).
    Filter {
        leaves: Vec<String>,
    },
    Sort,
    Group,
    /// `hide`, `show`, `short mode`, `full mode`.
    Layout,
    Limit,
    Explain,
    IgnoreGlobalQuery,
}

impl Query {
    /// Whether an element is shown (all task elements and the backlink and task count are
    /// shown unless hidden; urgency is hidden unless shown).
    pub fn shows(&self, e: Element) -> bool {
        let default = !matches!(e, Element::Urgency);
        self.layout
            .iter()
            .rev()
            .find(|(x, _)| *x == e)
            .map_or(default, |(_, shown)| *shown)
    }

    /// Appends another query's instructions (the global query is parsed and merged first).
    pub fn merge(&mut self, other: Query) {
        self.filters.extend(other.filters);
        self.sorts.extend(other.sorts);
        self.groups.extend(other.groups);
        self.limit = other.limit.or(self.limit);
        self.limit_groups = other.limit_groups.or(self.limit_groups);
        self.layout.extend(other.layout);
        self.short_mode |= other.short_mode;
        self.explain |= other.explain;
        self.ignore_global_query |= other.ignore_global_query;
        self.lines.extend(other.lines);
    }
}

/// Joins continuation lines and drops blanks and comments: (first line number, physical
/// lines as written, text).
fn instructions(source: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String, String)> = None;
    for (i, raw) in source.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let (text, continues) = if let Some(t) = line.strip_suffix("\\\\") {
            (format!("{t}\\"), false)
        } else if let Some(t) = line.strip_suffix('\\') {
            (t.trim().to_owned(), true)
        } else {
            (line.to_owned(), false)
        };
        let joined = match current.take() {
            Some((n, mut written, mut acc)) => {
                written.push('\n');
                written.push_str(line);
                acc.push(' ');
                acc.push_str(text.trim());
                (n, written, acc)
            }
            None => (i + 1, line.to_owned(), text),
        };
        if continues {
            current = Some(joined);
        } else {
            out.push(joined);
        }
    }
    out.extend(current);
    out.into_iter()
        .map(|(n, w, t)| (n, w.trim().to_owned(), t.trim().to_owned()))
        .filter(|(_, _, t)| !t.is_empty() && !t.starts_with('#'))
        .collect()
}

/// What reading one query needs: today, the request's budget, and the regexes compiled so far.
struct Reader<'b> {
    today: NaiveDate,
    budget: &'b Budget,
    /// 1-based line of the instruction being read.
    line: usize,
    /// `/pattern/flags` as written -> compiled.
    regexes: HashMap<String, Arc<Regex>>,
}

impl Reader<'_> {
    fn spent(&self, spent: Spent) -> QueryError {
        QueryError::Spent {
            line: self.line,
            spent,
        }
    }

    /// The regex of `/pattern/flags`, compiled once per query: charged to the budget before it
    /// is compiled, the charge given back when it does not compile.
    fn regex(&mut self, text: &str) -> Result<Result<Arc<Regex>, RegexError>, QueryError> {
        let text = text.trim();
        if let Some(r) = self.regexes.get(text) {
            return Ok(Ok(r.clone()));
        }
        let (pattern, flags) = match split_js(text) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        // A compile takes a while: the clock and the stop check are read before each.
        self.budget.check().map_err(|s| self.spent(s))?;
        self.budget.alloc(REGEX_CHARGE).map_err(|s| self.spent(s))?;
        match compile_js(pattern, flags) {
            Ok(r) => {
                let r = Arc::new(r);
                self.regexes.insert(text.to_owned(), r.clone());
                Ok(Ok(r))
            }
            Err(e) => {
                self.budget.release(REGEX_CHARGE);
                Ok(Err(e))
            }
        }
    }
}

/// Parses a query; relative dates are resolved against `today`. Each instruction is a step of
/// `budget` (polled for time and cancellation), each distinct regex costs [`REGEX_CHARGE`] of
/// its bytes before it is compiled.
pub fn parse_query(source: &str, today: NaiveDate, budget: &Budget) -> Result<Query, QueryError> {
    if source.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong {
            size: source.len(),
            max: MAX_QUERY_BYTES,
        });
    }
    let lines = instructions(source);
    if lines.len() > MAX_QUERY_LINES {
        return Err(QueryError::TooManyLines {
            max: MAX_QUERY_LINES,
        });
    }
    let mut q = Query::default();
    let mut r = Reader {
        today,
        budget,
        line: 1,
        regexes: HashMap::new(),
    };
    budget.check().map_err(|s| r.spent(s))?;
    for (n, raw, line) in lines {
        r.line = n;
        budget.charge(1).map_err(|s| r.spent(s))?;
        let kind = instruction(&mut q, &mut r, &line)?;
        q.lines.push(Line {
            raw,
            text: line,
            kind,
        });
    }
    Ok(q)
}

fn instruction(q: &mut Query, r: &mut Reader, line: &str) -> Result<LineKind, QueryError> {
    let n = r.line;
    let lower = line.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let invalid = |reason: &str| QueryError::Invalid {
        line: n,
        instruction: line.to_owned(),
        reason: reason.to_owned(),
    };
    let scripting = [
        "filter by function",
        "sort by function",
        "group by function",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
        || lower.contains("by function task.");
    if scripting {
        return Err(QueryError::Scripting {
            line: n,
            instruction: line.to_owned(),
        });
    }
    if lower.contains("{{") {
        return Err(invalid(
            "placeholders ({{query.file...}}) need the note the query is in; not supported",
        ));
    }
    Ok(match words.as_slice() {
        ["explain"] => {
            q.explain = true;
            LineKind::Explain
        }
        ["short", "mode"] | ["short"] => {
            q.short_mode = true;
            LineKind::Layout
        }
        ["full", "mode"] | ["full"] => {
            q.short_mode = false;
            LineKind::Layout
        }
        ["ignore", "global", "query"] => {
            q.ignore_global_query = true;
            LineKind::IgnoreGlobalQuery
        }
        ["limit", rest @ ..] => {
            let (groups, rest) = match rest {
                ["groups", r @ ..] => (true, r),
                r => (false, r),
            };
            // Limiting.md: `limit to N tasks`, shorthand `limit N`; `limit groups to N tasks`,
            // shorthand `limit groups N`; `to` and `tasks` each optional, as the plugin reads.
            let rest = match rest {
                ["to", r @ ..] => r,
                r => r,
            };
            let num = match rest {
                [x] | [x, "tasks" | "task"] => x,
                _ => return Err(invalid("expected `limit [groups] [to] N [tasks]`")),
            };
            let v: usize = num
                .parse()
                .map_err(|_| invalid("the limit must be a whole number"))?;
            if groups {
                q.limit_groups = Some(v);
            } else {
                q.limit = Some(v);
            }
            LineKind::Limit
        }
        [verb @ ("hide" | "show"), rest @ ..] => {
            let e = element(&rest.join(" ")).ok_or_else(|| QueryError::Unknown {
                line: n,
                instruction: line.to_owned(),
            })?;
            q.layout.push((e, *verb == "show"));
            LineKind::Layout
        }
        ["sort", "by", rest @ ..] | ["group", "by", rest @ ..] => {
            let sorting = words[0] == "sort";
            let (rest, reverse) = match rest {
                [r @ .., "reverse"] => (r, true),
                r => (r, false),
            };
            let key = order_key(rest, sorting).ok_or_else(|| QueryError::Unknown {
                line: n,
                instruction: line.to_owned(),
            })?;
            let list = if sorting { &mut q.sorts } else { &mut q.groups };
            if list.len() >= MAX_SORTS {
                return Err(invalid("too many sort or group instructions"));
            }
            list.push(Order { key, reverse });
            if sorting {
                LineKind::Sort
            } else {
                LineKind::Group
            }
        }
        _ => {
            let mut leaves = Vec::new();
            let f = parse_filter_line(line, r, &mut leaves)?;
            q.filters.push(f);
            LineKind::Filter { leaves }
        }
    })
}

fn element(s: &str) -> Option<Element> {
    Some(match s {
        "id" => Element::Id,
        "depends on" => Element::DependsOn,
        "priority" => Element::Priority,
        "cancelled date" => Element::CancelledDate,
        "created date" => Element::CreatedDate,
        "start date" => Element::StartDate,
        "scheduled date" => Element::ScheduledDate,
        "due date" => Element::DueDate,
        "done date" => Element::DoneDate,
        "recurrence rule" => Element::RecurrenceRule,
        "on completion" => Element::OnCompletion,
        "tags" => Element::Tags,
        "backlink" | "backlinks" => Element::Backlink,
        "urgency" => Element::Urgency,
        "task count" => Element::TaskCount,
        "edit button" | "postpone button" | "toolbar" | "tree" | "nested backlink"
        | "group count" => Element::Other,
        _ => return None,
    })
}

fn order_key(words: &[&str], sorting: bool) -> Option<Key> {
    Some(match words {
        ["status"] => Key::Status,
        ["status.name"] => Key::StatusName,
        ["status.type"] => Key::StatusType,
        ["urgency"] => Key::Urgency,
        ["priority"] => Key::Priority,
        ["path"] => Key::Path,
        ["root"] => Key::Root,
        ["folder"] => Key::Folder,
        ["filename"] => Key::Filename,
        ["heading"] => Key::Heading,
        ["backlink"] if !sorting => Key::Backlink,
        ["description"] if sorting => Key::Description,
        ["recurring"] => Key::Recurring,
        ["recurrence"] if !sorting => Key::Recurrence,
        ["tags"] if !sorting => Key::Tag(0),
        ["tag"] if sorting => Key::Tag(1),
        ["tag", i] if sorting => Key::Tag(i.parse().ok().filter(|i| *i >= 1)?),
        ["id"] => Key::Id,
        ["random"] if sorting => Key::Random,
        [field] => Key::Date(DateField::parse(field)?),
        _ => return None,
    })
}

struct Patterns {
    date: Regex,
    has: Regex,
    invalid: Regex,
    priority: Regex,
    text: Regex,
    status_type: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        Some(Patterns {
            date: Regex::new(
                r"^(due|scheduled|starts|start|created|done|cancelled|happens)\s+(?:(on or before|on or after|in or before|in or after|before|after|on|in)\s+)?(.+)$",
            )
            .ok()?,
            has: Regex::new(
                r"^(has|no)\s+(due|scheduled|start|created|done|cancelled|happens)\s+date$",
            )
            .ok()?,
            invalid: Regex::new(
                r"^(due|scheduled|start|created|done|cancelled)\s+date\s+is\s+invalid$",
            )
            .ok()?,
            priority: Regex::new(r"^priority\s+is\s+(?:(above|below|not)\s+)?(\S+)$").ok()?,
            text: Regex::new(
                r"^(description|path|root|folder|filename|heading|tags|tag|status\.name|recurrence|id)\s+(includes|include|does not include|do not include|regex matches|regex does not match)(?:\s+(.*))?$",
            )
            .ok()?,
            status_type: Regex::new(r"^status\.type\s+(is not|is)\s+(\S+)$").ok()?,
        })
    })
    .as_ref()
}

/// Parses one filter line, which may be a Boolean combination; the text of each simple
/// filter goes to `leaves`, in the order written.
fn parse_filter_line(
    line: &str,
    r: &mut Reader,
    leaves: &mut Vec<String>,
) -> Result<Filter, QueryError> {
    let t = line.trim();
    let n = r.line;
    if t.starts_with(['(', '[', '{', '"']) || t.starts_with("NOT") {
        let mut p = BoolParser {
            s: t,
            pos: 0,
            n,
            r,
            leaves,
            line,
            depth: 0,
            delims: None,
        };
        let f = p.or()?;
        p.ws();
        if p.pos != p.s.len() {
            return Err(
                p.err("malformed Boolean query: unexpected text after a complete expression")
            );
        }
        return Ok(f);
    }
    leaves.push(t.to_owned());
    simple_filter(t, r)?.ok_or_else(|| QueryError::Unknown {
        line: n,
        instruction: line.to_owned(),
    })
}

fn simple_filter(line: &str, r: &mut Reader) -> Result<Option<Filter>, QueryError> {
    let Some(p) = patterns() else {
        return Ok(None);
    };
    let (n, today) = (r.line, r.today);
    let lower = line.to_lowercase();
    let lower = lower.split_whitespace().collect::<Vec<_>>().join(" ");
    let invalid = |reason: String| QueryError::Invalid {
        line: n,
        instruction: line.to_owned(),
        reason,
    };
    let simple = match lower.as_str() {
        "done" => Some(Filter::Done(true)),
        "not done" => Some(Filter::Done(false)),
        "is recurring" => Some(Filter::Recurring(true)),
        "is not recurring" => Some(Filter::Recurring(false)),
        "is blocked" => Some(Filter::Blocked(true)),
        "is not blocked" => Some(Filter::Blocked(false)),
        "is blocking" => Some(Filter::Blocking(true)),
        "is not blocking" => Some(Filter::Blocking(false)),
        "has tags" | "has tag" => Some(Filter::HasTags(true)),
        "no tags" | "no tag" => Some(Filter::HasTags(false)),
        "has id" => Some(Filter::HasId(true)),
        "no id" => Some(Filter::HasId(false)),
        "has depends on" => Some(Filter::HasDependsOn(true)),
        "no depends on" => Some(Filter::HasDependsOn(false)),
        "exclude sub-items" => Some(Filter::ExcludeSubItems),
        _ => None,
    };
    if simple.is_some() {
        return Ok(simple);
    }
    if let Some(c) = p.has.captures(&lower) {
        let field = DateField::parse(&c[2]).ok_or_else(|| invalid("unknown date field".into()))?;
        return Ok(Some(Filter::HasDate(field, &c[1] == "has")));
    }
    if let Some(c) = p.invalid.captures(&lower) {
        let field = DateField::parse(&c[1]).ok_or_else(|| invalid("unknown date field".into()))?;
        return Ok(Some(Filter::InvalidDate(field)));
    }
    if let Some(c) = p.date.captures(&lower) {
        let field = DateField::parse(&c[1]).ok_or_else(|| invalid("unknown date field".into()))?;
        let op = match c.get(2).map(|m| m.as_str()) {
            Some("before") => DateOp::Before,
            Some("after") => DateOp::After,
            Some("on or before" | "in or before") => DateOp::InOrBefore,
            Some("on or after" | "in or after") => DateOp::InOrAfter,
            _ => DateOp::In,
        };
        let range = parse_range(&c[3], today).ok_or_else(|| {
            invalid(format!(
                "`{}` is not a date or date range Tasks understands",
                &c[3]
            ))
        })?;
        return Ok(Some(Filter::Date { field, op, range }));
    }
    if let Some(c) = p.priority.captures(&lower) {
        let cmp = match c.get(1).map(|m| m.as_str()) {
            Some("above") => PriorityCmp::Above,
            Some("below") => PriorityCmp::Below,
            Some("not") => PriorityCmp::Not,
            _ => PriorityCmp::Is,
        };
        let level = match &c[2] {
            "highest" => PriorityLevel::Highest,
            "high" => PriorityLevel::High,
            "medium" => PriorityLevel::Medium,
            "none" | "normal" => PriorityLevel::None,
            "low" => PriorityLevel::Low,
            "lowest" => PriorityLevel::Lowest,
            other => {
                return Err(invalid(format!(
                    "unknown priority `{other}` (lowest, low, none, medium, high, highest)"
                )));
            }
        };
        return Ok(Some(Filter::Priority(cmp, level)));
    }
    if let Some(c) = p.status_type.captures(&lower) {
        let status = StatusType::parse(&c[2]).ok_or_else(|| {
            invalid("status types are TODO, DONE, IN_PROGRESS, ON_HOLD, CANCELLED, NON_TASK".into())
        })?;
        return Ok(Some(Filter::StatusType {
            negate: &c[1] == "is not",
            status,
        }));
    }
    if let Some(c) = p.text.captures(&lower) {
        let field = match &c[1] {
            "description" => TextField::Description,
            "path" => TextField::Path,
            "root" => TextField::Root,
            "folder" => TextField::Folder,
            "filename" => TextField::Filename,
            "heading" => TextField::Heading,
            "tags" | "tag" => TextField::Tags,
            "status.name" => TextField::StatusName,
            "recurrence" => TextField::Recurrence,
            _ => TextField::Id,
        };
        let op = &c[2];
        let negate = op.contains("not");
        // The search text keeps its case (regexes need it): take it from the original line.
        let value = original_tail(line, op).unwrap_or_default();
        let matcher = if op.starts_with("regex") {
            Matcher::Regex(r.regex(&value)?.map_err(|e| invalid(e.to_string()))?)
        } else {
            Matcher::Includes(value.to_lowercase())
        };
        return Ok(Some(Filter::Text {
            field,
            negate,
            matcher,
        }));
    }
    Ok(None)
}

/// The text after the operator `op` in the original line (case kept).
fn original_tail(line: &str, op: &str) -> Option<String> {
    // Skip the field word, then the operator words.
    fn skip(s: &str) -> &str {
        let s = s.trim_start();
        let end = s.find(char::is_whitespace).unwrap_or(s.len());
        &s[end..]
    }
    let mut rest = skip(line);
    for _ in op.split(' ') {
        rest = skip(rest);
    }
    Some(rest.trim().to_owned())
}

/// Why a `/pattern/flags` regex of a query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    #[error("a regex must be written /pattern/flags")]
    NotSlashed,
    #[error("the regex is over the {MAX_REGEX_BYTES}-byte limit")]
    TooLong,
    #[error("unknown regex flag `{0}`")]
    Flag(char),
    #[error(
        "the regex does not compile (capvault uses Rust's regex syntax, without look-around or backreferences): {0}"
    )]
    Compile(String),
}

/// A JavaScript-style `/pattern/flags`: (pattern, flags).
pub fn split_js(text: &str) -> Result<(&str, &str), RegexError> {
    let t = text.trim();
    let inner = t.strip_prefix('/').ok_or(RegexError::NotSlashed)?;
    let close = inner.rfind('/').ok_or(RegexError::NotSlashed)?;
    let (pattern, flags) = (&inner[..close], &inner[close + 1..]);
    if pattern.len() > MAX_REGEX_BYTES {
        return Err(RegexError::TooLong);
    }
    Ok((pattern, flags))
}

/// Compiles a JavaScript pattern and flags into a Rust regex (uncharged: the caller charges
/// [`REGEX_CHARGE`] first).
fn compile_js(pattern: &str, flags: &str) -> Result<Regex, RegexError> {
    crate::obsidian::jsregex::compile(pattern, flags, MAX_REGEX_COMPILED)
        .map(|r| r.regex)
        .map_err(|e| match e {
            JsRegexError::Flag(c) => RegexError::Flag(c),
            JsRegexError::TooLarge => RegexError::TooLong,
            JsRegexError::Invalid(m) => RegexError::Compile(m),
        })
}

/// Recursive descent over one Boolean line. Precedence (Combining Filters.md): NOT, then
/// XOR, then AND, then OR.
struct BoolParser<'a, 'b> {
    s: &'a str,
    pos: usize,
    n: usize,
    r: &'a mut Reader<'b>,
    /// The text of each simple filter, in the order read.
    leaves: &'a mut Vec<String>,
    line: &'a str,
    depth: usize,
    /// The delimiter pair the line uses (mixing is an error, as in the plugin).
    delims: Option<(char, char)>,
}

impl BoolParser<'_, '_> {
    fn err(&self, reason: &str) -> QueryError {
        QueryError::Invalid {
            line: self.n,
            instruction: self.line.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn rest(&self) -> &str {
        self.s.get(self.pos..).unwrap_or_default()
    }

    fn ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    /// Consumes the operator `op` if it is next, as a whole word.
    fn keyword(&mut self, op: &str) -> bool {
        self.ws();
        let r = self.rest();
        if let Some(after) = r.strip_prefix(op)
            && (after.is_empty()
                || after.starts_with(char::is_whitespace)
                || after.starts_with(['(', '[', '{', '"']))
        {
            self.pos += op.len();
            return true;
        }
        false
    }

    fn or(&mut self) -> Result<Filter, QueryError> {
        let mut items = vec![self.and()?];
        while self.keyword("OR") {
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::Or(items)
        })
    }

    fn and(&mut self) -> Result<Filter, QueryError> {
        let mut items = vec![self.xor()?];
        while self.keyword("AND") {
            items.push(self.xor()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Filter::And(items)
        })
    }

    fn xor(&mut self) -> Result<Filter, QueryError> {
        let mut left = self.unary()?;
        while self.keyword("XOR") {
            let right = self.unary()?;
            left = Filter::Xor(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Filter, QueryError> {
        if self.keyword("NOT") {
            let inner = self.unary()?;
            return Ok(Filter::Not(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Filter, QueryError> {
        self.ws();
        let Some(open) = self.rest().chars().next() else {
            return Err(self.err("malformed Boolean query: an operator has nothing after it"));
        };
        let close = match open {
            '(' => ')',
            '[' => ']',
            '{' => '}',
            '"' => '"',
            _ => {
                return Err(self.err(
                    "all filters in a Boolean instruction must be inside one of these pairs of delimiters: (...) [...] {...} \"...\"",
                ));
            }
        };
        match self.delims {
            None => self.delims = Some((open, close)),
            Some((o, _)) if o != open => {
                return Err(self.err("a Boolean instruction must use only one type of delimiter"));
            }
            _ => {}
        }
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(self.err("Boolean expressions are nested too deeply"));
        }
        self.pos += open.len_utf8();
        self.ws();
        let nested = self.rest().starts_with(open) && open != '"' || self.rest().starts_with("NOT");
        let f = if nested {
            let f = self.or()?;
            self.ws();
            if !self.rest().starts_with(close) {
                return Err(self.err("malformed Boolean query: a delimiter is not closed"));
            }
            self.pos += close.len_utf8();
            f
        } else {
            let end = self
                .leaf_end(close)
                .ok_or_else(|| self.err("malformed Boolean query: a delimiter is not closed"))?;
            let text = self
                .s
                .get(self.pos..end)
                .unwrap_or_default()
                .trim()
                .to_owned();
            self.pos = end + close.len_utf8();
            let f = simple_filter(&text, self.r)?
                .ok_or_else(|| self.err(&format!("`{text}` is not a filter Tasks understands")))?;
            self.leaves.push(text);
            f
        };
        self.depth -= 1;
        Ok(f)
    }

    /// The first `close` after which the line ends, another `close` follows, or an operator.
    fn leaf_end(&self, close: char) -> Option<usize> {
        let r = self.rest();
        for (i, c) in r.char_indices() {
            if c != close {
                continue;
            }
            let after = r[i + c.len_utf8()..].trim_start();
            let op_next = ["AND", "OR", "XOR", "NOT"].iter().any(|op| {
                after.strip_prefix(op).is_some_and(|a| {
                    a.is_empty()
                        || a.starts_with(char::is_whitespace)
                        || a.starts_with(['(', '[', '{', '"'])
                })
            });
            if after.is_empty() || after.starts_with(close) || op_next {
                return Some(self.pos + i);
            }
        }
        None
    }
}
