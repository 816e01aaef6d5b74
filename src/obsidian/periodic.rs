//! Periodic notes: the day, week, month, quarter and year a note stands for, as the Periodic
//! Notes plugin counts them, and the dates a person names them by (`this week`, `last month`,
//! `2026-W49`, `2026-Q4`).
//!
//! A period is identified by its first day: a week by the first day of its locale week (the
//! vault's [`WeekRule`]), a month, quarter or year by its first day. The plugin names a note by
//! formatting that first day (`moment(date).startOf("week").format(format)`), so a weekly
//! format written with ISO tokens (`GGGG-[W]WW`) in a vault whose weeks start on Sunday names
//! each Sunday-to-Saturday week by the ISO week of its Sunday, exactly as the plugin does.

use chrono::{Datelike, Days, Months, NaiveDate};
use serde::{Deserialize, Serialize};

use super::moment::{WEEKDAYS, WeekRule};

/// A kind of periodic note.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// A daily note.
    #[default]
    #[serde(alias = "daily")]
    Day,
    /// A weekly note.
    #[serde(alias = "weekly")]
    Week,
    /// A monthly note.
    #[serde(alias = "monthly")]
    Month,
    /// A quarterly note.
    #[serde(alias = "quarterly")]
    Quarter,
    /// A yearly note.
    #[serde(alias = "yearly")]
    Year,
}

impl Period {
    /// Every period, shortest first.
    pub const ALL: [Period; 5] = [
        Period::Day,
        Period::Week,
        Period::Month,
        Period::Quarter,
        Period::Year,
    ];

    /// The name used in arguments and replies: `day`, `week`, `month`, `quarter`, `year`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Quarter => "quarter",
            Period::Year => "year",
        }
    }

    /// The adjective: `daily`, `weekly`, `monthly`, `quarterly`, `yearly`.
    pub fn adjective(self) -> &'static str {
        match self {
            Period::Day => "daily",
            Period::Week => "weekly",
            Period::Month => "monthly",
            Period::Quarter => "quarterly",
            Period::Year => "yearly",
        }
    }

    fn from_word(word: &str) -> Option<Period> {
        Some(match word {
            "day" => Period::Day,
            "week" => Period::Week,
            "month" => Period::Month,
            "quarter" => Period::Quarter,
            "year" => Period::Year,
            _ => return None,
        })
    }

    /// The first day of the period holding `date`.
    pub fn start(self, date: NaiveDate, week: WeekRule) -> NaiveDate {
        match self {
            Period::Day => date,
            Period::Week => week.week_start(date),
            Period::Month => date.with_day(1).unwrap_or(date),
            Period::Quarter => {
                NaiveDate::from_ymd_opt(date.year(), date.month0() / 3 * 3 + 1, 1).unwrap_or(date)
            }
            Period::Year => NaiveDate::from_ymd_opt(date.year(), 1, 1).unwrap_or(date),
        }
    }

    /// The first day of the period `n` periods after (or, negative, before) the one holding
    /// `date`; `None` past chrono's calendar.
    pub fn shift(self, date: NaiveDate, n: i64, week: WeekRule) -> Option<NaiveDate> {
        let start = self.start(date, week);
        let (days, months) = match self {
            Period::Day => (n, 0),
            Period::Week => (n.checked_mul(7)?, 0),
            Period::Month => (0, n),
            Period::Quarter => (0, n.checked_mul(3)?),
            Period::Year => (0, n.checked_mul(12)?),
        };
        let magnitude = |v: i64| u32::try_from(v.unsigned_abs()).ok();
        if days != 0 {
            let d = Days::new(days.unsigned_abs());
            return if days > 0 {
                start.checked_add_days(d)
            } else {
                start.checked_sub_days(d)
            };
        }
        let m = Months::new(magnitude(months)?);
        if months >= 0 {
            start.checked_add_months(m)
        } else {
            start.checked_sub_months(m)
        }
    }

    /// The last day of the period holding `date`.
    pub fn end(self, date: NaiveDate, week: WeekRule) -> Option<NaiveDate> {
        self.shift(date, 1, week)?.pred_opt()
    }
}

/// What a date argument named: a day, and the period the words chose when they chose one
/// (`this week` chooses `week`; `2026-12-03` and `today` choose none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedDate {
    /// The day named, or the first day of the span named.
    pub date: NaiveDate,
    /// The period the words name, if any.
    pub period: Option<Period>,
}

/// Why a date argument was refused. The argument is quoted back only when it looks like a
/// date gone wrong (letters, digits, spaces and `-`, at most 32 bytes): anything else, a path
/// above all, is never echoed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a date: use YYYY-MM-DD, YYYY-Www, YYYY-Qn, YYYY-MM, YYYY, today, yesterday, \
     tomorrow, or this/last/next week, month, quarter or year",
    shown(.0)
)]
pub struct DateWordsError(pub String);

fn shown(text: &str) -> String {
    let plain = text.len() <= 32
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b' ' || b == b'-');
    if plain {
        format!("`{text}`")
    } else {
        "the value".to_owned()
    }
}

/// Longest date argument read.
const MAX_WORDS_BYTES: usize = 64;

/// Reads a date argument relative to `today`: `today`, `yesterday`, `tomorrow`; `this`,
/// `last`, `next` or `previous` followed by `day`, `week`, `month`, `quarter` or `year`;
/// `YYYY-MM-DD`; `YYYY-Www` (a week numbered by the vault's weekly notes: ISO weeks when
/// `iso_weeks`, else by `week`); `YYYY-Qn`; `YYYY-MM`; `YYYY`. Case and surrounding spaces do
/// not matter.
pub fn parse_date_words(
    text: &str,
    today: NaiveDate,
    week: WeekRule,
    iso_weeks: bool,
) -> Result<NamedDate, DateWordsError> {
    let err = || DateWordsError(text.to_owned());
    if text.len() > MAX_WORDS_BYTES {
        return Err(err());
    }
    let lower = text.trim().to_ascii_lowercase();
    let day = |date: NaiveDate| NamedDate { date, period: None };
    match lower.as_str() {
        "" | "today" => return Ok(day(today)),
        "yesterday" => return today.pred_opt().map(day).ok_or_else(err),
        "tomorrow" => return today.succ_opt().map(day).ok_or_else(err),
        _ => {}
    }
    let words: Vec<&str> = lower.split_whitespace().collect();
    if let [which, unit] = words[..] {
        let offset = match which {
            "this" | "current" => 0,
            "last" | "previous" => -1,
            "next" => 1,
            _ => return Err(err()),
        };
        let period = Period::from_word(unit).ok_or_else(err)?;
        let date = period.shift(today, offset, week).ok_or_else(err)?;
        return Ok(NamedDate {
            date,
            period: Some(period),
        });
    }
    numeric_date(&lower, week, iso_weeks).ok_or_else(err)
}

/// `YYYY-MM-DD`, `YYYY-Www`, `YYYY-Qn`, `YYYY-MM` or `YYYY`.
fn numeric_date(text: &str, week: WeekRule, iso_weeks: bool) -> Option<NamedDate> {
    let number = |s: &str, width: std::ops::RangeInclusive<usize>| -> Option<u32> {
        (width.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let parts: Vec<&str> = text.split('-').collect();
    let year = i32::try_from(number(parts.first()?, 4..=4)?).ok()?;
    let named = |date: NaiveDate, period| Some(NamedDate { date, period });
    match parts[1..] {
        [] => named(NaiveDate::from_ymd_opt(year, 1, 1)?, Some(Period::Year)),
        [p] if p.starts_with('w') => {
            let w = number(&p[1..], 1..=2)?;
            let date = if iso_weeks {
                NaiveDate::from_isoywd_opt(year, w, chrono::Weekday::Mon)?
            } else {
                week.week_date(i64::from(year), i64::from(w))?
            };
            named(date, Some(Period::Week))
        }
        [p] if p.starts_with('q') => {
            let q = number(&p[1..], 1..=1).filter(|q| (1..=4).contains(q))?;
            named(
                NaiveDate::from_ymd_opt(year, (q - 1) * 3 + 1, 1)?,
                Some(Period::Quarter),
            )
        }
        [m] => named(
            NaiveDate::from_ymd_opt(year, number(m, 2..=2)?, 1)?,
            Some(Period::Month),
        ),
        [m, d] => named(
            NaiveDate::from_ymd_opt(year, number(m, 2..=2)?, number(d, 2..=2)?)?,
            None,
        ),
        _ => None,
    }
}

/// True when a Moment format numbers weeks the ISO way (`W`, `WW`, `GG`, `GGGG` outside
/// `[brackets]`), so `2026-W49` should be read as an ISO week.
pub fn uses_iso_weeks(format: &str) -> bool {
    has_letter(format, &['W', 'G'])
}

/// True when a Moment format numbers weeks at all (`w`, `W`, `g`, `G` outside brackets).
pub fn numbers_weeks(format: &str) -> bool {
    has_letter(format, &['w', 'W', 'g', 'G'])
}

fn has_letter(format: &str, letters: &[char]) -> bool {
    let mut literal = false;
    for c in format.chars() {
        match c {
            '[' => literal = true,
            ']' => literal = false,
            c if !literal && letters.contains(&c) => return true,
            _ => {}
        }
    }
    false
}

/// A week rule from the `weekStart` setting (`sunday` … `saturday`; `locale` or anything
/// else: the English locale Obsidian ships).
pub fn week_rule(week_start: &str) -> WeekRule {
    match WEEKDAYS
        .iter()
        .position(|d| d.eq_ignore_ascii_case(week_start.trim()))
    {
        // position < 7
        Some(i) => WeekRule::starting_on(i as u8),
        None => WeekRule::ENGLISH,
    }
}

/// What a periodic note's template is filled for.
#[derive(Debug, Clone)]
pub struct TemplateDates<'a> {
    /// The note's period.
    pub period: Period,
    /// The period's first day.
    pub start: NaiveDate,
    /// The time of day the note is created.
    pub now: chrono::NaiveTime,
    /// The period's name format (the default for `{{yesterday}}`, `{{month}}`...).
    pub format: &'a str,
    /// The note's name, for `{{date}}` and `{{title}}` in the plugin's rules.
    pub title: &'a str,
    /// The vault's week rule.
    pub week: WeekRule,
}

pub use super::template::MAX_FILLED_BYTES;

/// Fills the Periodic Notes plugin's template variables, as its documentation and code
/// describe them, leaving every other `{{…}}` as written (for the Templates rules after):
///
/// - `{{date}}` and `{{title}}`: the note's name; `{{time}}`: the time of creation, `HH:mm`.
/// - `{{date±N<unit>:FORMAT}}`, `{{time±N<unit>:FORMAT}}`: the period's first day at the time of
///   creation, moved by Moment's unit (`y` years, `w` weeks, `d` days, `h` hours, `m`
///   *minutes*, `s` seconds; `q` is not a Moment unit and moves nothing, as in the plugin),
///   printed with FORMAT or the note's format.
/// - Daily notes: `{{yesterday}}`, `{{tomorrow}}` in the note's format.
/// - Weekly notes: `{{sunday:FORMAT}}` … `{{saturday:FORMAT}}`: that day of the note's week.
/// - Monthly, quarterly, yearly notes: `{{month…}}`, `{{quarter…}}`, `{{year…}}` with the
///   same offset and format as `{{date…}}`: the first day of the month, quarter or year.
pub fn fill_period_variables(
    template: &str,
    t: &TemplateDates<'_>,
) -> Result<String, super::moment::MomentError> {
    let filled = super::template::fill_variables(template, MAX_FILLED_BYTES, |var| {
        expand_variable(var, t, super::moment::format_datetime_in)
    })?;
    if filled.cut {
        return Err(super::moment::MomentError::FormatTooLong {
            max: MAX_FILLED_BYTES,
        });
    }
    Ok(filled.text)
}

type FormatFn =
    fn(&str, chrono::NaiveDateTime, WeekRule) -> Result<String, super::moment::MomentError>;

/// One variable's text, or `None` to leave it as written.
fn expand_variable(
    var: &str,
    t: &TemplateDates<'_>,
    format: FormatFn,
) -> Result<Option<String>, super::moment::MomentError> {
    let trimmed = var.trim();
    let name_len = trimmed.bytes().take_while(u8::is_ascii_alphabetic).count();
    let name = trimmed[..name_len].to_ascii_lowercase();
    let tail = trimmed[name_len..].trim_start();
    let (offset, tail) = split_offset(tail);
    let tail = tail.trim_start();
    let fmt = match tail.strip_prefix(':') {
        Some(f) => Some(f.trim()),
        None if tail.is_empty() => None,
        None => return Ok(None),
    };
    let at = |date: NaiveDate| date.and_time(t.now);
    let print = |when: chrono::NaiveDateTime, f: Option<&str>| -> Result<Option<String>, _> {
        let moved = match offset {
            Some((n, unit)) => shift_datetime(when, n, unit).unwrap_or(when),
            None => when,
        };
        format(f.unwrap_or(t.format), moved, t.week).map(Some)
    };
    match name.as_str() {
        "title" if offset.is_none() && fmt.is_none() => Ok(Some(t.title.to_owned())),
        "date" if offset.is_none() && fmt.is_none() => Ok(Some(t.title.to_owned())),
        "time" if offset.is_none() && fmt.is_none() => {
            format("HH:mm", at(t.start), t.week).map(Some)
        }
        "date" | "time" => print(at(t.start), fmt),
        "yesterday" | "tomorrow"
            if t.period == Period::Day && offset.is_none() && fmt.is_none() =>
        {
            let day = if name == "yesterday" {
                t.start.pred_opt()
            } else {
                t.start.succ_opt()
            };
            match day {
                Some(d) => format(t.format, at(d), t.week).map(Some),
                None => Ok(None),
            }
        }
        "month" | "quarter" | "year" if Period::from_word(&name) == Some(t.period) => {
            print(at(t.period.start(t.start, t.week)), fmt)
        }
        day if t.period == Period::Week && offset.is_none() => {
            let Some(f) = fmt else { return Ok(None) };
            let Some(index) = WEEKDAYS.iter().position(|d| d.eq_ignore_ascii_case(day)) else {
                return Ok(None);
            };
            // index < 7
            let from_start = (index as u64 + 7 - u64::from(t.week.dow)) % 7;
            let date = t.week.week_start(t.start) + Days::new(from_start);
            format(f, at(date), t.week).map(Some)
        }
        _ => Ok(None),
    }
}

/// Splits `±N<unit>` off the front (N at most 6 digits).
fn split_offset(s: &str) -> (Option<(i64, u8)>, &str) {
    let bytes = s.as_bytes();
    let sign = match bytes.first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return (None, s),
    };
    let digits = bytes[1..]
        .iter()
        .take(7)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let unit = bytes.get(1 + digits).copied();
    match unit {
        Some(u @ (b'y' | b'q' | b'm' | b'w' | b'd' | b'h' | b's')) if (1..=6).contains(&digits) => {
            let n: i64 = s[1..1 + digits].parse().unwrap_or(0);
            (Some((sign * n, u)), &s[2 + digits..])
        }
        _ => (None, s),
    }
}

/// Moment's `add(n, unit)` for the units the plugin's pattern allows.
fn shift_datetime(when: chrono::NaiveDateTime, n: i64, unit: u8) -> Option<chrono::NaiveDateTime> {
    use chrono::TimeDelta;
    match unit {
        b'y' => {
            let months = Months::new(u32::try_from(n.unsigned_abs().checked_mul(12)?).ok()?);
            if n >= 0 {
                when.checked_add_months(months)
            } else {
                when.checked_sub_months(months)
            }
        }
        b'w' => when.checked_add_signed(TimeDelta::try_days(n.checked_mul(7)?)?),
        b'd' => when.checked_add_signed(TimeDelta::try_days(n)?),
        b'h' => when.checked_add_signed(TimeDelta::try_hours(n)?),
        b'm' => when.checked_add_signed(TimeDelta::try_minutes(n)?),
        b's' => when.checked_add_signed(TimeDelta::try_seconds(n)?),
        // `q` is not one of Moment's unit names: the plugin's date does not move.
        _ => Some(when),
    }
}

#[cfg(test)]
mod tests;
