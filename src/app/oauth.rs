//! OAuth set-up for `serve --transport http`, done before the sandbox: the built-in
//! authorization server's store (in the vault's state folder) or an external issuer's keys
//! (fetched now, their host pinned), and the resource server the HTTP gate consults. Also
//! `capvault passwd`, which sets the owner's passphrase the consent page asks for.

use std::path::Path;
use std::sync::Arc;

use super::cli::HttpArgs;
use super::state_root;
use crate::http::HttpOptions;
use crate::http::oauth::{ResourceServer, Store};
use crate::vault::host::Host;
use crate::vault::private::PrivateDir;
use crate::vault::state::StateDir;
use crate::vault::{Limits, Vault};

impl HttpArgs {
    /// The OAuth resource server, when OAuth is on: checks the public URL, opens the
    /// authorization server's store or reads the issuer's keys (fetching them now, before
    /// the sandbox). Adds the public URL's host and origin to those the guard accepts.
    pub(super) fn oauth(
        &self,
        host: &Host,
        options: &mut HttpOptions,
        local: std::net::SocketAddr,
        state: Option<PrivateDir>,
        vaults: &[String],
        write: bool,
    ) -> anyhow::Result<OAuthPrepared> {
        use crate::http::oauth::{self, Issuer};
        if self.oauth.is_none() && self.oauth_issuer.is_none() {
            if self.public_url.is_some() {
                anyhow::bail!("--public-url is for OAuth: add --oauth builtin or --oauth-issuer");
            }
            return Ok(OAuthPrepared::default());
        }
        let base = match &self.public_url {
            Some(u) => oauth::check_public_url(u).map_err(anyhow::Error::msg)?,
            None if local.ip().is_loopback() => {
                let scheme = if options.tls.is_some() {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{local}")
            }
            None => anyhow::bail!(
                "OAuth on a non-loopback listener needs --public-url (the URL clients reach \
                 this server at)"
            ),
        };
        if let Ok(u) = url::Url::parse(&base) {
            if let Some(host) = u.host_str() {
                options.allowed_hosts.push(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host.to_owned(),
                });
            }
            options
                .allowed_origins
                .push(u.origin().ascii_serialization());
        }
        let resource = format!("{base}/mcp");
        let mut connect_ports = Vec::new();
        let mut name_lookups = false;
        let issuer = if self.oauth.is_some() {
            let files = state.ok_or_else(|| anyhow::anyhow!("no state folder for OAuth"))?;
            let store = Arc::new(oauth::Store::new(files));
            if !store.has_passphrase() {
                anyhow::bail!(
                    "--oauth builtin needs the owner's passphrase: run `capvault passwd VAULT` \
                     first (with the same --state-dir)"
                );
            }
            let docs = if self.oauth_client_metadata {
                let mut roots = Vec::new();
                if let Some(path) = &self.oauth_test_ca {
                    use rustls_pki_types::pem::PemObject;
                    let pem = host
                        .file(path)
                        .and_then(|f| f.read_public(1024 * 1024))
                        .map_err(|e| anyhow::anyhow!("--oauth-test-ca {e}"))?;
                    for der in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
                        roots.push(der.map_err(|e| anyhow::anyhow!("--oauth-test-ca: {e}"))?);
                    }
                }
                connect_ports.push(oauth::client_doc::PORT);
                name_lookups = true;
                Some(oauth::client_doc::ClientDocs::new(roots))
            } else {
                None
            };
            Issuer::Builtin(Arc::new(oauth::AuthServer::new(
                base.clone(),
                resource.clone(),
                vaults.to_vec(),
                write,
                store,
                docs,
            )))
        } else {
            let issuer = self.oauth_issuer.clone().unwrap_or_default();
            oauth::jwt::check_fetch_url(&issuer)
                .map_err(|e| anyhow::anyhow!("--oauth-issuer: {e}"))?;
            let (jwks, source) = match &self.jwks_file {
                Some(path) => {
                    let bytes = host
                        .file(path)
                        .and_then(|f| f.read_public(1024 * 1024))
                        .map_err(|e| anyhow::anyhow!("--jwks-file {e}"))?;
                    let doc = serde_json::from_slice(&bytes)
                        .map_err(|e| anyhow::anyhow!("--jwks-file: not JSON ({e})"))?;
                    (doc, oauth::jwt::KeySource::File)
                }
                None => {
                    let (doc, source, port) = fetch_jwks(&issuer, self.jwks_url.as_deref())?;
                    connect_ports.push(port);
                    (doc, source)
                }
            };
            let every = self
                .jwks_refetch_after
                .map_or(oauth::jwt::REFETCH_EVERY, std::time::Duration::from_secs);
            let verifier = oauth::Verifier::new(issuer, resource, &jwks, source, every)
                .map_err(|e| anyhow::anyhow!("the issuer's keys: {e}"))?;
            Issuer::External(Arc::new(verifier))
        };
        let rs = Arc::new(ResourceServer::new(base, write, issuer));
        options.oauth = Some(Arc::clone(&rs));
        Ok(OAuthPrepared {
            server: Some(rs),
            connect_ports,
            name_lookups,
        })
    }
}

/// What OAuth needs from the sandbox.
#[derive(Default)]
pub(super) struct OAuthPrepared {
    pub(super) server: Option<Arc<ResourceServer>>,
    pub(super) connect_ports: Vec<u16>,
    /// The process must look up host names (client metadata documents).
    pub(super) name_lookups: bool,
}

/// Fetches the issuer's JWKS now (before the sandbox): from `jwks_url`, or from the
/// `jwks_uri` of the issuer's metadata. Returns the document, the source for refetches (its
/// host pinned to the address used now) and the port refetches connect to.
fn fetch_jwks(
    issuer: &str,
    jwks_url: Option<&str>,
) -> anyhow::Result<(serde_json::Value, crate::http::oauth::jwt::KeySource, u16)> {
    use crate::http::oauth::jwt;
    use std::net::ToSocketAddrs;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let url = match jwks_url {
            Some(u) => u.to_owned(),
            None => {
                let client = jwt::client(&[])?;
                jwt::discover_jwks(&client, issuer)
                    .await
                    .map_err(anyhow::Error::msg)?
            }
        };
        let u = jwt::check_fetch_url(&url).map_err(|e| anyhow::anyhow!("the JWKS URL: {e}"))?;
        let port = u.port_or_known_default().unwrap_or(443);
        let mut pins = Vec::new();
        if let Some(url::Host::Domain(host)) = u.host() {
            let addr = (host, port)
                .to_socket_addrs()
                .map_err(|e| anyhow::anyhow!("{host}: {e}"))?
                .next()
                .ok_or_else(|| anyhow::anyhow!("{host}: no address"))?;
            pins.push((host.to_owned(), addr));
        }
        let client = jwt::client(&pins)?;
        let doc = jwt::fetch_json(&client, &url)
            .await
            .map_err(|e| anyhow::anyhow!("the issuer's keys: {e}"))?;
        Ok((doc, jwt::KeySource::Url { url, client }, port))
    })
}

/// The built-in authorization server's store of `vault` (for `passwd` and `tokens`).
pub(super) fn oauth_store(vault: &Path, state_dir: Option<&Path>) -> anyhow::Result<Store> {
    let vault = Vault::open(vault, Limits::default())?;
    let root = state_root(state_dir)?;
    let state = StateDir::open(&root, &vault)
        .map_err(|e| anyhow::anyhow!("{e} (--state-dir {})", root.display()))?;
    let files = state
        .private_files("oauth")
        .map_err(|e| anyhow::anyhow!("state folder: {e}"))?;
    Ok(Store::new(files))
}

/// `capvault passwd`: sets the owner's passphrase for the consent page (read from the terminal,
/// twice, or one line of stdin), kept as an argon2id hash.
pub fn passwd(vault: &Path, state_dir: Option<&Path>) -> anyhow::Result<()> {
    let store = oauth_store(vault, state_dir)?;
    let passphrase = crate::vault::host::read_passphrase(
        "New passphrase for the consent page: ",
        "Once more: ",
    )?;
    store.set_passphrase(&passphrase)?;
    eprintln!("capvault: passphrase set (kept as an argon2id hash). Serve with --oauth builtin.");
    Ok(())
}
