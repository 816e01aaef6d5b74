//! Admission of a request to `/mcp` and the OAuth endpoints, step by step: shutting down,
//! Host and Origin, the OAuth endpoints' own limits, the bearer token, session ownership,
//! places in flight, the body's size and time, tool scopes, room for a new session, the
//! request's deadline and the reply's cap.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use tokio::sync::OwnedSemaphorePermit;

use crate::server::Grant;

use super::{
    Access, AuthError, Call, Capped, ClientSlot, Gate, StreamTimeout, auth, authenticate,
    cancel_in_session, insufficient_scope, oauth, refuse, rpc_calls, unauthorized,
};

/// Lets a request through, or answers it: each step below either passes the request on or
/// refuses it, in this order (the OAuth endpoints, the health check and CORS preflights leave
/// early, after the host and origin checks).
pub(super) async fn admit(
    gate: &Arc<Gate>,
    peer: SocketAddr,
    request: Request,
    next: Next,
    access: &mut Access,
) -> Response {
    match admit_steps(gate, peer, request, next, access).await {
        Ok(response) => response,
        Err(refused) => *refused,
    }
}

/// The steps of [`admit`]; `Err` is a refusal (boxed: a response is large).
async fn admit_steps(
    gate: &Arc<Gate>,
    peer: SocketAddr,
    mut request: Request,
    next: Next,
    access: &mut Access,
) -> Result<Response, Box<Response>> {
    check_open(gate)?;
    if check_host_and_origin(gate, &request)? {
        return Ok(run_oauth_endpoint(gate, request, next).await);
    }
    // The health check, and CORS preflights from allowed origins (a browser sends them without
    // credentials; the CORS layer answers them).
    if request.uri().path() == "/healthz" || request.method() == Method::OPTIONS {
        return Ok(next.run(request).await);
    }

    let (grant, holder) = authenticate_request(gate, request.headers()).await?;
    // The connection is an authenticated client's: it keeps its place at the connection bounds.
    if let Some(proven) = request.extensions().get::<super::conn::Proven>() {
        proven.prove();
    }
    access.token = Some(grant.id.clone());
    let session_id = check_session_owner(gate, &request, &grant, &holder)?;

    if request.method() == Method::DELETE {
        return end_session(gate, request, next, grant, session_id).await;
    }
    if request.method() != Method::POST {
        // GET opens a session's event stream: no body, nothing to run.
        request.extensions_mut().insert(grant);
        return Ok(next.run(request).await);
    }

    let held = take_places(gate, peer, &grant, session_id.as_deref())?;
    // The body is read under the request's time too: a client that sends it slowly holds its
    // places in flight only that long (a slow-body attack gets 408).
    let deadline = tokio::time::Instant::now() + gate.limits.request_timeout;
    let (parts, bytes) = read_body(gate, request, deadline).await?;
    let calls = rpc_calls(&bytes);
    if let Some(first) = calls.first() {
        access.rpc = Some(first.method.clone());
        access.tool = first.tool.clone();
    }
    check_tool_scopes(gate, &grant, &calls)?;
    let initializing = if calls.iter().any(|c| c.method == "initialize") {
        Some(check_session_room(gate, &holder).await?)
    } else {
        None
    };

    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(grant);
    let response =
        run_in_time(gate, request, next, deadline, session_id.as_deref(), &calls).await?;
    if initializing.is_some()
        && let Some(sid) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        crate::locks::lock(&gate.owners).insert(sid.to_owned(), holder);
    }
    drop(initializing);
    Ok(cap_reply(gate, response, deadline, session_id, calls, held))
}

/// Refuses every request once the server is shutting down (503, retry later).
fn check_open(gate: &Gate) -> Result<(), Box<Response>> {
    if gate.shutting_down.load(Ordering::SeqCst) {
        return Err(Box::new(
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down",
            )
            .retry_after(),
        ));
    }
    Ok(())
}

/// Checks the `Host` header (DNS rebinding) and the `Origin` (403 when not allowed); true for
/// an OAuth endpoint. OAuth metadata, registration and token requests come from clients of any
/// origin (they carry their own credentials); the consent page and /mcp only from allowed ones.
fn check_host_and_origin(gate: &Gate, request: &Request) -> Result<bool, Box<Response>> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    if let Err(why) = gate.guard.check_host(host.as_deref()) {
        return Err(Box::new(refuse(StatusCode::FORBIDDEN, why).into()));
    }
    let path = request.uri().path();
    let oauth_path = gate.oauth.is_some() && oauth::ResourceServer::is_oauth_path(path);
    if !(oauth_path && oauth::ResourceServer::is_cross_origin_path(path)) {
        let origin = request.headers().get(header::ORIGIN).map(|o| o.as_bytes());
        if let Err(why) = gate.guard.check_origin(origin) {
            return Err(Box::new(refuse(StatusCode::FORBIDDEN, why).into()));
        }
    }
    Ok(oauth_path)
}

/// Runs an OAuth endpoint's request within the server's places in flight and the request
/// timeout (it needs no bearer token).
async fn run_oauth_endpoint(gate: &Arc<Gate>, request: Request, next: Next) -> Response {
    let Ok(_total) = Arc::clone(&gate.in_flight).try_acquire_owned() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests in flight",
        )
        .retry_after();
    };
    match tokio::time::timeout(gate.limits.request_timeout, next.run(request)).await {
        Ok(r) => r,
        Err(_) => refuse(StatusCode::SERVICE_UNAVAILABLE, "the request timed out").into(),
    }
}

/// The grant of the request's bearer token and who holds it (see [`authenticate`]); 401
/// without a valid token, 403 `insufficient_scope` for an OAuth token with no vault scope.
async fn authenticate_request(
    gate: &Gate,
    headers: &http::HeaderMap,
) -> Result<(Grant, String), Box<Response>> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer)
        .map(str::to_owned);
    match authenticate(gate, presented.as_deref()).await {
        Ok(g) => Ok(g),
        Err(AuthError::Missing) => Err(Box::new(unauthorized(
            gate,
            "a bearer token is required",
            None,
        ))),
        Err(AuthError::Invalid) => Err(Box::new(unauthorized(
            gate,
            "the bearer token is not valid",
            Some("invalid_token"),
        ))),
        Err(AuthError::NoScope) => {
            let mut r = refuse(
                StatusCode::FORBIDDEN,
                "the access token grants neither vault:read nor vault:write",
            )
            .0;
            if let Some(rs) = &gate.oauth
                && let Ok(v) = HeaderValue::from_str(
                    &rs.challenge(Some("insufficient_scope"), Some(oauth::SCOPE_READ)),
                )
            {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            Err(Box::new(r))
        }
    }
}

/// The request's session id, if it names one. A session is its opener's: a request with
/// another token's session id is answered as if the session did not exist (it cannot read,
/// use or end it).
fn check_session_owner(
    gate: &Gate,
    request: &Request,
    grant: &Grant,
    holder: &str,
) -> Result<Option<String>, Box<Response>> {
    let session_id = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(sid) = &session_id
        && gate.owner(sid).is_some_and(|owner| owner != holder)
    {
        tracing::warn!(token = %grant.id, "a request named a session another token opened");
        return Err(Box::new(
            refuse(StatusCode::NOT_FOUND, "no such session").into(),
        ));
    }
    Ok(session_id)
}

/// Ends a session (`DELETE /mcp`): 200 when it ended, 404 when there is no such session (what
/// the spec and the SDKs expect; rmcp itself answers 202). The session loses its owner.
async fn end_session(
    gate: &Gate,
    mut request: Request,
    next: Next,
    grant: Grant,
    session_id: Option<String>,
) -> Result<Response, Box<Response>> {
    if let Some(sid) = &session_id
        && !gate
            .sessions
            .sessions
            .read()
            .await
            .contains_key(sid.as_str())
    {
        return Err(Box::new(
            refuse(StatusCode::NOT_FOUND, "no such session").into(),
        ));
    }
    request.extensions_mut().insert(grant);
    let mut response = next.run(request).await;
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    if let Some(sid) = &session_id
        && response.status() == StatusCode::OK
    {
        crate::locks::lock(&gate.owners).remove(sid);
    }
    Ok(response)
}

/// Takes a place among the server's requests in flight (503 when none is left) and one of the
/// client's, a client being an address, a token and a session (429 when it has none left).
/// Both are held until the reply has been sent.
fn take_places(
    gate: &Gate,
    peer: SocketAddr,
    grant: &Grant,
    session_id: Option<&str>,
) -> Result<(OwnedSemaphorePermit, ClientSlot), Box<Response>> {
    let Ok(total) = Arc::clone(&gate.in_flight).try_acquire_owned() else {
        return Err(Box::new(
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many requests in flight",
            )
            .retry_after(),
        ));
    };
    let client_key = format!("{}|{}|{}", peer.ip(), grant.id, session_id.unwrap_or(""));
    let Some(client) = ClientSlot::take(
        &gate.per_client,
        client_key,
        gate.limits.max_in_flight_per_client,
    ) else {
        return Err(Box::new(
            refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests in flight from this client",
            )
            .retry_after(),
        ));
    };
    Ok((total, client))
}

/// Reads the request's body, at most [`HttpLimits::max_body_bytes`](super::HttpLimits::max_body_bytes) (413 past it, whether
/// declared or sent) and by `deadline` (408).
async fn read_body(
    gate: &Gate,
    request: Request,
    deadline: tokio::time::Instant,
) -> Result<(http::request::Parts, Bytes), Box<Response>> {
    let max = gate.limits.max_body_bytes;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(Box::new(
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too large",
            )
            .into(),
        ));
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout_at(deadline, axum::body::to_bytes(body, max)).await;
    let Ok(read) = read else {
        return Err(Box::new(
            refuse(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            )
            .into(),
        ));
    };
    match read {
        Ok(b) => Ok((parts, b)),
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(Box::new(if too_large {
                refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is too large",
                )
                .into()
            } else {
                refuse(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )
                .into()
            }))
        }
    }
}

/// Refuses a tool call the grant does not allow (403 `insufficient_scope`), before it runs.
fn check_tool_scopes(gate: &Gate, grant: &Grant, calls: &[Call]) -> Result<(), Box<Response>> {
    for call in calls {
        let Some(tool) = &call.tool else { continue };
        let Some(internal) = gate.prototype.internal_tool_name(tool) else {
            continue;
        };
        if !grant.allows(internal) {
            return Err(Box::new(insufficient_scope(gate, grant, internal, tool)));
        }
    }
    Ok(())
}

/// Before an `initialize`: room for one more session, in all and for this holder (503
/// otherwise). The returned lock is held until the new session has its owner.
async fn check_session_room<'g>(
    gate: &'g Gate,
    holder: &str,
) -> Result<tokio::sync::MutexGuard<'g, ()>, Box<Response>> {
    let lock = gate.initializing.lock().await;
    let live = gate.sessions.sessions.read().await;
    let mut owners = crate::locks::lock(&gate.owners);
    owners.retain(|sid, _| live.contains_key(sid.as_str()));
    if live.len() >= gate.limits.max_sessions {
        return Err(Box::new(
            refuse(StatusCode::SERVICE_UNAVAILABLE, "too many open sessions").retry_after(),
        ));
    }
    let own = owners.values().filter(|o| **o == holder).count();
    if own >= gate.limits.max_sessions_per_token {
        return Err(Box::new(
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "this token has too many open sessions: end one (DELETE /mcp) or let one expire",
            )
            .retry_after(),
        ));
    }
    Ok(lock)
}

/// Runs the request until `deadline` (503 after it).
async fn run_in_time(
    gate: &Gate,
    request: Request,
    next: Next,
    deadline: tokio::time::Instant,
    session_id: Option<&str>,
    calls: &[Call],
) -> Result<Response, Box<Response>> {
    match tokio::time::timeout_at(deadline, next.run(request)).await {
        Ok(r) => Ok(r),
        Err(_) => {
            // The reply is dropped; tell the session so the handlers stop (a request without
            // a session is cancelled by rmcp when its reply is dropped).
            if let Some(sid) = session_id {
                cancel_in_session(gate, sid, calls).await;
            }
            Err(Box::new(
                refuse(StatusCode::SERVICE_UNAVAILABLE, "the request timed out").into(),
            ))
        }
    }
}

/// The reply, its body capped at [`HttpLimits::max_response_bytes`](super::HttpLimits::max_response_bytes) and holding the request's
/// places in flight until it ends. In a session, rmcp answers a request at once with an event
/// stream and sends the reply on it when the handler ends: the timeout of [`run_in_time`] saw
/// only the stream's start, so the stream itself carries the rest of the deadline.
fn cap_reply(
    gate: &Arc<Gate>,
    response: Response,
    deadline: tokio::time::Instant,
    session_id: Option<String>,
    calls: Vec<Call>,
    held: (OwnedSemaphorePermit, ClientSlot),
) -> Response {
    let (parts, body) = response.into_parts();
    let streamed = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let timeout = match session_id {
        Some(session) if streamed && calls.iter().any(|c| c.id.is_some()) => Some(StreamTimeout {
            at: Box::pin(tokio::time::sleep_until(deadline)),
            gate: Arc::clone(gate),
            session,
            calls,
        }),
        _ => None,
    };
    let body = Capped {
        inner: body,
        sent: 0,
        max: gate.limits.max_response_bytes,
        timeout,
        ended: false,
        _held: held,
    };
    Response::from_parts(parts, Body::new(body))
}
