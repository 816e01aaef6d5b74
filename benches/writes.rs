//! The write tools on the wire (a raw JSON-RPC pipe to the release binary with `--write`): an
//! edit with `if_match` (history kept, fsync of file and folder, audit line, index and model
//! updated before the reply), an append, and a move of a note with 100 backlinks (every one
//! rewritten), on a copy of the generated vault.
//!
//! Run: `cargo bench --bench writes` (10,000 notes), `CAPVAULT_BENCH_NOTES=100000 cargo bench
//! --bench writes`; `CAPVAULT_BENCH_RUNS=N` (default 30). Prints figures; asserts nothing
//! about time.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use pipe::{env_usize, p50_p95};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn main() {
    let runs = env_usize("CAPVAULT_BENCH_RUNS", 30);
    let notes = env_usize("CAPVAULT_BENCH_NOTES", 10_000);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
    let g = generator::generate(&dir, notes, 42);
    // A copy: the generated vault is shared by every benchmark and must not change.
    let work = dir.join(format!("writes-{notes}"));
    let _ = std::fs::remove_dir_all(&work);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&g.root)
        .arg(&work)
        .status()
        .unwrap();
    assert!(status.success(), "cp failed");
    // A note with 100 backlinks written by path, so a move rewrites every one.
    std::fs::create_dir_all(work.join("Hub")).unwrap();
    std::fs::write(work.join("Hub/Target.md"), "# Target\nthe hub\n").unwrap();
    for i in 0..100 {
        std::fs::write(
            work.join(format!("Hub/link-{i}.md")),
            format!("# Link {i}\nsee [[Hub/Target]] and [[Hub/Target#Target|it]]\n"),
        )
        .unwrap();
    }
    let state = dir.join(format!("writes-state-{notes}"));
    let _ = std::fs::remove_dir_all(&state);
    let bin = env!("CARGO_BIN_EXE_capvault");
    let mut pipe = pipe::spawn(
        bin,
        &work,
        &[
            "--write",
            "--no-index-cache",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    );
    loop {
        let info = pipe.call("vault_info", &json!({}));
        if info["index"]["state"] == "ready" && !info["notes"].is_null() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(if notes >= 50_000 { 20 } else { 3 }));
    let path = pipe.call("list_notes", &json!({"limit": 1}))["notes"][0]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    println!(
        "capvault writes on the wire (raw JSON-RPC, release build), synthetic {} notes",
        g.notes
    );
    println!("{:<36} {:>9} {:>9}", "call", "p50 ms", "p95 ms");

    let mut version = pipe.call("read_note", &json!({"path": path}))["sha256"].clone();
    let mut times = Vec::new();
    let text = pipe.call("read_note", &json!({"path": path}))["content"]
        .as_str()
        .unwrap()
        .to_owned();
    // A marker appended once, then switched back and forth by each edit.
    let r = pipe.call(
        "append_to_note",
        &json!({"path": path, "content": "benchmark marker ALPHA", "if_match": version}),
    );
    version = r["sha256"].clone();
    let _ = text;
    for i in 0..=runs {
        let (from, to) = if i.is_multiple_of(2) {
            ("ALPHA", "OMEGA")
        } else {
            ("OMEGA", "ALPHA")
        };
        let t = Instant::now();
        let r = pipe.call(
            "edit_note",
            &json!({"path": path, "if_match": version,
                    "edits": [{"old_text": format!("marker {from}"), "new_text": format!("marker {to}")}]}),
        );
        if i > 0 {
            times.push(t.elapsed());
        }
        version = r["sha256"].clone();
    }
    let (p50, p95) = p50_p95(times);
    println!(
        "{:<36} {p50:>9.2} {p95:>9.2}",
        "edit_note (if_match, durable)"
    );
    // The next search sees the last edit.
    let last = if runs.is_multiple_of(2) {
        "OMEGA"
    } else {
        "ALPHA"
    };
    let hits = pipe.call(
        "search_notes",
        &json!({"query": format!("marker {last}"), "mode": "exact"}),
    );
    assert_eq!(
        hits["hits"][0]["path"],
        Value::String(path.clone()),
        "{hits}"
    );

    let mut times = Vec::new();
    for i in 0..=runs {
        let t = Instant::now();
        pipe.call(
            "append_to_note",
            &json!({"path": "Hub/Target.md", "content": format!("line {i}")}),
        );
        if i > 0 {
            times.push(t.elapsed());
        }
    }
    let (p50, p95) = p50_p95(times);
    println!("{:<36} {p50:>9.2} {p95:>9.2}", "append_to_note");

    let mut times = Vec::new();
    let moves = runs.min(10);
    for i in 0..moves {
        let (from, to) = if i.is_multiple_of(2) {
            ("Hub/Target.md", "Hub/Moved/Target B.md")
        } else {
            ("Hub/Moved/Target B.md", "Hub/Target.md")
        };
        let t = Instant::now();
        let r = pipe.call("move_note", &json!({"from": from, "to": to}));
        times.push(t.elapsed());
        assert_eq!(r["links_updated"], 200, "{r}");
    }
    let (p50, p95) = p50_p95(times);
    println!(
        "{:<36} {p50:>9.2} {p95:>9.2}",
        "move_note + rename, 100 backlinks"
    );
    drop(pipe.stdin);
    let _ = pipe.child.wait();
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&state);
}
