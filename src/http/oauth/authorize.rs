//! The built-in authorization server (`--oauth builtin`), for one owner: RFC 8414 metadata,
//! dynamic client registration (RFC 7591), the authorization code flow with PKCE (S256 only)
//! behind a consent page that asks for the owner's passphrase, rotating refresh tokens and
//! revocation (RFC 7009).
//!
//! What it refuses, and how: an unknown client or a redirect URI that is not exactly one it
//! registered gets an error page, never a redirect (no open redirect); every later error goes
//! back to the client's redirect URI with `error` and the `state` it sent. A consent form needs
//! the pending request's id and its one-time CSRF token; five wrong passphrases end the
//! request. Limits are per client so that no one can deny another: each client keeps at most
//! [`MAX_PENDING_PER_CLIENT`] pending requests (a flood of consent pages evicts only its own),
//! and each source address gets [`FREE_FAILURES_PER_ADDRESS`] wrong passphrases, then waits
//! longer and longer (doubling, up to 15 minutes) before the next; past [`FAILURES_PER_WINDOW`]
//! wrong passphrases from anywhere in five minutes, every check is slowed (never refused), so
//! the owner is delayed but never locked out. Codes live two minutes and are used once; a code
//! presented twice revokes what it gave.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::client_doc::{self, ClientDocs};
use super::page;
use super::store::{self, Client, RefreshError, Store};
use super::{SCOPE_READ, SCOPE_WRITE};

/// How long a consent page may wait for its answer.
const PENDING_TTL: Duration = Duration::from_secs(10 * 60);
/// Pending requests kept at most, in all (past it, the client holding the most loses its oldest).
const MAX_PENDING: usize = 256;
/// Pending requests kept per client (past it, the client's own oldest goes).
const MAX_PENDING_PER_CLIENT: usize = 8;
/// How long a code is valid.
const CODE_TTL: Duration = Duration::from_secs(120);
/// Wrong passphrases one request may see before it ends.
const FAILURES_PER_REQUEST: u32 = 5;
/// Wrong passphrases from anywhere in [`FAILURE_WINDOW`] before every check is slowed by
/// [`SLOW_CHECK`] (two checks run at once, so at most about two guesses a second in all).
const FAILURES_PER_WINDOW: usize = 30;
const FAILURE_WINDOW: Duration = Duration::from_secs(5 * 60);
const SLOW_CHECK: Duration = Duration::from_secs(1);
/// Wrong passphrases one source address may make before it must wait: 1 s after the next,
/// then 2 s, 4 s... up to [`MAX_BACKOFF`].
const FREE_FAILURES_PER_ADDRESS: u32 = 5;
const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);
/// An address's failures are forgotten this long after its last one.
const FORGET_FAILURES: Duration = Duration::from_secs(60 * 60);
/// Source addresses whose failures are kept at most (the longest quiet go first).
const MAX_ADDRESSES: usize = 4096;
/// Registrations per [`REGISTER_WINDOW`].
const REGISTRATIONS_PER_WINDOW: usize = 30;
const REGISTER_WINDOW: Duration = Duration::from_secs(10 * 60);
/// Bounds on a registration.
pub(super) const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_CHARS: usize = 80;

/// The authorization server's state.
pub struct AuthServer {
    pub(super) issuer: String,
    resource: String,
    vault: String,
    write_allowed: bool,
    pub(super) store: Arc<Store>,
    pending: Mutex<HashMap<String, Pending>>,
    codes: Mutex<HashMap<[u8; 32], Code>>,
    /// Codes already exchanged, with the grant each gave (revoked if the code comes back).
    spent: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    failures: Mutex<VecDeque<Instant>>,
    /// Wrong passphrases per source address: how many, and when the last was.
    by_address: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    registrations: Mutex<VecDeque<Instant>>,
    /// Client ID metadata documents, when accepted (`--oauth-client-metadata`).
    docs: Option<ClientDocs>,
    /// Passphrase checks running at once (each argon2 hash takes 19 MiB and tens of ms).
    hashing: tokio::sync::Semaphore,
}

/// Passphrase checks at once at most.
const MAX_HASHING: usize = 2;

/// Why no client was found.
enum ClientError {
    Unknown,
    /// Its metadata document could not be fetched or was refused.
    Document(String),
    Store(std::io::Error),
}

struct Pending {
    client: Client,
    redirect_uri: String,
    state: Option<String>,
    challenge: String,
    write: bool,
    csrf: String,
    created: Instant,
    failures: u32,
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    write: bool,
    created: Instant,
}

/// Locks a mutex, recovering it if a thread panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps the times of the last events within `window`; false when `max` are there already.
fn admit(times: &Mutex<VecDeque<Instant>>, window: Duration, max: usize) -> bool {
    let mut t = lock(times);
    while t.front().is_some_and(|f| f.elapsed() > window) {
        t.pop_front();
    }
    t.len() < max
}

fn record(times: &Mutex<VecDeque<Instant>>) {
    lock(times).push_back(Instant::now());
}

/// How long an address that made `failures` wrong guesses waits after the last one.
fn backoff(failures: u32) -> Duration {
    match failures.checked_sub(FREE_FAILURES_PER_ADDRESS) {
        None => Duration::ZERO,
        Some(n) => Duration::from_secs(1u64 << n.min(20)).min(MAX_BACKOFF),
    }
}

/// How much longer `ip` must wait before its next passphrase is checked (None: not at all).
fn address_wait(by: &Mutex<HashMap<IpAddr, (u32, Instant)>>, ip: IpAddr) -> Option<Duration> {
    let by = lock(by);
    let (failures, last) = by.get(&ip)?;
    backoff(*failures)
        .checked_sub(last.elapsed())
        .filter(|d| !d.is_zero())
}

/// Counts a wrong passphrase from `ip` (forgetting quiet addresses, and the quietest when
/// [`MAX_ADDRESSES`] are kept).
fn address_failed(by: &Mutex<HashMap<IpAddr, (u32, Instant)>>, ip: IpAddr) {
    let mut by = lock(by);
    by.retain(|_, (_, last)| last.elapsed() < FORGET_FAILURES);
    if by.len() >= MAX_ADDRESSES
        && !by.contains_key(&ip)
        && let Some(quietest) = by.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k)
    {
        by.remove(&quietest);
    }
    let e = by.entry(ip).or_insert((0, Instant::now()));
    e.0 = e.0.saturating_add(1);
    e.1 = Instant::now();
}

/// Makes room for one more pending request of `client_id`: its own oldest goes when it has
/// [`MAX_PENDING_PER_CLIENT`]; when [`MAX_PENDING`] are kept in all, the oldest of the client
/// holding the most. A flood from one client never evicts another's request while it holds
/// fewer.
fn make_room(pending: &mut HashMap<String, Pending>, client_id: &str) {
    pending.retain(|_, p| p.created.elapsed() < PENDING_TTL);
    let mut per_client: HashMap<&str, usize> = HashMap::new();
    for p in pending.values() {
        *per_client.entry(p.client.id.as_str()).or_insert(0) += 1;
    }
    let victim = if per_client.get(client_id).copied().unwrap_or(0) >= MAX_PENDING_PER_CLIENT {
        Some(client_id.to_owned())
    } else if pending.len() >= MAX_PENDING {
        per_client
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(c, _)| (*c).to_owned())
    } else {
        None
    };
    let Some(victim) = victim else { return };
    if let Some(oldest) = pending
        .iter()
        .filter(|(_, p)| p.client.id == victim)
        .min_by_key(|(_, p)| p.created)
        .map(|(k, _)| k.clone())
    {
        pending.remove(&oldest);
    }
}

impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthServer")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl AuthServer {
    pub fn new(
        issuer: String,
        resource: String,
        vault: String,
        write_allowed: bool,
        store: Arc<Store>,
        docs: Option<ClientDocs>,
    ) -> AuthServer {
        AuthServer {
            issuer,
            resource,
            vault,
            write_allowed,
            store,
            pending: Mutex::new(HashMap::new()),
            codes: Mutex::new(HashMap::new()),
            spent: Mutex::new(HashMap::new()),
            failures: Mutex::new(VecDeque::new()),
            by_address: Mutex::new(HashMap::new()),
            registrations: Mutex::new(VecDeque::new()),
            docs,
            hashing: tokio::sync::Semaphore::new(MAX_HASHING),
        }
    }

    /// The client `id`: registered, or (with documents accepted) the one its metadata
    /// document describes.
    async fn find_client(&self, id: &str) -> Result<Client, ClientError> {
        if let Some(docs) = &self.docs
            && client_doc::is_document_id(id)
        {
            return docs.client(id).await.map_err(ClientError::Document);
        }
        match self.store.client(id) {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(ClientError::Unknown),
            Err(e) => Err(ClientError::Store(e)),
        }
    }

    /// The store's folder, for the sandbox's rules.
    pub fn store_files(&self) -> &crate::vault::state::PrivateFiles {
        self.store.files()
    }

    /// RFC 8414 metadata.
    pub fn metadata(&self) -> Value {
        let i = &self.issuer;
        let mut m = json!({
            "issuer": i,
            "authorization_endpoint": format!("{i}/oauth/authorize"),
            "token_endpoint": format!("{i}/oauth/token"),
            "registration_endpoint": format!("{i}/oauth/register"),
            "revocation_endpoint": format!("{i}/oauth/revoke"),
            "scopes_supported": self.scopes(),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported":
                ["none", "client_secret_post", "client_secret_basic"],
            "revocation_endpoint_auth_methods_supported":
                ["none", "client_secret_post", "client_secret_basic"],
            "authorization_response_iss_parameter_supported": true,
        });
        if self.docs.is_some() {
            m["client_id_metadata_document_supported"] = json!(true);
        }
        m
    }

    fn scopes(&self) -> Vec<&'static str> {
        if self.write_allowed {
            vec![SCOPE_READ, SCOPE_WRITE]
        } else {
            vec![SCOPE_READ]
        }
    }

    /// Parses a requested scope: `Some(write)`, or `None` for an unknown or unavailable one.
    /// No scope means read.
    fn parse_scope(&self, scope: Option<&str>) -> Option<bool> {
        let mut write = false;
        for s in scope.unwrap_or("").split_whitespace() {
            match s {
                SCOPE_READ => {}
                SCOPE_WRITE if self.write_allowed => write = true,
                _ => return None,
            }
        }
        Some(write)
    }

    fn resource_ok(&self, resource: Option<&str>) -> bool {
        resource.is_none_or(|r| r.trim_end_matches('/') == self.resource)
    }
}

/// A form or query, as pairs; `Err` when a parameter is given twice (RFC 6749 3.1).
fn params(raw: &str) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(raw.as_bytes()) {
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("`{k}` is given twice"));
        }
    }
    Ok(out)
}

fn html(status: StatusCode, body: String, form_action: Option<&str>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&page::csp(form_action)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(
        header::REFERRER_POLICY,
        // `same-origin`: the consent form's POST must carry this server's Origin (with
        // `no-referrer` a browser sends `Origin: null`, which the guard refuses), and nothing
        // leaks to the client's site.
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

fn error_page(status: StatusCode, title: &str, text: &str) -> Response {
    html(status, page::message(title, text), None)
}

/// A 303 to `uri` with `pairs` added to its query.
fn redirect(uri: &str, pairs: &[(&str, &str)]) -> Response {
    let Ok(mut u) = url::Url::parse(uri) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Bad redirect",
            "The client's redirect URI is not valid.",
        );
    };
    {
        let mut q = u.query_pairs_mut();
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
    }
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(u.as_str()) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn redirect_error(
    uri: &str,
    state: Option<&str>,
    issuer: &str,
    error: &str,
    why: &str,
) -> Response {
    let mut pairs = vec![("error", error), ("error_description", why)];
    if let Some(s) = state {
        pairs.push(("state", s));
    }
    pairs.push(("iss", issuer));
    redirect(uri, &pairs)
}

/// A JSON error of the token and registration endpoints.
fn json_error(status: StatusCode, error: &str, why: &str) -> Response {
    let mut r = (
        status,
        Json(json!({"error": error, "error_description": why})),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn server_error(e: std::io::Error) -> Response {
    tracing::error!(error = %e, "the authorization server's store failed");
    json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "the authorization server could not read or write its state",
    )
}

/// The host that published a client's metadata document (its `client_id` URL), if it has one.
fn publisher(client_id: &str) -> Option<String> {
    if !client_doc::is_document_id(client_id) {
        return None;
    }
    url::Url::parse(client_id)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
}

/// Where a redirect URI leads, as the consent page shows it, and the CSP source that lets the
/// form's redirect go there.
fn redirect_target(uri: &str) -> (String, String) {
    match url::Url::parse(uri) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => {
            let host = u.host_str().unwrap_or("").to_owned();
            let shown = match (u.scheme(), u.port()) {
                ("https", None) => host,
                (_, Some(p)) => format!("{}://{host}:{p}", u.scheme()),
                (s, None) => format!("{s}://{host}"),
            };
            (shown, u.origin().ascii_serialization())
        }
        Ok(u) => (
            format!("the app that handles {}: links", u.scheme()),
            format!("{}:", u.scheme()),
        ),
        Err(_) => (uri.to_owned(), "'none'".to_owned()),
    }
}

/// Checks one redirect URI of a registration: no fragment; https, http on a loopback address,
/// or an app's own scheme (not one a browser runs or reads files with).
pub(super) fn check_redirect_uri(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_URI_LEN {
        return Err("a redirect URI is too long".to_owned());
    }
    let u = url::Url::parse(uri).map_err(|_| format!("`{uri}` is not a URL"))?;
    if u.fragment().is_some() {
        return Err(format!("`{uri}` has a fragment"));
    }
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match u.scheme() {
        "https" if u.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" | "https" => Err(format!(
            "`{uri}`: http is allowed only on a loopback address"
        )),
        "javascript" | "data" | "file" | "vbscript" | "blob" | "about" | "filesystem" | "ftp"
        | "ws" | "wss" => Err(format!("`{uri}`: that scheme is not allowed")),
        _ => Ok(()),
    }
}

/// Checks the client's credentials at the token and revocation endpoints: its id, and its
/// secret when it registered one.
async fn authenticate_client(
    auth: &AuthServer,
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Result<Client, Box<Response>> {
    let invalid = || {
        let mut r = json_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "unknown client or wrong client credentials",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"capvault\""),
        );
        r
    };
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then_some(rest.trim())
        })
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| {
            let (id, secret) = s.split_once(':')?;
            let dec = |x: &str| {
                percent_encoding::percent_decode_str(x)
                    .decode_utf8()
                    .ok()
                    .map(|c| c.into_owned())
            };
            Some((dec(id)?, dec(secret)?))
        });
    let (id, secret) = match &basic {
        Some((id, secret)) => (id.clone(), Some(secret.clone())),
        None => (
            form.get("client_id").cloned().unwrap_or_default(),
            form.get("client_secret").cloned(),
        ),
    };
    let client = match auth.find_client(&id).await {
        Ok(c) => c,
        Err(ClientError::Unknown) => return Err(Box::new(invalid())),
        Err(ClientError::Document(why)) => {
            return Err(Box::new(json_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                &why,
            )));
        }
        Err(ClientError::Store(e)) => return Err(Box::new(server_error(e))),
    };
    match &client.secret {
        None => Ok(client),
        Some(kept) => {
            let Some(secret) = secret else {
                return Err(Box::new(invalid()));
            };
            let presented = store::digest(&secret);
            let kept = store::unhex(kept);
            if kept.is_some_and(|k| bool::from(k.ct_eq(&presented))) {
                Ok(client)
            } else {
                Err(Box::new(invalid()))
            }
        }
    }
}

/// A client's name as the consent page shows it: at most [`MAX_NAME_CHARS`], a stand-in when it
/// is missing or blank. A name holding a control character or an invisible one (a text-direction
/// override, a zero-width character, a tag character: they could reorder or hide what the page
/// says around it) is refused, with the reason.
pub(super) fn client_name(given: Option<&str>) -> Result<String, String> {
    if let Some(c) = given.and_then(page::forbidden_char) {
        return Err(format!(
            "`client_name` holds U+{:04X}, an invisible or control character (text-direction \
             and zero-width characters are refused: they can disguise the name)",
            c as u32
        ));
    }
    Ok(given
        .map(|n| n.chars().take(MAX_NAME_CHARS).collect::<String>())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "An unnamed application".to_owned()))
}

/// `POST /oauth/register`: RFC 7591 dynamic client registration.
pub async fn register(State(auth): State<Arc<AuthServer>>, body: axum::body::Bytes) -> Response {
    if !admit(
        &auth.registrations,
        REGISTER_WINDOW,
        REGISTRATIONS_PER_WINDOW,
    ) {
        let mut r = json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            "too many registrations; try again later",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return r;
    }
    let bad = |why: String| json_error(StatusCode::BAD_REQUEST, "invalid_client_metadata", &why);
    let Ok(meta) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body is not a JSON object".to_owned());
    };
    let Some(meta) = meta.as_object() else {
        return bad("the body is not a JSON object".to_owned());
    };
    let uris: Vec<String> = match meta.get("redirect_uris").and_then(Value::as_array) {
        Some(list) if !list.is_empty() && list.len() <= MAX_REDIRECT_URIS => {
            let mut out = Vec::new();
            for u in list {
                let Some(u) = u.as_str() else {
                    return bad("`redirect_uris` holds something that is not a string".into());
                };
                if let Err(e) = check_redirect_uri(u) {
                    return json_error(StatusCode::BAD_REQUEST, "invalid_redirect_uri", &e);
                }
                out.push(u.to_owned());
            }
            out
        }
        _ => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "invalid_redirect_uri",
                &format!("`redirect_uris` must list 1 to {MAX_REDIRECT_URIS} URIs"),
            );
        }
    };
    let method = meta
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .unwrap_or("client_secret_basic")
        .to_owned();
    if !matches!(
        method.as_str(),
        "none" | "client_secret_post" | "client_secret_basic"
    ) {
        return bad(format!(
            "token_endpoint_auth_method `{method}` is not supported"
        ));
    }
    for (key, allowed) in [
        ("grant_types", &["authorization_code", "refresh_token"][..]),
        ("response_types", &["code"][..]),
    ] {
        if let Some(list) = meta.get(key) {
            let ok = list.as_array().is_some_and(|l| {
                l.iter()
                    .all(|v| v.as_str().is_some_and(|s| allowed.contains(&s)))
            });
            if !ok {
                return bad(format!("`{key}` may hold only {}", allowed.join(", ")));
            }
        }
    }
    let name = match client_name(meta.get("client_name").and_then(Value::as_str)) {
        Ok(n) => n,
        Err(why) => return bad(why),
    };
    let id = match store::random_secret("cvc_") {
        Ok(s) => s[..28].to_owned(),
        Err(e) => return server_error(e),
    };
    let secret = if method == "none" {
        None
    } else {
        match store::random_secret("cvs_") {
            Ok(s) => Some(s),
            Err(e) => return server_error(e),
        }
    };
    let created = store::now();
    let client = Client {
        id: id.clone(),
        secret: secret
            .as_deref()
            .map(|s| base16ct::lower::encode_string(&store::digest(s))),
        name: name.clone(),
        redirect_uris: uris.clone(),
        auth_method: method.clone(),
        created,
    };
    match auth.store.register(client) {
        Ok(true) => {}
        Ok(false) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "every client place is taken by a client with access; revoke some first",
            );
        }
        Err(e) => return server_error(e),
    }
    record(&auth.registrations);
    tracing::info!(client = %id, name = %name, "a client registered");
    let mut reply = json!({
        "client_id": id,
        "client_id_issued_at": created,
        "client_name": name,
        "redirect_uris": uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "scope": auth.scopes().join(" "),
    });
    if let Some(s) = secret {
        reply["client_secret"] = json!(s);
        reply["client_secret_expires_at"] = json!(0);
    }
    let mut r = (StatusCode::CREATED, Json(reply)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /oauth/authorize`: checks the request and shows the consent page.
pub async fn authorize_page(State(auth): State<Arc<AuthServer>>, uri: http::Uri) -> Response {
    let q = match params(uri.query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", &e),
    };
    let get = |k: &str| q.get(k).map(String::as_str);
    // The client and its redirect URI first: until both check out, nothing redirects.
    let found = match get("client_id") {
        Some(id) => auth.find_client(id).await,
        None => Err(ClientError::Unknown),
    };
    let client = match found {
        Ok(c) => c,
        Err(ClientError::Store(e)) => {
            tracing::error!(error = %e, "the authorization server's store failed");
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Server error",
                "capvault could not read its state.",
            );
        }
        Err(ClientError::Document(why)) => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Application not verified",
                &format!("capvault could not use this application's metadata: {why}"),
            );
        }
        Err(ClientError::Unknown) => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Unknown application",
                "This application is not registered with capvault. Start the connection \
                 again from the application.",
            );
        }
    };
    let redirect_uri = match get("redirect_uri") {
        Some(r) if client.redirect_uris.iter().any(|u| u == r) => r.to_owned(),
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        _ => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Wrong redirect address",
                "The address this request would return to is not one the application \
                 registered, so capvault will not send you there.",
            );
        }
    };
    let state = get("state").map(str::to_owned);
    let fail = |error: &str, why: &str| {
        redirect_error(&redirect_uri, state.as_deref(), &auth.issuer, error, why)
    };
    if get("response_type") != Some("code") {
        return fail(
            "unsupported_response_type",
            "only response_type=code is supported",
        );
    }
    let Some(challenge) = get("code_challenge") else {
        return fail(
            "invalid_request",
            "PKCE is required: code_challenge is missing",
        );
    };
    if get("code_challenge_method") != Some("S256") {
        return fail(
            "invalid_request",
            "PKCE must use code_challenge_method=S256",
        );
    }
    if challenge.len() != 43
        || !challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return fail("invalid_request", "code_challenge is not an S256 challenge");
    }
    let Some(write) = auth.parse_scope(get("scope")) else {
        return fail(
            "invalid_scope",
            &format!("the scopes offered are: {}", auth.scopes().join(" ")),
        );
    };
    if !auth.resource_ok(get("resource")) {
        return fail(
            "invalid_target",
            &format!("this server's resource is {}", auth.resource),
        );
    }
    let (request, csrf) = match (store::random_secret(""), store::random_secret("")) {
        (Ok(r), Ok(c)) => (r, c),
        _ => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Server error",
                "No randomness from the system.",
            );
        }
    };
    let (shown, source) = redirect_target(&redirect_uri);
    let body = page::consent(&page::Consent {
        vault: &auth.vault,
        client_name: &client.name,
        publisher: publisher(&client.id).as_deref(),
        redirect_to: &shown,
        write,
        request: &request,
        csrf: &csrf,
        error: None,
    });
    {
        let mut pending = lock(&auth.pending);
        make_room(&mut pending, &client.id);
        pending.insert(
            request,
            Pending {
                client,
                redirect_uri,
                state,
                challenge: challenge.to_owned(),
                write,
                csrf,
                created: Instant::now(),
                failures: 0,
            },
        );
    }
    html(StatusCode::OK, body, Some(&source))
}

/// `POST /oauth/authorize`: the owner's answer on the consent page.
pub async fn authorize_answer(
    State(auth): State<Arc<AuthServer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: String,
) -> Response {
    let form = match params(&body) {
        Ok(f) => f,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", &e),
    };
    let get = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
    let expired = || {
        error_page(
            StatusCode::BAD_REQUEST,
            "This request has ended",
            "It expired, was answered already, or saw too many wrong passphrases. Start the \
             connection again from the application.",
        )
    };
    let request = get("request").to_owned();
    // The pending request and its CSRF token, taken out while the passphrase is checked (a
    // second submit of the same form finds nothing).
    let mut p = {
        let mut pending = lock(&auth.pending);
        match pending.remove(&request) {
            Some(p) if p.created.elapsed() < PENDING_TTL => p,
            _ => return expired(),
        }
    };
    if !bool::from(p.csrf.as_bytes().ct_eq(get("csrf").as_bytes())) {
        return error_page(
            StatusCode::FORBIDDEN,
            "Request refused",
            "The form did not come from this consent page. Start again from the application.",
        );
    }
    if get("decision") == "deny" {
        tracing::info!(client = %p.client.name, "the owner denied access");
        return redirect_error(
            &p.redirect_uri,
            p.state.as_deref(),
            &auth.issuer,
            "access_denied",
            "the owner denied access",
        );
    }
    if get("decision") != "allow" {
        return error_page(StatusCode::BAD_REQUEST, "Bad request", "No decision given.");
    }
    let (shown, source) = redirect_target(&p.redirect_uri);
    let rerender = |p: &mut Pending, status: StatusCode, error: &str| -> Response {
        let csrf = store::random_secret("").unwrap_or_default();
        p.csrf = csrf.clone();
        let body = page::consent(&page::Consent {
            vault: &auth.vault,
            client_name: &p.client.name,
            publisher: publisher(&p.client.id).as_deref(),
            redirect_to: &shown,
            write: p.write,
            request: &request,
            csrf: &csrf,
            error: Some(error),
        });
        html(status, body, Some(&source))
    };
    // Checks run two at a time, and the failure counts are read inside that: concurrent wrong
    // guesses cannot all slip under the limits.
    let Ok(_hashing) = auth.hashing.acquire().await else {
        return expired();
    };
    if let Some(wait) = address_wait(&auth.by_address, peer.ip()) {
        let secs = wait.as_secs() + 1;
        let mut r = rerender(
            &mut p,
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many wrong passphrases from here. Wait {secs} s, then try again."),
        );
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        lock(&auth.pending).insert(request.clone(), p);
        return r;
    }
    if !admit(&auth.failures, FAILURE_WINDOW, FAILURES_PER_WINDOW) {
        // Many wrong guesses from many places: slow every check down, refuse none.
        tokio::time::sleep(SLOW_CHECK).await;
    }
    let passphrase = get("passphrase").to_owned();
    let store = Arc::clone(&auth.store);
    let verified = tokio::task::spawn_blocking(move || store.verify_passphrase(&passphrase)).await;
    let ok = match verified {
        Ok(Ok(ok)) => ok,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "the passphrase hash cannot be read");
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Server error",
                "capvault could not check the passphrase. Set it again with `capvault passwd`.",
            );
        }
        Err(_) => false,
    };
    if !ok {
        record(&auth.failures);
        address_failed(&auth.by_address, peer.ip());
        p.failures += 1;
        tracing::warn!(client = %p.client.name, failures = p.failures, "a wrong passphrase on the consent page");
        if p.failures >= FAILURES_PER_REQUEST {
            return expired();
        }
        let r = rerender(
            &mut p,
            StatusCode::UNAUTHORIZED,
            "That passphrase is not right. Try again.",
        );
        lock(&auth.pending).insert(request.clone(), p);
        return r;
    }
    lock(&auth.by_address).remove(&peer.ip());
    let write = p.write && !form.contains_key("read_only");
    let code = match store::random_secret("cvo_") {
        Ok(c) => c,
        Err(_) => return expired(),
    };
    {
        let mut codes = lock(&auth.codes);
        codes.retain(|_, c| c.created.elapsed() < CODE_TTL);
        codes.insert(
            store::digest(&code),
            Code {
                client_id: p.client.id.clone(),
                redirect_uri: p.redirect_uri.clone(),
                challenge: p.challenge.clone(),
                write,
                created: Instant::now(),
            },
        );
    }
    tracing::info!(client = %p.client.name, write, "the owner allowed access");
    let mut pairs = vec![("code", code.as_str())];
    if let Some(s) = &p.state {
        pairs.push(("state", s));
    }
    pairs.push(("iss", &auth.issuer));
    redirect(&p.redirect_uri, &pairs)
}

/// The token endpoint's reply.
fn tokens_reply(issued: &store::Issued) -> Response {
    let scope = if issued.write {
        format!("{SCOPE_READ} {SCOPE_WRITE}")
    } else {
        SCOPE_READ.to_owned()
    };
    let mut r = Json(json!({
        "access_token": issued.access,
        "token_type": "Bearer",
        "expires_in": store::ACCESS_TTL.as_secs(),
        "refresh_token": issued.refresh,
        "scope": scope,
    }))
    .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut()
        .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    r
}

/// `POST /oauth/token`: codes and refresh tokens for tokens.
pub async fn token(
    State(auth): State<Arc<AuthServer>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form = match params(&body) {
        Ok(f) => f,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "invalid_request", &e),
    };
    let client = match authenticate_client(&auth, &headers, &form).await {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let get = |k: &str| form.get(k).map(String::as_str);
    let grant = |why: &str| json_error(StatusCode::BAD_REQUEST, "invalid_grant", why);
    if !auth.resource_ok(get("resource")) {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            &format!("this server's resource is {}", auth.resource),
        );
    }
    match get("grant_type") {
        Some("authorization_code") => {
            let Some(code) = get("code") else {
                return json_error(StatusCode::BAD_REQUEST, "invalid_request", "no code");
            };
            let d = store::digest(code);
            let found = lock(&auth.codes).remove(&d);
            let Some(c) = found else {
                let again = {
                    let mut spent = lock(&auth.spent);
                    spent.retain(|_, (_, t)| t.elapsed() < PENDING_TTL);
                    spent.remove(&d)
                };
                if let Some((grant_id, _)) = again {
                    tracing::warn!(grant = %grant_id, "a code was used twice: its grant is revoked");
                    if let Err(e) = auth.store.revoke(&grant_id) {
                        return server_error(e);
                    }
                    return grant("the code was used already; what it gave is revoked");
                }
                return grant("unknown or expired code");
            };
            if c.created.elapsed() >= CODE_TTL {
                return grant("the code expired");
            }
            if c.client_id != client.id {
                return grant("the code was issued to another client");
            }
            if get("redirect_uri").is_some_and(|r| r != c.redirect_uri)
                || (get("redirect_uri").is_none() && client.redirect_uris.len() != 1)
            {
                return grant("redirect_uri does not match the authorization request");
            }
            let Some(verifier) = get("code_verifier") else {
                return grant("code_verifier is missing (PKCE)");
            };
            let well_formed = (43..=128).contains(&verifier.len())
                && verifier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(verifier.as_bytes()));
            if !well_formed || !bool::from(computed.as_bytes().ct_eq(c.challenge.as_bytes())) {
                return grant("code_verifier does not match the code_challenge");
            }
            match auth.store.grant(&client, c.write) {
                Ok(Some(issued)) => {
                    lock(&auth.spent).insert(d, (issued.grant.clone(), Instant::now()));
                    tracing::info!(grant = %issued.grant, client = %client.name, "tokens issued");
                    tokens_reply(&issued)
                }
                Ok(None) => json_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "temporarily_unavailable",
                    "too many grants; revoke some with `capvault tokens revoke`",
                ),
                Err(e) => server_error(e),
            }
        }
        Some("refresh_token") => {
            let Some(refresh) = get("refresh_token") else {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "no refresh_token",
                );
            };
            let want = match get("scope") {
                None => None,
                Some(s) => match auth.parse_scope(Some(s)) {
                    Some(w) => Some(w),
                    None => {
                        return json_error(
                            StatusCode::BAD_REQUEST,
                            "invalid_scope",
                            "unknown scope",
                        );
                    }
                },
            };
            match auth.store.refresh_grant(&client.id, refresh, want) {
                Ok(Ok(issued)) => tokens_reply(&issued),
                Ok(Err(RefreshError::Reused)) => {
                    grant("the refresh token was used already; the grant is revoked")
                }
                Ok(Err(RefreshError::Scope)) => json_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_scope",
                    "the grant does not include vault:write",
                ),
                Ok(Err(RefreshError::Invalid)) => {
                    grant("unknown, expired or revoked refresh token")
                }
                Err(e) => server_error(e),
            }
        }
        Some(other) => json_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!("grant_type `{other}` is not supported"),
        ),
        None => json_error(StatusCode::BAD_REQUEST, "invalid_request", "no grant_type"),
    }
}

/// `POST /oauth/revoke`: RFC 7009 (the whole grant goes). A client revokes only its own tokens
/// (2.1): another client's token is refused with `unauthorized_client` and stays valid; an
/// unknown one is not an error.
pub async fn revoke(
    State(auth): State<Arc<AuthServer>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form = match params(&body) {
        Ok(f) => f,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "invalid_request", &e),
    };
    let client = match authenticate_client(&auth, &headers, &form).await {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let Some(token) = form.get("token") else {
        return json_error(StatusCode::BAD_REQUEST, "invalid_request", "no token");
    };
    match auth.store.revoke_token(&client.id, token) {
        Ok(store::Revoked::Yes | store::Revoked::Unknown) => StatusCode::OK.into_response(),
        Ok(store::Revoked::OtherClient) => {
            tracing::warn!(client = %client.id, "a client tried to revoke another client's token");
            json_error(
                StatusCode::BAD_REQUEST,
                "unauthorized_client",
                "the token was not issued to this client",
            )
        }
        Err(e) => server_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_that_could_run_or_leak_are_refused() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost:8080/cb",
            "http://[::1]:9/cb",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "https://x.example/cb#frag",
            "not a url",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_address_waits_twice_as_long_after_each_failure_past_its_free_ones() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(FREE_FAILURES_PER_ADDRESS - 1), Duration::ZERO);
        assert_eq!(backoff(FREE_FAILURES_PER_ADDRESS), Duration::from_secs(1));
        assert_eq!(
            backoff(FREE_FAILURES_PER_ADDRESS + 3),
            Duration::from_secs(8)
        );
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        let by = Mutex::new(HashMap::new());
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..FREE_FAILURES_PER_ADDRESS {
            assert_eq!(address_wait(&by, a), None);
            address_failed(&by, a);
        }
        assert!(address_wait(&by, a).is_some(), "the address waits");
        assert_eq!(address_wait(&by, b), None, "another address does not");
    }

    fn pending_of(client: &str, age: u64) -> Pending {
        Pending {
            client: Client {
                id: client.to_owned(),
                secret: None,
                name: client.to_owned(),
                redirect_uris: vec![],
                auth_method: "none".to_owned(),
                created: 0,
            },
            redirect_uri: String::new(),
            state: None,
            challenge: String::new(),
            write: false,
            csrf: String::new(),
            created: Instant::now() - Duration::from_secs(age),
            failures: 0,
        }
    }

    #[test]
    fn a_flood_of_consent_pages_evicts_only_the_flooding_clients_own() {
        let mut pending = HashMap::new();
        pending.insert("owner".to_owned(), pending_of("good", 500));
        for i in 0..10_000u64 {
            make_room(&mut pending, "evil");
            pending.insert(format!("e{i}"), pending_of("evil", 400));
        }
        assert!(
            pending.contains_key("owner"),
            "the owner's request was evicted"
        );
        assert_eq!(pending.len(), 1 + MAX_PENDING_PER_CLIENT);
        // Many flooding clients fill the whole table: the one holding the most pays.
        for c in 0..(MAX_PENDING as u64) {
            for i in 0..3u64 {
                let id = format!("x{c}");
                make_room(&mut pending, &id);
                pending.insert(format!("x{c}-{i}"), pending_of(&id, 300));
            }
        }
        assert!(pending.len() <= MAX_PENDING);
        assert!(
            pending.contains_key("owner"),
            "the owner's request was evicted"
        );
    }

    #[test]
    fn a_parameter_given_twice_is_refused() {
        assert!(params("a=1&b=2").is_ok());
        assert!(params("a=1&a=2").unwrap_err().contains("`a`"));
    }

    #[test]
    fn the_consent_page_names_where_the_browser_returns() {
        assert_eq!(redirect_target("https://claude.ai/api/cb").0, "claude.ai");
        assert_eq!(
            redirect_target("http://127.0.0.1:5000/cb"),
            (
                "http://127.0.0.1:5000".to_owned(),
                "http://127.0.0.1:5000".to_owned()
            )
        );
        assert_eq!(redirect_target("cursor://x/cb").1, "cursor:");
    }
}
