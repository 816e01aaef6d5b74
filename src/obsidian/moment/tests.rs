use super::*;
use proptest::prelude::*;

fn d(y: i32, m: u32, day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, day).unwrap()
}

fn f(format: &str, date: NaiveDate) -> String {
    format_date(format, date).unwrap_or_else(|e| panic!("{format:?}: {e}"))
}

#[test]
fn common_daily_note_formats() {
    let date = d(2024, 1, 5); // a Friday
    for (format, want) in [
        ("YYYY-MM-DD", "2024-01-05"),
        ("YYYY/MM/YYYY-MM-DD", "2024/01/2024-01-05"),
        ("dddd, MMMM Do YYYY", "Friday, January 5th 2024"),
        ("[Week] ww", "Week 01"),
        ("gggg-[W]ww", "2024-W01"),
        ("YYYY-MM-DD [Daily]", "2024-01-05 Daily"),
        ("DD.MM.YYYY", "05.01.2024"),
        ("D/M/YY", "5/1/24"),
        ("YYYYMMDD", "20240105"),
        ("YYYY-[W]WW-E", "2024-W01-5"),
        ("GGGG-[W]WW", "2024-W01"),
        ("ddd DD MMM YYYY", "Fri 05 Jan 2024"),
        ("dd", "Fr"),
        ("d e E", "5 5 5"),
        ("YYYY-[Q]Q", "2024-Q1"),
        ("DDD DDDD DDDo", "5 005 5th"),
        ("Mo Qo do wo Wo", "1st 1st 5th 1st 1st"),
        ("YYYY/YYYY-MM/YYYY-MM-DD ddd", "2024/2024-01/2024-01-05 Fri"),
        ("Y", "2024"),
        ("L", "01/05/2024"),
        ("LL", "January 5, 2024"),
        ("l", "1/5/2024"),
        ("ll", "Jan 5, 2024"),
    ] {
        assert_eq!(f(format, date), want, "format {format:?}");
    }
}

#[test]
fn ordinals_follow_english_rules() {
    for (day, want) in [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (30, "30th"),
        (31, "31st"),
    ] {
        assert_eq!(f("Do", d(2024, 1, day)), want);
    }
    assert_eq!(f("DDDo", d(2024, 4, 21)), "112th");
    assert_eq!(f("DDDo", d(2023, 4, 21)), "111th");
}

#[test]
fn letters_that_are_not_tokens_print_literally() {
    let date = d(2024, 3, 9);
    assert_eq!(f("YYYY-MM-DDT", date), "2024-03-09T");
    assert_eq!(f("[Daily] YYYY", date), "Daily 2024");
    // Unbracketed words are a trap, as in Obsidian: in "Journal" the `a` is the am/pm token
    // and the `l` the locale date `M/D/YYYY`.
    assert_eq!(
        format_date("Journal YYYY", date),
        Err(MomentError::NeedsTime { token: "a".into() })
    );
    assert_eq!(f("Journ", date), "Journ");
    assert_eq!(f("Jul", date), "Ju3/9/2024");
    assert_eq!(f("bcfijpqtuvBCFIJOPRTUV", date), "bcfijpqtuvBCFIJOPRTUV");
    assert_eq!(f("日記 YYYY", date), "日記 2024");
    assert_eq!(f("🎉 MM", date), "🎉 03");
}

#[test]
fn brackets_follow_moments_greedy_rule() {
    let date = d(2024, 3, 9);
    assert_eq!(f("[a]b]", date), "a]b");
    assert_eq!(f("[YYYY] YYYY", date), "YYYY 2024");
    assert_eq!(f("[Week] ww [of] gggg", date), "Week 10 of 2024");
    assert_eq!(f("[ruin YYYY", date), "[ruin 2024", "unclosed bracket");
    assert_eq!(f("[]YYYY", date), "2024");
    assert_eq!(f("[[x]]", date), "[x]");
}

#[test]
fn backslash_escapes_a_whole_token() {
    let date = d(2024, 3, 9);
    assert_eq!(f("\\YYYY YYYY", date), "YYYY 2024");
    assert_eq!(f("\\D D", date), "D 9");
    assert_eq!(f("YYYY\\", date), "2024");
    assert_eq!(f("\\\\YYYY", date), "2024");
    assert_eq!(f("\\[YYYY]", date), "[2024]");
    assert_eq!(f("\\L", date), "L");
}

#[test]
fn token_runs_split_as_moment_splits_them() {
    let date = d(2024, 3, 9);
    assert_eq!(f("YYY", date), "242024", "YY then Y");
    assert_eq!(f("YYYYY", date), "02024");
    assert_eq!(f("YYYYYY", date), "+002024");
    assert_eq!(f("MMMMM", date), "March3", "MMMM then M");
    assert_eq!(f("ggg", date), "24g", "gg then a literal g");
    assert_eq!(f("ddddd", date), "Saturday6");
    assert_eq!(
        f("w|ww", date),
        "w|10",
        "`w[o|w]?` makes `w|` one non-token"
    );
}

#[test]
fn line_breaks_are_dropped_like_moment() {
    assert_eq!(f("YYYY\nMM\r\n", d(2024, 3, 9)), "202403");
}

#[test]
fn locale_and_iso_weeks_differ_at_year_boundaries() {
    // Sunday 31 Dec 2023: English week 1 of 2024 (weeks start Sunday, Jan 1 is in week 1),
    // ISO week 52 of 2023.
    let date = d(2023, 12, 31);
    assert_eq!(f("gggg-ww", date), "2024-01");
    assert_eq!(f("GGGG-WW", date), "2023-52");
    // Friday 1 Jan 2021: English week 1 of 2021, ISO week 53 of 2020.
    let date = d(2021, 1, 1);
    assert_eq!(f("gggg-ww", date), "2021-01");
    assert_eq!(f("GGGG-WW", date), "2020-53");
    assert_eq!(f("gg GG", date), "21 20");
    // Saturday 26 Dec 2020: English week 52 of 2020.
    assert_eq!(f("gggg-ww", d(2020, 12, 26)), "2020-52");
    assert_eq!(f("gggg-ww", d(2020, 12, 27)), "2021-01");
}

#[test]
fn moment_week_arithmetic_agrees_with_chrono_for_iso() {
    let mut date = d(1999, 12, 1);
    while date < d(2031, 2, 1) {
        let (week, year) = week_of_year(date, 1, 4);
        let iso = date.iso_week();
        assert_eq!(
            (week, year),
            (i64::from(iso.week()), i64::from(iso.year())),
            "{date}"
        );
        date = date.succ_opt().unwrap();
    }
}

#[test]
fn locale_week_one_always_holds_january_first() {
    for year in 1990..2040 {
        let jan1 = d(year, 1, 1);
        assert_eq!(
            WeekRule::ENGLISH.week_of(jan1),
            (1, i64::from(year)),
            "{year}"
        );
        // The week starts on Sunday: the Saturday before (if in the old year) is in the
        // previous week-year's last week.
        let sat = jan1 - chrono::Days::new(u64::from(jan1.weekday().num_days_from_sunday()) + 1);
        let (w, y) = WeekRule::ENGLISH.week_of(sat);
        assert_eq!(y, i64::from(year) - 1);
        assert!(w == 52 || w == 53, "{sat}: week {w}");
    }
}

#[test]
fn years_are_padded_and_signed_like_moment() {
    assert_eq!(f("YYYY YY Y", d(33, 5, 1)), "0033 33 0033");
    assert_eq!(f("YYYY", d(-44, 3, 15)), "-0044");
    assert_eq!(f("YYYY Y", d(12345, 1, 1)), "12345 +12345");
    assert_eq!(f("YYYYYY", d(-44, 3, 15)), "-000044");
}

#[test]
fn time_tokens_need_a_time() {
    let date = d(2024, 3, 9);
    for (format, token) in [
        ("YYYY-MM-DD HHmm", "HH"),
        ("h:mm A", "h"),
        ("a", "a"),
        ("SSS", "SSS"),
        ("LT", "h"),
    ] {
        assert_eq!(
            format_date(format, date),
            Err(MomentError::NeedsTime {
                token: token.into()
            }),
            "{format:?}"
        );
    }
}

#[test]
fn time_tokens_format_with_a_time() {
    let t = |h, m, s, ms| d(2024, 3, 9).and_hms_milli_opt(h, m, s, ms).unwrap();
    for (format, at, want) in [
        ("HH:mm", t(9, 5, 0, 0), "09:05"),
        ("H:m:s", t(9, 5, 7, 0), "9:5:7"),
        ("h:mm a", t(0, 30, 0, 0), "12:30 am"),
        ("hh:mm A", t(12, 0, 0, 0), "12:00 PM"),
        ("h A", t(23, 0, 0, 0), "11 PM"),
        ("k kk", t(0, 0, 0, 0), "24 24"),
        (
            "Hmm Hmmss hmm hmmss",
            t(14, 3, 9, 0),
            "1403 140309 203 20309",
        ),
        ("S SS SSS SSSS", t(1, 1, 1, 789), "7 78 789 7890"),
        ("SSSSSSSSS", t(1, 1, 1, 5), "005000000"),
        ("YYYY-MM-DD HHmm", t(7, 45, 0, 0), "2024-03-09 0745"),
        ("LLLL", t(18, 4, 0, 0), "Saturday, March 9, 2024 6:04 PM"),
        ("LTS", t(18, 4, 2, 0), "6:04:02 PM"),
        ("llll", t(18, 4, 0, 0), "Sat, Mar 9, 2024 6:04 PM"),
    ] {
        assert_eq!(format_datetime(format, at).unwrap(), want, "{format:?}");
    }
}

#[test]
fn unsupported_tokens_are_errors_not_wrong_text() {
    let date = d(2024, 3, 9);
    for (format, token) in [
        ("X", "X"),
        ("x", "x"),
        ("YYYY Z", "Z"),
        ("ZZ", "ZZ"),
        ("zz", "zz"),
        ("N", "N"),
        ("yyyy", "yyyy"),
        ("yo", "yo"),
    ] {
        assert_eq!(
            format_date(format, date),
            Err(MomentError::Unsupported {
                token: token.into()
            }),
            "{format:?}"
        );
    }
}

#[test]
fn empty_and_oversized_formats_are_refused() {
    let date = d(2024, 3, 9);
    assert_eq!(format_date("", date), Err(MomentError::EmptyFormat));
    let long = "Y".repeat(MAX_FORMAT_BYTES + 1);
    assert_eq!(
        format_date(&long, date),
        Err(MomentError::FormatTooLong {
            max: MAX_FORMAT_BYTES
        })
    );
    assert!(format_date(&"[x]".repeat(300), date).is_ok());
}

#[test]
fn daily_note_paths_join_folder_and_formatted_name() {
    let date = d(2024, 1, 15);
    for (folder, format, want) in [
        ("", "YYYY-MM-DD", "2024-01-15.md"),
        ("/", "YYYY-MM-DD", "2024-01-15.md"),
        ("Daily", "YYYY-MM-DD", "Daily/2024-01-15.md"),
        ("/Daily/", "YYYY-MM-DD", "Daily/2024-01-15.md"),
        (
            "Journal/Daily",
            "YYYY/MM/YYYY-MM-DD",
            "Journal/Daily/2024/01/2024-01-15.md",
        ),
        (
            "Daily",
            "YYYY/MMMM/dddd, MMMM Do YYYY",
            "Daily/2024/January/Monday, January 15th 2024.md",
        ),
        ("Daily", "YYYY-MM-DD[.md]", "Daily/2024-01-15.md"),
        ("Daily//Sub", "/YYYY//DD", "Daily/Sub/2024/15.md"),
        ("./Daily", "YYYY-MM-DD", "Daily/2024-01-15.md"),
        ("Win\\Style", "YYYY-MM-DD", "Win/Style/2024-01-15.md"),
        ("Daily", "L", "Daily/01/15/2024.md"),
        ("Non\u{a0}breaking", "YYYY", "Non breaking/2024.md"),
        ("Cafe\u{301}", "YYYY", "Caf\u{e9}/2024.md"),
    ] {
        assert_eq!(
            daily_note_path(folder, format, date).as_deref(),
            Ok(want),
            "folder {folder:?} format {format:?}"
        );
    }
}

#[test]
fn daily_note_paths_refuse_parent_components_and_empty_names() {
    let date = d(2024, 1, 15);
    assert_eq!(
        daily_note_path("../outside", "YYYY", date),
        Err(MomentError::ParentComponent)
    );
    assert_eq!(
        daily_note_path("Daily", "[..]/YYYY", date),
        Err(MomentError::ParentComponent)
    );
    assert_eq!(
        daily_note_path("Daily", "[]", date),
        Err(MomentError::EmptyPath)
    );
    assert_eq!(
        daily_note_path("Daily", "YYYY/", date),
        Err(MomentError::EmptyPath)
    );
    assert_eq!(daily_note_path("", "", date), Err(MomentError::EmptyFormat));
    assert!(matches!(
        daily_note_path("", "HH", date),
        Err(MomentError::NeedsTime { .. })
    ));
}

#[test]
fn parse_accepts_what_format_produces_for_daily_formats() {
    for format in [
        "YYYY-MM-DD",
        "YYYY/MM/YYYY-MM-DD",
        "dddd, MMMM Do YYYY",
        "YYYY-MM-DD [Daily]",
        "DD.MM.YYYY",
        "D MMM YYYY",
        "YYYYMMDD",
        "YYYY-DDDD",
        "dddd YYYY-MM-DD",
        "L",
        "ll",
    ] {
        for date in [
            d(2024, 1, 5),
            d(2023, 12, 31),
            d(2024, 2, 29),
            d(1999, 11, 22),
        ] {
            let text = f(format, date);
            assert_eq!(parse_date(format, &text), Some(date), "{format:?} {text:?}");
        }
    }
}

#[test]
fn parse_is_strict_like_moment() {
    let want = Some(d(2024, 1, 5));
    assert_eq!(parse_date("YYYY-MM-DD", "2024-01-05"), want);
    assert_eq!(
        parse_date("YYYY-MM-DD", "2024-01-05 "),
        None,
        "leftover text"
    );
    assert_eq!(parse_date("YYYY-MM-DD", " 2024-01-05"), None);
    assert_eq!(
        parse_date("YYYY-MM-DD", "2024-1-05"),
        None,
        "MM needs two digits"
    );
    assert_eq!(
        parse_date("YYYY-MM-DD", "24-01-05"),
        None,
        "YYYY needs four"
    );
    assert_eq!(parse_date("YYYY-M-D", "2024-1-5"), want);
    assert_eq!(
        parse_date("YYYY-M-D", "2024-01-05"),
        want,
        "Moment 2.29 allows 01 for M"
    );
    assert_eq!(
        parse_date("YYYY-MM-DD", "2024/01/05"),
        None,
        "literals must match"
    );
    assert_eq!(parse_date("YYYY-MM-DD", "2024-13-05"), None);
    assert_eq!(parse_date("YYYY-MM-DD", "2023-02-29"), None);
    assert_eq!(parse_date("YYYY-MM-DD", "2024-00-05"), None);
    assert_eq!(parse_date("YYYY-MM-DD", "2024-01-00"), None);
    assert_eq!(
        parse_date("YYYY-MM-DD", "２０２４-01-05"),
        None,
        "ASCII digits only"
    );
    assert_eq!(parse_date("YYYY-MM-DD", ""), None);
    assert_eq!(parse_date("", ""), None);
}

#[test]
fn parse_checks_names_and_weekdays() {
    let want = Some(d(2024, 1, 5));
    assert_eq!(
        parse_date("dddd, MMMM Do YYYY", "Friday, January 5th 2024"),
        want
    );
    assert_eq!(
        parse_date("dddd, MMMM Do YYYY", "friday, JANUARY 5th 2024"),
        want
    );
    assert_eq!(
        parse_date("dddd, MMMM Do YYYY", "Monday, January 5th 2024"),
        None
    );
    assert_eq!(
        parse_date("dddd, MMMM Do YYYY", "Fri, January 5th 2024"),
        None
    );
    assert_eq!(
        parse_date("MMM D YYYY", "January 5 2024"),
        None,
        "strict: short name"
    );
    assert_eq!(parse_date("MMM D YYYY", "Jan 5 2024"), want);
    assert_eq!(parse_date("Do MMMM YYYY", "5th January 2024"), want);
    assert_eq!(parse_date("Do MMMM YYYY", "5 January 2024"), None);
    assert_eq!(parse_date("d YYYY-MM-DD", "5 2024-01-05"), want);
    assert_eq!(parse_date("d YYYY-MM-DD", "1 2024-01-05"), None);
}

#[test]
fn parse_handles_years_and_defaults() {
    assert_eq!(parse_date("YY-MM-DD", "24-01-05"), Some(d(2024, 1, 5)));
    assert_eq!(parse_date("YY-MM-DD", "68-01-05"), Some(d(2068, 1, 5)));
    assert_eq!(parse_date("YY-MM-DD", "69-01-05"), Some(d(1969, 1, 5)));
    assert_eq!(parse_date("YYYY-MM", "2024-03"), Some(d(2024, 3, 1)));
    assert_eq!(parse_date("YYYY", "2024"), Some(d(2024, 1, 1)));
    assert_eq!(parse_date("Y-MM-DD", "12345-01-05"), Some(d(12345, 1, 5)));
    assert_eq!(parse_date("Y-MM-DD", "-44-03-15"), Some(d(-44, 3, 15)));
    assert_eq!(parse_date("YYYY-DDDD", "2024-060"), Some(d(2024, 2, 29)));
    assert_eq!(parse_date("YYYY-DDDD", "2023-366"), None);
    assert_eq!(
        parse_date("MM-DD", "01-05"),
        None,
        "no year: Moment would use today's"
    );
}

#[test]
fn parse_requires_repeated_fields_to_agree() {
    let format = "YYYY/MM/YYYY-MM-DD";
    assert_eq!(
        parse_date(format, "2024/01/2024-01-15"),
        Some(d(2024, 1, 15))
    );
    assert_eq!(parse_date(format, "2024/02/2024-01-15"), None);
    assert_eq!(parse_date(format, "2023/01/2024-01-15"), None);
}

#[test]
fn parse_checks_and_ignores_time_fields() {
    let format = "YYYY-MM-DD HHmm";
    assert_eq!(parse_date(format, "2024-01-05 0930"), Some(d(2024, 1, 5)));
    assert_eq!(parse_date(format, "2024-01-05 2460"), None);
    assert_eq!(parse_date(format, "2024-01-05 2400"), Some(d(2024, 1, 6)));
    assert_eq!(
        parse_date("YYYY-MM-DD h:mm a", "2024-01-05 9:30 pm"),
        Some(d(2024, 1, 5))
    );
    assert_eq!(parse_date("YYYY-MM-DD h:mm a", "2024-01-05 13:30 pm"), None);
    assert_eq!(
        parse_date("YYYY-MM-DD hh:mm A", "2024-01-05 00:30 AM"),
        None
    );
    assert_eq!(
        parse_date("YYYY-MM-DD [at] HH:mm:ss", "2024-01-05 at 09:30:61"),
        None
    );
}

#[test]
fn parse_reads_weeks_and_quarters_and_refuses_tokens_it_cannot_place() {
    // English week 1 of 2024 holds Monday 1 January, so it starts on Sunday 31 December 2023.
    assert_eq!(
        parse_date("gggg-[W]ww", "2024-W01"),
        NaiveDate::from_ymd_opt(2023, 12, 31)
    );
    assert_eq!(
        parse_date("YYYY-[Q]Q", "2024-Q1"),
        NaiveDate::from_ymd_opt(2024, 1, 1)
    );
    // A week-year alone, or a week mixed with a month, names no one day.
    assert_eq!(parse_date("gggg", "2024"), None);
    assert_eq!(parse_date("gggg-ww-MM", "2024-01-01"), None);
    assert_eq!(parse_date("YYYY-[Q]Q-MM", "2024-Q1-04"), None);
    assert_eq!(parse_date("YYYY-MM-DD[]", "2024-01-05"), None);
    // A weekday with no month or day: Moment dates it by today's week, even over `DDDD`.
    assert_eq!(parse_date("YYYY dddd", "2024 Monday"), None);
    assert_eq!(parse_date("ddd YYYY-DDDD", "Fri 2024-005"), None);
}

#[test]
fn daily_note_date_matches_only_the_file_name() {
    let format = "YYYY/MM/YYYY-MM-DD";
    let want = Some(d(2024, 1, 15));
    assert_eq!(daily_note_date(format, "Daily/2024/01/2024-01-15.md"), want);
    // Obsidian matches the base name only, so a note filed in the wrong month still counts.
    assert_eq!(daily_note_date(format, "Daily/2023/07/2024-01-15.md"), want);
    assert_eq!(daily_note_date(format, "2024-01-15"), want);
    assert_eq!(daily_note_date(format, "Daily/2024/01/Meeting.md"), None);
    assert_eq!(
        daily_note_date("YYYY-MM-DD", "Daily/2024-01-15.canvas"),
        None
    );
}

/// Numeric tokens with separators between them; formats always hold a year, month and day.
fn numeric_format() -> impl Strategy<Value = String> {
    let month = prop_oneof![Just("MM"), Just("M")];
    let day = prop_oneof![Just("DD"), Just("D")];
    let extra = prop::option::of(prop_oneof![
        Just("DDDD"),
        Just("DDD"),
        Just("YYYY"),
        Just("MM")
    ]);
    let sep = prop_oneof![
        Just("-"),
        Just("/"),
        Just("."),
        Just("_"),
        Just(" "),
        Just(", "),
        Just("[W]"),
        Just("[Daily ]"),
        Just("' "),
    ];
    let affix = prop_oneof![Just(""), Just("[Daily] "), Just("~"), Just(" [x]")];
    (
        month,
        day,
        extra,
        Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
        prop::collection::vec(sep, 3),
        affix.clone(),
        affix,
    )
        .prop_map(|(m, dd, extra, order, seps, prefix, suffix)| {
            let mut tokens = vec!["YYYY", m, dd];
            tokens.extend(extra);
            let ordered: Vec<&str> = order
                .into_iter()
                .filter_map(|i| tokens.get(i).copied())
                .collect();
            let mut out = prefix.to_owned();
            for (i, token) in ordered.iter().enumerate() {
                if i > 0 {
                    out.push_str(seps[i - 1]);
                }
                out.push_str(token);
            }
            out.push_str(suffix);
            out
        })
}

fn any_date() -> impl Strategy<Value = NaiveDate> {
    (1000i32..=9999, 1u32..=366)
        .prop_filter_map("valid day", |(y, doy)| NaiveDate::from_yo_opt(y, doy))
}

fn any_wide_date() -> impl Strategy<Value = NaiveDate> {
    (NaiveDate::MIN.num_days_from_ce()..=NaiveDate::MAX.num_days_from_ce())
        .prop_filter_map("in range", NaiveDate::from_num_days_from_ce_opt)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn format_date_never_panics_on_any_format(format in ".{0,64}", date in any_wide_date()) {
        let _ = format_date(&format, date);
        let _ = daily_note_path("Daily", &format, date);
    }

    #[test]
    fn format_never_panics_on_token_soup(
        format in "[YMDdwWgGQEeoLlTS\\[\\]\\\\ |/HhmsaAkNxXzZy\n-]{0,40}",
        date in any_wide_date(),
        secs in 0u32..86_400,
    ) {
        let _ = format_date(&format, date);
        let time = NaiveTime::from_num_seconds_from_midnight_opt(secs, 0).unwrap();
        let _ = format_datetime(&format, date.and_time(time));
        let _ = parse_date(&format, &format);
    }

    #[test]
    fn parse_date_never_panics(
        format in "[YMDdoHhmsaA\\[\\] /.-]{0,24}",
        input in "[0-9a-zA-Z /.-]{0,24}",
    ) {
        let _ = parse_date(&format, &input);
    }

    #[test]
    fn numeric_formats_round_trip(format in numeric_format(), date in any_date()) {
        let text = format_date(&format, date).unwrap();
        prop_assert_eq!(parse_date(&format, &text), Some(date), "{:?} -> {:?}", format, text);
    }
}
