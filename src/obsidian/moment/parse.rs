//! Moment's strict parse of a note name by a format: each token read, checked, and the date
//! they name built and checked against the weekday and day-of-year tokens.

use super::*;

/// The fields a strict parse has collected so far.
#[derive(Debug, Default)]
pub(super) struct Parsed {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<u32>,
    /// 0 = Sunday.
    weekday: Option<u32>,
    hour: Option<u32>,
    hour_is_12h: bool,
    minute: Option<u32>,
    second: Option<u32>,
    quarter: Option<u32>,
    /// Locale week (`w`) and week-year (`gggg`).
    week: Option<u32>,
    week_year: Option<i64>,
    /// ISO week (`W`) and week-year (`GGGG`).
    iso_week: Option<u32>,
    iso_week_year: Option<i64>,
}

/// Stores a field, refusing a second, different value.
pub(super) fn set<T: PartialEq>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(old) if *old != value => None,
        _ => {
            *slot = Some(value);
            Some(())
        }
    }
}

/// Splits off between `min` and `max` ASCII digits (as many as there are, greedily).
pub(super) fn digits(s: &str, min: usize, max: usize) -> Option<(u32, &str)> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n < min {
        return None;
    }
    // At most 9 digits, all ASCII: always fits a u32.
    let value = s[..n].parse().ok()?;
    Some((value, &s[n..]))
}

/// Moment's `matchWord` (English letters, `'`, and the non-ASCII ranges it lists, after
/// optional digits), then a case-insensitive comparison with `names`.
pub(super) fn name(s: &str, names: &[&str]) -> Option<(usize, usize)> {
    let lead = s.bytes().take(256).take_while(u8::is_ascii_digit).count();
    let word_len: usize = s[lead..]
        .chars()
        .take(256)
        .take_while(|&c| is_word_char(c))
        .map(char::len_utf8)
        .sum();
    if word_len == 0 {
        return None;
    }
    let word = &s[..lead + word_len];
    let index = names.iter().position(|n| n.eq_ignore_ascii_case(word))?;
    Some((index, word.len()))
}

pub(super) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphabetic()
        || c == '\''
        || matches!(c, '\u{a0}'..='\u{5ff}' | '\u{700}'..='\u{d7ff}' | '\u{f900}'..='\u{fdcf}'
            | '\u{fdf0}'..='\u{ff07}' | '\u{ff10}'..='\u{ffef}')
}

impl Parsed {
    /// Matches one field at the start of `s`; returns the rest.
    pub(super) fn consume<'s>(&mut self, field: Field, s: &'s str) -> Option<&'s str> {
        use Field::*;
        let (value, rest) = match field {
            Year4 => {
                let (y, rest) = digits(s, 4, 4)?;
                set(&mut self.year, i64::from(y))?;
                return Some(rest);
            }
            Year2 => {
                let (y, rest) = digits(s, 2, 2)?;
                let y = i64::from(y);
                set(&mut self.year, y + if y > 68 { 1900 } else { 2000 })?;
                return Some(rest);
            }
            YearSigned => {
                let (negative, unsigned) = match s.as_bytes().first() {
                    Some(b'-') => (true, &s[1..]),
                    Some(b'+') => (false, &s[1..]),
                    _ => (false, s),
                };
                // chrono's years have at most six digits; more cannot be a valid date.
                let (y, rest) = digits(unsigned, 1, 7)?;
                if rest.starts_with(|c: char| c.is_ascii_digit()) {
                    return None;
                }
                let y = i64::from(y);
                set(&mut self.year, if negative { -y } else { y })?;
                return Some(rest);
            }
            WeekYear4 | IsoWeekYear4 => {
                let (y, rest) = digits(s, 4, 4)?;
                let slot = if field == WeekYear4 {
                    &mut self.week_year
                } else {
                    &mut self.iso_week_year
                };
                set(slot, i64::from(y))?;
                return Some(rest);
            }
            WeekYear2 | IsoWeekYear2 => {
                let (y, rest) = digits(s, 2, 2)?;
                let y = i64::from(y);
                let slot = if field == WeekYear2 {
                    &mut self.week_year
                } else {
                    &mut self.iso_week_year
                };
                set(slot, y + if y > 68 { 1900 } else { 2000 })?;
                return Some(rest);
            }
            Quarter => digits(s, 1, 1)?,
            Month | Day | Weekday | Hour | Hour12 | Minute | Second | Week | IsoWeek => {
                digits(s, 1, 2)?
            }
            Month2 | Day2 | Hour2 | Hour12Padded | Minute2 | Second2 | Week2 | IsoWeek2 => {
                digits(s, 2, 2)?
            }
            DayOfYear => digits(s, 1, 3)?,
            DayOfYear3 => digits(s, 3, 3)?,
            DayOrdinal => {
                let (day, rest) = digits(s, 1, 2)?;
                // `\d{1,2}(th|st|nd|rd)`; when two digits are not followed by a suffix, the
                // regex backtracks to one digit, which then cannot be followed by one either.
                let rest = ["th", "st", "nd", "rd"]
                    .iter()
                    .find_map(|suffix| rest.strip_prefix(suffix))?;
                set(&mut self.day, day)?;
                return Some(rest);
            }
            MonthShort | MonthLong => {
                let names: &[&str] = if field == MonthShort {
                    &MONTHS_SHORT
                } else {
                    &MONTHS
                };
                let (index, len) = name(s, names)?;
                // index < 12
                set(&mut self.month, index as u32 + 1)?;
                return Some(&s[len..]);
            }
            WeekdayMin | WeekdayShort | WeekdayLong => {
                let names: &[&str] = match field {
                    WeekdayMin => &WEEKDAYS_MIN,
                    WeekdayShort => &WEEKDAYS_SHORT,
                    _ => &WEEKDAYS,
                };
                let (index, len) = name(s, names)?;
                // index < 7
                set(&mut self.weekday, index as u32)?;
                return Some(&s[len..]);
            }
            MeridiemLower | MeridiemUpper => {
                // English `meridiemParse`: /[ap]\.?m?\.?/i. The time is not kept, so whether it
                // was am or pm does not matter.
                let rest = s.strip_prefix(['a', 'A', 'p', 'P'])?;
                let rest = rest.strip_prefix('.').unwrap_or(rest);
                let rest = rest.strip_prefix(['m', 'M']).unwrap_or(rest);
                return Some(rest.strip_prefix('.').unwrap_or(rest));
            }
            _ => return None,
        };
        match field {
            Month | Month2 => set(&mut self.month, value)?,
            Day | Day2 => set(&mut self.day, value)?,
            DayOfYear | DayOfYear3 => set(&mut self.day_of_year, value)?,
            Weekday => set(&mut self.weekday, value)?,
            Quarter => set(&mut self.quarter, value)?,
            Week | Week2 => set(&mut self.week, value)?,
            IsoWeek | IsoWeek2 => set(&mut self.iso_week, value)?,
            Hour | Hour2 => set(&mut self.hour, value)?,
            Hour12 | Hour12Padded => {
                self.hour_is_12h = true;
                set(&mut self.hour, value)?
            }
            Minute | Minute2 => set(&mut self.minute, value)?,
            Second | Second2 => set(&mut self.second, value)?,
            _ => return None,
        }
        Some(rest)
    }

    /// Turns the collected fields into a date, with Moment's overflow checks. Weeks are read
    /// by `week`'s rule (`w`, `gggg`) or ISO's (`W`, `GGGG`); a week without a weekday is its
    /// first day, and a week without a week-year takes the year (`YYYY-[W]ww` parses, as in
    /// Moment). A quarter is its first month.
    pub(super) fn resolve(&self, week: WeekRule) -> Option<NaiveDate> {
        if self.week.is_some() || self.iso_week.is_some() {
            return self.resolve_week(week);
        }
        if self.week_year.is_some() || self.iso_week_year.is_some() {
            // A week-year alone names no day.
            return None;
        }
        if let Some(q) = self.quarter {
            if !(1..=4).contains(&q) {
                return None;
            }
            let first = (q - 1) * 3 + 1;
            if self.month.is_some_and(|m| !(first..first + 3).contains(&m)) {
                return None;
            }
        }
        let year = i32::try_from(self.year?).ok()?;
        // A weekday without a month or day: Moment builds the date from the *current* week
        // (ignoring even `DDDD`), which a pure function cannot reproduce.
        if self.weekday.is_some() && self.month.is_none() && self.day.is_none() {
            return None;
        }
        let mut date = match self.day_of_year {
            Some(doy) => {
                let date = NaiveDate::from_yo_opt(year, doy)?;
                if self.month.is_some_and(|m| m != date.month())
                    || self.day.is_some_and(|d| d != date.day())
                {
                    return None;
                }
                date
            }
            None => {
                let month = self
                    .month
                    .or(self.quarter.map(|q| (q - 1) * 3 + 1))
                    .unwrap_or(1);
                NaiveDate::from_ymd_opt(year, month, self.day.unwrap_or(1))?
            }
        };
        if self
            .weekday
            .is_some_and(|w| w != date.weekday().num_days_from_sunday())
        {
            return None;
        }
        let minute = self.minute.unwrap_or(0);
        let second = self.second.unwrap_or(0);
        if minute > 59 || second > 59 {
            return None;
        }
        match self.hour {
            Some(h) if self.hour_is_12h && !(1..=12).contains(&h) => return None,
            // Moment reads 24:00:00 as midnight at the end of the day.
            Some(24) if minute == 0 && second == 0 => date = date.succ_opt()?,
            Some(h) if h > 23 => return None,
            _ => {}
        }
        Some(date)
    }

    /// A date named by week fields (and perhaps a weekday); day and month fields may not be
    /// mixed in.
    fn resolve_week(&self, rule: WeekRule) -> Option<NaiveDate> {
        if self.month.is_some() || self.day.is_some() || self.day_of_year.is_some() {
            return None;
        }
        if self.quarter.is_some() || (self.week.is_some() && self.iso_week.is_some()) {
            return None;
        }
        let start = if let Some(w) = self.iso_week {
            let year = i32::try_from(self.iso_week_year.or(self.year)?).ok()?;
            NaiveDate::from_isoywd_opt(year, w, chrono::Weekday::Mon)?
        } else {
            let year = self.week_year.or(self.year)?;
            rule.week_date(year, i64::from(self.week?))?
        };
        match self.weekday {
            None => Some(start),
            Some(w) => {
                let offset = (w + 7 - start.weekday().num_days_from_sunday()) % 7;
                start.checked_add_days(chrono::Days::new(u64::from(offset)))
            }
        }
    }
}
