//! `list_tasks`: the vault's tasks from the model's task index, filtered, sorted as the Tasks
//! plugin sorts a query by default, and paged.
//!
//! The Tasks plugin's rules, from its documentation (`Queries/Sorting.md`, `Advanced/Urgency.md`,
//! `Getting Started/Statuses*`):
//!
//! - Statuses: the vault's, from the Tasks plugin's settings (core and custom statuses, each
//!   with its type); on a fresh install `x` is done, `-` cancelled, `/` in progress, a space
//!   to do, and any other symbol (`X` too) is "Unknown", of type to do. `not done` is to do, in
//!   progress and on hold.
//! - The global filter: when the settings name one, only checkboxes whose description holds it
//!   are tasks, and it is left out of the description when the settings say so.
//! - The default sort: status type (in progress, to do, on hold, done, cancelled, non-task), urgency (highest
//!   first), due date (earliest first, none last), priority (highest first), path; then line.
//! - Urgency: the sum of a due-date score (12 for 7 or more days overdue, falling linearly to 2.4
//!   at 14 days ahead and beyond, 0 without a due date), a priority score (highest 9, high 6,
//!   medium 3.9, none 1.95, low 0, lowest -1.8), 5 when scheduled today or earlier, and -3 when
//!   it starts tomorrow or later. "Today" is the server's local date.
//! - Dates as Tasks reads them: the emoji at the end of the task's first line (📅 due, ⏳
//!   scheduled, 🛫 start, ➕ created, ✅ done, ❌ cancelled); Dataview's `[due:: ...]` fields are
//!   not read here (Tasks reads them only in its optional Dataview format).

use std::cmp::Ordering;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NoteError;
use super::check_limit;
use super::knowledge::{PageReply, Paging};
use super::locate::locate_in;
use super::paging::{decode_offset, encode_offset, fingerprint};
use crate::engine::Engine;
use crate::markdown::normalize_tag;
use crate::model::Model;
use crate::model::dataview::Task;
use crate::obsidian::dataview::Priority;
use crate::obsidian::periodic;
use crate::obsidian::tasks::{StatusType, TasksSettings, eval::remove_global_filter};
use crate::vault::VaultPath;

/// Tasks per page by default.
pub const DEFAULT_LIMIT: u32 = 50;
/// Most tasks per page.
pub const MAX_LIMIT: u32 = 1000;
/// Longest `text` and `tag` filters, in bytes.
const MAX_FILTER_BYTES: usize = 1024;

/// A task's status type, from the vault's Tasks settings, in the order Tasks sorts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    InProgress,
    Todo,
    OnHold,
    Done,
    Cancelled,
    NonTask,
}

impl From<StatusType> for TaskStatus {
    fn from(t: StatusType) -> TaskStatus {
        match t {
            StatusType::InProgress => TaskStatus::InProgress,
            StatusType::Todo => TaskStatus::Todo,
            StatusType::OnHold => TaskStatus::OnHold,
            StatusType::Done => TaskStatus::Done,
            StatusType::Cancelled => TaskStatus::Cancelled,
            StatusType::NonTask => TaskStatus::NonTask,
        }
    }
}

/// What the vault's Tasks settings make of a task: its status type (looked up once per symbol)
/// and whether the global filter lets it be a task.
pub struct TaskRules<'s> {
    settings: &'s TasksSettings,
    types: std::collections::HashMap<char, TaskStatus>,
}

impl<'s> TaskRules<'s> {
    /// The rules of `settings`.
    pub fn new(settings: &'s TasksSettings) -> Self {
        let mut types = std::collections::HashMap::new();
        for s in &settings.statuses {
            // The first status with a symbol wins, as in [`TasksSettings::status`].
            types
                .entry(s.symbol)
                .or_insert(TaskStatus::from(s.status_type));
        }
        TaskRules { settings, types }
    }

    /// The status type of a checkbox symbol (unknown symbols are to do).
    pub fn status(&self, symbol: char) -> TaskStatus {
        self.types
            .get(&symbol)
            .copied()
            .unwrap_or_else(|| self.settings.status(symbol).status_type.into())
    }

    /// Whether the global filter (if any) lets `t` be a task.
    pub fn is_task(&self, t: &Task) -> bool {
        let gf = &self.settings.global_filter;
        gf.is_empty() || t.tasks.description.contains(gf.as_str())
    }

    /// The description shown: without the global filter when the settings say so.
    fn description(&self, t: &Task) -> String {
        if self.settings.remove_global_filter {
            remove_global_filter(&t.tasks.description, &self.settings.global_filter)
        } else {
            t.tasks.description.clone()
        }
    }
}

/// Which statuses `list_tasks` keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    // (Plain comments: a doc comment on a variant would make the schema a longer `oneOf`.)
    // Not done: to do (a space or an unknown symbol), in progress or on hold.
    #[default]
    Todo,
    InProgress,
    OnHold,
    Done,
    Cancelled,
    NonTask,
    // Every task.
    Any,
}

impl StatusFilter {
    fn keeps(self, t: TaskStatus) -> bool {
        match self {
            StatusFilter::Todo => matches!(
                t,
                TaskStatus::Todo | TaskStatus::InProgress | TaskStatus::OnHold
            ),
            StatusFilter::InProgress => t == TaskStatus::InProgress,
            StatusFilter::OnHold => t == TaskStatus::OnHold,
            StatusFilter::Done => t == TaskStatus::Done,
            StatusFilter::Cancelled => t == TaskStatus::Cancelled,
            StatusFilter::NonTask => t == TaskStatus::NonTask,
            StatusFilter::Any => true,
        }
    }
}

/// A Tasks priority level, `none` included (a task without a priority sign).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PriorityLevel {
    /// ⏬
    Lowest,
    /// 🔽
    Low,
    /// No sign.
    None,
    /// 🔼
    Medium,
    /// ⏫
    High,
    /// 🔺
    Highest,
}

impl PriorityLevel {
    fn of(p: Option<Priority>) -> PriorityLevel {
        match p {
            None => PriorityLevel::None,
            Some(Priority::Lowest) => PriorityLevel::Lowest,
            Some(Priority::Low) => PriorityLevel::Low,
            Some(Priority::Medium) => PriorityLevel::Medium,
            Some(Priority::High) => PriorityLevel::High,
            Some(Priority::Highest) => PriorityLevel::Highest,
        }
    }

    /// Tasks' urgency score of the priority.
    fn urgency(self) -> f64 {
        match self {
            PriorityLevel::Highest => 9.0,
            PriorityLevel::High => 6.0,
            PriorityLevel::Medium => 3.9,
            PriorityLevel::None => 1.95,
            PriorityLevel::Low => 0.0,
            PriorityLevel::Lowest => -1.8,
        }
    }
}

/// `list_tasks`' arguments as the client gives them.
#[derive(Debug, Clone, Default)]
pub struct TasksArgs {
    pub status: Option<StatusFilter>,
    pub due_before: Option<String>,
    pub due_after: Option<String>,
    pub scheduled_before: Option<String>,
    pub scheduled_after: Option<String>,
    pub priority: Option<PriorityLevel>,
    pub tag: Option<String>,
    pub path: Option<String>,
    pub folder: Option<String>,
    pub text: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// What `list_tasks` asks, checked.
#[derive(Debug, Clone)]
pub struct TasksRequest {
    status: StatusFilter,
    due: (Option<NaiveDate>, Option<NaiveDate>),
    scheduled: (Option<NaiveDate>, Option<NaiveDate>),
    priority: Option<PriorityLevel>,
    /// Normalised, without `#`.
    tag: Option<String>,
    /// As typed, and parsed.
    path: Option<(String, VaultPath)>,
    folder: Option<VaultPath>,
    /// Lower-cased.
    text: Option<String>,
    paging: Paging,
}

/// Which end of the span a date argument names bounds the tasks.
#[derive(Clone, Copy)]
enum Bound {
    /// `*_before`: strictly before its first day.
    Before,
    /// `*_after`: strictly after its last day.
    After,
}

/// A date argument in the words `get_periodic_note` and `changes_since` read
/// ([`periodic::parse_date_words`]): `YYYY-MM-DD`, `today`, `tomorrow`, `yesterday`, `this`,
/// `last` or `next` `week`, `month`, `quarter` or `year`, `YYYY-Www`, `YYYY-Qn`, `YYYY-MM`,
/// `YYYY`. A span bounds by its first day (`due_before: next week`) or its last (`due_after:
/// this week`); weeks as `changes_since` counts them.
fn date_arg(
    name: &'static str,
    v: Option<&str>,
    today: NaiveDate,
    bound: Bound,
) -> Result<Option<NaiveDate>, NoteError> {
    let Some(text) = v else { return Ok(None) };
    let week = periodic::week_rule("");
    let bad = |e: periodic::DateWordsError| NoteError::invalid(name, format!("{name}: {e}"));
    // An empty argument is no date (the reader takes it for today).
    if text.trim().is_empty() {
        return Err(bad(periodic::DateWordsError(text.to_owned())));
    }
    let named = periodic::parse_date_words(text, today, week, true).map_err(bad)?;
    let day = match (named.period, bound) {
        (None, _) => Some(named.date),
        (Some(p), Bound::Before) => Some(p.start(named.date, week)),
        (Some(p), Bound::After) => p.end(named.date, week),
    };
    day.map(Some)
        .ok_or_else(|| bad(periodic::DateWordsError(text.to_owned())))
}

fn bounded<'a>(name: &'static str, v: Option<&'a str>) -> Result<Option<&'a str>, NoteError> {
    match v.map(str::trim) {
        Some(s) if s.len() > MAX_FILTER_BYTES => Err(NoteError::invalid(
            name,
            format!("{name}: at most {MAX_FILTER_BYTES} bytes"),
        )),
        Some("") | None => Ok(None),
        Some(s) => Ok(Some(s)),
    }
}

impl TasksRequest {
    /// Checks and parses the arguments (dates, paths, sizes), date words on the server's local
    /// date.
    pub fn new(a: TasksArgs) -> Result<Self, NoteError> {
        TasksRequest::on(a, chrono::Local::now().date_naive())
    }

    /// [`TasksRequest::new`] with date words read on `today`.
    pub fn on(a: TasksArgs, today: NaiveDate) -> Result<Self, NoteError> {
        let folder = match a.folder.as_deref().map(str::trim) {
            None | Some("") | Some("/") => None,
            Some(f) => Some(VaultPath::parse_folder(f)?),
        };
        // An empty path is refused (by the parse), not read as "every note".
        let path = match a.path {
            None => None,
            Some(p) => Some((p.clone(), VaultPath::parse(&p)?)),
        };
        Ok(TasksRequest {
            status: a.status.unwrap_or_default(),
            due: (
                date_arg("due_after", a.due_after.as_deref(), today, Bound::After)?,
                date_arg("due_before", a.due_before.as_deref(), today, Bound::Before)?,
            ),
            scheduled: (
                date_arg(
                    "scheduled_after",
                    a.scheduled_after.as_deref(),
                    today,
                    Bound::After,
                )?,
                date_arg(
                    "scheduled_before",
                    a.scheduled_before.as_deref(),
                    today,
                    Bound::Before,
                )?,
            ),
            priority: a.priority,
            tag: bounded("tag", a.tag.as_deref())?
                .map(normalize_tag)
                .filter(|t| !t.is_empty()),
            path,
            folder,
            text: bounded("text", a.text.as_deref())?.map(str::to_lowercase),
            paging: Paging {
                limit: a.limit,
                cursor: a.cursor,
            },
        })
    }
}

/// One task in `list_tasks`' reply.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskItem {
    /// The note.
    pub path: String,
    /// 1-based line of the checkbox.
    pub line: u32,
    /// `todo`, `in_progress`, `on_hold`, `done`, `cancelled` or `non_task`, as the vault's
    /// Tasks settings type the symbol.
    pub status: TaskStatus,
    /// The character between the brackets.
    pub symbol: String,
    /// The text without the Tasks fields (dates, priority, recurrence).
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<String>,
    /// `highest`, `high`, `medium`, `none`, `low` or `lowest`.
    pub priority: PriorityLevel,
    /// The 🔁 rule, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<String>,
    /// Tags on the task, with `#`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The heading it is under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// Tasks' urgency score (today's).
    pub urgency: f64,
}

/// Tasks' urgency of `t` on `today`.
pub fn urgency(t: &Task, today: NaiveDate) -> f64 {
    let f = &t.tasks;
    let due = f.due.map_or(0.0, |d| {
        let overdue = (today - d).num_days().clamp(-14, 7) as f64;
        ((overdue + 14.0) * 0.8 / 21.0 + 0.2) * 12.0
    });
    let scheduled = match f.scheduled {
        Some(d) if d <= today => 5.0,
        _ => 0.0,
    };
    let start = match f.start {
        Some(d) if d > today => -3.0,
        _ => 0.0,
    };
    due + PriorityLevel::of(f.priority).urgency() + scheduled + start
}

/// Whether `date` is strictly inside the bounds (after, before); a bound without a date fails.
fn within(
    date: Option<NaiveDate>,
    (after, before): (Option<NaiveDate>, Option<NaiveDate>),
) -> bool {
    if after.is_none() && before.is_none() {
        return true;
    }
    date.is_some_and(|d| after.is_none_or(|a| d > a) && before.is_none_or(|b| d < b))
}

/// Whether one of `tags` (as written, with `#`) is `tag` (normalised) or nested under it.
fn has_tag(tags: &[Box<str>], tag: &str) -> bool {
    tags.iter().any(|t| {
        let n = normalize_tag(t);
        n == tag || (n.starts_with(tag) && n.as_bytes().get(tag.len()) == Some(&b'/'))
    })
}

/// A task with its place in Tasks' default order: status type, urgency (highest first), due
/// (none last), priority (highest first), then path and line.
struct Ranked<'m> {
    /// Status type, urgency in hundred-thousandths (negated), due day (none last), priority
    /// (negated): integers, compared before the path.
    key: (TaskStatus, i64, i32, i8),
    path: &'m VaultPath,
    task: &'m Task,
    urgency: f64,
}

impl<'m> Ranked<'m> {
    fn new(path: &'m VaultPath, task: &'m Task, status: TaskStatus, today: NaiveDate) -> Self {
        let urgency = urgency(task, today);
        let due = task
            .tasks
            .due
            .map_or(i32::MAX, |d| chrono::Datelike::num_days_from_ce(&d));
        Ranked {
            key: (
                status,
                -((urgency * 1e5).round() as i64),
                due,
                -(PriorityLevel::of(task.tasks.priority) as i8),
            ),
            path,
            task,
            urgency,
        }
    }
}

fn tasks_order(a: &Ranked<'_>, b: &Ranked<'_>) -> Ordering {
    a.key
        .cmp(&b.key)
        .then_with(|| a.path.cmp(b.path))
        .then_with(|| a.task.line.cmp(&b.task.line))
}

/// `list_tasks` over the engine's model, on the server's local date.
pub fn list_tasks(engine: &Engine, req: &TasksRequest) -> Result<PageReply<TaskItem>, NoteError> {
    // A folder is checked where it really leads (a symlink out, hidden or excluded: refused).
    if let Some(f) = &req.folder {
        engine.vault().check_folder(f)?;
    }
    let settings = super::settings::tasks_settings(engine.vault());
    let model = &*engine.model()?;
    list_tasks_in(
        model,
        req,
        chrono::Local::now().date_naive(),
        &TaskRules::new(&settings),
    )
}

/// `list_tasks` over `model` on `today`, under the vault's Tasks `rules`.
pub fn list_tasks_in(
    model: &Model,
    req: &TasksRequest,
    today: NaiveDate,
    rules: &TaskRules<'_>,
) -> Result<PageReply<TaskItem>, NoteError> {
    let path = match &req.path {
        None => None,
        Some((input, typed)) if model.note(typed).is_some() => Some(typed.clone()),
        Some((input, typed)) => Some(locate_in(model, input, typed)?),
    };
    let in_scope = |p: &VaultPath| {
        path.as_ref().is_none_or(|only| p == only)
            && req.folder.as_ref().is_none_or(|f| p.starts_with(f))
    };
    let candidates: Box<dyn Iterator<Item = (&VaultPath, &Task)>> = match &path {
        Some(p) => Box::new(
            model
                .note_dataview(p)
                .into_iter()
                .flat_map(move |d| d.tasks.iter().map(move |t| (p, t))),
        ),
        // A due bound: only the tasks the due-date index has in range.
        None if req.due.0.is_some() || req.due.1.is_some() => {
            Box::new(model.tasks_due(req.due.0, req.due.1))
        }
        None => Box::new(model.tasks()),
    };
    let mut found: Vec<Ranked<'_>> = candidates
        .filter_map(|(p, t)| {
            let status = rules.status(t.status);
            let keep = req.status.keeps(status)
                && rules.is_task(t)
                && within(t.tasks.due, req.due)
                && within(t.tasks.scheduled, req.scheduled)
                && req
                    .priority
                    .is_none_or(|min| PriorityLevel::of(t.tasks.priority) >= min)
                && in_scope(p)
                && req.tag.as_deref().is_none_or(|tag| has_tag(&t.tags, tag))
                && req
                    .text
                    .as_deref()
                    .is_none_or(|q| rules.description(t).to_lowercase().contains(q));
            keep.then(|| Ranked::new(p, t, status, today))
        })
        .collect();
    let q = fingerprint(&(
        "tasks",
        req.status,
        req.due,
        req.scheduled,
        req.priority,
        &req.tag,
        path.as_ref().map(VaultPath::as_str),
        req.folder.as_ref().map(VaultPath::as_str),
        &req.text,
        today,
    ));
    let start = decode_offset(req.paging.cursor.as_deref(), q)?;
    let limit = check_limit(req.paging.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let total = found.len();
    let end = start.saturating_add(limit).min(total);
    // Only the tasks up to the page's end are sorted (the order is total: path and line
    // break every tie, so pages never overlap).
    if end < total && end > 0 {
        found.select_nth_unstable_by(end - 1, tasks_order);
        found.truncate(end);
    }
    found.sort_unstable_by(tasks_order);
    let next_cursor = (end < total).then(|| encode_offset(end, q));
    Ok(PageReply {
        truncated: next_cursor.is_some(),
        total,
        next_cursor,
        items: found
            .get(start.min(end)..end)
            .unwrap_or_default()
            .iter()
            .map(|r| item(r.path, r.task, r.urgency, rules))
            .collect(),
    })
}

/// A task as `list_tasks` and Tasks queries reply with it, its urgency counted on `today`.
pub fn task_item(path: &VaultPath, t: &Task, today: NaiveDate, rules: &TaskRules<'_>) -> TaskItem {
    item(path, t, urgency(t, today), rules)
}

fn item(path: &VaultPath, t: &Task, urgency: f64, rules: &TaskRules<'_>) -> TaskItem {
    let f = &t.tasks;
    TaskItem {
        path: path.to_string(),
        line: t.line.saturating_add(1),
        status: rules.status(t.status),
        symbol: t.status.to_string(),
        description: rules.description(t),
        due: f.due.map(|d| d.to_string()),
        scheduled: f.scheduled.map(|d| d.to_string()),
        start: f.start.map(|d| d.to_string()),
        created: f.created.map(|d| d.to_string()),
        done: f.done.map(|d| d.to_string()),
        cancelled: f.cancelled.map(|d| d.to_string()),
        priority: PriorityLevel::of(f.priority),
        recurrence: f.recurrence.clone(),
        tags: t.tags.iter().map(|t| t.to_string()).collect(),
        section: t.section.as_deref().map(str::to_owned),
        // Five decimals, as Tasks shows it.
        urgency: (urgency * 1e5).round() / 1e5,
    }
}

impl TaskItem {
    /// The task as the Tasks plugin writes it: checkbox, description, then priority,
    /// recurrence and dates in the plugin's order (`🔺 🔁 every week ➕ 🛫 ⏳ 📅 ❌ ✅`).
    pub fn markdown(&self) -> String {
        let mut out = format!("- [{}] {}", self.symbol, self.description);
        let sign = match self.priority {
            PriorityLevel::Highest => Some("🔺"),
            PriorityLevel::High => Some("⏫"),
            PriorityLevel::Medium => Some("🔼"),
            PriorityLevel::None => None,
            PriorityLevel::Low => Some("🔽"),
            PriorityLevel::Lowest => Some("⏬"),
        };
        if let Some(sign) = sign {
            out.push(' ');
            out.push_str(sign);
        }
        for (emoji, value) in [
            ("🔁", &self.recurrence),
            ("➕", &self.created),
            ("🛫", &self.start),
            ("⏳", &self.scheduled),
            ("📅", &self.due),
            ("❌", &self.cancelled),
            ("✅", &self.done),
        ] {
            if let Some(v) = value {
                out.push_str(&format!(" {emoji} {v}"));
            }
        }
        out
    }
}

/// The reply as short text: a count, then one line per task as Markdown with its place.
pub fn summary(reply: &PageReply<TaskItem>) -> String {
    let mut out = format!(
        "{} of {} tasks{}\n",
        reply.items.len(),
        reply.total,
        if reply.truncated {
            " (more with next_cursor)"
        } else {
            ""
        }
    );
    for t in &reply.items {
        out.push_str(&format!("{} ({}:{})\n", t.markdown(), t.path, t.line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obsidian::dataview::TasksFields;

    fn task(fields: TasksFields) -> Task {
        Task {
            line: 0,
            line_count: 1,
            status: ' ',
            fully_completed: false,
            parent: None,
            text: "t".into(),
            section: None,
            tags: Box::new([]),
            fields: Box::new([]),
            tasks: fields,
        }
    }

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    #[test]
    fn urgency_follows_the_tasks_docs_table_and_examples() {
        let today = d(2024, 5, 10);
        let due = |offset: i64| {
            let t = task(TasksFields {
                due: today.checked_add_signed(chrono::TimeDelta::days(offset)),
                ..TasksFields::default()
            });
            // Without the priority's 1.95, rounded as the docs print it.
            ((urgency(&t, today) - 1.95) * 1e5).round() / 1e5
        };
        // The docs' table: 7 or more days overdue 12, today 8.8, 14 or more days ahead 2.4,
        // linear between (0.45714 a day).
        assert_eq!(due(-30), 12.0);
        assert_eq!(due(-7), 12.0);
        assert_eq!(due(-6), 11.54286);
        assert_eq!(due(-1), 9.25714);
        assert_eq!(due(0), 8.8);
        assert_eq!(due(1), 8.34286);
        assert_eq!(due(7), 5.6);
        assert_eq!(due(13), 2.85714);
        assert_eq!(due(14), 2.4);
        assert_eq!(due(40), 2.4);
        // The docs' examples: due today, medium: 12.7; no due, high, scheduled and started
        // yesterday: 11.0; no due, high, scheduled and starting tomorrow: 3.0.
        let round = |x: f64| (x * 1e5).round() / 1e5;
        let t = task(TasksFields {
            due: Some(today),
            priority: Some(Priority::Medium),
            ..TasksFields::default()
        });
        assert_eq!(round(urgency(&t, today)), 12.7);
        let yesterday = d(2024, 5, 9);
        let tomorrow = d(2024, 5, 11);
        let t = task(TasksFields {
            priority: Some(Priority::High),
            scheduled: Some(yesterday),
            start: Some(yesterday),
            ..TasksFields::default()
        });
        assert_eq!(round(urgency(&t, today)), 11.0);
        let t = task(TasksFields {
            priority: Some(Priority::High),
            scheduled: Some(tomorrow),
            start: Some(tomorrow),
            ..TasksFields::default()
        });
        assert_eq!(round(urgency(&t, today)), 3.0);
        // Priorities alone.
        for (p, u) in [
            (Some(Priority::Highest), 9.0),
            (Some(Priority::High), 6.0),
            (Some(Priority::Medium), 3.9),
            (None, 1.95),
            (Some(Priority::Low), 0.0),
            (Some(Priority::Lowest), -1.8),
        ] {
            let t = task(TasksFields {
                priority: p,
                ..TasksFields::default()
            });
            assert_eq!(urgency(&t, today), u, "{p:?}");
        }
    }

    #[test]
    fn date_arguments_take_the_date_words_of_the_other_tools() {
        // 2024-05-10 is a Friday; weeks as changes_since counts them (Sunday to Saturday).
        let today = d(2024, 5, 10);
        let req = |a: TasksArgs| TasksRequest::on(a, today).unwrap();
        let r = req(TasksArgs {
            due_before: Some("tomorrow".into()),
            due_after: Some("Yesterday".into()),
            scheduled_before: Some("2024-06-01".into()),
            scheduled_after: Some("last month".into()),
            ..TasksArgs::default()
        });
        assert_eq!(r.due, (Some(d(2024, 5, 9)), Some(d(2024, 5, 11))));
        // A span bounds by its last day after, its first day before.
        assert_eq!(r.scheduled, (Some(d(2024, 4, 30)), Some(d(2024, 6, 1))));
        let r = req(TasksArgs {
            due_after: Some("this week".into()),
            due_before: Some("next month".into()),
            ..TasksArgs::default()
        });
        assert_eq!(r.due, (Some(d(2024, 5, 11)), Some(d(2024, 6, 1))));
        let r = req(TasksArgs {
            due_after: Some("2024-Q1".into()),
            due_before: Some("2025".into()),
            ..TasksArgs::default()
        });
        assert_eq!(r.due, (Some(d(2024, 3, 31)), Some(d(2025, 1, 1))));
        for bad in ["someday", "", "2024-02-30"] {
            let e = TasksRequest::on(
                TasksArgs {
                    due_before: Some(bad.into()),
                    ..TasksArgs::default()
                },
                today,
            )
            .unwrap_err();
            assert!(e.to_string().starts_with("due_before: "), "{e}");
            assert!(e.to_string().contains("tomorrow"), "{e}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_parameter() {
        let e = TasksRequest::new(TasksArgs {
            scheduled_after: Some("2024-02-30".into()),
            ..TasksArgs::default()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("scheduled_after:"), "{e}");
        let e = TasksRequest::new(TasksArgs {
            text: Some("x".repeat(2000)),
            ..TasksArgs::default()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("text:"), "{e}");
        assert!(
            TasksRequest::new(TasksArgs {
                folder: Some("../up".into()),
                ..TasksArgs::default()
            })
            .is_err()
        );
    }
}
