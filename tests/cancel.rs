//! Cancelled requests stop their work, through the real binary: a regex search whose every
//! match attempt reads the rest of the note (minutes over these notes in a debug build) is
//! cancelled over stdio with `notifications/cancelled`, and over HTTP by `--request-timeout`
//! (in a session and without one);
//! each time the server's "cancelled work stopped" line (logged when the blocking thread really
//! returns) must come long before the search could have ended on its own, and the server must
//! go on answering.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[cfg(feature = "http")]
use crate::common::HttpChild;
use crate::common::{Server, poll, serve_command, write_tree};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value, json};

/// Matches the empty string at every position, and each attempt scans to the end of the note
/// looking for a `Z`: quadratic in the note's size.
const HOSTILE: &str = "(?s:.*Z)?";

/// Seconds the stop may take at most: the uncancelled search runs for many minutes (16 s for
/// 120 KB in one note, as the unit test of the matcher's deadline notes, and quadratic: these
/// are four notes of 600 KB, about 400 s each, on two cores: over ten times this bound), and a
/// cancelled one stops at its next match attempt.
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// A vault of four big notes (and one small one to read afterwards).
fn hostile_vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let big = "lorem ipsum dolor sit amet consectetur\n".repeat(15_000);
    write_tree(
        tmp.path(),
        &[
            ("Big 1.md", big.as_str()),
            ("Big 2.md", big.as_str()),
            ("Big 3.md", big.as_str()),
            ("Big 4.md", big.as_str()),
            ("Home.md", "# Home\nStill here.\n"),
        ],
    );
    tmp
}

fn search_args() -> Map<String, Value> {
    let Value::Object(m) = json!({"query": HOSTILE, "mode": "regex"}) else {
        unreachable!()
    };
    m
}

/// The CPU time (user and system, all threads) the process `pid` has used so far.
fn cpu_time(pid: u32) -> Duration {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server's stat");
        // After the command name (in parentheses): utime and stime are the 12th and 13th fields.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let ticks: u64 = rest
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|v| v.parse::<u64>().expect("a tick count"))
            .sum();
        // SAFETY: sysconf only reads a setting of the system.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }
    #[cfg(not(target_os = "linux"))]
    {
        // `ps` prints it as [[DD-]HH:]MM:SS[.cc].
        let out = std::process::Command::new("ps")
            .args(["-o", "time=", "-p", &pid.to_string()])
            .output()
            .expect("run ps");
        let text = String::from_utf8_lossy(&out.stdout);
        let (days, clock) = text.trim().split_once('-').unwrap_or(("0", text.trim()));
        let secs = clock.split(':').fold(0.0, |acc, part| {
            acc * 60.0 + part.parse::<f64>().unwrap_or(0.0)
        });
        Duration::from_secs_f64(days.parse::<f64>().unwrap_or(0.0) * 86_400.0 + secs)
    }
}

/// Waits (at most [`STOP_WITHIN`]) for a line holding `what` in `lines`; returns how long.
async fn wait_for_line(lines: &Mutex<Vec<String>>, what: &str) -> Duration {
    let started = Instant::now();
    loop {
        if lines.lock().unwrap().iter().any(|l| l.contains(what)) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < STOP_WITHIN,
            "no `{what}` within {STOP_WITHIN:?}: the cancelled work ran on; log: {:#?}",
            lines.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_search_cancelled_over_stdio_stops_its_scan_inside_the_note() {
    let tmp = hostile_vault();
    // A scan budget of 10 minutes: only the cancellation can stop the search early.
    let mut cmd = serve_command(tmp.path(), &["--scan-budget", "600000"]);
    cmd.env("CAPVAULT_LOG", "capvault=info");
    let (s, lines) = Server::from_command_logged(cmd).await;
    s.wait_index_ready().await;

    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("search_notes").with_arguments(search_args()),
    ));
    let handle = s
        .client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("sent");
    // Let the scan get well inside the notes: a second of the server's CPU time spent on it.
    let pid = s.pid();
    let before = cpu_time(pid);
    poll(
        "a second of CPU time on the search",
        Duration::from_secs(120),
        async || (cpu_time(pid) >= before + Duration::from_secs(1)).then_some(()),
    )
    .await;
    assert!(
        !lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("cancelled work stopped")),
        "nothing was cancelled yet"
    );
    handle
        .cancel(Some("the test cancels it".into()))
        .await
        .expect("notifications/cancelled sent");
    wait_for_line(&lines, "a tool call was cancelled").await;
    wait_for_line(&lines, "cancelled work stopped").await;
    // The server goes on answering.
    let home = s.ok("read_note", json!({"path": "Home.md"})).await;
    assert!(home.to_string().contains("Still here"), "{home}");
    s.stop().await;
}

/// One raw HTTP/1.1 POST to `/mcp` (`Connection: close`): the status, the head (lower case)
/// and the body.
#[cfg(feature = "http")]
async fn post(authority: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(authority).await.unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nConnection: close\r\nHost: {authority}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(STOP_WITHIN, s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let (head, body) = (head.to_ascii_lowercase(), body.to_owned());
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, body)
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_search_whose_streamed_http_reply_times_out_is_cancelled_in_its_session_and_stops() {
    let tmp = hostile_vault();
    let child = HttpChild::spawn(
        tmp.path(),
        &["--scan-budget", "600000", "--request-timeout", "2"],
        &[],
    )
    .await;
    let at = child.authority();
    // Another session waits for the index and reads afterwards.
    let s = Server::of_client(child.connect(None).await);
    s.wait_index_ready().await;
    // A session of its own, by hand: only the server's deadline may cancel the call (rmcp's
    // client cancels a call it drops), and the reply's event stream is read as sent.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (status, head, _) = post(&at, &[], init).await;
    assert_eq!(status, 200, "{head}");
    let sid = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned();
    let in_session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, head, _) = post(&at, &in_session, initialized).await;
    assert!(status == 202 || status == 200, "{head}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search_notes", "arguments": search_args()}})
    .to_string();
    let started = Instant::now();
    let (status, head, body) = post(&at, &in_session, &call).await;
    // rmcp answers in a session with an event stream at once; the reply on it is the timeout's.
    assert_eq!(status, 200, "{head}");
    assert!(
        body.contains(r#""id":2"#) && body.contains("the request timed out"),
        "the stream should end in a timeout error for the call: {body}; log: {:#?}",
        child.stderr.lock().unwrap()
    );
    assert!(
        started.elapsed() < STOP_WITHIN,
        "the 2 s timeout took {:?}",
        started.elapsed()
    );
    wait_for_line(&child.stderr, "it is cancelled in its session").await;
    wait_for_line(&child.stderr, "cancelled work stopped").await;
    let home = s.ok("read_note", json!({"path": "Home.md"})).await;
    assert!(home.to_string().contains("Still here"), "{home}");
    s.stop().await;
    child.terminate().await;
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_stateless_http_search_that_times_out_gets_503_and_stops() {
    let tmp = hostile_vault();
    let child = HttpChild::spawn(
        tmp.path(),
        &["--scan-budget", "600000", "--request-timeout", "2"],
        &[],
    )
    .await;
    let s = Server::of_client(child.connect(None).await);
    s.wait_index_ready().await;
    // A 2026-07-28 request: no session, the reply is the request's own.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "search_notes", "arguments": search_args(), "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "search_notes"),
    ];
    let (status, head, body) = post(&child.authority(), &headers, &call).await;
    assert_eq!(status, 503, "{head}\n{body}");
    wait_for_line(&child.stderr, "cancelled work stopped").await;
    let home = s.ok("read_note", json!({"path": "Home.md"})).await;
    assert!(home.to_string().contains("Still here"), "{home}");
    s.stop().await;
    child.terminate().await;
}
