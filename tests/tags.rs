//! `rename_tag` and `tag_note` through the real binary: on copies of both shared vaults a rename
//! changes exactly the tag's occurrences (every other byte of every file stays), `list_tags` and
//! search agree afterwards, and its undo brings every file back byte for byte; an undo refuses
//! when a note changed since; hidden and excluded notes are never touched; `tag_note` writes the
//! frontmatter list.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{Server, copy_tree, shared_vault, snapshot, write_tree};
use capvault::markdown::{normalize_tag, parse_note, tag_matches};
use serde_json::json;

/// A note's text with the tags matching `tag` (or nested under it) cut out, and those tags'
/// names with their first parts (as many as `tag` has) replaced by `rename`: what a rename
/// from `tag` to `rename` must leave as it was, and what it must turn the tags into.
fn cut_tags(text: &str, tag: &str, rename: &str) -> (Vec<String>, Vec<String>) {
    let depth = normalize_tag(tag).split('/').count();
    let note = parse_note(text);
    let mut rest = Vec::new();
    let mut names = Vec::new();
    let mut at = 0;
    for t in note.tags.iter().filter(|t| tag_matches(&t.name, tag)) {
        let r = t.pos.range();
        rest.push(text[at..r.start].to_owned());
        at = r.end;
        let parts: Vec<&str> = t.name.split('/').collect();
        let tail = parts[depth.min(parts.len())..].join("/");
        names.push(normalize_tag(&if tail.is_empty() {
            rename.to_owned()
        } else {
            format!("{rename}/{tail}")
        }));
    }
    rest.push(text[at..].to_owned());
    (rest, names)
}

fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    snapshot(root).into_iter().collect()
}

async fn tag_count(s: &Server, tag: &str) -> u64 {
    let r = s
        .ok("list_tags", json!({"prefix": tag, "limit": 1000}))
        .await;
    r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["tag"].as_str().unwrap().eq_ignore_ascii_case(tag))
        .map(|t| t["notes"].as_u64().unwrap())
        .sum()
}

/// Renames `from` to `to` in a copy of a shared vault and checks every file, then undoes it.
async fn rename_in_real_vault(name: &str, from: &str, to: &str) {
    let Some(src) = shared_vault(name) else {
        eprintln!("skipped: ../shared/vaults/{name} is absent");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    copy_tree(&src, &root);
    let before = files(&root);
    let s = Server::start_with(&root, &["--write", "--no-index-cache"]).await;
    s.wait_index_ready().await;
    let tagged = tag_count(&s, from).await;
    assert!(tagged > 0, "{name}: #{from} is in no note");

    // A dry run changes nothing and says what would change.
    let dry = s
        .ok(
            "rename_tag",
            json!({"from": from, "to": to, "dry_run": true}),
        )
        .await;
    assert_eq!(files(&root), before, "{name}: a dry run wrote");
    assert!(dry["batch"].is_null(), "{dry}");
    // Every note of the dry run has its diff, or is counted as left out.
    let listed = dry["notes"].as_array().unwrap();
    let with_diff = listed.iter().filter(|n| n["diff"].is_string()).count() as u64;
    let omitted = dry["diffs_omitted"].as_u64().unwrap_or(0);
    assert_eq!(with_diff + omitted, listed.len() as u64, "{name}");

    let r = s.ok("rename_tag", json!({"from": from, "to": to})).await;
    assert_eq!(r["skipped_total"], 0, "{name}: {r}");
    let outline = |v: &serde_json::Value| -> Vec<(String, u64)> {
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["path"].as_str().unwrap().to_owned(),
                    n["tags"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        outline(&r),
        outline(&dry),
        "{name}: the dry run and the rename differ"
    );
    let changed: Vec<String> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap().to_owned())
        .collect();
    let after = files(&root);
    let mut occurrences = 0;
    for (path, old) in &before {
        let new = &after[path];
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !changed.contains(&rel) {
            assert_eq!(old, new, "{name}: {rel} changed but is not in the reply");
            continue;
        }
        let (old, new) = (
            String::from_utf8(old.clone()).unwrap(),
            String::from_utf8(new.clone()).unwrap(),
        );
        // Exactly the tag's occurrences changed: every other byte as it was.
        let (old_rest, old_names) = cut_tags(&old, from, to);
        let (new_rest, new_names) = cut_tags(&new, to, to);
        assert_eq!(
            old_rest, new_rest,
            "{name}: {rel}: bytes other than the tags changed"
        );
        assert_eq!(
            old_names, new_names,
            "{name}: {rel}: the tags are not renamed as asked"
        );
        assert!(!old_names.is_empty(), "{name}: {rel} had no #{from}");
        occurrences += old_names.len();
    }
    assert_eq!(r["occurrences"], occurrences as u64, "{name}");
    // The tag list and search agree.
    assert_eq!(
        tag_count(&s, from).await,
        0,
        "{name}: #{from} is still listed"
    );
    assert_eq!(
        tag_count(&s, to).await,
        tagged,
        "{name}: #{to} is not in as many notes"
    );
    let hits = s.ok("list_notes", json!({"tag": to, "limit": 1000})).await;
    assert_eq!(hits["total"], tagged, "{name}: list_notes by the new tag");

    // One undo brings every file back, byte for byte, and is itself undoable.
    let batch = r["batch"].as_str().unwrap();
    let u = s.ok("rename_tag", json!({"undo": batch})).await;
    assert_eq!(u["notes"].as_array().unwrap().len(), changed.len(), "{u}");
    // The undo says what it restored: the same tags, back from the new name to the old.
    assert_eq!(u["occurrences"], r["occurrences"], "{u}");
    assert!(
        u["from"].as_str().unwrap().contains(&format!("#{to}")),
        "{u}"
    );
    assert!(
        u["to"].as_str().unwrap().contains(&format!("#{from}")),
        "{u}"
    );
    assert!(
        u["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["tags"].as_u64() > Some(0)),
        "{u}"
    );
    assert_eq!(
        files(&root),
        before,
        "{name}: the undo did not restore every file"
    );
    assert_eq!(tag_count(&s, from).await, tagged);
    let again = s.err("rename_tag", json!({"undo": batch})).await;
    assert!(again.contains("already as it was"), "{again}");
    s.stop().await;
}

#[tokio::test]
async fn a_rename_in_obsidian_hub_changes_exactly_the_tags_and_one_undo_restores_it() {
    // `placeholder` is on 174 notes with five tags nested under it.
    rename_in_real_vault("obsidian-hub", "placeholder", "stub").await;
}

#[tokio::test]
async fn a_rename_in_kepano_changes_exactly_the_tags_and_one_undo_restores_it() {
    // `music` has `music/genres` under it.
    rename_in_real_vault("kepano-obsidian", "music", "audio/music").await;
}

fn small_vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            (
                "a.md",
                "---\ntags: [old, keep]\n---\nText #old/sub and `#old`.\n",
            ),
            ("b.md", "Just #old here and #new there.\n"),
            ("c.md", "No tags.\n"),
            (".hidden/h.md", "#old in a hidden folder\n"),
            ("Private/p.md", "#old in an excluded folder\n"),
        ],
    );
    tmp
}

#[tokio::test]
async fn merges_skip_hidden_and_excluded_notes_and_an_undo_after_an_edit_is_refused() {
    let tmp = small_vault();
    let before = files(tmp.path());
    let s = Server::start_with(tmp.path(), &["--write", "--exclude", "Private"]).await;
    let r = s
        .ok("rename_tag", json!({"from": "#OLD", "to": "new"}))
        .await;
    let paths: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.md", "b.md"], "{r}");
    assert_eq!(r["occurrences"], 3);
    let text = |p: &str| std::fs::read_to_string(tmp.path().join(p)).unwrap();
    assert_eq!(
        text("a.md"),
        "---\ntags: [new, keep]\n---\nText #new/sub and `#old`.\n"
    );
    assert_eq!(text("b.md"), "Just #new here and #new there.\n");
    for p in ["c.md", ".hidden/h.md", "Private/p.md"] {
        let was = &before[&tmp.path().join(p)];
        assert_eq!(text(p).as_bytes(), was.as_slice(), "{p} was touched");
    }
    assert!(!r.to_string().contains("Private"), "{r}");

    // A note edited since the rename: the undo changes nothing and names it.
    std::fs::write(tmp.path().join("b.md"), "Edited by hand #new\n").unwrap();
    let e = s.err("rename_tag", json!({"undo": r["batch"]})).await;
    assert!(e.contains("conflict") && e.contains("b.md"), "{e}");
    assert_eq!(
        text("a.md"),
        "---\ntags: [new, keep]\n---\nText #new/sub and `#old`.\n"
    );

    // Refusals: bad names, a rename into its own subtree, an unknown batch, mixed arguments.
    for (args, want) in [
        (json!({"from": "a b", "to": "x"}), "not a tag name"),
        (json!({"from": "x", "to": "1984"}), "not a tag name"),
        (json!({"from": "x", "to": "x/y"}), "nested under"),
        (json!({"undo": "tag-0123456789abcdef"}), "no rename"),
        (
            json!({"from": "x", "undo": "tag-0123456789abcdef"}),
            "or `undo` alone",
        ),
    ] {
        let e = s.err("rename_tag", args.clone()).await;
        assert!(e.contains(want), "{args}: {e}");
    }
    s.stop().await;
}

#[tokio::test]
async fn tag_note_writes_the_frontmatter_list_and_says_what_stays_in_the_text() {
    let tmp = small_vault();
    let s = Server::start_with(tmp.path(), &["--write"]).await;
    let r = s
        .ok(
            "tag_note",
            json!({"path": "b", "add": ["#project/x", "Old"], "remove": ["new"]}),
        )
        .await;
    assert_eq!(r["tags"], json!(["project/x", "Old"]), "{r}");
    assert_eq!(r["inline_left"], json!([{"tag": "new", "line": 1}]), "{r}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("b.md")).unwrap(),
        "---\ntags:\n  - project/x\n  - Old\n---\nJust #old here and #new there.\n"
    );
    let listed = s.ok("list_notes", json!({"tag": "project"})).await;
    assert_eq!(listed["total"], 1, "{listed}");
    // Version-checked; a bad name is refused.
    let e = s
        .err(
            "tag_note",
            json!({"path": "a.md", "add": ["x"], "if_match": "0".repeat(64)}),
        )
        .await;
    assert!(e.contains("conflict"), "{e}");
    let e = s
        .err("tag_note", json!({"path": "a.md", "add": ["two words"]}))
        .await;
    assert!(e.contains("not a tag name"), "{e}");
    s.stop().await;
}
