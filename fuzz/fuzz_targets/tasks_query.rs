//! Fuzzes the Tasks plugin's query language (`obsidian::tasks`): the parser, then the
//! evaluator and renderer over a few fixed tasks, and toggling each line of the input.
//!
//! It must not panic and must finish in time linear in the input: a parse error or a spent
//! budget (steps, time or bytes, under a byte cap; CI runs it with libFuzzer's malloc limit) are
//! fine answers. A query that parses must answer with groups whose task indices are
//! inside the task list, no more tasks shown than matched, and `limit` and `limit groups`
//! respected.

#![no_main]

use std::sync::OnceLock;

use capvault::obsidian::budget::Budget;
use capvault::obsidian::dataview::parse_note;
use capvault::obsidian::tasks::{self, TaskRecord, TasksSettings};
use chrono::NaiveDate;
use libfuzzer_sys::fuzz_target;

const NOTE: &str = "# Plan
- [ ] pay bills 📅 2023-11-10 #money
- [ ] call mum ⏫ 🔁 every week 📅 2023-11-20
- [x] wrote report 📅 2023-11-13 ✅ 2023-11-14
- [/] draft slides 🛫 2023-11-01 ⏳ 2023-11-16
## Later
- [ ] someday maybe #idea #later
- [-] dropped ❌ 2023-11-02
- [ ] blocked one ⛔ abc
- [ ] blocker 🆔 abc 📅 2023-12-01
  - [?] sub item 🔽 📅 2023-02-30
";

fn tasks() -> &'static [TaskRecord] {
    static T: OnceLock<Vec<TaskRecord>> = OnceLock::new();
    T.get_or_init(|| {
        parse_note(NOTE)
            .items
            .iter()
            .filter_map(|i| TaskRecord::from_item("work/Project.md", i))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Some(today) = NaiveDate::from_ymd_opt(2023, 11, 15) else {
        return;
    };
    let tasks = tasks();
    let settings = TasksSettings::default();
    const BYTES: u64 = 32 << 20;
    let budget = Budget::with(2_000_000, std::time::Duration::from_secs(5)).max_bytes(BYTES);
    if let Ok((query, result)) = tasks::run_source(&text, tasks, &settings, today, &budget) {
        assert!(result.shown <= result.matched);
        assert!(result.matched <= tasks.len());
        if let Some(l) = query.limit {
            assert!(result.shown <= l);
        }
        for g in &result.groups {
            assert_eq!(g.names.len(), query.groups.len());
            assert!(g.tasks.iter().all(|&i| i < tasks.len()));
            if let (Some(l), false) = (query.limit_groups, query.groups.is_empty()) {
                assert!(g.tasks.len() <= l);
            }
        }
        let _ = tasks::render_markdown(&result, tasks, &query, &settings, today, &budget);
        let _ = tasks::explain(None, &query, &settings, &budget);
    }
    assert!(budget.bytes_used() <= BYTES, "bytes overrun: {}", budget.bytes_used());
    let _ = TasksSettings::from_json(data);
    for line in text.lines().take(50) {
        if let Ok(lines) = tasks::toggle_line(line, &settings, today) {
            assert!(lines.len() <= 2);
        }
    }
});
