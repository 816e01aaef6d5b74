//! Answering a parsed [`Query`] over a vault's tasks: filters, the default and user sorts,
//! groups, limits, and a Markdown rendering like the plugin's result list.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::mem::size_of;

use chrono::{Datelike, NaiveDate};

use super::query::{
    DateField, DateOp, Element, Filter, Key, LineKind, Matcher, Order, PriorityCmp, PriorityLevel,
    Query, QueryError, TextField, parse_query,
};
use super::settings::{Status, TasksSettings};
use crate::obsidian::budget::{Budget, Spent};
use crate::obsidian::dataview::{ListItem, Priority, TasksFields};

/// Most tasks a query is run over; the rest are not considered.
pub const MAX_TASKS: usize = 200_000;

/// Why a query could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error("the global query (Tasks settings) is invalid: {0}")]
    GlobalQuery(QueryError),
    /// The request's budget (steps, time, bytes, the server's pool, cancellation) ran out.
    #[error("the query {0}")]
    Spent(Spent),
}

impl EvalError {
    /// The spent budget that stopped the query, reading the query or running it.
    pub fn spent(&self) -> Option<Spent> {
        match self {
            EvalError::Spent(s) => Some(*s),
            EvalError::Query(e) | EvalError::GlobalQuery(e) => e.spent(),
        }
    }
}

impl From<Spent> for EvalError {
    fn from(s: Spent) -> Self {
        EvalError::Spent(s)
    }
}

/// One task of the vault, as the evaluator reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Vault path of the note, with its extension.
    pub path: String,
    /// The heading the task is under.
    pub heading: Option<String>,
    /// 0-based line.
    pub line: usize,
    /// The checkbox symbol.
    pub status: char,
    /// The Tasks fields of its line.
    pub fields: TasksFields,
    /// Tags on its line, with `#`.
    pub tags: Vec<String>,
    /// It sits inside another list item.
    pub is_sub_item: bool,
}

impl TaskRecord {
    /// The record of a list item that is a task (`None` for plain items).
    pub fn from_item(path: &str, item: &ListItem) -> Option<TaskRecord> {
        let state = item.task?;
        let fields = item.tasks.clone().unwrap_or_else(|| TasksFields {
            description: item.text.clone(),
            ..TasksFields::default()
        });
        Some(TaskRecord {
            path: path.to_owned(),
            heading: item.section.clone(),
            line: item.line,
            status: state.status,
            fields,
            tags: item.tags.clone(),
            is_sub_item: item.parent.is_some(),
        })
    }

    fn filename(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    fn folder(&self) -> String {
        match self.path.rfind('/') {
            Some(i) => format!("{}/", &self.path[..i]),
            None => "/".to_owned(),
        }
    }

    fn root(&self) -> String {
        match self.path.find('/') {
            Some(i) => format!("{}/", &self.path[..i]),
            None => "/".to_owned(),
        }
    }

    fn date(&self, f: DateField) -> Option<NaiveDate> {
        let t = &self.fields;
        match f {
            DateField::Due => t.due,
            DateField::Scheduled => t.scheduled,
            DateField::Start => t.start,
            DateField::Created => t.created,
            DateField::Done => t.done,
            DateField::Cancelled => t.cancelled,
            DateField::Happens => [t.start, t.scheduled, t.due].into_iter().flatten().min(),
        }
    }

    fn invalid(&self, f: DateField) -> bool {
        let inv = &self.fields.invalid_dates;
        match f {
            DateField::Happens => ["due", "scheduled", "start"]
                .iter()
                .any(|n| inv.contains(n)),
            other => inv.contains(&other.name()),
        }
    }

    fn priority(&self) -> PriorityLevel {
        match self.fields.priority {
            Some(Priority::Highest) => PriorityLevel::Highest,
            Some(Priority::High) => PriorityLevel::High,
            Some(Priority::Medium) => PriorityLevel::Medium,
            None => PriorityLevel::None,
            Some(Priority::Low) => PriorityLevel::Low,
            Some(Priority::Lowest) => PriorityLevel::Lowest,
        }
    }
}

/// Tasks' urgency score (Urgency.md): due, priority, scheduled and start parts summed.
pub fn urgency(t: &TaskRecord, today: NaiveDate) -> f64 {
    let due = match t.fields.due {
        None => 0.0,
        Some(d) => {
            let overdue = (today - d).num_days();
            if overdue >= 7 {
                12.0
            } else if overdue < -14 {
                2.4
            } else {
                // 12.0 at 7 days overdue down to 2.4 at 14 days ahead: 9.6 over 21 days.
                8.8 + overdue as f64 * (9.6 / 21.0)
            }
        }
    };
    let priority = match t.priority() {
        PriorityLevel::Highest => 9.0,
        PriorityLevel::High => 6.0,
        PriorityLevel::Medium => 3.9,
        PriorityLevel::None => 1.95,
        PriorityLevel::Low => 0.0,
        PriorityLevel::Lowest => -1.8,
    };
    let scheduled = match t.fields.scheduled {
        Some(d) if d <= today => 5.0,
        _ => 0.0,
    };
    let start = match t.fields.start {
        Some(d) if d > today => -3.0,
        _ => 0.0,
    };
    due + priority + scheduled + start
}

/// One group of results: its heading at each `group by` level (empty without grouping) and
/// the tasks in it, as indices into the slice the query ran over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultGroup {
    pub names: Vec<String>,
    pub tasks: Vec<usize>,
}

/// A query's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryResult {
    pub groups: Vec<ResultGroup>,
    /// Tasks that matched the filters, before limits.
    pub matched: usize,
    /// Tasks shown after `limit` (a task in several tag groups counts once).
    pub shown: usize,
    /// The query's explanation ([`explain`]) when it says `explain`.
    pub explanation: Option<String>,
}

struct Ctx<'a> {
    tasks: &'a [TaskRecord],
    /// Each task's status, shared by the tasks with the same symbol.
    statuses: Vec<std::rc::Rc<Status>>,
    settings: &'a TasksSettings,
    today: NaiveDate,
    /// Ids of tasks that are not done.
    open_ids: HashSet<&'a str>,
    /// Ids that some not-done task depends on.
    awaited: HashSet<&'a str>,
    budget: &'a Budget,
}

impl Ctx<'_> {
    fn step(&self, n: u64) -> Result<(), EvalError> {
        Ok(self.budget.charge(n)?)
    }

    fn alloc(&self, n: u64) -> Result<(), EvalError> {
        Ok(self.budget.alloc(n)?)
    }
}

/// What a hash set or map entry of `T` costs, roughly (the entry and the table's spare room).
fn entry<T>() -> u64 {
    2 * size_of::<T>() as u64 + 8
}

/// Sorts `v` with `cmp`, one step of `budget` per comparison: once the budget is spent the
/// remaining comparisons say "equal" (the sort ends quickly) and the spent budget is returned.
fn sort_charged<T>(
    v: &mut [T],
    budget: &Budget,
    mut cmp: impl FnMut(&T, &T) -> Ordering,
) -> Result<(), EvalError> {
    let spent: Cell<Option<Spent>> = Cell::new(None);
    v.sort_by(|a, b| {
        if spent.get().is_some() {
            return Ordering::Equal;
        }
        if let Err(s) = budget.charge(1) {
            spent.set(Some(s));
            return Ordering::Equal;
        }
        cmp(a, b)
    });
    match spent.get() {
        Some(s) => Err(s.into()),
        None => Ok(()),
    }
}

/// Removes the global filter from a description (as a word, spaces tidied).
pub fn remove_global_filter(description: &str, filter: &str) -> String {
    if filter.is_empty() {
        return description.to_owned();
    }
    description
        .split(' ')
        .filter(|w| *w != filter)
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_owned()
}

/// Parses `source` (after the global query, unless it says `ignore global query`) and runs it
/// under `budget`.
pub fn run_source(
    source: &str,
    tasks: &[TaskRecord],
    settings: &TasksSettings,
    today: NaiveDate,
    budget: &Budget,
) -> Result<(Query, QueryResult), EvalError> {
    let own = parse_query(source, today, budget)?;
    let global = if own.ignore_global_query || settings.global_query.trim().is_empty() {
        None
    } else {
        Some(parse_query(&settings.global_query, today, budget).map_err(EvalError::GlobalQuery)?)
    };
    let explanation = if own.explain || global.as_ref().is_some_and(|g| g.explain) {
        Some(explain(global.as_ref(), &own, settings, budget)?)
    } else {
        None
    };
    let query = match global {
        None => own,
        Some(mut q) => {
            q.merge(own);
            q
        }
    };
    let mut result = run(&query, tasks, settings, today, budget)?;
    result.explanation = explanation;
    Ok((query, result))
}

/// Runs a parsed query over `tasks` under `budget`: a step per task, filter test, comparison
/// and group key (the clock and the stop check read every [`crate::obsidian::budget::CHECK_EVERY`]
/// steps), and the bytes of what it keeps charged before they are allocated.
pub fn run(
    query: &Query,
    tasks: &[TaskRecord],
    settings: &TasksSettings,
    today: NaiveDate,
    budget: &Budget,
) -> Result<QueryResult, EvalError> {
    budget.check()?;
    let tasks = &tasks[..tasks.len().min(MAX_TASKS)];
    // Each task's status, the ids and dependencies of the open ones, then the matches.
    let ids: usize = tasks
        .iter()
        .map(|t| usize::from(t.fields.id.is_some()) + t.fields.depends_on.len())
        .sum();
    budget.alloc(
        (tasks.len() as u64).saturating_mul(size_of::<std::rc::Rc<Status>>() as u64 + 8)
            + (ids as u64).saturating_mul(entry::<&str>()),
    )?;
    // One status per symbol (a vault has a handful), not one copy per task.
    let mut by_symbol: std::collections::HashMap<char, std::rc::Rc<Status>> =
        std::collections::HashMap::new();
    let statuses: Vec<std::rc::Rc<Status>> = tasks
        .iter()
        .map(|t| {
            by_symbol
                .entry(t.status)
                .or_insert_with(|| std::rc::Rc::new(settings.status(t.status)))
                .clone()
        })
        .collect();
    let mut open_ids = HashSet::new();
    let mut awaited = HashSet::new();
    for (t, s) in tasks.iter().zip(&statuses) {
        if s.status_type.is_done() {
            continue;
        }
        if let Some(id) = &t.fields.id {
            open_ids.insert(id.as_str());
        }
        for d in &t.fields.depends_on {
            awaited.insert(d.as_str());
        }
    }
    let cx = Ctx {
        tasks,
        statuses,
        settings,
        today,
        open_ids,
        awaited,
        budget,
    };
    let gf = &settings.global_filter;
    cx.alloc((tasks.len() as u64).saturating_mul(size_of::<usize>() as u64))?;
    let mut matched = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        cx.step(1)?;
        if !gf.is_empty() && !task.fields.description.contains(gf.as_str()) {
            continue;
        }
        let mut ok = true;
        for f in &query.filters {
            if !test(&cx, f, i)? {
                ok = false;
                break;
            }
        }
        if ok {
            matched.push(i);
        }
    }
    let total = matched.len();
    let mut orders = query.sorts.clone();
    for key in [
        Key::StatusType,
        Key::Urgency,
        Key::Date(DateField::Due),
        Key::Priority,
        Key::Path,
    ] {
        orders.push(Order {
            key,
            reverse: false,
        });
    }
    // The urgencies, and the sort's buffer (half the matches).
    cx.alloc((matched.len() as u64).saturating_mul(entry::<(usize, f64)>() + 4))?;
    let urg: HashMap<usize, f64> = matched
        .iter()
        .map(|&i| (i, urgency(&tasks[i], today)))
        .collect();
    sort_charged(&mut matched, budget, |&a, &b| {
        for o in &orders {
            let c = compare(&cx, &urg, o.key, a, b);
            let c = if o.reverse { c.reverse() } else { c };
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    })?;
    if let Some(l) = query.limit {
        matched.truncate(l);
    }
    let groups = group(&cx, &urg, query, &matched)?;
    // What `limit groups` left, a task in several tag groups counted once.
    let shown = if query.limit_groups.is_some() && !query.groups.is_empty() {
        cx.alloc((matched.len() as u64).saturating_mul(entry::<usize>()))?;
        let mut seen = HashSet::with_capacity(matched.len());
        groups
            .iter()
            .flat_map(|g| &g.tasks)
            .filter(|&&i| seen.insert(i))
            .count()
    } else {
        matched.len()
    };
    Ok(QueryResult {
        groups,
        matched: total,
        shown,
        explanation: None,
    })
}

fn matches_text(cx: &Ctx, m: &Matcher, s: &str) -> Result<bool, EvalError> {
    cx.step(1 + s.len() as u64 / 64)?;
    Ok(match m {
        Matcher::Includes(needle) => s.to_lowercase().contains(needle.as_str()),
        Matcher::Regex(re) => re.is_match(s),
    })
}

fn test(cx: &Ctx, f: &Filter, i: usize) -> Result<bool, EvalError> {
    cx.step(1)?;
    let t = &cx.tasks[i];
    let status_type = cx.statuses[i].status_type;
    Ok(match f {
        Filter::Done(done) => status_type.is_done() == *done,
        // Filters.md: a task without a start date matches every `starts` filter ("EITHER
        // start before today or earlier OR have no start date").
        Filter::Date {
            field: DateField::Start,
            ..
        } if t.fields.start.is_none() && !t.invalid(DateField::Start) => true,
        Filter::Date { field, op, range } => {
            let dates: Vec<NaiveDate> = match field {
                DateField::Happens => [t.fields.start, t.fields.scheduled, t.fields.due]
                    .into_iter()
                    .flatten()
                    .collect(),
                f => t.date(*f).into_iter().collect(),
            };
            dates.iter().any(|d| match op {
                DateOp::Before => *d < range.start,
                DateOp::After => *d > range.end,
                DateOp::In => range.start <= *d && *d <= range.end,
                DateOp::InOrBefore => *d <= range.end,
                DateOp::InOrAfter => *d >= range.start,
            })
        }
        Filter::HasDate(field, has) => {
            let present = match field {
                DateField::Happens => t.date(DateField::Happens).is_some(),
                f => t.date(*f).is_some() || t.invalid(*f),
            };
            present == *has
        }
        Filter::InvalidDate(field) => t.invalid(*field),
        Filter::Priority(cmp, level) => {
            let p = t.priority();
            match cmp {
                PriorityCmp::Is => p == *level,
                PriorityCmp::Not => p != *level,
                PriorityCmp::Above => p < *level,
                PriorityCmp::Below => p > *level,
            }
        }
        Filter::Text {
            field,
            negate,
            matcher,
        } => {
            let hit = match field {
                TextField::Tags => {
                    let mut any = false;
                    for tag in &t.tags {
                        if matches_text(cx, matcher, tag)? {
                            any = true;
                            break;
                        }
                    }
                    any
                }
                other => {
                    let s = match other {
                        TextField::Description => {
                            remove_global_filter(&t.fields.description, &cx.settings.global_filter)
                        }
                        TextField::Path => t.path.clone(),
                        TextField::Root => t.root(),
                        TextField::Folder => t.folder(),
                        TextField::Filename => t.filename().to_owned(),
                        TextField::Heading => t.heading.clone().unwrap_or_default(),
                        TextField::StatusName => cx.statuses[i].name.clone(),
                        TextField::Recurrence => t.fields.recurrence.clone().unwrap_or_default(),
                        TextField::Id => t.fields.id.clone().unwrap_or_default(),
                        TextField::Tags => String::new(),
                    };
                    matches_text(cx, matcher, &s)?
                }
            };
            hit != *negate
        }
        Filter::StatusType { negate, status } => (status_type == *status) != *negate,
        Filter::Recurring(r) => t.fields.recurrence.is_some() == *r,
        Filter::Blocked(b) => {
            let blocked = !status_type.is_done()
                && t.fields
                    .depends_on
                    .iter()
                    .any(|d| cx.open_ids.contains(d.as_str()));
            blocked == *b
        }
        Filter::Blocking(b) => {
            let blocking = !status_type.is_done()
                && t.fields
                    .id
                    .as_deref()
                    .is_some_and(|id| cx.awaited.contains(id));
            blocking == *b
        }
        Filter::HasTags(h) => t.tags.is_empty() != *h,
        Filter::HasId(h) => t.fields.id.is_some() == *h,
        Filter::HasDependsOn(h) => t.fields.depends_on.is_empty() != *h,
        Filter::ExcludeSubItems => !t.is_sub_item,
        Filter::Not(inner) => !test(cx, inner, i)?,
        Filter::And(items) => {
            for it in items {
                if !test(cx, it, i)? {
                    return Ok(false);
                }
            }
            true
        }
        Filter::Or(items) => {
            for it in items {
                if test(cx, it, i)? {
                    return Ok(true);
                }
            }
            false
        }
        Filter::Xor(a, b) => test(cx, a, i)? != test(cx, b, i)?,
    })
}

/// Dates sort invalid first, then earliest to latest, then none.
fn date_rank(t: &TaskRecord, f: DateField) -> (u8, Option<NaiveDate>) {
    if f != DateField::Happens && t.invalid(f) && t.date(f).is_none() {
        return (0, None);
    }
    match t.date(f) {
        Some(d) => (1, Some(d)),
        None => (2, None),
    }
}

fn fnv(s: &str, seed: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes().chain(s.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn compare(cx: &Ctx, urg: &HashMap<usize, f64>, key: Key, a: usize, b: usize) -> Ordering {
    let (ta, tb) = (&cx.tasks[a], &cx.tasks[b]);
    let (sa, sb) = (&cx.statuses[a], &cx.statuses[b]);
    match key {
        Key::Status => sa.status_type.is_done().cmp(&sb.status_type.is_done()),
        Key::StatusName => sa.name.cmp(&sb.name),
        Key::StatusType => sa.status_type.sort_rank().cmp(&sb.status_type.sort_rank()),
        Key::Urgency => {
            let (ua, ub) = (
                urg.get(&a).copied().unwrap_or(0.0),
                urg.get(&b).copied().unwrap_or(0.0),
            );
            ub.total_cmp(&ua)
        }
        Key::Date(f) => date_rank(ta, f).cmp(&date_rank(tb, f)),
        Key::Priority => ta.priority().cmp(&tb.priority()),
        Key::Path => ta.path.cmp(&tb.path),
        Key::Root => ta.root().cmp(&tb.root()),
        Key::Folder => ta.folder().cmp(&tb.folder()),
        Key::Filename => ta.filename().cmp(tb.filename()),
        Key::Heading | Key::Backlink => ta.heading.cmp(&tb.heading),
        Key::Description => {
            let gf = &cx.settings.global_filter;
            remove_global_filter(&ta.fields.description, gf)
                .to_lowercase()
                .cmp(&remove_global_filter(&tb.fields.description, gf).to_lowercase())
        }
        Key::Recurring => tb
            .fields
            .recurrence
            .is_some()
            .cmp(&ta.fields.recurrence.is_some()),
        Key::Recurrence => ta.fields.recurrence.cmp(&tb.fields.recurrence),
        Key::Tag(n) => {
            let ga = ta.tags.get(n.saturating_sub(1)).map(|s| s.to_lowercase());
            let gb = tb.tags.get(n.saturating_sub(1)).map(|s| s.to_lowercase());
            // Tasks without the tag go last.
            (ga.is_none(), ga).cmp(&(gb.is_none(), gb))
        }
        Key::Id => ta.fields.id.cmp(&tb.fields.id),
        Key::Random => {
            let seed = cx.today.to_string();
            fnv(&ta.fields.description, &seed).cmp(&fnv(&tb.fields.description, &seed))
        }
    }
}

/// A group heading at one level: how it sorts, and its name.
type GroupKey = ((i64, String), String);

fn weekday_name(d: NaiveDate) -> &'static str {
    match d.weekday() {
        chrono::Weekday::Mon => "Monday",
        chrono::Weekday::Tue => "Tuesday",
        chrono::Weekday::Wed => "Wednesday",
        chrono::Weekday::Thu => "Thursday",
        chrono::Weekday::Fri => "Friday",
        chrono::Weekday::Sat => "Saturday",
        chrono::Weekday::Sun => "Sunday",
    }
}

fn group_keys(cx: &Ctx, urg: &HashMap<usize, f64>, key: Key, i: usize) -> Vec<GroupKey> {
    let t = &cx.tasks[i];
    let s = &cx.statuses[i];
    let plain = |name: String| vec![((0, name.clone()), name)];
    match key {
        Key::Status => {
            let done = s.status_type.is_done();
            let name = if done { "Done" } else { "Todo" };
            vec![((i64::from(!done), String::new()), name.to_owned())]
        }
        Key::StatusName => plain(s.name.clone()),
        Key::StatusType => vec![(
            (i64::from(s.status_type.sort_rank()), String::new()),
            s.status_type.name().to_owned(),
        )],
        Key::Urgency => {
            let u = urg.get(&i).copied().unwrap_or(0.0);
            // Highest first: sort on the negated score in hundredths.
            vec![(
                (-(u * 100.0).round() as i64, String::new()),
                format!("{u:.2}"),
            )]
        }
        Key::Date(f) => {
            let (rank, d) = date_rank(t, f);
            let name = match (rank, d) {
                (0, _) => format!("Invalid {} date", f.name()),
                (_, Some(d)) => format!("{} {}", d.format("%Y-%m-%d"), weekday_name(d)),
                _ => format!("No {} date", f.name()),
            };
            vec![(
                (
                    i64::from(rank),
                    d.map(|d| d.to_string()).unwrap_or_default(),
                ),
                name,
            )]
        }
        Key::Priority => {
            let p = t.priority();
            vec![((p as i64, String::new()), format!("{} priority", p.name()))]
        }
        Key::Path => plain(t.path.strip_suffix(".md").unwrap_or(&t.path).to_owned()),
        Key::Root => plain(t.root()),
        Key::Folder => plain(t.folder()),
        Key::Filename => {
            let f = t.filename();
            plain(format!("[[{}]]", f.strip_suffix(".md").unwrap_or(f)))
        }
        Key::Backlink => plain(backlink_text(t)),
        Key::Heading => match &t.heading {
            Some(h) => vec![((1, h.clone()), h.clone())],
            None => vec![((0, String::new()), "(No heading)".to_owned())],
        },
        Key::Tag(_) => {
            if t.tags.is_empty() {
                plain("(No tags)".to_owned())
            } else {
                let mut seen = HashSet::new();
                t.tags
                    .iter()
                    .filter(|g| seen.insert(g.as_str()))
                    .map(|g| ((0, g.clone()), g.clone()))
                    .collect()
            }
        }
        Key::Recurring => {
            let r = t.fields.recurrence.is_some();
            let name = if r { "Recurring" } else { "Not Recurring" };
            vec![((i64::from(!r), String::new()), name.to_owned())]
        }
        Key::Recurrence => match &t.fields.recurrence {
            Some(r) => vec![((1, r.clone()), r.clone())],
            None => vec![((0, String::new()), "None".to_owned())],
        },
        Key::Id => match &t.fields.id {
            Some(id) => vec![((1, id.clone()), id.clone())],
            None => vec![((0, String::new()), "No id".to_owned())],
        },
        Key::Description | Key::Random => plain(String::new()),
    }
}

/// What a group key holds.
fn key_bytes(k: &GroupKey) -> u64 {
    (size_of::<GroupKey>() + k.0.1.len() + k.1.len()) as u64
}

/// What a group path holds.
fn path_bytes(p: &[GroupKey]) -> u64 {
    size_of::<Vec<GroupKey>>() as u64 + p.iter().map(key_bytes).sum::<u64>()
}

fn backlink_text(t: &TaskRecord) -> String {
    let f = t.filename();
    let f = f.strip_suffix(".md").unwrap_or(f);
    match &t.heading {
        Some(h) if h != f => format!("{f} > {h}"),
        _ => f.to_owned(),
    }
}

fn group(
    cx: &Ctx,
    urg: &HashMap<usize, f64>,
    query: &Query,
    matched: &[usize],
) -> Result<Vec<ResultGroup>, EvalError> {
    if query.groups.is_empty() {
        cx.alloc((matched.len() as u64).saturating_mul(size_of::<usize>() as u64))?;
        return Ok(vec![ResultGroup {
            names: Vec::new(),
            tasks: matched.to_vec(),
        }]);
    }
    // Group path (sort keys with reverse flags applied later) -> tasks, in sorted task order.
    let mut map: HashMap<Vec<GroupKey>, Vec<usize>> = HashMap::new();
    let mut order: Vec<Vec<GroupKey>> = Vec::new();
    for &i in matched {
        let mut paths: Vec<Vec<GroupKey>> = vec![Vec::new()];
        for o in &query.groups {
            let keys = group_keys(cx, urg, o.key, i);
            let count = (keys.len() as u64).saturating_mul(paths.len() as u64);
            cx.step(count)?;
            // Each new path is a copy of a path so far and one more key.
            let widest = paths.iter().map(|p| path_bytes(p)).max().unwrap_or(0);
            let key = keys.iter().map(key_bytes).max().unwrap_or(0);
            cx.alloc(count.saturating_mul(widest + key))?;
            let mut next = Vec::with_capacity(paths.len() * keys.len());
            for p in &paths {
                for k in &keys {
                    let mut q = p.clone();
                    q.push(k.clone());
                    next.push(q);
                }
            }
            paths = next;
        }
        for p in paths {
            match map.get_mut(&p) {
                Some(v) => {
                    cx.alloc(size_of::<usize>() as u64)?;
                    v.push(i)
                }
                None => {
                    // The path is kept twice (the map's key and the order) with its entry.
                    cx.alloc(2 * path_bytes(&p) + entry::<(Vec<GroupKey>, Vec<usize>)>())?;
                    order.push(p.clone());
                    map.insert(p, vec![i]);
                }
            }
        }
    }
    let rev: Vec<bool> = query.groups.iter().map(|o| o.reverse).collect();
    sort_charged(&mut order, cx.budget, |a, b| {
        for (lvl, (ka, kb)) in a.iter().zip(b).enumerate() {
            let c = ka.0.cmp(&kb.0).then_with(|| ka.1.cmp(&kb.1));
            let c = if rev.get(lvl).copied().unwrap_or(false) {
                c.reverse()
            } else {
                c
            };
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    })?;
    let mut out = Vec::with_capacity(order.len());
    for p in order {
        let mut tasks = map.remove(&p).unwrap_or_default();
        if let Some(l) = query.limit_groups {
            tasks.truncate(l);
        }
        out.push(ResultGroup {
            names: p.into_iter().map(|(_, name)| name).collect(),
            tasks,
        });
    }
    Ok(out)
}

/// One task as the plugin's list shows it: checkbox, description, then the fields the query
/// does not hide, in Tasks' order, and the backlink.
pub fn render_task(
    t: &TaskRecord,
    query: &Query,
    settings: &TasksSettings,
    today: NaiveDate,
) -> String {
    let f = &t.fields;
    let mut s = format!("- [{}] ", t.status);
    let mut desc = if settings.remove_global_filter {
        remove_global_filter(&f.description, &settings.global_filter)
    } else {
        f.description.clone()
    };
    if !query.shows(Element::Tags) {
        desc = desc
            .split(' ')
            .filter(|w| !(w.starts_with('#') && w.len() > 1))
            .collect::<Vec<_>>()
            .join(" ");
    }
    s.push_str(desc.trim());
    let short = query.short_mode;
    let mut field = |shown: bool, emoji: &str, value: Option<String>| {
        if let (true, Some(v)) = (shown, value) {
            s.push(' ');
            s.push_str(emoji);
            if !short && !v.is_empty() {
                s.push(' ');
                s.push_str(&v);
            }
        }
    };
    let day = |d: Option<NaiveDate>| d.map(|d| d.format("%Y-%m-%d").to_string());
    field(query.shows(Element::Id), "🆔", f.id.clone());
    field(
        query.shows(Element::DependsOn),
        "⛔",
        (!f.depends_on.is_empty()).then(|| f.depends_on.join(",")),
    );
    let pri = match f.priority {
        Some(Priority::Highest) => Some("🔺"),
        Some(Priority::High) => Some("⏫"),
        Some(Priority::Medium) => Some("🔼"),
        Some(Priority::Low) => Some("🔽"),
        Some(Priority::Lowest) => Some("⏬"),
        None => None,
    };
    if let Some(p) = pri {
        field(query.shows(Element::Priority), p, Some(String::new()));
    }
    field(
        query.shows(Element::RecurrenceRule),
        "🔁",
        f.recurrence.clone(),
    );
    field(
        query.shows(Element::OnCompletion),
        "🏁",
        f.on_completion.clone(),
    );
    field(query.shows(Element::CreatedDate), "➕", day(f.created));
    field(query.shows(Element::StartDate), "🛫", day(f.start));
    field(query.shows(Element::ScheduledDate), "⏳", day(f.scheduled));
    field(query.shows(Element::DueDate), "📅", day(f.due));
    field(query.shows(Element::CancelledDate), "❌", day(f.cancelled));
    field(query.shows(Element::DoneDate), "✅", day(f.done));
    if query.shows(Element::Urgency) {
        let _ = write!(s, " (urgency {:.2})", urgency(t, today));
    }
    if query.shows(Element::Backlink) {
        let link = t.path.strip_suffix(".md").unwrap_or(&t.path);
        let target = match &t.heading {
            Some(h) => format!("{link}#{h}"),
            None => link.to_owned(),
        };
        let _ = write!(s, " ([[{target}|{}]])", backlink_text(t));
    }
    s
}

/// The whole result as Markdown: group headings (`####`, `#####`, `######` by level), task
/// lines, and the task count unless hidden; each line a step of `budget` and its bytes charged
/// before it is added.
pub fn render_markdown(
    result: &QueryResult,
    tasks: &[TaskRecord],
    query: &Query,
    settings: &TasksSettings,
    today: NaiveDate,
    budget: &Budget,
) -> Result<String, EvalError> {
    let mut out = String::new();
    // "Some extra output at the start of the search results" (Explaining Queries.md), kept
    // apart as the plugin's fixed-width block.
    if let Some(e) = &result.explanation {
        budget.alloc(e.len() as u64 + 16)?;
        out.push_str("```text\n");
        out.push_str(e);
        out.push_str("```\n\n");
    }
    let mut previous: Vec<String> = Vec::new();
    for g in &result.groups {
        for (lvl, name) in g.names.iter().enumerate() {
            if previous.get(lvl) == Some(name) && previous[..lvl] == g.names[..lvl] {
                continue;
            }
            budget.charge(1)?;
            budget.alloc(name.len() as u64 + 9)?;
            let hashes = "#".repeat((4 + lvl).min(6));
            let _ = writeln!(out, "{hashes} {name}\n");
        }
        previous.clone_from(&g.names);
        for &i in &g.tasks {
            if let Some(t) = tasks.get(i) {
                budget.charge(1)?;
                let line = render_task(t, query, settings, today);
                budget.alloc(line.len() as u64 + 1)?;
                out.push_str(&line);
                out.push('\n');
            }
        }
        if !g.names.is_empty() {
            out.push('\n');
        }
    }
    if query.shows(Element::TaskCount) {
        let n = result.shown;
        let noun = if n == 1 { "task" } else { "tasks" };
        if result.matched > n {
            let _ = writeln!(out, "\n{n} of {} {noun}", result.matched);
        } else {
            let _ = writeln!(out, "\n{n} {noun}");
        }
    }
    Ok(out)
}

/// `explain` (Explaining Queries.md): the global filter, the global query when it was used,
/// then the block's query, each instruction as the plugin explains it: filters with their dates
/// resolved (`due date is before 2022-10-22 (Saturday 22nd October 2022)`), regexes as
/// compiled, Boolean lines as a tree, then `group by`, `sort by`, layout and the limits. Its
/// bytes are charged to `budget` line by line, before each is added.
pub fn explain(
    global: Option<&Query>,
    own: &Query,
    settings: &TasksSettings,
    budget: &Budget,
) -> Result<String, EvalError> {
    let mut out = Out {
        text: String::new(),
        budget,
    };
    if !settings.global_filter.is_empty() {
        out.line(
            0,
            &format!(
                "Only tasks containing the global filter '{}'.",
                settings.global_filter
            ),
        )?;
        out.line(0, "")?;
    }
    if let Some(g) = global {
        out.line(0, "Explanation of the global query:")?;
        out.line(0, "")?;
        explain_query(g, &mut out)?;
        out.line(0, "")?;
    }
    out.line(0, "Explanation of this Tasks code block query:")?;
    out.line(0, "")?;
    explain_query(own, &mut out)?;
    Ok(out.text)
}

/// Text built under a budget.
struct Out<'b> {
    text: String,
    budget: &'b Budget,
}

impl Out<'_> {
    /// Adds `text` on a line of its own, `indent` spaces in, its bytes charged first.
    fn line(&mut self, indent: usize, text: &str) -> Result<(), EvalError> {
        self.budget.charge(1)?;
        self.budget.alloc((indent + text.len() + 1) as u64)?;
        if !text.is_empty() {
            self.text.extend(std::iter::repeat_n(' ', indent));
            self.text.push_str(text);
        }
        self.text.push('\n');
        Ok(())
    }
}

/// One explained line, and the lines under it.
struct Node {
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn leaf(text: impl Into<String>) -> Node {
        Node {
            text: text.into(),
            children: Vec::new(),
        }
    }

    fn write(&self, indent: usize, out: &mut Out) -> Result<(), EvalError> {
        out.line(indent, &self.text)?;
        for c in &self.children {
            c.write(indent + 2, out)?;
        }
        Ok(())
    }
}

/// One query's instructions, two spaces in, a blank line between them.
fn explain_query(q: &Query, out: &mut Out) -> Result<(), EvalError> {
    let mut first = true;
    let mut gap = |out: &mut Out| -> Result<(), EvalError> {
        if !std::mem::take(&mut first) {
            out.line(0, "")?;
        }
        Ok(())
    };
    for l in q
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::IgnoreGlobalQuery)
    {
        gap(out)?;
        out.line(2, &l.text)?;
    }
    let mut filters = q.filters.iter();
    let mut any = false;
    for l in &q.lines {
        let LineKind::Filter { leaves } = &l.kind else {
            continue;
        };
        let Some(f) = filters.next() else { break };
        any = true;
        gap(out)?;
        let mut leaves = leaves.iter();
        let node = describe(f, l.text.trim(), &mut leaves);
        let same = node.children.is_empty() && node.text == l.text;
        // As written, when that differs (continuations, a trailing `\\`), then as read.
        if l.raw.contains('\n') {
            for raw in l.raw.lines() {
                out.line(2, raw)?;
            }
            out.line(2, " =>")?;
        } else if l.raw != l.text {
            out.line(2, &format!("{} =>", l.raw))?;
        }
        if same {
            out.line(2, &l.text)?;
        } else {
            out.line(2, &format!("{} =>", l.text))?;
            node.write(4, out)?;
        }
    }
    if !any {
        gap(out)?;
        out.line(2, "No filters supplied. All tasks will match the query.")?;
    }
    for kind in [LineKind::Group, LineKind::Sort, LineKind::Layout] {
        for l in q.lines.iter().filter(|l| l.kind == kind) {
            gap(out)?;
            out.line(2, &l.text)?;
        }
    }
    let at_most = |n: usize| format!("At most {n} task{}", if n == 1 { "" } else { "s" });
    if let Some(n) = q.limit {
        gap(out)?;
        out.line(2, &format!("{}.", at_most(n)))?;
    }
    if let Some(n) = q.limit_groups {
        gap(out)?;
        out.line(
            2,
            &format!(
                "{} per group (if any \"group by\" options are supplied).",
                at_most(n)
            ),
        )?;
    }
    Ok(())
}

/// A day as the plugin's explanations write it: `2022-10-22 (Saturday 22nd October 2022)`.
fn explained_day(d: NaiveDate) -> String {
    let n = d.day();
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!(
        "{} ({} {n}{suffix} {})",
        d.format("%Y-%m-%d"),
        weekday_name(d),
        d.format("%B %Y")
    )
}

/// A filter's explanation; `text` is what was written for it, `leaves` the written text of the
/// simple filters under a Boolean one, in order.
fn describe(f: &Filter, text: &str, leaves: &mut dyn Iterator<Item = &String>) -> Node {
    let (head, items): (&str, Vec<&Filter>) = match f {
        Filter::And(items) => ("AND (All of):", items.iter().collect()),
        Filter::Or(items) => ("OR (At least one of):", items.iter().collect()),
        Filter::Xor(a, b) => ("XOR (Exactly one of):", vec![&**a, &**b]),
        Filter::Not(inner) => ("NOT:", vec![&**inner]),
        leaf => return describe_leaf(leaf, text),
    };
    let children = items.into_iter().map(|it| child(it, leaves)).collect();
    Node {
        text: head.to_owned(),
        children,
    }
}

/// A filter under a Boolean one: a Boolean one as its tree; a simple one as written, with its
/// explanation under it when that says more.
fn child(f: &Filter, leaves: &mut dyn Iterator<Item = &String>) -> Node {
    if matches!(
        f,
        Filter::And(_) | Filter::Or(_) | Filter::Xor(..) | Filter::Not(_)
    ) {
        return describe(f, "", leaves);
    }
    let text = leaves.next().map(String::as_str).unwrap_or_default();
    let node = describe_leaf(f, text);
    if node.children.is_empty() && node.text == text {
        node
    } else {
        Node {
            text: format!("{text} =>"),
            children: vec![node],
        }
    }
}

fn describe_leaf(f: &Filter, text: &str) -> Node {
    match f {
        Filter::Done(true) => Node::leaf("status type is DONE or CANCELLED or NON_TASK"),
        Filter::Done(false) => Node::leaf("status type is TODO or IN_PROGRESS or ON_HOLD"),
        Filter::Date { field, op, range } => {
            let what = match field {
                DateField::Happens => "due, start or scheduled",
                f => f.name(),
            };
            // Tasks without a start date match a `starts` filter (Filters.md).
            let or_none = (*field == DateField::Start).then(|| format!("OR no {what} date"));
            let (word, day) = match op {
                DateOp::Before => ("before", range.start),
                DateOp::After => ("after", range.end),
                DateOp::InOrBefore => ("on or before", range.end),
                DateOp::InOrAfter => ("on or after", range.start),
                DateOp::In if range.start == range.end => ("on", range.start),
                DateOp::In => {
                    let mut children = vec![
                        Node::leaf(format!("{} and", explained_day(range.start))),
                        Node::leaf(format!("{} inclusive", explained_day(range.end))),
                    ];
                    children.extend(or_none.map(Node::leaf));
                    return Node {
                        text: format!("{what} date is between:"),
                        children,
                    };
                }
            };
            let mut line = format!("{what} date is {word} {}", explained_day(day));
            if let Some(o) = or_none {
                line.push(' ');
                line.push_str(&o);
            }
            Node::leaf(line)
        }
        Filter::Text {
            matcher: Matcher::Regex(_),
            ..
        } => Node::leaf(explained_regex(text)),
        _ => Node::leaf(text),
    }
}

/// `using regex:     '^Root\/Sub-Folder\/Sample File\.md' with flag 'i'`: the pattern as
/// JavaScript shows it (`/` escaped), its quote under the `/` of the line above.
fn explained_regex(text: &str) -> String {
    let Some(slash) = text.find('/') else {
        return text.to_owned();
    };
    let Ok((pattern, flags)) = super::query::split_js(&text[slash..]) else {
        return text.to_owned();
    };
    let mut source = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                source.push('\\');
                source.extend(chars.next());
            }
            '/' => source.push_str("\\/"),
            c => source.push(c),
        }
    }
    let head = "using regex:";
    let pad = text[..slash]
        .chars()
        .count()
        .saturating_sub(2 + head.len())
        .max(1);
    let flags = match flags.chars().count() {
        0 => "with no flags".to_owned(),
        1 => format!("with flag '{flags}'"),
        _ => format!("with flags '{flags}'"),
    };
    format!("{head}{}'{source}' {flags}", " ".repeat(pad))
}
