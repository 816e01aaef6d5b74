//! Latency of the read tools through a real MCP client over stdio, on a generated vault.
//!
//! Run: `cargo bench --bench read_tools` (10,000 notes by default).
//! Options (environment): `CAPVAULT_BENCH_NOTES=N` to generate N notes,
//! `CAPVAULT_BENCH_VAULT=/path` to use an existing vault instead, `CAPVAULT_BENCH_RUNS=N`.
//! Generated vaults are cached in `target/bench-vaults/`.
//! Prints figures; asserts nothing about time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/timing.rs"]
mod timing;

use std::path::PathBuf;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 30);
    let (root, label) = match std::env::var("CAPVAULT_BENCH_VAULT") {
        Ok(p) => (PathBuf::from(&p), p),
        Err(_) => {
            let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
            let t = Instant::now();
            let g = generator::generate(&dir, notes, 42);
            eprintln!("vault ready in {:?}", t.elapsed());
            let label = format!(
                "synthetic, {} notes, {:.1} MB of Markdown, seed 42",
                g.notes,
                g.bytes as f64 / 1e6
            );
            (g.root, label)
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let spawned = Instant::now();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_capvault"));
        cmd.arg("serve")
            .arg(&root)
            .env("CAPVAULT_LOG", "capvault=warn");
        let transport = TokioChildProcess::new(cmd).unwrap();
        let pid = transport.id();
        let client = ().serve(transport).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let first_answer = spawned.elapsed();
        assert!(tools.iter().any(|t| t.name == "search_notes"));

        println!("capvault read tools, {label}");
        println!(
            "spawn to first answer (initialize + tools/list): {:.1} ms",
            first_answer.as_secs_f64() * 1e3
        );
        println!(
            "{:<44} {:>10} {:>10} {:>8}",
            "call (client round trip, warm cache)", "p50 ms", "p95 ms", "runs"
        );
        let cases: Vec<(&str, &str, Value)> = vec![
            (
                "list_notes (whole vault, limit 100)",
                "list_notes",
                json!({"limit": 100}),
            ),
            (
                "list_notes (page 2 via cursor)",
                "list_notes",
                json!({"limit": 100, "cursor": "__page2__"}),
            ),
            (
                "search_notes common word \"the\"",
                "search_notes",
                json!({"query": "the", "mode": "exact"}),
            ),
            (
                "search_notes word \"garden\"",
                "search_notes",
                json!({"query": "garden", "mode": "exact"}),
            ),
            (
                "search_notes rare word \"quokka\"",
                "search_notes",
                json!({"query": "quokka", "mode": "exact"}),
            ),
            (
                "search_notes phrase \"quokka was here\"",
                "search_notes",
                json!({"query": "quokka was here", "mode": "exact"}),
            ),
            (
                "search_notes no hit \"zzyzx\"",
                "search_notes",
                json!({"query": "zzyzx", "mode": "exact"}),
            ),
            (
                "search_notes case-sensitive \"The\"",
                "search_notes",
                json!({"query": "The", "mode": "exact", "case_sensitive": true}),
            ),
        ];
        let mut page2_cursor = None;
        for (label, tool, mut args) in cases {
            if args.get("cursor").is_some() {
                args["cursor"] = json!(page2_cursor.clone().unwrap_or_default());
            }
            let mut times = Vec::with_capacity(runs);
            // One warm-up call, then timed calls.
            for i in 0..=runs {
                let (dt, r) = timing::timed_call(&client, tool, &args).await;
                if tool == "list_notes" && page2_cursor.is_none() {
                    page2_cursor = r
                        .structured_content
                        .as_ref()
                        .and_then(|v| v["next_cursor"].as_str().map(str::to_owned));
                }
                if i > 0 {
                    times.push(dt);
                }
            }
            let (p50, p95) = timing::p50_p95(times);
            println!("{label:<44} {p50:>10.1} {p95:>10.1} {runs:>8}");
        }
        if let Some(pid) = pid
            && let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(line) = status.lines().find(|l| l.starts_with("VmHWM"))
        {
            println!(
                "server peak RSS: {}",
                line.trim_start_matches("VmHWM:").trim()
            );
        }
        let _ = client.cancel().await;
    });
}
