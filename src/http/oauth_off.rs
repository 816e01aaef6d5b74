//! The HTTP transport without OAuth (a build without the `oauth` feature): the gate's OAuth
//! hooks with no server behind them. [`ResourceServer`] has no value, so a gate never holds one
//! and every request is checked against the bearer tokens alone; no OAuth path is served.

use std::sync::Arc;

use axum::Router;

use crate::server::Grant;

/// The scope of the reading tools.
pub const SCOPE_READ: &str = "vault:read";
/// The scope of the write tools.
pub const SCOPE_WRITE: &str = "vault:write";

/// Why an OAuth access token was refused (never, here).
pub enum Refusal {
    /// 401 `invalid_token`.
    Invalid,
    /// 403 `insufficient_scope`.
    NoScope,
}

/// The OAuth resource server: none in this build.
#[derive(Debug)]
pub enum ResourceServer {}

impl ResourceServer {
    /// The issuer the server trusts.
    pub fn issuer_id(&self) -> &str {
        match *self {}
    }

    /// The grant of an access token.
    pub async fn authenticate(&self, _token: &str) -> Result<(Grant, String), Refusal> {
        match *self {}
    }

    /// The `WWW-Authenticate` challenge.
    pub fn challenge(&self, _error: Option<&str>, _scope: Option<&str>) -> String {
        match *self {}
    }

    /// No path is OAuth's without OAuth.
    pub fn is_oauth_path(_path: &str) -> bool {
        false
    }

    /// No path is OAuth's without OAuth.
    pub fn is_cross_origin_path(_path: &str) -> bool {
        false
    }

    /// The OAuth endpoints.
    pub fn router(self: &Arc<Self>) -> Router {
        match **self {}
    }
}
