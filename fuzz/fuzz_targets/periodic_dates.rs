//! Fuzzes periodic notes' dates: Moment formats and note names read back (`parse_date_in`, with
//! week and quarter tokens), the date words of `get_periodic_note` (`parse_date_words`) and the
//! Periodic Notes plugin's template variables (`fill_period_variables`), on hostile text.
//!
//! The first five bytes choose a day (within about ±5,800 years of 2000) and the week's first
//! day; the rest is `format\nwords\ntemplate`. Nothing may panic or hang; a filled template stays
//! within its bound; and with the plugin's default formats, a note's name read back names the
//! same period, whatever the day and the week start.

#![no_main]

use capvault::obsidian::moment::{WeekRule, format_date_in, parse_date_in};
use capvault::obsidian::periodic::{
    MAX_FILLED_BYTES, Period, TemplateDates, fill_period_variables, parse_date_words,
};
use chrono::{Datelike, NaiveDate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let offset = i32::from_le_bytes([data[0], data[1], data[2], data[3]]) % 2_100_000;
    let Some(day) = NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.checked_add_signed(chrono::TimeDelta::days(i64::from(offset))))
    else {
        return;
    };
    let week = WeekRule::starting_on(data[4]);
    let text = String::from_utf8_lossy(&data[5..]);
    let mut parts = text.splitn(3, '\n');
    let (format, words, template) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );

    // Any format: formatting and reading back must not panic.
    if let Ok(name) = format_date_in(format, day, week) {
        let _ = parse_date_in(format, &name, week);
    }
    let _ = parse_date_in(format, words, week);
    for iso in [false, true] {
        if let Ok(named) = parse_date_words(words, day, week, iso) {
            let period = named.period.unwrap_or_default();
            let _ = period.end(named.date, week);
        }
    }

    // The plugin's defaults: the name of the period holding `day` reads back as its first day
    // (ISO names as a day of the same ISO week).
    for (period, f) in [
        (Period::Day, "YYYY-MM-DD"),
        (Period::Week, "gggg-[W]ww"),
        (Period::Week, "GGGG-[W]WW"),
        (Period::Month, "YYYY-MM"),
        (Period::Quarter, "YYYY-[Q]Q"),
        (Period::Year, "YYYY"),
    ] {
        let start = period.start(day, week);
        let Ok(name) = format_date_in(f, start, week) else {
            continue;
        };
        // Moment's `YYYY` prints four digits only for years 0 to 9999.
        if !(1..=9999).contains(&start.year()) {
            continue;
        }
        let back = parse_date_in(f, &name, week);
        if f.contains('G') {
            assert_eq!(back.map(|d| d.iso_week()), Some(start.iso_week()), "{f} {name}");
        } else {
            assert_eq!(back, Some(start), "{f} {name} {week:?}");
        }
    }

    let dates = TemplateDates {
        period: Period::ALL[usize::from(data[4]) % 5],
        start: day,
        now: chrono::NaiveTime::MIN,
        format: if format.is_empty() { "YYYY" } else { format },
        title: words,
        week,
    };
    if let Ok(filled) = fill_period_variables(template, &dates) {
        // The bound is checked after each variable; one variable adds at most its format's
        // output (a 1 KiB format, about ten bytes a byte) beyond it.
        assert!(filled.len() <= MAX_FILLED_BYTES + template.len() + 64 * 1024);
    }
});
