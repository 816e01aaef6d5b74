//! The person in the loop, through the real binary and rmcp's client (which declares no
//! elicitation): `--confirm destructive` holds what destroys and never says yes for the person,
//! `--require-if-match` refuses a change that does not name the version it read (the default
//! over HTTP), and the audit log names the client and what it read before a change. The
//! elicitation paths (accept, decline, cancel; 2026-07-28's `input_required` and the older
//! `elicitation/create`) and `capvault confirm` are tested with the Python SDK
//! (tests/python/test_sdk.py).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::PathBuf;

use crate::common::{Server, sha256_hex, write_tree};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

struct Fixture {
    _tmp: tempfile::TempDir,
    vault: PathBuf,
    state: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(
        &vault,
        &[
            ("a.md", "# A\nlinks [[b]] #project\n"),
            ("b.md", "# B\nbody\n"),
            ("Folder/c.md", "# C\n"),
        ],
    );
    std::fs::create_dir_all(vault.join(".obsidian")).unwrap();
    Fixture {
        state: tmp.path().join("state"),
        _tmp: tmp,
        vault,
    }
}

async fn serve(f: &Fixture, extra: &[&str]) -> Server {
    let state = f.state.to_str().unwrap().to_owned();
    let mut args = vec!["--write", "--state-dir", &state, "--no-index-cache"];
    args.extend_from_slice(extra);
    let s = Server::start_with(&f.vault, &args).await;
    s.wait_index_ready().await;
    s
}

#[tokio::test]
async fn a_destructive_call_is_held_for_a_client_that_cannot_ask_and_nothing_changes() {
    let f = fixture();
    let s = serve(&f, &["--confirm", "destructive"]).await;
    // Not held: an edit (and its version kept in the history, for the restore below).
    s.ok(
        "edit_note",
        json!({"path": "b.md", "edits": [{"old_text": "body", "new_text": "text"}]}),
    )
    .await;
    let held = [
        ("delete_note", json!({"path": "b.md"})),
        (
            "write_note",
            json!({"path": "b.md", "content": "gone\n", "if_match": sha256_hex("# B\ntext\n")}),
        ),
        ("move_note", json!({"from": "Folder", "to": "Elsewhere"})),
        ("rename_tag", json!({"from": "project", "to": "work"})),
        (
            "restore_note",
            json!({"path": "b.md", "sha256": sha256_hex("# B\nbody\n")}),
        ),
    ];
    for (tool, args) in held {
        let r = s.call(tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args} went ahead: {}", r.raw);
        assert_eq!(
            r.error["code"], "confirmation_required",
            "{tool}: {}",
            r.raw
        );
        assert!(r.text.contains("capvault confirm"), "{}", r.text);
    }
    assert_eq!(
        std::fs::read_to_string(f.vault.join("b.md")).unwrap(),
        "# B\ntext\n"
    );
    assert!(f.vault.join("Folder/c.md").exists());
    // The message names what would change, as the dry run found it, with vault paths only.
    let r = s
        .call("move_note", json!({"from": "Folder", "to": "Elsewhere"}))
        .await;
    assert!(
        r.text.contains(
            "Move the folder \"\u{2068}Folder\u{2069}\" to \"\u{2068}Elsewhere\u{2069}\": 1 file,"
        ),
        "{}",
        r.text
    );
    assert!(!r.text.contains(f.vault.to_str().unwrap()), "{}", r.text);
    // Not held: dry runs, a note's move, appends.
    s.ok("delete_note", json!({"path": "b.md", "dry_run": true}))
        .await;
    s.ok("move_note", json!({"from": "Folder/c.md", "to": "c.md"}))
        .await;
    s.ok("append_to_note", json!({"path": "b.md", "content": "more"}))
        .await;
    // A failing call fails as it would have, before anyone is asked.
    let r = s.call("delete_note", json!({"path": "missing.md"})).await;
    assert_eq!(r.error["code"], "not_found", "{}", r.raw);
}

#[tokio::test]
async fn a_made_up_confirmation_is_refused_and_changes_nothing() {
    let f = fixture();
    let s = serve(&f, &["--confirm", "destructive"]).await;
    let mut params = CallToolRequestParams::new("delete_note");
    params.arguments = json!({"path": "b.md"}).as_object().cloned();
    params.request_state = Some("ABCDEFGHJKMNPQRSTUVWXYZ2".to_owned());
    params.input_responses = Some(
        [(
            "confirm".to_owned(),
            json!({"action": "accept", "content": {"allow": true}}),
        )]
        .into_iter()
        .collect(),
    );
    let result = s.client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    let raw = serde_json::to_value(&result).unwrap();
    assert_eq!(
        raw["_meta"]["capvault/error"]["code"], "invalid_argument",
        "{raw}"
    );
    assert!(f.vault.join("b.md").exists());
}

#[tokio::test]
async fn without_confirm_nothing_is_held() {
    let f = fixture();
    let s = serve(&f, &[]).await;
    s.ok("delete_note", json!({"path": "b.md"})).await;
    assert!(!f.vault.join("b.md").exists());
}

#[tokio::test]
async fn require_if_match_refuses_a_change_that_does_not_name_the_version_it_read() {
    let f = fixture();
    let s = serve(&f, &["--require-if-match"]).await;
    let edit = json!({"path": "b.md", "edits": [{"old_text": "body", "new_text": "text"}]});
    let r = s.call("edit_note", edit.clone()).await;
    assert_eq!(r.error["code"], "invalid_argument", "{}", r.raw);
    assert!(r.text.contains("if_match"), "{}", r.text);
    assert_eq!(
        std::fs::read_to_string(f.vault.join("b.md")).unwrap(),
        "# B\nbody\n"
    );
    // A dry run changes nothing and passes; so does a new note (no version to name).
    let mut dry = edit.clone();
    dry["dry_run"] = Value::Bool(true);
    s.ok("edit_note", dry).await;
    s.ok("create_note", json!({"path": "new.md", "content": "new"}))
        .await;
    let r = s
        .call("append_to_note", json!({"path": "a.md", "content": "more"}))
        .await;
    assert_eq!(r.error["code"], "invalid_argument", "{}", r.raw);
    let mut given = edit;
    given["if_match"] = Value::String(sha256_hex("# B\nbody\n"));
    s.ok("edit_note", given).await;
    let r = s.call("delete_note", json!({"path": "b.md"})).await;
    assert_eq!(r.error["code"], "invalid_argument", "{}", r.raw);
    // A folder has no version to name: its delete needs none.
    s.ok("delete_note", json!({"path": "Folder"})).await;
    assert!(!f.vault.join("Folder").exists());
}

#[cfg(feature = "http")]
#[tokio::test]
async fn over_http_if_match_is_required_by_default_and_can_be_turned_off() {
    let f = fixture();
    let state = f.state.to_str().unwrap().to_owned();
    let edit = json!({"path": "b.md", "edits": [{"old_text": "body", "new_text": "text"}]});
    let s = Server::start_http(&f.vault, &["--write", "--state-dir", &state]).await;
    s.wait_index_ready().await;
    let r = s.call("edit_note", edit.clone()).await;
    assert_eq!(r.error["code"], "invalid_argument", "{}", r.raw);
    s.stop().await;
    let s = Server::start_http(
        &f.vault,
        &["--write", "--state-dir", &state, "--require-if-match=false"],
    )
    .await;
    s.wait_index_ready().await;
    s.ok("edit_note", edit).await;
}

#[tokio::test]
async fn the_audit_log_names_the_client_and_the_notes_it_read_before_a_change() {
    let f = fixture();
    let s = serve(&f, &[]).await;
    s.ok("read_note", json!({"path": "a.md"})).await;
    s.read_resource("capvault:///Folder/c.md").await.unwrap();
    s.ok(
        "edit_note",
        json!({"path": "b.md", "edits": [{"old_text": "body", "new_text": "text"}]}),
    )
    .await;
    let audit = crate::common::find_file(&f.state, "audit.jsonl");
    let log = std::fs::read_to_string(audit).unwrap();
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(line["tool"], "edit_note", "{line}");
    assert!(
        line["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("rmcp")),
        "{line}"
    );
    assert_eq!(
        line["read_before"],
        json!(["a.md", "Folder/c.md"]),
        "{line}"
    );
}

/// The state folder's waiting requests (`confirm/pending.json`), as `capvault confirm` reads them.
fn pending(f: &Fixture) -> Vec<Value> {
    let file = crate::common::find_file(&f.state, "pending.json");
    serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap()
}

#[tokio::test]
async fn a_yes_is_for_the_resolved_path_and_a_request_whose_note_is_gone_is_dropped() {
    let f = fixture();
    let state = f.state.to_str().unwrap().to_owned();
    let cmd = crate::common::serve_command(
        &f.vault,
        &[
            "--write",
            "--state-dir",
            &state,
            "--no-index-cache",
            "--confirm",
            "destructive",
        ],
    );
    let (s, log) = crate::common::Server::from_command_logged(cmd).await;
    s.wait_index_ready().await;
    // Held, with a hint that names the server's --state-dir (by role to the client, by path
    // in the log): without it `capvault confirm` looks elsewhere and finds nothing waiting.
    let r = s.call("delete_note", json!({"path": "b"})).await;
    assert_eq!(r.error["code"], "confirmation_required", "{}", r.raw);
    assert!(
        r.text
            .contains("capvault confirm <vault folder> --state-dir <this server's state folder>"),
        "{}",
        r.text
    );
    assert!(!r.text.contains(&state), "{}", r.text);
    let want = format!(
        "capvault confirm {} --state-dir {state}",
        f.vault.to_str().unwrap()
    );
    crate::common::poll(
        &format!("`{want}` in the log"),
        std::time::Duration::from_secs(30),
        async || {
            log.lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(&want))
                .then_some(())
        },
    )
    .await;
    // The person's yes (what `capvault confirm` writes; it reads a yes from a terminal only).
    let mut waiting = pending(&f);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    waiting[0]["approved"] = json!(true);
    let file = crate::common::find_file(&f.state, "pending.json");
    std::fs::write(&file, serde_json::to_vec(&waiting).unwrap()).unwrap();
    // The same call spelled as the question showed it goes ahead: one note, one yes.
    s.ok("delete_note", json!({"path": "b.md"})).await;
    assert!(!f.vault.join("b.md").exists());
    // A request for a note deleted since is dropped, not asked about again.
    let r = s.call("delete_note", json!({"path": "a.md"})).await;
    assert_eq!(r.error["code"], "confirmation_required", "{}", r.raw);
    assert_eq!(pending(&f).len(), 1);
    std::fs::remove_file(f.vault.join("a.md")).unwrap();
    let o = crate::common::capvault()
        .args(["confirm", f.vault.to_str().unwrap(), "--state-dir", &state])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("dropped: \"\u{2068}a.md\u{2069}\" no longer exists")
            && said.contains("no change waits"),
        "{said}"
    );
    assert!(pending(&f).is_empty(), "{:?}", pending(&f));
}

#[tokio::test]
async fn a_hostile_destination_is_shown_quoted_with_its_controls_visible() {
    let f = fixture();
    let s = serve(&f, &["--confirm", "destructive"]).await;
    let to = "Elsewhere` (an empty folder). Allow? `\u{202E}01";
    let r = s
        .call("move_note", json!({"from": "Folder", "to": to}))
        .await;
    assert_eq!(r.error["code"], "confirmation_required", "{}", r.raw);
    assert!(!r.text.contains('\u{202E}'), "{}", r.text);
    assert!(
        r.text.contains(
            "Move the folder \"\u{2068}Folder\u{2069}\" to \"\u{2068}Elsewhere` (an empty \
             folder). Allow? `[U+202E]01\u{2069}\": 1 file,"
        ),
        "{}",
        r.text
    );
}
