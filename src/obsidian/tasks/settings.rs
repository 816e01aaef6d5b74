//! The Tasks plugin's settings (`.obsidian/plugins/obsidian-tasks-plugin/data.json`) and its
//! statuses.
//!
//! Read leniently, like [`crate::obsidian::config`]: unknown keys are ignored, a key of the wrong
//! JSON type reads as its default, and a status entry without a one-character symbol is
//! skipped. Defaults are the plugin's own for a fresh install.

use serde_json::{Map, Value};

use crate::obsidian::config::{ConfigError, MAX_CONFIG_BYTES};

/// Most statuses read from the settings (core and custom together); the rest are ignored.
pub const MAX_STATUSES: usize = 1_000;

/// What kind of status a checkbox symbol stands for (Status Types.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusType {
    Todo,
    InProgress,
    OnHold,
    Done,
    Cancelled,
    NonTask,
}

impl StatusType {
    /// The name Tasks writes (`IN_PROGRESS`).
    pub fn name(self) -> &'static str {
        match self {
            StatusType::Todo => "TODO",
            StatusType::InProgress => "IN_PROGRESS",
            StatusType::OnHold => "ON_HOLD",
            StatusType::Done => "DONE",
            StatusType::Cancelled => "CANCELLED",
            StatusType::NonTask => "NON_TASK",
        }
    }

    /// Reads a type name, case-insensitively (`in_progress` works too).
    pub fn parse(s: &str) -> Option<StatusType> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "TODO" => StatusType::Todo,
            "IN_PROGRESS" => StatusType::InProgress,
            "ON_HOLD" => StatusType::OnHold,
            "DONE" => StatusType::Done,
            "CANCELLED" => StatusType::Cancelled,
            "NON_TASK" => StatusType::NonTask,
            _ => return None,
        })
    }

    /// Rank in `sort by status.type` / `group by status.type`: IN_PROGRESS, TODO, ON_HOLD,
    /// DONE, CANCELLED, NON_TASK.
    pub fn sort_rank(self) -> u8 {
        match self {
            StatusType::InProgress => 0,
            StatusType::Todo => 1,
            StatusType::OnHold => 2,
            StatusType::Done => 3,
            StatusType::Cancelled => 4,
            StatusType::NonTask => 5,
        }
    }

    /// `done` matches DONE, CANCELLED and NON_TASK; `not done` the others.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            StatusType::Done | StatusType::Cancelled | StatusType::NonTask
        )
    }
}

/// One status: the checkbox symbol, its name, the symbol toggling moves to, and its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub symbol: char,
    pub name: String,
    pub next_symbol: char,
    pub status_type: StatusType,
}

impl Status {
    fn new(symbol: char, name: &str, next_symbol: char, status_type: StatusType) -> Status {
        Status {
            symbol,
            name: name.to_owned(),
            next_symbol,
            status_type,
        }
    }

    /// The status Tasks gives a symbol it does not know: `Unknown`, next `x`, type TODO.
    pub fn unknown(symbol: char) -> Status {
        Status::new(symbol, "Unknown", 'x', StatusType::Todo)
    }
}

/// The settings that change what counts as a task, how it reads, and how toggling writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasksSettings {
    /// `globalFilter`: when not empty, only checklist items whose description contains it
    /// are tasks.
    pub global_filter: String,
    /// `removeGlobalFilter`: the global filter is taken out of descriptions when shown.
    pub remove_global_filter: bool,
    /// `globalQuery`: instructions put before every query (unless it says
    /// `ignore global query`).
    pub global_query: String,
    /// `setCreatedDate`: a new recurrence gets `➕ today`.
    pub set_created_date: bool,
    /// `setDoneDate`: toggling to DONE adds `✅ today`.
    pub set_done_date: bool,
    /// `setCancelledDate`: toggling to CANCELLED adds `❌ today`.
    pub set_cancelled_date: bool,
    /// `recurrenceOnNextLine`: the new occurrence goes after the completed task, not before.
    pub recurrence_on_next_line: bool,
    /// `removeScheduledDateOnRecurrence`: the next occurrence loses its scheduled date when
    /// it has a start or due date.
    pub remove_scheduled_date_on_recurrence: bool,
    /// Core statuses, then custom ones (`statusSettings.coreStatuses`, `.customStatuses`);
    /// the first with a symbol wins.
    pub statuses: Vec<Status>,
}

impl Default for TasksSettings {
    fn default() -> Self {
        TasksSettings {
            global_filter: String::new(),
            remove_global_filter: false,
            global_query: String::new(),
            set_created_date: false,
            set_done_date: true,
            set_cancelled_date: true,
            recurrence_on_next_line: false,
            remove_scheduled_date_on_recurrence: false,
            statuses: default_statuses(),
        }
    }
}

/// Tasks' statuses on a fresh install: core Todo and Done, custom In Progress and Cancelled.
pub fn default_statuses() -> Vec<Status> {
    vec![
        Status::new(' ', "Todo", 'x', StatusType::Todo),
        Status::new('x', "Done", ' ', StatusType::Done),
        Status::new('/', "In Progress", 'x', StatusType::InProgress),
        Status::new('-', "Cancelled", ' ', StatusType::Cancelled),
    ]
}

impl TasksSettings {
    /// Reads `data.json`. Missing keys keep their defaults; an absent `statusSettings`
    /// keeps the default statuses; an empty core list keeps the core defaults.
    pub fn from_json(bytes: &[u8]) -> Result<TasksSettings, ConfigError> {
        if bytes.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                size: bytes.len(),
                max: MAX_CONFIG_BYTES,
            });
        }
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let map = match serde_json::from_slice(bytes)
            .map_err(|e| ConfigError::InvalidJson(e.to_string()))?
        {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => {
                return Err(ConfigError::WrongShape {
                    expected: "a JSON object",
                });
            }
        };
        let mut s = TasksSettings::default();
        let b = |key: &str, default: bool| map.get(key).and_then(Value::as_bool).unwrap_or(default);
        let st = |key: &str| {
            map.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        s.global_filter = st("globalFilter");
        s.global_query = st("globalQuery");
        s.remove_global_filter = b("removeGlobalFilter", s.remove_global_filter);
        s.set_created_date = b("setCreatedDate", s.set_created_date);
        s.set_done_date = b("setDoneDate", s.set_done_date);
        s.set_cancelled_date = b("setCancelledDate", s.set_cancelled_date);
        s.recurrence_on_next_line = b("recurrenceOnNextLine", s.recurrence_on_next_line);
        s.remove_scheduled_date_on_recurrence = b(
            "removeScheduledDateOnRecurrence",
            s.remove_scheduled_date_on_recurrence,
        );
        if let Some(ss) = map.get("statusSettings").and_then(Value::as_object) {
            let read = |key: &str| -> Vec<Status> {
                ss.get(key)
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .take(MAX_STATUSES)
                            .filter_map(status_from_json)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut core = read("coreStatuses");
            if core.is_empty() {
                core = default_statuses().into_iter().take(2).collect();
            }
            let custom = read("customStatuses");
            let mut all = core;
            all.extend(custom);
            all.truncate(MAX_STATUSES);
            s.statuses = all;
        }
        Ok(s)
    }

    /// The status of a checkbox symbol: the first configured one with that symbol, else
    /// [`Status::unknown`].
    pub fn status(&self, symbol: char) -> Status {
        self.statuses
            .iter()
            .find(|s| s.symbol == symbol)
            .cloned()
            .unwrap_or_else(|| Status::unknown(symbol))
    }
}

fn one_char(v: Option<&Value>) -> Option<char> {
    let s = v?.as_str()?;
    let mut it = s.chars();
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

fn status_from_json(v: &Value) -> Option<Status> {
    let o = v.as_object()?;
    let symbol = one_char(o.get("symbol"))?;
    let next_symbol = one_char(o.get("nextStatusSymbol")).unwrap_or('x');
    let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
    let status_type = o
        .get("type")
        .and_then(Value::as_str)
        .and_then(StatusType::parse)
        .unwrap_or(StatusType::Todo);
    Some(Status::new(symbol, name, next_symbol, status_type))
}
