//! A raw JSON-RPC connection to the release binary over its stdin/stdout (no SDK), shared by
//! the wire benchmarks.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A raw JSON-RPC connection over the child's stdin/stdout.
pub struct Pipe {
    pub child: Child,
    pub stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Pipe {
    pub fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends one request and reads lines until its reply; returns (reply, bytes of the reply).
    pub fn request(&mut self, method: &str, params: Value) -> (Value, usize) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return (v, line.len());
            }
        }
    }

    /// The next message the server sends, and its size in bytes.
    pub fn next_message(&mut self) -> (Value, usize) {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "server closed"
        );
        (serde_json::from_str(&line).unwrap(), line.len())
    }

    pub fn call(&mut self, tool: &str, args: &Value) -> Value {
        let (v, _) = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &v["result"];
        assert_ne!(result["isError"], true, "{tool} {args}: {v}");
        result["structuredContent"].clone()
    }
}

/// Starts the server on `root` with `args` and completes the handshake.
pub fn spawn(bin: &str, root: &std::path::Path, args: &[&str]) -> Pipe {
    let mut child = Command::new(bin)
        .arg("serve")
        .arg(root)
        .args(args)
        .env("CAPVAULT_LOG", "capvault=warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = Pipe {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child,
        next_id: 0,
    };
    pipe.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "1"}}),
    );
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    pipe
}

/// An environment variable as a number, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The 50th and 95th percentiles, in milliseconds.
pub fn p50_p95(mut t: Vec<Duration>) -> (f64, f64) {
    t.sort();
    let at = |p: f64| t[((t.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.95))
}

/// A process's peak resident memory (VmHWM), in MB; 0 when it cannot be read.
pub fn peak_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
