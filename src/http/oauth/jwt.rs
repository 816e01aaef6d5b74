//! Access tokens from an external issuer (`--oauth-issuer`): JWTs checked against the
//! issuer's keys (JWKS) with `jsonwebtoken`.
//!
//! `jsonwebtoken` is the most used JWT crate for Rust, kept up by its maintainers for years,
//! with RS256, ES256 and EdDSA on pure-Rust cryptography (its `rust_crypto` backend: no C
//! toolchain) and claim validation (issuer, audience, expiry, not-before) built in. It has no
//! `none` algorithm at all. What it leaves to us, and this module does:
//!
//! - the algorithm comes from the key, never from the token: each key's algorithm is fixed
//!   when the JWKS is read (its `alg`, or RS256, ES256 or EdDSA from its type and curve), the
//!   token's `alg` must be that one, and symmetric (`oct`) keys are never loaded, so an HMAC
//!   token made with a public key has no key to match;
//! - the audience is this server's resource identifier, the issuer the configured one, and
//!   `exp`, `iss` and `aud` are required;
//! - the scope (`scope`, space-separated, or `scp`) must hold `vault:read` or `vault:write`;
//! - an unknown `kid` refetches the JWKS, at most once a minute (key rotation), through the
//!   address resolved at startup (the sandbox allows no name lookups and connects only to the
//!   JWKS port).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

/// Largest JWKS or metadata document read.
const MAX_DOCUMENT: usize = 256 * 1024;
/// How long a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Least time between two refetches of the JWKS (by default).
pub const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY: u64 = 30;
/// Keys read from one JWKS at most.
const MAX_KEYS: usize = 32;

/// Where the issuer's keys come from.
pub enum KeySource {
    /// A JWKS file, read at startup.
    File,
    /// A JWKS URL, fetched at startup and refetched for an unknown `kid`.
    Url {
        url: String,
        client: reqwest::Client,
    },
}

/// Checks JWT access tokens of one issuer, for one audience.
pub struct Verifier {
    issuer: String,
    audience: String,
    source: KeySource,
    keys: Mutex<Keys>,
    refetching: tokio::sync::Mutex<()>,
    refetch_every: Duration,
}

struct Keys {
    by_kid: HashMap<String, (DecodingKey, Algorithm)>,
    /// Keys without a `kid` (used for tokens without one).
    unnamed: Vec<(DecodingKey, Algorithm)>,
    fetched: Instant,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Bad signature, issuer, audience, time or form: 401 `invalid_token`.
    Invalid,
    /// Valid, but with neither `vault:read` nor `vault:write`: 403 `insufficient_scope`.
    NoScope,
}

/// What a valid token gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub subject: String,
    pub write: bool,
}

#[derive(Deserialize)]
struct RawClaims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Value>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// The HTTPS client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    /// The TLS roots or the builder's settings (from [`crate::net::client_builder`]).
    #[error("{0}")]
    Builder(Box<dyn std::error::Error + Send + Sync>),
    /// reqwest could not build the client.
    #[error("{0}")]
    Build(#[from] reqwest::Error),
}

/// A JSON document that could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request failed (connection, TLS, time).
    #[error("{url}: {error}")]
    Request {
        /// The URL asked.
        url: String,
        /// What reqwest said.
        error: reqwest::Error,
    },
    /// A status other than success.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL asked.
        url: String,
        /// The status code.
        status: u16,
    },
    /// Over the size bound.
    #[error("{url}: larger than {max} bytes")]
    TooLarge {
        /// The URL asked.
        url: String,
        /// The bound in bytes.
        max: usize,
    },
    /// The body is not JSON.
    #[error("{url}: not JSON ({error})")]
    NotJson {
        /// The URL asked.
        url: String,
        /// What serde_json said.
        error: serde_json::Error,
    },
}

/// The issuer's metadata names no usable JWKS.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// `--oauth-issuer` is not a URL.
    #[error("--oauth-issuer: {0}")]
    Issuer(url::ParseError),
    /// The metadata's `issuer` differs from the one configured.
    #[error("{url}: its `issuer` is not `{issuer}` (a mix-up or a wrong URL)")]
    MixUp {
        /// The metadata's URL.
        url: String,
        /// The issuer configured.
        issuer: String,
    },
    /// The metadata has no `jwks_uri`.
    #[error("{url}: no `jwks_uri`")]
    NoJwksUri {
        /// The metadata's URL.
        url: String,
    },
    /// Neither metadata URL answered.
    #[error(
        "no metadata for issuer {issuer} ({}); pass --jwks-url or --jwks-file",
        joined(.errors)
    )]
    NoMetadata {
        /// The issuer configured.
        issuer: String,
        /// Each URL's failure.
        errors: Vec<FetchError>,
    },
}

fn joined(errors: &[FetchError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A JWKS without a key capvault can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// No `keys` array.
    #[error("the JWKS has no `keys` list")]
    NoKeyList,
    /// No RS256, ES256 or EdDSA signing key in it.
    #[error("the JWKS has no RS256, ES256 or EdDSA signing key")]
    NoSigningKey,
}

/// Why refetching the keys failed.
#[derive(Debug, thiserror::Error)]
enum RefetchError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Keys(#[from] JwksError),
}

/// The HTTPS client for the issuer: webpki's roots (no system files to read), no proxy, no
/// redirects, bounded time; `pinned` fixes the addresses of hosts resolved already.
pub fn client(pinned: &[(String, SocketAddr)]) -> Result<reqwest::Client, ClientSetupError> {
    client_with(pinned, &[], FETCH_TIMEOUT)
}

/// [`client`] with more trusted roots (DER) and its own time bound.
pub fn client_with(
    pinned: &[(String, SocketAddr)],
    extra_roots: &[rustls_pki_types::CertificateDer<'static>],
    timeout: Duration,
) -> Result<reqwest::Client, ClientSetupError> {
    let mut builder = crate::net::client_builder(extra_roots, timeout, timeout)
        .map_err(|e| ClientSetupError::Builder(e.into()))?
        .redirect(reqwest::redirect::Policy::none());
    for (host, addr) in pinned {
        builder = builder.resolve(host, *addr);
    }
    Ok(builder.build()?)
}

/// A URL capvault may fetch from: HTTPS, or HTTP on a loopback address.
pub use crate::net::check_fetch_url;

/// GETs a JSON document of at most [`MAX_DOCUMENT`] bytes (in the client's time).
pub async fn fetch_json(client: &reqwest::Client, url: &str) -> Result<Value, FetchError> {
    fetch_json_capped(client, url, MAX_DOCUMENT).await
}

/// GETs a JSON document of at most `max` bytes (in the client's time).
pub async fn fetch_json_capped(
    client: &reqwest::Client,
    url: &str,
    max: usize,
) -> Result<Value, FetchError> {
    let request = |error| FetchError::Request {
        url: url.to_owned(),
        error,
    };
    let mut response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(request)?;
    if !response.status().is_success() {
        return Err(FetchError::Status {
            url: url.to_owned(),
            status: response.status().as_u16(),
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(request)? {
        body.extend_from_slice(&chunk);
        if body.len() > max {
            return Err(FetchError::TooLarge {
                url: url.to_owned(),
                max,
            });
        }
    }
    serde_json::from_slice(&body).map_err(|error| FetchError::NotJson {
        url: url.to_owned(),
        error,
    })
}

/// The JWKS URL of `issuer`, from its RFC 8414 metadata (or, failing that, its OpenID
/// configuration), whose `issuer` must be `issuer` exactly.
pub async fn discover_jwks(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<String, DiscoveryError> {
    let u = url::Url::parse(issuer).map_err(DiscoveryError::Issuer)?;
    let path = u.path().trim_end_matches('/');
    let origin = u.origin().ascii_serialization();
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ];
    let mut errors = Vec::new();
    for url in candidates {
        match fetch_json(client, &url).await {
            Ok(meta) => {
                if meta.get("issuer").and_then(Value::as_str) != Some(issuer) {
                    return Err(DiscoveryError::MixUp {
                        url,
                        issuer: issuer.to_owned(),
                    });
                }
                return meta
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or(DiscoveryError::NoJwksUri { url });
            }
            Err(e) => errors.push(e),
        }
    }
    Err(DiscoveryError::NoMetadata {
        issuer: issuer.to_owned(),
        errors,
    })
}

impl Verifier {
    /// A verifier with the keys of `jwks` (a JWKS document).
    pub fn new(
        issuer: String,
        audience: String,
        jwks: &Value,
        source: KeySource,
        refetch_every: Duration,
    ) -> Result<Verifier, JwksError> {
        let keys = parse_jwks(jwks)?;
        Ok(Verifier {
            issuer,
            audience,
            source,
            keys: Mutex::new(keys),
            refetching: tokio::sync::Mutex::new(()),
            refetch_every,
        })
    }

    /// The issuer's identifier.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Checks `token`: signature, algorithm, issuer, audience, time, scope.
    pub async fn check(&self, token: &str) -> Result<Claims, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Invalid)?;
        let key = match self.key(header.kid.as_deref()) {
            Some(k) => k,
            None => {
                self.refetch().await;
                self.key(header.kid.as_deref()).ok_or(Refusal::Invalid)?
            }
        };
        let (key, alg) = key;
        if header.alg != alg {
            return Err(Refusal::Invalid);
        }
        let mut v = Validation::new(alg);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v.validate_nbf = true;
        v.leeway = LEEWAY;
        let data = jsonwebtoken::decode::<RawClaims>(token, &key, &v).map_err(|e| {
            tracing::debug!(error = %e, "a JWT was refused");
            Refusal::Invalid
        })?;
        let claims = data.claims;
        let mut scopes: Vec<String> = claims
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        match claims.scp {
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
            Some(Value::Array(a)) => {
                scopes.extend(a.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        let write = scopes.iter().any(|s| s == super::SCOPE_WRITE);
        if !write && !scopes.iter().any(|s| s == super::SCOPE_READ) {
            return Err(Refusal::NoScope);
        }
        Ok(Claims {
            subject: claims.sub.unwrap_or_default(),
            write,
        })
    }

    fn key(&self, kid: Option<&str>) -> Option<(DecodingKey, Algorithm)> {
        let keys = crate::locks::lock(&self.keys);
        match kid {
            Some(kid) => keys.by_kid.get(kid).cloned(),
            None if keys.unnamed.len() == 1 => keys.unnamed.first().cloned(),
            None if keys.unnamed.is_empty() && keys.by_kid.len() == 1 => {
                keys.by_kid.values().next().cloned()
            }
            None => None,
        }
    }

    /// Refetches the JWKS (URL source only), at most once per `refetch_every`.
    async fn refetch(&self) {
        let KeySource::Url { url, client } = &self.source else {
            return;
        };
        let _one = self.refetching.lock().await;
        {
            let keys = crate::locks::lock(&self.keys);
            if keys.fetched.elapsed() < self.refetch_every {
                return;
            }
        }
        let fetched = async {
            let doc = fetch_json(client, url).await?;
            Ok::<_, RefetchError>(parse_jwks(&doc)?)
        }
        .await;
        let mut keys = crate::locks::lock(&self.keys);
        match fetched {
            Ok(k) => {
                tracing::info!(
                    keys = k.by_kid.len() + k.unnamed.len(),
                    "the issuer's keys were refetched"
                );
                *keys = k;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refetching the issuer's keys failed");
                keys.fetched = Instant::now();
            }
        }
    }
}

/// The algorithm a key is for: its `alg`, or the one its type and curve imply. `None` for
/// keys capvault does not accept (symmetric keys, other algorithms).
fn key_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    use jsonwebtoken::jwk::KeyAlgorithm as K;
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    match jwk.common.key_algorithm {
        None => Some(implied),
        Some(K::RS256) if implied == Algorithm::RS256 => Some(implied),
        Some(K::ES256) if implied == Algorithm::ES256 => Some(implied),
        Some(K::EdDSA) if implied == Algorithm::EdDSA => Some(implied),
        Some(_) => None,
    }
}

fn parse_jwks(doc: &Value) -> Result<Keys, JwksError> {
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or(JwksError::NoKeyList)?;
    let mut by_kid = HashMap::new();
    let mut unnamed = Vec::new();
    for raw in list.iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
        {
            continue;
        }
        let Some(alg) = key_algorithm(&jwk) else {
            continue;
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        match jwk.common.key_id {
            Some(kid) => {
                by_kid.insert(kid, (key, alg));
            }
            None => unnamed.push((key, alg)),
        }
    }
    if by_kid.is_empty() && unnamed.is_empty() {
        return Err(JwksError::NoSigningKey);
    }
    Ok(Keys {
        by_kid,
        unnamed,
        fetched: Instant::now(),
    })
}
