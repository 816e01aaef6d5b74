//! Toggling a task line the way the plugin's checkbox click does (Toggling and Editing
//! Statuses.md, Recurring Tasks.md, Recurring Tasks and Custom Statuses.md).
//!
//! The toggled line keeps its text; only the checkbox changes, and `✅`/`❌` dates are taken
//! off or added at the end (before a `^block-id`). A new recurrence is written fresh, fields in
//! the plugin's order (description, id, depends on, priority, recurrence, on completion,
//! created, start, scheduled, due).

use std::sync::OnceLock;

use chrono::{Datelike, Duration, NaiveDate, Weekday};
use regex::Regex;

use super::dates::shift;
use super::settings::{Status, StatusType, TasksSettings};
use crate::obsidian::dataview::Priority;
use crate::obsidian::dataview::tasks::parse_tasks_fields;

/// Longest line toggled, in bytes.
pub const MAX_TOGGLE_LINE_BYTES: usize = 32_768;

/// Why a line could not be toggled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToggleError {
    #[error("the line is not a task (a list item with a `[ ]` checkbox)")]
    NotATask,
    #[error(
        "the line does not contain the global filter `{0}`, so Tasks does not treat it as a task"
    )]
    OutsideGlobalFilter(String),
    #[error("the line is {size} bytes, over the {max}-byte limit")]
    TooLong { size: usize, max: usize },
    #[error(
        "the recurrence rule `{0}` is not one capvault can compute (supported: every [N] day(s)/week(s)/month(s)/year(s), every weekday, every <weekday>[, <weekday>], every [N] week(s) on <weekdays>, every [N] month(s) on the <Nth>|last [day], with or without `when done`)"
    )]
    UnsupportedRecurrence(String),
}

/// A recurrence rule, as far as capvault computes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Days(u32),
    Weeks(u32),
    Months(u32),
    Years(u32),
    /// Monday to Friday.
    Weekday,
    /// Every `n` weeks on these days.
    WeeksOn(u32, Vec<Weekday>),
    /// Every `n` months on this day (months without it are skipped, as rrule does).
    MonthDay(u32, u32),
    /// Every `n` months on the last day.
    MonthLast(u32),
}

/// A parsed `🔁` rule: the rule and whether it counts from the completion day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recurrence {
    pub rule: Rule,
    pub when_done: bool,
}

fn weekday(w: &str) -> Option<Weekday> {
    Some(match w {
        "monday" | "mon" => Weekday::Mon,
        "tuesday" | "tue" => Weekday::Tue,
        "wednesday" | "wed" => Weekday::Wed,
        "thursday" | "thu" => Weekday::Thu,
        "friday" | "fri" => Weekday::Fri,
        "saturday" | "sat" => Weekday::Sat,
        "sunday" | "sun" => Weekday::Sun,
        _ => return None,
    })
}

fn ordinal(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: u32 = digits.parse().ok()?;
    (1..=31).contains(&n).then_some(n)
}

/// Parses a recurrence rule's text (`every 2 weeks when done`).
pub fn parse_recurrence(text: &str) -> Option<Recurrence> {
    let lower = text.trim().to_lowercase();
    let (body, when_done) = match lower.strip_suffix("when done") {
        Some(b) => (b.trim_end().to_owned(), true),
        None => (lower.clone(), false),
    };
    let cleaned = body.replace(',', " ");
    let words: Vec<&str> = cleaned.split_whitespace().filter(|w| *w != "and").collect();
    let ["every", rest @ ..] = words.as_slice() else {
        return None;
    };
    let (n, rest) = match rest {
        [num, r @ ..] if num.bytes().all(|c| c.is_ascii_digit()) => {
            let n: u32 = num.parse().ok()?;
            (n, r)
        }
        r => (1, r),
    };
    if n == 0 || n > 10_000 {
        return None;
    }
    let rule = match rest {
        ["day" | "days"] => Rule::Days(n),
        ["week" | "weeks"] => Rule::Weeks(n),
        ["month" | "months"] => Rule::Months(n),
        ["year" | "years"] => Rule::Years(n),
        ["weekday"] if n == 1 => Rule::Weekday,
        ["week" | "weeks", "on", days @ ..] if !days.is_empty() => {
            Rule::WeeksOn(n, days.iter().map(|d| weekday(d)).collect::<Option<_>>()?)
        }
        ["month" | "months", "on", "the", "last"]
        | ["month" | "months", "on", "the", "last", "day"] => Rule::MonthLast(n),
        ["month" | "months", "on", "the", d] => Rule::MonthDay(n, ordinal(d)?),
        days if n == 1 && !days.is_empty() => {
            Rule::WeeksOn(1, days.iter().map(|d| weekday(d)).collect::<Option<_>>()?)
        }
        _ => return None,
    };
    Some(Recurrence { rule, when_done })
}

fn last_day(y: i32, m: u32) -> Option<NaiveDate> {
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    shift(first, 1, "month")?.pred_opt()
}

/// The first occurrence of `rule` after `base`.
pub fn next_after(rule: &Rule, base: NaiveDate) -> Option<NaiveDate> {
    let n = |x: &u32| i64::from(*x);
    match rule {
        Rule::Days(k) => shift(base, n(k), "day"),
        Rule::Weeks(k) => shift(base, n(k), "week"),
        Rule::Months(k) => shift(base, n(k), "month"),
        Rule::Years(k) => shift(base, n(k), "year"),
        Rule::Weekday => {
            let mut d = base.succ_opt()?;
            while matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
                d = d.succ_opt()?;
            }
            Some(d)
        }
        Rule::WeeksOn(k, days) => {
            // Later in the same week (weeks start on Monday), else the first listed day of
            // the week `k` weeks on.
            let offset = i64::from(base.weekday().num_days_from_monday());
            for i in offset + 1..7 {
                let d = shift(base, i - offset, "day")?;
                if days.contains(&d.weekday()) {
                    return Some(d);
                }
            }
            let monday = shift(base, n(k) * 7 - offset, "day")?;
            (0..7)
                .filter_map(|i| shift(monday, i, "day"))
                .find(|d| days.contains(&d.weekday()))
        }
        Rule::MonthDay(k, day) => {
            let first = base.with_day(1)?;
            for step in 0..=48 {
                let m = shift(first, n(k) * step, "month")?;
                if let Some(d) = NaiveDate::from_ymd_opt(m.year(), m.month(), *day)
                    && d > base
                {
                    return Some(d);
                }
            }
            None
        }
        Rule::MonthLast(k) => {
            let first = base.with_day(1)?;
            for step in 0..=2 {
                let m = shift(first, n(k) * step, "month")?;
                let d = last_day(m.year(), m.month())?;
                if d > base {
                    return Some(d);
                }
            }
            None
        }
    }
}

struct Patterns {
    task: Regex,
    done: Regex,
    cancelled: Regex,
    block: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        Some(Patterns {
            task: Regex::new(r"^([\s\t>]*(?:[-*+]|[0-9]+[.)]) +)\[(.)\](.*)$").ok()?,
            done: Regex::new(r" *✅\u{FE0F}? *[0-9]{4}-[0-9]{2}-[0-9]{2}").ok()?,
            cancelled: Regex::new(r" *❌\u{FE0F}? *[0-9]{4}-[0-9]{2}-[0-9]{2}").ok()?,
            block: Regex::new(r" \^[A-Za-z0-9-]+\s*$").ok()?,
        })
    })
    .as_ref()
}

/// The status a new recurrence starts in (after the DONE status `done`).
fn recurrence_status(done: &Status, settings: &TasksSettings) -> char {
    let first = settings.status(done.next_symbol);
    if matches!(first.status_type, StatusType::Todo | StatusType::InProgress) {
        return first.symbol;
    }
    for wanted in [StatusType::Todo, StatusType::InProgress] {
        let mut s = first.clone();
        for _ in 0..=settings.statuses.len() {
            if s.status_type == wanted {
                return s.symbol;
            }
            s = settings.status(s.next_symbol);
        }
    }
    ' '
}

/// Toggles one task line (a checkbox click, "Toggle task done"): the lines that replace it,
/// in file order (two when a recurring task is completed, none when a `🏁 delete` task is
/// completed without recurring).
pub fn toggle_line(
    line: &str,
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<Vec<String>, ToggleError> {
    change_status(line, None, settings, today)
}

/// Sets one task line's status to `symbol` ("Change status to..."), with the same dates and
/// recurrence as toggling; moving between two DONE statuses keeps the done date and does not
/// recur.
pub fn set_status_line(
    line: &str,
    symbol: char,
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<Vec<String>, ToggleError> {
    change_status(line, Some(symbol), settings, today)
}

fn change_status(
    line: &str,
    target: Option<char>,
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<Vec<String>, ToggleError> {
    if line.len() > MAX_TOGGLE_LINE_BYTES {
        return Err(ToggleError::TooLong {
            size: line.len(),
            max: MAX_TOGGLE_LINE_BYTES,
        });
    }
    let p = patterns().ok_or(ToggleError::NotATask)?;
    let caps = p.task.captures(line).ok_or(ToggleError::NotATask)?;
    let prefix = caps.get(1).map_or("", |m| m.as_str());
    let symbol = caps
        .get(2)
        .and_then(|m| m.as_str().chars().next())
        .ok_or(ToggleError::NotATask)?;
    let body = caps.get(3).map_or("", |m| m.as_str());
    let gf = &settings.global_filter;
    if !gf.is_empty() && !body.contains(gf.as_str()) {
        return Err(ToggleError::OutsideGlobalFilter(gf.clone()));
    }
    let old = settings.status(symbol);
    let new = settings.status(target.unwrap_or(old.next_symbol));
    let fields = parse_tasks_fields(body);
    let recurrence = match (&fields.recurrence, new.status_type, old.status_type) {
        (Some(r), StatusType::Done, o) if o != StatusType::Done => {
            Some(parse_recurrence(r).ok_or_else(|| ToggleError::UnsupportedRecurrence(r.clone()))?)
        }
        _ => None,
    };

    // The toggled line: same text, new symbol, ✅/❌ taken off or added at the end.
    let (main, block) = match p.block.find(body) {
        Some(m) => (&body[..m.start()], body[m.start()..].trim_end()),
        None => (body.trim_end(), ""),
    };
    let mut text = main.to_owned();
    let entering = |t: StatusType| new.status_type == t && old.status_type != t;
    let leaving = |t: StatusType| old.status_type == t && new.status_type != t;
    if leaving(StatusType::Done) || (entering(StatusType::Done) && settings.set_done_date) {
        text = p.done.replace_all(&text, "").into_owned();
    }
    if leaving(StatusType::Cancelled)
        || (entering(StatusType::Cancelled) && settings.set_cancelled_date)
    {
        text = p.cancelled.replace_all(&text, "").into_owned();
    }
    let text = text.trim_end().to_owned();
    let mut toggled = format!("{prefix}[{}]{text}", new.symbol);
    if entering(StatusType::Cancelled) && settings.set_cancelled_date {
        toggled.push_str(&format!(" ❌ {}", today.format("%Y-%m-%d")));
    }
    if entering(StatusType::Done) && settings.set_done_date {
        toggled.push_str(&format!(" ✅ {}", today.format("%Y-%m-%d")));
    }
    toggled.push_str(block);

    let delete = entering(StatusType::Done) && fields.on_completion.as_deref() == Some("delete");
    let mut out = Vec::new();
    if !delete {
        out.push(toggled);
    }
    if let Some(rec) = recurrence {
        let next = next_occurrence(prefix, &fields, &rec, &new, settings, today)?;
        if settings.recurrence_on_next_line {
            out.push(next);
        } else {
            out.insert(0, next);
        }
    }
    Ok(out)
}

fn next_occurrence(
    prefix: &str,
    f: &crate::obsidian::dataview::TasksFields,
    rec: &Recurrence,
    done: &Status,
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<String, ToggleError> {
    let unsupported =
        || ToggleError::UnsupportedRecurrence(f.recurrence.clone().unwrap_or_default());
    let reference = if settings.remove_scheduled_date_on_recurrence {
        f.due.or(f.start).or(f.scheduled)
    } else {
        f.due.or(f.scheduled).or(f.start)
    };
    let (mut start, mut scheduled, mut due) = (f.start, f.scheduled, f.due);
    if let Some(r) = reference {
        let base = if rec.when_done { today } else { r };
        let next = next_after(&rec.rule, base).ok_or_else(unsupported)?;
        let delta = Duration::days((next - r).num_days());
        let moved = |d: Option<NaiveDate>| d.and_then(|d| d.checked_add_signed(delta));
        start = moved(start);
        scheduled = moved(scheduled);
        due = moved(due);
    }
    if settings.remove_scheduled_date_on_recurrence && (start.is_some() || due.is_some()) {
        scheduled = None;
    }
    let created = if settings.set_created_date {
        Some(today)
    } else {
        f.created
    };
    let mut s = format!(
        "{prefix}[{}] {}",
        recurrence_status(done, settings),
        f.description
    );
    let day = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    if let Some(id) = &f.id {
        s.push_str(&format!(" 🆔 {id}"));
    }
    if !f.depends_on.is_empty() {
        s.push_str(&format!(" ⛔ {}", f.depends_on.join(",")));
    }
    if let Some(p) = f.priority {
        s.push(' ');
        s.push_str(match p {
            Priority::Highest => "🔺",
            Priority::High => "⏫",
            Priority::Medium => "🔼",
            Priority::Low => "🔽",
            Priority::Lowest => "⏬",
        });
    }
    if let Some(r) = &f.recurrence {
        s.push_str(&format!(" 🔁 {r}"));
    }
    if let Some(o) = &f.on_completion {
        s.push_str(&format!(" 🏁 {o}"));
    }
    for (emoji, d) in [
        ("➕", created),
        ("🛫", start),
        ("⏳", scheduled),
        ("📅", due),
    ] {
        if let Some(d) = d {
            s.push_str(&format!(" {emoji} {}", day(d)));
        }
    }
    Ok(s)
}
