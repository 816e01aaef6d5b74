//! Vault model build time (in-process) and model-query latency (through a real MCP client over
//! stdio) on generated vaults.
//!
//! Run: `cargo bench --bench model` (10,000 and 100,000 notes; `CAPVAULT_BENCH_SIZES=10000` to
//! pick sizes, `CAPVAULT_BENCH_VAULT=/path` for an existing vault; `CAPVAULT_BENCH_BUILD_ONLY=1`
//! skips the queries, e.g. under a profiler). Prints figures only.
//!
//! Besides the build's phases (wall and CPU time) it prints the parser alone (single thread, over notes read
//! beforehand), the heap the model holds once built (glibc's `mallinfo2`: live bytes, so neither
//! allocator slack nor freed pages count) and the peak RSS of the `capvault serve` process that
//! answered the queries (it builds the same model at startup).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/timing.rs"]
mod timing;

use std::path::PathBuf;
use std::time::Instant;

use capvault::markdown::parse_note;
use capvault::model::Model;
use capvault::vault::{Limits, Vault, VaultPath, is_note_name};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn main() {
    let vaults: Vec<(PathBuf, String)> = match std::env::var("CAPVAULT_BENCH_VAULT") {
        Ok(p) => vec![(PathBuf::from(&p), p)],
        Err(_) => std::env::var("CAPVAULT_BENCH_SIZES")
            .unwrap_or_else(|_| "10000,100000".to_owned())
            .split(',')
            .filter_map(|n| n.trim().parse::<usize>().ok())
            .map(|n| {
                let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
                let g = generator::generate(&dir, n, 42);
                (
                    g.root,
                    format!("synthetic {n} notes, {:.0} MB", g.bytes as f64 / 1e6),
                )
            })
            .collect(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let build_only = std::env::var_os("CAPVAULT_BENCH_BUILD_ONLY").is_some();
    for (root, label) in vaults {
        println!("\n## {label}");
        let vault = Vault::open(&root, Limits::default()).unwrap();
        parser_alone(&vault);
        let heap_before = live_heap();
        let mut model = Model::default();
        let cpu0 = cpu_time();
        let t = Instant::now();
        let (changes, mut stats) = model.changes_since(&vault).unwrap();
        let scan_parse = t.elapsed();
        let cpu1 = cpu_time();
        let t2 = Instant::now();
        stats.relinked = model.apply(changes);
        model.mark_refreshed(t);
        let apply = t2.elapsed();
        let build = t.elapsed();
        let cpu2 = cpu_time();
        let heap = live_heap()
            .zip(heap_before)
            .map(|(a, b)| a.saturating_sub(b));
        println!(
            "  of which scan + read + parse: {:.2} s, apply (index, resolve, backlinks): {:.2} s",
            scan_parse.as_secs_f64(),
            apply.as_secs_f64()
        );
        if let (Some(c0), Some(c1), Some(c2)) = (cpu0, cpu1, cpu2) {
            println!(
                "  CPU time (all threads): scan + read + parse {:.2} s, apply {:.2} s",
                c1 - c0,
                c2 - c1
            );
        }
        let t = Instant::now();
        let (changes, again) = model.changes_since(&vault).unwrap();
        model.apply(changes);
        let noop = t.elapsed();
        let links: usize = model.notes().values().map(|n| n.parsed.links.len()).sum();
        println!(
            "model build (scan + parse {} notes on {} threads + resolve {} links): {:.2} s",
            stats.parsed,
            rayon::current_num_threads(),
            links,
            build.as_secs_f64()
        );
        if let Some(heap) = heap {
            println!("model heap once built: {:.1} MB", heap as f64 / 1e6);
        }
        // The Dataview data's share: the heap a copy of it takes (the copy is exact-sized).
        let before_copy = live_heap();
        let copy = model.dataview().clone();
        if let Some((after, before)) = live_heap().zip(before_copy) {
            let fields: usize = copy.values().map(|d| d.fields.len()).sum();
            println!(
                "  of which Dataview data: {:.1} MB ({} tasks and {} inline fields in {} of {} notes)",
                after.saturating_sub(before) as f64 / 1e6,
                model.task_count(),
                fields,
                copy.len(),
                model.note_count()
            );
        }
        drop(copy);
        println!(
            "refresh with nothing changed (stat scan of {} files): {:.0} ms",
            again.files,
            noop.as_secs_f64() * 1e3
        );
        let some_note = model
            .notes()
            .keys()
            .nth(model.note_count() / 2)
            .unwrap()
            .to_string();
        let hub = model
            .notes()
            .keys()
            .max_by_key(|p| model.backlinks(p).count())
            .unwrap()
            .to_string();
        drop(model);
        if build_only {
            continue;
        }

        rt.block_on(async {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_capvault"));
            cmd.arg("serve")
                .arg(&root)
                .env("CAPVAULT_LOG", "capvault=warn");
            let child = TokioChildProcess::new(cmd).unwrap();
            let pid = child.id();
            let client = ().serve(child).await.unwrap();
            let cases: Vec<(&str, &str, Value)> = vec![
                (
                    "get_links out (a note)",
                    "get_links",
                    json!({"path": some_note, "direction": "out"}),
                ),
                (
                    "get_links in (most-linked note)",
                    "get_links",
                    json!({"path": hub, "direction": "in", "limit": 20}),
                ),
                ("list_tags (top 100 by count)", "list_tags", json!({})),
                (
                    "find_broken_links (first 100)",
                    "find_broken_links",
                    json!({}),
                ),
                (
                    "resolve_link",
                    "resolve_link",
                    json!({"link": format!("[[{}]]", some_note.trim_end_matches(".md"))}),
                ),
            ];
            println!(
                "{:<36} {:>9} {:>9}",
                "call (client round trip)", "p50 ms", "p95 ms"
            );
            for (label, tool, args) in cases {
                let mut times = Vec::new();
                for i in 0..21 {
                    let (dt, _) = timing::timed_call(&client, tool, &args).await;
                    if i > 0 {
                        times.push(dt);
                    }
                }
                let (p50, p95) = timing::p50_p95(times);
                println!("{label:<36} {p50:>9.1} {p95:>9.1}");
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
}

/// Times `parse_note` alone on one thread, over the notes of the vault read beforehand (at most
/// 64 MB of them), so that the parser's cost is told apart from reading and from the model.
fn parser_alone(vault: &Vault) {
    let mut texts = Vec::new();
    let mut bytes = 0;
    let _ = vault.walk(&VaultPath::root(), true, &|_| true, &mut |entry| {
        if bytes < 64_000_000
            && is_note_name(entry.path.file_name())
            && let Ok(data) = vault.read_file(&entry.path)
        {
            bytes += data.bytes.len();
            texts.push(String::from_utf8_lossy(&data.bytes).into_owned());
        }
        std::ops::ControlFlow::Continue(())
    });
    let t = Instant::now();
    let mut links = 0;
    for text in &texts {
        links += parse_note(text).links.len();
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "parse_note alone (1 thread, {} notes, {:.1} MB, {links} links): {:.2} s, {:.0} MB/s",
        texts.len(),
        bytes as f64 / 1e6,
        dt,
        bytes as f64 / 1e6 / dt
    );
}

/// Bytes allocated and not yet freed, as glibc counts them (all arenas and mmapped chunks).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn live_heap() -> Option<usize> {
    #[repr(C)]
    struct MallInfo2 {
        arena: usize,
        ordblks: usize,
        smblks: usize,
        hblks: usize,
        hblkhd: usize,
        usmblks: usize,
        fsmblks: usize,
        uordblks: usize,
        fordblks: usize,
        keepcost: usize,
    }
    unsafe extern "C" {
        fn mallinfo2() -> MallInfo2;
    }
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct (glibc 2.33+).
    let m = unsafe { mallinfo2() };
    Some(m.uordblks + m.hblkhd)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn live_heap() -> Option<usize> {
    None
}

/// User + system CPU time of this process so far, in seconds (Linux; `None` elsewhere).
fn cpu_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces) start after the last `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // Clock ticks: 100 per second on Linux.
    Some(ticks / 100.0)
}
