//! `list_tasks` through the real binary and rmcp's client: a small vault written here with
//! tasks of every kind (expected answers worked out by hand from the Tasks plugin's docs:
//! `Queries/Sorting.md` for the default order, `Advanced/Urgency.md` for the scores,
//! `Getting Started/Statuses*` for the status types), changes picked up, hidden and excluded
//! notes never listed, and the obsidian-hub vault's tasks counted against a grep of its files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Server, shared_vault, write_tree};
use chrono::{Days, Local, NaiveDate};
use serde_json::{Value, json};

fn today() -> NaiveDate {
    Local::now().date_naive()
}

/// `today` plus `n` days (negative: before), as YYYY-MM-DD.
fn day(n: i64) -> String {
    let t = today();
    let d = if n >= 0 {
        t.checked_add_days(Days::new(n as u64))
    } else {
        t.checked_sub_days(Days::new(n.unsigned_abs()))
    };
    d.unwrap().to_string()
}

/// The vault: `Projects/Plan.md` holds a task of each status and date kind; hidden, excluded,
/// code and comment tasks must never be listed.
fn vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let plan = format!(
        "---\ntags: [project]\n---\n# Plan\n\n## Now\n\
         - [ ] Call Bob #phone 📅 {t} ⏫\n\
         - [/] Draft report 📅 {t3}\n\
         - [ ] Pay rent 📅 {tm10} 🔁 every month\n\
         - [x] Book hall ✅ {tm1} 📅 {tm2}\n\
         - [-] Old idea ❌ {tm5}\n\
         \n## Later\n\
         - [ ] Read paper ⏳ {tm1} 🔽\n\
         - [ ] Plant beans 🛫 {t2} 📅 {t20} 🔺\n\
         - [?] Ask Ann #phone/mobile\n",
        t = day(0),
        t2 = day(2),
        t3 = day(3),
        t20 = day(20),
        tm1 = day(-1),
        tm2 = day(-2),
        tm5 = day(-5),
        tm10 = day(-10),
    );
    write_tree(
        tmp.path(),
        &[
            ("Projects/Plan.md", plan.as_str()),
            ("Inbox.md", "# Inbox\n\n- [ ] Buy milk #shopping\n"),
            (
                "Code.md",
                "# Code\n\n    - [ ] indented code\n\n```md\n- [ ] in a code block\n```\n\n%%\n- [ ] in a comment\n%%\n",
            ),
            ("Private/Secret.md", "- [ ] excluded task\n"),
            (".hidden/Note.md", "- [ ] hidden task\n"),
        ],
    );
    tmp
}

async fn start(tmp: &tempfile::TempDir) -> Server {
    Server::start_with(tmp.path(), &["--rescan-after", "0", "--exclude", "Private"]).await
}

fn descriptions(r: &Value) -> Vec<String> {
    r["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {r}"))
        .iter()
        .map(|t| t["description"].as_str().unwrap().to_owned())
        .collect()
}

async fn listed(s: &Server, args: Value) -> Vec<String> {
    descriptions(&s.ok("list_tasks", args).await)
}

#[tokio::test]
async fn not_done_tasks_come_in_the_tasks_plugins_default_order_with_their_fields() {
    let tmp = vault();
    let s = start(&tmp).await;
    let r = s.call("list_tasks", json!({})).await;
    assert!(!r.is_error, "{}", r.text);
    let v = &r.structured;
    // In progress first; then to do by urgency: Call Bob 8.8 (due today) + 6 (high) = 14.8,
    // Pay rent 12 (10 days overdue) + 1.95 = 13.95, Plant beans 2.4 (due in 20 days) + 9
    // (highest) - 3 (starts in 2 days) = 8.4, Read paper 5 (scheduled yesterday) + 0 (low);
    // Buy milk and Ask Ann (an unknown status is to do) tie at 1.95, without due date or
    // priority: by path.
    assert_eq!(
        descriptions(v),
        [
            "Draft report",
            "Call Bob #phone",
            "Pay rent",
            "Plant beans",
            "Read paper",
            "Buy milk #shopping",
            "Ask Ann #phone/mobile",
        ]
    );
    assert_eq!(v["total"], 7);
    assert_eq!(v["truncated"], false);
    let items = v["items"].as_array().unwrap();
    let bob = &items[1];
    assert_eq!(bob["path"], "Projects/Plan.md");
    assert_eq!(bob["line"], 7);
    assert_eq!(bob["status"], "todo");
    assert_eq!(bob["symbol"], " ");
    assert_eq!(bob["due"], day(0));
    assert_eq!(bob["priority"], "high");
    assert_eq!(bob["tags"], json!(["#phone"]));
    assert_eq!(bob["section"], "Now");
    assert_eq!(bob["urgency"], 14.8);
    let draft = &items[0];
    assert_eq!(draft["status"], "in_progress");
    assert_eq!(draft["symbol"], "/");
    assert_eq!(draft["line"], 8);
    // 3 days ahead: (11 * 0.8 / 21 + 0.2) * 12 = 7.42857, + 1.95.
    assert_eq!(draft["urgency"], 9.37857);
    let rent = &items[2];
    assert_eq!(rent["recurrence"], "every month");
    assert_eq!(rent["urgency"], 13.95);
    let beans = &items[3];
    assert_eq!(beans["start"], day(2));
    assert_eq!(beans["due"], day(20));
    assert_eq!(beans["priority"], "highest");
    assert_eq!(beans["urgency"], 8.4);
    assert_eq!(beans["section"], "Later");
    let paper = &items[4];
    assert_eq!(paper["scheduled"], day(-1));
    assert_eq!(paper["priority"], "low");
    assert_eq!(paper["urgency"], 5.0);
    assert_eq!(items[5]["path"], "Inbox.md");
    assert_eq!(items[5]["line"], 3);
    assert_eq!(items[5]["section"], "Inbox");
    assert!(items[5].get("due").is_none(), "{}", items[5]);
    assert_eq!(items[6]["symbol"], "?");
    assert_eq!(items[6]["status"], "todo");
    // The text: a count, then each task as Markdown with its place.
    assert!(r.text.starts_with("7 of 7 tasks\n"), "{}", r.text);
    assert!(
        r.text.contains(&format!(
            "- [/] Draft report 📅 {} (Projects/Plan.md:8)\n",
            day(3)
        )),
        "{}",
        r.text
    );
    // Priority, recurrence and dates as the Tasks plugin writes them, in its order.
    for line in [
        format!(
            "- [ ] Call Bob #phone ⏫ 📅 {} (Projects/Plan.md:7)\n",
            day(0)
        ),
        format!(
            "- [ ] Pay rent 🔁 every month 📅 {} (Projects/Plan.md:9)\n",
            day(-10)
        ),
        format!(
            "- [ ] Plant beans 🔺 🛫 {} 📅 {} (Projects/Plan.md:15)\n",
            day(2),
            day(20)
        ),
        format!("- [ ] Read paper 🔽 ⏳ {} (Projects/Plan.md:14)\n", day(-1)),
    ] {
        assert!(r.text.contains(&line), "{line}\n{}", r.text);
    }
    s.stop().await;
}

#[tokio::test]
async fn statuses_dates_priority_tag_place_and_text_filter_the_tasks() {
    let tmp = vault();
    let s = start(&tmp).await;
    // Every status: done and cancelled after the rest.
    let all = s.ok("list_tasks", json!({"status": "any"})).await;
    assert_eq!(all["total"], 9);
    let names = descriptions(&all);
    assert_eq!(&names[7..], ["Book hall", "Old idea"]);
    let done = s.ok("list_tasks", json!({"status": "done"})).await;
    assert_eq!(descriptions(&done), ["Book hall"]);
    assert_eq!(done["items"][0]["done"], day(-1));
    assert_eq!(done["items"][0]["due"], day(-2));
    assert_eq!(done["items"][0]["status"], "done");
    let cancelled = s.ok("list_tasks", json!({"status": "cancelled"})).await;
    assert_eq!(descriptions(&cancelled), ["Old idea"]);
    assert_eq!(cancelled["items"][0]["cancelled"], day(-5));
    assert_eq!(
        listed(&s, json!({"status": "in_progress"})).await,
        ["Draft report"]
    );
    // Due bounds are strict, and a task without a due date never matches one.
    assert_eq!(
        listed(&s, json!({"due_before": day(1)})).await,
        ["Call Bob #phone", "Pay rent"]
    );
    // Due this week.
    assert_eq!(
        listed(&s, json!({"due_after": day(-1), "due_before": day(7)})).await,
        ["Draft report", "Call Bob #phone"]
    );
    assert_eq!(
        listed(&s, json!({"due_after": day(0), "due_before": day(3)})).await,
        Vec::<String>::new()
    );
    assert_eq!(
        listed(&s, json!({"scheduled_before": day(0)})).await,
        ["Read paper"]
    );
    assert_eq!(
        listed(&s, json!({"scheduled_after": day(-1)})).await,
        Vec::<String>::new()
    );
    // At least a priority: `none` leaves out only low and lowest.
    assert_eq!(
        listed(&s, json!({"priority": "high"})).await,
        ["Call Bob #phone", "Plant beans"]
    );
    assert_eq!(
        listed(&s, json!({"priority": "none"})).await,
        [
            "Draft report",
            "Call Bob #phone",
            "Pay rent",
            "Plant beans",
            "Buy milk #shopping",
            "Ask Ann #phone/mobile",
        ]
    );
    // A tag takes the tags nested under it, in any case.
    assert_eq!(
        listed(&s, json!({"tag": "#Phone"})).await,
        ["Call Bob #phone", "Ask Ann #phone/mobile"]
    );
    assert_eq!(
        listed(&s, json!({"tag": "phone/mobile"})).await,
        ["Ask Ann #phone/mobile"]
    );
    assert_eq!(
        listed(&s, json!({"tag": "pho"})).await,
        Vec::<String>::new()
    );
    // A folder, a note (a bare name resolves as read_note resolves it), text in any case.
    assert_eq!(listed(&s, json!({"folder": "Projects"})).await.len(), 6);
    assert_eq!(
        listed(&s, json!({"path": "Inbox"})).await,
        ["Buy milk #shopping"]
    );
    assert_eq!(listed(&s, json!({"text": "BEANS"})).await, ["Plant beans"]);
    // Together.
    assert_eq!(
        listed(
            &s,
            json!({"status": "any", "folder": "Projects", "due_before": day(0), "text": "a"})
        )
        .await,
        ["Pay rent", "Book hall"]
    );
    // Clear errors.
    let e = s
        .err("list_tasks", json!({"due_before": "next fortnight"}))
        .await;
    assert!(e.contains("due_before") && e.contains("YYYY-MM-DD"), "{e}");
    let e = s.err("list_tasks", json!({"status": "open"})).await;
    assert!(e.contains("status"), "{e}");
    let e = s.err("list_tasks", json!({"path": "Nowhere"})).await;
    assert!(e.starts_with("not_found"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn pages_cover_every_task_once_and_a_cursor_is_tied_to_its_arguments() {
    let tmp = vault();
    let s = start(&tmp).await;
    let whole = listed(&s, json!({"status": "any"})).await;
    let pages = s
        .pages("list_tasks", json!({"status": "any", "limit": 4}))
        .await;
    assert_eq!(pages.len(), 3);
    let paged: Vec<String> = pages.iter().flat_map(descriptions).collect();
    assert_eq!(paged, whole);
    let cursor = pages[0]["next_cursor"].as_str().unwrap();
    let e = s
        .err("list_tasks", json!({"status": "done", "cursor": cursor}))
        .await;
    assert!(e.contains("other arguments"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn hidden_excluded_code_and_comment_tasks_never_appear() {
    let tmp = vault();
    let s = start(&tmp).await;
    let all = s
        .ok("list_tasks", json!({"status": "any", "limit": 1000}))
        .await;
    let paths: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert!(
        paths
            .iter()
            .all(|p| *p == "Projects/Plan.md" || *p == "Inbox.md"),
        "{paths:?}"
    );
    assert_eq!(all["total"], 9);
    // Asked for by place, they are refused, not empty.
    let e = s
        .err("list_tasks", json!({"path": ".hidden/Note.md"}))
        .await;
    assert!(!e.contains("hidden task"), "{e}");
    let e = s
        .err("list_tasks", json!({"path": "Private/Secret.md"}))
        .await;
    assert!(!e.contains("excluded task"), "{e}");
    let e = s
        .err("list_tasks", json!({"folder": "Private", "status": "any"}))
        .await;
    assert!(
        e.starts_with("refused") && !e.contains("excluded task"),
        "{e}"
    );
    assert!(
        s.call("list_tasks", json!({"folder": ".hidden"}))
            .await
            .is_error
    );
    s.stop().await;
}

#[tokio::test]
async fn edits_new_notes_renames_and_deletions_reach_the_task_list() {
    let tmp = vault();
    let s = start(&tmp).await;
    assert_eq!(listed(&s, json!({"path": "Inbox.md"})).await.len(), 1);
    // Edited: one task done, one added.
    std::fs::write(
        tmp.path().join("Inbox.md"),
        "# Inbox\n\n- [x] Buy milk #shopping\n- [ ] Buy bread\n",
    )
    .unwrap();
    let r = s
        .eventually(10, "list_tasks", json!({"text": "buy"}), |r| {
            descriptions(r) == ["Buy bread"]
        })
        .await;
    assert_eq!(r["items"][0]["line"], 4);
    // A new note.
    std::fs::write(tmp.path().join("New.md"), "- [ ] Fresh one 📅 2020-01-01\n").unwrap();
    let r = s
        .eventually(10, "list_tasks", json!({"text": "fresh"}), |r| {
            r["total"] == 1
        })
        .await;
    assert_eq!(r["items"][0]["due"], "2020-01-01");
    // Renamed: the tasks follow the note.
    std::fs::create_dir(tmp.path().join("Archive")).unwrap();
    std::fs::rename(tmp.path().join("New.md"), tmp.path().join("Archive/Old.md")).unwrap();
    s.eventually(10, "list_tasks", json!({"text": "fresh"}), |r| {
        r["items"][0]["path"] == "Archive/Old.md" && r["total"] == 1
    })
    .await;
    // Deleted.
    std::fs::remove_file(tmp.path().join("Projects/Plan.md")).unwrap();
    s.eventually(10, "list_tasks", json!({"status": "any"}), |r| {
        r["total"] == 3
    })
    .await;
    s.stop().await;
}

/// Checked by hand against `grep -rnE '^\s*([-*+]|[0-9]+[.)])\s+\[.\](\s|$)'` over the vault's
/// Markdown: 59 lines in 7 notes, of which 26 are tasks. `Ribbons.md` lists 20 (lines 48-67:
/// `x`, `X`, `-`, `/` and 16 other symbols); `T - Thecookiemomma's Daily Log.md` has 5 empty
/// ones (lines 26, 30, 31, 32, 65; its `%%` comments pair as 18-19, 44, 66-100, 104);
/// `Content People.md` one. Not tasks: the one of `🗂️ Vaults.md` (line 47) is inside a `%%`
/// comment (lines 45-48), the 12 lines of `Tip for
/// Keeping Hub TODO lists.md` are in a code block, the one of `T - TODO.md` in a `%%`
/// comment, and the 19 of `ITS Theme.md` are indented 12 spaces past an item whose text
/// starts at column 6, so they continue its paragraph rather than start list items.
#[tokio::test]
async fn obsidian_hub_tasks_match_a_grep_of_its_files() {
    let Some(root) = shared_vault("obsidian-hub") else {
        eprintln!("skipped: ../shared/vaults/obsidian-hub is absent");
        return;
    };
    let s = Server::start_with(&root, &["--no-index-cache"]).await;
    let all = s
        .ok("list_tasks", json!({"status": "any", "limit": 1000}))
        .await;
    assert_eq!(all["total"], 26, "{all}");
    let mut per_note: std::collections::BTreeMap<String, usize> = Default::default();
    for t in all["items"].as_array().unwrap() {
        *per_note
            .entry(
                t["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned(),
            )
            .or_default() += 1;
    }
    assert_eq!(
        per_note.into_iter().collect::<Vec<_>>(),
        [
            ("Content People.md".to_owned(), 1),
            ("Ribbons.md".to_owned(), 20),
            ("T - Thecookiemomma's Daily Log.md".to_owned(), 5),
        ]
    );
    let total = |status: &'static str| {
        let s = &s;
        async move {
            s.ok("list_tasks", json!({"status": status, "limit": 1000}))
                .await["total"]
                .clone()
        }
    };
    // Not done: the 6 empty or unchecked ones, the 17 unknown symbols (`X` among them: Tasks'
    // default statuses have `x` only, and an unknown symbol is of type to do), `/`.
    assert_eq!(total("todo").await, 24);
    assert_eq!(total("done").await, 1);
    assert_eq!(total("cancelled").await, 1);
    assert_eq!(total("in_progress").await, 1);
    let ribbons = s
        .ok(
            "list_tasks",
            json!({"path": "02 - Community Expansions/02.05 All Community Expansions/Themes/Ribbons.md", "status": "any", "text": "regular"}),
        )
        .await;
    assert_eq!(ribbons["items"][0]["line"], 48);
    assert_eq!(ribbons["items"][0]["symbol"], "x");
    s.stop().await;
}

/// A server started on its index cache after the vault changed while it was stopped lists the
/// tasks as they are now (the model is read from the vault, the cache only serves search).
#[tokio::test]
async fn a_restart_on_the_index_cache_lists_the_tasks_as_the_vault_has_them_now() {
    let tmp = vault();
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "--index-cache",
        cache.path().to_str().unwrap(),
        "--exclude",
        "Private",
    ];
    let s = Server::start_with(tmp.path(), &args).await;
    s.wait_index_ready().await;
    s.eventually(30, "vault_info", json!({}), |v| {
        v["index"]["cache_saved"].is_string()
    })
    .await;
    assert_eq!(listed(&s, json!({"path": "Inbox.md"})).await.len(), 1);
    s.stop().await;
    // Changed while no server runs.
    std::fs::write(
        tmp.path().join("Inbox.md"),
        "# Inbox\n\n- [ ] Buy milk #shopping\n- [ ] Call the plumber 📅 2030-01-01\n",
    )
    .unwrap();
    std::fs::remove_file(tmp.path().join("Projects/Plan.md")).unwrap();
    // The stopped server may still hold the cache's lock for a moment: retry.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let s = loop {
        let s = Server::start_with(tmp.path(), &args).await;
        let index = s.wait_index_ready().await;
        let busy = index["cache"]
            .as_str()
            .is_some_and(|c| c.contains("another capvault process"));
        if !busy {
            break s;
        }
        assert!(
            std::time::Instant::now() < until,
            "cache still locked: {index}"
        );
        s.stop().await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let all = s.ok("list_tasks", json!({"status": "any"})).await;
    // Due in more than 14 days: 2.4 + 1.95, before the 1.95 of a task without a due date.
    assert_eq!(
        descriptions(&all),
        ["Call the plumber", "Buy milk #shopping"],
        "{all}"
    );
    assert_eq!(all["items"][0]["due"], "2030-01-01");
    assert_eq!(all["items"][0]["urgency"], 4.35);
    s.stop().await;
}

/// `set_task_status` through the real binary with `--write`: a plain task marked done gets
/// `✅ today`; a recurring one gets its next occurrence above it (Tasks' default), dated one
/// week on from its due date; a dry run changes nothing; a line that is not a task and a line
/// past the end are refused; one restore brings the note back byte for byte.
#[tokio::test]
async fn set_task_status_writes_what_the_tasks_plugin_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let note = "# Chores\r\n\r\n- [ ] buy milk\r\n- [ ] water plants 🔁 every week 📅 2026-12-07\r\ntext\r\n";
    write_tree(tmp.path(), &[("Chores.md", note)]);
    let s = Server::start_with(
        tmp.path(),
        &["--write", "--state-dir", state.path().to_str().unwrap()],
    )
    .await;
    let today = chrono::Local::now().date_naive();
    let read = || std::fs::read_to_string(tmp.path().join("Chores.md")).unwrap();

    let dry = s
        .ok(
            "set_task_status",
            json!({"path": "Chores", "line": 3, "status": "done", "dry_run": true}),
        )
        .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(read(), note);

    s.ok(
        "set_task_status",
        json!({"path": "Chores.md", "line": 3, "status": "done"}),
    )
    .await;
    assert_eq!(
        read(),
        format!(
            "# Chores\r\n\r\n- [x] buy milk ✅ {today}\r\n- [ ] water plants 🔁 every week 📅 2026-12-07\r\ntext\r\n"
        )
    );
    // Toggling the recurring task: the next one (due a week later) above the done one.
    s.ok("set_task_status", json!({"path": "Chores.md", "line": 4}))
        .await;
    assert_eq!(
        read(),
        format!(
            "# Chores\r\n\r\n- [x] buy milk ✅ {today}\r\n- [ ] water plants 🔁 every week 📅 2026-12-14\r\n- [x] water plants 🔁 every week 📅 2026-12-07 ✅ {today}\r\ntext\r\n"
        )
    );
    // The task list sees it at once.
    let open = s.ok("list_tasks", json!({})).await;
    assert_eq!(open["total"], 1, "{open}");
    assert_eq!(open["items"][0]["due"], "2026-12-14");

    let e = s
        .err("set_task_status", json!({"path": "Chores.md", "line": 6}))
        .await;
    assert!(e.contains("line 6") && e.contains("not a task"), "{e}");
    let e = s
        .err("set_task_status", json!({"path": "Chores.md", "line": 60}))
        .await;
    assert!(e.contains("`line` must be 1 to that"), "{e}");
    let e = s
        .err(
            "set_task_status",
            json!({"path": "Chores.md", "line": 3, "status": "finished"}),
        )
        .await;
    assert!(e.contains("status"), "{e}");

    // Each write kept the version it replaced: restoring the first undoes both.
    let history = s.ok("note_history", json!({"path": "Chores.md"})).await;
    let shas: Vec<&str> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["sha256"].as_str().unwrap())
        .collect();
    let original = crate::common::sha256_hex(note);
    assert!(shas.contains(&original.as_str()), "{history}");
    s.ok(
        "restore_note",
        json!({"path": "Chores.md", "sha256": original}),
    )
    .await;
    assert_eq!(read(), note);
    s.stop().await;
}

#[tokio::test]
async fn the_vaults_tasks_settings_give_statuses_their_types_and_apply_the_global_filter() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = json!({
        "globalFilter": "#task",
        "removeGlobalFilter": true,
        "statusSettings": {
            "coreStatuses": [
                {"symbol": " ", "name": "Todo", "nextStatusSymbol": "x", "type": "TODO"},
                {"symbol": "x", "name": "Done", "nextStatusSymbol": " ", "type": "DONE"}
            ],
            "customStatuses": [
                {"symbol": ">", "name": "Deferred", "nextStatusSymbol": "x", "type": "ON_HOLD"},
                {"symbol": "?", "name": "Question", "nextStatusSymbol": " ", "type": "NON_TASK"},
                {"symbol": "d", "name": "Dropped", "nextStatusSymbol": " ", "type": "CANCELLED"}
            ]
        }
    });
    write_tree(
        tmp.path(),
        &[
            (
                ".obsidian/plugins/obsidian-tasks-plugin/data.json",
                settings.to_string().as_str(),
            ),
            (
                "Work.md",
                "- [ ] #task Write spec\n- [>] #task Wait for Ann\n- [?] #task Why now\n\
                 - [d] #task Old plan\n- [ ] Groceries, no filter\n- [x] #task Shipped\n",
            ),
        ],
    );
    let s = Server::start_with(tmp.path(), &["--rescan-after", "0"]).await;
    // Not done: to do and on hold; the checkbox without the global filter is no task, and the
    // filter is left out of the descriptions.
    let r = s.ok("list_tasks", json!({})).await;
    assert_eq!(descriptions(&r), ["Write spec", "Wait for Ann"]);
    assert_eq!(r["items"][1]["status"], "on_hold");
    let typed = |status: &str| {
        let s = &s;
        let status = status.to_owned();
        async move { listed(s, json!({"status": status})).await }
    };
    assert_eq!(typed("on_hold").await, ["Wait for Ann"]);
    assert_eq!(typed("non_task").await, ["Why now"]);
    assert_eq!(typed("cancelled").await, ["Old plan"]);
    assert_eq!(typed("done").await, ["Shipped"]);
    assert_eq!(typed("any").await.len(), 5);
    // The text filter reads the description as shown.
    assert_eq!(listed(&s, json!({"text": "spec"})).await, ["Write spec"]);
    s.stop().await;
}

#[tokio::test]
async fn a_tasks_query_of_many_regexes_stops_within_the_requests_bytes_and_leaves_the_server_up() {
    // Each new pattern is charged what it may hold compiled (2 MiB) before it is compiled,
    // and the clock is read before each: 560 different patterns stop (at the request's 192
    // MiB, or at its time in a debug build) instead of compiling them all (683 MB).
    let tmp = vault();
    let block = |pattern: &str| -> String {
        let lines: String = (0..560)
            .map(|i| format!("path regex matches /{pattern}{i}/\n"))
            .collect();
        format!("```tasks\n{lines}```\n")
    };
    write_tree(
        tmp.path(),
        &[("Words.md", block("\\w{20}")), ("Letters.md", block("x"))],
    );
    let s = start(&tmp).await;
    let r = s.call("run_query", json!({"path": "Words.md"})).await;
    assert!(r.is_error, "{}", r.text);
    assert_eq!(r.error["code"], "budget_exceeded", "{}", r.raw);
    assert!(r.text.contains("Words.md, block 1: line "), "{}", r.text);
    // Patterns quick to compile meet the bound of bytes: about the 96th is refused (the
    // request charged a little before).
    let r = s.call("run_query", json!({"path": "Letters.md"})).await;
    assert_eq!(r.error["code"], "budget_exceeded", "{}", r.raw);
    assert!(
        r.text
            .contains("reading the query: stopped before building more than 192 MiB"),
        "{}",
        r.text
    );
    // One pattern on 560 lines is compiled once: the query runs.
    let same = "path regex matches /\\w{20}/\n".repeat(560);
    let v = s
        .ok("run_query", json!({"language": "tasks", "query": same}))
        .await;
    assert_eq!(v["total"], 0, "{v}");
    // Eight such requests at once draw from the process's one pool: each stops (at its own
    // bound, or busy when the others hold the pool), and the server still answers.
    let q = || s.call("run_query", json!({"path": "Letters.md"}));
    let all = tokio::join!(q(), q(), q(), q(), q(), q(), q(), q());
    for r in [all.0, all.1, all.2, all.3, all.4, all.5, all.6, all.7] {
        assert!(r.is_error, "{}", r.text);
        let code = r.error["code"].as_str().unwrap_or_default().to_owned();
        assert!(code == "budget_exceeded" || code == "busy", "{}", r.raw);
    }
    assert_eq!(listed(&s, json!({"status": "any"})).await.len(), 9);
    s.stop().await;
}

#[tokio::test]
async fn explain_puts_the_plugins_explanation_at_the_start_of_a_tasks_querys_markdown() {
    let tmp = vault();
    let s = start(&tmp).await;
    let v = s
        .ok(
            "run_query",
            json!({"language": "tasks", "query": "explain\nnot done\ndue before tomorrow"}),
        )
        .await;
    let md = v["markdown"].as_str().unwrap();
    let head = format!(
        "```text\nExplanation of this Tasks code block query:\n\n  not done =>\n    status type \
         is TODO or IN_PROGRESS or ON_HOLD\n\n  due before tomorrow =>\n    due date is before \
         {} (",
        day(1)
    );
    assert!(md.starts_with(&head), "{md}");
    // The results follow the explanation.
    let after = &md[md.find("```\n\n").expect("the block closes")..];
    assert!(after.contains("- [ ] Pay rent"), "{md}");
    assert_eq!(v["total"], 2, "{v}");
    s.stop().await;
}

#[tokio::test]
async fn date_filters_take_the_date_words_run_query_and_get_periodic_note_take() {
    let tmp = vault();
    let s = start(&tmp).await;
    // Due before tomorrow: today's and the overdue (Book hall is done).
    assert_eq!(
        listed(&s, json!({"due_before": "tomorrow"})).await,
        ["Call Bob #phone", "Pay rent"]
    );
    assert_eq!(
        listed(&s, json!({"due_before": day(1)})).await,
        ["Call Bob #phone", "Pay rent"],
        "the same as the date written out"
    );
    assert_eq!(
        listed(&s, json!({"due_after": "yesterday"})).await,
        ["Draft report", "Call Bob #phone", "Plant beans"]
    );
    // Words no tool reads are refused, naming the argument and the words it takes.
    let e = s.err("list_tasks", json!({"due_before": "someday"})).await;
    assert!(e.contains("due_before: `someday` is not a date"), "{e}");
    assert!(e.contains("tomorrow"), "{e}");
    s.stop().await;
}
