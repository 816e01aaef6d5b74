//! `GET` and `POST /oauth/authorize`: the request's checks, the consent page, and the owner's
//! answer (passphrase, CSRF token, per-address backoff) turned into a code or an error redirect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use subtle::ConstantTimeEq;

use crate::http::oauth::{client_doc, page, store};
use crate::locks::lock;

use super::{
    AuthServer, CODE_TTL, ClientError, Code, FAILURE_WINDOW, FAILURES_PER_REQUEST,
    FAILURES_PER_WINDOW, PENDING_TTL, Pending, SLOW_CHECK, address_failed, address_wait, admit,
    error_page, html, make_room, params, record, redirect, redirect_error,
};

/// The host that published a client's metadata document (its `client_id` URL), if it has one.
pub(super) fn publisher(client_id: &str) -> Option<String> {
    if !client_doc::is_document_id(client_id) {
        return None;
    }
    url::Url::parse(client_id)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
}

/// Where a redirect URI leads, as the consent page shows it, and the CSP source that lets the
/// form's redirect go there.
pub(super) fn redirect_target(uri: &str) -> (String, String) {
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

/// `GET /oauth/authorize`: checks the request and shows the consent page.
pub async fn authorize_page(State(auth): State<Arc<AuthServer>>, uri: http::Uri) -> Response {
    let q = match params(uri.query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", &e.to_string()),
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
        vaults: &auth.vaults,
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
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", &e.to_string()),
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
            vaults: &auth.vaults,
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
    // A server of several vaults: those the owner left ticked (at least one).
    let vaults = (auth.vaults.len() > 1).then(|| {
        auth.vaults
            .iter()
            .filter(|v| form.contains_key(&format!("vault.{v}")))
            .cloned()
            .collect::<Vec<_>>()
    });
    if vaults.as_ref().is_some_and(Vec::is_empty) {
        let r = rerender(
            &mut p,
            StatusCode::BAD_REQUEST,
            "Tick at least one vault, or deny.",
        );
        lock(&auth.pending).insert(request.clone(), p);
        return r;
    }
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
                vaults: vaults.clone(),
                created: Instant::now(),
            },
        );
    }
    tracing::info!(client = %p.client.name, write, vaults = ?vaults, "the owner allowed access");
    let mut pairs = vec![("code", code.as_str())];
    if let Some(s) = &p.state {
        pairs.push(("state", s));
    }
    pairs.push(("iss", &auth.issuer));
    redirect(&p.redirect_uri, &pairs)
}
