//! Search, side by side with other Obsidian MCP servers, through a real MCP client over stdio.
//!
//! Run: `scripts/bench-search.sh [1000|10000|100000|/path/to/vault]` (installs the peers into
//! `target/peers/` first, then runs this with `cargo bench --bench search`). Prints figures and
//! asserts nothing about time; a server that is missing or fails is reported, never dropped.
//!
//! Environment: `CAPVAULT_BENCH_SIZES=1000,10000` (generated vaults, cached in
//! `target/bench-vaults/`), `CAPVAULT_BENCH_VAULT=/path` (an existing vault instead),
//! `CAPVAULT_BENCH_RUNS` (timed calls per query after one warm-up, default 20),
//! `CAPVAULT_BENCH_SERVERS=capvault,capvault-restart,obsidian-mcp-rs,mcpvault,some-vault-some-mcp`
//! (which to run),
//! `CAPVAULT_BENCH_INDEX_TIMEOUT` (seconds capvault may take to report its index ready, default
//! 120), `CAPVAULT_BENCH_PEER_INDEX_TIMEOUT` (the same for peers, default 600),
//! `CAPVAULT_BENCH_CALL_TIMEOUT` (seconds per call, default 120), `CAPVAULT_BENCH_CELL_BUDGET`
//! (seconds of timed calls per query before stopping early with at least 3 runs, default 60).
//! Each warm-up answer is saved under `target/bench-search/<vault>/` and each server's stderr
//! beside it, to check what a figure measured.
//!
//! # The servers (facts found by listing their tools through this client and reading the READMEs
//! and sources of the installed packages, versions as installed on 2026-11-30)
//!
//! - capvault: `capvault serve <vault>`. Tool `search_notes {query, mode: "ranked" | "exact" |
//!   "regex", limit}`; `vault_info` reports `index: {state, documents, progress}`. Index ready =
//!   `vault_info` polled every 20 ms until `index.state == "ready"`; the queries start once
//!   `vault_info` also counts `notes` (the model is built) and `index.watcher` is past
//!   "starting" (reported as "spawn to model and watcher ready"). The reply's `mode` must be the
//!   mode asked for, or the cell is reported as an error (so an older build that ignores `mode`
//!   cannot pass its exact scan off as ranked search). It runs with `--index-cache` on a folder
//!   under `target/bench-search/` emptied first, so this is a first start.
//! - capvault-restart: the same binary started again right after, on the same vault and cache
//!   folder: the start users see every day after the first (the index is loaded from the cache
//!   and only changed notes are re-indexed). Its ratio column compares it with the first start.
//! - obsidian-mcp-rs 0.8.1 (crates.io, Rust, rmcp): `obsidian-mcp-rs <vault> --no-edit` (vault
//!   paths are positional; `--no-edit` drops the write tools). 7 tools with `--no-edit`
//!   (15 without), among them `search-vault {vault, query, path, caseSensitive, searchType,
//!   limit, offset, maxMatchesPerFile, regex, frontmatter}`, where `vault` is the vault folder's
//!   base name. No index: every search walks the vault and scores BM25 over a content cache
//!   keyed by (mtime, size), so the first search reads every note and later ones re-stat them.
//!   Ranked = plain query (bag of words: the phrase is not kept together). Exact = `regex: true`
//!   with the query regex-escaped (its closest: it has no literal mode). Regex = `regex: true`.
//! - @bitbonsai/mcpvault 0.16.0 (npm, TypeScript): `node .../dist/server.js <vault> --read-only`
//!   (the vault path is the first argument; we exec node on the package's `bin` script rather
//!   than `npx`, so the pid we watch is the server itself). Tool `search_notes {query, limit (max
//!   20), searchContent, searchFrontmatter, caseSensitive, pathPrefix, excludePaths,
//!   prettyPrint}`: reads every note on every call, keeps notes containing any query word (a
//!   substring test) and reranks them with BM25. Only one mode: ranked. Exact and regex: n/a.
//! - some-vault-some-mcp 0.2.1 (PyPI, Python, FastMCP + LanceDB): `python
//!   venv/bin/some-vault-some-mcp serve --transport stdio` with `VAULT_PATH=<vault>`,
//!   `EMBEDDING_PROVIDER=mock` (seeded random 768-dim vectors, so no model download) and
//!   `LANCE_DB_PATH` in a fresh folder per run (a cold index build every time; its index
//!   otherwise persists across starts). Tool `search {query, mode: "hybrid" | "semantic" |
//!   "exact", top_k, tags, folder, case_sensitive}`; `vault_index_status` says READY or
//!   INDEXING but hashes every note on each call, so readiness is polled with a `hybrid` search
//!   instead (it answers "the search index is being built" at once until ready). Ranked =
//!   `hybrid` (LanceDB full-text BM25 at 30% plus vector similarity at 70%; with mock vectors the
//!   vector half is noise but costs its time; there is no pure full-text mode). Exact = `exact`
//!   (reads notes in walk order and stops after `top_k` matching files). Regex: n/a. It answers
//!   in text, errors included (not `isError`); those texts are recognised as errors here.
//!
//! "Index ready" for a peer is the time from spawn until its first search call (a ranked search
//! for `review`, polled every 20 ms) returns successfully. Peak RSS is `VmHWM` of the server
//! process plus any processes it started, read from `/proc` just before the client disconnects.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/generator.rs"]
mod generator;
#[path = "support/timing.rs"]
mod timing;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolResult;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use timing::CallFailure;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_secs(name: &str, default: u64) -> Duration {
    Duration::from_secs(env_usize(name, default as usize) as u64)
}

/// Run settings, from the environment.
struct Config {
    runs: usize,
    index_timeout: Duration,
    peer_index_timeout: Duration,
    call_timeout: Duration,
    cell_budget: Duration,
    servers: Option<Vec<String>>,
}

impl Config {
    fn from_env() -> Self {
        Config {
            runs: env_usize("CAPVAULT_BENCH_RUNS", 20).max(1),
            index_timeout: env_secs("CAPVAULT_BENCH_INDEX_TIMEOUT", 120),
            peer_index_timeout: env_secs("CAPVAULT_BENCH_PEER_INDEX_TIMEOUT", 600),
            call_timeout: env_secs("CAPVAULT_BENCH_CALL_TIMEOUT", 120),
            cell_budget: env_secs("CAPVAULT_BENCH_CELL_BUDGET", 60),
            servers: std::env::var("CAPVAULT_BENCH_SERVERS")
                .ok()
                .map(|s| s.split(',').map(|x| x.trim().to_owned()).collect()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The query set
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Mode {
    Ranked,
    Exact,
    Regex,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Ranked, Mode::Exact, Mode::Regex];
    fn name(self) -> &'static str {
        match self {
            Mode::Ranked => "ranked",
            Mode::Exact => "exact",
            Mode::Regex => "regex",
        }
    }
}

/// One query: its label in the table and its text. The phrase is the one the generator plants
/// (" the quokka was here" in half the lines of 0.1% of notes).
struct Query {
    label: &'static str,
    text: &'static str,
    phrase: bool,
}

const QUERIES: &[Query] = &[
    Query {
        label: "common `the`",
        text: "the",
        phrase: false,
    },
    Query {
        label: "common `garden`",
        text: "garden",
        phrase: false,
    },
    Query {
        label: "rare `quokka`",
        text: "quokka",
        phrase: false,
    },
    Query {
        label: "phrase `quokka was here`",
        text: "quokka was here",
        phrase: true,
    },
    Query {
        label: "no hit `zzyzx`",
        text: "zzyzx",
        phrase: false,
    },
];

/// The query used to tell when a peer can search: a common word outside the timed set.
const PROBE: &str = "review";
const LIMIT: usize = 20;

// ---------------------------------------------------------------------------------------------
// The servers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Capvault,
    /// capvault started again on the same vault, with the index cache its first run saved.
    CapvaultRestart,
    ObsidianMcpRs,
    Mcpvault,
    SomeVault,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Capvault,
        Kind::CapvaultRestart,
        Kind::ObsidianMcpRs,
        Kind::Mcpvault,
        Kind::SomeVault,
    ];

    /// capvault itself, started cold or again.
    fn is_capvault(self) -> bool {
        matches!(self, Kind::Capvault | Kind::CapvaultRestart)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Capvault => "capvault",
            Kind::CapvaultRestart => "capvault-restart",
            Kind::ObsidianMcpRs => "obsidian-mcp-rs",
            Kind::Mcpvault => "mcpvault",
            Kind::SomeVault => "some-vault-some-mcp",
        }
    }

    /// The search tool and its arguments for `mode`, or `None` where the server has no such
    /// mode. `vault_name` is the vault folder's base name (obsidian-mcp-rs selects vaults by it).
    fn search(self, mode: Mode, q: &Query, vault_name: &str) -> Option<(&'static str, Value)> {
        let text = q.text;
        match (self, mode) {
            (Kind::Capvault | Kind::CapvaultRestart, _) => {
                // Ranked mode takes a quoted phrase as a phrase; exact and regex take it as is.
                let query = if q.phrase && mode == Mode::Ranked {
                    format!("\"{text}\"")
                } else {
                    text.to_owned()
                };
                Some((
                    "search_notes",
                    json!({"query": query, "mode": mode.name(), "limit": LIMIT}),
                ))
            }
            (Kind::ObsidianMcpRs, Mode::Ranked) => Some((
                "search-vault",
                json!({"vault": vault_name, "query": text, "limit": LIMIT}),
            )),
            (Kind::ObsidianMcpRs, Mode::Exact) => Some((
                "search-vault",
                json!({"vault": vault_name, "query": regex::escape(text), "regex": true,
                       "limit": LIMIT}),
            )),
            (Kind::ObsidianMcpRs, Mode::Regex) => Some((
                "search-vault",
                json!({"vault": vault_name, "query": text, "regex": true, "limit": LIMIT}),
            )),
            (Kind::Mcpvault, Mode::Ranked) => {
                Some(("search_notes", json!({"query": text, "limit": LIMIT})))
            }
            (Kind::Mcpvault, _) => None,
            (Kind::SomeVault, Mode::Ranked) => Some((
                "search",
                json!({"query": text, "mode": "hybrid", "top_k": LIMIT}),
            )),
            (Kind::SomeVault, Mode::Exact) => Some((
                "search",
                json!({"query": text, "mode": "exact", "top_k": LIMIT}),
            )),
            (Kind::SomeVault, Mode::Regex) => None,
        }
    }

    /// How the three modes map onto the server's tools, for the legend under the table.
    fn mapping(self) -> &'static str {
        match self {
            Kind::Capvault => {
                "search_notes with mode ranked / exact / regex (the phrase in quotes when ranked); \
                 a first start (empty index cache)"
            }
            Kind::CapvaultRestart => {
                "the same, started again with the index cache the first start saved \
                 (ratio = restart / first start)"
            }
            Kind::ObsidianMcpRs => {
                "ranked = search-vault (BM25, words not kept together); exact = search-vault \
                 regex:true on the escaped query (no literal mode); regex = search-vault regex:true"
            }
            Kind::Mcpvault => {
                "ranked = search_notes (any-word substring match, BM25 rerank); no exact or regex mode"
            }
            Kind::SomeVault => {
                "ranked = search mode hybrid (LanceDB full text 30% + mock vectors 70%); \
                 exact = search mode exact; no regex mode"
            }
        }
    }

    /// Errors a server reports in an ordinary answer. some-vault-some-mcp answers errors as
    /// text; capvault must answer in the mode asked for.
    fn check(self, mode: Mode, result: &CallToolResult) -> Result<(), String> {
        match self {
            Kind::Capvault | Kind::CapvaultRestart => {
                let got = result
                    .structured_content
                    .as_ref()
                    .and_then(|v| v.get("mode"))
                    .and_then(Value::as_str);
                match got {
                    Some(m) if m == mode.name() => Ok(()),
                    Some(m) => Err(format!("asked for mode {}, answered mode {m}", mode.name())),
                    None => Err("reply has no `mode`".to_owned()),
                }
            }
            Kind::SomeVault => {
                let text = timing::result_text(result);
                let bad = [
                    "Tool 'search' is unavailable",
                    "Search failed",
                    "Embedding provider error",
                    "Unknown mode",
                ];
                if bad.iter().any(|b| text.starts_with(b)) {
                    Err(first_line(&text))
                } else {
                    Ok(())
                }
            }
            Kind::ObsidianMcpRs | Kind::Mcpvault => Ok(()),
        }
    }

    /// Results returned on the page, and the total when the server says it (best effort, to
    /// show what each figure is the time of).
    fn hits(self, result: &CallToolResult) -> String {
        let sc = result.structured_content.as_ref();
        let text = timing::result_text(result);
        let page_total = |list: &str| {
            let page = sc
                .and_then(|v| v.get(list))
                .and_then(Value::as_array)?
                .len();
            let total = sc.and_then(|v| v.get("total")).and_then(Value::as_u64);
            Some(match total {
                Some(t) => format!("{page} of {t}"),
                None => page.to_string(),
            })
        };
        let shown = match self {
            Kind::Capvault | Kind::CapvaultRestart => page_total("hits").map(|mut h| {
                if let Some(by) = sc.and_then(|v| v.get("served_by")).and_then(Value::as_str)
                    && by != "index"
                {
                    let _ = write!(h, " (served by {by})");
                }
                if sc.and_then(|v| v.get("partial")) == Some(&Value::Bool(true)) {
                    h.push_str(" (partial: scan budget hit)");
                }
                h
            }),
            Kind::ObsidianMcpRs => page_total("results").or_else(|| {
                let v: Value = serde_json::from_str(&text).ok()?;
                Some(format!(
                    "{} of {}",
                    v.get("results")?.as_array()?.len(),
                    v.get("total")?
                ))
            }),
            Kind::Mcpvault => serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.as_array().map(|a| a.len().to_string())),
            Kind::SomeVault => {
                if text.starts_with("No results found") {
                    Some("0".to_owned())
                } else {
                    text.strip_prefix("Found ")
                        .and_then(|t| t.split_whitespace().next())
                        .map(str::to_owned)
                }
            }
        };
        shown.unwrap_or_else(|| "?".to_owned())
    }
}

/// How to start one server.
struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    cwd: Option<PathBuf>,
    /// Explained in the output: how the pid we watch is the server itself.
    note: String,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `scripts/install-peers.sh` said about a peer, if it left a status file.
fn install_status(peer: &str) -> Option<String> {
    std::fs::read_to_string(manifest_dir().join(format!("target/peers/{peer}.status")))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The launch of `kind` on `vault`, or why it cannot be launched (not installed).
fn launch(kind: Kind, vault: &Path, scratch: &Path) -> Result<Launch, String> {
    let peers = manifest_dir().join("target/peers");
    let missing = |what: &Path, peer: &str| {
        let prefix = format!("{peer}: ");
        Err(install_status(peer)
            .filter(|s| s.contains("install failed"))
            .map(|s| s.strip_prefix(&prefix).unwrap_or(&s).to_owned())
            .unwrap_or_else(|| {
                format!(
                    "not installed: {} not found (run scripts/install-peers.sh)",
                    what.display()
                )
            }))
    };
    match kind {
        Kind::Capvault | Kind::CapvaultRestart => {
            // The first start gets an empty cache folder of its own; the restart reuses it.
            let cache = scratch.with_file_name("capvault-index-cache");
            if kind == Kind::Capvault {
                let _ = std::fs::remove_dir_all(&cache);
            }
            Ok(Launch {
                program: PathBuf::from(env!("CARGO_BIN_EXE_capvault")),
                args: vec![
                    "serve".into(),
                    vault.into(),
                    "--index-cache".into(),
                    cache.into(),
                ],
                env: vec![("CAPVAULT_LOG", "capvault=warn".into())],
                cwd: None,
                note: "the binary itself".to_owned(),
            })
        }
        Kind::ObsidianMcpRs => {
            let bin = peers.join("cargo/bin/obsidian-mcp-rs");
            if !bin.is_file() {
                return missing(&bin, "obsidian-mcp-rs");
            }
            Ok(Launch {
                program: bin,
                args: vec![vault.into(), "--no-edit".into()],
                env: vec![],
                cwd: None,
                note: "the binary itself".to_owned(),
            })
        }
        Kind::Mcpvault => {
            let script = peers.join("npm/node_modules/@bitbonsai/mcpvault/dist/server.js");
            if !script.is_file() {
                return missing(&script, "mcpvault");
            }
            Ok(Launch {
                program: PathBuf::from("node"),
                args: vec![script.into(), vault.into(), "--read-only".into()],
                env: vec![],
                cwd: None,
                note: "node run directly on the package's bin script (no npx wrapper)".to_owned(),
            })
        }
        Kind::SomeVault => {
            let venv = peers.join("venv/bin");
            let script = venv.join("some-vault-some-mcp");
            if !script.is_file() {
                return missing(&script, "some-vault-some-mcp");
            }
            let db = scratch.join("lancedb");
            let _ = std::fs::remove_dir_all(&db);
            std::fs::create_dir_all(&db).map_err(|e| format!("{}: {e}", db.display()))?;
            Ok(Launch {
                program: venv.join("python"),
                args: vec![
                    script.into(),
                    "serve".into(),
                    "--transport".into(),
                    "stdio".into(),
                ],
                env: vec![
                    ("VAULT_PATH", vault.into()),
                    ("EMBEDDING_PROVIDER", "mock".into()),
                    ("LANCE_DB_PATH", db.join("vault.lance").into()),
                    ("MCP_TRANSPORT", "stdio".into()),
                ],
                cwd: Some(db),
                note: "the venv's python run directly on the console script (no uvx wrapper)"
                    .to_owned(),
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------------------------------

/// One figure, or why there is none.
#[derive(Clone)]
enum Cell {
    Value(f64),
    NotApplicable,
    Failed(String),
}

/// The figures of one server on one vault.
struct Measured {
    /// "ok", or what went wrong, for the status lines.
    status: Vec<String>,
    first_answer_ms: Cell,
    index_ready_ms: Cell,
    /// capvault only: spawn until the model is built and the watcher is in place as well (the
    /// link resolution, the watcher's setup walk and its catch-up reconcile run after the index
    /// is ready and share the cores with the first queries).
    settled_ms: Cell,
    rss_bytes: Cell,
    /// Resident memory after the queries (VmRSS), summed like the peak.
    rss_end_bytes: Cell,
    /// (mode, query index) -> (p50, p95, runs, hits).
    queries: BTreeMap<(Mode, usize), (Cell, Cell, usize, String)>,
}

impl Measured {
    fn failed(why: String) -> Self {
        Measured {
            status: vec![why.clone()],
            first_answer_ms: Cell::Failed(why.clone()),
            index_ready_ms: Cell::Failed(why.clone()),
            settled_ms: Cell::Failed(why.clone()),
            rss_bytes: Cell::Failed(why.clone()),
            rss_end_bytes: Cell::Failed(why),
            queries: BTreeMap::new(),
        }
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(160).collect()
}

/// The last lines of a server's stderr, to say why it stopped.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {})", tail.chars().take(300).collect::<String>())
    }
}

/// Peak RSS (VmHWM) of `pid` and every process below it, in bytes, with the process count.
fn peak_rss(pid: u32) -> Option<(u64, usize)> {
    memory(pid, "VmHWM:")
}

/// A `/proc/<pid>/status` memory figure (`VmHWM:`, `VmRSS:`) of `pid` and its descendants,
/// summed, in bytes, with the number of processes.
fn memory(pid: u32, field: &str) -> Option<(u64, usize)> {
    fn children(pid: u32) -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return vec![];
        };
        let mut out = vec![];
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
        out
    }
    let hwm_kib = |pid: u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.trim_start_matches(field)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    let mut total = hwm_kib(pid)?;
    let mut count = 1;
    let mut todo = children(pid);
    while let Some(p) = todo.pop() {
        if let Some(k) = hwm_kib(p) {
            total += k;
            count += 1;
        }
        todo.extend(children(p));
    }
    Some((total * 1024, count))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Spawns `kind` on the vault and measures it.
async fn measure(
    kind: Kind,
    vault: &Vault,
    cfg: &Config,
    out_dir: &Path,
) -> (Measured, Option<String>) {
    let scratch = out_dir.join(format!("{}-scratch", kind.name()));
    let launch = match launch(kind, &vault.root, &scratch) {
        Ok(l) => l,
        Err(why) => return (Measured::failed(why), None),
    };
    let stderr_path = out_dir.join(format!("{}.stderr.log", kind.name()));
    let stderr = match std::fs::File::create(&stderr_path) {
        Ok(f) => f,
        Err(e) => {
            return (
                Measured::failed(format!("cannot create its log: {e}")),
                None,
            );
        }
    };
    let mut cmd = tokio::process::Command::new(&launch.program);
    cmd.args(&launch.args);
    for (k, v) in &launch.env {
        cmd.env(k, v);
    }
    if let Some(dir) = &launch.cwd {
        cmd.current_dir(dir);
    }

    let spawned = Instant::now();
    let (transport, _) = match TokioChildProcess::builder(cmd).stderr(stderr).spawn() {
        Ok(t) => t,
        Err(e) => {
            return (
                Measured::failed(format!(
                    "crashed: cannot start {}: {e}",
                    launch.program.display()
                )),
                None,
            );
        }
    };
    let pid = transport.id();
    let client = match tokio::time::timeout(cfg.call_timeout, ().serve(transport)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return (
                Measured::failed(format!(
                    "crashed: initialize failed: {e}{}",
                    stderr_tail(&stderr_path)
                )),
                None,
            );
        }
        Err(_) => {
            return (
                Measured::failed(format!(
                    "crashed: no initialize answer within {:?}",
                    cfg.call_timeout
                )),
                None,
            );
        }
    };
    let tools = match client.list_all_tools().await {
        Ok(t) => t,
        Err(e) => {
            return (
                Measured::failed(format!(
                    "crashed: tools/list failed: {e}{}",
                    stderr_tail(&stderr_path)
                )),
                None,
            );
        }
    };
    let first_answer = spawned.elapsed();
    let server_version = client
        .peer_info()
        .and_then(|i| i.server_info.clone())
        .map(|s| format!("{} {}", s.name, s.version))
        .unwrap_or_else(|| "?".to_owned());

    // What the server offers, for the record: tool names and the search tool's arguments.
    let mut about = format!(
        "{}: {} (pid {} is {}); {} tools: ",
        kind.name(),
        server_version,
        pid.map_or("?".to_owned(), |p| p.to_string()),
        launch.note,
        tools.len()
    );
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    about.push_str(&names.join(", "));
    let search_tool = kind.search(Mode::Ranked, &QUERIES[0], "").map(|(t, _)| t);
    if let Some(tool) = tools.iter().find(|t| Some(t.name.as_ref()) == search_tool) {
        let props: Vec<String> = tool
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let _ = write!(about, "; {}({})", tool.name, props.join(", "));
    }
    let _ = std::fs::write(
        out_dir.join(format!("{}.tools.json", kind.name())),
        serde_json::to_string_pretty(&tools).unwrap_or_default(),
    );

    let mut m = Measured {
        status: vec![],
        first_answer_ms: Cell::Value(ms(first_answer)),
        index_ready_ms: Cell::NotApplicable,
        settled_ms: Cell::NotApplicable,
        rss_bytes: Cell::NotApplicable,
        rss_end_bytes: Cell::NotApplicable,
        queries: BTreeMap::new(),
    };
    let mut lost: Option<String> = None;

    // Index ready.
    let poll = Duration::from_millis(20);
    if kind.is_capvault() {
        let deadline = spawned + cfg.index_timeout;
        m.index_ready_ms = loop {
            match timing::try_timed_call(&client, "vault_info", &json!({}), cfg.call_timeout).await
            {
                Ok((_, r)) => {
                    let index = r.structured_content.as_ref().and_then(|v| v.get("index"));
                    let Some(index) = index else {
                        break Cell::Failed("vault_info reports no `index`".to_owned());
                    };
                    match index.get("state").and_then(Value::as_str) {
                        Some("ready") => {
                            let docs = index.get("documents").cloned().unwrap_or(Value::Null);
                            let cache = index.get("cache").cloned().unwrap_or(Value::Null);
                            m.status.push(format!(
                                "index ready with {docs} documents (index cache: {cache})"
                            ));
                            break Cell::Value(ms(spawned.elapsed()));
                        }
                        // "failed", or no state at all, ends the wait; any other state
                        // ("not started", "building") is on its way.
                        Some("failed") | None => {
                            break Cell::Failed(format!("index not ready: {index}"));
                        }
                        Some(_) => {}
                    }
                }
                Err(e @ CallFailure::Transport(_)) => {
                    lost = Some(format!("crashed: {e}{}", stderr_tail(&stderr_path)));
                    break Cell::Failed(lost.clone().unwrap_or_default());
                }
                Err(e) => break Cell::Failed(format!("vault_info: {e}")),
            }
            if Instant::now() > deadline {
                break Cell::Failed(format!(
                    "index not ready after {:.0} s",
                    cfg.index_timeout.as_secs_f64()
                ));
            }
            tokio::time::sleep(poll).await;
        };
    } else {
        let probe = Query {
            label: "probe",
            text: PROBE,
            phrase: false,
        };
        let (tool, args) = kind
            .search(Mode::Ranked, &probe, &vault.name)
            .expect("every server has a ranked search");
        let deadline = spawned + cfg.peer_index_timeout;
        m.index_ready_ms = loop {
            match timing::try_timed_call(&client, tool, &args, cfg.call_timeout).await {
                Ok((_, r)) => match kind.check(Mode::Ranked, &r) {
                    Ok(()) => break Cell::Value(ms(spawned.elapsed())),
                    Err(e) if e.contains("being built") || e.contains("unavailable") => {}
                    Err(e) => break Cell::Failed(e),
                },
                Err(e @ CallFailure::Transport(_)) => {
                    lost = Some(format!("crashed: {e}{}", stderr_tail(&stderr_path)));
                    break Cell::Failed(lost.clone().unwrap_or_default());
                }
                Err(e) => break Cell::Failed(format!("{tool}: {e}")),
            }
            if Instant::now() > deadline {
                break Cell::Failed(format!(
                    "no successful search after {:.0} s",
                    cfg.peer_index_timeout.as_secs_f64()
                ));
            }
            tokio::time::sleep(poll).await;
        };
    }
    if let Cell::Failed(why) = &m.index_ready_ms {
        m.status.push(format!("index ready: {why}"));
    }
    if kind.is_capvault() && lost.is_none() && matches!(m.index_ready_ms, Cell::Value(_)) {
        // Queries are timed once the server has settled: model built (`notes` counted) and the
        // watcher in place (or off, or unavailable).
        let deadline = spawned + cfg.index_timeout;
        m.settled_ms = loop {
            match timing::try_timed_call(&client, "vault_info", &json!({}), cfg.call_timeout).await
            {
                Ok((_, r)) => {
                    let info = r.structured_content.unwrap_or(Value::Null);
                    let watcher = info
                        .pointer("/index/watcher")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if !info["notes"].is_null()
                        && !matches!(watcher, "" | "not started" | "starting")
                    {
                        break Cell::Value(ms(spawned.elapsed()));
                    }
                }
                Err(e @ CallFailure::Transport(_)) => {
                    lost = Some(format!("crashed: {e}{}", stderr_tail(&stderr_path)));
                    break Cell::Failed(lost.clone().unwrap_or_default());
                }
                Err(e) => break Cell::Failed(format!("vault_info: {e}")),
            }
            if Instant::now() > deadline {
                break Cell::Failed("model or watcher not ready in time".to_owned());
            }
            tokio::time::sleep(poll).await;
        };
    }

    // The queries.
    for mode in Mode::ALL {
        for (qi, q) in QUERIES.iter().enumerate() {
            let Some((tool, args)) = kind.search(mode, q, &vault.name) else {
                m.queries.insert(
                    (mode, qi),
                    (Cell::NotApplicable, Cell::NotApplicable, 0, String::new()),
                );
                continue;
            };
            if let Some(why) = &lost {
                let c = Cell::Failed(why.clone());
                m.queries
                    .insert((mode, qi), (c.clone(), c, 0, String::new()));
                continue;
            }
            let fail = |why: String| {
                (
                    Cell::Failed(why.clone()),
                    Cell::Failed(why),
                    0,
                    String::new(),
                )
            };
            // Warm-up, checked and saved.
            let warm = timing::try_timed_call(&client, tool, &args, cfg.call_timeout).await;
            let hits = match warm {
                Ok((_, r)) => {
                    let file = out_dir.join(format!(
                        "{}-{}-{}.json",
                        kind.name(),
                        mode.name(),
                        q.text.replace(' ', "_")
                    ));
                    let _ = std::fs::write(
                        file,
                        serde_json::to_string_pretty(
                            &json!({"request": {"tool": tool, "arguments": args}, "result": r}),
                        )
                        .unwrap_or_default(),
                    );
                    if let Err(e) = kind.check(mode, &r) {
                        m.queries.insert((mode, qi), fail(e));
                        continue;
                    }
                    kind.hits(&r)
                }
                Err(e) => {
                    if let CallFailure::Transport(_) = e {
                        lost = Some(format!("crashed: {e}{}", stderr_tail(&stderr_path)));
                    }
                    m.queries.insert((mode, qi), fail(format!("{e}")));
                    continue;
                }
            };
            let mut times = Vec::with_capacity(cfg.runs);
            let cell_started = Instant::now();
            let mut error = None;
            for _ in 0..cfg.runs {
                match timing::try_timed_call(&client, tool, &args, cfg.call_timeout).await {
                    Ok((dt, _)) => times.push(dt),
                    Err(e) => {
                        if let CallFailure::Transport(_) = e {
                            lost = Some(format!("crashed: {e}{}", stderr_tail(&stderr_path)));
                        }
                        error = Some(e.to_string());
                        break;
                    }
                }
                if times.len() >= 3 && cell_started.elapsed() > cfg.cell_budget {
                    break;
                }
            }
            let entry = match (error, times.is_empty()) {
                (Some(e), _) => fail(e),
                (None, true) => fail("no timed run".to_owned()),
                (None, false) => {
                    let n = times.len();
                    let (p50, p95) = timing::p50_p95(times);
                    (Cell::Value(p50), Cell::Value(p95), n, hits)
                }
            };
            m.queries.insert((mode, qi), entry);
        }
    }

    // Peak RSS, read while the server still runs.
    m.rss_bytes = match pid.and_then(peak_rss) {
        Some((bytes, procs)) => {
            if procs > 1 {
                m.status
                    .push(format!("peak RSS summed over {procs} processes"));
            }
            Cell::Value(bytes as f64)
        }
        None => Cell::Failed(
            lost.clone()
                .unwrap_or_else(|| "process gone before VmHWM could be read".to_owned()),
        ),
    };
    m.rss_end_bytes = match pid.and_then(|p| memory(p, "VmRSS:")) {
        Some((bytes, _)) => Cell::Value(bytes as f64),
        None => Cell::Failed(
            lost.clone()
                .unwrap_or_else(|| "process gone before VmRSS could be read".to_owned()),
        ),
    };
    if let Some(why) = &lost {
        m.status.push(why.clone());
    }
    let _ = tokio::time::timeout(Duration::from_secs(20), client.cancel()).await;
    if m.status.is_empty() {
        m.status.push("ok".to_owned());
    }
    (m, Some(about))
}

// ---------------------------------------------------------------------------------------------
// Vaults and the report
// ---------------------------------------------------------------------------------------------

struct Vault {
    root: PathBuf,
    /// Base name of the folder.
    name: String,
    label: String,
    notes: usize,
    bytes: u64,
}

/// Counts the notes and Markdown bytes outside hidden folders, reading every note once so that
/// every server starts with the same warm page cache.
fn survey(root: &Path) -> (usize, u64) {
    let mut notes = 0;
    let mut bytes = 0;
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                todo.push(e.path());
            } else if ft.is_file()
                && name.to_string_lossy().ends_with(".md")
                && let Ok(data) = std::fs::read(e.path())
            {
                notes += 1;
                bytes += data.len() as u64;
            }
        }
    }
    (notes, bytes)
}

fn vaults() -> Vec<Vault> {
    let roots: Vec<(PathBuf, String)> = match std::env::var("CAPVAULT_BENCH_VAULT") {
        Ok(p) if !p.is_empty() => vec![(PathBuf::from(&p), p)],
        _ => std::env::var("CAPVAULT_BENCH_SIZES")
            .unwrap_or_else(|_| "1000,10000".to_owned())
            .split(',')
            .filter_map(|n| n.trim().parse::<usize>().ok())
            .map(|n| {
                let dir = manifest_dir().join("target/bench-vaults");
                let t = Instant::now();
                let g = generator::generate(&dir, n, 42);
                eprintln!("vault of {n} notes ready in {:.1?}", t.elapsed());
                (g.root, format!("synthetic, {n} notes, seed 42"))
            })
            .collect(),
    };
    roots
        .into_iter()
        .map(|(root, label)| {
            let root = std::fs::canonicalize(&root)
                .unwrap_or_else(|e| panic!("vault {}: {e}", root.display()));
            let (notes, bytes) = survey(&root);
            let name = root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Vault {
                root,
                name,
                label,
                notes,
                bytes,
            }
        })
        .collect()
}

/// The one-minute load average, as the kernel prints it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Collects error texts into numbered notes under the table.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn mark(&mut self, why: &str) -> String {
        let i = match self.0.iter().position(|w| w == why) {
            Some(i) => i,
            None => {
                self.0.push(why.to_owned());
                self.0.len() - 1
            }
        };
        format!("err[{}]", i + 1)
    }
}

fn show(cell: &Cell, scale: f64, notes: &mut Notes) -> String {
    match cell {
        Cell::Value(v) => fmt_num(v * scale),
        Cell::NotApplicable => "n/a".to_owned(),
        Cell::Failed(why) => notes.mark(why),
    }
}

fn ratio(peer: &Cell, base: &Cell) -> String {
    match (peer, base) {
        (Cell::Value(p), Cell::Value(b)) if *b > 0.0 => format!("{:.1}x", p / b),
        _ => String::new(),
    }
}

fn report(vault: &Vault, results: &[(Kind, Measured)], runs: usize) {
    let mut notes = Notes::default();
    let base = results
        .iter()
        .find(|(k, _)| *k == Kind::Capvault)
        .map(|(_, m)| m);
    let mut header = "| measurement |".to_owned();
    let mut rule = "|---|".to_owned();
    for (k, _) in results {
        if *k == Kind::Capvault {
            let _ = write!(header, " {} |", k.name());
            rule.push_str("---:|");
        } else {
            let _ = write!(header, " {} | ratio |", k.name());
            rule.push_str("---:|---:|");
        }
    }
    let mut rows: Vec<String> = vec![header, rule];
    let mut row = |label: String, pick: &dyn Fn(&Measured) -> Cell, scale: f64| {
        let mut line = format!("| {label} |");
        let base_cell = base.map(pick);
        for (k, m) in results {
            let c = pick(m);
            let _ = write!(line, " {} |", show(&c, scale, &mut notes));
            if *k != Kind::Capvault {
                let r = base_cell.as_ref().map(|b| ratio(&c, b)).unwrap_or_default();
                let _ = write!(line, " {r} |");
            }
        }
        rows.push(line);
    };
    row(
        "spawn to first answer (initialize + tools/list), ms".to_owned(),
        &|m| m.first_answer_ms.clone(),
        1.0,
    );
    row(
        "spawn to index ready, ms".to_owned(),
        &|m| m.index_ready_ms.clone(),
        1.0,
    );
    row(
        "spawn to model and watcher ready (capvault), ms".to_owned(),
        &|m| m.settled_ms.clone(),
        1.0,
    );
    row("peak RSS, MB".to_owned(), &|m| m.rss_bytes.clone(), 1e-6);
    let md = vault.bytes.max(1) as f64;
    row(
        "peak RSS / Markdown bytes".to_owned(),
        &|m| m.rss_bytes.clone(),
        1.0 / md,
    );
    row(
        "resident after the queries, MB".to_owned(),
        &|m| m.rss_end_bytes.clone(),
        1e-6,
    );
    for mode in Mode::ALL {
        for (qi, q) in QUERIES.iter().enumerate() {
            for (pct, which) in [("p50", 0), ("p95", 1)] {
                row(
                    format!("{} {} {pct}, ms", mode.name(), q.label),
                    &|m| {
                        m.queries.get(&(mode, qi)).map_or(Cell::NotApplicable, |e| {
                            if which == 0 { e.0.clone() } else { e.1.clone() }
                        })
                    },
                    1.0,
                );
            }
        }
    }
    for r in &rows {
        println!("{r}");
    }
    println!();
    println!("Modes:");
    for (k, _) in results {
        println!("  {}: {}", k.name(), k.mapping());
    }
    // Hits and runs, to show what each figure timed.
    println!();
    println!(
        "Results returned by the warm-up call (page of at most {LIMIT}, \"of N\" where the server gives a total), and timed runs when fewer than {runs}:"
    );
    for mode in Mode::ALL {
        for (qi, q) in QUERIES.iter().enumerate() {
            let mut line = format!("  {} {}:", mode.name(), q.label);
            for (k, m) in results {
                if let Some((Cell::Value(_), _, n, hits)) = m.queries.get(&(mode, qi)) {
                    let _ = write!(line, " {} {hits}", k.name());
                    if *n < runs {
                        let _ = write!(line, " ({n} runs)");
                    }
                    line.push(';');
                }
            }
            println!("{line}");
        }
    }
    if !notes.0.is_empty() {
        println!();
        for (i, n) in notes.0.iter().enumerate() {
            println!("err[{}]: {n}", i + 1);
        }
    }
}

fn main() {
    let cfg = Config::from_env();
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| {
            cfg.servers
                .as_ref()
                .is_none_or(|s| s.iter().any(|n| n == k.name()))
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for vault in vaults() {
        let out_dir = manifest_dir().join("target/bench-search").join(&vault.name);
        std::fs::create_dir_all(&out_dir).unwrap();
        println!(
            "\n## {}: {} notes, {:.1} MB of Markdown ({})",
            vault.name,
            vault.notes,
            vault.bytes as f64 / 1e6,
            vault.label
        );
        println!(
            "{} timed runs per query after 1 warm-up, limit {LIMIT}; ratio = peer / capvault; \
             warm-up answers and server logs in {}",
            cfg.runs,
            out_dir.display()
        );
        let mut results = vec![];
        for &kind in &kinds {
            eprintln!("{}: measuring on {}", kind.name(), vault.name);
            if kind == Kind::CapvaultRestart {
                // Let the first start's process (killed when its client left) release the
                // cache folder's lock.
                std::thread::sleep(Duration::from_secs(2));
            }
            let t = Instant::now();
            let load_before = load_average();
            let (mut m, about) = rt.block_on(measure(kind, &vault, &cfg, &out_dir));
            // The machine is shared: say how busy it was, so a noisy figure can be recognised.
            m.status.push(format!(
                "{:.0} s, load average {load_before} before, {} after",
                t.elapsed().as_secs_f64(),
                load_average()
            ));
            if let Some(a) = about {
                println!("- {a}");
            }
            println!("- {}: {}", kind.name(), m.status.join("; "));
            results.push((kind, m));
        }
        println!();
        report(&vault, &results, cfg.runs);
    }
}
