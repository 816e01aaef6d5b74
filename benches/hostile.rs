//! Hostile notes and hostile queries.
//!
//! First, in process, the vault model built from generated hostile notes (issue 33: a note of
//! headings and a note of links to them, distinct tags, links): the build time (scan, parse,
//! apply) and the heap bytes the model keeps, counted by this bench's allocator.
//! `CAPVAULT_HOSTILE_SIZES=200000,2000000` picks the notes' sizes in bytes (those by default).
//!
//! Then on the wire: a raw JSON-RPC pipe to the release binary, each hostile call of issue 59
//! alone (time to answer, the rise of the server's peak resident memory `VmHWM`, reset before
//! the call, and the reply's size), eight at once, a note of 100 slow inline queries (one budget
//! for the request), and a cancelled request (how long the server's CPU time goes on rising
//! after `notifications/cancelled`). With `../shared/vaults/obsidian-hub` present, the ordinary
//! queries over every list item of a real vault too.
//!
//! Run: `cargo bench --bench hostile` (`cargo bench --bench hostile -- notes` for the notes
//! alone). Prints figures; asserts nothing about time or memory (`tests/memory_bounds.rs` and
//! the model's unit tests hold the bounds).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/pipe.rs"]
mod pipe;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capvault::model::Model;
use capvault::vault::{Limits, Vault};
use serde_json::{Value, json};

/// Heap bytes in use in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, with the bytes in use counted in [`LIVE`].
struct Counted;

// SAFETY: each call goes to the system allocator with the caller's arguments unchanged; the
// sizes are only added up.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps `alloc`'s contract, which is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (so from the system's) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and `new_size` keeps `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static COUNTED: Counted = Counted;

/// A note's text of about `size` bytes: `item(0)`, `item(1)`, ... until it is that long.
fn fill(size: usize, mut item: impl FnMut(usize) -> String) -> String {
    let mut s = String::with_capacity(size + 64);
    let mut i = 0;
    while s.len() < size {
        s.push_str(&item(i));
        i += 1;
    }
    s
}

/// The model of hostile notes of each size: how long it takes to build and what it keeps.
fn hostile_notes() {
    let sizes =
        std::env::var("CAPVAULT_HOSTILE_SIZES").unwrap_or_else(|_| "200000,2000000".to_owned());
    println!(
        "hostile notes, the model built in process ({} build):",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    for size in sizes
        .split(',')
        .filter_map(|n| n.trim().parse::<usize>().ok())
    {
        let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
            (
                "headings + links to them",
                vec![
                    ("T.md", fill(size, |i| format!("## Part {i}\n"))),
                    ("S.md", fill(size, |i| format!("[[T#Part {i}]]\n"))),
                ],
            ),
            (
                "distinct tags",
                vec![("T.md", fill(size, |i| format!("#t{i} ")))],
            ),
            (
                "links",
                vec![
                    ("S.md", fill(size, |i| format!("[[n{}]] ", i % 1000))),
                    ("n1.md", String::new()),
                ],
            ),
        ];
        for (label, files) in cases {
            let tmp = tempfile::tempdir().unwrap();
            for (name, text) in &files {
                std::fs::write(tmp.path().join(name), text).unwrap();
            }
            let text: usize = files.iter().map(|f| f.1.len()).sum();
            drop(files);
            let vault = Vault::open(tmp.path(), Limits::default()).unwrap();
            let before = LIVE.load(Ordering::Relaxed);
            let started = Instant::now();
            let mut model = Model::default();
            let (changes, _) = model.changes_since(&vault).unwrap();
            model.apply(changes);
            let took = started.elapsed();
            let kept = LIVE.load(Ordering::Relaxed).saturating_sub(before);
            println!(
                "{size:>8} B/note  {label:<26} {:>5.1} MB text  {:>7.2} s  model {:>6.1} MB",
                text as f64 / 1e6,
                took.as_secs_f64(),
                kept as f64 / 1e6
            );
        }
    }
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}

fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

/// The process's CPU time (user + system) in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name in parentheses: fields 14 and 15 are utime and stime.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

fn write(root: &Path, name: &str, text: &str) {
    let p = root.join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, text).unwrap();
}

fn vault(root: &Path) {
    write(
        root,
        "Bomb.md",
        "`= length(replace(\"a\" * 100000, \"a\", \"b\" * 100000))`\n",
    );
    write(
        root,
        "Block.md",
        "```dataview\nLIST WITHOUT ID length(replace(\"a\" * 100000, \"a\", \"b\" * 100000))\n```\n",
    );
    write(
        root,
        "Joins.md",
        &"`= join(split(\"ab\" * 200000, \"\"), \"x\" * 1000)`\n".repeat(5),
    );
    write(
        root,
        "Slow.md",
        &"`= length(filter(split(\"a,\" * 100000, \",\"), (x) => x = \"a\"))`\n".repeat(100),
    );
    write(
        root,
        "Regex.md",
        &format!(
            "```tasks\n{}```\n",
            "path regex matches /\\w{20}/\n".repeat(560)
        ),
    );
    write(root, "A/One.md", "- [ ] a task 📅 2026-12-01\n");
}

/// One call: (ms, peak rise in MiB, reply bytes, code or "ok").
fn one(pipe: &mut pipe::Pipe, pid: u32, tool: &str, args: Value) -> (f64, u64, usize, String) {
    let before = status_kib(pid, "VmRSS");
    reset_peak(pid);
    let t = Instant::now();
    let (v, bytes) = pipe.request("tools/call", json!({"name": tool, "arguments": args}));
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let rise = status_kib(pid, "VmHWM").saturating_sub(before) / 1024;
    let result = &v["result"];
    let code = if result["isError"] == true {
        result["_meta"]["capvault/error"]["code"]
            .as_str()
            .unwrap_or("error")
            .to_owned()
    } else {
        "ok".to_owned()
    };
    (ms, rise, bytes, code)
}

fn main() {
    hostile_notes();
    if std::env::args().any(|a| a == "notes") {
        return;
    }
    // CAPVAULT_BIN: another build of the server (a release binary driven by a debug harness).
    let bin_path =
        std::env::var("CAPVAULT_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_capvault").into());
    let bin = bin_path.as_str();
    let tmp = std::env::temp_dir().join(format!("capvault-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    vault(&tmp);
    let mut p = pipe::spawn(bin, &tmp, &[]);
    let pid = p.child.id();
    // Ready: the model built.
    while p.call("vault_info", &json!({}))["notes"].is_null() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let flatten = "LIST WITHOUT ID length(i) FROM \"A\" FLATTEN \"x\" * 1000000 AS big \
                   FLATTEN split(\"a,\" * 10000, \",\") AS i";
    let calls: Vec<(&str, &str, Value)> = vec![
        (
            "inline replace bomb (70-byte note)",
            "read_note",
            json!({"path": "Bomb.md", "evaluate_inline": true}),
        ),
        (
            "```dataview replace bomb",
            "run_query",
            json!({"path": "Block.md", "block": 1}),
        ),
        (
            "FLATTEN of 1 MB over 10,001 items",
            "run_query",
            json!({"query": flatten}),
        ),
        (
            "first row of 900 KB",
            "run_query",
            json!({"query": "LIST WITHOUT ID \"y\" * 900000 FROM \"A\""}),
        ),
        (
            "five joins, max_chars default",
            "read_note",
            json!({"path": "Joins.md", "evaluate_inline": true}),
        ),
        (
            "100 slow inline queries",
            "read_note",
            json!({"path": "Slow.md", "evaluate_inline": true}),
        ),
        (
            "560 Tasks regex lines",
            "run_query",
            json!({"path": "Regex.md", "block": 1}),
        ),
    ];
    println!(
        "hostile calls alone ({}, raw JSON-RPC):",
        if std::env::var_os("CAPVAULT_BIN").is_some() {
            format!("the server at {bin}")
        } else if cfg!(debug_assertions) {
            "debug build".to_owned()
        } else {
            "release build".to_owned()
        }
    );
    println!(
        "{:<38} {:>9} {:>12} {:>12} {:>16}",
        "call", "ms", "peak +MiB", "reply B", "answer"
    );
    for (label, tool, args) in &calls {
        let (ms, rise, bytes, code) = one(&mut p, pid, tool, args.clone());
        println!("{label:<38} {ms:>9.1} {rise:>12} {bytes:>12} {code:>16}");
    }

    // Eight at once: sent together, read as they come.
    let before = status_kib(pid, "VmRSS");
    reset_peak(pid);
    let t = Instant::now();
    let eight: Vec<&(&str, &str, Value)> = calls.iter().cycle().take(8).collect();
    for (i, (_, tool, args)) in eight.iter().enumerate() {
        p.send(
            &json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}}),
        );
    }
    let mut codes = Vec::new();
    while codes.len() < 8 {
        let (v, _) = read_any(&mut p);
        if v["id"].as_u64().is_some_and(|id| id >= 1000) {
            let r = &v["result"];
            codes.push(if r["isError"] == true {
                r["_meta"]["capvault/error"]["code"]
                    .as_str()
                    .unwrap_or("error")
                    .to_owned()
            } else {
                "ok".to_owned()
            });
        }
    }
    println!(
        "eight hostile calls at once: {:.0} ms, peak +{} MiB, answers {:?}",
        t.elapsed().as_secs_f64() * 1e3,
        status_kib(pid, "VmHWM").saturating_sub(before) / 1024,
        codes
    );

    // A cancelled request: its CPU time stops rising.
    p.send(&json!({"jsonrpc": "2.0", "id": 5000, "method": "tools/call",
                   "params": {"name": "read_note", "arguments": {"path": "Slow.md", "evaluate_inline": true}}}));
    std::thread::sleep(Duration::from_millis(300));
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 5000, "reason": "bench"}}),
    );
    // The server's CPU time in each 250 ms after the cancellation (the clock ticks of every
    // thread: a background thread's work shows too).
    let tick_ms = 1000.0 / 100.0;
    let mut last = cpu_ticks(pid);
    let mut windows = Vec::new();
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(250));
        let now = cpu_ticks(pid);
        windows.push(((now - last) as f64 * tick_ms) as u64);
        last = now;
    }
    println!(
        "a cancelled request: the server's CPU ms in each 250 ms after notifications/cancelled: {windows:?}"
    );
    let _ = p.child.kill();

    if let Some(hub) = [
        "../shared/vaults/obsidian-hub",
        "../../shared/vaults/obsidian-hub",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.is_dir())
    {
        let copy = tmp.join("hub");
        let status = Command::new("cp")
            .arg("-r")
            .arg(hub)
            .arg(&copy)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let mut p = pipe::spawn(bin, &copy, &[]);
        let pid = p.child.id();
        while p.call("vault_info", &json!({}))["notes"].is_null() {
            std::thread::sleep(Duration::from_millis(20));
        }
        println!("obsidian-hub, ordinary queries over every list item:");
        for q in [
            "LIST length(rows) FLATTEN file.lists AS l GROUP BY true",
            "LIST length(rows.file.name) FLATTEN file.lists AS l GROUP BY true",
            "TABLE length(rows) GROUP BY file.folder",
        ] {
            let (ms, rise, bytes, code) = one(&mut p, pid, "run_query", json!({"query": q}));
            println!("{q:<70} {ms:>9.1} ms {rise:>6} MiB {bytes:>8} B {code}");
        }
        let _ = p.child.kill();
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Reads the next message the server sends.
fn read_any(p: &mut pipe::Pipe) -> (Value, usize) {
    p.next_message()
}
