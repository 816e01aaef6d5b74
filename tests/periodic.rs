//! Periodic notes through the binary and a real rmcp client: the Periodic Notes plugin's
//! settings for every period, a week that starts on Monday (`weekStart` in `app.json`), ISO
//! week names, notes found by name in subfolders, ranges, templates with the plugin's
//! variables, and the former daily-note tool names still answering.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

use crate::common::{Server, write_tree};
use chrono::{Datelike, Local};
use serde_json::json;

const PLUGIN: &str = r#"{
  "daily": {"enabled": true, "folder": "Daily", "format": "YYYY-MM-DD", "template": ""},
  "weekly": {"enabled": true, "folder": "Weekly", "format": "GGGG-[W]WW", "template": "Templates/Week"},
  "monthly": {"enabled": true, "folder": "Monthly", "format": "", "template": ""},
  "quarterly": {"enabled": false, "folder": "Quarterly", "format": "", "template": ""}
}"#;

const WEEK_TEMPLATE: &str = "# {{title}}\nweek-year {{date:gggg}}, from {{monday:YYYY-MM-DD}} \
to {{sunday:ddd D MMM}}\nnext: {{date+1w:GGGG-[W]WW}}\n{{unknown}}\n";

fn vault() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    write_tree(
        &v,
        &[
            (".obsidian/app.json", r#"{"weekStart": "monday"}"#),
            (".obsidian/community-plugins.json", r#"["periodic-notes"]"#),
            (".obsidian/plugins/periodic-notes/data.json", PLUGIN),
            ("Templates/Week.md", WEEK_TEMPLATE),
            ("Weekly/2026-W49.md", "week 49\n"),
            // Found by its name, in a subfolder the format does not make.
            ("Weekly/2026/2026-W48.md", "week 48\n"),
            // Not weekly notes: outside the folder, hidden, or not a week name.
            ("Elsewhere/2026-W47.md", "not a weekly note\n"),
            // A folder whose name starts like the weekly folder's, sorted among its notes.
            ("Weekly 2/2026-W45.md", "not a weekly note either\n"),
            ("Weekly/.drafts/2026-W46.md", "hidden\n"),
            ("Weekly/Review.md", "not a name the format reads\n"),
            ("Monthly/2026-11.md", "november\n"),
            ("Monthly/2026-12.md", "december\n"),
            ("Daily/2026-12-03.md", "thursday\n"),
        ],
    );
    (tmp, v)
}

async fn server(v: &Path, extra: &[&str]) -> Server {
    let state = v.parent().unwrap().join("state");
    let state = state.to_str().unwrap().to_owned();
    let mut args = vec!["--state-dir", &state, "--no-index-cache"];
    args.extend_from_slice(extra);
    let s = Server::start_with(v, &args).await;
    s.wait_index_ready().await;
    s
}

#[tokio::test]
async fn every_period_is_found_where_the_plugin_settings_put_it() {
    let (_tmp, v) = vault();
    let s = server(&v, &[]).await;
    let r = s
        .ok(
            "get_periodic_note",
            json!({"period": "week", "date": "2026-12-03"}),
        )
        .await;
    assert_eq!(r["path"], "Weekly/2026-W49.md", "{r}");
    assert_eq!(
        (r["date"].as_str(), r["end"].as_str()),
        (Some("2026-11-30"), Some("2026-12-06"))
    );
    assert_eq!(r["exists"], true);
    assert_eq!(r["content"], "week 49\n");
    assert_eq!(r["source"], "periodic-notes");
    assert_eq!(r["format"], "Weekly/GGGG-[W]WW");
    assert_eq!(r["period"], "week");

    // The period follows from the words; the note is found by its name in a subfolder.
    let r = s.ok("get_periodic_note", json!({"date": "2026-W48"})).await;
    assert_eq!(r["path"], "Weekly/2026/2026-W48.md", "{r}");
    assert_eq!(r["content"], "week 48\n");

    let r = s.ok("get_periodic_note", json!({"date": "2026-11"})).await;
    assert_eq!(
        (r["period"].as_str(), r["path"].as_str()),
        (Some("month"), Some("Monthly/2026-11.md"))
    );
    let r = s
        .ok(
            "get_periodic_note",
            json!({"period": "month", "date": "2026-12-31"}),
        )
        .await;
    assert_eq!(r["content"], "december\n");
    let r = s
        .ok("get_periodic_note", json!({"date": "2026-12-03"}))
        .await;
    assert_eq!(
        (r["period"].as_str(), r["content"].as_str()),
        (Some("day"), Some("thursday\n"))
    );
    assert!(r.get("end").is_none(), "{r}");

    // A period the plugin does not turn on: its defaults, and the reply says so.
    let r = s.ok("get_periodic_note", json!({"date": "2026-Q4"})).await;
    assert_eq!(r["exists"], false);
    assert_eq!(r["path"], "2026-Q4.md");
    assert_eq!(r["source"], "default");
    let message = r["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("no quarterly note for 2026-10-01 to 2026-12-31: it would be 2026-Q4.md")
            && message.contains("defaults"),
        "{message}"
    );

    // Relative words count from today, in weeks that start on Monday.
    let today = Local::now().date_naive();
    let monday = today - chrono::Days::new(u64::from(today.weekday().num_days_from_monday()));
    let r = s
        .ok("get_periodic_note", json!({"date": "this week"}))
        .await;
    assert_eq!(r["date"], monday.to_string());
    let r = s
        .ok("get_periodic_note", json!({"date": "last month"}))
        .await;
    let last_month = today.with_day(1).unwrap() - chrono::Months::new(1);
    assert_eq!(r["date"], last_month.to_string());

    for (args, expected) in [
        (
            json!({"date": "2026-W54"}),
            "invalid_argument: `date`: `2026-W54` is not a date",
        ),
        (
            json!({"date": "2026-12-31", "to": "2026-01-01"}),
            "invalid_argument: `to` (2026-01-01) is before `date` (2026-12-31)",
        ),
        (json!({"period": "fortnight"}), "invalid_argument"),
        (
            json!({"date": "x".repeat(5000)}),
            "invalid_argument: `date`: the value is not a date",
        ),
        (
            json!({"to": "/etc/passwd"}),
            "invalid_argument: `to`: the value is not a date",
        ),
    ] {
        let msg = s.err("get_periodic_note", args).await;
        assert!(msg.starts_with(expected), "{msg}");
        assert!(msg.len() < 400, "{msg}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_range_lists_the_existing_notes_of_its_periods_oldest_first() {
    let (_tmp, v) = vault();
    let s = server(&v, &[]).await;
    let r = s
        .ok(
            "get_periodic_note",
            json!({"period": "week", "date": "2026-11-01", "to": "2026-12-31"}),
        )
        .await;
    assert_eq!(
        r["notes"],
        json!([
            {"date": "2026-11-23", "path": "Weekly/2026/2026-W48.md"},
            {"date": "2026-11-30", "path": "Weekly/2026-W49.md"},
        ]),
        "{r}"
    );
    // The range runs from the first period's first day to the last period's last day.
    assert_eq!(
        (r["date"].as_str(), r["end"].as_str()),
        (Some("2026-10-26"), Some("2027-01-03"))
    );
    assert_eq!(r["exists"], true);
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("2 weekly notes from 2026-10-26")
    );
    let r = s
        .ok(
            "get_periodic_note",
            json!({"date": "2026-10", "to": "2026-12"}),
        )
        .await;
    let paths: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["Monthly/2026-11.md", "Monthly/2026-12.md"]);
    let r = s
        .ok("get_periodic_note", json!({"date": "2025", "to": "2025"}))
        .await;
    assert_eq!(
        (r["exists"].as_bool(), r["notes"].as_array().map(Vec::len)),
        (Some(false), Some(0))
    );
    s.stop().await;
}

#[tokio::test]
async fn periodic_notes_are_created_from_their_template_and_appended_to() {
    let (_tmp, v) = vault();
    let s = server(&v, &["--write"]).await;
    let r = s
        .ok(
            "create_note",
            json!({"period": "week", "date": "2026-12-10", "content": "plan"}),
        )
        .await;
    assert_eq!(r["path"], "Weekly/2026-W50.md", "{r}");
    assert_eq!(
        std::fs::read_to_string(v.join("Weekly/2026-W50.md")).unwrap(),
        "# 2026-W50\nweek-year 2026, from 2026-12-07 to Sun 13 Dec\nnext: 2026-W51\n{{unknown}}\n\nplan\n"
    );
    let r = s.call("create_note", json!({"date": "2026-W50"})).await;
    assert_eq!(r.error["code"], "conflict", "{:?}", r.error);
    let msg = s
        .err("create_note", json!({"path": "x.md", "period": "week"}))
        .await;
    assert!(msg.starts_with("invalid_argument: give `path`"), "{msg}");

    // An entry in a weekly note is a plain list item; in a daily note it carries the time.
    s.ok(
        "append_periodic_note",
        json!({"date": "2026-W50", "text": "ship it"}),
    )
    .await;
    let text = std::fs::read_to_string(v.join("Weekly/2026-W50.md")).unwrap();
    assert!(
        text.ends_with("plan\n- ship it\n") || text.ends_with("plan\n\n- ship it\n"),
        "{text:?}"
    );
    // `content`, as the other writing tools call it, and a period by its adjective.
    s.ok(
        "append_periodic_note",
        json!({"period": "monthly", "date": "2027-01-15", "content": "new year"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(v.join("Monthly/2027-01.md")).unwrap(),
        "# 2027-01\n- new year\n"
    );
    s.ok(
        "append_periodic_note",
        json!({"date": "2026-12-03", "text": "called Ada"}),
    )
    .await;
    let daily = std::fs::read_to_string(v.join("Daily/2026-12-03.md")).unwrap();
    let last = daily.lines().last().unwrap();
    assert!(
        last.starts_with("- ") && last.ends_with(" called Ada") && last.as_bytes()[4] == b':',
        "{daily:?}"
    );
    // Both writes are in the history under the note's path.
    let h = s
        .ok("note_history", json!({"path": "Weekly/2026-W50.md"}))
        .await;
    assert!(h.to_string().contains("append_periodic_note"), "{h}");
    s.stop().await;
}

#[tokio::test]
async fn the_former_daily_note_tools_still_answer_but_are_not_listed() {
    let (_tmp, v) = vault();
    let s = server(&v, &["--write"]).await;
    let names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for old in [
        "get_daily_note",
        "append_daily_note",
        "create_daily_note",
        "create_periodic_note",
    ] {
        assert!(!names.iter().any(|n| n == old), "{old} is listed");
    }
    let r = s.ok("get_daily_note", json!({"date": "2026-12-03"})).await;
    assert_eq!(
        (r["path"].as_str(), r["content"].as_str()),
        (Some("Daily/2026-12-03.md"), Some("thursday\n"))
    );
    // `create_daily_note` meant a day: with no arguments it creates today's daily note.
    let r = s.ok("create_daily_note", json!({})).await;
    let today = Local::now()
        .date_naive()
        .format("Daily/%Y-%m-%d.md")
        .to_string();
    assert_eq!(r["path"], today.as_str(), "{r}");
    let r = s
        .ok(
            "append_daily_note",
            json!({"text": "old name", "date": "2026-12-04"}),
        )
        .await;
    assert_eq!(r["path"], "Daily/2026-12-04.md");
    let msg = s.err("no_such_tool", json!({})).await;
    assert!(!msg.contains("get_daily_note"), "{msg}");
    s.stop().await;

    // `--tools` takes the former names too.
    let s = Server::start_with(
        &v,
        &["--no-index-cache", "--tools", "get_daily_note,read_note"],
    )
    .await;
    let names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["get_periodic_note", "read_note"]);
    s.stop().await;
}

#[tokio::test]
async fn iso_week_names_in_sunday_weeks_find_the_note_the_plugin_finds() {
    // Weeks from Sunday, named by ISO week: the week of Thursday 31 December 2026 runs from
    // Sunday the 27th, whose ISO week is 52, to Saturday 2 January; the plugin reads
    // `2026-W53` (Monday the 28th) as that week and `2026-W52` (Monday the 21st) as the week
    // before.
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    write_tree(
        &v,
        &[
            (".obsidian/app.json", r#"{"weekStart": "sunday"}"#),
            (".obsidian/community-plugins.json", r#"["periodic-notes"]"#),
            (".obsidian/plugins/periodic-notes/data.json", PLUGIN),
            ("Templates/Week.md", "# {{title}}\n"),
            ("Weekly/2026-W52.md", "the week of the 20th\n"),
            ("Weekly/2026-W53.md", "the week of the 27th\n"),
        ],
    );
    let s = server(&v, &["--write"]).await;
    for date in ["2026-12-31", "2026-12-27", "2027-01-02"] {
        let r = s
            .ok("get_periodic_note", json!({"period": "week", "date": date}))
            .await;
        assert_eq!(r["path"], "Weekly/2026-W53.md", "{date}: {r}");
        assert_eq!(r["exists"], true, "{date}: {r}");
    }
    let r = s
        .ok(
            "get_periodic_note",
            json!({"period": "week", "date": "2026-12-24"}),
        )
        .await;
    assert_eq!(r["path"], "Weekly/2026-W52.md", "{r}");
    // A new week's note is named from the day given, when that name reads back to its week.
    let r = s
        .ok(
            "append_periodic_note",
            json!({"period": "week", "date": "2027-01-07", "content": "plan"}),
        )
        .await;
    assert_eq!(r["path"], "Weekly/2027-W01.md", "{r}");
    // Sunday 3 January 2027 is in ISO week 53 of 2026 and starts the week of W01's days.
    let r = s
        .ok(
            "get_periodic_note",
            json!({"period": "week", "date": "2027-01-03"}),
        )
        .await;
    assert_eq!(r["path"], "Weekly/2027-W01.md", "{r}");
    s.stop().await;
}
