//! `set_task_status`: a task's checkbox changed as the Tasks plugin changes it (its done and
//! cancelled dates, the next occurrence of a recurring task), through the one write path.

use chrono::NaiveDate;

use super::{Change, NoteName, WriteResult, Writer, existing, existing_note};
use crate::engine::Engine;
use crate::notes::NoteError;
use crate::obsidian::tasks::{StatusType, TasksSettings, set_status_line, toggle_line};

/// What `set_task_status` asks.
#[derive(Debug, Clone)]
pub struct TaskStatusRequest {
    /// The note.
    pub note: NoteName,
    /// The task's line, from 1 (as `list_tasks` and `run_query` give it).
    pub line: usize,
    /// `toggle` (default), `todo`, `done`, `in_progress`, `cancelled`, or one status symbol.
    pub status: Option<String>,
    /// Its version as read, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// The symbol a `status` argument names under `settings` (`None`: toggle).
fn wanted_symbol(
    status: Option<&str>,
    settings: &TasksSettings,
) -> Result<Option<char>, NoteError> {
    let of_type = |t: StatusType| {
        settings
            .statuses
            .iter()
            .find(|s| s.status_type == t)
            .map(|s| s.symbol)
    };
    let symbol = match status.map(str::trim) {
        None | Some("toggle") => return Ok(None),
        Some("todo") => of_type(StatusType::Todo),
        Some("done") => of_type(StatusType::Done),
        Some("in_progress") => of_type(StatusType::InProgress),
        Some("cancelled") => of_type(StatusType::Cancelled),
        Some(s) => {
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => {
                    return Err(NoteError::invalid(
                        "status",
                        format!(
                            "status: `toggle`, `todo`, `done`, `in_progress`, `cancelled` or one symbol, got {s:?}"
                        ),
                    ));
                }
            }
        }
    };
    symbol.map(Some).ok_or_else(|| {
        NoteError::invalid(
            "status",
            format!(
                "status: the Tasks settings define no {:?} status",
                status.unwrap_or_default()
            ),
        )
    })
}

/// Replaces line `line` (1-based) of `text` by the lines `change` makes of it, keeping the
/// line's own ending; `None` when the note has no such line.
fn replace_line(
    text: &str,
    line: usize,
    change: impl FnOnce(&str) -> Result<Vec<String>, NoteError>,
) -> Result<Option<String>, NoteError> {
    let Some(index) = line.checked_sub(1) else {
        return Ok(None);
    };
    let mut start = 0;
    for (i, piece) in text.split_inclusive('\n').enumerate() {
        if i == index {
            let body = piece.trim_end_matches(['\n', '\r']);
            let ending = &piece[body.len()..];
            let lines = change(body)?;
            let sep = if ending.is_empty() { "\n" } else { ending };
            let mut new = String::with_capacity(text.len() + 64);
            new.push_str(&text[..start]);
            let n = lines.len();
            for (j, l) in lines.iter().enumerate() {
                new.push_str(l);
                new.push_str(if j + 1 < n { sep } else { ending });
            }
            new.push_str(&text[start + piece.len()..]);
            return Ok(Some(new));
        }
        start += piece.len();
    }
    Ok(None)
}

/// `set_task_status` on `today`.
pub fn set_task_status(
    writer: &Writer,
    engine: &Engine,
    req: &TaskStatusRequest,
    today: NaiveDate,
) -> Result<WriteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let settings = crate::notes::settings::tasks_settings(engine.vault());
    let symbol = wanted_symbol(req.status.as_deref(), &settings)?;
    let mut held = writer.hold(engine)?;
    let (current, text) = existing(engine.vault(), &path, req.if_match.as_deref())?;
    let new = replace_line(&text, req.line, |body| {
        match symbol {
            None => toggle_line(body, &settings, today),
            Some(c) => set_status_line(body, c, &settings, today),
        }
        .map_err(|e| NoteError::invalid("line", format!("{path}, line {}: {e}", req.line)))
    })?
    .ok_or_else(|| {
        NoteError::invalid(
            "line",
            format!(
                "{path} has {} lines; `line` must be 1 to that",
                text.split_inclusive('\n').count()
            ),
        )
    })?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "set_task_status",
            path: &path,
            before: Some(&current),
            new: new.into_bytes(),
            dry_run: req.dry_run,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_replaced_with_its_own_ending_and_the_rest_byte_for_byte() {
        let text = "a\r\n- [ ] x\r\nb";
        let new = replace_line(text, 2, |l| Ok(vec![format!("{l}!"), "y".into()])).unwrap();
        assert_eq!(new.as_deref(), Some("a\r\n- [ ] x!\r\ny\r\nb"));
        let gone = replace_line(text, 2, |_| Ok(vec![])).unwrap();
        assert_eq!(gone.as_deref(), Some("a\r\nb"));
        let last = replace_line("a\n- [ ] x", 2, |l| Ok(vec![l.replace(' ', "x")])).unwrap();
        assert_eq!(last.as_deref(), Some("a\n-x[x]xx"));
        assert_eq!(replace_line(text, 4, |_| Ok(vec![])).unwrap(), None);
        assert_eq!(replace_line(text, 0, |_| Ok(vec![])).unwrap(), None);
    }

    #[test]
    fn status_names_map_to_the_settings_symbols() {
        let s = TasksSettings::default();
        assert_eq!(wanted_symbol(None, &s).unwrap(), None);
        assert_eq!(wanted_symbol(Some("toggle"), &s).unwrap(), None);
        assert_eq!(wanted_symbol(Some("done"), &s).unwrap(), Some('x'));
        assert_eq!(wanted_symbol(Some("todo"), &s).unwrap(), Some(' '));
        assert_eq!(wanted_symbol(Some("cancelled"), &s).unwrap(), Some('-'));
        assert_eq!(wanted_symbol(Some("/"), &s).unwrap(), Some('/'));
        assert!(wanted_symbol(Some("finished"), &s).is_err());
    }
}
