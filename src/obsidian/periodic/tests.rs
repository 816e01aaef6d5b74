//! Dates worked by hand (calendars checked against Python's `isocalendar`), around year ends,
//! ISO week 53 and week starts other than Sunday, and the plugin's documented defaults.

use super::*;
use crate::obsidian::moment::{format_date_in, parse_date_in};

fn d(y: i32, m: u32, day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, day).unwrap()
}

const EN: WeekRule = WeekRule::ENGLISH;
fn monday() -> WeekRule {
    week_rule("monday")
}

/// The name the plugin gives the note of `period` holding `date`: the period's first day,
/// formatted.
fn name(period: Period, format: &str, date: NaiveDate, week: WeekRule) -> String {
    format_date_in(format, period.start(date, week), week).unwrap()
}

#[test]
fn the_plugins_default_formats_name_each_period_by_its_first_day() {
    let today = d(2026, 12, 3); // a Thursday
    assert_eq!(name(Period::Day, "YYYY-MM-DD", today, EN), "2026-12-03");
    assert_eq!(name(Period::Week, "gggg-[W]ww", today, EN), "2026-W49");
    assert_eq!(name(Period::Month, "YYYY-MM", today, EN), "2026-12");
    assert_eq!(name(Period::Quarter, "YYYY-[Q]Q", today, EN), "2026-Q4");
    assert_eq!(name(Period::Year, "YYYY", today, EN), "2026");
    // "If you use DD in the week format, this will refer to first day of the week".
    assert_eq!(name(Period::Week, "YYYY-MM-DD", today, EN), "2026-11-29");
    assert_eq!(
        name(Period::Week, "YYYY-MM-DD", today, monday()),
        "2026-11-30"
    );
}

#[test]
fn iso_week_53_is_named_when_weeks_start_on_monday_and_not_when_they_start_on_sunday() {
    // 2026 starts on a Thursday, so it has an ISO week 53: Monday 28 December to 3 January.
    let new_years_eve = d(2026, 12, 31);
    assert_eq!(
        name(Period::Week, "GGGG-[W]WW", new_years_eve, monday()),
        "2026-W53"
    );
    // With Sunday weeks the plugin formats Sunday 27 December, which is in ISO week 52.
    assert_eq!(
        name(Period::Week, "GGGG-[W]WW", new_years_eve, EN),
        "2026-W52"
    );
    // Friday 1 January 2021 is in ISO week 53 of 2020.
    assert_eq!(
        name(Period::Week, "GGGG-[W]WW", d(2021, 1, 1), monday()),
        "2020-W53"
    );
    assert_eq!(
        parse_date_in("GGGG-[W]WW", "2020-W53", EN),
        Some(d(2020, 12, 28))
    );
    assert_eq!(parse_date_in("GGGG-[W]WW", "2021-W53", EN), None);
}

#[test]
fn locale_weeks_cross_the_year_with_their_week_year() {
    // English weeks: week 1 holds 1 January, so Sunday 27 December 2026 starts 2027-W01.
    assert_eq!(
        name(Period::Week, "gggg-[W]ww", d(2026, 12, 31), EN),
        "2027-W01"
    );
    assert_eq!(
        parse_date_in("gggg-[W]ww", "2027-W01", EN),
        Some(d(2026, 12, 27))
    );
    // Monday weeks keep the English `doy`: week 1 holds 2 January, so 2027-W01 starts on
    // Monday 28 December 2026.
    assert_eq!(
        name(Period::Week, "gggg-[W]ww", d(2026, 12, 31), monday()),
        "2027-W01"
    );
    assert_eq!(
        parse_date_in("gggg-[W]ww", "2027-W01", monday()),
        Some(d(2026, 12, 28))
    );
    // Every week name read back is the week's first day, for a whole year of days.
    for rule in [EN, monday(), week_rule("saturday")] {
        let mut day = d(2026, 1, 1);
        while day < d(2028, 1, 1) {
            for format in ["gggg-[W]ww", "GGGG-[W]WW", "gggg [week] w"] {
                let start = Period::Week.start(day, rule);
                let text = format_date_in(format, start, rule).unwrap();
                let back = parse_date_in(format, &text, rule).unwrap();
                if format.contains('G') {
                    // ISO names give the ISO week's Monday, which is the start only for
                    // Monday weeks.
                    assert_eq!(back.iso_week(), start.iso_week(), "{format} {text}");
                } else {
                    assert_eq!(back, start, "{format} {text} {rule:?}");
                }
            }
            day = day.succ_opt().unwrap();
        }
    }
}

#[test]
fn quarters_and_months_start_and_end_across_year_ends() {
    let nov = d(2026, 11, 15);
    assert_eq!(Period::Quarter.start(nov, EN), d(2026, 10, 1));
    assert_eq!(Period::Quarter.end(nov, EN), Some(d(2026, 12, 31)));
    assert_eq!(Period::Quarter.shift(nov, 1, EN), Some(d(2027, 1, 1)));
    assert_eq!(Period::Quarter.shift(nov, -4, EN), Some(d(2025, 10, 1)));
    assert_eq!(Period::Month.end(d(2028, 2, 10), EN), Some(d(2028, 2, 29)));
    assert_eq!(
        Period::Month.shift(d(2026, 1, 31), -1, EN),
        Some(d(2025, 12, 1))
    );
    assert_eq!(Period::Year.end(nov, EN), Some(d(2026, 12, 31)));
    assert_eq!(Period::Week.end(nov, EN), Some(d(2026, 11, 21)));
    assert_eq!(
        parse_date_in("YYYY-[Q]Q", "2026-Q4", EN),
        Some(d(2026, 10, 1))
    );
    assert_eq!(parse_date_in("YYYY-[Q]Q", "2026-Q5", EN), None);
    assert_eq!(parse_date_in("YYYY-[Q]Q", "2026-Q0", EN), None);
    assert_eq!(
        parse_date_in("YYYY-MM", "2026-12", EN),
        Some(d(2026, 12, 1))
    );
    assert_eq!(parse_date_in("YYYY", "2026", EN), Some(d(2026, 1, 1)));
}

#[test]
fn date_words_name_a_day_or_the_first_day_of_a_span() {
    let today = d(2026, 12, 3);
    let words = |t: &str, rule, iso| parse_date_words(t, today, rule, iso).unwrap();
    let day = |date| NamedDate { date, period: None };
    let span = |date, p| NamedDate {
        date,
        period: Some(p),
    };
    assert_eq!(words("today", EN, false), day(today));
    assert_eq!(words(" Yesterday ", EN, false), day(d(2026, 12, 2)));
    assert_eq!(words("tomorrow", EN, false), day(d(2026, 12, 4)));
    assert_eq!(words("2024-02-29", EN, false), day(d(2024, 2, 29)));
    assert_eq!(
        words("this week", EN, false),
        span(d(2026, 11, 29), Period::Week)
    );
    assert_eq!(
        words("this week", monday(), false),
        span(d(2026, 11, 30), Period::Week)
    );
    assert_eq!(
        words("last week", EN, false),
        span(d(2026, 11, 22), Period::Week)
    );
    assert_eq!(
        words("last month", EN, false),
        span(d(2026, 11, 1), Period::Month)
    );
    assert_eq!(
        words("next quarter", EN, false),
        span(d(2027, 1, 1), Period::Quarter)
    );
    assert_eq!(
        words("last year", EN, false),
        span(d(2025, 1, 1), Period::Year)
    );
    assert_eq!(
        words("next day", EN, false),
        span(d(2026, 12, 4), Period::Day)
    );
    assert_eq!(
        words("2026-W49", EN, true),
        span(d(2026, 11, 30), Period::Week)
    );
    assert_eq!(
        words("2026-w49", EN, false),
        span(d(2026, 11, 29), Period::Week)
    );
    assert_eq!(
        words("2026-Q4", EN, false),
        span(d(2026, 10, 1), Period::Quarter)
    );
    assert_eq!(
        words("2026-12", EN, false),
        span(d(2026, 12, 1), Period::Month)
    );
    assert_eq!(words("2026", EN, false), span(d(2026, 1, 1), Period::Year));
    for bad in [
        "someday",
        "2026-W54",
        "2026-Q5",
        "2026-13",
        "2026-02-30",
        "26-12-03",
        "last fortnight",
        "this week please",
        "2026-1-3",
    ] {
        let e = parse_date_words(bad, today, EN, false).unwrap_err();
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
    // Anything that does not look like a date is not quoted back: a path never is.
    for hostile in [
        "9".repeat(10_000),
        "/home/me/secret.md".to_owned(),
        "C:\\x".to_owned(),
    ] {
        let e = parse_date_words(&hostile, today, EN, false).unwrap_err();
        assert!(e.to_string().starts_with("the value is not a date"), "{e}");
    }
}

#[test]
fn week_start_settings_and_iso_formats_are_recognised() {
    assert_eq!(week_rule("locale"), EN);
    assert_eq!(week_rule(""), EN);
    assert_eq!(week_rule("Monday").dow, 1);
    assert_eq!(week_rule("saturday").dow, 6);
    assert!(uses_iso_weeks("GGGG-[W]WW"));
    assert!(!uses_iso_weeks("gggg-[W]ww"));
    assert!(!uses_iso_weeks("YYYY-[Week ]ww"));
    assert!(numbers_weeks("YYYY-[Week ]ww"));
    assert!(!numbers_weeks("YYYY-MM-DD [Wg]"));
}

#[test]
fn template_variables_follow_the_plugins_documented_tags() {
    let now = chrono::NaiveTime::from_hms_opt(9, 5, 0).unwrap();
    let week = TemplateDates {
        period: Period::Week,
        start: d(2026, 11, 29),
        now,
        format: "gggg-[W]ww",
        title: "2026-W49",
        week: EN,
    };
    let out = fill_period_variables(
        "# {{title}} {{date}} {{time}}\n{{date:gggg [Week] ww}} {{sunday:YYYY-MM-DD}} \
         {{ Saturday : ddd D }} {{monday}} {{date+1w:YYYY-MM-DD}} {{date-2d}} {{other}} \
         {{month:MMM}} {{date:HH:mm}} {{",
        &week,
    )
    .unwrap();
    assert_eq!(
        out,
        "# 2026-W49 2026-W49 09:05\n2026 Week 49 2026-11-29 Sat 5 {{monday}} 2026-12-06 2026-W48 \
         {{other}} {{month:MMM}} 09:05 {{"
    );
    // Monday weeks: `sunday` is the last day of the week.
    let monday_week = TemplateDates {
        start: d(2026, 11, 30),
        week: monday(),
        ..week.clone()
    };
    assert_eq!(
        fill_period_variables("{{sunday:YYYY-MM-DD}} {{monday:YYYY-MM-DD}}", &monday_week).unwrap(),
        "2026-12-06 2026-11-30"
    );
    let day = TemplateDates {
        period: Period::Day,
        start: d(2026, 1, 1),
        format: "YYYY-MM-DD",
        title: "2026-01-01",
        ..week.clone()
    };
    assert_eq!(
        fill_period_variables(
            "{{yesterday}} {{tomorrow}} {{date-1y:YYYY}} {{date+30m:HH:mm}} {{date+1q:MM}}",
            &day
        )
        .unwrap(),
        "2025-12-31 2026-01-02 2025 09:35 01"
    );
    let quarter = TemplateDates {
        period: Period::Quarter,
        start: d(2026, 10, 1),
        format: "YYYY-[Q]Q",
        title: "2026-Q4",
        ..week.clone()
    };
    assert_eq!(
        fill_period_variables(
            "{{quarter}} {{quarter:MMMM}} {{quarter+12d:D MMM}} {{year}} {{yesterday}}",
            &quarter
        )
        .unwrap(),
        "2026-Q4 October 13 Oct {{year}} {{yesterday}}"
    );
}

#[test]
fn a_template_that_would_grow_past_the_bound_is_refused() {
    let t = TemplateDates {
        period: Period::Day,
        start: d(2026, 1, 1),
        now: chrono::NaiveTime::MIN,
        format: "YYYY-MM-DD",
        title: "x",
        week: EN,
    };
    let big_format = "dddd ".repeat(200);
    let template = format!("{{{{date:{big_format}}}}}").repeat(3000);
    assert!(template.len() < MAX_FILLED_BYTES);
    match fill_period_variables(&template, &t) {
        Err(e) => assert!(e.to_string().contains("longer than"), "{e}"),
        Ok(text) => panic!("filled to {} bytes", text.len()),
    }
}

#[test]
fn a_period_is_read_by_its_noun_or_its_adjective_and_answered_by_its_noun() {
    // The tools say "a daily, weekly, monthly ... note", so a client may well send `daily`.
    for p in Period::ALL {
        let by_noun: Period = serde_json::from_value(serde_json::json!(p.name())).unwrap();
        let by_adjective: Period =
            serde_json::from_value(serde_json::json!(p.adjective())).unwrap();
        assert_eq!((by_noun, by_adjective), (p, p));
        assert_eq!(serde_json::to_value(p).unwrap(), p.name());
    }
    assert!(serde_json::from_value::<Period>(serde_json::json!("fortnightly")).is_err());
    // The schema offers the nouns only: the aliases cost no tokens in `tools/list`.
    let schema = serde_json::to_string(&schemars::schema_for!(Period)).unwrap();
    assert!(!schema.contains("\"daily\""), "{schema}");
}
