//! A vault's state folder (history, passphrase, grants, audit log) follows the vault: through a
//! restart, a rename of its folder, a restore to the same path; an unrelated folder at that path
//! never inherits it; `capvault state` shows which state a vault uses and adopts an old one.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // test fixtures

use std::path::Path;
use std::process::Command;

use crate::common::{Server, write_tree};
use serde_json::json;

/// `capvault state VAULT --state-dir STATE [extra]`: (success, stdout, stderr).
fn state(vault: &Path, state_dir: &Path, extra: &[&str]) -> (bool, String, String) {
    let out = crate::common::capvault()
        .arg("state")
        .arg(vault)
        .arg("--state-dir")
        .arg(state_dir)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The id of the state `capvault state` says the vault uses.
fn used_state(vault: &Path, state_dir: &Path) -> Option<String> {
    let (ok, out, err) = state(vault, state_dir, &[]);
    assert!(ok, "{err}");
    let first = out.lines().next()?;
    let (_, rest) = first.split_once("/state-1/")?;
    Some(rest.split(':').next()?.to_owned())
}

/// Starts a writing server, edits `a.md` once (keeping a version in the history) when `edit`,
/// and returns how many versions of `a.md` the history holds.
async fn history_of_a(vault: &Path, state_dir: &Path, edit: bool) -> usize {
    let s = Server::start_with(
        vault,
        &["--write", "--state-dir", state_dir.to_str().unwrap()],
    )
    .await;
    if edit {
        s.ok(
            "edit_note",
            json!({"path": "a.md", "edits": [{"old_text": "alpha", "new_text": "ALPHA"}]}),
        )
        .await;
    }
    let h = s.call("note_history", json!({"path": "a.md"})).await;
    s.stop().await;
    if h.is_error {
        return 0;
    }
    h.structured["versions"].as_array().map_or(0, Vec::len)
}

fn notes() -> Vec<(String, String)> {
    (0..6)
        .map(|i| (format!("n{i}.md"), format!("note {i}\n")))
        .chain([("a.md".to_owned(), "alpha\n".to_owned())])
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn state_follows_a_restart_a_rename_and_a_restore_but_not_an_unrelated_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let vault = tmp.path().join("Notes");
    write_tree(&vault, &notes());

    // No state yet: `capvault state` says so and creates nothing.
    let (ok, out, _) = state(&vault, &state_dir, &[]);
    assert!(ok && out.contains("No vault has a state"), "{out}");
    assert!(
        !state_dir.exists(),
        "capvault state created the state folder"
    );

    assert_eq!(history_of_a(&vault, &state_dir, true).await, 1);
    let id = used_state(&vault, &state_dir).expect("a state");
    assert!(id.starts_with('v'), "{id}");
    // A restart keeps it.
    assert_eq!(history_of_a(&vault, &state_dir, false).await, 1);
    let (_, out, _) = state(&vault, &state_dir, &[]);
    assert!(out.contains("the same folder as last time"), "{out}");

    // Renamed: the same folder (device, inode), another path.
    let renamed = tmp.path().join("Renamed");
    std::fs::rename(&vault, &renamed).unwrap();
    let (_, out, _) = state(&renamed, &state_dir, &[]);
    assert!(out.contains("moved from") && out.contains("Notes"), "{out}");
    // Its own record still names the old path, which is this vault, not a lost one; one
    // version is one version.
    assert!(
        out.contains("[this vault, recorded at its old path]"),
        "{out}"
    );
    assert!(
        out.contains(" 1 version (") && !out.contains("folder is gone"),
        "{out}"
    );
    assert_eq!(history_of_a(&renamed, &state_dir, false).await, 1);
    assert_eq!(
        used_state(&renamed, &state_dir).as_deref(),
        Some(id.as_str())
    );

    // Restored from a backup at the same path: a new inode, the same notes.
    let backup = tmp.path().join("backup");
    copy_tree(&renamed, &backup);
    std::fs::remove_dir_all(&renamed).unwrap();
    copy_tree(&backup, &renamed);
    std::fs::remove_dir_all(&backup).unwrap();
    let (_, out, _) = state(&renamed, &state_dir, &[]);
    assert!(out.contains("restored or re-synced"), "{out}");
    assert_eq!(history_of_a(&renamed, &state_dir, false).await, 1);
    assert_eq!(
        used_state(&renamed, &state_dir).as_deref(),
        Some(id.as_str())
    );

    // An unrelated folder at the same path (one note of the same name, the rest different):
    // a new state, and the user is told about the old one.
    std::fs::remove_dir_all(&renamed).unwrap();
    write_tree(
        &renamed,
        &[("a.md", "alpha\n"), ("x.md", "x\n"), ("y.md", "y\n")],
    );
    let (_, out, _) = state(&renamed, &state_dir, &[]);
    assert!(out.contains("has no state yet"), "{out}");
    assert!(out.contains(&format!("--adopt {id}")), "{out}");
    assert_eq!(history_of_a(&renamed, &state_dir, false).await, 0);
    let fresh = used_state(&renamed, &state_dir).unwrap();
    assert_ne!(fresh, id);

    // Adopting the old state brings its history back; the fresh one is kept, detached.
    let (ok, out, err) = state(&renamed, &state_dir, &["--adopt", &id]);
    assert!(ok, "{err}");
    assert!(out.contains(&fresh) && out.contains("detached"), "{out}");
    assert_eq!(
        used_state(&renamed, &state_dir).as_deref(),
        Some(id.as_str())
    );
    assert_eq!(history_of_a(&renamed, &state_dir, false).await, 1);
    let (_, out, _) = state(&renamed, &state_dir, &[]);
    assert!(out.contains("detached"), "{out}");
}

#[tokio::test]
async fn a_copy_is_told_about_the_original_and_cannot_take_its_state_while_it_lives() {
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let original = tmp.path().join("Work");
    write_tree(&original, &notes());
    assert_eq!(history_of_a(&original, &state_dir, true).await, 1);
    let id = used_state(&original, &state_dir).unwrap();

    // A copy is another vault: its own state, and no history inherited.
    let other = tmp.path().join("Work other copy");
    copy_tree(&original, &other);
    assert_eq!(history_of_a(&other, &state_dir, false).await, 0);
    assert_ne!(used_state(&other, &state_dir).unwrap(), id);

    let copy = tmp.path().join("Work copy");
    copy_tree(&original, &copy);
    let (_, out, _) = state(&copy, &state_dir, &[]);
    assert!(
        out.contains("has no state yet") && !out.contains("note:"),
        "{out}"
    );
    // Taking the original's state while it exists needs --force.
    let (ok, _, err) = state(&copy, &state_dir, &["--adopt", &id]);
    assert!(!ok && err.contains("still exists"), "{err}");
    assert!(err.contains("would give two vaults one history"), "{err}");
    let (ok, _, err) = state(&copy, &state_dir, &["--adopt", "v0000"]);
    assert!(!ok && err.contains("not a state id"), "{err}");

    // The original gone (moved to another disk, say): the copy is pointed at its state.
    std::fs::remove_dir_all(&original).unwrap();
    let (_, out, _) = state(&copy, &state_dir, &[]);
    assert!(
        out.contains("whose folder is gone") && out.contains(&format!("--adopt {id}")),
        "{out}"
    );
    let (ok, _, err) = state(&copy, &state_dir, &["--adopt", &id]);
    assert!(ok, "{err}");
    assert_eq!(history_of_a(&copy, &state_dir, false).await, 1);
}

#[tokio::test]
async fn a_state_folder_of_the_layout_before_records_is_kept() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let vault = tmp.path().join("Old");
    write_tree(&vault, &notes());
    let meta = std::fs::metadata(&vault).unwrap();
    let legacy = format!("{:x}-{:x}", meta.dev(), meta.ino());
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(true);
    builder
        .create(state_dir.join("state-1").join(&legacy))
        .unwrap();
    let (_, out, _) = state(&vault, &state_dir, &[]);
    assert!(out.contains("before vault records"), "{out}");
    history_of_a(&vault, &state_dir, true).await;
    assert_eq!(used_state(&vault, &state_dir), Some(legacy));
}
