//! The read tools over the real public vaults in ../shared/vaults (skipped when absent): every
//! note the filesystem holds is listed exactly once, and each one reads back byte for byte.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Server, shared_vault};
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
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"limit": 1000});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = s.ok("list_notes", args).await;
        assert_eq!(page["total"], expected.len());
        for n in page["notes"].as_array().unwrap() {
            listed.push(n["path"].as_str().unwrap().to_owned());
        }
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
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
    // "00 - Start here.md" is the hub's entry note; its name matches, so it ranks first.
    let r = s
        .ok("search_notes", json!({"query": "start here", "limit": 5}))
        .await;
    assert_eq!(r["hits"][0]["path"], "00 - Start here.md", "{r}");
    assert!(r["hits"][0]["score"].as_u64().unwrap() >= 10);
    s.stop().await;
}
