//! `search_notes` through the real binary: ranking, phrases, filters, CJK, paging, regex limits,
//! the index kept fresh by the watcher, the building state with progress notifications, and the
//! watcher never following a symlink out of the vault.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::common::{Server, symlink, write_tree};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

fn paths(r: &Value) -> Vec<String> {
    crate::common::paths_at(r, "hits")
}

/// Each hit's `(path, line)`, in the reply's order.
fn hit_lines(r: &Value) -> Vec<(String, u64)> {
    r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("Compost.md", "# Compost\nA short note.\n"),
            (
                "Garden/Beds.md",
                "---\ntags: [garden/beds]\nstatus: Active\n---\n# Beds\n## Soil\nThe compost goes on the beds in autumn.\n",
            ),
            (
                "Garden/Sowing.md",
                "---\nstatus: done\n---\n# Sowing\nRemember the sowing dates. #garden\ncompost compost compost\n",
            ),
            (
                "Journal/2026.md",
                "Dates for sowing were late. #gardening\ncompost\n",
            ),
            ("Notes/中文.md", "# 笔记\n我爱北京天安门\n"),
            ("Notes/日本語.md", "東京でラーメンを食べた\n"),
        ],
    );
    for (i, p) in [
        "Compost.md",
        "Garden/Beds.md",
        "Garden/Sowing.md",
        "Journal/2026.md",
        "Notes/中文.md",
        "Notes/日本語.md",
    ]
    .iter()
    .enumerate()
    {
        // 2001-09-09 + i days.
        set_mtime(&tmp.path().join(p), 1_000_000_000 + 86_400 * i as u64);
    }
    tmp
}

#[tokio::test]
async fn ranked_search_puts_title_matches_first_and_shows_the_best_line() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s.ok("search_notes", json!({"query": "compost"})).await;
    assert_eq!(r["mode"], "ranked");
    assert_eq!(r["served_by"], "index");
    assert_eq!(r["total"], 4);
    let got = paths(&r);
    assert_eq!(got[0], "Compost.md", "the title match ranks first: {r}");
    let beds = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == "Garden/Beds.md")
        .unwrap();
    assert_eq!(beds["line"], 7);
    assert_eq!(beds["heading"], "Soil");
    assert_eq!(beds["excerpt"], "The compost goes on the beds in autumn.");
    assert_eq!(beds["matches"], json!([[4, 11]]));
    let scores: Vec<f64> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    s.stop().await;
}

#[tokio::test]
async fn phrases_need_the_words_in_order_and_all_words_must_match() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s
        .ok("search_notes", json!({"query": "\"sowing dates\""}))
        .await;
    assert_eq!(paths(&r), ["Garden/Sowing.md"], "{r}");
    let r = s.ok("search_notes", json!({"query": "sowing dates"})).await;
    assert_eq!(
        sorted(paths(&r)),
        ["Garden/Sowing.md", "Journal/2026.md"],
        "{r}"
    );
    let r = s
        .ok("search_notes", json!({"query": "sowing -\"sowing dates\""}))
        .await;
    assert_eq!(paths(&r), ["Journal/2026.md"], "{r}");
    // No note has both words: notes with either are ranked, and the reply says so.
    let r = s.ok("search_notes", json!({"query": "autumn ramen"})).await;
    assert_eq!(paths(&r), ["Garden/Beds.md"], "{r}");
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("no note has every word")
    );
    // Nothing found: nothing was ranked on some of the words, and the reply does not say so.
    let r = s
        .ok("search_notes", json!({"query": "zeppelin quasar"}))
        .await;
    assert_eq!(r["total"], 0, "{r}");
    assert!(!r.to_string().contains("no note has every word"), "{r}");
    s.stop().await;
}

#[tokio::test]
async fn filters_apply_in_every_mode() {
    let tmp = fixture();
    // Note texts in memory (the default), or read from disk through the index's prefilter.
    for flags in [&[][..], &["--no-text-cache"][..]] {
        filters_apply(tmp.path(), flags).await;
    }
}

async fn filters_apply(vault: &Path, flags: &[&str]) {
    let s = Server::start_with(vault, flags).await;
    s.wait_index_ready().await;
    for mode in ["ranked", "exact", "regex"] {
        let q = |extra: Value| {
            let mut args = json!({"query": "compost", "mode": mode, "limit": 200});
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            args
        };
        let got = |r: &Value| {
            let mut p = paths(r);
            p.sort();
            p.dedup();
            p
        };
        let r = s.ok("search_notes", q(json!({"folder": "Garden"}))).await;
        assert_eq!(got(&r), ["Garden/Beds.md", "Garden/Sowing.md"], "{mode}");
        // Nested tags are included (#garden/beds); #gardening is another tag.
        let r = s.ok("search_notes", q(json!({"tag": "garden"}))).await;
        assert_eq!(got(&r), ["Garden/Beds.md", "Garden/Sowing.md"], "{mode}");
        let r = s.ok("search_notes", q(json!({"tag": "garden/beds"}))).await;
        assert_eq!(got(&r), ["Garden/Beds.md"], "{mode}");
        let r = s
            .ok(
                "search_notes",
                q(json!({"property": "status", "value": "active"})),
            )
            .await;
        assert_eq!(got(&r), ["Garden/Beds.md"], "{mode}");
        let r = s.ok("search_notes", q(json!({"property": "status"}))).await;
        assert_eq!(got(&r), ["Garden/Beds.md", "Garden/Sowing.md"], "{mode}");
        // Modification times are a day apart from 2001-09-09 in fixture order.
        let r = s
            .ok(
                "search_notes",
                q(json!({"modified_after": "2001-09-11", "modified_before": "2001-09-13T00:00:00Z"})),
            )
            .await;
        assert_eq!(got(&r), ["Garden/Sowing.md", "Journal/2026.md"], "{mode}");
    }
    let msg = s
        .err(
            "search_notes",
            json!({"query": "x", "modified_after": "last tuesday"}),
        )
        .await;
    assert!(msg.contains("modified_after: expected a date"), "{msg}");
    let msg = s
        .err("search_notes", json!({"query": "x", "value": "y"}))
        .await;
    assert!(msg.contains("needs `property`"), "{msg}");
    s.stop().await;
}

/// A vault where `quokka` sits in every position the exact-search prefilter must handle: part
/// of longer words, capitals, Kelvin signs (which fold to `k`), frontmatter, a file name only, a
/// word too long to index; and eighty notes without it, so that the index narrows the search.
fn quokka_vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, String)> = (0..80)
        .map(|i| {
            (
                format!("Filler/{i}.md"),
                format!("filler note {i} about nothing\n"),
            )
        })
        .collect();
    for (path, text) in [
        (
            "Wild/Sightings.md",
            "# Log\nTwo QUOKKAS today.\nquokka, quokka\n",
        ),
        ("veg.md", "the vegetablequokka line\n"),
        ("kelvin.md", "a quo\u{212A}\u{212A}a here\n"),
        ("front.md", "---\nanimal: quokka-ish\n---\nbody\n"),
        ("Quokka.md", "nothing here\n"),
        ("long.md", &format!("x{}\n", "quokka".repeat(11))),
    ] {
        files.push((path.to_owned(), text.to_owned()));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    write_tree(tmp.path(), &refs);
    tmp
}

#[tokio::test]
async fn exact_search_narrowed_by_the_index_finds_exactly_what_a_scan_finds() {
    let tmp = quokka_vault();
    for flags in [&[][..], &["--no-text-cache"][..]] {
        let s = Server::start_with(tmp.path(), flags).await;
        s.wait_index_ready().await;
        let lines = |r: &Value| {
            let mut v = hit_lines(r);
            v.sort();
            v
        };
        for query in [
            "quokka",
            "QUOKKAS today",
            " quokka",
            "quokka,",
            "quokka-ish",
            "zzyzx",
        ] {
            let exact = s
                .ok(
                    "search_notes",
                    json!({"query": query, "mode": "exact", "limit": 200}),
                )
                .await;
            // Regex mode never uses the index: the escaped query is the oracle.
            let pattern = regex::escape(query);
            let scan = s
                .ok(
                    "search_notes",
                    json!({"query": pattern, "mode": "regex", "limit": 200}),
                )
                .await;
            assert_eq!(lines(&exact), lines(&scan), "{query:?} {flags:?}");
            assert_eq!(exact["total"], scan["total"], "{query:?} {flags:?}");
            assert_eq!(exact["served_by"], "index+scan", "{query:?} {flags:?}");
            assert_eq!(scan["served_by"], "scan");
        }
        let r = s
            .ok(
                "search_notes",
                json!({"query": "quokka", "mode": "exact", "limit": 200}),
            )
            .await;
        let mut found = paths(&r);
        found.sort();
        found.dedup();
        assert_eq!(
            found,
            [
                "Quokka.md",
                "Wild/Sightings.md",
                "front.md",
                "kelvin.md",
                "long.md",
                "veg.md"
            ],
            "{flags:?}"
        );
        // A query the index cannot narrow (a word in most notes) is a plain scan.
        let r = s
            .ok("search_notes", json!({"query": "note", "mode": "exact"}))
            .await;
        assert_eq!(r["served_by"], "scan");
        s.stop().await;
    }
}

#[tokio::test]
async fn chinese_and_japanese_notes_are_found_by_substrings() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    for (q, want) in [
        ("北京", "Notes/中文.md"),
        ("天安门", "Notes/中文.md"),
        ("ラーメン", "Notes/日本語.md"),
        ("笔记", "Notes/中文.md"),
    ] {
        let r = s.ok("search_notes", json!({"query": q})).await;
        assert_eq!(paths(&r), [want], "{q}: {r}");
    }
    let r = s.ok("search_notes", json!({"query": "天安门"})).await;
    assert_eq!(r["hits"][0]["matches"], json!([[4, 7]]), "{r}");
    s.stop().await;
}

#[tokio::test]
async fn ranked_pages_follow_the_cursor_without_overlap() {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..45)
        .map(|i| (format!("n{i:02}.md"), "lettuce ".repeat(i + 1)))
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let all = s
        .ok("search_notes", json!({"query": "lettuce", "limit": 200}))
        .await;
    assert_eq!(all["total"], 45);
    let paged: Vec<String> = s
        .pages("search_notes", json!({"query": "lettuce", "limit": 10}))
        .await
        .iter()
        .flat_map(paths)
        .collect();
    assert_eq!(paged, paths(&all));
    let c = s
        .ok("search_notes", json!({"query": "lettuce", "limit": 1}))
        .await["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let msg = s
        .err(
            "search_notes",
            json!({"query": "lettuce", "mode": "exact", "cursor": c}),
        )
        .await;
    assert!(msg.contains("other arguments"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn exact_pages_rank_notes_by_matching_lines_then_path_and_follow_the_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    // Note i has (i % 3) + 1 lines with the word: many notes tie on every count.
    let files: Vec<(String, String)> = (0..40)
        .map(|i| {
            let lines = "a Lettuce line\nfiller\n".repeat(i % 3 + 1);
            (format!("n{:02}.md", 39 - i), lines)
        })
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let all = s
        .ok(
            "search_notes",
            json!({"query": "lettuce", "mode": "exact", "limit": 200}),
        )
        .await;
    let hits = paths(&all);
    let lines: usize = (0..40).map(|i| i % 3 + 1).sum();
    assert_eq!(all["total"], lines);
    // Expected: by matching lines (3, 2, 1), then by path; one hit per line.
    let mut expected: Vec<(usize, String)> = files
        .iter()
        .map(|(p, t)| (t.matches("Lettuce").count(), p.clone()))
        .collect();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let expected: Vec<String> = expected
        .into_iter()
        .flat_map(|(n, p)| std::iter::repeat_n(p, n))
        .collect();
    assert_eq!(hits, expected);
    let paged: Vec<String> = s
        .pages(
            "search_notes",
            json!({"query": "lettuce", "mode": "exact", "limit": 7}),
        )
        .await
        .iter()
        .flat_map(paths)
        .collect();
    assert_eq!(paged, expected);
    s.stop().await;
}

#[tokio::test]
async fn replies_are_bounded_in_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    // 200 notes whose matching line is long: 200 hits would be far over the reply limit.
    let line = format!("{} needle {}\n", "word ".repeat(300), "word ".repeat(300));
    let files: Vec<(String, String)> = (0..200)
        .map(|i| (format!("{}/{i:03}.md", "deep/".repeat(20)), line.clone()))
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    for mode in ["ranked", "exact"] {
        let r = s
            .call(
                "search_notes",
                json!({"query": "needle", "mode": mode, "limit": 200}),
            )
            .await;
        assert!(!r.is_error);
        let hits = r.structured["hits"].as_array().unwrap().len();
        assert!(hits > 0 && hits < 200, "{mode}: {hits} hits");
        assert!(
            r.raw.len() < 3 * 64 * 1024,
            "{mode}: reply is {} bytes",
            r.raw.len()
        );
        assert_eq!(r.structured["truncated"], true);
        assert!(r.structured["next_cursor"].is_string());
    }
    s.stop().await;
}

#[tokio::test]
async fn hostile_regexes_are_refused_or_cut_off_and_the_server_stays_responsive() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "abcdefghij ".repeat(2_000);
    let files: Vec<(String, String)> = (0..400)
        .map(|i| (format!("n{i:03}.md"), body.clone()))
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start_with(tmp.path(), &["--scan-budget", "5"]).await;
    // Too large once compiled.
    let msg = s
        .err(
            "search_notes",
            json!({"query": "(\\w{100}){100}", "mode": "regex"}),
        )
        .await;
    assert!(msg.contains("too large"), "{msg}");
    // Over the length cap.
    let msg = s
        .err(
            "search_notes",
            json!({"query": "a".repeat(5_000), "mode": "regex"}),
        )
        .await;
    assert!(msg.contains("longer than"), "{msg}");
    let msg = s
        .err("search_notes", json!({"query": "(a)\\1", "mode": "regex"}))
        .await;
    assert!(msg.contains("invalid regex"), "{msg}");
    // A slow pattern over 8 MB stops at the time budget and says so.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "\\b\\w+j\\b", "mode": "regex"}),
        )
        .await;
    assert_eq!(r["partial"], true, "{}", r["notes"]);
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("time budget")),
        "{r}"
    );
    // Still answering.
    let r = s.ok("list_notes", json!({"limit": 1})).await;
    assert_eq!(r["notes"].as_array().unwrap().len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn a_regex_that_rescans_one_note_at_every_position_stops_at_the_time_budget() {
    let tmp = tempfile::tempdir().unwrap();
    // One 120 KB note; the pattern matches the empty string everywhere and each search for it
    // reads the rest of the note (16 s for this note when the budget was checked between notes).
    let body = "lorem ipsum dolor sit amet\n".repeat(4_500);
    write_tree(tmp.path(), &[("big.md".to_owned(), body)]);
    let s = Server::start_with(tmp.path(), &["--scan-budget", "300"]).await;
    let started = std::time::Instant::now();
    let r = s
        .ok(
            "search_notes",
            json!({"query": "(?s:.*Z)?", "mode": "regex"}),
        )
        .await;
    // A sanity bound: two passes of 300 ms, plus a debug build's start.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r["partial"], true, "{r}");
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("time budget")),
        "{r}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_watcher_keeps_search_fresh_through_creates_saves_deletes_and_moves() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path();
    write_tree(
        v,
        &[
            ("Inbox/first.md", "apricot\n"),
            ("Projects/A/plan.md", "quince plan\n"),
            ("Projects/B/notes.md", "quince notes\n"),
        ],
    );
    let s = Server::start(v).await;
    s.wait_index_ready().await;
    let q = |word: &str| json!({"query": word, "limit": 200});

    // Create.
    write_tree(v, &[("Inbox/new.md", "# New\nblackcurrant\n")]);
    s.eventually(10, "search_notes", q("blackcurrant"), |r| {
        paths(r) == ["Inbox/new.md"]
    })
    .await;
    // Save by writing a temporary file and renaming it over the note (what editors do).
    write_tree(v, &[("Inbox/.new.md.tmp", "damson\n")]);
    std::fs::rename(v.join("Inbox/.new.md.tmp"), v.join("Inbox/new.md")).unwrap();
    s.eventually(10, "search_notes", q("damson"), |r| {
        paths(r) == ["Inbox/new.md"]
    })
    .await;
    let r = s.ok("search_notes", q("blackcurrant")).await;
    assert_eq!(r["total"], 0, "the old text is gone: {r}");
    // Exact and regex modes (note texts in memory) follow the same events.
    let r = s
        .ok("search_notes", json!({"query": "damson", "mode": "exact"}))
        .await;
    assert_eq!(paths(&r), ["Inbox/new.md"], "{r}");
    let r = s
        .ok(
            "search_notes",
            json!({"query": "blackc.rrant", "mode": "regex"}),
        )
        .await;
    assert_eq!(r["total"], 0, "{r}");
    // Delete.
    std::fs::remove_file(v.join("Inbox/first.md")).unwrap();
    s.eventually(10, "search_notes", q("apricot"), |r| r["total"] == 0)
        .await;
    // Move a whole folder.
    std::fs::create_dir_all(v.join("Archive")).unwrap();
    std::fs::rename(v.join("Projects"), v.join("Archive/Old Projects")).unwrap();
    let r = s
        .eventually(10, "search_notes", q("quince"), |r| {
            sorted(paths(r))
                == [
                    "Archive/Old Projects/A/plan.md",
                    "Archive/Old Projects/B/notes.md",
                ]
        })
        .await;
    assert_eq!(r["total"], 2);
    // The model sees the same: the moved notes are listed by the knowledge tools.
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["notes"], 3, "{info}");
    assert_eq!(info["index"]["documents"], 3, "{info}");
    assert_eq!(info["index"]["watcher"], "watching", "{info}");
    s.stop().await;
}

#[tokio::test]
async fn a_burst_of_2000_changed_files_ends_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path();
    let names: Vec<String> = (0..2000)
        .map(|i| format!("bulk/{:02}/n{i:04}.md", i % 40))
        .collect();
    let old: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "alpha\n")).collect();
    write_tree(v, &old);
    let s = Server::start(v).await;
    s.wait_index_ready().await;
    let r = s.ok("search_notes", json!({"query": "alpha"})).await;
    assert_eq!(r["total"], 2000);
    // Like a git checkout: every file rewritten, half of them removed, 500 new ones.
    let new: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "omega\n")).collect();
    write_tree(v, &new);
    for n in names.iter().step_by(2) {
        std::fs::remove_file(v.join(n)).unwrap();
    }
    let added: Vec<String> = (0..500).map(|i| format!("fresh/a{i:03}.md")).collect();
    let added_refs: Vec<(&str, &str)> = added.iter().map(|n| (n.as_str(), "omega\n")).collect();
    write_tree(v, &added_refs);
    s.eventually(20, "search_notes", json!({"query": "omega"}), |r| {
        r["total"] == 1500
    })
    .await;
    let r = s.ok("search_notes", json!({"query": "alpha"})).await;
    assert_eq!(r["total"], 0, "{r}");
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["notes"], 1500);
    assert_eq!(info["index"]["documents"], 1500);
    s.stop().await;
}

#[tokio::test]
async fn the_watcher_never_follows_a_symlink_out_of_the_vault_or_into_hidden_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    let outside = tmp.path().join("outside");
    write_tree(&v, &[("ok.md", "fine\n"), (".obsidian/app.json", "{}")]);
    write_tree(&outside, &[("secret.md", "OUTSIDE-WATCH-SECRET\n")]);
    let s = Server::start(&v).await;
    s.wait_index_ready().await;
    // Created while the server watches: links out, a hidden folder with a note, a link into it.
    symlink(&v, "escape", &outside);
    symlink(&v, "escape.md", outside.join("secret.md"));
    write_tree(&v, &[(".hidden/secret.md", "HIDDEN-WATCH-SECRET\n")]);
    symlink(&v, "into_hidden.md", ".hidden/secret.md");
    // Changes inside the linked folder, after the link exists.
    write_tree(&outside, &[("later.md", "OUTSIDE-WATCH-SECRET later\n")]);
    // A marker written last: once it is searchable, every earlier event was processed.
    write_tree(&v, &[("marker.md", "zucchini\n")]);
    s.eventually(10, "search_notes", json!({"query": "zucchini"}), |r| {
        r["total"] == 1
    })
    .await;
    for q in ["OUTSIDE-WATCH-SECRET", "HIDDEN-WATCH-SECRET"] {
        for mode in ["ranked", "exact"] {
            let r = s
                .ok("search_notes", json!({"query": q, "mode": mode}))
                .await;
            assert_eq!(r["total"], 0, "{mode} {q}: {r}");
        }
    }
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(
        info["index"]["documents"], 2,
        "ok.md and marker.md only: {info}"
    );
    s.stop().await;
}

/// Records the progress notifications the server sends.
#[derive(Clone, Default)]
struct ProgressRecorder(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for ProgressRecorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

#[tokio::test]
async fn a_search_during_the_build_is_answered_by_a_scan_with_progress() {
    let tmp = fixture();
    // No index cache: a cache left in the shared test cache folder by a vault whose folder had
    // the same inode would be served during the pause, as a restart's is.
    let cmd =
        crate::common::serve_command(tmp.path(), &["--index-delay", "2000", "--no-index-cache"]);
    let recorder = ProgressRecorder::default();
    let client = recorder
        .clone()
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    // The handshake and other tools answer at once.
    let info = client
        .call_tool(CallToolRequestParams::new("vault_info"))
        .await
        .unwrap();
    let info = info.structured_content.unwrap();
    assert_eq!(info["index"]["state"], "building", "{info}");
    assert_eq!(info["notes"], Value::Null);
    // rmcp's client attaches a progress token to every request.
    let args = json!({"query": "compost"}).as_object().cloned().unwrap();
    let r = client
        .call_tool(CallToolRequestParams::new("search_notes").with_arguments(args.clone()))
        .await
        .unwrap();
    let r = r.structured_content.unwrap();
    assert_eq!(r["served_by"], "scan", "{r}");
    assert_eq!(r["index"]["state"], "building", "{r}");
    assert_eq!(r["total"], 4, "the scan finds what the index would: {r}");
    assert_eq!(
        paths(&r)[0],
        "Compost.md",
        "a name match ranks first in the scan too: {r}"
    );
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap()
            .contains("answered by a scan")
    );
    let seen = recorder.0.lock().unwrap().clone();
    assert!(!seen.is_empty(), "no progress notification");
    assert!(
        seen[0]
            .message
            .as_deref()
            .unwrap()
            .contains("search index building")
    );
    // After the build the same query is served by the index.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = client
            .call_tool(CallToolRequestParams::new("search_notes").with_arguments(args.clone()))
            .await
            .unwrap()
            .structured_content
            .unwrap();
        if r["served_by"] == "index" {
            assert_eq!(paths(&r)[0], "Compost.md");
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "never served by the index"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = client.cancel().await;
}

#[tokio::test]
async fn an_estimate_whose_candidates_rarely_match_pages_over_several_rounds_to_every_line_once() {
    // 300 notes hold `garden` in lower case (the index's candidates for `Garden` whatever the
    // case); 5 spread among them hold `Garden`: a case-sensitive estimate reads past its first
    // round of 64 notes, and every round goes on from the last.
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..300)
        .map(|i| {
            let text = if i % 61 == 7 {
                format!("# Note {i}\nthe Garden gate\nthe garden path\n")
            } else {
                format!("# Note {i}\na garden line {i}\n")
            };
            (format!("n{i:03}.md"), text)
        })
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let lines = |pages: &[Value]| {
        let mut v: Vec<(String, u64)> = pages.iter().flat_map(hit_lines).collect();
        let n = v.len();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), n, "no line twice");
        v
    };
    let q = json!({"query": "Garden", "mode": "exact", "limit": 2, "case_sensitive": true});
    let counted = s.pages("search_notes", q.clone()).await;
    let mut asked = q.clone();
    asked["estimate"] = json!(true);
    let estimated = s.pages("search_notes", asked).await;
    assert_eq!(estimated[0]["total_estimated"], true, "{}", estimated[0]);
    assert_eq!(lines(&counted).len(), 5);
    assert_eq!(lines(&estimated), lines(&counted));
    s.stop().await;
}

#[tokio::test]
async fn exact_search_for_a_word_in_too_many_notes_reads_them_in_ranked_order_and_pages_to_every_line()
 {
    let tmp = tempfile::tempdir().unwrap();
    // 60 notes: `garden` on 1 to 3 lines of 45 of them (inside longer words in some), in two
    // folders; 15 without it.
    let files: Vec<(String, String)> = (0..60)
        .map(|i| {
            let folder = if i % 2 == 0 { "Even" } else { "Odd" };
            let text = if i % 4 == 3 {
                let rare = if i == 7 { " but a quokka" } else { "" };
                format!("note {i}: nothing to see{rare}\n")
            } else {
                let word = ["garden", "Gardening", "vegetablegarden"][i % 3];
                format!(
                    "# Note {i}\n{}filler line\n",
                    format!("a {word} line\n").repeat(i % 3 + 1)
                )
            };
            (format!("{folder}/n{i:02}.md"), text)
        })
        .collect();
    write_tree(tmp.path(), &files);
    let holding = files
        .iter()
        .filter(|(_, t)| t.to_lowercase().contains("garden"));
    let notes_with = holding.clone().count();
    let lines_with: usize = holding
        .map(|(_, t)| t.to_lowercase().matches("garden").count())
        .sum();
    let every_line = |pages: &[Value]| {
        let mut v: Vec<(String, u64)> = pages.iter().flat_map(hit_lines).collect();
        v.sort();
        v
    };

    let s = Server::start_with(tmp.path(), &["--exact-scan-max-notes", "10"]).await;
    s.wait_index_ready().await;
    let exact = json!({"query": "garden", "mode": "exact", "limit": 4});
    let first = s.ok("search_notes", exact.clone()).await;
    assert_eq!(first["total_estimated"], true, "{first}");
    assert_eq!(
        first["total"], notes_with,
        "the index's count of notes: {first}"
    );
    assert_eq!(first["served_by"], "index+scan");
    assert!(
        first["notes"][0].as_str().unwrap().contains("counts notes"),
        "{first}"
    );
    assert_eq!(first["hits"].as_array().unwrap().len(), 4);
    assert!(first["next_cursor"].is_string(), "{first}");
    // Every page together: exactly the lines a regex scan (the oracle, never ranked) finds.
    let pages = s.pages("search_notes", exact).await;
    let scan = s
        .pages(
            "search_notes",
            json!({"query": "garden", "mode": "regex", "limit": 4}),
        )
        .await;
    assert_eq!(every_line(&pages).len(), lines_with);
    assert_eq!(every_line(&pages), every_line(&scan));
    // Scores are the index's, best first.
    let scores: Vec<f64> = pages
        .iter()
        .flat_map(|r| r["hits"].as_array().unwrap().clone())
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // A folder filter narrows it the same way.
    let in_odd = |q: Value| {
        let mut q = q;
        q["folder"] = json!("Odd");
        q
    };
    let odd = s
        .pages(
            "search_notes",
            in_odd(json!({"query": "garden", "mode": "exact", "limit": 5})),
        )
        .await;
    assert_eq!(odd[0]["total_estimated"], true);
    let odd_scan = s
        .pages(
            "search_notes",
            in_odd(json!({"query": "garden", "mode": "regex", "limit": 5})),
        )
        .await;
    assert!(every_line(&odd).iter().all(|(p, _)| p.starts_with("Odd/")));
    assert_eq!(every_line(&odd), every_line(&odd_scan));
    // A word in few notes is still read whole and counted by line.
    let few = s
        .ok("search_notes", json!({"query": "quokka", "mode": "exact"}))
        .await;
    assert_eq!(few["total"], 1, "{few}");
    assert!(few.get("total_estimated").is_none(), "{few}");
    s.stop().await;

    // Under the default (20,000 notes), every matching line is counted.
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s
        .ok(
            "search_notes",
            json!({"query": "garden", "mode": "exact", "limit": 4}),
        )
        .await;
    assert_eq!(r["total"], lines_with, "{r}");
    assert!(r.get("total_estimated").is_none(), "{r}");
    // A client that asks for an estimate gets the first page in ranked order without every
    // line counted, and paging still reaches every line, a phrase's and a folder's too.
    let estimated = json!({"query": "garden", "mode": "exact", "limit": 4, "estimate": true});
    let first = s.ok("search_notes", estimated.clone()).await;
    assert_eq!(first["total_estimated"], true, "{first}");
    assert_eq!(first["total"], notes_with, "{first}");
    assert!(
        first["notes"][0].as_str().unwrap().contains("`estimate`"),
        "{first}"
    );
    let pages = s.pages("search_notes", estimated).await;
    assert_eq!(every_line(&pages), every_line(&scan));
    for q in [
        json!({"query": "a garden line", "mode": "exact", "limit": 3}),
        in_odd(json!({"query": "garden", "mode": "exact", "limit": 3})),
        json!({"query": "Garden", "mode": "exact", "limit": 3, "case_sensitive": true}),
    ] {
        let mut asked = q.clone();
        asked["estimate"] = json!(true);
        let estimated = s.pages("search_notes", asked).await;
        assert_eq!(estimated[0]["total_estimated"], true, "{q}");
        let counted = s.pages("search_notes", q.clone()).await;
        assert!(counted[0].get("total_estimated").is_none(), "{q}");
        assert!(!every_line(&counted).is_empty(), "{q}");
        assert_eq!(every_line(&estimated), every_line(&counted), "{q}");
    }
    // A cursor of one way does not page the other.
    let cursor = first["next_cursor"].as_str().unwrap();
    let e = s
        .err(
            "search_notes",
            json!({"query": "garden", "mode": "exact", "limit": 4, "cursor": cursor}),
        )
        .await;
    assert!(e.contains("other arguments"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn a_hit_on_the_title_alone_says_so_and_points_at_line_1() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            // Frontmatter only (as kepano's templates): no line holds a word of the query.
            (
                "Templates/Book Template.md",
                "---\ncategory: \"[[Books]]\"\nauthor: \nrating: \n---\n",
            ),
            ("Reading.md", "# Reading\nA book review of the week.\n"),
        ],
    );
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let r = s
        .ok("search_notes", json!({"query": "book template"}))
        .await;
    let hit = &r["hits"][0];
    assert_eq!(hit["path"], "Templates/Book Template.md", "{r}");
    assert_eq!(hit["line"], 1, "the file has 5 lines: {r}");
    assert_eq!(hit["matched"], "title", "{r}");
    assert_eq!(hit["excerpt"], "Book Template", "{r}");
    assert_eq!(hit["matches"], json!([[0, 4], [5, 13]]), "{r}");
    // A hit on a line says nothing of the kind.
    let r = s.ok("search_notes", json!({"query": "review"})).await;
    assert_eq!(r["hits"][0]["line"], 2, "{r}");
    assert!(r["hits"][0].get("matched").is_none(), "{r}");
    // Exact mode: the name alone matched, at line 1 as well.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "Book Template", "mode": "exact"}),
        )
        .await;
    assert_eq!(r["hits"][0]["line"], 1, "{r}");
    assert_eq!(r["hits"][0]["matched"], "title", "{r}");
    s.stop().await;
}

#[tokio::test]
async fn equal_scores_are_ordered_by_path_whatever_order_notes_were_indexed_in() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &[("Start.md", "nothing here\n")]);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    // Indexed one by one in reverse path order: tantivy's own tie order (by document address)
    // is the reverse of the path order.
    let names: Vec<String> = (0..8).map(|i| format!("Plugins/p{i}.md")).collect();
    std::fs::create_dir_all(tmp.path().join("Plugins")).unwrap();
    for (n, name) in names.iter().rev().enumerate() {
        std::fs::write(tmp.path().join(name), "dataview plugin\n").unwrap();
        s.eventually(
            20,
            "search_notes",
            json!({"query": "dataview plugin"}),
            |r| r["total"] == n + 1,
        )
        .await;
    }
    let all = s
        .ok("search_notes", json!({"query": "dataview plugin"}))
        .await;
    let scores: Vec<&Value> = all["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["score"])
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] == w[1]),
        "not all tied: {all}"
    );
    assert_eq!(paths(&all), names, "{all}");
    // Pages agree with the whole list.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"query": "dataview plugin", "limit": 3});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let r = s.ok("search_notes", args).await;
        paged.extend(paths(&r));
        match r["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, names);
    s.stop().await;
}

/// Every `(path, line)` of an exact search, page after page of `limit`.
async fn every_page(s: &Server, args: Value, limit: u64) -> Vec<(String, u64)> {
    let mut args = args;
    args["limit"] = json!(limit);
    let mut out = Vec::new();
    for page in s.pages("search_notes", args).await {
        out.extend(hit_lines(&page));
    }
    out
}

#[tokio::test]
async fn phrase_pages_hold_exactly_the_lines_a_scan_finds_in_a_folder_with_a_tag_and_by_case() {
    let tmp = tempfile::tempdir().unwrap();
    // Many notes with both words apart, a few with the phrase in its forms: the index narrows
    // a phrase to the notes holding its words side by side, and the scan decides.
    let mut files: Vec<(String, String)> = (0..240)
        .map(|i| {
            (
                format!("{}/filler {i:03}.md", ["A", "B", "C"][i % 3]),
                format!("daily life\nsome notes on it\nnotes then daily {i}\n"),
            )
        })
        .collect();
    let forms = [
        "my daily notes here",
        "Daily Notes in title case",
        "mydaily notesy inside words",
        "daily  notes with two spaces",
        "daily\nnotes across a line",
        "---\ntopic: daily notes\n---\nbody",
        "#t tagged: daily notes, and daily notes again\nDAILY NOTES",
    ];
    for (i, form) in forms.iter().enumerate() {
        for folder in ["A", "B"] {
            files.push((format!("{folder}/form {i}.md"), (*form).to_owned()));
        }
    }
    files.push(("Daily notes.md".to_owned(), "a name with it".to_owned()));
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let variants = [
        json!({}),
        json!({"folder": "A"}),
        json!({"tag": "t"}),
        json!({"case_sensitive": true}),
        json!({"folder": "B", "case_sensitive": true}),
    ];
    for (i, extra) in variants.iter().enumerate() {
        for query in ["daily notes", "Daily Notes", "daily notes,", "ly notes ag"] {
            let mut exact = json!({"query": query, "mode": "exact"});
            let mut scan = json!({"query": regex::escape(query), "mode": "regex", "limit": 200});
            for (k, v) in extra.as_object().unwrap() {
                exact[k] = v.clone();
                scan[k] = v.clone();
            }
            let first = s.ok("search_notes", exact.clone()).await;
            assert_eq!(first["served_by"], "index+scan", "{exact}");
            let mut want = hit_lines(&s.ok("search_notes", scan).await);
            want.sort();
            assert!(want.len() < 200, "the oracle holds every line");
            let mut got = every_page(&s, exact.clone(), 2).await;
            assert_eq!(
                got.len(),
                first["total"].as_u64().unwrap() as usize,
                "{exact}"
            );
            got.sort();
            assert_eq!(got, want, "{exact}");
            if i == 0 && query == "daily notes" {
                // Lines of `daily notes` everywhere it is, and nowhere else.
                assert!(want.len() >= 8, "{want:?}");
                assert!(!want.iter().any(|(p, _)| p.contains("filler")), "{want:?}");
            }
        }
    }

    // An edit between pages elsewhere in the vault leaves the pages whole.
    let mut args = json!({"query": "daily notes", "mode": "exact", "limit": 3});
    let first = s.ok("search_notes", args.clone()).await;
    let total = first["total"].as_u64().unwrap() as usize;
    let mut got: Vec<String> = paths(&first);
    write_tree(
        tmp.path(),
        &[
            ("C/filler 002.md", "rewritten, nothing to find\n"),
            ("C/new.md", "a new note\n"),
        ],
    );
    s.eventually(
        10,
        "search_notes",
        json!({"query": "a new note", "mode": "exact"}),
        |r| r["total"] == 1,
    )
    .await;
    args["cursor"] = first["next_cursor"].clone();
    for page in s.pages("search_notes", args).await {
        got.extend(paths(&page));
    }
    assert_eq!(got.len(), total);
    s.stop().await;
}
