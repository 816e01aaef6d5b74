//! Timing helpers shared by the benchmarks.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use serde_json::Value;

/// Calls `tool` once through `client`, returning the round-trip time and the result. Panics on a
/// protocol error or a tool error: a benchmark of a failing call measures nothing.
pub async fn timed_call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: &Value,
) -> (Duration, CallToolResult) {
    let args = args.as_object().cloned().unwrap_or_default();
    let started = Instant::now();
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let elapsed = started.elapsed();
    assert_ne!(result.is_error, Some(true), "{tool}: {:?}", result.content);
    (elapsed, result)
}

/// The 50th and 95th percentiles, in milliseconds.
pub fn p50_p95(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |p: f64| {
        let i = ((times.len() as f64 - 1.0) * p).round() as usize;
        times[i.min(times.len() - 1)].as_secs_f64() * 1e3
    };
    (at(0.5), at(0.95))
}

/// Why a call measured nothing.
#[derive(Debug)]
pub enum CallFailure {
    /// The server answered `isError: true` (or the protocol-level error it sent back).
    Tool(String),
    /// The connection is gone: the server exited or closed its output.
    Transport(String),
    /// No answer within the time allowed.
    Timeout(Duration),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Tool(m) => write!(f, "{m}"),
            CallFailure::Transport(m) => write!(f, "connection lost: {m}"),
            CallFailure::Timeout(d) => write!(f, "no answer within {:.0} s", d.as_secs_f64()),
        }
    }
}

/// Like [`timed_call`], but reports a failed call instead of panicking, and gives up after
/// `limit`. A tool error is `Tool` with the text the server sent.
pub async fn try_timed_call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: &Value,
    limit: Duration,
) -> Result<(Duration, CallToolResult), CallFailure> {
    let args = args.as_object().cloned().unwrap_or_default();
    let started = Instant::now();
    let call = client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
    let result = match tokio::time::timeout(limit, call).await {
        Err(_) => return Err(CallFailure::Timeout(limit)),
        Ok(Err(rmcp::ServiceError::McpError(e))) => {
            return Err(CallFailure::Tool(e.message.to_string()));
        }
        Ok(Err(
            e @ (rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)),
        )) => return Err(CallFailure::Transport(e.to_string())),
        Ok(Err(e)) => return Err(CallFailure::Tool(e.to_string())),
        Ok(Ok(r)) => r,
    };
    let elapsed = started.elapsed();
    if result.is_error == Some(true) {
        return Err(CallFailure::Tool(result_text(&result)));
    }
    Ok((elapsed, result))
}

/// The text content of a result, joined, for messages and for servers that answer in text.
pub fn result_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}
