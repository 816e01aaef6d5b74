//! Periodic notes (`get_periodic_note`): the daily, weekly, monthly, quarterly or yearly note
//! of a date, where the vault's settings put it, and the notes of a range of periods.
//!
//! A note is found the way the Periodic Notes plugin and Obsidian's daily-notes interface find
//! it: first at the path its settings build (folder and formatted name), else as any note
//! under the period's folder whose name, read by the last `/`-separated part of the format,
//! stands for the same period (so a note moved into a year subfolder is still found).

use chrono::{Local, NaiveDate};
use schemars::JsonSchema;
use serde::Serialize;

use super::NoteError;
use super::settings::{VaultSettings, load_settings};
use super::view::{ViewRequest, view_note};
use crate::engine::Engine;
use crate::obsidian::config::{DailyNoteConfig, periodic_note_location};
use crate::obsidian::moment::{self, WeekRule};
use crate::obsidian::periodic::{
    Period, numbers_weeks, parse_date_words, uses_iso_weeks, week_rule,
};
use crate::vault::{VaultError, VaultPath};

/// Most notes a range lists.
pub const MAX_RANGE_NOTES: usize = 400;

/// Reply of `get_periodic_note` (and of `get_daily_note`, its former name).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PeriodicNote {
    /// `day`, `week`, `month`, `quarter` or `year`.
    pub period: Period,
    /// The period's first day, `YYYY-MM-DD` (with `to`: the range's first day).
    pub date: String,
    /// The period's (or range's) last day; absent for a day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Where the note is, or would be created.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Whether the note exists (with `to`: whether any does).
    pub exists: bool,
    /// The note's text, when it exists (at most 40,000 characters; use `read_note` for more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// True when `content` (or, with `to`, `notes`) was cut.
    pub truncated: bool,
    /// SHA-256 of the note, when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Which settings located it: periodic-notes, daily-notes or default.
    pub source: String,
    /// The folder and Moment.js format used.
    pub format: String,
    /// With `to`: the existing notes of the range, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<PeriodEntry>>,
    /// Where the text came from, when not the vault's own (`clipped`, `shared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::obsidian::provenance::Provenance>,
    /// What happened, in a sentence.
    pub message: String,
}

/// One note of a range.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PeriodEntry {
    /// The period's first day.
    pub date: String,
    /// The note.
    pub path: String,
}

/// What `get_periodic_note` asks, read: the period and its first day, or a range of them.
#[derive(Debug, Clone)]
pub struct PeriodRequest {
    /// The period.
    pub period: Period,
    /// The first day of the (first) period.
    pub start: NaiveDate,
    /// The day the request named (a new note is named from it, as the plugin names one).
    pub given: NaiveDate,
    /// The first day of the last period of a range.
    pub to: Option<NaiveDate>,
}

/// Where one period's notes are and how they are named in this vault.
#[derive(Debug, Clone)]
pub struct PeriodSetup {
    /// Folder, format, template and which settings gave them.
    pub config: DailyNoteConfig,
    /// The vault's week rule.
    pub week: WeekRule,
}

impl PeriodSetup {
    /// The settings of `period` in `settings`.
    pub fn of(settings: &VaultSettings, period: Period) -> PeriodSetup {
        let config = match period {
            Period::Day => settings.daily_notes.clone(),
            other => periodic_note_location(
                other,
                &settings.community_plugins,
                settings.periodic_notes.as_ref(),
                None,
            ),
        };
        PeriodSetup {
            config,
            week: week_rule(&settings.app.week_start),
        }
    }

    /// The path the settings build for the period starting `start`.
    pub fn path(&self, start: NaiveDate) -> Result<VaultPath, NoteError> {
        let cfg = &self.config;
        let text =
            moment::note_path_in(&cfg.folder, &cfg.format, start, self.week).map_err(|e| {
                NoteError::invalid(
                    "period",
                    format!(
                        "cannot build the note's name from format `{}`: {e}",
                        cfg.format
                    ),
                )
            })?;
        VaultPath::parse(&text).map_err(|e| {
            NoteError::invalid(
                "period",
                format!(
                    "the periodic-note settings give `{text}`, which capvault cannot open: {e}"
                ),
            )
        })
    }

    /// What reads note names back into dates (`None` for a format that cannot be read).
    pub fn reader(&self) -> Option<NameReader> {
        let name_format = self.config.format.rsplit('/').next()?;
        Some(NameReader {
            folder: self.config.folder.trim_matches('/').to_owned(),
            parser: moment::DateParser::new(name_format, self.week)?,
            week: self.week,
            names_weeks: numbers_weeks(name_format),
        })
    }

    /// `folder/format` as shown in replies.
    fn shown_format(&self) -> String {
        let cfg = &self.config;
        if cfg.folder.trim_matches('/').is_empty() {
            cfg.format.clone()
        } else {
            format!("{}/{}", cfg.folder.trim_matches('/'), cfg.format)
        }
    }

    fn source(&self) -> String {
        serde_json::to_value(self.config.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// Reads note paths back into the periods they stand for.
pub struct NameReader {
    folder: String,
    parser: moment::DateParser,
    week: WeekRule,
    names_weeks: bool,
}

impl NameReader {
    /// The first day of the period `path` stands for, read from its name (the last part of
    /// the format) when it is under the period's folder.
    pub fn date_of(&self, period: Period, path: &VaultPath) -> Option<NaiveDate> {
        let inside = self.folder.is_empty()
            || path
                .as_str()
                .strip_prefix(self.folder.as_str())
                .is_some_and(|r| r.starts_with('/'));
        if !inside {
            return None;
        }
        let date = self.parser.parse(path.stem())?;
        let start = period.start(date, self.week);
        // The plugin names a note by its period's first day; a name that parses to another day
        // (a daily note beside weekly notes named `YYYY-MM-DD`) is not this period's note. A
        // week number names a whole week (an ISO week read back is its Monday, inside a week
        // that starts on Sunday), so it counts for the week that holds it.
        (start == date || self.names_weeks).then_some(start)
    }
}

/// The notes under `folder` (every note for the vault root), by a range of the model's sorted
/// paths rather than a walk of all of them.
fn in_folder<'m>(
    model: &'m crate::model::Model,
    folder: &str,
) -> Box<dyn Iterator<Item = &'m VaultPath> + 'm> {
    let folder = folder.trim_matches('/');
    let bounds = VaultPath::parse(folder)
        .ok()
        .zip(VaultPath::parse(&format!("{folder}0")).ok());
    match bounds {
        // `/` sorts just before `0`: every path under `folder/` is between the two.
        // Names like `folder 2/…` sort inside the range too; the caller's folder check
        // (`NameReader::date_of`) leaves them out.
        Some((lo, hi)) if !folder.is_empty() => {
            Box::new(model.notes().range(lo..hi).map(|(p, _)| p))
        }
        _ => Box::new(model.notes().keys()),
    }
}

/// Reads the arguments: `date` (default today) in the words [`parse_date_words`] reads, the
/// period given or else the one the words name (`this week`: a week) or else a day, and `to`
/// for a range. Returns the request with the vault's settings.
pub fn read_request(
    settings: &VaultSettings,
    period: Option<Period>,
    date: Option<&str>,
    to: Option<&str>,
) -> Result<PeriodRequest, NoteError> {
    let week = week_rule(&settings.app.week_start);
    let iso = uses_iso_weeks(&PeriodSetup::of(settings, Period::Week).config.format);
    let today = Local::now().date_naive();
    let words = |name: &'static str, text: Option<&str>| {
        parse_date_words(text.unwrap_or("today"), today, week, iso)
            .map_err(|e| NoteError::invalid(name, format!("`{name}`: {e}")))
    };
    let named = words("date", date)?;
    let period = period.or(named.period).unwrap_or_default();
    let start = period.start(named.date, week);
    let to = match to {
        None => None,
        Some(t) if t.trim().is_empty() => {
            return Err(NoteError::invalid(
                "to",
                "`to` is empty: give the range's last date, or leave `to` out",
            ));
        }
        Some(t) => {
            let end = period.start(words("to", Some(t))?.date, week);
            if end < start {
                return Err(NoteError::invalid(
                    "to",
                    format!("`to` ({end}) is before `date` ({start})"),
                ));
            }
            Some(end)
        }
    };
    Ok(PeriodRequest {
        period,
        start,
        given: named.date,
        to,
    })
}

/// The names the settings build for the period starting `start`: from `given` (the day the
/// request named, as the plugin names a new note), then from each day of the period. A weekly
/// format with ISO week numbers in a vault whose weeks start on Sunday gives two names for one
/// week (`2026-W52` from Sunday 27 December 2026, `2026-W53` from the days after); other
/// formats give one.
fn candidate_paths(
    setup: &PeriodSetup,
    period: Period,
    start: NaiveDate,
    given: NaiveDate,
) -> Result<Vec<VaultPath>, NoteError> {
    let mut days = vec![given, start];
    if period == Period::Week {
        days.extend((1..7).filter_map(|i| start.checked_add_days(chrono::Days::new(i))));
    }
    let mut out: Vec<VaultPath> = Vec::new();
    for d in days {
        let p = setup.path(d)?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The note of the period starting `start` (`given` the day the request named): a note at a
/// name the settings build for one of the period's days that reads back to this period (as
/// Periodic Notes finds a note: by the start of the period its name parses to), else the note
/// under the period's folder named so (the first by path); with `false`, the path it would be
/// created at when there is none: the name built from `given` when it reads back to this
/// period, else the first that does. A read (`wait` false) during the first build does not wait
/// for the model the search by name needs; a write does.
pub fn locate(
    engine: &Engine,
    setup: &PeriodSetup,
    period: Period,
    (start, given): (NaiveDate, NaiveDate),
    wait: bool,
) -> Result<(VaultPath, bool), NoteError> {
    let candidates = candidate_paths(setup, period, start, given)?;
    let reader = setup.reader();
    // A name stands for this period when it reads back to it. A format that cannot be read
    // back, or whose folders are part of it (`YYYY/MM-DD`: the name alone lacks the year):
    // the name built from the period's first day only, as before.
    let by_name = reader
        .as_ref()
        .filter(|_| !setup.config.format.contains('/'));
    let first_day = setup.path(start)?;
    let stands = |p: &VaultPath| match by_name {
        Some(r) => r.date_of(period, p) == Some(start),
        None => *p == first_day,
    };
    let mine: Vec<&VaultPath> = candidates.iter().filter(|p| stands(p)).collect();
    let built = mine
        .first()
        .copied()
        .or(candidates.first())
        .cloned()
        .ok_or_else(|| NoteError::invalid("period", "no name for the period"))?;
    for p in &mine {
        match engine.vault().stat_file(p) {
            Ok(_) => return Ok(((*p).clone(), true)),
            Err(VaultError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // The search by name needs the parsed model: a read during the first build answers with the
    // path the settings build (where almost every periodic note is) rather than wait for it.
    let Some(reader) = reader.filter(|_| wait || engine.is_ready()) else {
        return Ok((built, false));
    };
    let model = engine.model()?;
    // Every note with a name the settings build, wherever it is (the model's name index),
    // then the first under the period's folder that stands for the same period.
    let mut named: Vec<VaultPath> = Vec::new();
    for c in &candidates {
        if let crate::model::linkres::Resolution::Found { path, alternatives } =
            model.resolve(c.stem(), None)
        {
            named.extend(std::iter::once(path).chain(alternatives));
        }
    }
    named.sort();
    named.dedup();
    let found = named
        .into_iter()
        .find(|p| model.note(p).is_some() && reader.date_of(period, p) == Some(start));
    Ok(match found {
        Some(p) => (p, true),
        None => (built, false),
    })
}

/// `get_periodic_note`: the note of one period, read as `read_note` reads a note (the first
/// page of its text), or with `to` the existing notes of every period in the range.
pub fn periodic_note(
    engine: &Engine,
    period: Option<Period>,
    date: Option<&str>,
    to: Option<&str>,
) -> Result<PeriodicNote, NoteError> {
    let settings = load_settings(engine.vault());
    let req = read_request(&settings, period, date, to)?;
    let setup = PeriodSetup::of(&settings, req.period);
    match req.to {
        Some(last) => range(engine, &setup, &req, last),
        None => one(engine, &setup, &req),
    }
}

fn unset_note(setup: &PeriodSetup, period: Period) -> &'static str {
    if period != Period::Day
        && setup.config.source != crate::obsidian::config::DailyNoteSource::PeriodicNotes
    {
        " (Periodic Notes has no enabled settings for this period: its defaults are used)"
    } else {
        ""
    }
}

fn one(
    engine: &Engine,
    setup: &PeriodSetup,
    req: &PeriodRequest,
) -> Result<PeriodicNote, NoteError> {
    let (period, start) = (req.period, req.start);
    let (path, exists) = locate(engine, setup, period, (start, req.given), false)?;
    let end = (period != Period::Day)
        .then(|| period.end(start, setup.week).map(|d| d.to_string()))
        .flatten();
    let what = match &end {
        Some(e) => format!("{} note for {start} to {e}", period.adjective()),
        None => format!("{} note for {start}", period.adjective()),
    };
    let mut reply = PeriodicNote {
        period,
        date: start.to_string(),
        end,
        message: format!("no {what}: it would be {path}{}", unset_note(setup, period)),
        path: path.to_string(),
        exists: false,
        content: None,
        truncated: false,
        sha256: None,
        source: setup.source(),
        format: setup.shown_format(),
        notes: None,
        provenance: None,
    };
    if !exists {
        return Ok(reply);
    }
    let req = ViewRequest {
        hidden_text: engine.options().hidden_text,
        ..ViewRequest::default()
    };
    match view_note(engine.vault(), &path, &req) {
        Ok(view) => {
            reply.message = what;
            reply.exists = true;
            reply.truncated = view.next_offset.is_some();
            reply.content = view.content;
            reply.sha256 = Some(view.sha256);
            reply.provenance = Some(engine.provenance_now(&path)).filter(|p| !p.is_own());
            Ok(reply)
        }
        Err(NoteError::Vault(VaultError::NotFound(_))) => Ok(reply),
        Err(e) => Err(e),
    }
}

fn range(
    engine: &Engine,
    setup: &PeriodSetup,
    req: &PeriodRequest,
    last: NaiveDate,
) -> Result<PeriodicNote, NoteError> {
    let period = req.period;
    let end = period.end(last, setup.week).unwrap_or(last);
    let model = engine.model()?;
    let reader = setup.reader().ok_or_else(|| {
        NoteError::invalid(
            "to",
            format!("cannot read names by format `{}`", setup.config.format),
        )
    })?;
    let mut found: Vec<(NaiveDate, &VaultPath)> = in_folder(&model, &setup.config.folder)
        .filter_map(|p| {
            let d = reader.date_of(period, p)?;
            (req.start..=last).contains(&d).then_some((d, p))
        })
        .collect();
    found.sort();
    let total = found.len();
    let truncated = total > MAX_RANGE_NOTES;
    found.truncate(MAX_RANGE_NOTES);
    let notes: Vec<PeriodEntry> = found
        .into_iter()
        .map(|(d, p)| PeriodEntry {
            date: d.to_string(),
            path: p.to_string(),
        })
        .collect();
    let message = format!(
        "{total} {} note{} from {} to {end}{}{}",
        period.adjective(),
        if total == 1 { "" } else { "s" },
        req.start,
        if truncated {
            format!(" (the first {MAX_RANGE_NOTES} listed)")
        } else {
            String::new()
        },
        unset_note(setup, period)
    );
    Ok(PeriodicNote {
        period,
        date: req.start.to_string(),
        end: Some(end.to_string()),
        path: String::new(),
        exists: total > 0,
        content: None,
        truncated,
        sha256: None,
        source: setup.source(),
        format: setup.shown_format(),
        notes: Some(notes),
        provenance: None,
        message,
    })
}
