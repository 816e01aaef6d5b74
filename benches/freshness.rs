//! How soon a change on disk is searchable, through a real MCP client over stdio.
//!
//! Run: `cargo bench --bench freshness` (10,000 notes by default; `CAPVAULT_BENCH_NOTES=100000`,
//! or `CAPVAULT_BENCH_VAULT=/path` for an existing vault, which must be writable: the bench adds
//! and removes notes in a `_freshness/` folder of it). `CAPVAULT_BENCH_RUNS` sets the number of
//! changes timed. Prints figures; asserts nothing about time.
//!
//! Each run writes a note with a word nobody else has, the way editors save (a temporary file
//! renamed over the note), then polls a ranked search for that word every 5 ms until the note
//! comes back: the time is from the rename to the first reply that finds it. Half the runs create
//! a note, half rewrite an existing one.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/timing.rs"]
mod timing;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 20);
    let (root, label) = match std::env::var("CAPVAULT_BENCH_VAULT") {
        Ok(p) => (PathBuf::from(&p), p),
        Err(_) => {
            let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
            let g = generator::generate(&dir, notes, 42);
            let label = format!(
                "synthetic, {} notes, {:.1} MB",
                g.notes,
                g.bytes as f64 / 1e6
            );
            (g.root, label)
        }
    };
    let folder = root.join("_freshness");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_capvault"));
        cmd.arg("serve")
            .arg(&root)
            .env("CAPVAULT_LOG", "capvault=warn");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let ready_at = Instant::now();
        loop {
            let (_, r) = timing::timed_call(&client, "vault_info", &json!({})).await;
            let info = r.structured_content.unwrap();
            if info["index"]["state"] == "ready" && info["index"]["watcher"] == "watching" {
                break;
            }
            assert!(ready_at.elapsed() < Duration::from_secs(600), "{info}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("capvault freshness, {label}");
        let mut created = Vec::new();
        let mut modified = Vec::new();
        for i in 0..runs {
            let word = format!("fresh{}x{i}", std::process::id());
            let note = folder.join(format!("n{}.md", i / 2));
            let tmp = folder.join(".saving.tmp");
            std::fs::write(&tmp, format!("# Change {i}\n{word}\n")).unwrap();
            let t = Instant::now();
            std::fs::rename(&tmp, &note).unwrap();
            loop {
                let (_, r) =
                    timing::timed_call(&client, "search_notes", &json!({"query": word})).await;
                if r.structured_content.unwrap()["total"] == 1 {
                    break;
                }
                assert!(t.elapsed() < Duration::from_secs(60), "{word} never found");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if i % 2 == 0 {
                &mut created
            } else {
                &mut modified
            }
            .push(t.elapsed());
            // Let the debouncer close its batch before the next change.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        for (what, times) in [("new note", created), ("rewritten note", modified)] {
            let n = times.len();
            let (p50, p95) = timing::p50_p95(times);
            println!("{what:<16} searchable after p50 {p50:.0} ms, p95 {p95:.0} ms ({n} runs)");
        }
        let _ = client.cancel().await;
    });
    let _ = std::fs::remove_dir_all(&folder);
}
