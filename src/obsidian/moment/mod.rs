//! Moment.js date formats, as Obsidian uses them for daily-note names and template variables.
//!
//! Obsidian bundles Moment 2.29.4 with the English locale unless the user picks another
//! language; this module reproduces that locale. The tokenizer follows Moment's own token regex
//! (`src/lib/format/format.js`) rule for rule, because daily-note names must come out
//! byte-identical to the ones Obsidian creates:
//!
//! - `[text]` is literal. The bracket runs to the last `]` before the next `[`, so `[a]b]` is the
//!   literal `a]b`; a `[` with no closing bracket is itself literal.
//! - Tokens are matched from the left, trying Moment's alternatives in Moment's order: `YYYYY`
//!   is one five-digit year token, `YYY` is `YY` followed by `Y`, `ggg` is `gg` followed by a
//!   literal `g`, `MMMMM` is `MMMM` followed by `M`.
//! - A backslash escapes the whole token after it (`\YYYY` prints `YYYY`); a lone backslash
//!   prints nothing.
//! - Any other character, letters included, prints as itself (`T`, `W` in `gggg-[W]ww` needs the
//!   brackets only because `W` *is* a token). Line breaks are dropped, as Moment drops them.
//! - The locale formats `LT`, `LTS`, `L`, `LL`, `LLL`, `LLLL`, `l`, `ll`, `lll`, `llll` expand to
//!   their English patterns first (`L` is `MM/DD/YYYY`, so in a daily-note format it makes
//!   folders, exactly as in Obsidian).
//!
//! Not supported, reported as [`MomentError::Unsupported`] rather than printed wrongly: eras
//! (`N`, `y`), Unix timestamps (`X`, `x`) and time zones (`Z`, `z`), none of which a date
//! without a zone can answer. [`format_date`] refuses time-of-day tokens (`HH`, `mm`, `A`...)
//! with [`MomentError::NeedsTime`]; [`format_datetime`] accepts them.
//!
//! Week tokens follow Moment exactly: `w`/`ww`/`gg`/`gggg` are the *locale* week and week-year
//! (English: weeks start on Sunday and the week holding January 1st is week 1), `W`/`WW`/`GG`/
//! `GGGG` the ISO week and week-year.
//!
//! [`parse_date`] is Moment's strict parse (`moment(text, format, true)`), for the tokens a
//! note name can be recognised by: years, months (numbers and names), days, day of year,
//! weekdays (checked against the date) and time fields (checked, then ignored).

use std::borrow::Cow;

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use unicode_normalization::UnicodeNormalization;

mod format;
pub(crate) use format::{MONTHS, WEEKDAYS};
mod parse;
mod tokens;

use format::*;
use parse::*;
use tokens::*;

/// Longest format accepted, in bytes. Real formats are a few dozen bytes; the bound keeps the
/// output (at most about ten bytes per format byte) small.
pub const MAX_FORMAT_BYTES: usize = 1024;

/// Longest text [`parse_date`] looks at, in bytes (a file name is at most 255).
const MAX_PARSE_INPUT_BYTES: usize = 4096;

/// Why a date could not be formatted or turned into a note path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MomentError {
    /// The format is the empty string.
    #[error("the date format is empty")]
    EmptyFormat,
    /// The format is longer than [`MAX_FORMAT_BYTES`].
    #[error("the date format is longer than {max} bytes")]
    FormatTooLong {
        /// The limit.
        max: usize,
    },
    /// A time-of-day token in a format given only a date.
    #[error("the format token `{token}` needs a time of day, but only a date was given")]
    NeedsTime {
        /// The token as written in the format.
        token: String,
    },
    /// A Moment token this module does not implement (eras, timestamps, time zones).
    #[error(
        "the format token `{token}` is not supported (eras, timestamps and time zones are not)"
    )]
    Unsupported {
        /// The token as written in the format.
        token: String,
    },
    /// The note path came out empty (for example the format was `[]`).
    #[error("the date format produces an empty note name")]
    EmptyPath,
    /// The folder or the formatted name contains a `..` component.
    #[error("the daily-note folder or format produces a `..` path component")]
    ParentComponent,
}

/// Formats `date` with a Moment.js format, like `moment(date).format(format)` in Obsidian.
///
/// ```
/// use capvault::obsidian::moment::format_date;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
/// assert_eq!(format_date("YYYY-MM-DD", d).unwrap(), "2024-03-01");
/// assert_eq!(format_date("dddd, MMMM Do YYYY", d).unwrap(), "Friday, March 1st 2024");
/// assert_eq!(format_date("gggg-[W]ww", d).unwrap(), "2024-W09");
/// assert!(format_date("YYYY-MM-DD HH:mm", d).is_err()); // needs a time
/// ```
pub fn format_date(format: &str, date: NaiveDate) -> Result<String, MomentError> {
    format_with(format, date, None, WeekRule::ENGLISH)
}

/// [`format_date`] with the vault's week rule for the locale week tokens (`w`, `ww`, `gggg`,
/// `e`).
pub fn format_date_in(
    format: &str,
    date: NaiveDate,
    week: WeekRule,
) -> Result<String, MomentError> {
    format_with(format, date, None, week)
}

/// Formats a date and time of day with a Moment.js format (for `{{time}}` and
/// `{{date:FORMAT}}` in templates). Time zones are unknown, so `Z`, `z`, `X` and `x` are refused.
///
/// ```
/// use capvault::obsidian::moment::format_datetime;
/// use chrono::NaiveDate;
///
/// let t = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap().and_hms_opt(14, 5, 0).unwrap();
/// assert_eq!(format_datetime("HH:mm", t).unwrap(), "14:05");
/// assert_eq!(format_datetime("h:mm A", t).unwrap(), "2:05 PM");
/// ```
pub fn format_datetime(format: &str, datetime: NaiveDateTime) -> Result<String, MomentError> {
    format_with(
        format,
        datetime.date(),
        Some(datetime.time()),
        WeekRule::ENGLISH,
    )
}

/// [`format_datetime`] with the vault's week rule.
pub fn format_datetime_in(
    format: &str,
    datetime: NaiveDateTime,
    week: WeekRule,
) -> Result<String, MomentError> {
    format_with(format, datetime.date(), Some(datetime.time()), week)
}

/// The locale's week rule, as Moment keeps it (`_week`): the first day of the week (`dow`,
/// 0 = Sunday) and the day of the year week 1 must hold, counted as Moment counts it (`doy`:
/// week 1 holds January `7 + dow - doy`).
///
/// Obsidian's Moment uses the English locale (Sunday, week 1 holds January 1st) unless the
/// vault says otherwise: `weekStart` in `app.json`, which the Periodic Notes and Calendar
/// plugins set, changes `dow` and keeps `doy`, as `moment.updateLocale` merges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeekRule {
    /// First day of the week, 0 = Sunday.
    pub dow: u8,
    /// Moment's `doy`.
    pub doy: u8,
}

impl WeekRule {
    /// Moment's English locale.
    pub const ENGLISH: WeekRule = WeekRule { dow: 0, doy: 6 };

    /// The English rule with weeks starting on `dow` (0 = Sunday; taken modulo 7).
    pub fn starting_on(dow: u8) -> WeekRule {
        WeekRule {
            dow: dow % 7,
            ..WeekRule::ENGLISH
        }
    }

    /// The locale week and week-year of `date` (`w`, `gggg`).
    pub fn week_of(self, date: NaiveDate) -> (i64, i64) {
        week_of_year(date, i64::from(self.dow), i64::from(self.doy))
    }

    /// The first day of the locale week holding `date`.
    pub fn week_start(self, date: NaiveDate) -> NaiveDate {
        let back = (date.weekday().num_days_from_sunday() + 7 - u32::from(self.dow)) % 7;
        date - chrono::Days::new(u64::from(back))
    }

    /// The first day of locale week `week` of week-year `year`, if it exists.
    pub fn week_date(self, year: i64, week: i64) -> Option<NaiveDate> {
        let (dow, doy) = (i64::from(self.dow), i64::from(self.doy));
        if !(1..=weeks_in_year(year, dow, doy)).contains(&week) {
            return None;
        }
        // Moment's dayOfYearFromWeeks with the week's first weekday.
        let day_of_year = 1 + 7 * (week - 1) + first_week_offset(year, dow, doy);
        let jan1 = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, 1, 1)?;
        jan1.checked_add_signed(chrono::TimeDelta::days(day_of_year - 1))
    }
}

impl Default for WeekRule {
    fn default() -> Self {
        WeekRule::ENGLISH
    }
}

/// The vault path of the note for `date`: `folder/<formatted>.md`, the way Obsidian builds it.
///
/// A `/` in the format makes subfolders (`YYYY/MM/YYYY-MM-DD`). The result is cleaned like
/// Obsidian's `normalizePath`: `\` becomes `/`, repeated and surrounding slashes go, `.`
/// components go, non-breaking spaces become spaces, and the text is put in Unicode NFC. An
/// empty folder (or `/`) is the vault root. `.md` is added unless the name already ends with it.
/// A `..` component is refused; callers still validate the result as a vault path.
///
/// ```
/// use capvault::obsidian::moment::daily_note_path;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 1, 15).unwrap();
/// assert_eq!(daily_note_path("/Journal/", "YYYY/MM/YYYY-MM-DD", d).unwrap(),
///            "Journal/2024/01/2024-01-15.md");
/// assert_eq!(daily_note_path("", "YYYY-MM-DD", d).unwrap(), "2024-01-15.md");
/// ```
pub fn daily_note_path(folder: &str, format: &str, date: NaiveDate) -> Result<String, MomentError> {
    note_path_in(folder, format, date, WeekRule::ENGLISH)
}

/// [`daily_note_path`] for any periodic note: `date` (the period's first day) formatted with
/// the vault's week rule.
pub fn note_path_in(
    folder: &str,
    format: &str,
    date: NaiveDate,
    week: WeekRule,
) -> Result<String, MomentError> {
    let mut name = format_date_in(format, date, week)?;
    if !name.ends_with(".md") {
        name.push_str(".md");
    }
    let joined = format!("{folder}/{name}").replace('\\', "/");
    let mut parts = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(MomentError::ParentComponent),
            _ => parts.push(part),
        }
    }
    if parts.last().is_none_or(|last| *last == ".md") {
        return Err(MomentError::EmptyPath);
    }
    Ok(parts
        .join("/")
        .replace(['\u{a0}', '\u{202f}'], " ")
        .nfc()
        .collect())
}

/// Parses `input` with a Moment.js format in strict mode (`moment(input, format, true)`):
/// the whole input must match, numeric fields must have the widths Moment's strict regexes
/// allow (`YYYY` four digits, `MM`/`DD` two, `M`/`D` one or two), names are compared without
/// regard to case, and the date must exist.
///
/// Supported tokens: `YYYY`, `YY` (69-99 are 19xx), `Y`, `M`, `MM`, `MMM`, `MMMM`, `D`, `DD`,
/// `Do`, `DDD`, `DDDD`, `d`, `dd`, `ddd`, `dddd`, `H`, `HH`, `h`, `hh`, `m`, `mm`, `s`, `ss`,
/// `a`, `A`, and literal text. Any other token gives `None`, and so does a format without a
/// year (Moment would take the current year, which a pure function cannot know).
///
/// Two deliberate differences from Moment: a field given twice must agree (Moment keeps the
/// last; `YYYY/MM/YYYY-MM-DD` must not accept `2024/02/2024-01-15`), and a weekday must match the
/// date (as in Moment).
///
/// ```
/// use capvault::obsidian::moment::parse_date;
/// use chrono::NaiveDate;
///
/// let d = NaiveDate::from_ymd_opt(2024, 1, 15).unwrap();
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-01-15"), Some(d));
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-1-15"), None);
/// assert_eq!(parse_date("YYYY-MM-DD", "2024-02-30"), None);
/// ```
pub fn parse_date(format: &str, input: &str) -> Option<NaiveDate> {
    parse_date_in(format, input, WeekRule::ENGLISH)
}

/// [`parse_date`] with week tokens too, read by `week` (`gggg`, `gg`, `w`, `ww`) or ISO's
/// rule (`GGGG`, `GG`, `W`, `WW`), and quarters (`Q`): a weekly note's name gives the first
/// day of its week (`2026-W49` by `GGGG-[W]WW` is Monday 30 November 2026), a quarterly
/// note's the first day of its quarter.
///
/// ```
/// use capvault::obsidian::moment::{parse_date_in, WeekRule};
/// use chrono::NaiveDate;
///
/// let en = WeekRule::ENGLISH;
/// assert_eq!(parse_date_in("GGGG-[W]WW", "2026-W49", en), NaiveDate::from_ymd_opt(2026, 11, 30));
/// assert_eq!(parse_date_in("gggg-[W]ww", "2026-W49", en), NaiveDate::from_ymd_opt(2026, 11, 29));
/// assert_eq!(parse_date_in("YYYY-[Q]Q", "2026-Q4", en), NaiveDate::from_ymd_opt(2026, 10, 1));
/// ```
pub fn parse_date_in(format: &str, input: &str, week: WeekRule) -> Option<NaiveDate> {
    DateParser::new(format, week)?.parse(input)
}

/// A format tokenized once, to read many names with it ([`parse_date_in`] for each).
#[derive(Debug, Clone)]
pub struct DateParser {
    /// Literal text, or a field.
    pieces: Vec<(Option<Field>, String)>,
    week: WeekRule,
}

impl DateParser {
    /// `None` for an empty or too long format.
    pub fn new(format: &str, week: WeekRule) -> Option<DateParser> {
        if format.is_empty() || format.len() > MAX_FORMAT_BYTES {
            return None;
        }
        let expanded = expand_locale_formats(format);
        let pieces = tokenize(&expanded)
            .into_iter()
            .map(|piece| match piece {
                Piece::Literal(text) => (None, text.into_owned()),
                Piece::Field(field, token) => (Some(field), token.to_owned()),
            })
            .collect();
        Some(DateParser { pieces, week })
    }

    /// The date `input` names by this format, strictly, as [`parse_date_in`] reads it.
    pub fn parse(&self, input: &str) -> Option<NaiveDate> {
        if input.len() > MAX_PARSE_INPUT_BYTES || !self.may_start(input) {
            return None;
        }
        let mut parsed = Parsed::default();
        let mut rest = input;
        for (field, text) in &self.pieces {
            rest = match field {
                // Moment's strict mode rejects a literal that matched nothing, so `[]` never
                // parses.
                None if text.is_empty() => return None,
                None => rest.strip_prefix(text.as_str())?,
                Some(field) => parsed.consume(*field, rest)?,
            };
        }
        if !rest.is_empty() {
            return None;
        }
        parsed.resolve(self.week)
    }

    /// A cheap first look, for reading many names: the input must start with the format's
    /// leading literal, or with a digit where the format starts with a number (every field but
    /// names, meridiems and signed years reads digits first).
    fn may_start(&self, input: &str) -> bool {
        match self.pieces.first() {
            Some((None, text)) => input.starts_with(text.as_str()),
            Some((Some(field), _)) if field.starts_with_digit() => {
                input.as_bytes().first().is_some_and(u8::is_ascii_digit)
            }
            _ => true,
        }
    }
}

/// The date of a daily note, recognised the way Obsidian's daily-notes interface does: only the
/// last `/`-separated part of the format is matched, strictly, against the file's base name
/// (folders and a `.md` extension are stripped from `path`). So with `YYYY/MM/YYYY-MM-DD`, any
/// `2024-01-15.md` under the daily-notes folder is the note of 15 January 2024.
pub fn daily_note_date(format: &str, path: &str) -> Option<NaiveDate> {
    let name_format = format.rsplit('/').next().unwrap_or(format);
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let base = file_name.strip_suffix(".md").unwrap_or(file_name);
    parse_date(name_format, base)
}

#[cfg(test)]
mod tests;
