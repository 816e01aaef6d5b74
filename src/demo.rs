//! `capvault demo`: serve the embedded example vault to a real rmcp client in-process and print
//! every JSON-RPC message that crosses the pipe, as a captured wire session.
//!
//! The capture is real: [`Tap`] sits between the client and its end of the pipe and prints each
//! newline-delimited message it sees written (client → server) or read (server → client).

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, PaginatedRequestParams,
    ReadResourceRequestParams,
};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::app::connect_in_process;
use crate::server::CapvaultServer;
use crate::vault::example;

/// Longest string value shown in the full wire before it is elided (the wire carried it whole).
const SHOW_CHARS: usize = 600;
/// In the first look: longest string shown, items shown of an array, and lines shown of one
/// reply.
const BRIEF_CHARS: usize = 90;
const BRIEF_ITEMS: usize = 2;
const BRIEF_LINES: usize = 14;

/// How much of the session the demo prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// A first look (at most 150 lines): the handshake, the tools one line each, a few
    /// searches, a read and refused attacks, each message summarised.
    Brief,
    /// Every step, and every JSON-RPC message whole (long strings shortened).
    Full,
}

/// Runs the demo, writing the session to `out`.
pub async fn run(out: Box<dyn Write + Send>, show: Show) -> anyhow::Result<()> {
    let ex = example::unpack()?;
    let log = Arc::new(WireLog {
        out: Mutex::new(out),
        show,
        sent: Mutex::new(Vec::new()),
        received: Mutex::new(Vec::new()),
    });
    log.say(&format!(
        "capvault {} demo: serving the example vault \"{}\" ({} files) to an in-process rmcp client.\n{}\n",
        env!("CARGO_PKG_VERSION"),
        ex.vault.name(),
        example::files().len(),
        match show {
            Show::Full => "Every JSON-RPC message on the wire follows (long strings shortened for display).",
            Show::Brief => "A first look: each message on the wire, summarised (`capvault demo --full` prints them whole).",
        }
    ));
    if show == Show::Brief {
        log.say("\n### The handshake\n");
    }
    let engine = crate::app::one_shot_engine(ex.vault);
    // Build the model and search index in the background, as `capvault serve` does.
    engine.start();
    let server = CapvaultServer::with_all_tools(Arc::clone(&engine));
    let tap_log = Arc::clone(&log);
    let client = connect_in_process(server, move |s| Tap {
        inner: s,
        log: tap_log,
    })
    .await?;

    // The example vault indexes in milliseconds; wait so the searches below use the index.
    let waiting = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || waiting.wait_ready(std::time::Duration::from_secs(30)))
        .await?;
    let steps: Vec<(&str, Step)> = vec![
        ("List the tools", Step::ListTools),
        (
            "Ranked search: words, best note first, with its best line and heading",
            Step::Tool(
                "search_notes",
                json!({"query": "garden compost", "limit": 3}),
            ),
        ),
        (
            "Ranked search for a phrase, only in notes tagged #garden (or #garden/...)",
            Step::Tool(
                "search_notes",
                json!({"query": "\"hard frost\"", "tag": "garden", "limit": 3}),
            ),
        ),
        (
            "Exact search: every matching line",
            Step::Tool(
                "search_notes",
                json!({"query": "tomato", "mode": "exact", "limit": 3}),
            ),
        ),
        (
            "Regex search",
            Step::Tool(
                "search_notes",
                json!({"query": "^- \\[ \\] ", "mode": "regex", "limit": 3}),
            ),
        ),
        (
            "Vault facts and the index state",
            Step::Tool("vault_info", json!({})),
        ),
        (
            "List the newest notes",
            Step::Tool("list_notes", json!({"limit": 3})),
        ),
        (
            "The folder tree, with note and file counts",
            Step::Tool("list_folders", json!({"depth": 1})),
        ),
        (
            "Read a note",
            Step::Tool("read_note", json!({"path": "Projects/Garden Plan.md"})),
        ),
        (
            "Read a note by its bare name, as a wikilink resolves it",
            Step::Tool("read_note", json!({"path": "compost", "format": "outline"})),
        ),
        (
            "Who links to a note (backlinks)",
            Step::Tool(
                "get_links",
                json!({"path": "Resources/Compost.md", "direction": "in", "limit": 3}),
            ),
        ),
        (
            "Find broken links",
            Step::Tool("find_broken_links", json!({})),
        ),
        (
            "Tags, nested tags rolled up",
            Step::Tool("list_tags", json!({"limit": 5})),
        ),
        (
            "A daily note, located from .obsidian/daily-notes.json",
            Step::Tool("get_periodic_note", json!({"date": "2026-11-30"})),
        ),
        (
            "The prompts (built in; a vault's own with --prompts-folder)",
            Step::ListPrompts,
        ),
        (
            "A prompt filled in: a note and the lines that link to it",
            Step::GetPrompt("summarize-note", json!({"note": "Compost"})),
        ),
        ("Browse the note resources", Step::ListResources),
        (
            "Read a note as a resource",
            Step::ReadResource("capvault:///Daily/2026-11-30.md"),
        ),
        (
            "Try to escape the vault (refused)",
            Step::Tool("read_note", json!({"path": "../../etc/passwd"})),
        ),
        (
            "Try to read Obsidian's settings (refused: hidden)",
            Step::Tool("read_note", json!({"path": ".obsidian/app.json"})),
        ),
        (
            "Misspell a note's name (not_found, with suggestions)",
            Step::Tool("read_note", json!({"path": "Projects/Garden Plna.md"})),
        ),
    ];
    /// The steps of the first look (titles in `steps`).
    const BRIEF: &[&str] = &[
        "List the tools",
        "Ranked search: words, best note first, with its best line and heading",
        "Exact search: every matching line",
        "Read a note",
        "Read a note by its bare name, as a wikilink resolves it",
        "Who links to a note (backlinks)",
        "The prompts (built in; a vault's own with --prompts-folder)",
        "Try to escape the vault (refused)",
        "Try to read Obsidian's settings (refused: hidden)",
    ];
    let steps = steps
        .into_iter()
        .filter(|(title, _)| show == Show::Full || BRIEF.contains(title));
    for (title, step) in steps {
        log.say(&format!("\n### {title}\n"));
        match step {
            Step::ListTools => {
                client.list_tools(None).await?;
            }
            Step::Tool(name, args) => {
                let args = match args {
                    Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                client
                    .call_tool(CallToolRequestParams::new(name).with_arguments(args))
                    .await?;
            }
            Step::ListResources => {
                client
                    .list_resources(Some(PaginatedRequestParams::default()))
                    .await?;
            }
            Step::ListPrompts => {
                client
                    .list_prompts(Some(PaginatedRequestParams::default()))
                    .await?;
            }
            Step::GetPrompt(name, args) => {
                let mut params = GetPromptRequestParams::new(name);
                if let Value::Object(map) = args {
                    params = params.with_arguments(map);
                }
                client.get_prompt(params).await?;
            }
            Step::ReadResource(uri) => {
                client
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await?;
            }
        }
    }
    client.cancel().await?;
    // The example vault's folder is removed when `ex` drops: the background work (the watcher,
    // the reconcile) stops first, or it reports the vanished folders as unreadable.
    tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    log.say(match show {
        Show::Full => {
            "\nDone. Run `capvault serve <VAULT>` to serve your own vault to an MCP client.\n"
        }
        Show::Brief => {
            "\nDone. `capvault demo --full` shows every message whole and more tools; \
             `capvault call <VAULT> --list` lists the tools to try on your own vault.\n"
        }
    });
    Ok(())
}

enum Step {
    ListTools,
    Tool(&'static str, Value),
    ListResources,
    ReadResource(&'static str),
    ListPrompts,
    GetPrompt(&'static str, Value),
}

/// Collects bytes in each direction and prints every complete line as pretty JSON.
struct WireLog {
    out: Mutex<Box<dyn Write + Send>>,
    show: Show,
    sent: Mutex<Vec<u8>>,
    received: Mutex<Vec<u8>>,
}

impl WireLog {
    fn say(&self, text: &str) {
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }

    fn feed(&self, sent: bool, bytes: &[u8]) {
        let buffer = if sent { &self.sent } else { &self.received };
        let Ok(mut buffer) = buffer.lock() else {
            return;
        };
        buffer.extend_from_slice(bytes);
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let arrow = if sent {
                "client → server"
            } else {
                "server → client"
            };
            let message = serde_json::from_slice::<Value>(&line);
            let shown = match (self.show, message) {
                (Show::Brief, Ok(v)) => brief(sent, &v),
                (Show::Full, Ok(v)) => format!(
                    "{arrow}\n{}\n",
                    serde_json::to_string_pretty(&shorten(v, SHOW_CHARS, usize::MAX))
                        .unwrap_or_default()
                ),
                (_, Err(_)) => format!("{arrow}\n{}\n", String::from_utf8_lossy(&line).trim_end()),
            };
            self.say(&shown);
        }
    }
}

/// Shortens strings longer than `chars` and arrays longer than `items` for display.
fn shorten(v: Value, chars: usize, items: usize) -> Value {
    match v {
        Value::String(s) if s.chars().count() > chars => {
            let cut: String = s.chars().take(chars).collect();
            Value::String(format!(
                "{cut}… [{} more characters]",
                s.chars().count() - chars
            ))
        }
        Value::Array(list) => {
            let n = list.len();
            let mut kept: Vec<Value> = list
                .into_iter()
                .take(items)
                .map(|v| shorten(v, chars, items))
                .collect();
            if n > items {
                kept.push(Value::String(format!("… [{} more]", n - items)));
            }
            Value::Array(kept)
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, shorten(v, chars, items)))
                .collect(),
        ),
        other => other,
    }
}

/// One message of the first look: a request on one line; a reply summarised (the server's
/// name and version, one line per tool, a tool's structured result cut to a few lines, an
/// error's text).
fn brief(sent: bool, v: &Value) -> String {
    let one_line = |v: &Value| {
        let text = serde_json::to_string(&shorten(v.clone(), BRIEF_CHARS, BRIEF_ITEMS))
            .unwrap_or_default();
        clip(&text, 2 * BRIEF_CHARS)
    };
    if sent {
        let method = v["method"].as_str().unwrap_or("(reply)");
        return match method {
            "tools/call" => format!(
                "client → server  tools/call {} {}\n",
                v["params"]["name"].as_str().unwrap_or_default(),
                one_line(&v["params"]["arguments"])
            ),
            "initialize" => format!(
                "client → server  initialize (protocol {})\n",
                v["params"]["protocolVersion"].as_str().unwrap_or_default()
            ),
            _ => format!("client → server  {method}\n"),
        };
    }
    let result = &v["result"];
    let mut lines: Vec<String> = Vec::new();
    if let Some(e) = v.get("error") {
        lines.push(format!("error {}", one_line(e)));
    } else if let Some(info) = result.get("serverInfo") {
        let shown = serde_json::json!({
            "protocolVersion": result["protocolVersion"],
            "serverInfo": {"name": info["name"], "version": info["version"]},
        });
        lines.extend(
            serde_json::to_string_pretty(&shown)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned),
        );
        if let Some(text) = result["instructions"].as_str() {
            lines.push(format!("instructions: {}", clip(text, BRIEF_CHARS)));
        }
    } else if let Some(tools) = result["tools"].as_array() {
        lines.push(format!("{} tools:", tools.len()));
        for t in tools {
            lines.push(format!(
                "  {:<22} {}",
                t["name"].as_str().unwrap_or_default(),
                clip(
                    &crate::app::first_sentence(t["description"].as_str().unwrap_or_default()),
                    BRIEF_CHARS
                )
            ));
        }
    } else if let Some(prompts) = result["prompts"].as_array() {
        lines.push(format!("{} prompts:", prompts.len()));
        for p in prompts {
            let args: Vec<&str> = p["arguments"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect())
                .unwrap_or_default();
            let name = format!(
                "{}({})",
                p["name"].as_str().unwrap_or_default(),
                args.join(", ")
            );
            lines.push(format!(
                "  {name:<22} {}",
                clip(p["description"].as_str().unwrap_or_default(), BRIEF_CHARS)
            ));
        }
    } else if result["isError"] == true {
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        lines.push(format!("tool error: {}", clip(text, 2 * BRIEF_CHARS)));
    } else if let Some(Value::Object(fields)) = result.get("structuredContent") {
        // One line per field; a list shows its first items, one line each.
        for (key, value) in fields {
            match value {
                Value::Array(items) => {
                    lines.push(format!("{key}: {} item(s)", items.len()));
                    for item in items.iter().take(BRIEF_ITEMS) {
                        lines.push(format!("  - {}", clip(&item_line(item), 2 * BRIEF_CHARS)));
                    }
                    if items.len() > BRIEF_ITEMS {
                        lines.push(format!("  … {} more", items.len() - BRIEF_ITEMS));
                    }
                }
                other => lines.push(format!("{key}: {}", one_line(other))),
            }
            if lines.len() >= BRIEF_LINES {
                lines.push(format!("… [{} fields in all]", fields.len()));
                break;
            }
        }
    } else {
        lines.push(one_line(result));
    }
    let mut out = String::from("server → client\n");
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// A list item on one line: its path, source, heading, line and text first, then the rest.
fn item_line(item: &Value) -> String {
    let Value::Object(map) = item else {
        return serde_json::to_string(item).unwrap_or_default();
    };
    const FIRST: [&str; 6] = ["path", "source", "heading", "line", "text", "excerpt"];
    let mut parts: Vec<String> = Vec::new();
    let shown = |v: &Value| {
        let v = shorten(v.clone(), BRIEF_CHARS / 2, BRIEF_ITEMS);
        serde_json::to_string(&v).unwrap_or_default()
    };
    for key in FIRST {
        if let Some(v) = map.get(key) {
            parts.push(format!("{key}: {}", shown(v)));
        }
    }
    for (key, v) in map {
        if !FIRST.contains(&key.as_str()) {
            parts.push(format!("{key}: {}", shown(v)));
        }
    }
    parts.join(", ")
}

/// `text` cut to `chars` characters, with an ellipsis when cut.
fn clip(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(chars).collect();
        format!("{cut}…")
    }
}

/// A transport wrapper that reports every byte to a [`WireLog`].
struct Tap<S> {
    inner: S,
    log: Arc<WireLog>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &poll {
            self.log.feed(false, &buf.filled()[before..]);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &poll {
            self.log.feed(true, &data[..*n]);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
