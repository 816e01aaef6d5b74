//! The Obsidian Tasks plugin, without Obsidian: its settings and statuses, its query language,
//! answering queries over a vault's tasks, and toggling a task line (capvault issue 34).
//!
//! Pure: functions take bytes or text and return typed values; the caller reads the files.
//! Tasks come from [`crate::obsidian::dataview`] (`ListItem` with its `TasksFields`), turned
//! into [`TaskRecord`]s.
//!
//! - [`settings`]: `.obsidian/plugins/obsidian-tasks-plugin/data.json` read leniently
//!   ([`TasksSettings::from_json`]): global filter and its removal, global query, done /
//!   cancelled / created dates, recurrence placement and scheduled-date removal, core and
//!   custom statuses; the status of a checkbox symbol (unknown symbols are `Unknown`, TODO,
//!   next `x`, as the plugin does).
//! - [`query`]: the query language ([`parse_query`]): comments, line continuations, the date
//!   filters with `before|after|on|in|on or before|on or after|in or before|in or after` and
//!   absolute, relative and numbered dates and ranges ([`dates`]), `has|no <field> date`,
//!   `<field> date is invalid`, `done`, `not done`, `priority is [above|below|not]`,
//!   `status.type is [not]`, the text filters (`description`, `path`, `root`, `folder`,
//!   `filename`, `heading`, `tag(s)`, `status.name`, `recurrence`, `id`; `includes` and
//!   `regex matches`, negated), `is [not] recurring|blocked|blocking`, `has|no tags|id|depends
//!   on`, `exclude sub-items`, Boolean lines with `AND`, `OR`, `XOR`, `NOT`, `AND NOT`, `OR NOT`
//!   and one kind of delimiter (precedence NOT, XOR, AND, OR), `sort by` / `group by` with
//!   `reverse`, `limit [to] N [tasks]`, `limit groups [to] N [tasks]`, `hide|show <element>`,
//!   `short mode`, `full mode`, `explain`, `ignore global query`. Unknown instructions are
//!   errors naming the line and the instruction.
//! - [`eval`]: [`run`] / [`run_source`] over `&[TaskRecord]`: the global filter decides what
//!   is a task, filters with Tasks' semantics (a date filter never matches a task without
//!   that date, except `starts`, which every task without a start date matches; `happens`
//!   matches when any of start, scheduled, due does), the user's sorts
//!   then the default `status.type, urgency, due, priority, path`, groups (a task with
//!   several tags is in each tag's group), `limit` before grouping and `limit groups` in each
//!   group; all of it (parsing, each regex compiled, filtering, sorting, grouping, rendering)
//!   under the request's [`crate::obsidian::budget::Budget`] of steps, time, bytes and
//!   cancellation, each distinct regex charged [`query::REGEX_CHARGE`] bytes before it is
//!   compiled. [`render_markdown`] writes the plugin's list
//!   (group headings, task lines with the fields the query shows, backlinks, task count).
//! - [`toggle`]: [`toggle_line`] (the next status from the settings) and [`set_status_line`]
//!   ("Change status to..."): `✅`/`❌` dates added
//!   and removed on entering and leaving DONE / CANCELLED, `🏁 delete`, and the next
//!   occurrence of a recurring task (dates shifted from due, else scheduled, else start, or
//!   from today with `when done`; other dates keep their distance), before or after the
//!   completed line per the setting, in a TODO (or IN_PROGRESS, or space) status found by
//!   following the status cycle after DONE.
//!
//! Differences from the plugin, and why:
//! - Scripting (`filter|sort|group by function`) is refused with an error: capvault does not
//!   run JavaScript from the vault. Query placeholders (`{{query.file.path}}`) and `preset`
//!   are refused too (they need the note holding the query, or are not implemented).
//! - Regexes are Rust's `regex` syntax (no look-around, no backreferences), flags `i`, `m`,
//!   `s` honoured; a pattern that does not compile is an error naming the reason.
//! - Dates written in words are read by a small parser of our own, not the chrono library the
//!   plugin uses: `today`, `tomorrow`, `yesterday`, `N <unit>s ago`, `in N <unit>s`,
//!   weekdays (closest), `next|last <weekday>` (the next/last one strictly after/before
//!   today), `25th May 2023`, `14 October`, `May`. Anything else is an error rather than a
//!   guess.
//! - Recurrence rules: `every [N] day(s)|week(s)|month(s)|year(s)`, `every weekday`, `every
//!   <weekday>[, <weekday>]`, `every [N] week(s) on <weekdays>`, `every [N] month(s) on the
//!   <Nth>|last [day]`, each optionally `when done`. Others (`every month on the last
//!   Friday`, `every January on the 15th`) are an error rather than a wrong date. As in the
//!   plugin, `every month` from the 31st moves to the last day of a shorter month, and `every
//!   month on the 31st` skips such months.
//! - The new recurrence keeps the original created date unless `setCreatedDate` is on, keeps
//!   id and depends-on, and drops the `^block-id`.
//! - Group headings are the plugin's names (`2023-01-01 Sunday`, `No due date`, `High
//!   priority`); urgency groups show the score with two decimals. `group by` ordering of
//!   `(No heading)`/`None` puts them first. Status names sort by plain string comparison.
//! - `sort by random` is a stable hash of the description and today's date.
//! - `explain` ([`explain`]) writes the plugin's explanation (Explaining Queries.md): global
//!   filter, global query, then the block's filters (dates resolved, regexes as compiled,
//!   Boolean lines as a tree), groups, sorts, layout and limits. It is added at the start of
//!   [`render_markdown`]'s text in a fixed-width block, as the plugin shows it. The plugin's
//!   sentences for a few filters capvault words the same as the filter (`priority is above
//!   medium`) may differ.
//! - Tags are the tags on the task's lines as capvault's Markdown parser finds them.

pub mod dates;
pub mod eval;
pub mod query;
pub mod settings;
pub mod toggle;

#[cfg(test)]
mod tests;

pub use eval::{
    EvalError, QueryResult, ResultGroup, TaskRecord, explain, render_markdown, render_task, run,
    run_source, urgency,
};
pub use query::{Query, QueryError, parse_query};
pub use settings::{Status, StatusType, TasksSettings};
pub use toggle::{ToggleError, set_status_line, toggle_line};
