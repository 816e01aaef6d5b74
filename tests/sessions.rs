//! One engine for many sessions, and its lifecycle: sessions share one engine; shutting it down
//! stops and joins every background thread and drops it; the binary exits 0 on stdin EOF,
//! SIGINT and SIGTERM after saving its index cache; a server killed during a build leaves a
//! cache the next start loads.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::write_tree;
use capvault::app::connect_in_process;
#[cfg(target_os = "linux")]
use capvault::engine::Phase;
use capvault::engine::{Engine, EngineOptions, IndexCache};
use capvault::server::CapvaultServer;
use capvault::vault::{Limits, Vault};
use serde_json::{Value, json};

/// Names of this process's threads that belong to an engine (`capvault-*`).
#[cfg(target_os = "linux")]
fn engine_threads() -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = t.unwrap().path().join("comm");
        if let Ok(name) = std::fs::read_to_string(comm) {
            let name = name.trim().to_owned();
            if name.starts_with("capvault-") {
                out.push(name);
            }
        }
    }
    out
}

fn notes(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("F{}/Note {i}.md", i % 10),
                format!("# Note {i}\nwords marmot{i} and [[Note {}]]\n", (i + 1) % n),
            )
        })
        .collect()
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> Value {
    let r = crate::common::call_tool(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    r.structured_content.unwrap()
}

/// Set in the child process that runs a test alone (see [`in_a_process_of_its_own`]).
#[cfg(target_os = "linux")]
const ALONE: &str = "CAPVAULT_TEST_ALONE";

/// Runs the test `name` of this module in a child process of this test binary, alone: the
/// tests of this crate share one process, and a test that counts the process's threads would
/// count other tests' engines.
#[cfg(target_os = "linux")]
fn in_a_process_of_its_own(name: &str) {
    let module = module_path!()
        .split_once("::")
        .map(|(_, m)| format!("{m}::"))
        .unwrap_or_default();
    let test = format!("{module}{name}");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test.as_str(), "--nocapture", "--test-threads=1"])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {stdout}"
    );
}

/// Two sessions on one engine see the same model; after they end, `shutdown` joins every
/// background thread (build, watcher, reconcile, cache saver) and the engine is dropped.
#[cfg(target_os = "linux")]
#[test]
fn sessions_share_one_engine_and_shutdown_drops_it_and_ends_its_threads() {
    if std::env::var_os(ALONE).is_none() {
        return in_a_process_of_its_own(
            "sessions_share_one_engine_and_shutdown_drops_it_and_ends_its_threads",
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(shared_engine_then_shutdown());
}

#[cfg(target_os = "linux")]
async fn shared_engine_then_shutdown() {
    // The global rayon pool is made by the first parse; made here, its threads are not named
    // after the engine thread that would otherwise have started them.
    rayon::broadcast(|_| ());
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &notes(50));
    let vault = Vault::open(tmp.path(), Limits::default()).unwrap();
    let dir = capvault::vault::cache::IndexCacheDir::open(cache.path(), &vault).unwrap();
    let engine = Engine::open(
        vault,
        EngineOptions::default(),
        IndexCache::Dir(Arc::new(dir)),
    );
    engine.start();
    let weak = Arc::downgrade(&engine);
    let a = connect_in_process(CapvaultServer::with_all_tools(Arc::clone(&engine)), |s| s)
        .await
        .unwrap();
    let b = connect_in_process(CapvaultServer::with_all_tools(Arc::clone(&engine)), |s| s)
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while engine.phase() != Phase::Ready || !engine.status().watcher.starts_with("watching") {
        assert!(Instant::now() < until, "{:?}", engine.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(call(&a, "vault_info", json!({})).await["notes"], 50);
    // A change seen by one session's engine is seen by the other: they share it.
    write_tree(tmp.path(), &[("New.md", "# New\nquokka")]);
    let until = Instant::now() + Duration::from_secs(20);
    while call(&b, "vault_info", json!({})).await["notes"] != 51 {
        assert!(Instant::now() < until, "the change never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let threads = engine_threads();
    for name in ["capvault-build", "capvault-sync", "capvault-cache"] {
        assert!(
            threads.iter().any(|t| t == name),
            "{name} not running: {threads:?}"
        );
    }
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    let e = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || e.shutdown())
        .await
        .unwrap();
    assert_eq!(engine.phase(), Phase::Stopped);
    assert!(
        engine.status().cache_saved.is_some(),
        "no final save: {:?}",
        engine.status()
    );
    drop(engine);
    // The sessions' tasks let go of their clones as they end.
    let until = Instant::now() + Duration::from_secs(10);
    while weak.upgrade().is_some() {
        assert!(Instant::now() < until, "the engine is still referenced");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(engine_threads(), Vec::<String>::new());
}

/// A thread that cannot be started is reported, not dropped: the first query builds instead.
#[tokio::test]
async fn a_background_thread_that_cannot_start_is_reported_and_queries_still_work() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &notes(5));
    let vault = Vault::open(tmp.path(), Limits::default()).unwrap();
    let engine = Engine::open(vault, EngineOptions::default(), IndexCache::Off);
    // A stack no machine can map makes every spawn fail.
    engine.start_with(|| std::thread::Builder::new().stack_size(1 << 46));
    let error = engine.status().last_error.unwrap_or_default();
    assert!(
        error.contains("could not start the build thread"),
        "{error}"
    );
    let client = connect_in_process(CapvaultServer::with_all_tools(Arc::clone(&engine)), |s| s)
        .await
        .unwrap();
    let info = call(&client, "vault_info", json!({})).await;
    assert!(
        info["index"]["last_error"]
            .as_str()
            .unwrap()
            .contains("could not start"),
        "{info}"
    );
    let hits = call(
        &client,
        "search_notes",
        json!({"query": "marmot3", "mode": "exact"}),
    )
    .await;
    assert_eq!(hits["hits"][0]["path"], "F3/Note 3.md", "{hits}");
    client.cancel().await.unwrap();
    engine.shutdown();
}

/// `capvault serve` as a client runs it, with its index cache in `cache`; stdin and stdout piped.
fn spawn_server(vault: &Path, cache: &Path) -> std::process::Child {
    crate::common::capvault()
        .arg("serve")
        .arg(vault)
        .arg("--index-cache")
        .arg(cache)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits for `child` to exit (at most `secs`), killing it if it does not.
fn wait_exit(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            child.kill().unwrap();
            panic!("the server did not exit within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Speaks just enough MCP over the child's pipes: initialize, then `vault_info` until the index
/// is ready. Returns the pipes.
fn handshake_and_wait_ready(
    child: &mut std::process::Child,
) -> (
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"capvault\""), "{line}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let until = Instant::now() + Duration::from_secs(60);
    for id in 1.. {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "vault_info", "arguments": {}}}));
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["result"]["structuredContent"]["index"]["state"] == "ready" {
            break;
        }
        assert!(Instant::now() < until, "never ready: {line}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (stdin, stdout)
}

/// The cache state a new server on `vault` reports once ready.
async fn cache_state_after_restart(vault: &Path, cache: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let server =
            crate::common::Server::start_with(vault, &["--index-cache", cache.to_str().unwrap()])
                .await;
        let index = server.wait_index_ready().await;
        server.stop().await;
        let state = index["cache"].as_str().unwrap().to_owned();
        if !state.contains("another capvault process") {
            return state;
        }
        assert!(Instant::now() < until, "cache still locked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_binary_exits_0_on_eof_sigint_and_sigterm_and_saves_its_cache_first() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &notes(200));
    for how in ["eof", "SIGINT", "SIGTERM"] {
        let cache = tempfile::tempdir().unwrap();
        let mut child = spawn_server(tmp.path(), cache.path());
        let (stdin, _stdout) = handshake_and_wait_ready(&mut child);
        match how {
            "eof" => drop(stdin),
            sig => {
                let signal = if sig == "SIGINT" {
                    rustix::process::Signal::INT
                } else {
                    rustix::process::Signal::TERM
                };
                let pid = rustix::process::Pid::from_child(&child);
                rustix::process::kill_process(pid, signal).unwrap();
            }
        }
        let status = wait_exit(&mut child, 20);
        assert!(status.success(), "{how}: {status}");
        // The save on the way out (the first periodic one comes 2 s after the build).
        let state = cache_state_after_restart(tmp.path(), cache.path()).await;
        assert_eq!(state, "reused 200 of 200 notes", "{how}");
    }
}

#[tokio::test]
async fn a_server_killed_during_a_build_leaves_a_cache_the_next_start_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &notes(3000));
    // A first start builds and saves the cache (on EOF).
    let mut child = spawn_server(tmp.path(), cache.path());
    let (stdin, _out) = handshake_and_wait_ready(&mut child);
    drop(stdin);
    assert!(wait_exit(&mut child, 30).success());
    // Every note changes; the next start re-indexes them all and is killed half way.
    let changed: Vec<(String, String)> = notes(3000)
        .into_iter()
        .map(|(p, t)| (p, format!("{t}\nchanged wombat\n")))
        .collect();
    write_tree(tmp.path(), &changed);
    let mut child = spawn_server(tmp.path(), cache.path());
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // The next start loads the cache (no "rebuilt: <reason>") and catches up.
    let state = cache_state_after_restart(tmp.path(), cache.path()).await;
    assert!(state.starts_with("reused "), "{state}");
    let server = crate::common::Server::start_with(
        tmp.path(),
        &["--index-cache", cache.path().to_str().unwrap()],
    )
    .await;
    server.wait_index_ready().await;
    let hits = server
        .ok("search_notes", json!({"query": "wombat", "limit": 1}))
        .await;
    assert_eq!(hits["total"], 3000, "{hits}");
    server.stop().await;
}

#[tokio::test]
async fn a_server_whose_stderr_is_closed_still_builds_and_serves_when_it_logs_warnings() {
    // stderr's reading end is closed before the server logs: every log line fails to be
    // written (EPIPE). The over-size note makes the first build log a warning from a worker
    // thread; tracing used to report the failed write with `eprintln!`, which panicked that
    // thread and left the build unfinished for good.
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("small.md", "# Small\notter here\n".to_owned()),
            ("big.md", format!("# Big\n{}\n", "otter ".repeat(100))),
        ],
    );
    let mut cmd =
        crate::common::serve_command(tmp.path(), &["--no-index-cache", "--max-file-size", "256"]);
    cmd.env("CAPVAULT_LOG", "capvault=info");
    // Its stderr a pipe nobody reads: every log line's write fails.
    let (unread, stderr) = std::io::pipe().unwrap();
    drop(unread);
    cmd.stderr(stderr);
    let server = crate::common::Server::from_command(cmd).await;
    let index = server.wait_index_ready().await;
    assert_eq!(index["documents"], 1, "{index}");
    let r = server
        .ok("search_notes", json!({"query": "otter", "mode": "exact"}))
        .await;
    assert_eq!(r["hits"][0]["path"], "small.md", "{r}");
    server.stop().await;
}
