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
            Month | Day | Weekday | Hour | Hour12 | Minute | Second => digits(s, 1, 2)?,
            Month2 | Day2 | Hour2 | Hour12Padded | Minute2 | Second2 => digits(s, 2, 2)?,
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

    /// Turns the collected fields into a date, with Moment's overflow checks.
    pub(super) fn resolve(&self) -> Option<NaiveDate> {
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
            None => NaiveDate::from_ymd_opt(year, self.month.unwrap_or(1), self.day.unwrap_or(1))?,
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
}
