//! `run_query` through the real binary and rmcp's client, on a small vault written here:
//! DQL and Tasks queries given in the call and in a note's ```dataview / ```tasks block, each answer worked out by hand from
//! the notes; paging; refusals (DataviewJS, a query that does not parse, a missing block); a
//! hidden note never seen; and every ```dataview block of obsidian-hub parsed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Server, shared_vault, write_tree};
use serde_json::{Value, json};

fn vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            (
                "Books/Dune.md",
                "---\ntags: [book]\nrating: 5\nauthor: \"[[Frank Herbert]]\"\n---\ngenre:: scifi\n",
            ),
            (
                "Books/Emma.md",
                "---\ntags: [book]\nrating: 3\n---\nA novel [genre:: classic] by Austen.\n",
            ),
            (
                "Books/Hobbit.md",
                "---\ntags: [book]\nrating: 4\n---\ngenre:: fantasy\n",
            ),
            ("Frank Herbert.md", "An author.\n"),
            (
                "Projects/Plan.md",
                "# Plan\n\n- [ ] write report 📅 2026-12-10\n- [x] call Bob ✅ 2026-12-01\n- [ ] read [[Dune]]\n",
            ),
            (
                "Index.md",
                "# Index\n\n```dataview\nLIST FROM #book SORT file.name ASC\n```\n\n```dataviewjs\ndv.list(dv.pages())\n```\n\n```dataview\nTABLE FROM WHERE\n```\n",
            ),
            (
                "Summary.md",
                "Rating: `= [[Dune]].rating`\nSelf: `= this.file.name`\nJS: `$= dv.pages().length`\nBad: `= (`\n`plain code`\n\n```\n`= 1 + 1`\n```\n",
            ),
            (
                "Todo.md",
                "```tasks\nnot done\npath includes Projects\nsort by description\n```\n",
            ),
            (
                ".hidden/Secret.md",
                "---\ntags: [book]\nrating: 9\n---\ngenre:: secret\n",
            ),
        ],
    );
    tmp
}

/// The paths of a result's id links (TABLE: first cell; LIST: `id`).
fn ids(reply: &Value) -> Vec<String> {
    reply["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let id = if r.is_array() { &r[0] } else { &r["id"] };
            id["path"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn dql_tables_lists_and_tasks_answer_from_the_files() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;

    // Frontmatter fields and inline fields (own-line and bracketed) are both page fields.
    let r = s
        .ok(
            "run_query",
            json!({"query": "TABLE rating, genre FROM #book WHERE rating > 3 SORT rating DESC"}),
        )
        .await;
    assert_eq!(r["kind"], "table");
    assert_eq!(r["columns"], json!(["File", "rating", "genre"]));
    assert_eq!(ids(&r), ["Books/Dune.md", "Books/Hobbit.md"]);
    assert_eq!(r["rows"][0][1], 5.0);
    assert_eq!(r["rows"][0][2], "scifi");
    assert_eq!(r["rows"][1][2], "fantasy");
    assert_eq!(r["total"], 2);
    let md = r["markdown"].as_str().unwrap();
    assert!(md.contains("| File") && md.contains("scifi"), "{md}");

    // A folder source, sorted by name; the hidden note is never a page.
    let r = s
        .ok(
            "run_query",
            json!({"query": "LIST FROM \"Books\" SORT file.name ASC"}),
        )
        .await;
    assert_eq!(r["kind"], "list");
    assert_eq!(
        ids(&r),
        ["Books/Dune.md", "Books/Emma.md", "Books/Hobbit.md"]
    );
    let r = s
        .ok("run_query", json!({"query": "LIST WHERE rating = 9"}))
        .await;
    assert_eq!(r["total"], 0, "{r}");

    // Incoming links, a frontmatter link among them.
    let r = s
        .ok("run_query", json!({"query": "LIST FROM [[Frank Herbert]]"}))
        .await;
    assert_eq!(ids(&r), ["Books/Dune.md"]);

    // TASK: the open tasks of a folder, grouped by their note.
    let r = s
        .ok(
            "run_query",
            json!({"query": "TASK FROM \"Projects\" WHERE !completed"}),
        )
        .await;
    assert_eq!(r["kind"], "task");
    assert_eq!(r["rows"].as_array().unwrap().len(), 1, "{r}");
    let tasks = r["rows"][0]["tasks"].as_array().unwrap();
    let texts: Vec<&str> = tasks.iter().map(|t| t["text"].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].starts_with("write report"), "{texts:?}");
    assert!(texts[1].starts_with("read [[Dune]]"), "{texts:?}");
    assert_eq!(tasks[0]["line"], 3);
    assert_eq!(tasks[0]["status"], " ");
    // The task's due date (📅) is a field.
    let r = s
        .ok(
            "run_query",
            json!({"query": "TASK WHERE due = date(2026-12-10)"}),
        )
        .await;
    assert_eq!(r["rows"][0]["tasks"][0]["line"], 3, "{r}");
}

/// List items that are not tasks live only in the notes' text: a query naming `lists` reads
/// them there; a task's links are its `outlinks` either way.
#[tokio::test]
async fn list_items_and_the_links_on_a_task_are_known_to_queries() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            (
                "Journal.md",
                "# Log\n\n- met [[Ann]] [mood:: good]\n- [ ] write to [[Bob]]\n  - an idea\n\nText.\n",
            ),
            ("Ann.md", "Ann. #Proj/Sub\n"),
            ("Bob.md", "Bob. #project\n"),
        ],
    );
    let s = Server::start(tmp.path()).await;
    // FROM #tag reads the model's tag index: any case, nested tags included, no prefix match.
    let r = s.ok("run_query", json!({"query": "LIST FROM #proj"})).await;
    assert_eq!(ids(&r), ["Ann.md"], "{r}");
    let r = s
        .ok(
            "run_query",
            json!({"query": "TABLE length(file.lists) AS items, length(file.tasks) AS tasks WHERE file.name = \"Journal\""}),
        )
        .await;
    assert_eq!(r["rows"][0][1], 3.0, "{r}");
    assert_eq!(r["rows"][0][2], 1.0, "{r}");
    let r = s
        .ok(
            "run_query",
            json!({"query": "LIST L.text FROM \"Journal\" FLATTEN file.lists AS L WHERE !L.task"}),
        )
        .await;
    let texts: Vec<&str> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["value"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts.len(), 2, "{r}");
    assert!(texts[0].starts_with("met [[Ann]]"), "{texts:?}");
    assert_eq!(texts[1], "an idea");
    // An item's own fields and links.
    let r = s
        .ok(
            "run_query",
            json!({"query": "LIST FLATTEN file.lists AS L WHERE L.mood = \"good\" AND contains(L.outlinks, [[Ann]])"}),
        )
        .await;
    assert_eq!(ids(&r), ["Journal.md"], "{r}");
    // TASK (no `lists` in the query: the model's tasks): the link on the task's line.
    let r = s
        .ok(
            "run_query",
            json!({"query": "TASK WHERE contains(outlinks, [[Bob]])"}),
        )
        .await;
    let tasks = r["rows"][0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{r}");
    assert!(
        tasks[0]["text"].as_str().unwrap().starts_with("write to"),
        "{r}"
    );
    let r = s
        .ok(
            "run_query",
            json!({"query": "TASK WHERE contains(outlinks, [[Ann]])"}),
        )
        .await;
    assert_eq!(r["total"], 0, "{r}");
    s.stop().await;
}

#[tokio::test]
async fn dataview_blocks_run_with_this_and_javascript_is_refused() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;
    let r = s
        .ok("run_query", json!({"path": "Index", "block": 1}))
        .await;
    assert_eq!(r["path"], "Index.md");
    assert_eq!(
        ids(&r),
        ["Books/Dune.md", "Books/Emma.md", "Books/Hobbit.md"]
    );

    let e = s
        .err("run_query", json!({"path": "Index.md", "block": 2}))
        .await;
    assert!(e.contains("never runs"), "{e}");
    let e = s
        .err("run_query", json!({"path": "Index.md", "block": 3}))
        .await;
    assert!(
        e.contains("Index.md, block 3") && e.contains("line 1"),
        "{e}"
    );
    let e = s
        .err("run_query", json!({"path": "Index.md", "block": 4}))
        .await;
    assert!(e.contains("has 3 ```dataview/```tasks block(s)"), "{e}");
    let e = s
        .err(
            "run_query",
            json!({"path": "Index.md", "language": "tasks"}),
        )
        .await;
    assert!(e.contains("`language` goes with `query`"), "{e}");
    let e = s
        .err("run_query", json!({"query": "LIST", "path": "Index.md"}))
        .await;
    assert!(e.contains("not both"), "{e}");
    // A hidden note cannot hold the block either.
    let e = s
        .err("run_query", json!({"path": ".hidden/Secret.md"}))
        .await;
    assert!(!e.contains("secret"), "{e}");
}

#[tokio::test]
async fn tasks_queries_answer_from_the_files_in_their_order_and_groups() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;
    let descriptions = |r: &Value| -> Vec<String> {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["tasks"].as_array().unwrap().iter())
            .map(|t| t["description"].as_str().unwrap().to_owned())
            .collect()
    };
    // Not done and due before the 11th: the report (due the 10th); the undated task has no
    // due date, so `due before` leaves it out.
    let r = s
        .ok(
            "run_query",
            json!({"language": "tasks", "query": "not done\ndue before 2026-12-11"}),
        )
        .await;
    assert_eq!(r["kind"], "tasks");
    assert_eq!(descriptions(&r), ["write report"]);
    assert_eq!(r["rows"][0]["tasks"][0]["due"], "2026-12-10");
    assert_eq!(r["rows"][0]["tasks"][0]["line"], 3);
    // A ```tasks block: both open tasks of Projects, by description.
    let r = s.ok("run_query", json!({"path": "Todo.md"})).await;
    assert_eq!(descriptions(&r), ["read [[Dune]]", "write report"]);
    assert_eq!(r["total"], 2);
    let md = r["markdown"].as_str().unwrap();
    assert!(md.contains("- [ ] read [[Dune]]"), "{md}");
    // Done tasks, grouped by file name.
    let r = s
        .ok(
            "run_query",
            json!({"language": "tasks", "query": "done\ngroup by filename"}),
        )
        .await;
    assert_eq!(descriptions(&r), ["call Bob"]);
    let group = r["rows"][0]["group"].to_string();
    assert!(group.contains("Plan"), "{group}");
    // An unknown instruction names its line.
    let e = s
        .err(
            "run_query",
            json!({"language": "tasks", "query": "not done\nfrobnicate"}),
        )
        .await;
    assert!(e.contains("frobnicate"), "{e}");
}

#[tokio::test]
async fn a_query_without_a_language_runs_in_the_language_it_is_written_in() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;
    // Tasks lines, no `language`: run as the Tasks plugin would, not refused as bad DQL.
    let r = s
        .ok(
            "run_query",
            json!({"query": "not done\ndue before 2026-12-11"}),
        )
        .await;
    assert_eq!(r["kind"], "tasks", "{r}");
    assert_eq!(r["rows"][0]["tasks"][0]["description"], "write report");
    // DQL, any case: still DQL (its TASK type is not the Tasks plugin).
    let r = s
        .ok("run_query", json!({"query": "task where !completed"}))
        .await;
    assert_eq!(r["kind"], "task", "{r}");
    // Neither: DQL's own error, which names what a query starts with.
    let e = s
        .err("run_query", json!({"query": "TABEL rating FROM #book"}))
        .await;
    assert!(e.contains("TABLE, LIST, TASK or CALENDAR"), "{e}");
    // Named, the language is kept even when the text reads as the other one.
    let e = s
        .err(
            "run_query",
            json!({"language": "dataview", "query": "not done"}),
        )
        .await;
    assert!(e.contains("found `not`"), "{e}");
}

#[tokio::test]
async fn read_note_evaluates_inline_queries_on_request_and_never_runs_javascript() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;
    let plain = s.ok("read_note", json!({"path": "Summary"})).await;
    assert!(plain.get("inline").is_none(), "{plain}");
    let r = s
        .ok(
            "read_note",
            json!({"path": "Summary", "evaluate_inline": true}),
        )
        .await;
    let inline = r["inline"].as_array().unwrap();
    // Four queries: not the plain code span, not the one inside the code block.
    assert_eq!(inline.len(), 4, "{r}");
    assert_eq!(inline[0]["line"], 1);
    assert_eq!(inline[0]["query"], "[[Dune]].rating");
    assert_eq!(inline[0]["value"], "5");
    assert_eq!(inline[1]["value"], "Summary");
    assert!(
        inline[2]["error"].as_str().unwrap().contains("never runs"),
        "{r}"
    );
    assert!(inline[2].get("value").is_none());
    assert!(inline[3]["error"].is_string(), "{r}");
    // The text itself is as written.
    assert!(
        r["content"]
            .as_str()
            .unwrap()
            .contains("`= [[Dune]].rating`")
    );
}

#[tokio::test]
async fn dataview_pages_cover_every_row_once() {
    let tmp = vault();
    let s = Server::start(tmp.path()).await;
    let pages = s
        .pages(
            "run_query",
            json!({"query": "LIST FROM #book SORT file.name DESC", "limit": 1}),
        )
        .await;
    let all: Vec<String> = pages.iter().flat_map(ids).collect();
    assert_eq!(all, ["Books/Hobbit.md", "Books/Emma.md", "Books/Dune.md"]);
    assert_eq!(pages[0]["total"], 3);
}

#[tokio::test]
async fn every_dataview_block_of_obsidian_hub_parses_or_is_refused_clearly() {
    let Some(vault) = shared_vault("obsidian-hub") else {
        eprintln!("skipped: ../shared/vaults/obsidian-hub is absent");
        return;
    };
    let s = Server::start(&vault).await;
    let mut blocks = 0;
    let mut answered = 0;
    for entry in walkdir(&vault) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        let n = text.matches("```dataview\n").count();
        let rel = entry
            .strip_prefix(&vault)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        for block in 1..=n {
            blocks += 1;
            let r = s
                .call("run_query", json!({"path": rel, "block": block}))
                .await;
            if r.is_error {
                // Only refusals with a reason: never an internal error.
                assert!(!r.text.contains("internal"), "{rel} {block}: {}", r.text);
            } else {
                answered += 1;
            }
        }
    }
    println!("obsidian-hub: {blocks} dataview blocks, {answered} answered");
    assert!(blocks >= 34, "{blocks}");
    assert!(answered > 0);
    // The guide's first block is a bare `list`: every note of the vault (a .md file outside
    // hidden folders), which a walk of the folder counts.
    let r = s
        .ok(
            "run_query",
            json!({"path": "04 - Guides, Workflows, & Courses/Guides/An Introduction to Dataview.md", "block": 1}),
        )
        .await;
    assert_eq!(r["total"], walkdir(&vault).len(), "{}", r["total"]);
}

fn walkdir(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && e.path().extension().is_some_and(|x| x == "md") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn inline_fields_read_the_same_before_and_after_the_pages_are_aligned_with_the_model() {
    // 200 notes: the first reads of a query go by a search on the path, the rest (past one in
    // 16 pages) by the pages' alignment with the model's data. Notes without inline fields are
    // mixed in, so the alignment has gaps to get right.
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..200)
        .map(|i| {
            let body = if i % 3 == 0 {
                "no fields here\n".to_owned()
            } else {
                format!("score:: {i}\n")
            };
            (format!("N/{i:03}.md"), body)
        })
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start_with(tmp.path(), &["--no-index-cache"]).await;
    s.wait_index_ready().await;
    let r = s
        .ok(
            "run_query",
            json!({"query": "TABLE score FROM \"N\" WHERE score >= 0 SORT file.name", "limit": 500}),
        )
        .await;
    let got: Vec<f64> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[1].as_f64().unwrap_or(-1.0))
        .collect();
    let want: Vec<f64> = (0..200).filter(|i| i % 3 != 0).map(f64::from).collect();
    assert_eq!(got, want, "{r}");
    s.stop().await;
}
