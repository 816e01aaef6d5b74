//! What the `capvault` subcommands do: serve over stdio, run one tool in-process, and the
//! demo. `main.rs` only parses the command line and calls these.

use std::io::Write;

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

use crate::engine::{Freshness, IndexCache};
use crate::server::CapvaultServer;
use crate::vault::Vault;

/// Serves `vault` over stdin/stdout until the client disconnects, keeping the search index in
/// `cache` between runs; saves it once more on the way out.
pub async fn serve_stdio(
    vault: Vault,
    freshness: Freshness,
    cache: IndexCache,
) -> anyhow::Result<()> {
    tracing::info!(vault = vault.name(), "serving over stdio");
    let server = CapvaultServer::with_freshness(vault, freshness);
    server.engine().set_index_cache(cache);
    server.start();
    let engine = std::sync::Arc::clone(server.engine());
    let service = server
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP handshake failed")?;
    let served = service.waiting().await;
    tokio::task::spawn_blocking(move || engine.save_index(&mut Vec::new())).await?;
    served?;
    Ok(())
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

/// Runs one tool against `vault` through a real MCP client in-process and writes its result
/// as pretty JSON to `out`. A tool error is returned as `Err` with the tool's message.
pub async fn call_tool(
    vault: Vault,
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
    let server = CapvaultServer::new(vault);
    if tool == "search_notes" {
        // One-shot: build the index first so a ranked search uses it.
        let engine = std::sync::Arc::clone(server.engine());
        tokio::task::spawn_blocking(move || engine.ensure_built()).await?;
    }
    let client = connect_in_process(server, |s| s).await?;
    let tools = client.list_all_tools().await?;
    if !tools.iter().any(|t| t.name == tool) {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        bail!("unknown tool `{tool}`; tools: {}", names.join(", "));
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
