//! `POST /oauth/revoke`: RFC 7009 revocation, of the client's own tokens only.

use super::{AuthServer, client_form, json_error, server_error};

use crate::http::oauth::store;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};

use std::sync::Arc;

/// `POST /oauth/revoke`: RFC 7009 (the whole grant goes). A client revokes only its own tokens
/// (2.1): another client's token is refused with `unauthorized_client` and stays valid; an
/// unknown one is not an error.
pub async fn revoke(
    State(auth): State<Arc<AuthServer>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let (form, client) = match client_form(&auth, &headers, &body).await {
        Ok(fc) => fc,
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
