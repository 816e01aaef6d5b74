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
