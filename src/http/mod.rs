//! The Streamable HTTP transport (`capvault serve --transport http`): rmcp's service at `/mcp`
//! in axum, every session on the one engine, behind one gate that every request passes first.
//!
//! The gate, in order: refuse while shutting down (503); `Host` and `Origin` ([`guard`]: 403);
//! the bearer token ([`auth`]: 401, with `WWW-Authenticate`); requests in flight, in all (503)
//! and per client (429); the body cap (413); a tool the token may not call (403
//! `insufficient_scope`); a session another token opened (404); the session caps on
//! `initialize`, in all and per token (503); the request timeout (503, or a JSON-RPC error
//! ending a reply rmcp streams in a session, and the request is cancelled in its session so
//! its handler stops).
//! Only then does rmcp see the request, with the token's [`Grant`] in its extensions, which
//! the server reads to narrow `tools/list` and refuse `tools/call` (so a session opened with
//! one token gives nothing more to a request made with another). Every response body is capped
//! too, and one access log line per request goes to stderr: method, JSON-RPC method, tool,
//! status, milliseconds, client address, token name. Never a token, never note content.
//! A reply sent before its request's body was read to the end (a refusal) carries
//! `Connection: close`, so no client reuses a connection the server is closing.
//!
//! Before the gate, connections themselves are bounded ([`conn`]): in all and per client
//! address, each must send a request's headers within the header timeout (which also closes a
//! kept-alive connection left idle that long), and a TLS handshake has 10 seconds.

mod admit;
pub mod auth;
pub mod conn;
pub mod guard;
#[cfg(feature = "oauth")]
pub mod oauth;
#[cfg(not(feature = "oauth"))]
#[path = "oauth_off.rs"]
pub mod oauth;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::server::{CapvaultServer, Grant};

pub use auth::Tokens;
pub use guard::Guard;

/// The bounds on what clients may ask of the HTTP server.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body (413 above it).
    pub max_body_bytes: usize,
    /// Largest response body; a reply that grows past it is cut off and logged (tool replies
    /// are bounded far below it, so this is a backstop).
    pub max_response_bytes: usize,
    /// How long one request may take before it gets 503.
    pub request_timeout: Duration,
    /// Requests in flight, in all (503 above it).
    pub max_in_flight: usize,
    /// Requests in flight per client: address, token and session (429 above it).
    pub max_in_flight_per_client: usize,
    /// Open sessions (2025-11-25 clients; 503 on `initialize` above it).
    pub max_sessions: usize,
    /// Open sessions per token or OAuth grant (503 to that token above it, never to another).
    pub max_sessions_per_token: usize,
    /// How long a connection may take to send a request's headers, and stay idle between
    /// requests (then it is closed).
    pub header_timeout: Duration,
    /// Open connections, in all and per client address (past either, a new one is closed at
    /// once).
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// A session nobody used for this long is closed.
    pub session_idle: Duration,
    /// On shutdown, how long requests in flight may take to finish.
    pub drain: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 1024 * 1024,
            max_response_bytes: 16 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            max_in_flight: 256,
            max_in_flight_per_client: 32,
            max_sessions: 256,
            max_sessions_per_token: 32,
            header_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_address: 256,
            session_idle: Duration::from_secs(30 * 60),
            drain: Duration::from_secs(30),
        }
    }
}

/// A TLS certificate chain and its private key, PEM, read through [`crate::vault::host`].
#[derive(Clone)]
pub struct TlsPem {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsPem(..)")
    }
}

/// How to serve over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (loopback by default).
    pub listen: SocketAddr,
    /// More names for `Host` (`name` or `name:port`).
    pub allowed_hosts: Vec<String>,
    /// More origins a browser page may call from (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// The accepted bearer tokens.
    pub tokens: Tokens,
    /// Serve HTTPS with this certificate.
    pub tls: Option<TlsPem>,
    /// A non-loopback listener without TLS is allowed (a TLS-terminating proxy is in front).
    pub insecure_http: bool,
    /// The bounds.
    pub limits: HttpLimits,
    /// OAuth (`--oauth builtin` or `--oauth-issuer`), when on.
    pub oauth: Option<Arc<oauth::ResourceServer>>,
}

/// A listener that would expose the vault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExposureError {
    /// Not loopback, and neither tokens nor OAuth.
    #[error(
        "listening on {0} (not loopback) needs bearer tokens: set CAPVAULT_TOKEN, pass \
         --token-file (`capvault token new` makes one), or use OAuth (--oauth builtin or \
         --oauth-issuer)"
    )]
    NoCredentials(std::net::IpAddr),
    /// Not loopback, no TLS, and no `--insecure-http`.
    #[error(
        "listening on {0} (not loopback) without TLS would send tokens and notes in clear: \
         pass --tls-cert and --tls-key, or --insecure-http when a TLS-terminating proxy is in \
         front"
    )]
    NoTls(std::net::IpAddr),
}

/// A certificate or key that cannot serve HTTPS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `--tls-cert` does not parse as PEM certificates.
    #[error("--tls-cert: not a PEM certificate chain ({0})")]
    Chain(rustls_pki_types::pem::Error),
    /// `--tls-cert` holds no certificate.
    #[error("--tls-cert: no certificate in the file")]
    NoCertificate,
    /// `--tls-key` does not parse as a PEM private key.
    #[error("--tls-key: not a PEM private key ({0})")]
    Key(rustls_pki_types::pem::Error),
    /// rustls has no protocol version to offer (a build fault).
    #[error("{0}")]
    Protocols(rustls::Error),
    /// rustls refuses the pair (the key does not match the certificate...).
    #[error("--tls-cert/--tls-key: {0}")]
    Pair(rustls::Error),
}

/// Why the HTTP server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The options would expose the vault.
    #[error(transparent)]
    Exposed(#[from] ExposureError),
    /// The listen address cannot be bound.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: std::io::Error,
    },
    /// An `--allowed-host` or `--allowed-origin` is malformed.
    #[error(transparent)]
    Guard(#[from] guard::GuardError),
    /// The certificate or key is refused.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The listener or a connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The accept loop's task panicked.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl HttpOptions {
    /// Refuses the combinations that would expose the vault: a non-loopback listener with no
    /// token, or without TLS unless `--insecure-http` says a proxy terminates it.
    pub fn check(&self) -> Result<(), ExposureError> {
        let ip = self.listen.ip();
        if ip.is_loopback() {
            return Ok(());
        }
        if self.tokens.is_empty() && self.oauth.is_none() {
            return Err(ExposureError::NoCredentials(ip));
        }
        if self.tls.is_none() && !self.insecure_http {
            return Err(ExposureError::NoTls(ip));
        }
        Ok(())
    }
}

/// What the gate shares across requests.
struct Gate {
    guard: Guard,
    tokens: Tokens,
    oauth: Option<Arc<oauth::ResourceServer>>,
    anonymous: Grant,
    prototype: CapvaultServer,
    sessions: Arc<LocalSessionManager>,
    limits: HttpLimits,
    in_flight: Arc<Semaphore>,
    per_client: Arc<Mutex<HashMap<String, usize>>>,
    shutting_down: AtomicBool,
    initializing: tokio::sync::Mutex<()>,
    /// Who opened each session (a static token, an OAuth client, a JWT subject): only it may
    /// use the session. Pruned to rmcp's live sessions at every `initialize`, so it holds at most
    /// [`HttpLimits::max_sessions`] entries.
    owners: Mutex<HashMap<String, String>>,
}

impl Gate {
    /// The grant that opened session `id`, if it is known.
    fn owner(&self, id: &str) -> Option<String> {
        crate::locks::lock(&self.owners).get(id).cloned()
    }
}

/// Binds the listener (before the sandbox, which then denies every other bind). Call
/// [`HttpOptions::check`] first.
pub fn bind(options: &HttpOptions) -> Result<std::net::TcpListener, ServeError> {
    std::net::TcpListener::bind(options.listen).map_err(|error| ServeError::Listen {
        addr: options.listen,
        error,
    })
}

/// hyper's settings that bound a connection: the header timeout (hyper starts it whenever it
/// waits for a request head, so it also closes a kept-alive connection idle that long), and for
/// HTTP/2 pings that close a connection whose peer stopped answering, and a bound on streams.
/// (A macro: hyper-util's builder type is not named here.)
macro_rules! bound_connections {
    ($builder:expr, $header_timeout:expr) => {{
        let builder = $builder;
        builder
            .http1()
            .header_read_timeout($header_timeout)
            .max_buf_size(64 * 1024);
        builder
            .http2()
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(10))
            .max_concurrent_streams(64)
            .max_header_list_size(64 * 1024);
    }};
}

/// Serves `server` (the prototype every session clones) over HTTP on `listener` (from
/// [`bind`]) until `shutdown` resolves; then refuses new requests, lets those in flight finish
/// (up to the drain time), closes the sessions and returns. The caller shuts the engine down.
pub async fn serve(
    server: CapvaultServer,
    options: HttpOptions,
    listener: std::net::TcpListener,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), ServeError> {
    options.check()?;
    let local = listener.local_addr()?;
    let tls = match &options.tls {
        Some(pem) => Some(tls_config(pem)?),
        None => None,
    };
    let limits = options.limits.clone();
    let guard = Guard::new(
        local.port(),
        tls.is_some(),
        &options.allowed_hosts,
        &options.allowed_origins,
    )?;

    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(limits.session_idle);
    let mut manager = LocalSessionManager::default();
    manager.session_config = session_config;
    let sessions = Arc::new(manager);
    let cancel = CancellationToken::new();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(guard.rmcp_hosts())
        .with_allowed_origins(guard.origins().to_vec())
        .enforce_origin_validation()
        .with_max_request_body_bytes(limits.max_body_bytes)
        .with_json_response(true)
        .with_cancellation_token(cancel.clone());
    let factory = server.clone();
    let mcp =
        StreamableHttpService::new(move || Ok(factory.clone()), Arc::clone(&sessions), config);

    let gate = Arc::new(Gate {
        guard,
        anonymous: Grant::full("anonymous"),
        tokens: options.tokens.clone(),
        oauth: options.oauth.clone(),
        prototype: server,
        sessions,
        in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
        per_client: Arc::new(Mutex::new(HashMap::new())),
        limits,
        shutting_down: AtomicBool::new(false),
        initializing: tokio::sync::Mutex::new(()),
        owners: Mutex::new(HashMap::new()),
    });
    let mut app = Router::new()
        .nest_service("/mcp", mcp)
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .layer(cors(&gate.guard));
    if let Some(rs) = &gate.oauth {
        app = app.merge(rs.router());
    }
    let app = app.layer(axum::middleware::from_fn_with_state(
        Arc::clone(&gate),
        gate_request,
    ));
    let make = app.into_make_service_with_connect_info::<SocketAddr>();

    let handle = axum_server::Handle::new();
    // One stable line on stderr that says where the server is (tests read it when they pass
    // port 0).
    // Not `eprintln!`: it panics when stderr cannot be written.
    let _ = writeln!(
        std::io::stderr(),
        "capvault: serving over HTTP at {scheme}://{local}/mcp"
    );
    tracing::info!(
        url = %format!("{scheme}://{local}/mcp"),
        tokens = gate.tokens.len(),
        oauth = gate.oauth.as_ref().map_or("off", |o| o.issuer_id()),
        tls = tls.is_some(),
        "serving over HTTP"
    );
    // The accept loop runs as its own task, so it keeps answering (503) while the drain below
    // waits for the requests in flight.
    let accept_handle = handle.clone();
    let connections = conn::ConnectionLimit::new(
        gate.limits.max_connections,
        gate.limits.max_connections_per_address,
    );
    let header_timeout = gate.limits.header_timeout;
    let mut served = tokio::spawn(async move {
        match tls {
            None => {
                let mut server = axum_server::from_tcp(listener)?.acceptor(connections);
                bound_connections!(server.http_builder(), header_timeout);
                server
                    .first_request_timeout(header_timeout)
                    .accept_error_handler(refused_connection)
                    .handle(accept_handle)
                    .serve(make)
                    .await
            }
            Some(cfg) => {
                let mut server = axum_server::tls_rustls::from_tcp_rustls(listener, cfg)?
                    .map(|tls| tls.acceptor(connections));
                bound_connections!(server.http_builder(), header_timeout);
                server
                    .first_request_timeout(header_timeout)
                    .accept_error_handler(refused_connection)
                    .handle(accept_handle)
                    .serve(make)
                    .await
            }
        }
    });
    let signal = tokio::select! {
        r = &mut served => {
            r??;
            return Ok(());
        }
        s = shutdown => s,
    };
    tracing::info!(
        signal,
        "shutting down: refusing new requests, finishing those in flight"
    );
    gate.shutting_down.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + gate.limits.drain;
    while gate.in_flight.available_permits() < gate.limits.max_in_flight
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = gate.limits.max_in_flight - gate.in_flight.available_permits();
    if left > 0 {
        tracing::warn!(
            requests = left,
            "the drain time ran out with requests in flight"
        );
    }
    cancel.cancel();
    handle.graceful_shutdown(Some(Duration::from_secs(2)));
    served.await??;
    Ok(())
}

/// A connection refused when accepted (past the connection bounds, or a failed TLS handshake).
fn refused_connection(peer: Option<&SocketAddr>, e: &std::io::Error) {
    tracing::debug!(peer = ?peer.map(|p| p.ip()), error = %e, "a connection was closed when accepted");
}

/// CORS for the origins the guard allows (the gate has refused every other origin before this
/// runs): a page of an `--allowed-origin` may call the server, send the MCP headers and a token,
/// and read the session id and auth challenges.
fn cors(guard: &Guard) -> tower_http::cors::CorsLayer {
    use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, WWW_AUTHENTICATE};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let guard = guard.clone();
    let mcp = |n: &'static str| HeaderName::from_static(n);
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            guard.check_origin(Some(origin.as_bytes())).is_ok()
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            AUTHORIZATION,
            CONTENT_TYPE,
            ACCEPT,
            mcp("mcp-protocol-version"),
            mcp("mcp-session-id"),
            mcp("mcp-method"),
            mcp("mcp-name"),
            mcp("last-event-id"),
        ])
        .expose_headers([mcp("mcp-session-id"), WWW_AUTHENTICATE])
        .max_age(Duration::from_secs(600))
}

/// rustls's configuration for the PEM certificate chain and key (the `ring` provider, TLS 1.2
/// and 1.3, HTTP/2 and HTTP/1.1 by ALPN).
fn tls_config(pem: &TlsPem) -> Result<axum_server::tls_rustls::RustlsConfig, TlsError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<_, _>>()
        .map_err(TlsError::Chain)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(&pem.key).map_err(TlsError::Key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::Pair)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(axum_server::tls_rustls::RustlsConfig::from_config(
        Arc::new(config),
    ))
}

/// What the access log says about one request.
#[derive(Default)]
struct Access {
    rpc: Option<String>,
    tool: Option<String>,
    token: Option<String>,
}

async fn gate_request(
    State(gate): State<Arc<Gate>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let mut access = Access::default();
    // A request body nobody read to its end makes hyper close the connection after the reply,
    // without saying so unless it decided before writing the head; a client that reuses the
    // connection then loses its next request ("server disconnected"). Say it in every such
    // reply: the client opens a new connection.
    let (parts, body) = request.into_parts();
    let unread_body = (!http_body::Body::is_end_stream(&body)
        && parts.version <= http::Version::HTTP_11)
        .then(|| Arc::new(AtomicBool::new(false)));
    let request = match &unread_body {
        Some(read) => Request::from_parts(
            parts,
            Body::new(ReadToEnd {
                inner: body,
                read: Arc::clone(read),
            }),
        ),
        None => Request::from_parts(parts, body),
    };
    let mut response = admit::admit(&gate, peer, request, next, &mut access).await;
    if unread_body.is_some_and(|read| !read.load(Ordering::SeqCst)) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    tracing::info!(
        target: "capvault::access",
        http = %method,
        path,
        rpc = access.rpc.as_deref().unwrap_or("-"),
        tool = access.tool.as_deref().unwrap_or("-"),
        status = response.status().as_u16(),
        ms = start.elapsed().as_millis() as u64,
        client = %peer.ip(),
        token = access.token.as_deref().unwrap_or("-"),
    );
    response
}

/// The request timeout of a reply streamed in a session (see [`Capped`]).
struct StreamTimeout {
    at: Pin<Box<tokio::time::Sleep>>,
    gate: Arc<Gate>,
    session: String,
    calls: Vec<Call>,
}

impl StreamTimeout {
    /// The deadline passed: the requests are cancelled in their session (the session's
    /// service runs the handlers, not this reply, so dropping the reply would not stop them:
    /// the same `notifications/cancelled` a client would send reaches their cancellation
    /// tokens) and the stream's last event is a JSON-RPC error for each.
    fn expire(self) -> Bytes {
        let StreamTimeout {
            gate,
            session,
            calls,
            ..
        } = self;
        let mut events = String::new();
        for id in calls.iter().filter_map(|c| c.id.as_ref()) {
            let error = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32000, "message": "the request timed out"},
            });
            events.push_str(&format!("event: message\ndata: {error}\n\n"));
        }
        tokio::spawn(async move { cancel_in_session(&gate, &session, &calls).await });
        Bytes::from(events)
    }
}

/// Why a request has no grant.
enum AuthError {
    /// No bearer token: 401.
    Missing,
    /// A token that is no static token and no OAuth access token: 401 `invalid_token`.
    Invalid,
    /// An OAuth token with no vault scope: 403 `insufficient_scope`.
    NoScope,
}

/// The request's grant, from a static token, then from OAuth, and who holds it (whose sessions
/// it may use: the token itself, the OAuth client, the JWT's subject). With neither configured
/// (a loopback listener), every request gets the server's full rights.
async fn authenticate(gate: &Gate, presented: Option<&str>) -> Result<(Grant, String), AuthError> {
    if gate.tokens.is_empty() && gate.oauth.is_none() {
        return Ok((gate.anonymous.clone(), gate.anonymous.id.clone()));
    }
    let presented = presented.ok_or(AuthError::Missing)?;
    if let Some(g) = gate.tokens.check(presented) {
        return Ok((g.clone(), format!("token {}", g.id)));
    }
    match &gate.oauth {
        None => Err(AuthError::Invalid),
        Some(rs) => rs.authenticate(presented).await.map_err(|r| match r {
            oauth::Refusal::Invalid => AuthError::Invalid,
            oauth::Refusal::NoScope => AuthError::NoScope,
        }),
    }
}

/// Sends `notifications/cancelled` into session `sid` for every request in `calls`, so the
/// handlers of a request whose reply timed out are told to stop.
async fn cancel_in_session(gate: &Gate, sid: &str, calls: &[Call]) {
    let id: rmcp::transport::common::server_side_http::SessionId = sid.into();
    for call in calls {
        let Some(request_id) = &call.id else { continue };
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the request timed out"},
        });
        let Ok(message) = serde_json::from_value(note) else {
            continue;
        };
        match gate.sessions.accept_message(&id, message).await {
            Ok(()) => tracing::info!(
                rpc = %call.method,
                "a request timed out: it is cancelled in its session"
            ),
            Err(e) => tracing::debug!(error = %e, "a timed-out request could not be cancelled"),
        }
    }
}

/// One JSON-RPC message of a request body.
struct Call {
    method: String,
    /// The tool it calls (`tools/call`).
    tool: Option<String>,
    /// Its id (a request's; none for a notification).
    id: Option<Value>,
}

/// The JSON-RPC methods in a request body, each with the tool it calls (`tools/call`). A body
/// that is not JSON-RPC gives nothing here; rmcp answers it.
fn rpc_calls(body: &[u8]) -> Vec<Call> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let one = |v: &Value| -> Option<Call> {
        let method = v.get("method")?.as_str()?.to_owned();
        let tool = (method == "tools/call")
            .then(|| v.pointer("/params/name").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        let id = v
            .get("id")
            .filter(|i| i.is_string() || i.is_number())
            .cloned();
        Some(Call { method, tool, id })
    };
    match &value {
        Value::Array(items) => items.iter().filter_map(one).collect(),
        v => one(v).into_iter().collect(),
    }
}

/// A refusal under construction: a status and a short plain-text reason.
struct Refusal(Response);

impl Refusal {
    fn retry_after(mut self) -> Response {
        self.0
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        self.0
    }
}

impl From<Refusal> for Response {
    fn from(r: Refusal) -> Response {
        r.0
    }
}

fn refuse(status: StatusCode, why: &str) -> Refusal {
    let mut r = Response::new(Body::from(format!("{why}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Refusal(r)
}

fn unauthorized(gate: &Gate, why: &str, error: Option<&str>) -> Response {
    let mut r = refuse(StatusCode::UNAUTHORIZED, why).0;
    let challenge = match (&gate.oauth, error) {
        (Some(rs), e) => rs.challenge(e, None),
        (None, None) => "Bearer realm=\"capvault\"".to_owned(),
        (None, Some(e)) => format!("Bearer realm=\"capvault\", error=\"{e}\""),
    };
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

fn insufficient_scope(gate: &Gate, grant: &Grant, internal: &str, listed: &str) -> Response {
    let (why, challenge) = match (grant.missing_scope(internal), &gate.oauth) {
        // With OAuth on, the scope named is the OAuth one, so a client can step up.
        (Some(_), Some(rs)) => (
            format!(
                "this token's scope is `{}`; `{listed}` needs `{}`",
                grant.scope(),
                oauth::SCOPE_WRITE
            ),
            rs.challenge(
                Some("insufficient_scope"),
                Some(&format!("{} {}", oauth::SCOPE_READ, oauth::SCOPE_WRITE)),
            ),
        ),
        (Some(scope), None) => (
            format!(
                "this token's scope is `{}`; `{listed}` needs `{scope}`",
                grant.scope()
            ),
            format!("Bearer realm=\"capvault\", error=\"insufficient_scope\", scope=\"{scope}\""),
        ),
        (None, _) => (
            format!("this token's tool profile does not include `{listed}`"),
            "Bearer realm=\"capvault\", error=\"insufficient_scope\"".to_owned(),
        ),
    };
    let mut r = refuse(StatusCode::FORBIDDEN, &why).0;
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// One request in flight for a client; gives its place back when dropped.
struct ClientSlot {
    map: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl ClientSlot {
    fn take(map: &Arc<Mutex<HashMap<String, usize>>>, key: String, max: usize) -> Option<Self> {
        let mut m = crate::locks::lock(map);
        let n = m.entry(key.clone()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            map: Arc::clone(map),
            key,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut m = crate::locks::lock(&self.map);
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

/// A request body that records when it has been read to its end.
struct ReadToEnd {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl http_body::Body for ReadToEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::SeqCst);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that holds its request's places in flight until it is sent, and ends in
/// an error (the connection is cut) rather than grow past the response cap; a reply streamed
/// in a session ends at the request's deadline ([`StreamTimeout`]).
struct Capped {
    inner: Body,
    sent: usize,
    max: usize,
    timeout: Option<StreamTimeout>,
    /// The timeout's last event was sent: the stream is over.
    ended: bool,
    _held: (OwnedSemaphorePermit, ClientSlot),
}

impl http_body::Body for Capped {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        // What the stream has ready goes first (a reply ready at the deadline is sent); the
        // deadline is looked at only while it waits.
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                if let Some(t) = &mut this.timeout
                    && t.at.as_mut().poll(cx).is_ready()
                    && let Some(t) = this.timeout.take()
                {
                    this.ended = true;
                    tracing::info!("a streamed reply timed out: its requests are cancelled");
                    return Poll::Ready(Some(Ok(http_body::Frame::data(t.expire()))));
                }
                Poll::Pending
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len();
                    if this.sent > this.max {
                        tracing::warn!(
                            max = this.max,
                            "a response passed the response cap; cut off"
                        );
                        return Poll::Ready(Some(Err(axum::Error::new("response too large"))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
