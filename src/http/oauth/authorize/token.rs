//! `POST /oauth/token`: a code (with its PKCE verifier) or a refresh token for tokens.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::http::oauth::store::RefreshError;
use crate::http::oauth::{SCOPE_READ, SCOPE_WRITE, store};
use crate::locks::lock;

use super::{AuthServer, CODE_TTL, PENDING_TTL, client_form, json_error, server_error};

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
    let (form, client) = match client_form(&auth, &headers, &body).await {
        Ok(fc) => fc,
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
            match auth.store.grant(&client, c.write, c.vaults.clone()) {
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
