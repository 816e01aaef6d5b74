//! OAuth for remote clients: capvault as an OAuth resource server (RFC 9728 metadata, bearer
//! challenges that point at it, access tokens bound to this server's resource identifier),
//! with its tokens from one of two places:
//!
//! - [`authorize`]: the built-in authorization server (`--oauth builtin`), for the vault's
//!   owner, with its state in [`store`] and its consent page in [`page`];
//! - [`jwt`]: an external issuer (`--oauth-issuer`), whose JWTs are checked against its keys.
//!
//! Scopes: `vault:read` (the reading tools) and `vault:write` (also the write tools, when the
//! server runs with `--write`), the same split as a token file's `read` and `write`.

pub mod authorize;
pub mod client_doc;
pub mod client_meta;
pub mod jwt;
pub mod page;
pub mod store;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::server::Grant;

pub use authorize::AuthServer;
pub use jwt::Verifier;
pub use store::Store;

/// The scope of the reading tools.
pub const SCOPE_READ: &str = "vault:read";
/// The scope of the write tools.
pub const SCOPE_WRITE: &str = "vault:write";
/// Largest body the OAuth endpoints read.
const MAX_BODY: usize = 16 * 1024;

/// Where the tokens come from.
#[derive(Debug)]
pub enum Issuer {
    Builtin(Arc<AuthServer>),
    External(Arc<Verifier>),
}

/// The resource server: what the gate asks about a bearer token that is not a static one,
/// and what it tells a client that has none.
#[derive(Debug)]
pub struct ResourceServer {
    /// The public base URL (no trailing slash).
    pub base: String,
    /// The resource identifier: `base` + `/mcp`.
    pub resource: String,
    /// Where the protected-resource metadata is.
    pub metadata_url: String,
    /// The scopes a client may ask for.
    pub scopes: Vec<&'static str>,
    pub issuer: Issuer,
}

/// Why a token was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401 `invalid_token`.
    Invalid,
    /// 403 `insufficient_scope` (a valid token with no vault scope).
    NoScope,
}

/// A refused `--public-url`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicUrlError {
    /// Not a URL.
    #[error("--public-url `{url}`: {error}")]
    NotAUrl {
        /// The value given.
        url: String,
        /// What the URL parser said.
        error: url::ParseError,
    },
    /// It has a query, a fragment or a user name.
    #[error("--public-url `{0}`: no query, fragment or user name")]
    Extras(String),
    /// `http` on a host that is not loopback, or another scheme.
    #[error("--public-url `{0}` must be https (http only on a loopback address)")]
    NotHttps(String),
}

/// Checks `--public-url`: an absolute http(s) URL without query or fragment, https unless its
/// host is a loopback address. Returns it without a trailing slash.
pub fn check_public_url(url: &str) -> Result<String, PublicUrlError> {
    let u = url::Url::parse(url).map_err(|error| PublicUrlError::NotAUrl {
        url: url.to_owned(),
        error,
    })?;
    if u.query().is_some() || u.fragment().is_some() || !u.username().is_empty() {
        return Err(PublicUrlError::Extras(url.to_owned()));
    }
    jwt::check_fetch_url(url).map_err(|_| PublicUrlError::NotHttps(url.to_owned()))?;
    Ok(u.as_str().trim_end_matches('/').to_owned())
}

impl ResourceServer {
    /// The resource server for `base` (checked with [`check_public_url`]).
    pub fn new(base: String, write_allowed: bool, issuer: Issuer) -> ResourceServer {
        let scopes = if write_allowed {
            vec![SCOPE_READ, SCOPE_WRITE]
        } else {
            vec![SCOPE_READ]
        };
        ResourceServer {
            resource: format!("{base}/mcp"),
            metadata_url: format!("{base}/.well-known/oauth-protected-resource/mcp"),
            base,
            scopes,
            issuer,
        }
    }

    /// The issuer's identifier.
    pub fn issuer_id(&self) -> &str {
        match &self.issuer {
            Issuer::Builtin(a) => &a.issuer,
            Issuer::External(v) => v.issuer(),
        }
    }

    /// RFC 9728 protected-resource metadata.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer_id()],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "capvault",
        })
    }

    /// The grant of an OAuth access token, and who holds it: the sessions it opens are that
    /// holder's (the client, for the built-in server, so that a client's new grant after a
    /// step-up keeps its session; the subject, for an external issuer).
    pub async fn authenticate(&self, token: &str) -> Result<(Grant, String), Refusal> {
        match &self.issuer {
            Issuer::Builtin(auth) => match auth.store.check_access(token) {
                Ok(Some(a)) => Ok((
                    Grant {
                        id: format!("oauth-{}", a.grant),
                        write: a.write,
                        tools: None,
                        vaults: a.vaults.map(|v| Arc::new(v.into_iter().collect())),
                    },
                    format!("oauth-client {}", a.client),
                )),
                Ok(None) => Err(Refusal::Invalid),
                Err(e) => {
                    tracing::error!(error = %e, "the authorization server's store failed");
                    Err(Refusal::Invalid)
                }
            },
            Issuer::External(v) => match v.check(token).await {
                Ok(c) => {
                    let d = Sha256::digest(format!("{}|{}", v.issuer(), c.subject).as_bytes());
                    let id = base16ct::lower::encode_string(&d[..4]);
                    let holder = base16ct::lower::encode_string(&d);
                    Ok((
                        Grant {
                            id: format!("jwt-{id}"),
                            write: c.write,
                            tools: None,
                            vaults: None,
                        },
                        format!("jwt {holder}"),
                    ))
                }
                Err(jwt::Refusal::Invalid) => Err(Refusal::Invalid),
                Err(jwt::Refusal::NoScope) => Err(Refusal::NoScope),
            },
        }
    }

    /// The `WWW-Authenticate` value: where the metadata is, the error if any, and the scope
    /// to ask for.
    pub fn challenge(&self, error: Option<&str>, scope: Option<&str>) -> String {
        let mut c = format!(
            "Bearer realm=\"capvault\", resource_metadata=\"{}\"",
            self.metadata_url
        );
        if let Some(e) = error {
            c.push_str(&format!(", error=\"{e}\""));
        }
        let scope = scope.map_or_else(|| self.scopes.join(" "), str::to_owned);
        c.push_str(&format!(", scope=\"{scope}\""));
        c
    }

    /// True for the paths that serve OAuth itself (no bearer token needed).
    pub fn is_oauth_path(path: &str) -> bool {
        path.starts_with("/.well-known/oauth-") || path.starts_with("/oauth/")
    }

    /// True for the OAuth paths browsers and clients may call from any origin (metadata,
    /// registration, token, revocation); the consent page is not one of them.
    pub fn is_cross_origin_path(path: &str) -> bool {
        Self::is_oauth_path(path) && path != "/oauth/authorize"
    }

    /// The OAuth routes: metadata always; the authorization server's endpoints with
    /// `--oauth builtin`. Any origin may read and call them (CORS without credentials).
    pub fn router(self: &Arc<Self>) -> Router {
        let prm = {
            let me = Arc::clone(self);
            move || {
                let m = me.metadata();
                async move { axum::Json(m) }
            }
        };
        let mut public = Router::new()
            .route("/.well-known/oauth-protected-resource", get(prm.clone()))
            .route("/.well-known/oauth-protected-resource/mcp", get(prm));
        let mut consent: Router = Router::new();
        if let Issuer::Builtin(auth) = &self.issuer {
            let meta = auth.metadata();
            public = public.merge(
                Router::new()
                    .route(
                        "/.well-known/oauth-authorization-server",
                        get(move || {
                            let m = meta.clone();
                            async move { axum::Json(m) }
                        }),
                    )
                    .route("/oauth/register", axum::routing::post(authorize::register))
                    .route("/oauth/token", axum::routing::post(authorize::token))
                    .route("/oauth/revoke", axum::routing::post(authorize::revoke))
                    .with_state(Arc::clone(auth)),
            );
            // The consent page gets no CORS: no other origin may read it (or its CSRF token).
            consent = Router::new()
                .route(
                    "/oauth/authorize",
                    get(authorize::authorize_page).post(authorize::authorize_answer),
                )
                .with_state(Arc::clone(auth));
        }
        public
            .layer(
                tower_http::cors::CorsLayer::new()
                    .allow_origin(tower_http::cors::Any)
                    .allow_methods([http::Method::GET, http::Method::POST])
                    .allow_headers([
                        http::header::AUTHORIZATION,
                        http::header::CONTENT_TYPE,
                        http::HeaderName::from_static("mcp-protocol-version"),
                    ]),
            )
            .merge(consent)
            .layer(DefaultBodyLimit::max(MAX_BODY))
    }
}
