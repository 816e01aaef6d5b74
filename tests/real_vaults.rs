//! The read tools over the real public vaults in ../shared/vaults (skipped when absent): every
//! note the filesystem holds is listed exactly once, and each one reads back byte for byte.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::{Server, shared_vault};
use serde_json::{Value, json};

/// Visible `.md` regular files under `root`, not following symlinks (what a vault scan sees).
fn notes_on_disk(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && name.ends_with(".md") && name.len() > 3 {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel);
            }
        }
    }
    out
}

async fn check_vault(name: &str) {
    let Some(root) = shared_vault(name) else {
        eprintln!("skipped: ../shared/vaults/{name} is absent");
        return;
    };
    let expected = notes_on_disk(&root);
    let s = Server::start(&root).await;
    let mut listed = Vec::new();
    for page in s.pages("list_notes", json!({"limit": 1000})).await {
        assert_eq!(page["total"], expected.len());
        for n in page["notes"].as_array().unwrap() {
            listed.push(n["path"].as_str().unwrap().to_owned());
        }
    }
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        listed_set.len(),
        listed.len(),
        "{name}: a note was listed twice"
    );
    assert_eq!(
        listed_set, expected,
        "{name}: listing differs from the disk"
    );

    // Read a spread of notes and compare with the bytes on disk.
    for path in expected.iter().step_by((expected.len() / 40).max(1)) {
        let r = s.ok("read_note", json!({"path": path})).await;
        let disk = std::fs::read_to_string(root.join(path)).unwrap();
        assert_eq!(r["content"].as_str().unwrap(), disk, "{name}: {path}");
    }
    s.stop().await;
}

#[tokio::test]
async fn kepano_vault_lists_and_reads_every_note() {
    check_vault("kepano-obsidian").await;
}

#[tokio::test]
async fn obsidian_hub_lists_and_reads_every_note() {
    check_vault("obsidian-hub").await;
}

#[tokio::test]
async fn obsidian_hub_search_finds_a_known_phrase() {
    let Some(root) = shared_vault("obsidian-hub") else {
        eprintln!("skipped: ../shared/vaults/obsidian-hub is absent");
        return;
    };
    let s = Server::start(&root).await;
    s.wait_index_ready().await;
    // "00 - Start here.md" is the hub's entry note: its title has both words, so it ranks first.
    let r = s
        .ok("search_notes", json!({"query": "start here", "limit": 5}))
        .await;
    assert_eq!(r["served_by"], "index", "{r}");
    assert_eq!(r["hits"][0]["path"], "00 - Start here.md", "{r}");
    // In exact mode its name matches the phrase, worth 10 points on top of its matching lines.
    let r = s
        .ok(
            "search_notes",
            json!({"query": "start here", "mode": "exact", "limit": 5}),
        )
        .await;
    assert_eq!(r["hits"][0]["path"], "00 - Start here.md", "{r}");
    assert!(r["hits"][0]["score"].as_f64().unwrap() >= 10.0);
    s.stop().await;
}

fn find<'a>(list: &'a Value, field: &str, want: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|x| x[field] == want)
        .unwrap_or_else(|| panic!("no {field} = {want} in {list}"))
}

/// Facts checked by hand with grep and ls against ../shared/vaults/kepano-obsidian.
#[tokio::test]
async fn kepano_vault_links_tags_and_settings_match_what_is_on_disk() {
    let Some(root) = shared_vault("kepano-obsidian") else {
        eprintln!("skipped: ../shared/vaults/kepano-obsidian is absent");
        return;
    };
    let s = Server::start(&root).await;
    // Paths as a new user types them (`Categories/Books.md` exists).
    for typed in ["Books", "Categories/Books", "books.md"] {
        let r = s.ok("read_note", json!({"path": typed})).await;
        assert_eq!(r["path"], "Categories/Books.md", "{typed}");
    }
    // Frontmatter list links of a book note: two targets exist, two do not.
    let r = s
        .ok(
            "get_links",
            json!({"path": "References/The Machine Stops.md", "direction": "out"}),
        )
        .await;
    assert_eq!(r["outgoing_total"], 4);
    let books = find(&r["outgoing"], "raw", "[[Books]]");
    assert_eq!(
        (&books["resolved"], &books["kind"], &books["line"]),
        (
            &json!("Categories/Books.md"),
            &json!("frontmatter"),
            &json!(3)
        )
    );
    assert_eq!(
        find(&r["outgoing"], "raw", "[[Sci-fi]]")["resolved"],
        "References/Sci-fi.md"
    );
    assert_eq!(
        find(&r["outgoing"], "raw", "[[E. M. Forster]]")["status"],
        "broken"
    );
    assert_eq!(
        find(&r["outgoing"], "raw", "[[Humanism]]")["status"],
        "broken"
    );
    // The only backlink of "Out of Control" is in the meeting note, line 15.
    let r = s
        .ok(
            "get_links",
            json!({"path": "References/Out of Control.md", "direction": "in"}),
        )
        .await;
    assert_eq!(r["incoming_total"], 1);
    assert_eq!(
        r["incoming"][0]["source"],
        "Notes/2023-09-12 Meeting with Steph.md"
    );
    assert_eq!(r["incoming"][0]["line"], 15);
    // `to-read` is carried by exactly two notes (grep -rl to-read finds two files).
    let r = s.ok("list_tags", json!({"prefix": "to-read"})).await;
    assert_eq!(r["items"][0]["notes"], 2);
    // [[Composability|composable]] in Categories/Evergreen.md has no target in the vault.
    let r = s.ok("find_broken_links", json!({"limit": 1000})).await;
    assert!(
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["source"] == "Categories/Evergreen.md"
                && b["raw"] == "[[Composability|composable]]"
                && b["line"] == 5)
    );
    // Settings from .obsidian: daily notes in Daily/ with the default format.
    let r = s.ok("vault_info", json!({})).await;
    assert_eq!(r["settings"]["daily_notes"]["folder"], "Daily");
    assert_eq!(r["settings"]["daily_notes"]["source"], "daily-notes");
    assert_eq!(
        r["settings"]["app"]["attachment_folder_path"],
        "Attachments"
    );
    assert_eq!(r["settings"]["errors"], json!([]));
    let r = s.ok("get_daily_note", json!({"date": "2023-09-12"})).await;
    assert_eq!(
        (&r["path"], &r["exists"]),
        (&json!("Daily/2023-09-12.md"), &json!(true))
    );
    s.stop().await;
}

/// Facts checked by hand against ../shared/vaults/obsidian-hub.
#[tokio::test]
async fn obsidian_hub_links_resolve_across_folders_and_headings_match_like_obsidian() {
    let Some(root) = shared_vault("obsidian-hub") else {
        eprintln!("skipped: ../shared/vaults/obsidian-hub is absent");
        return;
    };
    let s = Server::start(&root).await;
    let r = s
        .ok(
            "get_links",
            json!({"path": "00 - Start here.md", "direction": "out", "limit": 1000}),
        )
        .await;
    assert_eq!(
        find(&r["outgoing"], "raw", "[[Digital garden]]")["resolved"],
        "05 - Concepts/Digital garden.md"
    );
    // `#What is the Obsidian Hub` matches the heading "What is the Obsidian Hub?" (Obsidian's
    // heading matching ignores punctuation).
    let embed = find(
        &r["outgoing"],
        "raw",
        "![[README#What is the Obsidian Hub]]",
    );
    assert_eq!(
        (&embed["resolved"], &embed["status"], &embed["kind"]),
        (&json!("README.md"), &json!("resolved"), &json!("embed"))
    );
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["notes"], 6571);
    s.stop().await;
}
