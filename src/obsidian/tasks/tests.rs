//! Expected answers are worked out by hand from the plugin's docs (named per test).

use chrono::NaiveDate;

use super::dates::{DateRange, parse_date, parse_range};
use super::eval::{EvalError, QueryResult, TaskRecord, render_task};
use super::query::{Filter, Key, Query, QueryError};
use super::settings::{Status, StatusType, TasksSettings};
use super::toggle::{ToggleError, parse_recurrence, toggle_line};
use crate::obsidian::budget::Budget;
use crate::obsidian::config::ConfigError;
use crate::obsidian::dataview::parse_note;

fn d(y: i32, m: u32, dd: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, dd).unwrap()
}

/// 2023-11-15 is a Wednesday.
fn today() -> NaiveDate {
    d(2023, 11, 15)
}

fn range(a: NaiveDate, b: NaiveDate) -> Option<DateRange> {
    Some(DateRange { start: a, end: b })
}

// The evaluator under a fresh budget of the defaults (the tests of the budget make their own).

fn parse_query(source: &str, today: NaiveDate) -> Result<Query, QueryError> {
    super::query::parse_query(source, today, &Budget::new())
}

fn run_source(
    source: &str,
    tasks: &[TaskRecord],
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<(Query, QueryResult), EvalError> {
    super::eval::run_source(source, tasks, settings, today, &Budget::new())
}

fn run(
    query: &Query,
    tasks: &[TaskRecord],
    settings: &TasksSettings,
    today: NaiveDate,
) -> Result<QueryResult, EvalError> {
    super::eval::run(query, tasks, settings, today, &Budget::new())
}

fn render_markdown(
    result: &QueryResult,
    tasks: &[TaskRecord],
    query: &Query,
    settings: &TasksSettings,
    today: NaiveDate,
) -> String {
    super::eval::render_markdown(result, tasks, query, settings, today, &Budget::new()).unwrap()
}

// ---- Settings and statuses (Settings.md, Statuses.md, Status Types.md) ----

#[test]
fn settings_default_when_data_json_is_empty_null_or_lacks_keys() {
    for bytes in [&b"{}"[..], b"null", b"\xEF\xBB\xBF{}"] {
        let s = TasksSettings::from_json(bytes).unwrap();
        assert_eq!(s, TasksSettings::default());
    }
    let s = TasksSettings::default();
    assert!(s.set_done_date && s.set_cancelled_date && !s.set_created_date);
    assert!(!s.recurrence_on_next_line);
    assert_eq!(s.global_filter, "");
    assert_eq!(s.status(' ').next_symbol, 'x');
    assert_eq!(s.status('x').status_type, StatusType::Done);
    assert_eq!(s.status('/').status_type, StatusType::InProgress);
    assert_eq!(s.status('-').status_type, StatusType::Cancelled);
}

#[test]
fn settings_read_global_filter_dates_recurrence_and_custom_statuses() {
    let json = br##"{
        "globalFilter": "#task", "removeGlobalFilter": true, "globalQuery": "not done",
        "setCreatedDate": true, "setDoneDate": false, "setCancelledDate": false,
        "recurrenceOnNextLine": true, "removeScheduledDateOnRecurrence": true,
        "statusSettings": {
            "coreStatuses": [
                {"symbol": " ", "name": "Todo", "nextStatusSymbol": "/", "availableAsCommand": true, "type": "TODO"},
                {"symbol": "x", "name": "Done", "nextStatusSymbol": " ", "availableAsCommand": true, "type": "DONE"}
            ],
            "customStatuses": [
                {"symbol": "/", "name": "Doing", "nextStatusSymbol": "x", "type": "IN_PROGRESS"},
                {"symbol": "P", "name": "Pro", "nextStatusSymbol": "C", "type": "NON_TASK"},
                {"symbol": "", "name": "no symbol", "nextStatusSymbol": "x", "type": "TODO"},
                {"symbol": "h", "name": "Hold", "nextStatusSymbol": " ", "type": "ON_HOLD"}
            ]
        },
        "someFutureKey": 3
    }"##;
    let s = TasksSettings::from_json(json).unwrap();
    assert_eq!(s.global_filter, "#task");
    assert!(s.remove_global_filter && s.set_created_date && s.recurrence_on_next_line);
    assert!(s.remove_scheduled_date_on_recurrence);
    assert!(!s.set_done_date && !s.set_cancelled_date);
    assert_eq!(s.global_query, "not done");
    assert_eq!(s.statuses.len(), 5, "the entry without a symbol is skipped");
    assert_eq!(s.status(' ').next_symbol, '/');
    assert_eq!(s.status('/').name, "Doing");
    assert_eq!(s.status('P').status_type, StatusType::NonTask);
    assert_eq!(s.status('h').status_type, StatusType::OnHold);
    // The default Cancelled status is gone: `-` is now unknown.
    assert_eq!(s.status('-'), Status::unknown('-'));
}

#[test]
fn settings_keys_of_the_wrong_type_read_as_defaults() {
    let s = TasksSettings::from_json(
        br#"{"globalFilter": 3, "setDoneDate": "yes", "statusSettings": {"coreStatuses": 1}}"#,
    )
    .unwrap();
    assert_eq!(s.global_filter, "");
    assert!(s.set_done_date);
    assert_eq!(
        s.status('x').name,
        "Done",
        "core statuses fall back to the defaults"
    );
}

#[test]
fn settings_that_are_not_a_json_object_are_errors() {
    assert!(matches!(
        TasksSettings::from_json(b"{oops"),
        Err(ConfigError::InvalidJson(_))
    ));
    assert!(matches!(
        TasksSettings::from_json(b"[]"),
        Err(ConfigError::WrongShape { .. })
    ));
    let big = vec![b' '; crate::obsidian::config::MAX_CONFIG_BYTES + 1];
    assert!(matches!(
        TasksSettings::from_json(&big),
        Err(ConfigError::TooLarge { .. })
    ));
}

#[test]
fn unknown_status_symbol_is_unknown_todo_toggling_to_x() {
    let s = TasksSettings::default().status('?');
    assert_eq!(s.name, "Unknown");
    assert_eq!(s.next_symbol, 'x');
    assert_eq!(s.status_type, StatusType::Todo);
}

#[test]
fn done_filter_counts_done_cancelled_and_non_task_as_done() {
    // Status Types.md's table.
    for (t, done) in [
        (StatusType::Todo, false),
        (StatusType::InProgress, false),
        (StatusType::OnHold, false),
        (StatusType::Done, true),
        (StatusType::Cancelled, true),
        (StatusType::NonTask, true),
    ] {
        assert_eq!(t.is_done(), done, "{t:?}");
    }
}

// ---- Dates (Filters.md, "Searching for dates") ----

#[test]
fn relative_dates_count_from_today() {
    let t = today();
    assert_eq!(parse_date("today", t), Some(t));
    assert_eq!(parse_date("Tomorrow", t), Some(d(2023, 11, 16)));
    assert_eq!(parse_date("yesterday", t), Some(d(2023, 11, 14)));
    assert_eq!(parse_date("14 days ago", t), Some(d(2023, 11, 1)));
    assert_eq!(parse_date("in two weeks", t), Some(d(2023, 11, 29)));
    // A Wednesday: `tuesday` is the closest one, yesterday.
    assert_eq!(parse_date("tuesday", t), Some(d(2023, 11, 14)));
    assert_eq!(parse_date("next tuesday", t), Some(d(2023, 11, 21)));
    assert_eq!(parse_date("last friday", t), Some(d(2023, 11, 10)));
    assert_eq!(parse_date("25th May 2023", t), Some(d(2023, 5, 25)));
    assert_eq!(parse_date("14 October", t), Some(d(2023, 10, 14)));
    assert_eq!(parse_date("May", t), Some(d(2023, 5, 1)));
    assert_eq!(parse_date("2021-05-25", t), Some(d(2021, 5, 25)));
    assert_eq!(parse_date("2021-02-30", t), None);
    assert_eq!(parse_date("whenever", t), None);
}

#[test]
fn date_ranges_relative_numbered_and_absolute() {
    let t = today();
    assert_eq!(
        parse_range("this week", t),
        range(d(2023, 11, 13), d(2023, 11, 19))
    );
    assert_eq!(
        parse_range("last month", t),
        range(d(2023, 10, 1), d(2023, 10, 31))
    );
    assert_eq!(
        parse_range("next quarter", t),
        range(d(2024, 1, 1), d(2024, 3, 31))
    );
    assert_eq!(
        parse_range("last year", t),
        range(d(2022, 1, 1), d(2022, 12, 31))
    );
    assert_eq!(
        parse_range("2023-W01", t),
        range(d(2023, 1, 2), d(2023, 1, 8))
    );
    assert_eq!(
        parse_range("2023-02", t),
        range(d(2023, 2, 1), d(2023, 2, 28))
    );
    assert_eq!(
        parse_range("2023-Q1", t),
        range(d(2023, 1, 1), d(2023, 3, 31))
    );
    assert_eq!(
        parse_range("2023", t),
        range(d(2023, 1, 1), d(2023, 12, 31))
    );
    assert_eq!(
        parse_range("2023-01-01 2023-01-31", t),
        range(d(2023, 1, 1), d(2023, 1, 31))
    );
    // One invalid end: the filter behaves as the other single date.
    assert_eq!(
        parse_range("2023-01-01 2023-02-30", t),
        range(d(2023, 1, 1), d(2023, 1, 1))
    );
}

// ---- Query parsing ----

#[test]
fn query_lines_comments_continuations_and_options() {
    let q = parse_query(
        "# a comment\nnot done\n(priority is highest) OR \\\n    (priority is lowest)\n\nsort by due reverse\nsort by tag 2\ngroup by filename\nlimit to 5 tasks\nlimit groups 2\nhide backlink\nshow urgency\nshort mode\nexplain\nignore global query\n",
        today(),
    )
    .unwrap();
    assert_eq!(q.filters.len(), 2);
    assert!(matches!(q.filters[1], Filter::Or(ref v) if v.len() == 2));
    assert_eq!(q.sorts[0].key, Key::Date(super::query::DateField::Due));
    assert!(q.sorts[0].reverse);
    assert_eq!(q.sorts[1].key, Key::Tag(2));
    assert_eq!(q.groups[0].key, Key::Filename);
    assert_eq!((q.limit, q.limit_groups), (Some(5), Some(2)));
    assert!(!q.shows(super::query::Element::Backlink));
    assert!(q.shows(super::query::Element::Urgency));
    assert!(q.shows(super::query::Element::DueDate));
    assert!(q.short_mode && q.explain && q.ignore_global_query);
    assert_eq!(
        q.lines[1].text, "(priority is highest) OR (priority is lowest)",
        "the continuation is joined with one space"
    );
}

#[test]
fn unknown_instruction_error_names_its_line_and_text() {
    let err = parse_query("not done\n\n# c\ndue sometime soonish\n", today()).unwrap_err();
    assert!(
        matches!(&err, QueryError::Invalid { line: 4, instruction, .. } if instruction == "due sometime soonish"),
        "{err:?}"
    );
    let err = parse_query("not done\nfrobnicate the tasks", today()).unwrap_err();
    assert_eq!(
        err,
        QueryError::Unknown {
            line: 2,
            instruction: "frobnicate the tasks".into()
        }
    );
    assert!(err.to_string().contains("line 2"));
    assert!(matches!(
        parse_query("priority is urgent", today()),
        Err(QueryError::Invalid { line: 1, .. })
    ));
}

#[test]
fn scripting_instructions_are_refused_with_the_reason() {
    for q in [
        "filter by function task.due.moment?.isSame(moment(), 'day')",
        "sort by function task.description.length",
        "group by function task.file.folder",
    ] {
        let err = parse_query(q, today()).unwrap_err();
        assert!(matches!(err, QueryError::Scripting { line: 1, .. }), "{q}");
        assert!(err.to_string().contains("JavaScript"));
    }
}

#[test]
fn boolean_precedence_is_not_then_xor_then_and_then_or() {
    // Combining Filters.md: `(a) OR (b) AND (c)` is `(a) OR ((b) AND (c))`.
    let q = parse_query(
        "(tag includes #XX) OR (tag includes #YY) AND (tag includes #ZZ)",
        today(),
    )
    .unwrap();
    let Filter::Or(items) = &q.filters[0] else {
        panic!("{:?}", q.filters[0]);
    };
    assert!(matches!(items[0], Filter::Text { .. }));
    assert!(matches!(&items[1], Filter::And(v) if v.len() == 2));
    let q = parse_query("NOT (done) AND NOT (is recurring)", today()).unwrap();
    assert!(
        matches!(&q.filters[0], Filter::And(v) if matches!(v[0], Filter::Not(_)) && matches!(v[1], Filter::Not(_)))
    );
    let q = parse_query("(done) XOR (due today) AND (has id)", today()).unwrap();
    assert!(matches!(&q.filters[0], Filter::And(v) if matches!(v[0], Filter::Xor(..))));
    let q = parse_query("( (done) OR (has id) ) AND (has tags)", today()).unwrap();
    assert!(matches!(&q.filters[0], Filter::And(v) if matches!(v[0], Filter::Or(_))));
    let q = parse_query("[description includes (maybe)] OR [has id]", today()).unwrap();
    assert!(matches!(&q.filters[0], Filter::Or(v) if v.len() == 2));
}

#[test]
fn malformed_boolean_lines_are_errors() {
    for bad in [
        "\"not done\" AND (is recurring)",
        "(not done) AND",
        "(not done) AND (frobnicate)",
        "(not done",
        "(not done) (done)",
    ] {
        assert!(
            matches!(
                parse_query(bad, today()),
                Err(QueryError::Invalid { line: 1, .. })
            ),
            "{bad}"
        );
    }
    let deep = format!("{}(done){}", "( ".repeat(40), " )".repeat(40));
    let err = parse_query(&deep, today()).unwrap_err();
    assert!(err.to_string().contains("nested too deeply"), "{err}");
}

#[test]
fn query_size_and_regex_are_bounded() {
    let long = "not done\n".repeat(super::query::MAX_QUERY_BYTES / 9 + 1);
    assert!(matches!(
        parse_query(&long, today()),
        Err(QueryError::TooLong { .. })
    ));
    let many = "done\n".repeat(super::query::MAX_QUERY_LINES + 1);
    assert!(matches!(
        parse_query(&many, today()),
        Err(QueryError::TooManyLines { .. })
    ));
    let huge = format!("description regex matches /{}/", "a".repeat(2_000));
    assert!(matches!(
        parse_query(&huge, today()),
        Err(QueryError::Invalid { .. })
    ));
    assert!(matches!(
        parse_query("description regex matches /(?=x)/", today()),
        Err(QueryError::Invalid { .. })
    ));
    assert!(matches!(
        parse_query("description regex matches no slashes", today()),
        Err(QueryError::Invalid { .. })
    ));
}

// ---- Evaluation ----

const NOTE: &str = "# Plan
- [ ] pay bills 📅 2023-11-10
- [ ] call mum ⏫ 📅 2023-11-20
- [x] wrote report 📅 2023-11-13 ✅ 2023-11-14
- [/] draft slides 🛫 2023-11-01 ⏳ 2023-11-16
## Later
- [ ] someday maybe #idea
- [-] dropped ❌ 2023-11-02
- [ ] blocked one ⛔ abc
- [ ] blocker 🆔 abc 📅 2023-12-01
  - [ ] sub item 🔽
- plain item, not a task
";

fn vault() -> Vec<TaskRecord> {
    let note = parse_note(NOTE);
    let mut out: Vec<TaskRecord> = note
        .items
        .iter()
        .filter_map(|i| TaskRecord::from_item("work/Project.md", i))
        .collect();
    let other = parse_note("- [ ] #task tagged elsewhere 📅 2023-02-30\n");
    out.extend(
        other
            .items
            .iter()
            .filter_map(|i| TaskRecord::from_item("Inbox.md", i)),
    );
    out
}

/// The descriptions of a query's results, in order, groups flattened.
fn answer(source: &str, settings: &TasksSettings) -> Vec<String> {
    let tasks = vault();
    let (_, r) = run_source(source, &tasks, settings, today()).unwrap();
    r.groups
        .iter()
        .flat_map(|g| g.tasks.iter())
        .map(|&i| tasks[i].fields.description.clone())
        .collect()
}

fn answer_set(source: &str) -> Vec<String> {
    let mut v = answer(source, &TasksSettings::default());
    v.sort();
    v
}

#[test]
fn plain_list_items_are_not_tasks_and_every_checkbox_is() {
    assert_eq!(vault().len(), 10);
}

#[test]
fn date_filters_exclude_tasks_without_that_date() {
    assert_eq!(
        answer_set("due before 2023-11-15"),
        ["pay bills", "wrote report"]
    );
    assert_eq!(
        answer_set("due on or before 2023-11-13"),
        ["pay bills", "wrote report"]
    );
    assert_eq!(answer_set("due after today"), ["blocker", "call mum"]);
    assert_eq!(answer_set("due 2023-11-20"), ["call mum"]);
    assert_eq!(answer_set("due in next week"), ["call mum"]);
    assert_eq!(answer_set("done yesterday"), ["wrote report"]);
    assert_eq!(
        answer_set("cancelled before this month"),
        Vec::<String>::new()
    );
    assert_eq!(answer_set("cancelled in this month"), ["dropped"]);
}

#[test]
fn starts_filters_also_match_tasks_without_a_start_date() {
    // Filters.md: `starts before tomorrow` finds tasks which "EITHER start before today or
    // earlier OR have no start date"; the tip to find only the ones that start:
    // `(starts before tomorrow) AND (has start date)`.
    assert_eq!(answer_set("starts before today").len(), 10);
    let not_after = answer_set("starts after today");
    assert_eq!(not_after.len(), 9);
    assert!(!not_after.contains(&"draft slides".to_owned()));
    assert_eq!(
        answer_set("(starts before tomorrow) AND (has start date)"),
        ["draft slides"]
    );
}

#[test]
fn happens_matches_any_of_start_scheduled_and_due() {
    // this week is 2023-11-13..19: the report is due on the 13th; the slides start on the
    // 1st (no) but are scheduled on the 16th (yes).
    assert_eq!(
        answer_set("happens this week"),
        ["draft slides", "wrote report"]
    );
    assert_eq!(
        answer_set("no happens date"),
        [
            "#task tagged elsewhere",
            "blocked one",
            "dropped",
            "someday maybe #idea",
            "sub item"
        ]
    );
}

#[test]
fn has_no_and_invalid_dates() {
    assert_eq!(
        answer_set("due date is invalid"),
        ["#task tagged elsewhere"]
    );
    assert!(answer_set("has due date").contains(&"#task tagged elsewhere".to_owned()));
    assert_eq!(answer_set("has scheduled date"), ["draft slides"]);
    assert_eq!(answer_set("has created date"), Vec::<String>::new());
}

#[test]
fn done_and_not_done_follow_status_types() {
    assert_eq!(answer_set("done"), ["dropped", "wrote report"]);
    assert_eq!(answer_set("not done").len(), 8);
    assert_eq!(answer_set("status.type is IN_PROGRESS"), ["draft slides"]);
    assert_eq!(
        answer_set("status.type is not TODO"),
        ["draft slides", "dropped", "wrote report"]
    );
    assert_eq!(
        answer_set("status.name includes progress"),
        ["draft slides"]
    );
}

#[test]
fn priority_comparisons_put_none_between_medium_and_low() {
    assert_eq!(answer_set("priority is above none"), ["call mum"]);
    assert_eq!(answer_set("priority is below none"), ["sub item"]);
    assert_eq!(answer_set("priority is high"), ["call mum"]);
    assert_eq!(answer_set("priority is not none"), ["call mum", "sub item"]);
}

#[test]
fn text_filters_are_case_insensitive_substrings_or_regexes() {
    assert_eq!(answer_set("description includes CALL"), ["call mum"]);
    assert_eq!(
        answer_set("description regex matches /^call/"),
        ["call mum"]
    );
    assert_eq!(
        answer_set("description regex matches /^CALL/"),
        Vec::<String>::new()
    );
    assert_eq!(
        answer_set("description regex matches /^CALL/i"),
        ["call mum"]
    );
    assert_eq!(answer_set("tags include #idea"), ["someday maybe #idea"]);
    assert_eq!(answer_set("tag does not include idea").len(), 9);
    assert_eq!(answer_set("heading includes later").len(), 5);
    assert_eq!(
        answer_set("path includes inbox"),
        ["#task tagged elsewhere"]
    );
    assert_eq!(
        answer_set("folder includes work/"),
        answer_set("filename includes project.md")
    );
    assert_eq!(answer_set("root includes /").len(), 10);
    assert_eq!(answer_set("id includes ab"), ["blocker"]);
}

#[test]
fn dependencies_sub_items_and_boolean_lines() {
    assert_eq!(answer_set("is blocked"), ["blocked one"]);
    assert_eq!(answer_set("is blocking"), ["blocker"]);
    assert_eq!(answer_set("has depends on"), ["blocked one"]);
    assert_eq!(answer_set("exclude sub-items").len(), 9);
    assert_eq!(
        answer_set("(due before today) OR (priority is high)"),
        ["call mum", "pay bills", "wrote report"]
    );
    assert_eq!(
        answer_set("(due before today) AND NOT (done)"),
        ["pay bills"]
    );
    assert_eq!(
        answer_set("(has due date) XOR (not done)"),
        [
            "blocked one",
            "draft slides",
            "someday maybe #idea",
            "sub item",
            "wrote report"
        ]
    );
}

#[test]
fn default_sort_is_status_type_then_urgency_then_due_priority_path() {
    // Urgency.md: pay bills 5 days overdue 11.09 + 1.95; call mum due in 5 days 6.51 + 6.0;
    // blocker 16 days ahead 2.4 + 1.95; undated 1.95 (then file order); sub item low 0.0.
    // In progress comes first whatever its urgency.
    assert_eq!(
        answer("not done\npath includes work", &TasksSettings::default()),
        [
            "draft slides",
            "pay bills",
            "call mum",
            "blocker",
            "someday maybe #idea",
            "blocked one",
            "sub item"
        ]
    );
    let u = super::eval::urgency(&vault()[0], today());
    assert!((u - (8.8 + 5.0 * 9.6 / 21.0 + 1.95)).abs() < 1e-9);
}

#[test]
fn user_sorts_come_before_the_default_ones() {
    assert_eq!(
        answer(
            "not done\nhas due date\nsort by due reverse",
            &TasksSettings::default()
        ),
        ["blocker", "call mum", "pay bills", "#task tagged elsewhere"],
        "reverse of: invalid date first, then earliest to latest"
    );
    assert_eq!(
        answer(
            "path includes work\nsort by description\nlimit 3",
            &TasksSettings::default()
        ),
        ["blocked one", "blocker", "call mum"]
    );
}

#[test]
fn groups_by_due_are_named_with_weekday_and_ordered_by_date() {
    let tasks = vault();
    let s = TasksSettings::default();
    let (_, r) = run_source(
        "not done\npath includes work\ngroup by due",
        &tasks,
        &s,
        today(),
    )
    .unwrap();
    let names: Vec<&str> = r.groups.iter().map(|g| g.names[0].as_str()).collect();
    assert_eq!(
        names,
        [
            "2023-11-10 Friday",
            "2023-11-20 Monday",
            "2023-12-01 Friday",
            "No due date"
        ]
    );
    assert_eq!(r.groups[3].tasks.len(), 4);
    let (_, r) = run_source(
        "group by status.type\ngroup by priority reverse",
        &tasks,
        &s,
        today(),
    )
    .unwrap();
    let first: Vec<Vec<String>> = r.groups.iter().map(|g| g.names.clone()).collect();
    assert_eq!(first[0], ["IN_PROGRESS", "Normal priority"]);
    assert_eq!(first[1], ["TODO", "Low priority"]);
    assert_eq!(first[2], ["TODO", "Normal priority"]);
    assert_eq!(first[3], ["TODO", "High priority"]);
    assert_eq!(first.last().unwrap(), &["CANCELLED", "Normal priority"]);
}

#[test]
fn a_task_with_two_tags_is_in_both_tag_groups() {
    let note = parse_note("- [ ] one #a #b\n- [ ] two\n");
    let tasks: Vec<TaskRecord> = note
        .items
        .iter()
        .filter_map(|i| TaskRecord::from_item("n.md", i))
        .collect();
    let s = TasksSettings::default();
    let (_, r) = run_source("group by tags", &tasks, &s, today()).unwrap();
    let names: Vec<&str> = r.groups.iter().map(|g| g.names[0].as_str()).collect();
    assert_eq!(names, ["#a", "#b", "(No tags)"]);
    assert_eq!(r.shown, 2);
}

#[test]
fn limit_applies_before_grouping_and_limit_groups_within_each() {
    let tasks = vault();
    let s = TasksSettings::default();
    let (_, r) = run_source("not done\nlimit 2", &tasks, &s, today()).unwrap();
    assert_eq!((r.matched, r.shown), (8, 2));
    let (_, r) = run_source(
        "not done\ngroup by heading\nlimit groups 1",
        &tasks,
        &s,
        today(),
    )
    .unwrap();
    assert!(r.groups.iter().all(|g| g.tasks.len() == 1));
    assert_eq!(r.groups.len(), 3, "(No heading), Later, Plan");
    assert_eq!(r.groups[0].names, ["(No heading)"]);
}

#[test]
fn limit_reads_every_form_of_the_limiting_docs() {
    // Limiting.md: `limit to <number> tasks`, shorthand `limit <number>`; `limit groups to
    // <number> tasks`, shorthand `limit groups <number>`.
    for (line, total, groups) in [
        ("limit to 50 tasks", Some(50), None),
        ("limit 50", Some(50), None),
        ("limit to 50", Some(50), None),
        ("limit 1 task", Some(1), None),
        ("limit groups to 5 tasks", None, Some(5)),
        ("limit groups 5", None, Some(5)),
        ("limit groups to 5", None, Some(5)),
        ("LIMIT GROUPS TO 1 TASK", None, Some(1)),
    ] {
        let q = parse_query(line, today()).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!((q.limit, q.limit_groups), (total, groups), "{line}");
    }
    for bad in [
        "limit",
        "limit to",
        "limit groups to many tasks",
        "limit 5 apples",
    ] {
        assert!(
            matches!(parse_query(bad, today()), Err(QueryError::Invalid { .. })),
            "{bad}"
        );
    }
    let tasks = vault();
    let s = TasksSettings::default();
    // "If either limit option prevents any tasks from being displayed in the results, the
    // total number will be shown": `50 of 686 tasks`.
    let (q, r) = run_source("not done\nlimit to 2\nhide backlink", &tasks, &s, today()).unwrap();
    assert_eq!((r.matched, r.shown), (8, 2));
    assert!(
        render_markdown(&r, &tasks, &q, &s, today()).ends_with("\n2 of 8 tasks\n"),
        "{}",
        render_markdown(&r, &tasks, &q, &s, today())
    );
    // At most N tasks in each group; without `group by` the limit is ignored.
    let (q, r) = run_source(
        "not done\ngroup by heading\nlimit groups to 1",
        &tasks,
        &s,
        today(),
    )
    .unwrap();
    assert_eq!(r.groups.len(), 3);
    assert!(r.groups.iter().all(|g| g.tasks.len() == 1), "{r:?}");
    assert_eq!((r.matched, r.shown), (8, 3));
    let md = render_markdown(&r, &tasks, &q, &s, today());
    assert!(md.ends_with("\n3 of 8 tasks\n"), "{md}");
    let (_, r) = run_source("not done\nlimit groups to 1", &tasks, &s, today()).unwrap();
    assert_eq!(r.groups[0].tasks.len(), 8);
}

#[test]
fn global_filter_decides_what_is_a_task_and_global_query_runs_first() {
    let mut s = TasksSettings {
        global_filter: "#task".into(),
        ..TasksSettings::default()
    };
    assert_eq!(answer("", &s), ["#task tagged elsewhere"]);
    // `description` searches without the global filter.
    assert_eq!(
        answer("description includes #task", &s),
        Vec::<String>::new()
    );
    s.global_filter.clear();
    s.global_query = "path includes inbox".into();
    assert_eq!(answer("", &s), ["#task tagged elsewhere"]);
    assert_eq!(answer("ignore global query\ndone", &s).len(), 2);
    s.global_query = "nonsense here".into();
    let tasks = vault();
    assert!(matches!(
        run_source("", &tasks, &s, today()),
        Err(super::eval::EvalError::GlobalQuery(_))
    ));
}

fn many_tasks(n: usize) -> Vec<TaskRecord> {
    (0..n)
        .map(|i| TaskRecord {
            path: format!("notes/n{i}.md"),
            heading: None,
            line: 0,
            status: ' ',
            fields: crate::obsidian::dataview::TasksFields {
                description: format!("task {i} {}", "word ".repeat(40)),
                ..Default::default()
            },
            tags: Vec::new(),
            is_sub_item: false,
        })
        .collect()
}

#[test]
fn step_budget_stops_long_queries_inside_the_filter_loop() {
    use crate::obsidian::budget::Spent;
    use std::time::Duration;
    let tasks = many_tasks(2_000);
    let s = TasksSettings::default();
    let budget = Budget::with(100_000, Duration::from_secs(60));
    let q = super::query::parse_query("description regex matches /zzz/", today(), &budget).unwrap();
    let fine = super::eval::run(&q, &tasks, &s, today(), &budget).unwrap();
    assert_eq!(fine.matched, 0);
    let many = "(description regex matches /zzz/) OR ".repeat(50) + "(done)";
    let budget = Budget::with(100_000, Duration::from_secs(60));
    let q = super::query::parse_query(&many, today(), &budget).unwrap();
    assert_eq!(
        super::eval::run(&q, &tasks, &s, today(), &budget),
        Err(EvalError::Spent(Spent::Steps(100_000)))
    );
}

/// A pool of its own, so that other tests' budgets do not change what this one sees.
fn own_pool(capacity: u64) -> &'static crate::obsidian::budget::Pool {
    Box::leak(Box::new(crate::obsidian::budget::Pool::new(capacity)))
}

#[test]
fn regexes_are_charged_before_they_compile_and_a_query_of_many_is_refused_by_bytes() {
    use super::query::REGEX_CHARGE;
    use crate::obsidian::budget::Spent;
    // 16 MiB hold eight regexes: the ninth line is refused before it is compiled.
    let budget = Budget::new()
        .max_bytes(8 * REGEX_CHARGE)
        .in_pool(own_pool(1 << 30));
    let many: String = (0..20)
        .map(|i| format!("path regex matches /\\w{{20}}{i}/\n"))
        .collect();
    assert_eq!(
        super::query::parse_query(&many, today(), &budget).unwrap_err(),
        QueryError::Spent {
            line: 9,
            spent: Spent::Bytes(8 * REGEX_CHARGE)
        }
    );
    assert_eq!(budget.bytes_used(), 8 * REGEX_CHARGE);
    // Through run_source the error still says which budget was spent.
    let budget = Budget::new()
        .max_bytes(8 * REGEX_CHARGE)
        .in_pool(own_pool(1 << 30));
    let e = super::eval::run_source(&many, &[], &TasksSettings::default(), today(), &budget)
        .unwrap_err();
    assert_eq!(e.spent(), Some(Spent::Bytes(8 * REGEX_CHARGE)));
    // 560 lines of one pattern compile it once, for the charge of one.
    let budget = Budget::new()
        .max_bytes(8 * REGEX_CHARGE)
        .in_pool(own_pool(1 << 30));
    let same = "path regex matches /\\w{20}/\n".repeat(560);
    let q = super::query::parse_query(&same, today(), &budget).unwrap();
    assert_eq!(q.filters.len(), 560);
    assert_eq!(budget.bytes_used(), REGEX_CHARGE);
    let regex = |f: &Filter| match f {
        Filter::Text {
            matcher: super::query::Matcher::Regex(r),
            ..
        } => r.clone(),
        other => panic!("{other:?}"),
    };
    assert!(std::sync::Arc::ptr_eq(
        &regex(&q.filters[0]),
        &regex(&q.filters[559])
    ));
    // A pattern that does not compile gives its charge back.
    let budget = Budget::new().in_pool(own_pool(1 << 30));
    assert!(super::query::parse_query("path regex matches /(/", today(), &budget).is_err());
    assert_eq!(budget.bytes_used(), 0);
}

#[test]
fn regexes_wait_for_the_process_pool_and_are_refused_busy_when_it_stays_drawn_down() {
    use super::query::REGEX_CHARGE;
    use crate::obsidian::budget::Spent;
    let pool = own_pool(3 * REGEX_CHARGE);
    let other = Budget::new().in_pool(pool);
    other.alloc(2 * REGEX_CHARGE).unwrap();
    let budget = Budget::new().in_pool(pool);
    let q = "path regex matches /a/\npath regex matches /b/\n";
    assert_eq!(
        super::query::parse_query(q, today(), &budget).unwrap_err(),
        QueryError::Spent {
            line: 2,
            spent: Spent::Busy
        }
    );
    drop(other);
    assert!(super::query::parse_query(q, today(), &budget).is_ok());
}

#[test]
fn a_cancelled_budget_stops_a_query_inside_its_filter_loop() {
    use crate::obsidian::budget::Spent;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    let tasks = many_tasks(5_000);
    let s = TasksSettings::default();
    // The stop check says "cancelled" from its second reading on: the first (as the query
    // starts) passes, so the one that stops it is read inside the loop over the tasks.
    let readings = Arc::new(AtomicU32::new(0));
    let seen = readings.clone();
    let budget = Budget::new().stop_when(move || seen.fetch_add(1, Ordering::Relaxed) >= 1);
    let q = parse_query("description includes task", today()).unwrap();
    assert_eq!(
        super::eval::run(&q, &tasks, &s, today(), &budget),
        Err(EvalError::Spent(Spent::Cancelled))
    );
    assert!(readings.load(Ordering::Relaxed) >= 2);
    let never = Budget::new().stop_when(|| false);
    assert_eq!(
        super::eval::run(&q, &tasks, &s, today(), &never)
            .unwrap()
            .matched,
        5_000
    );
    // Cancelled before it starts: no task is looked at.
    let at_once = Budget::new().stop_when(|| true);
    assert_eq!(
        super::query::parse_query("not done", today(), &at_once).unwrap_err(),
        QueryError::Spent {
            line: 1,
            spent: Spent::Cancelled
        }
    );
}

#[test]
fn a_tiny_deadline_stops_a_query_inside_its_filter_loop() {
    use crate::obsidian::budget::Spent;
    use std::time::Duration;
    let tasks = many_tasks(5_000);
    let s = TasksSettings::default();
    // Each reading of the stop check takes 40 ms against a 60 ms deadline: the reading as the
    // query starts is in time, the next one (in the loop over the tasks) is past it.
    let budget = Budget::with(u64::MAX, Duration::from_millis(60)).stop_when(|| {
        std::thread::sleep(Duration::from_millis(40));
        false
    });
    let q = parse_query("description includes task\nsort by description", today()).unwrap();
    assert_eq!(
        super::eval::run(&q, &tasks, &s, today(), &budget),
        Err(EvalError::Spent(Spent::Time(Duration::from_millis(60))))
    );
}

#[test]
fn rendering_shows_fields_in_tasks_order_and_respects_hide() {
    let tasks = vault();
    let s = TasksSettings::default();
    let q = parse_query("", today()).unwrap();
    assert_eq!(
        render_task(&tasks[1], &q, &s, today()),
        "- [ ] call mum ⏫ 📅 2023-11-20 ([[work/Project#Plan|Project > Plan]])"
    );
    let q = parse_query("hide backlink\nhide due date\nhide priority", today()).unwrap();
    assert_eq!(render_task(&tasks[1], &q, &s, today()), "- [ ] call mum");
    let q = parse_query("short mode\nhide backlink", today()).unwrap();
    assert_eq!(
        render_task(&tasks[3], &q, &s, today()),
        "- [/] draft slides 🛫 ⏳"
    );
    let q = parse_query("due 2023-11-20\ngroup by priority\nhide backlink", today()).unwrap();
    let r = run(&q, &tasks, &s, today()).unwrap();
    assert_eq!(
        render_markdown(&r, &tasks, &q, &s, today()),
        "#### High priority\n\n- [ ] call mum ⏫ 📅 2023-11-20\n\n\n1 task\n"
    );
}

#[test]
fn removed_global_filter_is_not_rendered() {
    let tasks = vault();
    let s = TasksSettings {
        global_filter: "#task".into(),
        remove_global_filter: true,
        ..TasksSettings::default()
    };
    let q = parse_query("hide backlink", today()).unwrap();
    assert_eq!(
        render_task(&tasks[9], &q, &s, today()),
        "- [ ] tagged elsewhere"
    );
}

// ---- Explaining queries (Explaining Queries.md, Line Continuations.md) ----

/// The explanation of `source` on 2022-10-21, the day of the docs' examples, under a global
/// query.
fn explained(source: &str, global_query: &str) -> String {
    let s = TasksSettings {
        global_query: global_query.into(),
        ..TasksSettings::default()
    };
    let (_, r) = run_source(source, &[], &s, d(2022, 10, 21)).unwrap();
    r.explanation.expect("the query says explain")
}

#[test]
fn explain_writes_the_docs_examples_as_the_plugin_does() {
    // dates in filters are expanded, `starts` also matching no start date.
    assert_eq!(
        explained(
            r#"starts after 2 years ago
scheduled after 1 week ago
due before tomorrow
explain
"#,
            ""
        ),
        r#"Explanation of this Tasks code block query:

  starts after 2 years ago =>
    start date is after 2020-10-21 (Wednesday 21st October 2020) OR no start date

  scheduled after 1 week ago =>
    scheduled date is after 2022-10-14 (Friday 14th October 2022)

  due before tomorrow =>
    due date is before 2022-10-22 (Saturday 22nd October 2022)
"#
    );
    // regular expressions are shown as compiled.
    assert_eq!(
        explained(
            r#"explain
path regex matches /^Root/Sub-Folder/Sample File\.md/i
"#,
            ""
        ),
        r#"Explanation of this Tasks code block query:

  path regex matches /^Root/Sub-Folder/Sample File\.md/i =>
    using regex:     '^Root\/Sub-Folder\/Sample File\.md' with flag 'i'
"#
    );
    // Boolean combinations are displayed.
    assert_eq!(
        explained(
            r#"explain
not done
(due before tomorrow) AND (is recurring)
"#,
            ""
        ),
        r#"Explanation of this Tasks code block query:

  not done =>
    status type is TODO or IN_PROGRESS or ON_HOLD

  (due before tomorrow) AND (is recurring) =>
    AND (All of):
      due before tomorrow =>
        due date is before 2022-10-22 (Saturday 22nd October 2022)
      is recurring
"#
    );
    // more complex combinations are displayed.
    assert_eq!(
        explained(
            r#"explain
(                                                                                       \
    (description includes 1) AND (description includes 2) AND (description includes 3)  \
) OR (                                                                                  \
    (description includes 5) AND (description includes 6) AND (description includes 7)  \
)                                                                                       \
AND NOT (description includes 7)
"#,
            ""
        ),
        r#"Explanation of this Tasks code block query:

  (                                                                                       \
      (description includes 1) AND (description includes 2) AND (description includes 3)  \
  ) OR (                                                                                  \
      (description includes 5) AND (description includes 6) AND (description includes 7)  \
  )                                                                                       \
  AND NOT (description includes 7)
   =>
  ( (description includes 1) AND (description includes 2) AND (description includes 3) ) OR ( (description includes 5) AND (description includes 6) AND (description includes 7) ) AND NOT (description includes 7) =>
    OR (At least one of):
      AND (All of):
        description includes 1
        description includes 2
        description includes 3
      AND (All of):
        AND (All of):
          description includes 5
          description includes 6
          description includes 7
        NOT:
          description includes 7
"#
    );
    // a continued line is shown as written, then joined.
    assert_eq!(
        explained(
            r#"(priority is highest) OR       \
    (priority is lowest)
explain
"#,
            ""
        ),
        r#"Explanation of this Tasks code block query:

  (priority is highest) OR       \
      (priority is lowest)
   =>
  (priority is highest) OR (priority is lowest) =>
    OR (At least one of):
      priority is highest
      priority is lowest
"#
    );
    // Two backslashes at the end of a line are one.
    assert_eq!(
        explained(
            "# Search for a single backslash:\ndescription includes \\\\\nexplain\n",
            ""
        ),
        "Explanation of this Tasks code block query:\n\n  description includes \\\\ =>\n  description includes \\\n"
    );
    // The global filter is said first; a query without filters says so.
    let s = TasksSettings {
        global_filter: "#task".into(),
        ..TasksSettings::default()
    };
    let (_, r) = run_source("explain", &[], &s, today()).unwrap();
    assert_eq!(
        r.explanation.unwrap(),
        "Only tasks containing the global filter '#task'.\n\nExplanation of this Tasks code block query:\n\n  No filters supplied. All tasks will match the query.\n"
    );
    // Groups, sorts, layout and limits follow the filters; `explain` is not repeated.
    assert_eq!(
        explained(
            "explain\nlimit groups 1\nshort mode\nsort by path\ngroup by priority reverse\nlimit to 1 task\nhappens 2022-10-01 2022-10-07\ndone",
            ""
        ),
        r#"Explanation of this Tasks code block query:

  happens 2022-10-01 2022-10-07 =>
    due, start or scheduled date is between:
      2022-10-01 (Saturday 1st October 2022) and
      2022-10-07 (Friday 7th October 2022) inclusive

  done =>
    status type is DONE or CANCELLED or NON_TASK

  group by priority reverse

  sort by path

  short mode

  At most 1 task.

  At most 1 task per group (if any "group by" options are supplied).
"#
    );
    // Without `explain`, none.
    let (_, r) = run_source("not done", &[], &TasksSettings::default(), today()).unwrap();
    assert_eq!(r.explanation, None);
    // The global query is displayed.
    assert_eq!(
        explained(
            r#"not done
due next week
explain
"#,
            r#"limit 50
heading includes tasks
"#
        ),
        r#"Explanation of the global query:

  heading includes tasks

  At most 50 tasks.

Explanation of this Tasks code block query:

  not done =>
    status type is TODO or IN_PROGRESS or ON_HOLD

  due next week =>
    due date is between:
      2022-10-24 (Monday 24th October 2022) and
      2022-10-30 (Sunday 30th October 2022) inclusive
"#
    );
}

// ---- Toggling (Toggling and Editing Statuses.md, Recurring Tasks.md) ----

fn toggle(line: &str, s: &TasksSettings, today: NaiveDate) -> Vec<String> {
    toggle_line(line, s, today).unwrap()
}

#[test]
fn toggling_done_adds_the_done_date_and_undoing_removes_it() {
    let s = TasksSettings::default();
    assert_eq!(
        toggle("- [ ] write report 📅 2023-11-20", &s, today()),
        ["- [x] write report 📅 2023-11-20 ✅ 2023-11-15"]
    );
    assert_eq!(
        toggle("    * [x] write report ✅ 2023-11-14", &s, today()),
        ["    * [ ] write report"]
    );
    assert_eq!(
        toggle("1. [ ] numbered ^blk-1", &s, today()),
        ["1. [x] numbered ✅ 2023-11-15 ^blk-1"]
    );
    let no_dates = TasksSettings {
        set_done_date: false,
        ..TasksSettings::default()
    };
    assert_eq!(toggle("- [ ] a", &no_dates, today()), ["- [x] a"]);
}

#[test]
fn toggling_into_cancelled_adds_the_cancelled_date() {
    let mut s = TasksSettings::default();
    s.statuses[0].next_symbol = '-';
    assert_eq!(
        toggle("- [ ] dropped idea", &s, today()),
        ["- [-] dropped idea ❌ 2023-11-15"]
    );
    assert_eq!(
        toggle("- [-] dropped idea ❌ 2023-11-15", &s, today()),
        ["- [ ] dropped idea"]
    );
}

#[test]
fn non_task_statuses_never_get_done_dates_or_recur() {
    let mut s = TasksSettings::default();
    s.statuses.push(Status {
        symbol: 'P',
        name: "Pro".into(),
        next_symbol: 'C',
        status_type: StatusType::NonTask,
    });
    s.statuses.push(Status {
        symbol: 'C',
        name: "Con".into(),
        next_symbol: 'P',
        status_type: StatusType::NonTask,
    });
    assert_eq!(
        toggle("- [P] cheap 🔁 every day 📅 2023-11-15", &s, today()),
        ["- [C] cheap 🔁 every day 📅 2023-11-15"]
    );
}

#[test]
fn recurring_basic_example_puts_the_next_task_above() {
    // Recurring Tasks.md, Basic Example.
    let s = TasksSettings::default();
    assert_eq!(
        toggle(
            "- [ ] take out the trash 🔁 every Sunday 📅 2021-04-25",
            &s,
            d(2021, 4, 24)
        ),
        [
            "- [ ] take out the trash 🔁 every Sunday 📅 2021-05-02",
            "- [x] take out the trash 🔁 every Sunday 📅 2021-04-25 ✅ 2021-04-24",
        ]
    );
    let created = TasksSettings {
        set_created_date: true,
        ..TasksSettings::default()
    };
    assert_eq!(
        toggle(
            "- [ ] take out the trash 🔁 every Sunday 📅 2021-04-25",
            &created,
            d(2023, 3, 10)
        ),
        [
            "- [ ] take out the trash 🔁 every Sunday ➕ 2023-03-10 📅 2021-05-02",
            "- [x] take out the trash 🔁 every Sunday 📅 2021-04-25 ✅ 2023-03-10",
        ]
    );
}

#[test]
fn recurrence_counts_from_the_original_date_or_from_today_when_done() {
    let s = TasksSettings::default();
    assert_eq!(
        toggle(
            "- [ ] sweep the floors 🔁 every week ⏳ 2021-02-06",
            &s,
            d(2022, 2, 13)
        )[0],
        "- [ ] sweep the floors 🔁 every week ⏳ 2021-02-13"
    );
    assert_eq!(
        toggle(
            "- [ ] sweep the floors 🔁 every week when done ⏳ 2021-02-06",
            &s,
            d(2022, 2, 13)
        ),
        [
            "- [ ] sweep the floors 🔁 every week when done ⏳ 2022-02-20",
            "- [x] sweep the floors 🔁 every week when done ⏳ 2021-02-06 ✅ 2022-02-13",
        ]
    );
}

#[test]
fn other_dates_keep_their_distance_from_the_reference_date() {
    let s = TasksSettings::default();
    assert_eq!(
        toggle(
            "-   [ ] Mow the lawn 🔁 every 2 weeks ⏳ 2021-10-28 📅 2021-10-30",
            &s,
            d(2021, 10, 30)
        )[0],
        "-   [ ] Mow the lawn 🔁 every 2 weeks ⏳ 2021-11-11 📅 2021-11-13"
    );
}

#[test]
fn monthly_rules_last_day_and_skipped_31sts() {
    let s = TasksSettings::default();
    let next = |line: &str| toggle(line, &s, d(2022, 1, 1))[0].clone();
    assert_eq!(
        next("- [ ] do stuff 🔁 every month on the last 📅 2022-01-31"),
        "- [ ] do stuff 🔁 every month on the last 📅 2022-02-28"
    );
    assert_eq!(
        next("- [ ] do stuff 🔁 every month on the last 📅 2022-05-31"),
        "- [ ] do stuff 🔁 every month on the last 📅 2022-06-30"
    );
    assert_eq!(
        next("- [ ] do stuff 🔁 every month on the 31st 📅 2022-01-31"),
        "- [ ] do stuff 🔁 every month on the 31st 📅 2022-03-31"
    );
    assert_eq!(
        next("- [ ] do stuff 🔁 every month on the 31st 📅 2022-03-31"),
        "- [ ] do stuff 🔁 every month on the 31st 📅 2022-05-31"
    );
    assert_eq!(
        next("- [ ] do stuff 🔁 every month on the 31st 📅 2022-07-31"),
        "- [ ] do stuff 🔁 every month on the 31st 📅 2022-08-31"
    );
    // `every month`: a day the next month lacks moves earlier, and stays there.
    for (from, to) in [
        ("2021-10-31", "2021-11-30"),
        ("2022-01-30", "2022-02-28"),
        ("2022-02-28", "2022-03-28"),
    ] {
        assert_eq!(
            next(&format!("- [ ] do stuff 🔁 every month 📅 {from}")),
            format!("- [ ] do stuff 🔁 every month 📅 {to}")
        );
    }
    assert_eq!(
        next("- [ ] pay 🔁 every weekday 📅 2023-11-17"),
        "- [ ] pay 🔁 every weekday 📅 2023-11-20"
    );
    assert_eq!(
        next("- [ ] gym 🔁 every week on Tuesday, Friday 📅 2023-11-14"),
        "- [ ] gym 🔁 every week on Tuesday, Friday 📅 2023-11-17"
    );
    assert_eq!(
        next("- [ ] rent 🔁 every year 📅 2024-02-29"),
        "- [ ] rent 🔁 every year 📅 2025-02-28"
    );
}

#[test]
fn custom_status_cycle_and_next_line_setting() {
    // Recurring Tasks and Custom Statuses.md, worked example: Todo -> In Progress -> Done.
    let mut s = TasksSettings {
        recurrence_on_next_line: true,
        ..TasksSettings::default()
    };
    s.statuses[0].next_symbol = '/';
    let first = toggle(
        "- [ ] Do something 🔁 every day 📅 2023-10-15",
        &s,
        d(2023, 10, 15),
    );
    assert_eq!(first, ["- [/] Do something 🔁 every day 📅 2023-10-15"]);
    assert_eq!(
        toggle(&first[0], &s, d(2023, 10, 15)),
        [
            "- [x] Do something 🔁 every day 📅 2023-10-15 ✅ 2023-10-15",
            "- [ ] Do something 🔁 every day 📅 2023-10-16",
        ]
    );
    // When DONE is followed by CANCELLED, the new recurrence skips to TODO.
    s.statuses[1].next_symbol = '-';
    assert_eq!(
        toggle(
            "- [/] Do something 🔁 every day 📅 2024-10-16",
            &s,
            d(2023, 10, 16)
        ),
        [
            "- [x] Do something 🔁 every day 📅 2024-10-16 ✅ 2023-10-16",
            "- [ ] Do something 🔁 every day 📅 2024-10-17",
        ]
    );
}

#[test]
fn setting_a_status_directly_adds_dates_and_recurs_like_toggling() {
    let mut s = TasksSettings::default();
    s.statuses.push(Status {
        symbol: 'd',
        name: "Delegated done".into(),
        next_symbol: ' ',
        status_type: StatusType::Done,
    });
    let set = |line: &str, c: char| super::toggle::set_status_line(line, c, &s, today()).unwrap();
    assert_eq!(
        set("- [ ] wash 🔁 every day 📅 2023-11-15", 'x'),
        [
            "- [ ] wash 🔁 every day 📅 2023-11-16",
            "- [x] wash 🔁 every day 📅 2023-11-15 ✅ 2023-11-15",
        ]
    );
    // Toggling.md: from one DONE status to another keeps the done date and does not recur.
    assert_eq!(
        set("- [x] wash 🔁 every day 📅 2023-11-15 ✅ 2023-11-14", 'd'),
        ["- [d] wash 🔁 every day 📅 2023-11-15 ✅ 2023-11-14"]
    );
    assert_eq!(set("- [ ] draft", '/'), ["- [/] draft"]);
    assert_eq!(
        set("- [x] old ✅ 2023-11-01", '-'),
        ["- [-] old ❌ 2023-11-15"]
    );
}

#[test]
fn on_completion_delete_drops_the_done_line() {
    let s = TasksSettings::default();
    assert_eq!(
        toggle(
            "- [ ] water plants 🔁 every day 🏁 delete 📅 2023-11-15",
            &s,
            today()
        ),
        ["- [ ] water plants 🔁 every day 🏁 delete 📅 2023-11-16"]
    );
    assert!(toggle("- [ ] once 🏁 delete", &s, today()).is_empty());
}

#[test]
fn remove_scheduled_date_on_recurrence_counts_from_start() {
    let s = TasksSettings {
        remove_scheduled_date_on_recurrence: true,
        ..TasksSettings::default()
    };
    assert_eq!(
        toggle(
            "- [ ] plan 🔁 every week 🛫 2023-11-13 ⏳ 2023-11-15",
            &s,
            today()
        )[0],
        "- [ ] plan 🔁 every week 🛫 2023-11-20"
    );
}

#[test]
fn toggle_errors_for_non_tasks_unsupported_rules_and_the_global_filter() {
    let s = TasksSettings::default();
    assert_eq!(
        toggle_line("just text", &s, today()),
        Err(ToggleError::NotATask)
    );
    assert_eq!(
        toggle_line("- plain item", &s, today()),
        Err(ToggleError::NotATask)
    );
    assert!(matches!(
        toggle_line(
            "- [ ] a 🔁 every month on the last Friday 📅 2023-11-24",
            &s,
            today()
        ),
        Err(ToggleError::UnsupportedRecurrence(_))
    ));
    let gf = TasksSettings {
        global_filter: "#task".into(),
        ..TasksSettings::default()
    };
    assert!(matches!(
        toggle_line("- [ ] no filter here", &gf, today()),
        Err(ToggleError::OutsideGlobalFilter(_))
    ));
    assert_eq!(
        toggle("- [ ] #task has it", &gf, today()),
        ["- [x] #task has it ✅ 2023-11-15"]
    );
}

#[test]
fn recurrence_rules_parse_the_documented_forms() {
    use super::toggle::Rule;
    use chrono::Weekday;
    let r = |s: &str| parse_recurrence(s).map(|r| (r.rule, r.when_done));
    assert_eq!(r("every 3 days"), Some((Rule::Days(3), false)));
    assert_eq!(r("every 10 days when done"), Some((Rule::Days(10), true)));
    assert_eq!(r("every weekday"), Some((Rule::Weekday, false)));
    assert_eq!(
        r("every week on Sunday"),
        Some((Rule::WeeksOn(1, vec![Weekday::Sun]), false))
    );
    assert_eq!(
        r("every 3 weeks on Friday"),
        Some((Rule::WeeksOn(3, vec![Weekday::Fri]), false))
    );
    assert_eq!(r("every 2 months"), Some((Rule::Months(2), false)));
    assert_eq!(
        r("every month on the 1st"),
        Some((Rule::MonthDay(1, 1), false))
    );
    assert_eq!(
        r("every month on the last day"),
        Some((Rule::MonthLast(1), false))
    );
    assert_eq!(r("every year"), Some((Rule::Years(1), false)));
    assert_eq!(r("every 0 days"), None);
    assert_eq!(r("sometimes"), None);
}
