//! Printing a date (and time) by a tokenized format, in Moment's English locale: names,
//! ordinals, zero fills, locale and ISO weeks.

use super::*;

pub(crate) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const MONTHS_SHORT: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
pub(crate) const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
pub(super) const WEEKDAYS_SHORT: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
pub(super) const WEEKDAYS_MIN: [&str; 7] = ["Su", "Mo", "Tu", "We", "Th", "Fr", "Sa"];

pub(super) fn format_with(
    format: &str,
    date: NaiveDate,
    time: Option<NaiveTime>,
    week: WeekRule,
) -> Result<String, MomentError> {
    if format.is_empty() {
        return Err(MomentError::EmptyFormat);
    }
    if format.len() > MAX_FORMAT_BYTES {
        return Err(MomentError::FormatTooLong {
            max: MAX_FORMAT_BYTES,
        });
    }
    let expanded = expand_locale_formats(format);
    let mut out = String::with_capacity(expanded.len() * 2);
    for piece in tokenize(&expanded) {
        match piece {
            Piece::Literal(text) => out.push_str(&text),
            Piece::Field(Field::Unsupported, token) => {
                return Err(MomentError::Unsupported {
                    token: token.to_owned(),
                });
            }
            Piece::Field(field, token) if field.needs_time() => match time {
                Some(t) => out.push_str(&time_field(field, t)),
                None => {
                    return Err(MomentError::NeedsTime {
                        token: token.to_owned(),
                    });
                }
            },
            Piece::Field(field, _) => out.push_str(&date_field(field, date, week)),
        }
    }
    Ok(out)
}

/// Moment's `zeroFill`: the absolute value padded with zeros to `width`, then the sign.
pub(super) fn zero_fill(n: i64, width: usize, force_sign: bool) -> String {
    let digits = n.unsigned_abs().to_string();
    let sign = if n < 0 {
        "-"
    } else if force_sign {
        "+"
    } else {
        ""
    };
    format!(
        "{sign}{}{digits}",
        "0".repeat(width.saturating_sub(digits.len()))
    )
}

/// The English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st...
pub(super) fn ordinal(n: i64) -> String {
    let suffix = if (n % 100) / 10 == 1 {
        "th"
    } else {
        match n % 10 {
            1 => "st",
            2 => "nd",
            3 => "rd",
            _ => "th",
        }
    };
    format!("{n}{suffix}")
}

pub(super) fn date_field(field: Field, date: NaiveDate, week: WeekRule) -> String {
    use Field::*;
    let year = i64::from(date.year());
    let month = i64::from(date.month());
    let month_index = date.month0() as usize; // 0..=11
    let weekday = i64::from(date.weekday().num_days_from_sunday());
    let weekday_index = date.weekday().num_days_from_sunday() as usize; // 0..=6
    match field {
        Month => month.to_string(),
        MonthOrdinal => ordinal(month),
        Month2 => zero_fill(month, 2, false),
        MonthShort => MONTHS_SHORT[month_index].to_owned(),
        MonthLong => MONTHS[month_index].to_owned(),
        Quarter => ((month - 1) / 3 + 1).to_string(),
        QuarterOrdinal => ordinal((month - 1) / 3 + 1),
        Day => date.day().to_string(),
        DayOrdinal => ordinal(i64::from(date.day())),
        Day2 => zero_fill(i64::from(date.day()), 2, false),
        DayOfYear => date.ordinal().to_string(),
        DayOfYearOrdinal => ordinal(i64::from(date.ordinal())),
        DayOfYear3 => zero_fill(i64::from(date.ordinal()), 3, false),
        Weekday => weekday.to_string(),
        WeekdayOrdinal => ordinal(weekday),
        WeekdayMin => WEEKDAYS_MIN[weekday_index].to_owned(),
        WeekdayShort => WEEKDAYS_SHORT[weekday_index].to_owned(),
        WeekdayLong => WEEKDAYS[weekday_index].to_owned(),
        LocaleWeekday => ((weekday + 7 - i64::from(week.dow)) % 7).to_string(),
        IsoWeekday => date.weekday().number_from_monday().to_string(),
        Week => week.week_of(date).0.to_string(),
        WeekOrdinal => ordinal(week.week_of(date).0),
        Week2 => zero_fill(week.week_of(date).0, 2, false),
        IsoWeek => date.iso_week().week().to_string(),
        IsoWeekOrdinal => ordinal(i64::from(date.iso_week().week())),
        IsoWeek2 => zero_fill(i64::from(date.iso_week().week()), 2, false),
        YearSigned if year <= 9999 => zero_fill(year, 4, false),
        YearSigned => format!("+{year}"),
        Year2 => zero_fill(year % 100, 2, false),
        Year4 => zero_fill(year, 4, false),
        Year5 => zero_fill(year, 5, false),
        Year6 => zero_fill(year, 6, true),
        WeekYear2 => zero_fill(week.week_of(date).1 % 100, 2, false),
        WeekYear4 => zero_fill(week.week_of(date).1, 4, false),
        WeekYear5 => zero_fill(week.week_of(date).1, 5, false),
        IsoWeekYear2 => zero_fill(i64::from(date.iso_week().year()) % 100, 2, false),
        IsoWeekYear4 => zero_fill(i64::from(date.iso_week().year()), 4, false),
        IsoWeekYear5 => zero_fill(i64::from(date.iso_week().year()), 5, false),
        // Time fields and unsupported tokens never reach here (see `format_with`).
        _ => String::new(),
    }
}

pub(super) fn time_field(field: Field, time: NaiveTime) -> String {
    use Field::*;
    let hour = i64::from(time.hour());
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let hour_k = if hour == 0 { 24 } else { hour };
    let minute = i64::from(time.minute());
    let second = i64::from(time.second());
    // chrono puts a leap second in the nanoseconds; Moment's milliseconds stop at 999.
    let millis = i64::from(time.nanosecond() / 1_000_000).min(999);
    match field {
        MeridiemLower => if hour > 11 { "pm" } else { "am" }.to_owned(),
        MeridiemUpper => if hour > 11 { "PM" } else { "AM" }.to_owned(),
        Hour => hour.to_string(),
        Hour2 => zero_fill(hour, 2, false),
        Hour12 => hour12.to_string(),
        Hour12Padded => zero_fill(hour12, 2, false),
        HourK => hour_k.to_string(),
        HourKPadded => zero_fill(hour_k, 2, false),
        Hour12Minute => format!("{hour12}{}", zero_fill(minute, 2, false)),
        Hour12MinuteSecond => format!(
            "{hour12}{}{}",
            zero_fill(minute, 2, false),
            zero_fill(second, 2, false)
        ),
        HourMinute => format!("{hour}{}", zero_fill(minute, 2, false)),
        HourMinuteSecond => format!(
            "{hour}{}{}",
            zero_fill(minute, 2, false),
            zero_fill(second, 2, false)
        ),
        Minute => minute.to_string(),
        Minute2 => zero_fill(minute, 2, false),
        Second => second.to_string(),
        Second2 => zero_fill(second, 2, false),
        Fraction(1) => (millis / 100).to_string(),
        Fraction(2) => zero_fill(millis / 10, 2, false),
        Fraction(n) => {
            let scale = 10_i64.pow(u32::from(n.saturating_sub(3)));
            zero_fill(millis * scale, usize::from(n), false)
        }
        _ => String::new(),
    }
}

/// Day of the week of `year-01-day` (proleptic Gregorian, 0 = Sunday), for any year.
pub(super) fn weekday_of_january(year: i64, day: i64) -> i64 {
    // Sakamoto's method; January counts as month 13 of the previous year.
    let y = year - 1;
    (y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) + day).rem_euclid(7)
}

pub(super) fn days_in_year(year: i64) -> i64 {
    if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
        366
    } else {
        365
    }
}

/// Moment's `firstWeekOffset`: start of the first week minus start of the year, in days.
pub(super) fn first_week_offset(year: i64, dow: i64, doy: i64) -> i64 {
    let fwd = 7 + dow - doy;
    let fwdlw = (7 + weekday_of_january(year, fwd) - dow) % 7;
    -fwdlw + fwd - 1
}

pub(super) fn weeks_in_year(year: i64, dow: i64, doy: i64) -> i64 {
    (days_in_year(year) - first_week_offset(year, dow, doy) + first_week_offset(year + 1, dow, doy))
        / 7
}

/// Moment's `weekOfYear`: (week, week-year) for a week rule.
pub(super) fn week_of_year(date: NaiveDate, dow: i64, doy: i64) -> (i64, i64) {
    let year = i64::from(date.year());
    let offset = first_week_offset(year, dow, doy);
    let week = (i64::from(date.ordinal()) - offset - 1).div_euclid(7) + 1;
    if week < 1 {
        (week + weeks_in_year(year - 1, dow, doy), year - 1)
    } else if week > weeks_in_year(year, dow, doy) {
        (week - weeks_in_year(year, dow, doy), year + 1)
    } else {
        (week, year)
    }
}
