//! What the `capvault` subcommands do: serve over stdio, run one tool in-process, and the
//! demo. `main.rs` only parses the command line and calls these.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

use crate::engine::{Engine, Freshness, IndexCache};
use crate::notes::write::Writer;
use crate::server::{CapvaultServer, ToolPolicy};
use crate::vault::Vault;

/// Serves `engine`'s vault over stdin/stdout until the client disconnects (stdin closes) or
/// SIGINT or SIGTERM arrives, then shuts the engine down: background work stopped, threads
/// joined, the index cache saved a last time.
pub async fn serve_stdio(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
) -> anyhow::Result<()> {
    tracing::info!(
        vault = engine.vault().name(),
        writes = writer.is_some(),
        "serving over stdio"
    );
    engine.start();
    let server = build_server(&engine, writer, policy)?;
    let served = tokio::select! {
        service = server.serve(rmcp::transport::stdio()) => match service {
            Ok(service) => {
                let token = service.cancellation_token();
                tokio::select! {
                    quit = service.waiting() => quit.map(|_| ()).map_err(anyhow::Error::from),
                    signal = shutdown_signal() => {
                        tracing::info!(signal, "shutting down");
                        token.cancel();
                        Ok(())
                    }
                }
            }
            // A 2026-07-28 client never sends `initialize`: rmcp answers its stateless requests
            // while it waits, and the session ends when the client closes stdin.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
            Err(e) => Err(anyhow::Error::from(e).context("the MCP handshake failed")),
        },
        signal = shutdown_signal() => {
            tracing::info!(signal, "shutting down before the handshake");
            Ok(())
        }
    };
    tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    served
}

/// Serves `engine`'s vault over Streamable HTTP (`options`, on `listener`) until SIGINT or SIGTERM, every
/// session on the one engine; then lets requests in flight finish and shuts the engine down.
pub async fn serve_http(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    options: crate::http::HttpOptions,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    let server = build_server(&engine, writer, policy)?;
    engine.start();
    let served = crate::http::serve(server, options, listener, shutdown_signal()).await;
    tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    served
}

/// The server for `engine` (writable with `writer`), after removing what interrupted writes
/// left behind.
fn build_server(
    engine: &Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
) -> anyhow::Result<CapvaultServer> {
    if writer.is_some() {
        // What writes killed mid-way left behind (hidden temporary files), in the background.
        let engine = Arc::clone(engine);
        tokio::task::spawn_blocking(move || {
            let n = engine.vault().remove_stale_temps();
            if n > 0 {
                tracing::info!(removed = n, "temporary files of interrupted writes removed");
            }
        });
    }
    match writer {
        Some(w) => CapvaultServer::writable(Arc::clone(engine), w, policy),
        None => CapvaultServer::new(Arc::clone(engine), policy),
    }
    .map_err(anyhow::Error::msg)
}

/// Waits for SIGINT or SIGTERM (Ctrl-C elsewhere); returns its name.
pub async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            _ => {
                tracing::warn!("cannot listen for signals; stop the server by closing stdin");
                std::future::pending().await
            }
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    }
}

/// The first sentence of a tool's description (what `call --list`, the demo and a bundle's
/// tool list show).
pub fn first_sentence(description: &str) -> String {
    let text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = text
        .split(". ")
        .next()
        .unwrap_or(&text)
        .trim_end_matches('.');
    format!("{first}.")
}

/// An engine for `vault` with the default freshness and no index cache (one-shot use).
pub fn one_shot_engine(vault: Vault) -> Arc<Engine> {
    Engine::open(vault, Freshness::default(), IndexCache::Off)
}

/// Starts `server` on one end of an in-memory pipe and connects an rmcp client to the other,
/// through `wrap` (the demo uses it to capture the wire). The server task ends with the client.
pub async fn connect_in_process<S>(
    server: CapvaultServer,
    wrap: impl FnOnce(tokio::io::DuplexStream) -> S,
) -> anyhow::Result<RunningService<RoleClient, ()>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        match server.serve(server_end).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::error!(error = %e, "in-process server failed to start"),
        }
    });
    let client = ().serve(wrap(client_end)).await?;
    Ok(client)
}

/// Runs one tool against `engine`'s vault (writable with `writer`, the tools `policy` offers)
/// through a real MCP client in-process and writes its result as pretty JSON to `out`. A tool
/// error is returned as `Err` with the tool's message.
pub async fn call_tool(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    tool: &str,
    args_json: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let args: Map<String, Value> = match args_json {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text).context("JSON_ARGS is not valid JSON")? {
            Value::Object(map) => map,
            _ => bail!("JSON_ARGS must be a JSON object, like '{{\"path\": \"Note.md\"}}'"),
        },
    };
    let server = build_server(&engine, writer, policy)?;
    if tool == "search_notes" {
        // One-shot: build the index first so a ranked search uses it.
        let engine = Arc::clone(&engine);
        tokio::task::spawn_blocking(move || engine.ensure_built()).await?;
    }
    let client = connect_in_process(server, |s| s).await?;
    let tools = client.list_all_tools().await?;
    if !tools.iter().any(|t| t.name == tool) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let _ = client.cancel().await;
        bail!(
            "unknown tool `{tool}`; tools: {}{}",
            names.join(", "),
            if names.contains(&"edit_note") {
                ""
            } else {
                " (the write tools need --write)"
            }
        );
    }
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await?;
    let _ = client.cancel().await;
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    if result.is_error == Some(true) {
        bail!("{tool} failed: {text}");
    }
    let shown = match result.structured_content {
        Some(v) => serde_json::to_string_pretty(&v)?,
        None => text,
    };
    writeln!(out, "{shown}")?;
    Ok(())
}

/// Writes the tools a server on `engine` (writable with `writer`, under `policy`) lists, one
/// line each: the name as listed and the first sentence of its description.
pub async fn list_tools(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let server = build_server(&engine, writer, policy)?;
    let client = connect_in_process(server, |s| s).await?;
    let tools = client.list_all_tools().await;
    let _ = client.cancel().await;
    for t in tools? {
        writeln!(
            out,
            "{:<22} {}",
            t.name,
            first_sentence(t.description.as_deref().unwrap_or_default())
        )?;
    }
    Ok(())
}
