//! Templates (Obsidian's core Templates plugin) and the daily-note writes.

use chrono::{Local, NaiveDate, NaiveDateTime};

use super::{Change, WriteResult, Writer, check_size, read_current};
use crate::engine::Engine;
use crate::markdown::edit;
use crate::notes::NoteError;
use crate::notes::files::{daily_note_path, parse_date};
use crate::notes::settings::load_settings;
use crate::obsidian::moment;
use crate::vault::{VaultError, VaultPath};

/// Largest template read.
const MAX_TEMPLATE_BYTES: usize = 1024 * 1024;
/// Default `{{date}}` and `{{time}}` formats of the Templates plugin.
const DEFAULT_DATE: &str = "YYYY-MM-DD";
const DEFAULT_TIME: &str = "HH:mm";

/// The template named `name` (a path, or a name in the templates folder of
/// `.obsidian/templates.json`), filled in for the note at `path` now.
pub(super) fn template_text(
    engine: &Engine,
    name: &str,
    path: &VaultPath,
) -> Result<String, NoteError> {
    let now = Local::now().naive_local();
    let (bytes, date_format, time_format) = read_template(engine, name)?;
    fill(&bytes, path, now, &date_format, &time_format)
}

/// Reads a template: `name` as a vault path, else inside the configured templates folder; `.md`
/// may be left out. Returns it with the `{{date}}` and `{{time}}` formats.
fn read_template(engine: &Engine, name: &str) -> Result<(String, String, String), NoteError> {
    let vault = engine.vault();
    let folder = load_settings(vault)
        .templates
        .map(|t| t.folder.trim_matches('/').to_owned())
        .unwrap_or_default();
    let (date_format, time_format) = template_formats(vault);
    let name = name.trim();
    let mut tried = Vec::new();
    for candidate in [
        name.to_owned(),
        format!("{name}.md"),
        format!("{folder}/{name}"),
        format!("{folder}/{name}.md"),
    ] {
        let Ok(p) = VaultPath::parse(candidate.trim_start_matches('/')) else {
            continue;
        };
        if p.is_root() || tried.contains(&p) {
            continue;
        }
        match vault.read_file(&p) {
            Ok(data) => {
                if data.bytes.len() > MAX_TEMPLATE_BYTES {
                    return Err(NoteError::TooLarge(format!("template {p} is too large")));
                }
                let text =
                    String::from_utf8(data.bytes).map_err(|_| VaultError::NotUtf8(p.clone()))?;
                return Ok((text, date_format, time_format));
            }
            Err(VaultError::NotFound(_) | VaultError::IsAFolder(_)) => tried.push(p),
            Err(e) => return Err(e.into()),
        }
    }
    Err(NoteError::NotFound {
        message: format!(
            "no template `{name}` (looked in {})",
            if folder.is_empty() {
                "the vault root; no templates folder is set".to_owned()
            } else {
                format!("`{folder}` and the vault root")
            }
        ),
        suggestions: Vec::new(),
    })
}

fn nonempty(s: &str, default: &str) -> String {
    if s.trim().is_empty() {
        default.to_owned()
    } else {
        s.to_owned()
    }
}

/// The `{{date}}` and `{{time}}` formats of the vault's Templates settings (the plugin's
/// defaults when it has none).
pub(crate) fn template_formats(vault: &crate::vault::Vault) -> (String, String) {
    match &load_settings(vault).templates {
        Some(t) => (
            nonempty(&t.date_format, DEFAULT_DATE),
            nonempty(&t.time_format, DEFAULT_TIME),
        ),
        None => (DEFAULT_DATE.to_owned(), DEFAULT_TIME.to_owned()),
    }
}

/// Fills the Templates plugin's variables: `{{title}}`, `{{date}}`, `{{time}}`,
/// `{{date:FORMAT}}` and `{{time:FORMAT}}` (Moment formats). Anything else is left as written.
pub(crate) fn fill(
    template: &str,
    path: &VaultPath,
    when: NaiveDateTime,
    date_format: &str,
    time_format: &str,
) -> Result<String, NoteError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let var = &after[..end];
        let (name, format) = match var.split_once(':') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (var.trim(), None),
        };
        let format_error = |e: moment::MomentError| {
            NoteError::InvalidArgument(format!("template variable `{{{{{var}}}}}`: {e}"))
        };
        match name.to_ascii_lowercase().as_str() {
            "title" if format.is_none() => out.push_str(path.stem()),
            "date" => out.push_str(
                &moment::format_datetime(format.unwrap_or(date_format), when)
                    .map_err(format_error)?,
            ),
            "time" => out.push_str(
                &moment::format_datetime(format.unwrap_or(time_format), when)
                    .map_err(format_error)?,
            ),
            _ => {
                out.push_str("{{");
                out.push_str(var);
                out.push_str("}}");
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The text of a new daily note for `date`: the configured daily template filled in for that
/// day, or a heading with the note's name.
fn new_daily_text(
    engine: &Engine,
    path: &VaultPath,
    date: NaiveDate,
    template: &str,
) -> Result<String, NoteError> {
    let now = Local::now().naive_local();
    let when = date.and_time(now.time());
    if template.trim().is_empty() {
        return Ok(format!("# {}\n", path.stem()));
    }
    let (text, date_format, time_format) = read_template(engine, template)?;
    fill(&text, path, when, &date_format, &time_format)
}

/// What `create_daily_note` asks.
#[derive(Debug, Clone)]
pub struct CreateDailyRequest {
    /// The day (`parse_date` reads `today`, `yesterday`, `tomorrow` and `YYYY-MM-DD`).
    pub date: NaiveDate,
    /// Text after the template's.
    pub content: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `create_daily_note`: the daily note of `date` (default today), where `get_daily_note` finds
/// it, from the daily template, with `content` appended. Fails if it exists.
pub fn create_daily_note(
    writer: &Writer,
    engine: &Engine,
    req: &CreateDailyRequest,
) -> Result<WriteResult, NoteError> {
    let (date, dry_run) = (req.date, req.dry_run);
    let content = req.content.as_deref().unwrap_or("");
    check_size("content", content)?;
    let mut held = writer.hold()?;
    let (path, settings) = daily_note_path(engine.vault(), date)?;
    if read_current(engine.vault(), &path)?.is_some() {
        return Err(VaultError::Exists(path).into());
    }
    let mut text = new_daily_text(engine, &path, date, &settings.daily_notes.template)?;
    if !content.is_empty() {
        text = edit::append(&text, content);
    }
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "create_daily_note",
            path: &path,
            before: None,
            new: text.into_bytes(),
            dry_run,
        },
    )
}

/// What `append_daily_note` asks: the entry, checked, and the day, parsed.
#[derive(Debug, Clone)]
pub struct AppendDailyRequest {
    text: String,
    date: NaiveDate,
    dry_run: bool,
}

impl AppendDailyRequest {
    /// Checks the entry (not empty, within the write limit), then reads `date` as `parse_date`
    /// does (`None`: today).
    pub fn new(text: String, date: Option<&str>, dry_run: bool) -> Result<Self, NoteError> {
        if text.trim().is_empty() {
            return Err(NoteError::InvalidArgument("text is empty".to_owned()));
        }
        check_size("text", &text)?;
        Ok(AppendDailyRequest {
            date: parse_date(date)?,
            text,
            dry_run,
        })
    }
}

/// `append_daily_note`: appends `- HH:MM text` (local time) to the daily note of `date`,
/// creating the note first when it is missing.
pub fn append_daily_note(
    writer: &Writer,
    engine: &Engine,
    req: &AppendDailyRequest,
) -> Result<WriteResult, NoteError> {
    let (text, date, dry_run) = (req.text.as_str(), req.date, req.dry_run);
    let mut held = writer.hold()?;
    let (path, settings) = daily_note_path(engine.vault(), date)?;
    let current = read_current(engine.vault(), &path)?;
    let base = match &current {
        Some(c) => {
            String::from_utf8(c.bytes.clone()).map_err(|_| VaultError::NotUtf8(path.clone()))?
        }
        None => new_daily_text(engine, &path, date, &settings.daily_notes.template)?,
    };
    let stamp = Local::now().format("%H:%M");
    let line = format!("- {stamp} {}", text.trim_end());
    let new = edit::append(&base, &line);
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "append_daily_note",
            path: &path,
            before: current.as_ref(),
            new: new.into_bytes(),
            dry_run,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_daily_entry_is_refused_before_its_date_is_read() {
        let e = AppendDailyRequest::new("  ".to_owned(), Some("someday"), false).unwrap_err();
        assert_eq!(e.to_string(), "text is empty");
        let e = AppendDailyRequest::new("x".to_owned(), Some("someday"), false).unwrap_err();
        assert!(
            e.to_string().starts_with("`date` must be YYYY-MM-DD"),
            "{e}"
        );
        let r = AppendDailyRequest::new("x".to_owned(), Some("2026-12-01"), true).unwrap();
        assert_eq!(r.date, NaiveDate::from_ymd_opt(2026, 12, 1).unwrap());
    }

    #[test]
    fn template_variables_are_filled_and_others_kept() {
        let p = VaultPath::parse("Daily/2026-12-01.md").unwrap();
        let when = NaiveDate::from_ymd_opt(2026, 12, 1)
            .unwrap()
            .and_hms_opt(9, 5, 0)
            .unwrap();
        let out = fill(
            "# {{title}}\n{{date}} {{time}} {{date:dddd, MMMM Do}} {{time:HH}} {{other}} {{",
            &p,
            when,
            "YYYY-MM-DD",
            "HH:mm",
        )
        .unwrap();
        assert_eq!(
            out,
            "# 2026-12-01\n2026-12-01 09:05 Tuesday, December 1st 09 {{other}} {{"
        );
    }
}
