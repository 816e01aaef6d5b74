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
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::client_doc::{self, ClientDocs};
use super::page;
use super::store::{self, Client, Store};
use super::{SCOPE_READ, SCOPE_WRITE};

mod consent;
mod register;
mod revoke;
mod token;

pub use consent::{authorize_answer, authorize_page};
pub use register::register;
pub use revoke::revoke;
pub use token::token;

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

/// The authorization server's state.
pub struct AuthServer {
    pub(super) issuer: String,
    resource: String,
    /// The vault's name, or the names of the vaults a server of several serves (the owner
    /// chooses which a client may use).
    vaults: Vec<String>,
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
    Document(client_doc::DocError),
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
    /// The vaults the owner allowed (a server of several), else `None`.
    vaults: Option<Vec<String>>,
    created: Instant,
}

use crate::locks::lock;

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
    // Per client: how many pages are pending, and when the newest was opened.
    let mut per_client: HashMap<&str, (usize, Instant)> = HashMap::new();
    for p in pending.values() {
        let e = per_client
            .entry(p.client.id.as_str())
            .or_insert((0, p.created));
        e.0 += 1;
        e.1 = e.1.max(p.created);
    }
    let victim = if per_client.get(client_id).map_or(0, |e| e.0) >= MAX_PENDING_PER_CLIENT {
        Some(client_id.to_owned())
    } else if pending.len() >= MAX_PENDING {
        // The client holding the most pays; among equals, the one that arrived last (a flood
        // of new clients does not push out a person's page opened before it), never by the
        // hash map's order.
        per_client
            .iter()
            .max_by_key(|(c, e)| (e.0, e.1, *c))
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
        vaults: Vec<String>,
        write_allowed: bool,
        store: Arc<Store>,
        docs: Option<ClientDocs>,
    ) -> AuthServer {
        AuthServer {
            issuer,
            resource,
            vaults,
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
    pub fn store_files(&self) -> &crate::vault::private::PrivateDir {
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

/// A parameter given twice in a form or query.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is given twice")]
struct Repeated(String);

/// A form or query, as pairs; `Err` when a parameter is given twice (RFC 6749 3.1).
fn params(raw: &str) -> Result<HashMap<String, String>, Repeated> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(raw.as_bytes()) {
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(Repeated(k.into_owned()));
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

/// The form of a token or revocation request and the client it authenticates (400 for a bad
/// form, 401 for bad credentials): what both endpoints do first.
async fn client_form(
    auth: &AuthServer,
    headers: &HeaderMap,
    body: &str,
) -> Result<(HashMap<String, String>, Client), Box<Response>> {
    let form = params(body).map_err(|e| {
        Box::new(json_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &e.to_string(),
        ))
    })?;
    let client = authenticate_client(auth, headers, &form).await?;
    Ok((form, client))
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
                &why.to_string(),
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

#[cfg(test)]
mod tests {
    use super::consent::redirect_target;
    use super::*;

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
    fn a_flood_of_new_clients_never_evicts_an_older_page_of_equal_weight() {
        // The table full of clients with one page each, the person's the oldest: every new
        // client's page pushes out the newest other one, never the person's. (Chosen in the
        // hash map's order, the person's page went about once in 256 evictions.)
        let mut pending = HashMap::new();
        pending.insert("owner".to_owned(), pending_of("good", 500));
        for c in 1..MAX_PENDING {
            pending.insert(format!("f{c}"), pending_of(&format!("f{c}"), 400));
        }
        for c in 0..3000u64 {
            let id = format!("n{c}");
            make_room(&mut pending, &id);
            pending.insert(format!("n{c}"), pending_of(&id, 300));
            assert!(
                pending.contains_key("owner"),
                "evicted after {c} new clients"
            );
        }
        assert_eq!(pending.len(), MAX_PENDING);
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
        assert_eq!(
            params("a=1&a=2").unwrap_err().to_string(),
            "`a` is given twice"
        );
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
