//! Templates (Obsidian's core Templates plugin) and the periodic-note writes.

use chrono::{Local, NaiveDate, NaiveDateTime};

use super::{Change, WriteResult, Writer, check_size, read_current};
use crate::engine::Engine;
use crate::markdown::edit;
use crate::notes::NoteError;
use crate::notes::periodic::{self, PeriodSetup};
use crate::notes::settings::load_settings;
use crate::obsidian::config::DailyNoteSource;
use crate::obsidian::moment;
use crate::obsidian::periodic::{Period, TemplateDates, fill_period_variables};
use crate::obsidian::template::{MAX_FILLED_BYTES, fill_variables};
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
    let filled = fill_variables(template, MAX_FILLED_BYTES, |var| {
        let (name, format) = match var.split_once(':') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (var.trim(), None),
        };
        let with = |f: &str| {
            moment::format_datetime(f, when).map_err(|e| {
                NoteError::invalid(
                    "template",
                    format!("template variable `{{{{{var}}}}}`: {e}"),
                )
            })
        };
        Ok::<_, NoteError>(match name.to_ascii_lowercase().as_str() {
            "title" if format.is_none() => Some(path.stem().to_owned()),
            "date" => Some(with(format.unwrap_or(date_format))?),
            "time" => Some(with(format.unwrap_or(time_format))?),
            _ => None,
        })
    })?;
    if filled.cut {
        return Err(NoteError::TooLarge(format!(
            "the template grows past {MAX_FILLED_BYTES} bytes as its variables are filled"
        )));
    }
    Ok(filled.text)
}

/// The text of a new periodic note at `path` for the period starting `start`: the period's
/// template filled in (by the Periodic Notes plugin's rules when its settings located the note,
/// else by the Templates plugin's), or a heading with the note's name when there is none.
pub(super) fn new_periodic_text(engine: &Engine, at: &Located) -> Result<String, NoteError> {
    let Located {
        period,
        start,
        setup,
        path,
        ..
    } = at;
    let (period, start) = (*period, *start);
    let now = Local::now().naive_local();
    let template = &setup.config.template;
    if template.trim().is_empty() {
        return Ok(format!("# {}\n", path.stem()));
    }
    let (mut text, date_format, time_format) = read_template(engine, template)?;
    let core_daily = period == Period::Day && setup.config.source != DailyNoteSource::PeriodicNotes;
    if !core_daily {
        let dates = TemplateDates {
            period,
            start,
            now: now.time(),
            format: &setup.config.format,
            title: path.stem(),
            week: setup.week,
        };
        text = fill_period_variables(&text, &dates)
            .map_err(|e| NoteError::invalid("template", format!("template `{template}`: {e}")))?;
    }
    fill(
        &text,
        path,
        start.and_time(now.time()),
        &date_format,
        &time_format,
    )
}

/// Which period and date a periodic write names, as `get_periodic_note` reads them.
#[derive(Debug, Clone)]
pub struct PeriodArgs {
    /// The period (`None`: the one the date words name, else a day).
    pub period: Option<Period>,
    /// The date words (`None`: today).
    pub date: Option<String>,
}

/// A periodic note found (or where it would be created).
#[derive(Debug, Clone)]
pub(super) struct Located {
    pub(super) period: Period,
    pub(super) start: NaiveDate,
    pub(super) setup: PeriodSetup,
    pub(super) path: VaultPath,
    pub(super) exists: bool,
}

impl PeriodArgs {
    /// The period, its first day, its settings, and its note's path and whether it exists.
    pub(super) fn locate(&self, engine: &Engine) -> Result<Located, NoteError> {
        let settings = load_settings(engine.vault());
        let req = periodic::read_request(&settings, self.period, self.date.as_deref(), None)?;
        let setup = PeriodSetup::of(&settings, req.period);
        let (path, exists) =
            periodic::locate(engine, &setup, req.period, (req.start, req.given), true)?;
        Ok(Located {
            period: req.period,
            start: req.start,
            setup,
            path,
            exists,
        })
    }
}

/// What `append_periodic_note` asks: the entry, checked, and the period and date.
#[derive(Debug, Clone)]
pub struct AppendPeriodicRequest {
    text: String,
    at: PeriodArgs,
    dry_run: bool,
}

impl AppendPeriodicRequest {
    /// Checks the entry (not empty, within the write limit); the date is read when the vault's
    /// settings are (`None`: today).
    pub fn new(text: String, at: PeriodArgs, dry_run: bool) -> Result<Self, NoteError> {
        if text.trim().is_empty() {
            return Err(NoteError::invalid("text", "text is empty"));
        }
        check_size("text", &text)?;
        Ok(AppendPeriodicRequest { text, at, dry_run })
    }
}

/// `append_periodic_note`: appends `- HH:MM text` (local time) to a daily note, `- text` to
/// the note of a longer period, creating the note from its template first when it is missing.
pub fn append_periodic_note(
    writer: &Writer,
    engine: &Engine,
    req: &AppendPeriodicRequest,
) -> Result<WriteResult, NoteError> {
    let mut held = writer.hold(engine)?;
    let at = req.at.locate(engine)?;
    let path = &at.path;
    let current = read_current(engine.vault(), path)?;
    let base = match &current {
        Some(c) => {
            String::from_utf8(c.bytes.clone()).map_err(|_| VaultError::NotUtf8(path.clone()))?
        }
        None => new_periodic_text(engine, &at)?,
    };
    let entry = req.text.trim_end();
    let line = if at.period == Period::Day {
        format!("- {} {entry}", Local::now().format("%H:%M"))
    } else {
        format!("- {entry}")
    };
    let new = edit::append(&base, &line);
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "append_periodic_note",
            path,
            before: current.as_ref(),
            new: new.into_bytes(),
            dry_run: req.dry_run,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_periodic_entry_is_refused_before_its_date_is_read() {
        let at = PeriodArgs {
            period: None,
            date: Some("someday".to_owned()),
        };
        let e = AppendPeriodicRequest::new("  ".to_owned(), at.clone(), false).unwrap_err();
        assert_eq!(e.to_string(), "text is empty");
        let big = "x".repeat(super::super::MAX_WRITE_BYTES + 1);
        assert!(AppendPeriodicRequest::new(big, at.clone(), false).is_err());
        assert!(AppendPeriodicRequest::new("x".to_owned(), at, false).is_ok());
    }

    #[test]
    fn a_template_that_grows_past_the_bound_is_refused() {
        let p = VaultPath::parse("a.md").unwrap();
        let when = NaiveDate::from_ymd_opt(2026, 12, 3)
            .unwrap()
            .and_hms_opt(9, 5, 0)
            .unwrap();
        // 3 MB of template that would print about 5.4 MB.
        let template = format!("{{{{date:{}}}}}", "dddd ".repeat(200)).repeat(3000);
        match fill(&template, &p, when, "YYYY", "HH:mm") {
            Err(NoteError::TooLarge(m)) => assert!(m.contains("grows past"), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(t) => panic!("filled to {} bytes", t.len()),
        }
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
