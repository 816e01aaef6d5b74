//! `capvault demo`: serve the embedded example vault to a real rmcp client in-process and print
//! every JSON-RPC message that crosses the pipe, as a captured wire session.
//!
//! The capture is real: [`Tap`] sits between the client and its end of the pipe and prints each
//! newline-delimited message it sees written (client → server) or read (server → client).

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::app::connect_in_process;
use crate::server::CapvaultServer;
use crate::vault::example;

/// Longest string value shown in the demo output before it is elided (the wire carried it whole).
const SHOW_CHARS: usize = 600;

/// Runs the demo, writing the session to `out`.
pub async fn run(out: Box<dyn Write + Send>) -> anyhow::Result<()> {
    let ex = example::unpack()?;
    let log = Arc::new(WireLog {
        out: Mutex::new(out),
        sent: Mutex::new(Vec::new()),
        received: Mutex::new(Vec::new()),
    });
    log.say(&format!(
        "capvault {} demo: serving the example vault \"{}\" ({} files) to an in-process rmcp client.\n\
         Every JSON-RPC message on the wire follows (long strings shortened for display).\n",
        env!("CARGO_PKG_VERSION"),
        ex.vault.name(),
        example::files().len(),
    ));
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
    tokio::task::spawn_blocking(move || engine.wait_ready(std::time::Duration::from_secs(30)))
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
            Step::Tool("get_daily_note", json!({"date": "2026-11-30"})),
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
            Step::ReadResource(uri) => {
                client
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await?;
            }
        }
    }
    client.cancel().await?;
    log.say("\nDone. Run `capvault serve <VAULT>` to serve your own vault to an MCP client.\n");
    Ok(())
}

enum Step {
    ListTools,
    Tool(&'static str, Value),
    ListResources,
    ReadResource(&'static str),
}

/// Collects bytes in each direction and prints every complete line as pretty JSON.
struct WireLog {
    out: Mutex<Box<dyn Write + Send>>,
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
            let shown = match serde_json::from_slice::<Value>(&line) {
                Ok(v) => serde_json::to_string_pretty(&shorten(v)).unwrap_or_default(),
                Err(_) => String::from_utf8_lossy(&line).trim_end().to_owned(),
            };
            self.say(&format!("{arrow}\n{shown}\n"));
        }
    }
}

/// Shortens long strings for display.
fn shorten(v: Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > SHOW_CHARS => {
            let cut: String = s.chars().take(SHOW_CHARS).collect();
            Value::String(format!(
                "{cut}… [{} more characters]",
                s.chars().count() - SHOW_CHARS
            ))
        }
        Value::Array(items) => Value::Array(items.into_iter().map(shorten).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, shorten(v))).collect())
        }
        other => other,
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
