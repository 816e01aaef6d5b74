//! Crash safety of the writes: the real server is killed with SIGKILL at random moments during
//! a stream of writes, 200 times. After every kill each note is entirely one version the
//! stream wrote (never a mix, never empty, never gone); the history and audit logs stay
//! readable line by line; and after a restart no temporary file shows in listings or search,
//! and the ones the killed writes left behind are removed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::time::Duration;

use crate::common::{Server, sha256_hex, write_tree};
use rand::Rng;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// Version `k` of note `n`: big enough that writing it takes a while, and self-describing.
fn version(n: usize, k: u64) -> String {
    let mut s = format!("note {n} version {k}\n");
    let line = format!("{k:>12} filler line of note {n}\n");
    while s.len() < 64 * 1024 {
        s.push_str(&line);
    }
    s
}

/// The version `text` is, if it is exactly one of note `n`'s.
fn which_version(n: usize, text: &str) -> Option<u64> {
    let first = text.lines().next()?;
    let k: u64 = first
        .strip_prefix(&format!("note {n} version "))?
        .parse()
        .ok()?;
    (version(n, k) == text).then_some(k)
}

fn command(vault: &Path, state: &Path) -> tokio::process::Command {
    let mut cmd = crate::common::serve_command(
        vault,
        &["--write", "--no-index-cache", "--no-watch", "--state-dir"],
    );
    cmd.arg(state);
    cmd.env("CAPVAULT_LOG", "capvault=error");
    cmd
}

const NOTES: usize = 3;
const TRIALS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_writes_leaves_every_note_whole_and_the_logs_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    let state = tmp.path().join("state");
    let files: Vec<(String, String)> = (0..NOTES)
        .map(|n| (format!("Notes/n{n}.md"), version(n, 0)))
        .collect();
    write_tree(&vault, &files);
    let mut rng = rand::rng();
    let mut next_version = 1u64;
    let mut kills_mid_stream = 0;
    let mut temps_left = 0;
    let leftovers = |v: &Path| {
        std::fs::read_dir(v.join("Notes"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".capvault-tmp-")
            })
            .count()
    };
    for _ in 0..TRIALS {
        let transport = TokioChildProcess::new(command(&vault, &state)).expect("spawn");
        let pid = transport.id().expect("a child pid");
        let client = ().serve(transport).await.expect("handshake");
        let client = std::sync::Arc::new(client);
        // A stream of writes to every note, each from the version on disk.
        let first = next_version;
        next_version += 10_000;
        let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = {
            let client = std::sync::Arc::clone(&client);
            let vault = vault.clone();
            let written = std::sync::Arc::clone(&written);
            tokio::spawn(async move {
                let mut k = first;
                loop {
                    for n in 0..NOTES {
                        let path = format!("Notes/n{n}.md");
                        let Ok(now) = std::fs::read_to_string(vault.join(&path)) else {
                            return;
                        };
                        let args = json!({"path": path, "content": version(n, k), "if_match": sha256_hex(&now)});
                        let call = CallToolRequestParams::new("write_note")
                            .with_arguments(args.as_object().unwrap().clone());
                        if client.call_tool(call).await.is_err() {
                            return;
                        }
                        written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        k += 1;
                    }
                }
            })
        };
        // Killed at a random moment once the stream is flowing (the first write done, however
        // long the start took).
        crate::common::poll("a first write", Duration::from_secs(60), async || {
            (written.load(std::sync::atomic::Ordering::Relaxed) > 0).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..60))).await;
        let killed = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
        kills_mid_stream += usize::from(!writer.is_finished());
        assert!(killed.is_ok(), "kill failed: {killed:?}");
        let _ = tokio::time::timeout(Duration::from_secs(10), writer).await;
        // What this kill left (the next start removes it).
        temps_left += leftovers(&vault);
        for n in 0..NOTES {
            let text = std::fs::read_to_string(vault.join(format!("Notes/n{n}.md")))
                .expect("a note vanished");
            assert!(
                which_version(n, &text).is_some(),
                "note {n} is not one whole version after a kill ({} bytes)",
                text.len()
            );
        }
    }
    assert!(
        kills_mid_stream > TRIALS / 2,
        "most kills must land mid-stream"
    );
    // Every log line that made it is whole.
    for log in ["history.jsonl", "audit.jsonl"] {
        let path = crate::common::snapshot(&state)
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| p.file_name().is_some_and(|n| n == log))
            .unwrap_or_else(|| panic!("no {log}"));
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.lines().count() > 0,
            "{log} is empty: no write completed"
        );
        for line in text.lines() {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{log}: {e}: {line}"));
        }
    }
    // A restart: no temporary file is listed or found, and the leftovers are removed.
    eprintln!("temporary files left by killed writes: {temps_left}");
    assert!(
        temps_left > 0,
        "no kill landed between a temporary file and its rename"
    );
    let s = Server::from_command(command(&vault, &state)).await;
    s.wait_index_ready().await;
    let listed = s.ok("list_notes", json!({"kind": "any"})).await;
    assert_eq!(listed["total"], NOTES, "{listed}");
    let found = s
        .ok(
            "search_notes",
            json!({"query": "capvault-tmp", "mode": "exact"}),
        )
        .await;
    assert_eq!(found["hits"], json!([]));
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while leftovers(&vault) > 0 {
        assert!(std::time::Instant::now() < until, "temporary files stayed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.stop().await;
}
