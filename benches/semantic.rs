//! Semantic search at size: embedding a whole generated vault, re-embedding one note, hybrid
//! and semantic search on the wire (a raw JSON-RPC pipe to the release binary), the memory the
//! vectors add, and a restart on the embeddings cache. Issue 16's targets are printed beside
//! each figure. Prints figures; asserts nothing about time.
//!
//! Run: `CAPVAULT_BENCH_MODEL=DIR cargo bench --bench semantic` (10,000 notes), with
//! `CAPVAULT_BENCH_NOTES=100000` for the target size. DIR is a static model folder, e.g. the
//! one `.ci/run` imports (`target/models/minilm-static`) or `capvault model fetch`'s.
//! `CAPVAULT_BENCH_RUNS=N` (default 30) calls per query.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pipe::{Pipe, env_usize, p50_p95, peak_rss_mb, spawn};
use serde_json::{Value, json};

/// Polls `vault_info` until `done` holds; returns it and the time waited.
fn wait(pipe: &mut Pipe, done: impl Fn(&Value) -> bool) -> (Value, Duration) {
    let t = Instant::now();
    loop {
        let info = pipe.call("vault_info", &json!({}));
        if done(&info) {
            return (info, t.elapsed());
        }
        assert!(t.elapsed() < Duration::from_secs(1800), "gave up: {info}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn index_ready(i: &Value) -> bool {
    i["index"]["state"] == "ready" && !i["notes"].is_null()
}

fn embedded(i: &Value) -> bool {
    i["embedding"]["state"] == "ready"
}

/// Chunking and embedding one note in-process: what re-embedding a changed note costs.
fn per_note(model: &Path, root: &Path) {
    let m = capvault::semantic::load_model(&capvault::vault::host::Host::claim(), model)
        .expect("the model loads");
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.file_name().unwrap().to_str().unwrap().starts_with('.') {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
            if files.len() >= 2000 {
                break;
            }
        }
    }
    let mut times = Vec::new();
    let mut bytes = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        bytes += text.len();
        let title = f.file_stem().unwrap().to_str().unwrap();
        let t = Instant::now();
        let n = capvault::semantic::chunk::chunks(title, &text)
            .into_iter()
            .filter_map(|c| m.embed(&c.text))
            .count();
        times.push(t.elapsed());
        assert!(n > 0);
    }
    let mean = times.iter().sum::<Duration>().as_secs_f64() * 1e3 / times.len() as f64;
    let (p50, p95) = p50_p95(times);
    println!(
        "re-embedding one note (in-process, {} notes of {:.1} KB on average): mean {mean:.2} ms, \
         p50 {p50:.2} ms, p95 {p95:.2} ms (target 5 ms)",
        files.len(),
        bytes as f64 / files.len() as f64 / 1e3
    );
}

fn main() {
    let Ok(model) = std::env::var("CAPVAULT_BENCH_MODEL") else {
        println!(
            "semantic benchmark: set CAPVAULT_BENCH_MODEL to a static model folder \
             (capvault model fetch, or capvault model import)"
        );
        return;
    };
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 30);
    let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
    let g = generator::generate(&dir, notes, 42);
    let bin = env!("CARGO_BIN_EXE_capvault");
    println!(
        "semantic search, synthetic vault of {} notes ({:.1} MB of Markdown, seed 42), model {model}",
        g.notes,
        g.bytes as f64 / 1e6
    );
    per_note(Path::new(&model), &g.root);

    let cache = std::env::temp_dir().join(format!("capvault-bench-sem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let args = [
        "--embedding-model",
        model.as_str(),
        "--index-cache",
        cache.to_str().unwrap(),
    ];
    let t = Instant::now();
    let mut pipe = spawn(bin, &g.root, &args);
    let (_, index_at) = wait(&mut pipe, index_ready);
    let (info, _) = wait(&mut pipe, embedded);
    let total = t.elapsed();
    let e = &info["embedding"];
    println!(
        "first start: index ready {:.1} s, every note embedded {:.1} s after the handshake \
         (embedding itself {:.1} s, target 60 s; {} notes, {} sections)",
        index_at.as_secs_f64(),
        total.as_secs_f64(),
        e["embed_ms"].as_f64().unwrap_or(0.0) / 1e3,
        e["embedded"],
        e["sections"]
    );
    std::thread::sleep(Duration::from_secs(3));
    let queries = [
        "garden",
        "meeting notes about the project",
        "research plan for next week",
        "quokka",
        "a book review draft",
    ];
    println!(
        "{:<36} {:>9} {:>9} {:>9}",
        "call", "p50 ms", "p95 ms", "target"
    );
    for mode in ["hybrid", "semantic", "ranked"] {
        let mut times = Vec::new();
        for q in queries {
            for i in 0..=runs {
                let t = Instant::now();
                let r = pipe.call("search_notes", &json!({"query": q, "mode": mode}));
                if i > 0 {
                    times.push(t.elapsed());
                } else {
                    assert_eq!(r["mode"], mode, "{r}");
                }
            }
        }
        let (p50, p95) = p50_p95(times);
        let (t50, t95) = if mode == "ranked" {
            (5.0, 10.0)
        } else {
            (15.0, 30.0)
        };
        let mark = if p50 <= t50 && p95 <= t95 {
            ""
        } else {
            "  MISSED"
        };
        println!(
            "{:<36} {p50:>9.2} {p95:>9.2} {:>9}{mark}",
            format!("search_notes {mode} (5 queries)"),
            format!("{t50}/{t95}")
        );
    }
    let rss = peak_rss_mb(pipe.child.id());
    let lived = t.elapsed();
    drop(pipe.stdin);
    let _ = pipe.child.wait();

    // Keyword search alone: the memory baseline, in the same configuration as the server with
    // the model (a first start on an empty index cache folder, which also holds the notes'
    // texts) and for as long: the index cache is saved again 30 s after the first save, and
    // that save's peak belongs to keyword search too.
    let plain_cache =
        std::env::temp_dir().join(format!("capvault-bench-plain-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&plain_cache);
    std::fs::create_dir_all(&plain_cache).unwrap();
    let t = Instant::now();
    let mut plain = spawn(
        bin,
        &g.root,
        &["--index-cache", plain_cache.to_str().unwrap()],
    );
    wait(&mut plain, index_ready);
    for q in queries {
        plain.call("search_notes", &json!({"query": q, "mode": "ranked"}));
    }
    std::thread::sleep(lived.saturating_sub(t.elapsed()));
    let base_rss = peak_rss_mb(plain.child.id());
    drop(plain.stdin);
    let _ = plain.child.wait();
    let _ = std::fs::remove_dir_all(&plain_cache);
    println!(
        "peak RSS over {:.0} s: {rss:.0} MB with the model, {base_rss:.0} MB keyword search \
         alone: {:+.0} MB (target at most +150 MB)",
        lived.as_secs_f64(),
        rss - base_rss
    );

    // A restart on the saved vectors.
    let t = Instant::now();
    let mut pipe = spawn(bin, &g.root, &args);
    let (info, _) = wait(&mut pipe, embedded);
    let ready = t.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "restart on the embeddings cache: every note embedded {:.1} s after the handshake ({}), \
         peak RSS {:.0} MB",
        ready.as_secs_f64(),
        info["embedding"]["cache"],
        peak_rss_mb(pipe.child.id())
    );
    drop(pipe.stdin);
    let _ = pipe.child.wait();
    let _ = std::fs::remove_dir_all(&cache);
}
