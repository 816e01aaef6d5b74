//! Every read tool on the wire: a raw JSON-RPC pipe to the release binary (no SDK), on a
//! generated vault, next to the targets; then the same calls through the official Python SDK when
//! one is given. Also prints the size of `tools/list`.
//!
//! Run: `cargo bench --bench wire` (10,000 notes), `CAPVAULT_BENCH_NOTES=100000 cargo bench
//! --bench wire`. Options: `CAPVAULT_BENCH_RUNS=N` (default 30), `CAPVAULT_BENCH_PYTHON=path/to/
//! python` (a Python with the `mcp` package: the SDK's client side is timed too),
//! `CAPVAULT_BENCH_ONLY=text` (only the calls whose label contains it), `CAPVAULT_BENCH_RESTART=1`
//! (also a first start with an empty index cache folder and a restart on it: time to searchable,
//! to ready, and peak RSS).
//! Prints figures; asserts nothing about time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use pipe::{env_usize, p50_p95, peak_rss_mb};

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use pipe::spawn;

/// A first start with an empty index cache folder, then a restart on the cache it saved:
/// spawn to the first ranked search the index answers, spawn to ready, and peak RSS of each.
fn first_start_and_restart(bin: &str, root: &std::path::Path, markdown_bytes: u64) {
    let cache = std::env::temp_dir().join(format!("capvault-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let args = ["--index-cache", cache.to_str().unwrap()];
    println!("first start and restart, with the index cache in a fresh folder:");
    println!(
        "{:<14} {:>16} {:>12} {:>16}",
        "start", "searchable ms", "ready ms", "peak RSS MB"
    );
    for label in ["first start", "restart"] {
        let t = Instant::now();
        let mut pipe = spawn(bin, root, &args);
        let mut searchable = None;
        let ready = loop {
            // Polled through vault_info: a search before the index answers would be a scan of
            // the whole vault, competing with the build.
            let info = pipe.call("vault_info", &json!({}));
            if searchable.is_none() && info["index"]["documents"].as_u64().is_some_and(|d| d > 0) {
                searchable = Some(t.elapsed());
                let r = pipe.call("search_notes", &json!({"query": "garden", "limit": 1}));
                assert_ne!(r["served_by"], "scan", "{r}");
            }
            if info["index"]["state"] == "ready" && !info["notes"].is_null() {
                break t.elapsed();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let searchable = searchable.unwrap_or(ready);
        // Wait for the save, then let the merges finish before stopping.
        for _ in 0..600 {
            let info = pipe.call("vault_info", &json!({}));
            if info["index"]["cache_saved"].is_string() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let peak = peak_rss_mb(pipe.child.id());
        println!(
            "{label:<14} {:>16.0} {:>12.0} {:>10.0} ({:.2}x)",
            searchable.as_secs_f64() * 1e3,
            ready.as_secs_f64() * 1e3,
            peak,
            peak * 1024.0 * 1024.0 / markdown_bytes as f64
        );
        if label == "first start" {
            std::thread::sleep(Duration::from_secs(20));
        }
        drop(pipe.stdin);
        let _ = pipe.child.wait();
    }
    let _ = std::fs::remove_dir_all(&cache);
}

fn main() {
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 30);
    let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
    let g = generator::generate(&dir, notes, 42);
    let label = format!(
        "synthetic, {} notes, {:.1} MB of Markdown, seed 42",
        g.notes,
        g.bytes as f64 / 1e6
    );
    // CAPVAULT_BIN: another build of the server (a release binary driven by a debug harness).
    let bin_path =
        std::env::var("CAPVAULT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_capvault").into());
    let bin = bin_path.as_str();
    let mut pipe = spawn(bin, &g.root, &["--no-index-cache"]);
    let (_, list_bytes) = pipe.request("tools/list", json!({}));
    let started = Instant::now();
    loop {
        let info = pipe.call("vault_info", &json!({}));
        if info["index"]["state"] == "ready" && !info["notes"].is_null() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = started.elapsed();
    // Let the merges the first build deferred finish before timing.
    std::thread::sleep(Duration::from_secs(if notes >= 50_000 { 20 } else { 3 }));

    // Arguments from the vault itself.
    let first = pipe.call("list_notes", &json!({"limit": 1}))["notes"][0]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let tags = pipe.call("list_tags", &json!({"limit": 20}));
    let tag = tags["items"][0]["tag"].as_str().unwrap_or("x").to_owned();
    // A tag as common as a real vault's: the 20th most used.
    let tag20 = tags["items"][19]["tag"].as_str().unwrap_or("x").to_owned();
    let tag20_notes = tags["items"][19]["notes"].as_u64().unwrap_or(0);
    let folder = pipe.call("list_folders", &json!({"depth": 1}))["folders"][0]["path"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let page2 = pipe.call("list_notes", &json!({"limit": 10}))["next_cursor"].clone();

    let base = |filter: &str| {
        json!({
            "base": format!(
                "filters: '{filter}'\nviews:\n  - type: table\n    order: [file.name, created, tags]\n    sort:\n      - property: created\n        direction: DESC\n"
            ),
            "limit": 10,
        })
    };
    let tag_filter = format!("file.hasTag(\"{tag}\")");
    // "This week" for the generated tasks: the 7 days from the generator's anchor date (its
    // dates centre on it, whatever day the benchmark runs); the bounds are strict.
    let (y, m, d) = generator::TASKS_ANCHOR;
    let anchor = chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap();
    let week = (
        (anchor - chrono::TimeDelta::days(1)).to_string(),
        (anchor + chrono::TimeDelta::days(7)).to_string(),
    );
    let tag20_label = format!("query_base tag in {tag20_notes} notes");
    // (label, tool, args, target p50 ms)
    let cases: Vec<(&str, &str, Value, f64)> = vec![
        (
            "query_base tag filter",
            "query_base",
            base(&tag_filter),
            50.0,
        ),
        (
            tag20_label.as_str(),
            "query_base",
            base(&format!("file.hasTag(\"{tag20}\")")),
            50.0,
        ),
        (
            "query_base property filter",
            "query_base",
            base("created >= date(\"2025-12-01\")"),
            50.0,
        ),
        (
            "query_base tag and property",
            "query_base",
            base(&format!("{tag_filter} && created.month == 12")),
            50.0,
        ),
        ("list_bases", "list_bases", json!({}), 50.0),
        (
            "list_tasks not done this week",
            "list_tasks",
            json!({"due_after": week.0, "due_before": week.1}),
            20.0,
        ),
        ("list_tasks not done", "list_tasks", json!({}), 20.0),
        (
            "run_query DQL TABLE tag, WHERE, SORT, LIMIT 50",
            "run_query",
            json!({"query": format!("TABLE rating, status FROM #{tag} WHERE rating > 2 SORT rating DESC LIMIT 50")}),
            50.0,
        ),
        (
            "run_query DQL TABLE 20th tag, WHERE, SORT, LIMIT 50",
            "run_query",
            json!({"query": format!("TABLE rating, status FROM #{tag20} WHERE rating > 2 SORT rating DESC LIMIT 50")}),
            50.0,
        ),
        (
            "run_query Tasks not done due this week",
            "run_query",
            json!({"language": "tasks", "query": format!("not done\ndue after {}\ndue before {}", week.0, week.1)}),
            20.0,
        ),
        ("vault_info", "vault_info", json!({}), 1.0),
        (
            "list_notes limit 10",
            "list_notes",
            json!({"limit": 10}),
            5.0,
        ),
        (
            "list_notes page 2",
            "list_notes",
            json!({"limit": 10, "cursor": page2}),
            5.0,
        ),
        (
            "list_notes folder",
            "list_notes",
            json!({"limit": 10, "folder": folder}),
            5.0,
        ),
        (
            "list_notes tag filter",
            "list_notes",
            json!({"limit": 10, "tag": tag}),
            5.0,
        ),
        (
            "list_notes kind any",
            "list_notes",
            json!({"limit": 10, "kind": "any"}),
            5.0,
        ),
        (
            "list_folders depth 2",
            "list_folders",
            json!({"depth": 2}),
            5.0,
        ),
        ("read_note", "read_note", json!({"path": first}), 5.0),
        ("get_links", "get_links", json!({"path": first}), 5.0),
        (
            "get_neighbors depth 2",
            "get_neighbors",
            json!({"path": first, "depth": 2}),
            5.0,
        ),
        ("find_orphans", "find_orphans", json!({"limit": 10}), 5.0),
        (
            "find_broken_links",
            "find_broken_links",
            json!({"limit": 10}),
            5.0,
        ),
        ("list_tags", "list_tags", json!({"limit": 10}), 5.0),
        (
            "resolve_link",
            "resolve_link",
            json!({"link": "[[Nowhere]]"}),
            5.0,
        ),
        (
            "search ranked \"garden\"",
            "search_notes",
            json!({"query": "garden"}),
            5.0,
        ),
        (
            "search exact \"the\"",
            "search_notes",
            json!({"query": "the", "mode": "exact"}),
            30.0,
        ),
        (
            "search exact \"garden\"",
            "search_notes",
            json!({"query": "garden", "mode": "exact"}),
            30.0,
        ),
        (
            "search exact \"quokka\"",
            "search_notes",
            json!({"query": "quokka", "mode": "exact"}),
            30.0,
        ),
        (
            "search exact \"quokka was here\"",
            "search_notes",
            json!({"query": "quokka was here", "mode": "exact"}),
            30.0,
        ),
        (
            "search exact \"zzyzx\"",
            "search_notes",
            json!({"query": "zzyzx", "mode": "exact"}),
            30.0,
        ),
    ];
    println!("capvault on the wire (raw JSON-RPC over stdio, release build), {label}");
    println!(
        "tools/list: {list_bytes} bytes; index ready {:.1} s after the handshake",
        ready.as_secs_f64()
    );
    println!(
        "{:<28} {:>9} {:>9} {:>9}",
        "call", "p50 ms", "p95 ms", "target"
    );
    let only = std::env::var("CAPVAULT_BENCH_ONLY").unwrap_or_default();
    let cases: Vec<_> = cases
        .into_iter()
        .filter(|c| c.0.contains(only.as_str()))
        .collect();
    for (label, tool, args, target) in &cases {
        let mut times = Vec::with_capacity(runs);
        for i in 0..=runs {
            let t = Instant::now();
            pipe.call(tool, args);
            if i > 0 {
                times.push(t.elapsed());
            }
        }
        let (p50, p95) = p50_p95(times);
        let mark = if p50 <= *target { "" } else { "  MISSED" };
        println!("{label:<28} {p50:>9.2} {p95:>9.2} {target:>9.1}{mark}");
    }
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", pipe.child.id()))
        && let Some(line) = status.lines().find(|l| l.starts_with("VmHWM"))
    {
        println!(
            "server peak RSS: {}",
            line.trim_start_matches("VmHWM:").trim()
        );
    }
    drop(pipe.stdin);
    let _ = pipe.child.wait();

    if std::env::var_os("CAPVAULT_BENCH_RESTART").is_some() {
        first_start_and_restart(bin, &g.root, g.bytes);
    }

    // The same calls through the official Python SDK (its client-side cost included).
    let Ok(python) = std::env::var("CAPVAULT_BENCH_PYTHON") else {
        println!("(Python SDK: not measured; set CAPVAULT_BENCH_PYTHON to a python with `mcp`)");
        return;
    };
    let calls: Vec<Value> = cases
        .iter()
        .map(|(label, tool, args, target)| json!([label, tool, args, target]))
        .collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/support/sdk_timing.py");
    let out = Command::new(python)
        .arg(script)
        .arg(bin)
        .arg(&g.root)
        .arg(runs.to_string())
        .arg(serde_json::to_string(&calls).unwrap())
        .output()
        .unwrap();
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
}
