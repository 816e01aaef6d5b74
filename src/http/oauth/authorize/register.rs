//! `POST /oauth/register`: dynamic client registration (RFC 7591); its redirect URIs and client
//! name are checked by [`crate::http::oauth::client_meta`]'s rules.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::http::oauth::store;
use crate::http::oauth::store::Client;

use super::{
    AuthServer, REGISTER_WINDOW, REGISTRATIONS_PER_WINDOW, admit, json_error, record, server_error,
};
use crate::http::oauth::client_meta::{MAX_REDIRECT_URIS, check_redirect_uri, client_name};

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
                    return json_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_redirect_uri",
                        &e.to_string(),
                    );
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
        Err(why) => return bad(why.to_string()),
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
