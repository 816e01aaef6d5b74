//! Outgoing HTTPS, shared by the layers that fetch: the external issuer's keys ([`crate::http`])
//! and the embedding model's download ([`crate::semantic::fetch`]). One rule for where capvault
//! may connect ([`check_fetch_url`]) and one way to build a client ([`client_builder`]): rustls
//! with webpki's roots (no system files to read), no proxy, no idle connections kept, bounded
//! time. Callers choose the redirect policy.

use std::time::Duration;

/// Why a URL is not one capvault fetches from ([`check_fetch_url`]).
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// The text does not parse as a URL.
    #[error("`{url}` is not a URL ({source})")]
    NotUrl {
        url: String,
        source: url::ParseError,
    },
    /// A URL, but neither https nor http on a loopback address.
    #[error("`{0}` must be https (http only on a loopback address)")]
    NotHttps(String),
}

/// Why [`client_builder`] could not set up TLS.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// One of the extra trusted roots is not a certificate rustls accepts.
    #[error(transparent)]
    Root(rustls::Error),
    /// The crypto provider supports none of the safe protocol versions.
    #[error(transparent)]
    Protocols(rustls::Error),
}

/// A URL capvault may fetch from: HTTPS, or HTTP on a loopback address.
pub fn check_fetch_url(url: &str) -> Result<url::Url, UrlError> {
    let u = url::Url::parse(url).map_err(|source| UrlError::NotUrl {
        url: url.to_owned(),
        source,
    })?;
    if is_allowed(&u) {
        Ok(u)
    } else {
        Err(UrlError::NotHttps(url.to_owned()))
    }
}

/// True when `u`'s host is `localhost` or a loopback address.
pub(crate) fn is_loopback_host(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// True for an `https` URL, or an `http` one whose host is a loopback address.
fn is_allowed(u: &url::Url) -> bool {
    match u.scheme() {
        "https" => true,
        "http" => is_loopback_host(u),
        _ => false,
    }
}

/// A client builder: webpki's roots plus `extra_roots` (DER), no proxy, no pooled idle
/// connections, `timeout` for a whole request and `connect` to connect. The caller sets the
/// redirect policy.
pub fn client_builder(
    extra_roots: &[rustls_pki_types::CertificateDer<'static>],
    timeout: Duration,
    connect: Duration,
) -> Result<reqwest::ClientBuilder, ClientError> {
    let mut roots =
        rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra_roots {
        roots.add(der.clone()).map_err(ClientError::Root)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientError::Protocols)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(timeout)
        .connect_timeout(connect))
}

/// A redirect policy that follows at most `max` hops, each to a URL [`check_fetch_url`]
/// accepts (so never from https down to plain http off loopback).
pub fn safe_redirects(max: usize) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max {
            attempt.error(format!("more than {max} redirects"))
        } else if is_allowed(attempt.url()) {
            attempt.follow()
        } else {
            let to = attempt.url().to_string();
            attempt.error(format!(
                "a redirect to `{to}`, which is not https (http only on a loopback address)"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(check_fetch_url("https://huggingface.co/x").is_ok());
        assert!(check_fetch_url("http://127.0.0.1:9/x").is_ok());
        assert!(check_fetch_url("http://[::1]:9/x").is_ok());
        assert!(check_fetch_url("http://localhost/x").is_ok());
        assert!(check_fetch_url("http://huggingface.co/x").is_err());
        assert!(check_fetch_url("http://10.0.0.1/x").is_err());
        assert!(check_fetch_url("ftp://127.0.0.1/x").is_err());
        assert!(check_fetch_url("file:///etc/passwd").is_err());
        assert!(check_fetch_url("not a url").is_err());
    }
}
