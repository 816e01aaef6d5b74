//! `--index-pdfs` at size: a generated vault of notes plus 1,000 PDFs (1 to 16 pages of about
//! 2,000 characters each), served by the release binary over a raw JSON-RPC pipe. Prints the
//! first pass over the PDFs (cold, and again from the index cache folder after a restart), the
//! server's and the PDF worker's peak memory, and ranked and exact search p50 / p95 with and
//! without the PDFs indexed.
//!
//! Run: `cargo bench --bench pdfs`. Options: `CAPVAULT_BENCH_NOTES` (default 10,000),
//! `CAPVAULT_BENCH_PDFS` (default 1,000), `CAPVAULT_BENCH_RUNS` (timed calls per query, default
//! 7), `CAPVAULT_BIN` (another binary). Prints figures; asserts nothing about time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use pipe::{Pipe, env_usize, p50_p95, peak_rss_mb, spawn};

/// Words the PDFs are written in: a few common ones and made-up ones, Zipf-like by position.
fn pdf_words(rng: &mut StdRng) -> Vec<String> {
    let mut words: Vec<String> = [
        "report", "revenue", "quarter", "budget", "contract", "invoice", "the", "and", "of",
        "policy", "figure", "table", "appendix", "summary", "results", "method",
    ]
    .iter()
    .map(|w| (*w).to_owned())
    .collect();
    let syl = [
        "ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "pa", "ri", "gu",
    ];
    while words.len() < 5_000 {
        let n = rng.random_range(2..5);
        words.push(
            (0..n)
                .map(|_| syl[rng.random_range(0..syl.len())])
                .collect(),
        );
    }
    words
}

/// Writes `count` PDFs under `root/PDFs` (skipped when already there); returns the pages.
fn write_pdfs(root: &Path, count: usize) -> usize {
    let dir = root.join("PDFs");
    let marker = root.join(format!(".capvault-bench-pdfs-{count}"));
    let mut rng = StdRng::seed_from_u64(7);
    let words = pdf_words(&mut rng);
    let mut pages_total = 0;
    let done = marker.exists();
    if !done {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
    }
    for i in 0..count {
        let pages = rng.random_range(1..=16);
        pages_total += pages;
        let texts: Vec<String> = (0..pages)
            .map(|_| {
                (0..25)
                    .map(|_| {
                        (0..12)
                            .map(|_| {
                                // Skewed toward the first words, as real text is.
                                let r: f64 = rng.random();
                                words[((r * r * r) * words.len() as f64) as usize].as_str()
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        if !done {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let sub = dir.join(format!("{:02}", i % 20));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(
                sub.join(format!("doc-{i:04}.pdf")),
                capvault::media::pdf::sample_pdf(&refs),
            )
            .unwrap();
        }
    }
    if !done {
        std::fs::write(&marker, "").unwrap();
    }
    pages_total
}

/// Waits for the index, then for the PDFs' first pass; returns vault_info's `pdfs` and the
/// time from the server's start.
fn wait_pdfs(pipe: &mut Pipe, started: Instant) -> (Value, Duration) {
    loop {
        let info = pipe.call("vault_info", &json!({}));
        if info["pdfs"]["first_pass_ms"].is_u64() {
            return (info["pdfs"].clone(), started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The PDF worker's peak memory: the server's child process.
fn worker_rss_mb(server: u32) -> f64 {
    let children = std::fs::read_to_string(format!("/proc/{server}/task/{server}/children"))
        .unwrap_or_default();
    children
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .map(peak_rss_mb)
        .fold(0.0, f64::max)
}

fn timed(pipe: &mut Pipe, args: &Value, runs: usize) -> Vec<Duration> {
    pipe.call("search_notes", args);
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            pipe.call("search_notes", args);
            t.elapsed()
        })
        .collect()
}

fn main() {
    let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
    let pdfs = env_usize("CAPVAULT_BENCH_PDFS", 1_000);
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 7);
    let bin =
        std::env::var("CAPVAULT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_capvault").to_owned());
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
    // A vault of its own (seed 43): the other benchmarks' vaults stay free of PDFs.
    let vault = generator::generate(&base, notes, 43);
    let pages = write_pdfs(&vault.root, pdfs);
    println!(
        "vault: {} notes, {pdfs} PDFs ({pages} pages) at {}",
        vault.notes,
        vault.root.display()
    );
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap().to_owned();

    let queries: Vec<Value> = [
        ("revenue", "ranked"),
        ("quarterly revenue", "ranked"),
        ("appendix table", "ranked"),
        ("kalo", "ranked"),
        ("revenue", "exact"),
        ("contract policy", "exact"),
    ]
    .iter()
    .map(|(q, m)| json!({"query": q, "mode": m, "limit": 10}))
    .collect();

    for (label, extra) in [
        ("without --index-pdfs", vec![]),
        ("with --index-pdfs (cold)", vec!["--index-pdfs"]),
        ("with --index-pdfs (restart)", vec!["--index-pdfs"]),
    ] {
        let mut args = vec!["--index-cache", cache_arg.as_str()];
        args.extend(extra.iter().copied());
        let started = Instant::now();
        let mut pipe = spawn(&bin, &vault.root, &args);
        let pid = pipe.child.id();
        println!("\n{label}");
        if extra.is_empty() {
            loop {
                let info = pipe.call("vault_info", &json!({}));
                if info["index"]["state"] == "ready" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        } else {
            let (status, ready) = wait_pdfs(&mut pipe, started);
            println!(
                "  PDFs ready {:.1} s after the start (first pass {} ms, {} read, {} pages)",
                ready.as_secs_f64(),
                status["first_pass_ms"],
                status["read_this_run"],
                status["pages"],
            );
        }
        for q in &queries {
            let (p50, p95) = p50_p95(timed(&mut pipe, q, runs));
            let r = pipe.call("search_notes", q);
            let pdf_hits = r["hits"]
                .as_array()
                .map_or(0, |h| h.iter().filter(|h| h["page"].is_u64()).count());
            println!(
                "  {:>7} {:<20} p50 {p50:6.2} ms  p95 {p95:6.2} ms  total {:>6}  PDF hits on page 1: {pdf_hits}",
                q["mode"].as_str().unwrap(),
                q["query"].as_str().unwrap(),
                r["total"],
            );
        }
        println!(
            "  peak memory: server {:.0} MB, PDF worker {:.0} MB",
            peak_rss_mb(pid),
            worker_rss_mb(pid)
        );
        drop(pipe.stdin);
        let _ = pipe.child.wait();
    }
}
