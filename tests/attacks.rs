//! The attack table: every row is one way out of the vault (or into a hidden folder), tried
//! against every path-taking tool and `resources/read` through the real binary over stdio.
//! Each row must fail, no reply may carry a byte of the secrets, and the tree outside the vault
//! must be byte-for-byte unchanged. Scans must not surface escaping symlinks either. A race test
//! swaps a folder for a symlink while reads go through it.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Server, snapshot, symlink, write_tree};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::json;

const SECRET: &str = "OUTSIDE-SECRET-4b1d9e";
const EVIL: &str = "SIBLING-SECRET-77aa0c";
const HIDDEN: &str = "HIDDEN-SECRET-e5f802";
const EXCLUDED: &str = "EXCLUDED-SECRET-3c9a71";

/// What the attack server excludes (`--exclude`).
const EXCLUDE_FLAGS: &[&str] = &["--exclude", "Private", "--exclude", "**/*.secret.md"];

/// Excluded files, and in-vault symlinks that lead to them.
fn add_excluded(tmp: &Path) {
    let v = tmp.join("vault");
    write_tree(
        &v,
        &[
            ("Private/diary.md", EXCLUDED),
            ("Private/deep/plan.md", EXCLUDED),
            ("notes/keys.secret.md", EXCLUDED),
        ],
    );
    symlink(&v, "pub_link", "Private");
    symlink(&v, "notes/diary_alias.md", "../Private/diary.md");
    symlink(&v, "notes/keys_alias.md", "keys.secret.md");
}

/// Rows for excluded paths: direct, in other letter cases, through in-vault symlinks.
fn excluded_rows() -> Vec<(String, &'static str)> {
    vec![
        ("Private/diary.md".into(), "excluded folder"),
        ("private/diary.md".into(), "excluded folder, lower case"),
        (
            "PRIVATE/deep/plan.md".into(),
            "excluded folder, upper case, deeper",
        ),
        ("Private".into(), "the excluded folder itself"),
        ("notes/keys.secret.md".into(), "excluded file glob"),
        (
            "NOTES/KEYS.SECRET.MD".into(),
            "excluded file glob, upper case",
        ),
        (
            "pub_link/diary.md".into(),
            "excluded folder through an in-vault symlink",
        ),
        (
            "notes/diary_alias.md".into(),
            "excluded file through a file symlink",
        ),
        (
            "notes/keys_alias.md".into(),
            "excluded glob through a file symlink",
        ),
    ]
}

/// Arguments for every call of `tool` that puts `path` in one of its path parameters, taken
/// from its input schema: `path`, `folder`, `from` and `to` (a move's destination); other
/// required parameters get a harmless value (a new required parameter fails here until it has
/// one; a write tool's values would change nothing even where the path is allowed: a version no
/// file has, a text no note holds).
fn path_calls(tool: &rmcp::model::Tool, path: &str) -> Vec<(serde_json::Value, bool)> {
    let schema = serde_json::Value::Object((*tool.input_schema).clone());
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let filler = |name: &str| match name {
        "query" => json!("secret"),
        "link" => json!("[[ok]]"),
        "path" => json!("ok.md"),
        "from" => json!("ok.md"),
        "to" => json!("moved-by-attack.md"),
        "content" | "text" => json!("written by an attack"),
        "if_match" | "sha256" => json!("0".repeat(64)),
        "edits" => json!([{"old_text": "no such text", "new_text": "x"}]),
        "canvas" => json!({"nodes": [], "edges": []}),
        "ops" => json!([{"op": "remove_node", "id": "none"}]),
        // The notes' first lines are not tasks: a status change there is refused.
        "line" => json!(1),
        other => panic!("{}: no harmless value for required `{other}`", tool.name),
    };
    let mut calls = Vec::new();
    for param in ["path", "folder", "from", "to", "this"] {
        if !props.contains_key(param) {
            continue;
        }
        let mut args = serde_json::Map::new();
        for r in &required {
            if *r != param {
                args.insert((*r).to_owned(), filler(r));
            }
        }
        // `query_base`'s `this` (the note a base is shown in) goes with an inline base.
        if param == "this" && props.contains_key("base") {
            args.insert(
                "base".into(),
                json!("views: [{order: [file.name, file.size]}]"),
            );
        }
        args.insert(param.to_owned(), json!(path));
        // The empty folder is the vault root: allowed.
        let must_fail = !(param == "folder" && path.is_empty());
        calls.push((serde_json::Value::Object(args.clone()), must_fail));
        if props.contains_key("direction") {
            args.insert("direction".into(), json!("in"));
            calls.push((serde_json::Value::Object(args), must_fail));
        }
    }
    calls
}

/// tmp/{vault, vault-evil, outside}: the vault holds ordinary notes, hidden folders and every
/// kind of hostile entry.
fn hostile_tree() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let outside = root.join("outside");
    write_tree(
        root,
        &[
            ("outside/secret.md", SECRET),
            ("outside/sub/deeper.md", SECRET),
            ("vault-evil/secret.md", EVIL),
            ("vault/ok.md", "an ordinary note"),
            ("vault/dir/inner.md", "inner note"),
            ("vault/.obsidian/app.json", HIDDEN),
            ("vault/.obsidian/plugins/x/main.js", HIDDEN),
            ("vault/.git/config", HIDDEN),
            ("vault/.trash/old.md", HIDDEN),
            ("vault/notes/.env", HIDDEN),
        ],
    );
    let v = root.join("vault");
    symlink(&v, "link_file.md", "../outside/secret.md");
    symlink(&v, "link_file_abs.md", outside.join("secret.md"));
    symlink(&v, "link_dir", "../outside");
    symlink(&v, "link_dir_abs", &outside);
    symlink(&v, "dir/deep_link.md", "../../outside/secret.md");
    symlink(&v, "chain1", "chain2");
    symlink(&v, "chain2", "chain3");
    symlink(&v, "chain3", "link_dir");
    symlink(&v, "chain_file.md", "chain1/secret.md");
    symlink(&v, "loop_a", "loop_b");
    symlink(&v, "loop_b", "loop_a");
    symlink(&v, "self_loop", "self_loop");
    symlink(&v, "proc_root", "/proc/self/root");
    symlink(
        &v,
        "proc_rel",
        "../../../../../../../../../../proc/self/root",
    );
    symlink(&v, "cfg", ".obsidian");
    symlink(&v, "notes/cfg", "../.obsidian");
    symlink(&v, "notes/app.md", "../.obsidian/app.json");
    symlink(&v, "git_link", "dir/../.git");
    symlink(&v, "dangling.md", "../outside/missing.md");
    symlink(&v, "sibling", "../vault-evil");
    let made = std::process::Command::new("mkfifo")
        .arg(v.join("fifo.md"))
        .status()
        .unwrap();
    assert!(made.success());
    tmp
}

/// Every row: a path a hostile client might send.
fn rows(tmp: &Path) -> Vec<(String, &'static str)> {
    let outside = tmp.join("outside").to_string_lossy().into_owned();
    let mut rows: Vec<(String, &'static str)> = vec![
        ("../outside/secret.md".into(), "dot-dot"),
        (
            "dir/../../outside/secret.md".into(),
            "dot-dot after a folder",
        ),
        ("./../outside/secret.md".into(), "dot then dot-dot"),
        (format!("{outside}/secret.md"), "absolute path"),
        ("/etc/passwd".into(), "absolute system path"),
        (
            "../vault-evil/secret.md".into(),
            "sibling folder sharing the name prefix",
        ),
        ("sibling/secret.md".into(), "symlink to the sibling folder"),
        ("link_file.md".into(), "symlinked file, relative target"),
        ("link_file_abs.md".into(), "symlinked file, absolute target"),
        ("dir/deep_link.md".into(), "symlinked file in a subfolder"),
        (
            "link_dir/secret.md".into(),
            "symlinked folder, relative target",
        ),
        (
            "link_dir_abs/secret.md".into(),
            "symlinked folder, absolute target",
        ),
        (
            "link_dir/sub/deeper.md".into(),
            "deeper through a symlinked folder",
        ),
        ("link_dir".into(), "the symlinked folder itself"),
        ("chain1/secret.md".into(), "symlink chain leading out"),
        ("chain_file.md".into(), "file symlink through a chain"),
        ("loop_a".into(), "symlink loop"),
        ("loop_a/x.md".into(), "through a symlink loop"),
        ("self_loop".into(), "self-referencing symlink"),
        (
            "link_file.md/".into(),
            "trailing slash after a file symlink",
        ),
        ("link_dir/".into(), "trailing slash after a folder symlink"),
        (
            "proc_root/etc/passwd".into(),
            "/proc/self/root via a symlink",
        ),
        (
            format!("proc_root{outside}/secret.md"),
            "/proc/self/root to the secret",
        ),
        (
            format!("proc_rel{outside}/secret.md"),
            "relative climb to /proc",
        ),
        ("dangling.md".into(), "dangling symlink"),
        ("fifo.md".into(), "a FIFO named like a note"),
        ("ok\0.md".into(), "NUL byte"),
        ("ok.md\0../../outside/secret.md".into(), "NUL truncation"),
        ("ok\n.md".into(), "newline"),
        ("dir\\..\\..\\outside\\secret.md".into(), "backslashes"),
        ("..\\outside\\secret.md".into(), "backslash dot-dot"),
        ("C:/outside/secret.md".into(), "drive letter"),
        (
            "C:\\Windows\\win.ini".into(),
            "drive letter with backslashes",
        ),
        ("\\\\server\\share\\secret.md".into(), "UNC path"),
        ("ok.md:secret".into(), "alternate data stream"),
        ("．．/outside/secret.md".into(), "fullwidth dots"),
        ("%2e%2e/outside/secret.md".into(), "percent-encoded dots"),
        (
            "%2e%2e%2foutside%2fsecret.md".into(),
            "percent-encoded dots and slashes",
        ),
        (
            "..%2foutside%2fsecret.md".into(),
            "dot-dot with encoded slash",
        ),
        (".obsidian/app.json".into(), "hidden folder"),
        (".OBSIDIAN/app.json".into(), "hidden folder, upper case"),
        (
            ".Obsidian/plugins/x/main.js".into(),
            "hidden folder, mixed case",
        ),
        (".git/config".into(), "git folder"),
        (".GIT/config".into(), "git folder, upper case"),
        (".trash/old.md".into(), "trash folder"),
        ("notes/.env".into(), "dotfile in a subfolder"),
        (
            "cfg/app.json".into(),
            "hidden folder through an in-vault symlink",
        ),
        (
            "notes/cfg/app.json".into(),
            "hidden folder through a nested in-vault symlink",
        ),
        (
            "notes/app.md".into(),
            "hidden file through an in-vault file symlink",
        ),
        (
            "git_link/config".into(),
            "hidden folder through a symlink with dot-dot",
        ),
        ("a".repeat(5000), "5,000-byte name"),
        ("a/".repeat(2100) + "x.md", "path over 4,096 bytes"),
        ("".into(), "empty path"),
        (".".into(), "the root as a dot"),
        ("..".into(), "the parent"),
    ];
    rows.sort_by_key(|r| r.0.is_empty()); // keep the empty row last (it is the root for folders)
    rows
}

fn assert_clean(what: &str, reply: &str, tmp: &Path) {
    for secret in [SECRET, EVIL, HIDDEN, EXCLUDED] {
        assert!(!reply.contains(secret), "{what}: leaked {secret}: {reply}");
    }
    let host = tmp.to_string_lossy();
    assert!(
        !reply.contains(host.as_ref()),
        "{what}: reply names a host path: {reply}"
    );
}

/// Some rows are strange but legal names for a new file: `link_dir` becomes `link_dir.md` (a new
/// note at the root, not the symlinked folder), `．．/outside/secret.md` (fullwidth dots) or
/// `%2e%2e/x.md` are literal folder names. A create or a move there is accepted when the file it
/// reports is a regular file really inside the vault, at a visible path; the caller undoes it
/// through the server, so the rest of the test sees the vault as it was.
fn created_beside(
    tool: &str,
    row: &str,
    r: &crate::common::Reply,
    vault: &std::path::Path,
) -> Option<(&'static str, serde_json::Value)> {
    let field = match tool {
        "create_note" | "create_canvas" => "path",
        "move_note" => "to",
        _ => return None,
    };
    if r.is_error {
        return None;
    }
    let made = r.structured[field]
        .as_str()
        .expect("the path written")
        .to_owned();
    let _ = row;
    assert!(
        !made.split('/').any(|c| c.starts_with('.')),
        "{tool}: wrote a hidden path {made}"
    );
    let file = vault.join(&made);
    let meta = std::fs::symlink_metadata(&file).expect("the created file");
    assert!(meta.is_file(), "{tool} {made}: not a regular file");
    let real = std::fs::canonicalize(&file).unwrap();
    assert!(
        real.starts_with(std::fs::canonicalize(vault).unwrap()),
        "{tool}: wrote outside the vault: {}",
        real.display()
    );
    Some(if tool == "move_note" {
        (
            "move_note",
            json!({"from": made, "to": r.structured["from"]}),
        )
    } else {
        // With the version just written: over HTTP every change must name it.
        let version = crate::common::sha256_hex(std::fs::read(&file).unwrap());
        ("delete_note", json!({"path": made, "if_match": version}))
    })
}

async fn with_deadline<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 10 s (hang)"))
}

/// How the attack table reaches the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Stdio,
    /// The Streamable HTTP transport: the gate in front changes nothing.
    #[cfg(feature = "http")]
    Http,
    /// Over stdio, with `openat2` failing with ENOSYS in the server (cap-std's fallback).
    #[cfg(target_os = "linux")]
    StdioWithoutOpenat2,
}

#[tokio::test]
async fn every_attack_row_fails_on_every_path_tool_without_leaking() {
    attack_table(Via::Stdio).await;
}

#[cfg(feature = "http")]
#[tokio::test]
async fn every_attack_row_fails_over_http_too() {
    attack_table(Via::Http).await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn every_attack_row_fails_when_openat2_is_unavailable() {
    attack_table(Via::StdioWithoutOpenat2).await;
}

async fn attack_table(via: Via) {
    let tmp = hostile_tree();
    add_excluded(tmp.path());
    let before = snapshot(&tmp.path().join("outside"));
    let before_evil = snapshot(&tmp.path().join("vault-evil"));
    let hidden = ["vault/.obsidian", "vault/.git", "vault/notes"].map(|h| tmp.path().join(h));
    let before_hidden: Vec<_> = hidden.iter().map(|h| snapshot(h)).collect();
    // With --write: the write tools take every row too.
    let state = tmp.path().join("state");
    let mut flags: Vec<&str> = EXCLUDE_FLAGS.to_vec();
    flags.extend(["--write", "--state-dir", state.to_str().unwrap()]);
    // With an embedding model: `related_notes` is listed and takes every row as well.
    #[cfg(feature = "semantic")]
    let model = tmp.path().join("model");
    #[cfg(feature = "semantic")]
    {
        crate::common::write_model(&model);
        flags.extend(["--embedding-model", model.to_str().unwrap()]);
    }
    let v = tmp.path().join("vault");
    let s = match via {
        Via::Stdio => Server::start_with(&v, &flags).await,
        #[cfg(feature = "http")]
        Via::Http => Server::start_http(&v, &flags).await,
        #[cfg(target_os = "linux")]
        Via::StdioWithoutOpenat2 => Server::start_without_openat2(&v, &flags).await,
    };

    let tools = s.client.list_all_tools().await.unwrap();
    let path_tools: Vec<&str> = tools
        .iter()
        .filter(|t| !path_calls(t, "x").is_empty())
        .map(|t| t.name.as_ref())
        .collect();
    // The table covers every tool that takes a path, as tools/list describes them.
    for t in [
        "read_note",
        "get_links",
        "list_notes",
        "list_folders",
        "search_notes",
        "create_note",
        "write_note",
        "edit_note",
        "delete_note",
        "move_note",
        "restore_note",
        "edit_canvas",
        "query_base",
        "list_bases",
        #[cfg(feature = "semantic")]
        "related_notes",
    ] {
        assert!(
            path_tools.contains(&t),
            "{t} not found in tools/list: {path_tools:?}"
        );
    }
    let mut all_rows = rows(tmp.path());
    all_rows.extend(excluded_rows());
    for (path, why) in all_rows {
        for tool in &tools {
            for (args, must_fail) in path_calls(tool, &path) {
                let what = format!("{} {args} [{why}]", tool.name);
                let r = with_deadline(&what, s.call(&tool.name, args.clone())).await;
                let undo = created_beside(&tool.name, &path, &r, &tmp.path().join("vault"));
                // A history lookup reads only the state folder; with no current version it read
                // nothing of the vault.
                let created = undo.is_some()
                    || (tool.name == "note_history"
                        && !r.is_error
                        && r.structured["current_sha256"].is_null());
                if let Some((undo_tool, undo_args)) = undo {
                    // Undone through the server, so its model follows at once.
                    s.ok(undo_tool, undo_args).await;
                }
                if must_fail && !created {
                    assert!(r.is_error, "{what}: accepted: {}", r.raw);
                }
                assert_clean(&what, &r.raw, tmp.path());
            }
        }
        if let Some(code) = excluded_rows()
            .iter()
            .any(|(p, _)| *p == path)
            .then(|| s.call("read_note", json!({"path": path})))
        {
            let r = code.await;
            assert_eq!(r.error["code"], "refused", "{why}: {}", r.raw);
        }

        // resources/read: the same rules after percent-decoding; raw and encoded forms.
        let encoded = utf8_percent_encode(&path, NON_ALPHANUMERIC).to_string();
        for uri in [
            format!("capvault:///{path}"),
            format!("capvault:///{encoded}"),
        ] {
            let what = format!("resources/read [{why}] {}", uri.escape_debug());
            match with_deadline(&what, s.read_resource(&uri)).await {
                Ok(body) => panic!("{what}: accepted: {body}"),
                Err((_, msg)) => assert_clean(&what, &msg, tmp.path()),
            }
        }
    }

    // Neither the scans nor the index (built by following nothing) surface what lies outside
    // or hidden, in any search mode.
    let index = s.wait_index_ready().await;
    assert_eq!(
        index["documents"], 2,
        "only ok.md and dir/inner.md are indexed: {index}"
    );
    for query in [SECRET, EVIL, HIDDEN, EXCLUDED, "secret"] {
        for mode in ["ranked", "exact", "regex"] {
            let r = s
                .ok("search_notes", json!({"query": query, "mode": mode}))
                .await;
            assert_eq!(r["total"], 0, "{mode} search for {query} found {r}");
        }
    }
    let listed = s.ok("list_notes", json!({"limit": 1000})).await;
    let listed: Vec<&str> = listed["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.contains(&"ok.md") && listed.contains(&"dir/inner.md"));
    let resources = s.client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 2);
    // The model-based tools see the same two notes and no secret.
    for (tool, args) in [
        ("vault_info", json!({})),
        ("list_tags", json!({"limit": 1000})),
        ("list_tasks", json!({"status": "any", "limit": 1000})),
        (
            "run_query",
            json!({"query": "TABLE file.frontmatter, file.outlinks, file.inlinks, file.tasks", "limit": 500}),
        ),
        (
            "run_query",
            json!({"language": "tasks", "query": "path includes secret", "limit": 500}),
        ),
        ("find_orphans", json!({"limit": 1000})),
        ("find_broken_links", json!({"limit": 1000})),
        ("list_notes", json!({"glob": "**", "limit": 1000})),
    ] {
        let r = s.call(tool, args).await;
        assert!(!r.is_error, "{tool}: {}", r.raw);
        assert_clean(tool, &r.raw, tmp.path());
    }
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["notes"], 2, "{info}");
    s.stop().await;

    assert_eq!(
        snapshot(&tmp.path().join("outside")),
        before,
        "outside tree changed"
    );
    assert_eq!(snapshot(&tmp.path().join("vault-evil")), before_evil);
    let after_hidden: Vec<_> = hidden.iter().map(|h| snapshot(h)).collect();
    assert_eq!(after_hidden, before_hidden, "a hidden folder changed");
}

#[tokio::test]
async fn in_vault_symlinks_that_stay_visible_are_followed() {
    let tmp = hostile_tree();
    let v = tmp.path().join("vault");
    symlink(&v, "alias.md", "ok.md");
    symlink(&v, "notes/up.md", "../dir/inner.md");
    symlink(&v, "dir_alias", "dir");
    let s = Server::start(&v).await;
    let r = s.ok("read_note", json!({"path": "alias.md"})).await;
    assert_eq!(r["content"], "an ordinary note");
    let r = s.ok("read_note", json!({"path": "notes/up.md"})).await;
    assert_eq!(r["content"], "inner note");
    let r = s
        .ok("read_note", json!({"path": "dir_alias/inner.md"}))
        .await;
    assert_eq!(r["content"], "inner note");
    // File links are listed under their own names; folder links are not descended (as in
    // Obsidian), so nothing is listed twice.
    let listed = s.ok("list_notes", json!({})).await;
    let mut paths: Vec<&str> = listed["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["alias.md", "dir/inner.md", "notes/up.md", "ok.md"]);
    s.stop().await;
}

/// One thread keeps swapping `vault/swap` between a real folder and a symlink to the outside
/// folder (by rename) while the client reads `swap/note.md` through the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_swapped_for_a_symlink_mid_read_never_leaks() {
    swap_race(false).await;
}

/// The same race in a server where `openat2` fails with ENOSYS (cap-std's fallback path).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_swapped_for_a_symlink_mid_read_never_leaks_without_openat2() {
    swap_race(true).await;
}

async fn swap_race(without_openat2: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write_tree(
        root,
        &[
            ("outside/note.md", SECRET),
            ("vault/swap/note.md", "inside note"),
        ],
    );
    let v = root.join("vault");
    symlink(&v, "parked_link", "../outside");

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps, v) = (Arc::clone(&stop), Arc::clone(&swaps), v.clone());
        std::thread::spawn(move || {
            let (swap, real, link) = (v.join("swap"), v.join("parked_real"), v.join("parked_link"));
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&swap, &real).unwrap();
                std::fs::rename(&link, &swap).unwrap();
                std::fs::rename(&swap, &link).unwrap();
                std::fs::rename(&real, &swap).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    #[cfg(target_os = "linux")]
    let s = if without_openat2 {
        Server::start_without_openat2(&v, &[]).await
    } else {
        Server::start(&v).await
    };
    #[cfg(not(target_os = "linux"))]
    let s = {
        assert!(!without_openat2, "openat2 is Linux's");
        Server::start(&v).await
    };
    let (mut leaks, mut inside, mut refused) = (0, 0, 0);
    let started = Instant::now();
    for _ in 0..3000 {
        let r = s.call("read_note", json!({"path": "swap/note.md"})).await;
        if r.raw.contains(SECRET) {
            leaks += 1;
        } else if !r.is_error && r.structured["content"] == "inside note" {
            inside += 1;
        } else {
            refused += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    s.stop().await;
    eprintln!(
        "race: {inside} inside, {refused} refused, {leaks} leaks, {} swaps in {:?}",
        swaps.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert_eq!(leaks, 0, "the outside file leaked {leaks} times");
    assert!(
        inside > 0,
        "no read ever succeeded: the test exercised nothing"
    );
    assert!(
        swaps.load(Ordering::Relaxed) > 100,
        "the swapper barely ran"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("outside/note.md")).unwrap(),
        SECRET
    );
}
