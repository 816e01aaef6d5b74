//! The write tools through a real rmcp client talking to the real binary with `--write`: each
//! tool's success and refusals, dry runs that change nothing, history and undo, moves that
//! keep every link resolving, attacks on the write paths, and concurrent writers.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

use crate::common::{Server, find_file, sha256_hex, snapshot, symlink, write_tree};
use serde_json::{Value, json};

/// A vault beside an `outside` folder and a state folder, all in one temporary folder.
struct Fixture {
    _tmp: tempfile::TempDir,
    vault: PathBuf,
    outside: PathBuf,
    state: PathBuf,
}

fn fixture(files: &[(&str, &str)]) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    let outside = tmp.path().join("outside");
    write_tree(&vault, files);
    write_tree(&outside, &[("secret.md", "outside bytes\n")]);
    std::fs::create_dir_all(vault.join(".obsidian")).unwrap();
    Fixture {
        state: tmp.path().join("state"),
        _tmp: tmp,
        vault,
        outside,
    }
}

async fn writable(f: &Fixture, extra: &[&str]) -> Server {
    let state = f.state.to_str().unwrap().to_owned();
    let mut args = vec!["--write", "--state-dir", &state, "--no-index-cache"];
    args.extend_from_slice(extra);
    let s = Server::start_with(&f.vault, &args).await;
    s.wait_index_ready().await;
    s
}

fn read(v: &Path, p: &str) -> String {
    std::fs::read_to_string(v.join(p)).unwrap()
}

const WRITE_TOOLS: &[&str] = &[
    "append_periodic_note",
    "append_to_note",
    "create_canvas",
    "create_note",
    "delete_note",
    "edit_canvas",
    "edit_note",
    "move_note",
    "note_history",
    "restore_note",
    "update_frontmatter",
    "write_note",
];

#[tokio::test]
async fn without_write_no_write_tool_is_listed_and_vault_info_says_read_only() {
    let f = fixture(&[("a.md", "a\n")]);
    let s = Server::start_with(&f.vault, &["--no-index-cache"]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    for t in &tools {
        assert!(!WRITE_TOOLS.contains(&t.name.as_ref()), "{} listed", t.name);
        assert_eq!(
            t.annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(true)
        );
    }
    let r = s
        .call("create_note", json!({"path": "b.md", "content": "x"}))
        .await;
    assert!(r.is_error && r.error["code"] == "refused", "{}", r.raw);
    assert!(!f.vault.join("b.md").exists());
    assert_eq!(s.ok("vault_info", json!({})).await["writes_enabled"], false);
    s.stop().await;

    let s = writable(&f, &[]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for w in WRITE_TOOLS {
        assert!(names.contains(w), "{w} missing from {names:?}");
    }
    // Hints equal to the spec's defaults are left out (readOnlyHint false, destructiveHint
    // true); the others are sent.
    let hints = |name: &str| {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        let a = t.annotations.clone().unwrap();
        (
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        )
    };
    assert_eq!(hints("delete_note"), (None, None, None, Some(false)));
    assert_eq!(hints("create_note"), (None, Some(false), None, Some(false)));
    assert_eq!(hints("write_note"), (None, None, Some(true), Some(false)));
    assert_eq!(s.ok("vault_info", json!({})).await["writes_enabled"], true);
    s.stop().await;
    // The read profile leaves the write tools out even with --write.
    let s = writable(&f, &["--tools", "read"]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    assert!(
        tools
            .iter()
            .all(|t| !WRITE_TOOLS.contains(&t.name.as_ref()))
    );
    s.stop().await;
}

#[tokio::test]
async fn create_write_edit_append_prepend_and_frontmatter_work_and_search_sees_them_at_once() {
    let f = fixture(&[
        (
            "Plan.md",
            "---\n# keep this comment\ntitle: Plan\ntags:\n- a\n\nstatus: draft\n---\n# Plan\nintro\n\n## Tasks\n- one\n\n## Notes\nnote\n",
        ),
        ("crlf.md", "\u{feff}line one\r\nline two\r\n"),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;

    // create_note: folders created, frontmatter written, the reply's sha256 is the file's.
    let r = s
        .ok(
            "create_note",
            json!({"path": "New/Deep/Idea", "content": "zebrafish thoughts\n", "frontmatter": {"status": "new"}}),
        )
        .await;
    let text = read(v, "New/Deep/Idea.md");
    assert_eq!(text, "---\nstatus: new\n---\nzebrafish thoughts\n");
    assert_eq!(r["sha256"], sha256_hex(&text));
    assert_eq!(r["created"], true);
    assert_eq!(r["folders_created"], json!(["New", "New/Deep"]));
    // The reply comes after the index has the note.
    let hits = s.ok("search_notes", json!({"query": "zebrafish"})).await;
    assert_eq!(hits["hits"][0]["path"], "New/Deep/Idea.md", "{hits}");
    let again = s
        .call(
            "create_note",
            json!({"path": "New/Deep/Idea.md", "content": "x"}),
        )
        .await;
    assert_eq!(again.error["code"], "conflict", "{}", again.raw);
    assert_eq!(read(v, "New/Deep/Idea.md"), text);

    // write_note: if_match required and checked.
    let stale = s
        .call(
            "write_note",
            json!({"path": "New/Deep/Idea.md", "content": "y", "if_match": sha256_hex("old")}),
        )
        .await;
    assert_eq!(stale.error["code"], "conflict");
    assert_eq!(stale.error["current_sha256"], sha256_hex(&text));
    // `text`, as append_periodic_note calls it, is read as `content`.
    let w = s
        .ok(
            "write_note",
            json!({"path": "New/Deep/Idea.md", "text": "quagga\n", "if_match": sha256_hex(&text)}),
        )
        .await;
    assert_eq!(read(v, "New/Deep/Idea.md"), "quagga\n");
    assert_eq!(w["previous_sha256"], sha256_hex(&text));
    assert_eq!(
        s.ok("search_notes", json!({"query": "quagga"})).await["hits"][0]["path"],
        "New/Deep/Idea.md"
    );
    assert_eq!(
        s.ok("search_notes", json!({"query": "zebrafish"})).await["hits"],
        json!([])
    );

    // edit_note: exactly once, or an error with the count and nothing changed.
    let plan = read(v, "Plan.md");
    let missing = s
        .call(
            "edit_note",
            json!({"path": "Plan.md", "edits": [{"old_text": "nope", "new_text": "x"}]}),
        )
        .await;
    assert_eq!(missing.error["code"], "not_found");
    assert!(missing.text.contains("0 times"), "{}", missing.text);
    let twice = s
        .call(
            "edit_note",
            json!({"path": "Plan.md", "edits": [{"old_text": "Plan\n", "new_text": "x"}]}),
        )
        .await;
    assert_eq!(twice.error["code"], "ambiguous");
    assert!(twice.text.contains("occurs 2 times"), "{}", twice.text);
    let half = s
        .call("edit_note", json!({"path": "Plan.md", "edits": [{"old_text": "intro", "new_text": "INTRO"}, {"old_text": "absent", "new_text": "x"}]}))
        .await;
    assert!(half.is_error);
    assert_eq!(read(v, "Plan.md"), plan, "a failed edit changed the note");
    s.ok("edit_note", json!({"path": "Plan.md", "edits": [{"old_text": "intro", "new_text": "INTRO"}], "if_match": sha256_hex(&plan)}))
        .await;
    let plan2 = plan.replace("intro", "INTRO");
    assert_eq!(read(v, "Plan.md"), plan2);

    // append_to_note under a heading, and at the end; at the start: after the frontmatter, and
    // right under a heading.
    s.ok(
        "append_to_note",
        json!({"path": "Plan.md", "content": "- two", "heading": "Plan/Tasks"}),
    )
    .await;
    let no_heading = s
        .call(
            "append_to_note",
            json!({"path": "Plan.md", "content": "x", "heading": "Nowhere"}),
        )
        .await;
    assert_eq!(no_heading.error["code"], "not_found");
    s.ok(
        "append_to_note",
        json!({"path": "Plan.md", "content": "the end"}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "Plan.md", "content": "top line", "at_start": true}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "Plan.md", "content": "- zero", "heading": "Tasks", "at_start": true}),
    )
    .await;
    let plan3 = read(v, "Plan.md");
    assert_eq!(
        plan3,
        "---\n# keep this comment\ntitle: Plan\ntags:\n- a\n\nstatus: draft\n---\ntop line\n\n# Plan\nINTRO\n\n## Tasks\n- zero\n- one\n- two\n\n## Notes\nnote\n\nthe end\n"
    );

    // update_frontmatter: one key changed, one added, one removed; everything else kept.
    s.ok("update_frontmatter", json!({"path": "Plan.md", "set": {"status": "done", "due": "2026-12-24"}, "remove": ["title"]}))
        .await;
    assert_eq!(
        read(v, "Plan.md"),
        plan3
            .replace("title: Plan\n", "")
            .replace("status: draft\n", "status: done\ndue: 2026-12-24\n")
    );
    let by_prop = s
        .ok("list_notes", json!({"property": "status", "value": "done"}))
        .await;
    assert_eq!(by_prop["notes"][0]["path"], "Plan.md", "{by_prop}");

    // CRLF and the byte order mark survive an append.
    s.ok(
        "append_to_note",
        json!({"path": "crlf.md", "content": "line three"}),
    )
    .await;
    assert_eq!(
        read(v, "crlf.md"),
        "\u{feff}line one\r\nline two\r\n\r\nline three\r\n"
    );

    // dry_run: a diff, and not one byte changed anywhere.
    let before = snapshot(v);
    let d = s
        .ok("edit_note", json!({"path": "Plan.md", "edits": [{"old_text": "note\n", "new_text": "changed\n"}], "dry_run": true}))
        .await;
    assert!(
        d["diff"].as_str().unwrap().contains("-note\n+changed\n"),
        "{d}"
    );
    s.ok(
        "create_note",
        json!({"path": "Dry.md", "content": "x", "dry_run": true}),
    )
    .await;
    s.ok("delete_note", json!({"path": "Plan.md", "dry_run": true}))
        .await;
    s.ok(
        "move_note",
        json!({"from": "Plan.md", "to": "Moved.md", "dry_run": true}),
    )
    .await;
    s.ok(
        "update_frontmatter",
        json!({"path": "Plan.md", "set": {"x": 1}, "dry_run": true}),
    )
    .await;
    assert_eq!(snapshot(v), before, "a dry run changed the vault");
    s.stop().await;
}

#[tokio::test]
async fn delete_goes_to_the_trash_and_history_restores_every_version() {
    let f = fixture(&[
        ("Doomed.md", "version one\n"),
        ("Folder/inner.md", "inner\n"),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;
    let one = read(v, "Doomed.md");
    s.ok(
        "write_note",
        json!({"path": "Doomed.md", "content": "version two\n", "if_match": sha256_hex(&one)}),
    )
    .await;
    let d = s.ok("delete_note", json!({"path": "Doomed.md"})).await;
    assert_eq!(d["trashed_to"], ".trash/Doomed.md");
    assert!(!v.join("Doomed.md").exists());
    assert_eq!(read(v, ".trash/Doomed.md"), "version two\n");
    // A second note of that name goes to the trash under a new name.
    write_tree(v, &[("Doomed.md", "version three\n")]);
    s.eventually(10, "list_notes", json!({}), |r| {
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["path"] == "Doomed.md")
    })
    .await;
    let d = s.ok("delete_note", json!({"path": "Doomed"})).await;
    assert_eq!(d["trashed_to"], ".trash/Doomed 1.md");
    // A folder to the trash: its notes are in the history too.
    let d = s.ok("delete_note", json!({"path": "Folder"})).await;
    assert_eq!(d["trashed_to"], ".trash/Folder");
    let h = s
        .ok("note_history", json!({"path": "Folder/inner.md"}))
        .await;
    assert_eq!(h["versions"][0]["sha256"], sha256_hex("inner\n"), "{h}");
    s.ok(
        "restore_note",
        json!({"path": "Folder/inner.md", "sha256": sha256_hex("inner\n")}),
    )
    .await;
    assert_eq!(read(v, "Folder/inner.md"), "inner\n");
    // Permanent deletion needs its own flag.
    let r = s
        .call("delete_note", json!({"path": "Folder", "permanent": true}))
        .await;
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    assert!(v.join("Folder/inner.md").exists());
    // History: every version a write replaced or removed, newest first, restorable.
    let h = s.ok("note_history", json!({"path": "Doomed.md"})).await;
    let shas: Vec<&str> = h["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sha256"].as_str().unwrap())
        .collect();
    assert_eq!(
        shas,
        [
            sha256_hex("version three\n"),
            sha256_hex("version two\n"),
            sha256_hex("version one\n")
        ]
    );
    assert!(h.get("current_sha256").is_none());
    let r = s
        .ok(
            "restore_note",
            json!({"path": "Doomed.md", "sha256": sha256_hex("version one\n")}),
        )
        .await;
    assert_eq!(r["created"], true);
    assert_eq!(read(v, "Doomed.md"), "version one\n");
    assert_eq!(
        s.ok("search_notes", json!({"query": "version"})).await["hits"][0]["path"],
        "Doomed.md"
    );
    // A restore is undone the same way.
    s.ok("restore_note", json!({"path": "Doomed.md", "sha256": sha256_hex("version two\n"), "if_match": sha256_hex("version one\n")})).await;
    assert_eq!(read(v, "Doomed.md"), "version two\n");
    let h = s.ok("note_history", json!({"path": "Doomed.md"})).await;
    assert_eq!(h["versions"][0]["sha256"], sha256_hex("version one\n"));
    assert_eq!(h["versions"][0]["tool"], "restore_note");
    s.stop().await;
    // The audit log names tools, paths and versions, never content.
    let audit = find_file(&f.state, "audit.jsonl");
    let log = std::fs::read_to_string(audit).unwrap();
    assert_eq!(log.lines().count(), 7, "{log}");
    assert!(
        !log.contains("version one"),
        "content in the audit log: {log}"
    );
    assert!(log.contains("\"to\":\".trash/Doomed 1.md\""), "{log}");

    // With the flag, a folder goes for good, its notes kept in the history.
    let s = writable(&f, &["--allow-permanent-delete"]).await;
    let d = s
        .ok("delete_note", json!({"path": "Folder", "permanent": true}))
        .await;
    assert_eq!(d["permanent"], true);
    assert!(!v.join("Folder").exists());
    let h = s
        .ok("note_history", json!({"path": "Folder/inner.md"}))
        .await;
    assert_eq!(h["versions"][0]["sha256"], sha256_hex("inner\n"));
    s.stop().await;
}

#[tokio::test]
async fn a_move_rewrites_exactly_the_links_that_resolved_to_what_moved() {
    let f = fixture(&[
        (
            "Projects/Plan.md",
            "# Plan\n## Goals\nsee [[Other]] and ![[pic.png]]\n",
        ),
        ("Other.md", "other\n"),
        ("pic.png", "png"),
        (
            "Home.md",
            "---\nup: \"[[Projects/Plan]]\"\n---\n[[Projects/Plan#Goals|the plan]] [[Plan]] ![[Projects/Plan]]\n[md](Projects/Plan.md#Goals) [[Missing]] [[Other]]\n",
        ),
        ("Sub/Child.md", "[rel](../Projects/Plan.md) [[Plan#^b]]\n"),
        (
            "Board.canvas",
            "{\"nodes\":[{\"id\":\"1\",\"type\":\"file\",\"file\":\"Projects/Plan.md\",\"x\":0,\"y\":0,\"width\":1,\"height\":1}],\"edges\":[]}\n",
        ),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;
    let other_before = read(v, "Other.md");
    let r = s
        .ok(
            "move_note",
            json!({"from": "Projects/Plan.md", "to": "Archive/Old Plan.md"}),
        )
        .await;
    assert_eq!(r["files_moved"], 1);
    assert_eq!(
        read(v, "Home.md"),
        "---\nup: \"[[Old Plan]]\"\n---\n[[Old Plan#Goals|the plan]] [[Old Plan]] ![[Old Plan]]\n[md](Old%20Plan.md#Goals) [[Missing]] [[Other]]\n"
    );
    assert_eq!(
        read(v, "Sub/Child.md"),
        "[rel](Old%20Plan.md) [[Old Plan#^b]]\n"
    );
    assert!(read(v, "Board.canvas").contains("\"file\":\"Archive/Old Plan.md\""));
    // The moved note's own links still resolve; nothing else changed.
    assert_eq!(
        read(v, "Archive/Old Plan.md"),
        "# Plan\n## Goals\nsee [[Other]] and ![[pic.png]]\n"
    );
    assert_eq!(read(v, "Other.md"), other_before);
    let broken = broken_targets(&s).await;
    assert_eq!(broken, ["Missing"], "links broken by the move");
    let back = s
        .ok("get_links", json!({"path": "Archive/Old Plan.md"}))
        .await;
    let mut sources: Vec<&str> = back["incoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["source"].as_str().unwrap())
        .collect();
    sources.dedup();
    assert_eq!(sources, ["Home.md", "Sub/Child.md"], "{back}");

    // A folder moves with everything in it; moving into itself or over something is refused.
    let r = s
        .call(
            "move_note",
            json!({"from": "Archive", "to": "Archive/Inner"}),
        )
        .await;
    assert_eq!(r.error["code"], "invalid_argument", "{}", r.raw);
    let r = s
        .call(
            "move_note",
            json!({"from": "Archive/Old Plan.md", "to": "Other.md"}),
        )
        .await;
    assert_eq!(r.error["code"], "conflict");
    s.ok(
        "move_note",
        json!({"from": "Archive", "to": "Kept/Archive"}),
    )
    .await;
    assert!(v.join("Kept/Archive/Old Plan.md").exists());
    assert!(read(v, "Board.canvas").contains("\"file\":\"Kept/Archive/Old Plan.md\""));
    assert_eq!(broken_targets(&s).await, ["Missing"]);
    s.stop().await;
}

/// The targets of the links that resolve to no file.
async fn broken_targets(s: &Server) -> Vec<String> {
    let r = s.ok("find_broken_links", json!({})).await;
    r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["status"] == "broken")
        .map(|l| l["target"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn write_attacks_leave_the_outside_and_hidden_folders_untouched() {
    let f = fixture(&[("Notes/a.md", "a\n"), ("Allowed/b.md", "b\n")]);
    let v = &f.vault;
    symlink(v, "out", &f.outside);
    symlink(v, "Notes/escape.md", f.outside.join("secret.md"));
    symlink(
        v,
        "Notes/dangling.md",
        f.outside.join("created-by-attack.md"),
    );
    symlink(v, "hidden-link", v.join(".obsidian"));
    std::fs::create_dir_all(v.join(".git/hooks")).unwrap();
    std::fs::hard_link(f.outside.join("secret.md"), v.join("Notes/hard.md")).unwrap();
    let outside_before = snapshot(&f.outside);
    let hidden_before = snapshot(&v.join(".obsidian"));
    let s = writable(&f, &["--exclude", "Private/**"]).await;
    let attacks: Vec<(&str, Value)> = vec![
        ("create_note", json!({"path": "out/new.md", "content": "x"})),
        (
            "create_note",
            json!({"path": "../outside/new.md", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": "/tmp/new.md", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": "Notes/dangling.md", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": ".obsidian/evil.md", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": "hidden-link/evil.md", "content": "x"}),
        ),
        (
            "create_note",
            json!({"path": "Private/p.md", "content": "x"}),
        ),
        (
            "write_note",
            json!({"path": "Notes/escape.md", "content": "x", "if_match": sha256_hex("outside bytes\n")}),
        ),
        (
            "append_to_note",
            json!({"path": "Notes/escape.md", "content": "x"}),
        ),
        (
            "append_to_note",
            json!({"path": "out/secret.md", "content": "x"}),
        ),
        ("delete_note", json!({"path": "out/secret.md"})),
        ("delete_note", json!({"path": "out"})),
        ("move_note", json!({"from": "Notes/a.md", "to": "out/a.md"})),
        (
            "move_note",
            json!({"from": "out/secret.md", "to": "Notes/stolen.md"}),
        ),
        (
            "move_note",
            json!({"from": "Notes/a.md", "to": ".obsidian/a.md"}),
        ),
        (
            "restore_note",
            json!({"path": "out/secret.md", "sha256": sha256_hex("a\n")}),
        ),
    ];
    for (tool, args) in &attacks {
        let r = s.call(tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args} succeeded: {}", r.raw);
        assert!(
            !r.raw.contains(f.outside.to_str().unwrap()),
            "host path leaked: {}",
            r.raw
        );
    }
    // A hard link to an outside file: the vault's copy changes, the outside one never.
    s.ok(
        "append_to_note",
        json!({"path": "Notes/hard.md", "content": "appended"}),
    )
    .await;
    assert_eq!(read(v, "Notes/hard.md"), "outside bytes\n\nappended\n");
    assert_eq!(
        snapshot(&f.outside),
        outside_before,
        "the outside tree changed"
    );
    assert_eq!(
        snapshot(&v.join(".obsidian")),
        hidden_before,
        "a hidden folder changed"
    );
    assert!(!v.join(".git/hooks/pre-commit").exists());
    s.stop().await;

    // --write-scope: only inside it, also through an in-vault symlink.
    // Relative: the resolver refuses absolute link targets outright.
    symlink(v, "Allowed/to-notes", "../Notes");
    let s = writable(&f, &["--write-scope", "Allowed"]).await;
    let r = s
        .call("create_note", json!({"path": "Notes/c.md", "content": "x"}))
        .await;
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    let r = s
        .call(
            "create_note",
            json!({"path": "Allowed/to-notes/c.md", "content": "x"}),
        )
        .await;
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    assert!(!v.join("Notes/c.md").exists());
    s.ok(
        "create_note",
        json!({"path": "Allowed/c.md", "content": "x"}),
    )
    .await;
    assert_eq!(
        s.ok("vault_info", json!({})).await["write_scopes"],
        json!(["Allowed"])
    );
    s.stop().await;
}

#[tokio::test]
async fn twenty_concurrent_edits_with_if_match_either_land_or_conflict_none_is_lost() {
    let f = fixture(&[("Shared.md", "start\n")]);
    let s = writable(&f, &[]).await;
    let v = f.vault.clone();
    let base = sha256_hex("start\n");
    // Twenty writers race with the same version: exactly one lands.
    let calls = (0..20).map(|i| {
        s.call(
            "append_to_note",
            json!({"path": "Shared.md", "content": format!("writer {i}"), "if_match": base}),
        )
    });
    let replies = futures_join(calls).await;
    let ok = replies.iter().filter(|r| !r.is_error).count();
    let conflicts = replies
        .iter()
        .filter(|r| r.error["code"] == "conflict")
        .count();
    assert_eq!((ok, conflicts), (1, 19), "{replies:?}");
    // Then each retries from the version the conflict reported: every update lands.
    let mut landed = 1;
    for (i, reply) in replies.iter().enumerate() {
        if reply.is_error {
            let mut version = reply.error["current_sha256"].as_str().unwrap().to_owned();
            loop {
                let r = s
                    .call("append_to_note", json!({"path": "Shared.md", "content": format!("writer {i}"), "if_match": version}))
                    .await;
                if !r.is_error {
                    break;
                }
                version = r.error["current_sha256"].as_str().unwrap().to_owned();
            }
            landed += 1;
        }
    }
    let text = read(&v, "Shared.md");
    assert_eq!(landed, 20);
    for i in 0..20 {
        assert_eq!(text.matches(&format!("writer {i}\n")).count(), 1, "{text}");
    }
    s.stop().await;

    // Two server processes on one vault: appends without a version, interleaved, all land.
    let (a, b) = (writable(&f, &[]).await, writable(&f, &[]).await);
    let runs = (0..10).flat_map(|i| {
        [
            a.call(
                "append_to_note",
                json!({"path": "Shared.md", "content": format!("a{i}")}),
            ),
            b.call(
                "append_to_note",
                json!({"path": "Shared.md", "content": format!("b{i}")}),
            ),
        ]
    });
    for r in futures_join(runs).await {
        assert!(!r.is_error, "{}", r.raw);
    }
    let text = read(&v, "Shared.md");
    for i in 0..10 {
        assert!(
            text.contains(&format!("\na{i}\n")) && text.contains(&format!("\nb{i}\n")),
            "lost: {text}"
        );
    }
    a.stop().await;
    b.stop().await;
}

/// Runs every future at once, returning their results in order.
async fn futures_join<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut out = Vec::with_capacity(pinned.len());
    let mut pending: Vec<_> = pinned.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.extend(results.into_iter().map(|r| r.unwrap()));
    out
}

#[tokio::test]
async fn daily_note_writes_land_where_the_settings_put_them() {
    let f = fixture(&[
        ("Templates/Day.md", "# {{title}}\ncreated {{date:YYYY}}\n"),
        (
            ".obsidian/daily-notes.json",
            "{\"folder\": \"Journal\", \"format\": \"YYYY/MM-DD\", \"template\": \"Templates/Day\"}",
        ),
    ]);
    let s = writable(&f, &[]).await;
    let r = s
        .ok(
            "append_daily_note",
            json!({"text": "met Ada", "date": "2026-03-04"}),
        )
        .await;
    assert_eq!(r["path"], "Journal/2026/03-04.md");
    let text = read(&f.vault, "Journal/2026/03-04.md");
    let lines: Vec<&str> = text.lines().collect();
    // The entry starts a paragraph of its own after the template's text.
    assert_eq!(lines[..3], ["# 03-04", "created 2026", ""]);
    assert!(
        lines[3].starts_with("- ") && lines[3].ends_with(" met Ada"),
        "{text}"
    );
    let got = s.ok("get_daily_note", json!({"date": "2026-03-04"})).await;
    assert_eq!(got["exists"], true);
    let r = s
        .call("create_daily_note", json!({"date": "2026-03-04"}))
        .await;
    assert_eq!(r.error["code"], "conflict");
    s.ok(
        "create_daily_note",
        json!({"date": "2026-03-05", "content": "plan"}),
    )
    .await;
    assert_eq!(
        read(&f.vault, "Journal/2026/03-05.md"),
        "# 03-05\ncreated 2026\n\nplan\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_canvas_read_can_be_written_back_and_edited_node_by_node() {
    let f = fixture(&[
        ("Idea.md", "idea\n"),
        (
            "Board.canvas",
            "{\"nodes\":[{\"id\":\"a\",\"type\":\"file\",\"file\":\"Idea.md\",\"x\":0,\"y\":0,\"width\":100,\"height\":50,\"mine\":1},{\"id\":\"b\",\"type\":\"text\",\"text\":\"why\",\"x\":200,\"y\":0,\"width\":100,\"height\":50}],\"edges\":[{\"id\":\"e1\",\"fromNode\":\"b\",\"toNode\":\"a\",\"toSide\":\"left\"}]}",
        ),
    ]);
    let s = writable(&f, &[]).await;
    let read = s.ok("read_canvas", json!({"path": "Board.canvas"})).await;
    assert_eq!(read["canvas"]["edges"][0]["fromNode"], "b", "{read}");
    let copy = json!({"nodes": read["canvas"]["nodes"], "edges": read["canvas"]["edges"]});
    s.ok("create_canvas", json!({"path": "Copy", "canvas": copy}))
        .await;
    let again = s.ok("read_canvas", json!({"path": "Copy.canvas"})).await;
    assert_eq!(
        again["canvas"], read["canvas"],
        "a canvas read and written back changed"
    );
    assert_eq!(again["files"][0]["resolved"], "Idea.md");

    let r = s
        .ok(
            "edit_canvas",
            json!({"path": "Board.canvas", "if_match": read["sha256"], "ops": [
                {"op": "update_node", "id": "b", "set": {"text": "because", "color": "4"}},
                {"op": "add_node", "node": {"id": "c", "type": "link", "url": "https://obsidian.md", "x": 0, "y": 100, "width": 10, "height": 10}},
                {"op": "remove_node", "id": "a"}
            ]}),
        )
        .await;
    let text = read_file(&f.vault, "Board.canvas");
    assert_eq!(r["sha256"], sha256_hex(&text));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["edges"], json!([]), "the removed node's edge stayed");
    assert_eq!(v["nodes"][0]["text"], "because");
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2);
    // Invalid results and stale versions are refused; nothing changes.
    let bad = s
        .call("edit_canvas", json!({"path": "Board.canvas", "ops": [{"op": "add_edge", "edge": {"fromNode": "b", "toNode": "nope"}}]}))
        .await;
    assert_eq!(bad.error["code"], "invalid_argument", "{}", bad.raw);
    let stale = s
        .call("edit_canvas", json!({"path": "Board.canvas", "if_match": read["sha256"], "ops": [{"op": "remove_node", "id": "b"}]}))
        .await;
    assert_eq!(stale.error["code"], "conflict");
    assert_eq!(read_file(&f.vault, "Board.canvas"), text);
    s.stop().await;
}

fn read_file(v: &Path, p: &str) -> String {
    std::fs::read_to_string(v.join(p)).unwrap()
}

#[tokio::test]
async fn rewritten_links_follow_the_vaults_new_link_format() {
    for (format, wiki, md) in [
        ("absolute", "[[B/Deep/Note 2|n]]", "[m](B/Deep/Note%202.md)"),
        (
            "relative",
            "[[../B/Deep/Note 2|n]]",
            "[m](../B/Deep/Note%202.md)",
        ),
        ("shortest", "[[Note 2|n]]", "[m](Note%202.md)"),
    ] {
        let f = fixture(&[
            ("A/Note.md", "note\n"),
            ("C/src.md", "[[A/Note|n]]\n[m](../A/Note.md)\n"),
        ]);
        write_tree(
            &f.vault,
            &[(
                ".obsidian/app.json",
                format!("{{\"newLinkFormat\": \"{format}\"}}"),
            )],
        );
        let s = writable(&f, &[]).await;
        s.ok(
            "move_note",
            json!({"from": "A/Note.md", "to": "B/Deep/Note 2.md"}),
        )
        .await;
        assert_eq!(
            read(&f.vault, "C/src.md"),
            format!("{wiki}\n{md}\n"),
            "{format}"
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn every_write_tool_refuses_without_write_a_stale_version_and_changes_nothing_on_a_dry_run() {
    let f = fixture(&[
        ("a.md", "---\nk: v\n---\n# H\nbody text\n"),
        (
            "Templates/T.md",
            "# {{title}}\nmade {{date:YYYY}} at {{time:HH}}h\n",
        ),
        ("b.canvas", "{\"nodes\":[],\"edges\":[]}"),
        (".obsidian/templates.json", "{\"folder\": \"Templates\"}"),
    ]);
    let a = read(&f.vault, "a.md");
    let stale = "0".repeat(64);
    // (tool, arguments that would succeed, whether the tool takes if_match), for the note at
    // version `now` with the earlier version `kept` in the history.
    let calls = |now: &str, kept: &str| -> Vec<(&'static str, Value, bool)> {
        vec![
            (
                "create_note",
                json!({"path": "new.md", "content": "x"}),
                false,
            ),
            (
                "write_note",
                json!({"path": "a.md", "content": "x", "if_match": now}),
                true,
            ),
            (
                "edit_note",
                json!({"path": "a.md", "edits": [{"old_text": "body", "new_text": "B"}]}),
                true,
            ),
            (
                "append_to_note",
                json!({"path": "a.md", "content": "x", "heading": "H"}),
                true,
            ),
            (
                "append_to_note",
                json!({"path": "a.md", "content": "x", "at_start": true}),
                true,
            ),
            (
                "update_frontmatter",
                json!({"path": "a.md", "set": {"k": "w"}}),
                true,
            ),
            ("delete_note", json!({"path": "a.md"}), true),
            ("move_note", json!({"from": "a.md", "to": "c.md"}), false),
            (
                "restore_note",
                json!({"path": "a.md", "sha256": kept}),
                true,
            ),
            (
                "append_daily_note",
                json!({"text": "x", "date": "2026-01-02"}),
                false,
            ),
            ("create_daily_note", json!({"date": "2026-01-03"}), false),
            (
                "create_canvas",
                json!({"path": "c.canvas", "canvas": {"nodes": [], "edges": []}}),
                false,
            ),
            (
                "edit_canvas",
                json!({"path": "b.canvas", "ops": [{"op": "add_node", "node": {"type": "text", "text": "t", "x": 0, "y": 0, "width": 1, "height": 1}}]}),
                true,
            ),
        ]
    };
    let ro = Server::start_with(&f.vault, &["--no-index-cache"]).await;
    let before = snapshot(&f.vault);
    for (tool, args, _) in &calls(&sha256_hex(&a), &sha256_hex(&a)) {
        let r = ro.call(tool, args.clone()).await;
        assert_eq!(
            r.error["code"], "refused",
            "{tool} without --write: {}",
            r.raw
        );
    }
    ro.stop().await;
    assert_eq!(snapshot(&f.vault), before, "a refusal changed the vault");
    let s = writable(&f, &[]).await;
    // One real change, so a version is kept for restore_note.
    s.ok("append_to_note", json!({"path": "a.md", "content": "more"}))
        .await;
    let a2 = read(&f.vault, "a.md");
    let before = snapshot(&f.vault);
    for (tool, args, versioned) in &calls(&sha256_hex(&a2), &sha256_hex(&a)) {
        let mut dry = args.clone();
        dry["dry_run"] = json!(true);
        let r = s.call(tool, dry).await;
        assert!(!r.is_error, "{tool} dry run: {}", r.raw);
        if *versioned {
            let mut old = args.clone();
            old["if_match"] = json!(stale);
            let r = s.call(tool, old).await;
            assert_eq!(
                r.error["code"], "conflict",
                "{tool} with a stale version: {}",
                r.raw
            );
            // The note's version now, to act on.
            let now = if *tool == "edit_canvas" {
                "b.canvas"
            } else {
                "a.md"
            };
            assert_eq!(
                r.error["current_sha256"],
                sha256_hex(read(&f.vault, now)),
                "{tool}"
            );
        }
    }
    assert_eq!(
        snapshot(&f.vault),
        before,
        "a dry run or a stale version changed the vault"
    );
    // A template from the templates folder, its variables filled in.
    s.ok("create_note", json!({"path": "From T", "template": "T"}))
        .await;
    let made = read(&f.vault, "From T.md");
    let year = chrono_year();
    assert!(
        made.starts_with(&format!("# From T\nmade {year} at ")),
        "{made}"
    );
    let r = s
        .call("create_note", json!({"path": "x.md", "template": "Nope"}))
        .await;
    assert_eq!(r.error["code"], "not_found", "{}", r.raw);
    s.stop().await;
}

/// This year, as the server's local clock says (the test runs on the same machine).
fn chrono_year() -> String {
    let out = std::process::Command::new("date")
        .arg("+%Y")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn the_audit_log_can_live_elsewhere_but_never_in_the_vault() {
    let f = fixture(&[("a.md", "a\n")]);
    let log = f.outside.join("audit.jsonl");
    let s = writable(&f, &["--audit-log", log.to_str().unwrap()]).await;
    s.ok("append_to_note", json!({"path": "a.md", "content": "b"}))
        .await;
    s.stop().await;
    let line: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(line["tool"], "append_to_note");
    assert_eq!(line["old_sha256"], sha256_hex("a\n"));
    assert_eq!(line["new_sha256"], sha256_hex("a\n\nb\n"));
    let inside = f.vault.join("audit.jsonl");
    let out = crate::common::capvault()
        .arg("serve")
        .arg(&f.vault)
        .args([
            "--write",
            "--state-dir",
            f.state.to_str().unwrap(),
            "--audit-log",
        ])
        .arg(&inside)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("must be outside the vault"), "{err}");
    assert!(!inside.exists());
}

/// Every `\n` in `text` is part of a `\r\n`.
fn all_crlf(text: &str) -> bool {
    text.match_indices('\n')
        .all(|(i, _)| i > 0 && text.as_bytes()[i - 1] == b'\r')
}

#[tokio::test]
async fn write_tools_resolve_bare_names_as_read_note_does_and_misses_get_suggestions() {
    let f = fixture(&[
        (
            "People/Kevin Kelly.md",
            "---\nrole: writer\n---\nKevin text\n",
        ),
        ("People/Ada.md", "ada\n"),
        ("Old/Moving.md", "moving\n"),
        ("Old/Doomed.md", "doomed\n"),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;
    assert_eq!(
        s.ok("read_note", json!({"path": "Kevin Kelly"})).await["path"],
        "People/Kevin Kelly.md"
    );
    let r = s
        .ok(
            "edit_note",
            json!({"path": "Kevin Kelly", "edits": [{"old_text": "Kevin text", "new_text": "edited"}]}),
        )
        .await;
    assert_eq!(r["path"], "People/Kevin Kelly.md", "{r}");
    s.ok(
        "append_to_note",
        json!({"path": "kevin kelly.md", "content": "appended"}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "Kevin Kelly", "content": "prepended", "at_start": true}),
    )
    .await;
    s.ok(
        "update_frontmatter",
        json!({"path": "Kevin Kelly", "set": {"role": "editor"}}),
    )
    .await;
    assert_eq!(
        read(v, "People/Kevin Kelly.md"),
        "---\nrole: editor\n---\nprepended\n\nedited\n\nappended\n"
    );
    let now = sha256_hex(read(v, "People/Kevin Kelly.md"));
    s.ok(
        "write_note",
        json!({"path": "Kevin Kelly", "content": "whole\n", "if_match": now}),
    )
    .await;
    assert_eq!(read(v, "People/Kevin Kelly.md"), "whole\n");
    assert!(!v.join("Kevin Kelly.md").exists());
    // A miss: not_found with the same suggestions read_note gives.
    let want = s.call("read_note", json!({"path": "Kevin Kely"})).await;
    let got = s
        .call(
            "edit_note",
            json!({"path": "Kevin Kely", "edits": [{"old_text": "a", "new_text": "b"}]}),
        )
        .await;
    assert_eq!(got.error["code"], "not_found", "{}", got.raw);
    assert_eq!(got.error["suggestions"], want.error["suggestions"]);
    assert_eq!(got.error["suggestions"][0], "People/Kevin Kelly.md");
    // Moves and deletes take bare names too.
    let m = s
        .ok(
            "move_note",
            json!({"from": "Moving", "to": "New/Moving.md"}),
        )
        .await;
    assert_eq!(m["from"], "Old/Moving.md");
    assert_eq!(read(v, "New/Moving.md"), "moving\n");
    let d = s.ok("delete_note", json!({"path": "Doomed"})).await;
    assert_eq!(d["path"], "Old/Doomed.md");
    assert!(!v.join("Old/Doomed.md").exists());
    // Creation tools take the path as given: a bare name is a new note at the root.
    let c = s
        .ok(
            "create_note",
            json!({"path": "Ada", "content": "root ada\n"}),
        )
        .await;
    assert_eq!(c["path"], "Ada.md");
    assert_eq!(read(v, "People/Ada.md"), "ada\n");
    s.stop().await;
}

#[tokio::test]
async fn every_write_keeps_a_crlf_notes_line_endings() {
    let f = fixture(&[
        (
            "crlf.md",
            "---\r\ntitle: T\r\n---\r\n# Top\r\nline one\r\n\r\n## Tasks\r\n- a\r\n",
        ),
        ("Target.md", "target\r\n"),
        ("links.md", "see [[Target]] and [t](Target.md)\r\nend\r\n"),
        ("Daily/2026-01-02.md", "# Day\r\n- 08:00 first\r\n"),
        (
            ".obsidian/daily-notes.json",
            r#"{"folder": "Daily", "format": "YYYY-MM-DD"}"#,
        ),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;
    s.ok(
        "edit_note",
        json!({"path": "crlf.md", "edits": [{"old_text": "line one", "new_text": "line one\nline two"}]}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "crlf.md", "content": "- b\n- c"}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "crlf.md", "content": "under top\nagain", "heading": "Top"}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "crlf.md", "content": "first\nsecond", "at_start": true}),
    )
    .await;
    s.ok(
        "update_frontmatter",
        json!({"path": "crlf.md", "set": {"nested": {"a": 2}, "list": ["x", "y"]}}),
    )
    .await;
    let text = read(v, "crlf.md");
    assert!(all_crlf(&text), "{text:?}");
    assert!(text.contains("line one\r\nline two\r\n"), "{text:?}");
    assert!(text.contains("nested:\r\n  a: 2\r\n"), "{text:?}");
    s.ok(
        "move_note",
        json!({"from": "Target.md", "to": "Sub/Moved Target.md"}),
    )
    .await;
    let links = read(v, "links.md");
    assert!(all_crlf(&links) && links.contains("Moved"), "{links:?}");
    s.ok(
        "append_daily_note",
        json!({"text": "second\nline", "date": "2026-01-02"}),
    )
    .await;
    let daily = read(v, "Daily/2026-01-02.md");
    assert!(all_crlf(&daily), "{daily:?}");
    // write_note writes the client's bytes as they are: the whole text is the client's.
    let now = sha256_hex(read(v, "Sub/Moved Target.md"));
    s.ok(
        "write_note",
        json!({"path": "Sub/Moved Target.md", "content": "lf\nonly\n", "if_match": now}),
    )
    .await;
    assert_eq!(read(v, "Sub/Moved Target.md"), "lf\nonly\n");
    s.stop().await;
}

#[tokio::test]
async fn update_frontmatter_keeps_comments_writes_objects_as_blocks_and_keys_in_the_order_sent() {
    let f = fixture(&[(
        "n.md",
        "---\ntitle: Old   # why this title\ntags:\n  - a\n---\nbody\n",
    )]);
    let s = writable(&f, &[]).await;
    // serde_json keeps this object's order (preserve_order), and so does the wire.
    let set: Value = serde_json::from_str(
        r#"{"title": "New", "zeta": 1, "nested": {"b": 2, "a": {"c": "d"}}, "alpha": "x"}"#,
    )
    .unwrap();
    s.ok("update_frontmatter", json!({"path": "n.md", "set": set}))
        .await;
    assert_eq!(
        read(&f.vault, "n.md"),
        "---\ntitle: New   # why this title\ntags:\n  - a\nzeta: 1\nnested:\n  b: 2\n  a:\n    c: d\nalpha: x\n---\nbody\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_move_keeps_each_markdown_links_own_style() {
    let f = fixture(&[
        ("References/Steph Ango.md", "steph\n"),
        (
            "links.md",
            "[angled](<References/Steph Ango.md>) [enc](References/Steph%20Ango.md) \
             [both](<References/Steph%20Ango.md#Top>) [[References/Steph Ango|wiki]]\n",
        ),
        (".obsidian/app.json", r#"{"newLinkFormat": "absolute"}"#),
    ]);
    let s = writable(&f, &[]).await;
    s.ok(
        "move_note",
        json!({"from": "References/Steph Ango.md", "to": "People/Stephan Ango.md"}),
    )
    .await;
    assert_eq!(
        read(&f.vault, "links.md"),
        "[angled](<People/Stephan Ango.md>) [enc](People/Stephan%20Ango.md) \
         [both](<People/Stephan%20Ango.md#Top>) [[People/Stephan Ango|wiki]]\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn dry_run_replies_say_what_would_happen_not_what_did() {
    let f = fixture(&[("a.md", "a\n"), ("F/b.md", "b\n")]);
    let s = writable(&f, &["--allow-permanent-delete"]).await;
    let before = snapshot(&f.vault);
    for args in [
        json!({"path": "a.md", "dry_run": true}),
        json!({"path": "a.md", "dry_run": true, "permanent": true}),
        json!({"path": "F", "dry_run": true}),
        json!({"path": "F", "dry_run": true, "permanent": true}),
    ] {
        let r = s.ok("delete_note", args.clone()).await;
        let m = r["message"].as_str().unwrap();
        assert!(m.starts_with("would "), "{args}: {m}");
        assert!(
            !m.contains("moved to") && !m.contains(" are kept"),
            "{args}: {m}"
        );
    }
    assert_eq!(snapshot(&f.vault), before);
    let r = s
        .ok("delete_note", json!({"path": "F", "permanent": true}))
        .await;
    let m = r["message"].as_str().unwrap();
    assert!(
        m.starts_with("removed for good") && m.contains("1 file(s) are kept"),
        "{m}"
    );
    s.stop().await;
}

#[tokio::test]
async fn appends_start_a_paragraph_of_their_own_and_a_heading_append_lands_in_its_own_text() {
    let f = fixture(&[
        ("p.md", "A paragraph.\n"),
        ("l.md", "- one\n"),
        (
            "h.md",
            "# Plan\nintro\n\n## Tasks\n- one\n\n## Notes\nnote\n",
        ),
    ]);
    let s = writable(&f, &[]).await;
    let v = &f.vault;
    s.ok(
        "append_to_note",
        json!({"path": "p.md", "content": "More."}),
    )
    .await;
    assert_eq!(read(v, "p.md"), "A paragraph.\n\nMore.\n");
    s.ok(
        "append_to_note",
        json!({"path": "l.md", "content": "- two"}),
    )
    .await;
    assert_eq!(read(v, "l.md"), "- one\n- two\n");
    s.ok(
        "append_to_note",
        json!({"path": "h.md", "content": "more intro", "heading": "Plan"}),
    )
    .await;
    s.ok(
        "append_to_note",
        json!({"path": "h.md", "content": "- two", "heading": "Plan/Tasks"}),
    )
    .await;
    assert_eq!(
        read(v, "h.md"),
        "# Plan\nintro\n\nmore intro\n\n## Tasks\n- one\n- two\n\n## Notes\nnote\n"
    );
    s.stop().await;
}

#[tokio::test]
async fn server_instructions_describe_exactly_which_tools_require_if_match() {
    let f = fixture(&[("a.md", "a\n")]);
    let s = writable(&f, &[]).await;
    let info = s.client.peer_info().unwrap();
    let text = info.instructions.clone().unwrap_or_default();
    assert!(!text.contains("every change needs"), "{text}");
    assert!(text.contains("`write_note` needs"), "{text}");
    // What the instructions say is enforced: edit_note works without if_match...
    s.ok(
        "edit_note",
        json!({"path": "a.md", "edits": [{"old_text": "a", "new_text": "b"}]}),
    )
    .await;
    // ...and write_note does not.
    let r = s
        .call("write_note", json!({"path": "a.md", "content": "c"}))
        .await;
    assert!(r.is_error, "{}", r.raw);
    s.stop().await;
}

#[tokio::test]
async fn moving_or_deleting_a_folder_never_carries_hidden_or_excluded_entries() {
    let f = fixture(&[
        ("Projects/Public/a.md", "public\n"),
        ("Projects/Private/secret.md", "secret\n"),
        ("Journal/2026.md", "journal\n"),
        ("Repo/readme.md", "repo\n"),
        ("Repo/.git/config", "[core]\n"),
        ("Notes/n.md", "n\n"),
        ("Clean/x.md", "x\n"),
        ("Clean/pic.png", "png bytes"),
    ]);
    let s = writable(
        &f,
        &[
            "--exclude",
            "Projects/Private",
            "--exclude",
            "Journal/**",
            "--exclude",
            "Archive/*/*.md",
            "--allow-permanent-delete",
        ],
    )
    .await;
    let v = &f.vault;
    let before = snapshot(v);
    for (from, to) in [
        ("Projects", "Elsewhere/Projects"),
        ("Journal", "Diary"),
        ("Repo", "Code/Repo"),
        ("Notes", "Archive/Notes"),
    ] {
        for dry_run in [true, false] {
            let r = s
                .call(
                    "move_note",
                    json!({"from": from, "to": to, "dry_run": dry_run}),
                )
                .await;
            assert_eq!(r.error["code"], "refused", "{from} -> {to}: {}", r.raw);
            assert!(
                !r.raw.contains("secret") && !r.raw.contains(".git"),
                "{}",
                r.raw
            );
        }
    }
    for folder in ["Projects", "Journal", "Repo"] {
        for permanent in [false, true] {
            let r = s
                .call(
                    "delete_note",
                    json!({"path": folder, "permanent": permanent}),
                )
                .await;
            assert_eq!(r.error["code"], "refused", "{folder}: {}", r.raw);
        }
    }
    assert_eq!(
        snapshot(v),
        before,
        "a refused move or delete changed the vault"
    );
    let hidden = s
        .call(
            "read_note",
            json!({"path": "Elsewhere/Projects/Private/secret.md"}),
        )
        .await;
    assert!(hidden.is_error);
    // A folder of visible files only goes, and every file of it is in the history, attachments too.
    let r = s
        .ok("delete_note", json!({"path": "Clean", "permanent": true}))
        .await;
    assert!(r["message"].as_str().unwrap().contains("2 file(s)"), "{r}");
    let h = s.ok("note_history", json!({"path": "Clean/pic.png"})).await;
    assert_eq!(h["versions"][0]["sha256"], sha256_hex("png bytes"), "{h}");
    s.stop().await;
}

#[tokio::test]
async fn writes_never_nest_deeper_than_the_depth_limit() {
    let deep_folder: Vec<String> = (0..70).map(|i| format!("d{i}")).collect();
    let deep = format!("{}/x.md", deep_folder.join("/"));
    let f = fixture(&[("Tree/a/b/c.md", "c\n"), (deep.as_str(), "deep\n")]);
    let s = writable(&f, &["--allow-permanent-delete"]).await;
    let v = &f.vault;
    let before = snapshot(v);
    // 65 components: refused; 64: fine.
    let too_deep: Vec<String> = (0..64).map(|i| format!("n{i}")).collect();
    let r = s
        .call(
            "create_note",
            json!({"path": format!("{}/x.md", too_deep.join("/")), "content": "x"}),
        )
        .await;
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    // A folder whose files would land deeper than 64 levels does not move.
    let to: Vec<String> = (0..62).map(|i| format!("m{i}")).collect();
    let r = s
        .call("move_note", json!({"from": "Tree", "to": to.join("/")}))
        .await;
    assert_eq!(r.error["code"], "refused", "{}", r.raw);
    // A tree deeper than the limit is not deleted (nor walked without bound).
    for permanent in [false, true] {
        let r = s
            .call("delete_note", json!({"path": "d0", "permanent": permanent}))
            .await;
        assert_eq!(r.error["code"], "refused", "{}", r.raw);
    }
    assert_eq!(snapshot(v), before);
    let ok: Vec<String> = (0..63).map(|i| format!("n{i}")).collect();
    s.ok(
        "create_note",
        json!({"path": format!("{}/x.md", ok.join("/")), "content": "x"}),
    )
    .await;
    s.stop().await;
}

#[tokio::test]
async fn a_folder_named_through_an_in_vault_symlink_is_moved_counted_and_relinked_where_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("vault");
    write_tree(
        &v,
        &[
            ("Projects/sub/A.md", "# A\n"),
            ("Projects/sub/B.md", "# B\nsee [[Projects/sub/A]]\n"),
            ("Index.md", "[[Projects/sub/A]] and [[Projects/sub/B|b]]\n"),
        ],
    );
    symlink(&v, "plink", "Projects");
    let state = tmp.path().join("state");
    let s = Server::start_with(&v, &["--write", "--state-dir", state.to_str().unwrap()]).await;
    s.wait_index_ready().await;
    let dry = s
        .ok(
            "move_note",
            json!({"from": "plink/sub", "to": "Archive/sub", "dry_run": true}),
        )
        .await;
    assert_eq!(dry["from"], "Projects/sub", "{dry}");
    assert_eq!(dry["files_moved"], 2, "{dry}");
    let r = s
        .ok(
            "move_note",
            json!({"from": "plink/sub", "to": "Archive/sub"}),
        )
        .await;
    assert_eq!(r["files_moved"], 2, "{r}");
    assert_eq!(r["links_updated"], 3, "{r}");
    assert!(v.join("Archive/sub/A.md").is_file());
    assert!(!v.join("Projects/sub").exists());
    let index = std::fs::read_to_string(v.join("Index.md")).unwrap();
    // Rewritten as Obsidian writes a link by default: the shortest name that resolves.
    assert_eq!(index, "[[A]] and [[B|b]]\n");
    let b = std::fs::read_to_string(v.join("Archive/sub/B.md")).unwrap();
    assert!(b.contains("see [[A]]"), "{b}");
    s.stop().await;
}
