//! The dates and date ranges of Tasks' date filters (Filters.md, "Searching for dates").
//!
//! A date is `YYYY-MM-DD`, or relative to today: `today`, `tomorrow`, `yesterday`,
//! `N days|weeks|months|years ago`, `in N days|weeks|months|years` (N in digits or words up to
//! twenty, or `a`/`an`), a weekday (`tuesday`: the closest one, as the docs say), `next|last
//! <weekday>`, or written out: `25th May 2023`, `May 25 2023`, `14 October` (this year), `May`
//! (the 1st, this year). A range is two `YYYY-MM-DD` dates, `last|this|next
//! week|month|quarter|year` (ISO weeks, Monday to Sunday), `YYYY-Www`, `YYYY-MM`, `YYYY-Qq` or
//! `YYYY`; a single date is the range of that one day.

use chrono::{Datelike, Duration, Months, NaiveDate, Weekday};

/// An inclusive range of days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub start: NaiveDate,
    pub end: NaiveDate,
}

impl DateRange {
    fn day(d: NaiveDate) -> DateRange {
        DateRange { start: d, end: d }
    }
}

/// Parses `YYYY-MM-DD` exactly.
pub fn iso_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

fn number(word: &str) -> Option<i64> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    if word == "a" || word == "an" {
        return Some(1);
    }
    if let Some(i) = WORDS.iter().position(|w| *w == word) {
        return i64::try_from(i).ok();
    }
    if word.len() <= 5 && word.bytes().all(|c| c.is_ascii_digit()) {
        return word.parse().ok();
    }
    None
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" | "mon" => Weekday::Mon,
        "tuesday" | "tue" | "tues" => Weekday::Tue,
        "wednesday" | "wed" => Weekday::Wed,
        "thursday" | "thu" | "thurs" => Weekday::Thu,
        "friday" | "fri" => Weekday::Fri,
        "saturday" | "sat" => Weekday::Sat,
        "sunday" | "sun" => Weekday::Sun,
        _ => return None,
    })
}

fn month(word: &str) -> Option<u32> {
    const NAMES: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let w = word.trim_end_matches('.');
    NAMES
        .iter()
        .position(|n| *n == w || (w.len() >= 3 && n.starts_with(w) && w.len() <= n.len()))
        .and_then(|i| u32::try_from(i + 1).ok())
}

/// Shifts `d` by `n` units (`day`, `week`, `month`, `year`, plural allowed).
pub fn shift(d: NaiveDate, n: i64, unit: &str) -> Option<NaiveDate> {
    let unit = unit.strip_suffix('s').unwrap_or(unit);
    match unit {
        "day" => d.checked_add_signed(Duration::try_days(n)?),
        "week" => d.checked_add_signed(Duration::try_weeks(n)?),
        "month" | "year" => {
            let months = if unit == "year" {
                n.checked_mul(12)?
            } else {
                n
            };
            let m = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
            if months >= 0 {
                d.checked_add_months(m)
            } else {
                d.checked_sub_months(m)
            }
        }
        _ => None,
    }
}

/// Parses one date, absolute or relative to `today`.
pub fn parse_date(s: &str, today: NaiveDate) -> Option<NaiveDate> {
    let lower = s.trim().to_lowercase();
    if let Some(d) = iso_date(&lower) {
        return Some(d);
    }
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    match words.as_slice() {
        ["today"] | ["now"] => Some(today),
        ["tomorrow"] => today.succ_opt(),
        ["yesterday"] => today.pred_opt(),
        [n, unit, "ago"] => shift(today, -number(n)?, unit),
        ["in", n, unit] => shift(today, number(n)?, unit),
        [n, unit, "from", "now"] => shift(today, number(n)?, unit),
        ["next", w] => {
            let wd = weekday(w)?;
            let ahead = (7 + wd.num_days_from_monday() as i64
                - today.weekday().num_days_from_monday() as i64)
                % 7;
            shift(today, if ahead == 0 { 7 } else { ahead }, "day")
        }
        ["last", w] => {
            let wd = weekday(w)?;
            let back = (7 + today.weekday().num_days_from_monday() as i64
                - wd.num_days_from_monday() as i64)
                % 7;
            shift(today, -(if back == 0 { 7 } else { back }), "day")
        }
        [w] if weekday(w).is_some() => {
            let wd = weekday(w)?;
            let mut diff =
                wd.num_days_from_monday() as i64 - today.weekday().num_days_from_monday() as i64;
            if diff > 3 {
                diff -= 7;
            } else if diff < -3 {
                diff += 7;
            }
            shift(today, diff, "day")
        }
        _ => written_date(&words, today),
    }
}

/// `25th May 2023`, `May 25 2023`, `14 October`, `May`.
fn written_date(words: &[&str], today: NaiveDate) -> Option<NaiveDate> {
    let mut day = None;
    let mut mon = None;
    let mut year = None;
    for w in words {
        if let Some(m) = month(w) {
            if mon.replace(m).is_some() {
                return None;
            }
            continue;
        }
        let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &w[digits.len()..];
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
            return None;
        }
        if digits.len() == 4 && suffix.is_empty() {
            if year.replace(digits.parse::<i32>().ok()?).is_some() {
                return None;
            }
        } else if digits.len() <= 2 {
            if day.replace(digits.parse::<u32>().ok()?).is_some() {
                return None;
            }
        } else {
            return None;
        }
    }
    NaiveDate::from_ymd_opt(year.unwrap_or(today.year()), mon?, day.unwrap_or(1))
}

/// Parses a date range, or a single date as a one-day range.
pub fn parse_range(s: &str, today: NaiveDate) -> Option<DateRange> {
    let lower = s.trim().to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    match words.as_slice() {
        [
            rel @ ("last" | "this" | "next"),
            unit @ ("week" | "month" | "quarter" | "year"),
        ] => {
            let n = match *rel {
                "last" => -1,
                "this" => 0,
                _ => 1,
            };
            relative_range(today, n, unit)
        }
        [a, b] => match (iso_date(a), iso_date(b)) {
            (Some(x), Some(y)) => Some(DateRange {
                start: x.min(y),
                end: x.max(y),
            }),
            (Some(x), None) | (None, Some(x)) => Some(DateRange::day(x)),
            (None, None) => parse_date(&lower, today).map(DateRange::day),
        },
        [one] => numbered_range(one).or_else(|| parse_date(one, today).map(DateRange::day)),
        _ => parse_date(&lower, today).map(DateRange::day),
    }
}

fn relative_range(today: NaiveDate, n: i64, unit: &str) -> Option<DateRange> {
    match unit {
        "week" => {
            let monday = shift(
                today,
                -(today.weekday().num_days_from_monday() as i64),
                "day",
            )?;
            let start = shift(monday, n, "week")?;
            Some(DateRange {
                start,
                end: shift(start, 6, "day")?,
            })
        }
        "month" => {
            let first = today.with_day(1)?;
            let start = shift(first, n, "month")?;
            Some(DateRange {
                start,
                end: shift(start, 1, "month")?.pred_opt()?,
            })
        }
        "quarter" => {
            let q0 = (today.month0() / 3) * 3 + 1;
            let first = NaiveDate::from_ymd_opt(today.year(), q0, 1)?;
            let start = shift(first, n * 3, "month")?;
            Some(DateRange {
                start,
                end: shift(start, 3, "month")?.pred_opt()?,
            })
        }
        _ => {
            let start =
                NaiveDate::from_ymd_opt(today.year().checked_add(i32::try_from(n).ok()?)?, 1, 1)?;
            Some(DateRange {
                start,
                end: NaiveDate::from_ymd_opt(start.year(), 12, 31)?,
            })
        }
    }
}

/// `YYYY-Www`, `YYYY-MM`, `YYYY-Qq`, `YYYY`.
fn numbered_range(s: &str) -> Option<DateRange> {
    let b = s.as_bytes();
    let year: i32 = if b.len() >= 4 && b[..4].iter().all(u8::is_ascii_digit) {
        s.get(..4)?.parse().ok()?
    } else {
        return None;
    };
    let rest = s.get(4..)?;
    if rest.is_empty() {
        return Some(DateRange {
            start: NaiveDate::from_ymd_opt(year, 1, 1)?,
            end: NaiveDate::from_ymd_opt(year, 12, 31)?,
        });
    }
    let two = |t: &str| -> Option<u32> {
        (t.len() == 2 && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    if let Some(w) = rest.strip_prefix("-w") {
        let start = NaiveDate::from_isoywd_opt(year, two(w)?, Weekday::Mon)?;
        return Some(DateRange {
            start,
            end: shift(start, 6, "day")?,
        });
    }
    if let Some(q) = rest.strip_prefix("-q") {
        let q: u32 = (q.len() == 1).then(|| q.parse().ok()).flatten()?;
        if !(1..=4).contains(&q) {
            return None;
        }
        let start = NaiveDate::from_ymd_opt(year, (q - 1) * 3 + 1, 1)?;
        return Some(DateRange {
            start,
            end: shift(start, 3, "month")?.pred_opt()?,
        });
    }
    let m = two(rest.strip_prefix('-')?)?;
    let start = NaiveDate::from_ymd_opt(year, m, 1)?;
    Some(DateRange {
        start,
        end: shift(start, 1, "month")?.pred_opt()?,
    })
}
