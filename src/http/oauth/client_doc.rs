//! Client ID metadata documents (`--oauth-client-metadata`): a client whose `client_id` is an
//! HTTPS URL publishes its metadata (name, redirect URIs) at that URL, and the authorization
//! server fetches it instead of asking the client to register.
//!
//! Fetching a URL a client chose is a server-side request forgery risk, so a fetch is fenced:
//! HTTPS on port 443 only, a URL with a path and nothing to normalise, a host whose every
//! address is a public one (no loopback, private, link-local, shared or documentation ranges),
//! the connection pinned to the address checked (no second lookup to rebind), no redirects,
//! 5 KiB and 5 seconds at most, 30 fetches a minute, answers cached for 5 minutes. The document
//! must name itself (`client_id` equal to its URL) and be a public client (no secret).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustls_pki_types::CertificateDer;
use serde_json::Value;

use super::jwt;
use super::store::{self, Client};

/// Largest document read.
const MAX_DOCUMENT: usize = 5 * 1024;
/// How long a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a fetched document is used.
const CACHE_FOR: Duration = Duration::from_secs(5 * 60);
/// Documents cached at most.
const MAX_CACHED: usize = 100;
/// Fetches per minute at most.
const FETCHES_PER_MINUTE: usize = 30;
/// The only port fetched from (the sandbox allows connections to it and no other).
pub const PORT: u16 = 443;

/// Fetches and caches client metadata documents.
pub struct ClientDocs {
    /// Testing aid: more trusted roots, and loopback hosts and other ports allowed.
    test_roots: Vec<CertificateDer<'static>>,
    cache: Mutex<HashMap<String, (Client, Instant)>>,
    fetches: Mutex<std::collections::VecDeque<Instant>>,
}

impl std::fmt::Debug for ClientDocs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientDocs(..)")
    }
}

/// True for an address anyone on the internet could reach: not loopback, private, link-local,
/// shared (CGNAT), documentation, benchmarking, multicast, broadcast or unspecified.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8
                || first == 0x0064 && v6.segments()[1] == 0xff9b)
        }
    }
}

/// True when `client_id` names a metadata document rather than a registered client.
pub fn is_document_id(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// Why a client metadata document could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// The `client_id` is not a URL.
    #[error("`{0}` is not a URL")]
    NotAUrl(String),
    /// The `client_id` URL breaks a rule (`why` says which).
    #[error("client_id `{url}`: {why}")]
    BadUrl {
        /// The `client_id`.
        url: String,
        /// The rule broken.
        why: &'static str,
    },
    /// Over [`FETCHES_PER_MINUTE`].
    #[error("too many metadata documents fetched; try again in a minute")]
    TooManyFetches,
    /// The host name lookup ran out of time.
    #[error("{0}: the name lookup took too long")]
    LookupTimeout(String),
    /// The host name lookup failed.
    #[error("{host}: {error}")]
    Lookup {
        /// The host.
        host: String,
        /// What the resolver said.
        error: std::io::Error,
    },
    /// The host name has no address.
    #[error("{0}: no address")]
    NoAddress(String),
    /// The host name resolves to an address that is not public.
    #[error("{host} resolves to {ip}, which is not a public address")]
    NotPublic {
        /// The host.
        host: String,
        /// The first address that is not public.
        ip: IpAddr,
    },
    /// The HTTPS client could not be set up.
    #[error("{0}")]
    Client(jwt::ClientSetupError),
    /// The document could not be fetched.
    #[error(transparent)]
    Fetch(#[from] jwt::FetchError),
    /// The document was fetched and refused.
    #[error("the metadata document at {url}: {why}")]
    Refused {
        /// The document's URL.
        url: String,
        /// What is wrong with it.
        why: Refusal,
    },
}

/// What is wrong with a fetched client metadata document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a JSON object.
    #[error("not a JSON object")]
    NotAnObject,
    /// Its `client_id` is not the URL it was fetched from.
    #[error("its client_id is not its own URL")]
    NotItsOwnId,
    /// A confidential client.
    #[error("token_endpoint_auth_method `{0}`: only public clients (`none`) are supported")]
    AuthMethod(String),
    /// A redirect URI that is not a string.
    #[error("a redirect URI is not a string")]
    RedirectNotString,
    /// A refused redirect URI.
    #[error(transparent)]
    Redirect(#[from] super::client_meta::RedirectError),
    /// No redirect URIs, or too many.
    #[error("no redirect_uris (or too many)")]
    RedirectCount,
    /// A refused client name.
    #[error(transparent)]
    Name(#[from] super::client_meta::NameCharError),
}

impl ClientDocs {
    /// `test_roots`: a testing aid (see `--oauth-test-ca`): trusted in addition to webpki's
    /// roots, and when given, loopback hosts and any port are allowed.
    pub fn new(test_roots: Vec<CertificateDer<'static>>) -> ClientDocs {
        ClientDocs {
            test_roots,
            cache: Mutex::new(HashMap::new()),
            fetches: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    fn testing(&self) -> bool {
        !self.test_roots.is_empty()
    }

    /// The client whose metadata document is at `url`.
    pub async fn client(&self, url: &str) -> Result<Client, DocError> {
        let u = self.check_url(url)?;
        {
            let cache = crate::locks::lock(&self.cache);
            if let Some((c, at)) = cache.get(url)
                && at.elapsed() < CACHE_FOR
            {
                return Ok(c.clone());
            }
        }
        {
            let mut f = crate::locks::lock(&self.fetches);
            while f
                .front()
                .is_some_and(|t| t.elapsed() > Duration::from_secs(60))
            {
                f.pop_front();
            }
            if f.len() >= FETCHES_PER_MINUTE {
                return Err(DocError::TooManyFetches);
            }
            f.push_back(Instant::now());
        }
        let host = u.host_str().unwrap_or_default().to_owned();
        let port = u.port_or_known_default().unwrap_or(PORT);
        let addrs: Vec<SocketAddr> = tokio::time::timeout(
            FETCH_TIMEOUT,
            tokio::net::lookup_host((host.as_str(), port)),
        )
        .await
        .map_err(|_| DocError::LookupTimeout(host.clone()))?
        .map_err(|error| DocError::Lookup {
            host: host.clone(),
            error,
        })?
        .collect();
        let Some(first) = addrs.first().copied() else {
            return Err(DocError::NoAddress(host));
        };
        if !self.testing()
            && let Some(bad) = addrs.iter().find(|a| !is_public(a.ip()))
        {
            return Err(DocError::NotPublic { host, ip: bad.ip() });
        }
        let http = jwt::client_with(&[(host.clone(), first)], &self.test_roots, FETCH_TIMEOUT)
            .map_err(DocError::Client)?;
        let doc = jwt::fetch_json_capped(&http, url, MAX_DOCUMENT).await?;
        let client = parse(url, &doc)?;
        let mut cache = crate::locks::lock(&self.cache);
        cache.retain(|_, (_, at)| at.elapsed() < CACHE_FOR);
        if cache.len() >= MAX_CACHED
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(url.to_owned(), (client.clone(), Instant::now()));
        Ok(client)
    }

    /// A URL that may name a document: HTTPS, port 443, a path, no user, query or fragment,
    /// and already in its normal form (no `.` or `..` segments).
    fn check_url(&self, url: &str) -> Result<url::Url, DocError> {
        let u = url::Url::parse(url).map_err(|_| DocError::NotAUrl(url.to_owned()))?;
        let bad = |why: &'static str| {
            Err(DocError::BadUrl {
                url: url.to_owned(),
                why,
            })
        };
        if u.scheme() != "https" {
            return bad("not https");
        }
        if u.as_str() != url {
            return bad("not in normal form");
        }
        if !u.username().is_empty() || u.password().is_some() {
            return bad("has a user name");
        }
        if u.query().is_some() || u.fragment().is_some() {
            return bad("has a query or a fragment");
        }
        if u.path() == "/" {
            return bad("has no path");
        }
        if !self.testing() {
            if u.port_or_known_default() != Some(PORT) {
                return bad("not on port 443");
            }
            if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = u.host() {
                return bad("an address, not a name");
            }
        }
        Ok(u)
    }
}

/// The client a document describes.
fn parse(url: &str, doc: &Value) -> Result<Client, DocError> {
    let bad = |why: Refusal| {
        Err(DocError::Refused {
            url: url.to_owned(),
            why,
        })
    };
    let Some(doc) = doc.as_object() else {
        return bad(Refusal::NotAnObject);
    };
    if doc.get("client_id").and_then(Value::as_str) != Some(url) {
        return bad(Refusal::NotItsOwnId);
    }
    match doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
    {
        None | Some("none") => {}
        Some(other) => {
            return bad(Refusal::AuthMethod(other.to_owned()));
        }
    }
    let uris: Vec<String> = match doc.get("redirect_uris").and_then(Value::as_array) {
        Some(l) if !l.is_empty() && l.len() <= super::client_meta::MAX_REDIRECT_URIS => {
            let mut out = Vec::new();
            for v in l {
                let Some(s) = v.as_str() else {
                    return bad(Refusal::RedirectNotString);
                };
                if let Err(e) = super::client_meta::check_redirect_uri(s) {
                    return bad(e.into());
                }
                out.push(s.to_owned());
            }
            out
        }
        _ => return bad(Refusal::RedirectCount),
    };
    let name = match super::client_meta::client_name(doc.get("client_name").and_then(Value::as_str))
    {
        Ok(n) => n,
        Err(why) => return bad(why.into()),
    };
    Ok(Client {
        id: url.to_owned(),
        secret: None,
        name,
        redirect_uris: uris,
        auth_method: "none".to_owned(),
        created: store::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_public_addresses_are_fetched_from() {
        for ok in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "151.101.1.1"] {
            assert!(is_public(ok.parse().unwrap()), "{ok}");
        }
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(bad.parse().unwrap()), "{bad}");
        }
    }

    #[test]
    fn document_urls_must_be_https_443_with_a_path_in_normal_form() {
        let docs = ClientDocs::new(Vec::new());
        assert!(
            docs.check_url("https://app.example/oauth/client.json")
                .is_ok()
        );
        for bad in [
            "http://app.example/client.json",
            "https://app.example/",
            "https://app.example:8443/client.json",
            "https://user@app.example/client.json",
            "https://app.example/client.json?x=1",
            "https://app.example/a/../client.json",
            "https://10.0.0.1/client.json",
            "https://APP.example/client.json",
        ] {
            assert!(docs.check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_document_must_name_itself_and_be_a_public_client() {
        let url = "https://app.example/client.json";
        let ok = json!({"client_id": url, "client_name": "App", "redirect_uris": ["https://app.example/cb"]});
        let c = parse(url, &ok).unwrap();
        assert_eq!((c.name.as_str(), c.auth_method.as_str()), ("App", "none"));
        let mut other = ok.clone();
        other["client_id"] = json!("https://evil.example/client.json");
        assert!(
            parse(url, &other)
                .unwrap_err()
                .to_string()
                .contains("own URL")
        );
        let mut secret = ok.clone();
        secret["token_endpoint_auth_method"] = json!("private_key_jwt");
        assert!(parse(url, &secret).is_err());
        let mut bidi = ok.clone();
        bidi["client_name"] = json!("App\u{202e}olleh");
        assert!(
            parse(url, &bidi)
                .unwrap_err()
                .to_string()
                .contains("U+202E")
        );
        let mut js = ok;
        js["redirect_uris"] = json!(["javascript:alert(1)"]);
        assert!(parse(url, &js).is_err());
    }
}
