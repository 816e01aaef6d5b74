//! A load run over Streamable HTTP: requests per second and p50/p99 latency of ranked search and
//! read_note with 10, 50 and 200 concurrent clients, each a keep-alive connection sending
//! stateless 2026-07-28 requests one after another, against the release binary on a generated
//! vault. A benchmark, not a test: it prints figures and asserts nothing about time.
//!
//! Run: `cargo bench --bench http_load` (10,000 notes), `CAPVAULT_BENCH_NOTES=100000 cargo bench
//! --bench http_load`. `CAPVAULT_BENCH_SECS=N` sets each run's length (default 5).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/pipe.rs"]
mod pipe;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One keep-alive HTTP/1.1 connection speaking stateless MCP.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    authority: String,
    id: u64,
}

impl Conn {
    fn open(authority: &str) -> Conn {
        let s = TcpStream::connect(authority).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            authority: authority.to_owned(),
            id: 0,
        }
    }

    /// Calls `tool` and returns the JSON-RPC reply.
    fn call(&mut self, tool: &str, args: &Value) -> Value {
        self.id += 1;
        let body = json!({
            "jsonrpc": "2.0", "id": self.id, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}
        })
        .to_string();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
            self.authority,
            body.len()
        );
        self.writer.write_all(req.as_bytes()).unwrap();
        let mut status = String::new();
        self.reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut buf = vec![0; len];
        self.reader.read_exact(&mut buf).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    let notes = pipe::env_usize("CAPVAULT_BENCH_NOTES", 10_000);
    let secs = pipe::env_usize("CAPVAULT_BENCH_SECS", 5) as u64;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-vaults");
    let g = generator::generate(&dir, notes, 42);
    let bin = env!("CARGO_BIN_EXE_capvault");
    let mut child = Command::new(bin)
        .arg("serve")
        .arg(&g.root)
        .args([
            "--no-index-cache",
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--max-in-flight-per-client",
            "256",
        ])
        .env("CAPVAULT_LOG", "capvault=warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("capvault exited").unwrap();
        if let Some(u) = line.strip_prefix("capvault: serving over HTTP at ") {
            break u.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut c = Conn::open(&authority);
    loop {
        let info = c.call("vault_info", &json!({}));
        let s = &info["result"]["structuredContent"];
        if s["index"]["state"] == "ready" && !s["notes"].is_null() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(if notes >= 50_000 { 20 } else { 3 }));
    let listed = c.call("list_notes", &json!({"limit": 200}));
    let paths: Arc<Vec<String>> = Arc::new(
        listed["result"]["structuredContent"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["path"].as_str().unwrap().to_owned())
            .collect(),
    );
    let words = [
        "garden",
        "project meeting",
        "rust",
        "compost",
        "travel notes",
        "budget",
    ];

    println!(
        "HTTP load, synthetic vault of {} notes ({:.1} MB), {secs} s per run, {} cores",
        g.notes,
        g.bytes as f64 / 1e6,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| call | clients | requests/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    for tool in ["search_notes", "read_note"] {
        for clients in [10usize, 50, 200] {
            let stop = Arc::new(AtomicBool::new(false));
            let handles: Vec<_> = (0..clients)
                .map(|k| {
                    let (stop, paths, authority) =
                        (Arc::clone(&stop), Arc::clone(&paths), authority.clone());
                    std::thread::spawn(move || {
                        let mut conn = Conn::open(&authority);
                        let mut times = Vec::new();
                        let mut i = k;
                        while !stop.load(Ordering::Relaxed) {
                            let args = if tool == "search_notes" {
                                json!({"query": words[i % words.len()], "limit": 10})
                            } else {
                                json!({"path": paths[i % paths.len()]})
                            };
                            let t = Instant::now();
                            let r = conn.call(tool, &args);
                            times.push(t.elapsed());
                            assert!(r["result"]["isError"] != true, "{r}");
                            i += 7;
                        }
                        times
                    })
                })
                .collect();
            let started = Instant::now();
            std::thread::sleep(Duration::from_secs(secs));
            stop.store(true, Ordering::Relaxed);
            let mut all: Vec<Duration> = handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect();
            let elapsed = started.elapsed().as_secs_f64();
            all.sort();
            println!(
                "| {tool} | {clients} | {:.0} | {:.2} | {:.2} |",
                all.len() as f64 / elapsed,
                percentile(&all, 0.5),
                percentile(&all, 0.99)
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}
