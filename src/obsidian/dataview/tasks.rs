//! The Tasks plugin's emoji fields, read from the end of a task's line as Tasks reads them.
//!
//! Tasks takes its signifiers off the end of the description, one at a time, in any order,
//! until none is left (at most 21 rounds, its own failsafe): priority, done ✅, cancelled ❌,
//! due 📅, scheduled ⏳, start 🛫, created ➕ dates, recurrence 🔁, on-completion 🏁, tags
//! (put back into the description), id 🆔 and depends-on ⛔. A signifier in the middle of the
//! text, with plain words after it, is not read (Dataview's shorthands, by contrast, are found
//! anywhere in the line). Each round costs a constant number of linear scans.

use std::sync::OnceLock;

use chrono::NaiveDate;
use regex::Regex;

/// A Tasks priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// 🔺
    Highest,
    /// ⏫
    High,
    /// 🔼
    Medium,
    /// 🔽
    Low,
    /// ⏬
    Lowest,
}

/// What Tasks reads from the end of a task line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksFields {
    /// The description without the fields (trailing tags put back, as Tasks does).
    pub description: String,
    pub priority: Option<Priority>,
    /// ✅ done date.
    pub done: Option<NaiveDate>,
    /// ❌ cancelled date.
    pub cancelled: Option<NaiveDate>,
    /// 📅 due date.
    pub due: Option<NaiveDate>,
    /// ⏳ scheduled date.
    pub scheduled: Option<NaiveDate>,
    /// 🛫 start date.
    pub start: Option<NaiveDate>,
    /// ➕ created date.
    pub created: Option<NaiveDate>,
    /// 🔁 the recurrence rule's text (`every day when done`), not interpreted here.
    pub recurrence: Option<String>,
    /// 🏁 `keep` or `delete`.
    pub on_completion: Option<String>,
    /// 🆔 the task's id.
    pub id: Option<String>,
    /// ⛔ ids of the tasks this one waits for.
    pub depends_on: Vec<String>,
    /// The date fields (`done`, `cancelled`, `due`, `scheduled`, `start`, `created`) written
    /// with a `YYYY-MM-DD` that is no calendar date (`2023-02-30`): Tasks keeps them as
    /// invalid dates (`due date is invalid`), and their `Option` above stays `None`.
    pub invalid_dates: Vec<&'static str>,
}

/// The signifiers, each anchored at the end of the text.
struct Patterns {
    priority: Regex,
    done: Regex,
    cancelled: Regex,
    due: Regex,
    scheduled: Regex,
    start: Regex,
    created: Regex,
    recurrence: Regex,
    on_completion: Regex,
    tag: Regex,
    id: Regex,
    depends_on: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        let date = |emoji: &str| {
            Regex::new(&format!(
                "{emoji}\u{FE0F}? *([0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}})$"
            ))
        };
        Some(Patterns {
            priority: Regex::new("(🔺|⏫|🔼|🔽|⏬)\u{FE0F}?$").ok()?,
            done: date("✅").ok()?,
            cancelled: date("❌").ok()?,
            due: date("(?:📅|📆|🗓)").ok()?,
            scheduled: date("(?:⏳|⌛)").ok()?,
            start: date("🛫").ok()?,
            created: date("➕").ok()?,
            recurrence: Regex::new("🔁\u{FE0F}? *([a-zA-Z0-9, !]+)$").ok()?,
            on_completion: Regex::new("🏁\u{FE0F}? *([a-zA-Z]+)$").ok()?,
            tag: Regex::new(r#"(?:^|[\s\u{FEFF}])#[^ !@#$%^&*(),.?":{}|<>]+$"#).ok()?,
            id: Regex::new("🆔\u{FE0F}? *([a-zA-Z0-9_-]+)$").ok()?,
            depends_on: Regex::new("⛔\u{FE0F}? *([a-zA-Z0-9_-]+( *, *[a-zA-Z0-9_-]+ *)*)$")
                .ok()?,
        })
    })
    .as_ref()
}

/// Takes `re` off the end of `line` if it matches there; the first capture's text.
fn take(line: &mut String, re: &Regex, matched: &mut bool) -> Option<String> {
    let caps = re.captures(line)?;
    let whole = caps.get(0)?;
    let value = caps
        .get(1)
        .map_or(whole.as_str(), |m| m.as_str())
        .to_owned();
    line.truncate(whole.start());
    let trimmed = line.trim_matches(super::value::is_js_space).to_owned();
    *line = trimmed;
    *matched = true;
    Some(value)
}

fn day(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

/// Reads the Tasks fields of a task's text (after the checkbox; a trailing ` ^block-id` is
/// ignored, as Tasks ignores it).
pub fn parse_tasks_fields(text: &str) -> TasksFields {
    let mut line = text.trim_matches(super::value::is_js_space).to_owned();
    if let Some(i) = line.rfind(" ^") {
        let id = &line[i + 2..];
        if !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
            line.truncate(i);
            line = line.trim_matches(super::value::is_js_space).to_owned();
        }
    }
    let mut out = TasksFields::default();
    let Some(p) = patterns() else {
        out.description = line;
        return out;
    };
    let mut trailing_tags = String::new();
    for _ in 0..=20 {
        let mut m = false;
        if let Some(v) = take(&mut line, &p.priority, &mut m) {
            out.priority = Some(match v.as_str() {
                "🔺" => Priority::Highest,
                "⏫" => Priority::High,
                "🔼" => Priority::Medium,
                "🔽" => Priority::Low,
                _ => Priority::Lowest,
            });
        }
        for (name, re, slot) in [
            ("done", &p.done, &mut out.done),
            ("cancelled", &p.cancelled, &mut out.cancelled),
            ("due", &p.due, &mut out.due),
            ("scheduled", &p.scheduled, &mut out.scheduled),
            ("start", &p.start, &mut out.start),
            ("created", &p.created, &mut out.created),
        ] {
            if let Some(v) = take(&mut line, re, &mut m) {
                *slot = day(&v);
                out.invalid_dates.retain(|n| *n != name);
                if slot.is_none() {
                    out.invalid_dates.push(name);
                }
            }
        }
        if let Some(v) = take(&mut line, &p.recurrence, &mut m) {
            out.recurrence = Some(v.trim().to_owned());
        }
        if let Some(v) = take(&mut line, &p.on_completion, &mut m) {
            out.on_completion = Some(v.to_lowercase());
        }
        if let Some(v) = take(&mut line, &p.tag, &mut m) {
            let tag = v.trim_matches(super::value::is_js_space);
            trailing_tags = if trailing_tags.is_empty() {
                tag.to_owned()
            } else {
                format!("{tag} {trailing_tags}")
            };
        }
        if let Some(v) = take(&mut line, &p.id, &mut m) {
            out.id = Some(v.trim().to_owned());
        }
        if let Some(v) = take(&mut line, &p.depends_on, &mut m) {
            out.depends_on = v
                .replace(' ', "")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if !m {
            break;
        }
    }
    if !trailing_tags.is_empty() {
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&trailing_tags);
    }
    out.description = line;
    out
}
