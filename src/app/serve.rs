//! `capvault serve`: everything set up before the async runtime starts (the options read, the
//! vault, cache and state folders opened, credentials read, the listener bound, the embedding
//! model loaded, then the Landlock sandbox applied), and the serving itself, over stdio or HTTP.
//! The options that change answers ([`ServeOptions`]) are opened here for `call` too.

use std::sync::Arc;

use rmcp::ServiceExt;

use super::cli::{
    HttpArgs, SandboxMode, SemanticArgs, ServeArgs, ServeOptions, Transport, VaultArgs, WriteArgs,
};
use super::oauth::OAuthPrepared;
use super::{build_server, state_root};
use crate::config::Config;
use crate::engine::{Engine, EngineOptions, IndexCache};
use crate::notes::write::{WriteOptions, Writer};
use crate::server::ToolPolicy;
use crate::vault::cache::IndexCacheDir;
use crate::vault::host::Host;
use crate::vault::state::{AuditFile, StateDir};
use crate::vault::{Limits, Vault, sandbox};

/// A server ready to run: every folder open, credentials read, the listener bound, the sandbox
/// applied.
pub struct Prepared {
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: ToolPolicy,
    http: Option<(crate::http::HttpOptions, std::net::TcpListener)>,
}

impl Prepared {
    /// Everything `serve` does before the runtime starts, synchronous and single-threaded:
    /// credentials and certificates read, folders opened, the listener bound, the model
    /// loaded (or downloaded), then the sandbox applied.
    pub fn new(host: &Host, args: ServeArgs) -> anyhow::Result<Prepared> {
        let ServeArgs {
            options,
            transport,
            http,
            rescan_after,
            reconcile_every,
            no_watch,
            index_delay,
            sandbox,
            sandbox_probe,
        } = args;
        let ms = std::time::Duration::from_millis;
        // Credentials and certificates first: a bad flag fails before any work.
        let http_args = http;
        let http = match transport {
            Transport::Http => Some(http_args.options(host)?),
            Transport::Stdio => None,
        };
        let (
            Opened {
                vault,
                embedding,
                writer,
                policy,
                cache,
                embedding_off,
            },
            config,
        ) = options.open(host, http.is_some())?;
        let engine_options = options.engine_options(
            &config,
            EngineOptions {
                query_max_age: rescan_after.map(ms),
                periodic: std::time::Duration::from_secs(reconcile_every),
                watch: !no_watch,
                build_delay: ms(index_delay),
                ..EngineOptions::default()
            },
        )?;
        let write = &options.write;
        let mut oauth = OAuthPrepared::default();
        let mut oauth_files = None;
        let http = match http {
            Some(mut options) => {
                let listener = crate::http::bind(&options)?;
                let state = if http_args.oauth.is_some() {
                    let files = match &writer {
                        Some(w) => w.folders().0.private_files("oauth"),
                        None => StateDir::open(&state_root(write.state_dir.as_deref())?, &vault)
                            .map_err(|e| anyhow::anyhow!("{e}"))?
                            .private_files("oauth"),
                    };
                    Some(files.map_err(|e| anyhow::anyhow!("state folder: {e}"))?)
                } else {
                    None
                };
                oauth = http_args.oauth(
                    host,
                    &mut options,
                    listener.local_addr()?,
                    state,
                    vault.name(),
                    writer.is_some(),
                )?;
                options.check().map_err(anyhow::Error::msg)?;
                Some((options, listener))
            }
            None => None,
        };
        if let Some(rs) = &oauth.server
            && let crate::http::oauth::Issuer::Builtin(auth) = &rs.issuer
        {
            oauth_files = Some(auth.store_files());
        }
        apply_sandbox(
            &vault,
            writer.as_deref(),
            &cache,
            oauth_files,
            (oauth.connect_ports.clone(), oauth.name_lookups),
            sandbox,
        )?;
        if let Some(path) = sandbox_probe {
            eprintln!("capvault: sandbox probe: {}", sandbox::probe(&path));
        }
        let engine = Engine::open(vault, engine_options, cache);
        if let Some(m) = embedding {
            engine.set_embedding_model(m);
        }
        if let Some(why) = embedding_off {
            engine.set_embedding_unavailable(why);
        }
        Ok(Prepared {
            engine,
            writer,
            policy,
            http,
        })
    }

    /// Serves until the client leaves (stdio) or a signal arrives.
    pub async fn serve(self) -> anyhow::Result<()> {
        match self.http {
            Some((options, listener)) => {
                serve_http(self.engine, self.writer, &self.policy, options, listener).await
            }
            None => serve_stdio(self.engine, self.writer, &self.policy).await,
        }
    }
}

/// What [`ServeOptions`] open: the vault (with its write scopes), the model, the writer, the
/// tool policy and the index cache.
pub(super) struct Opened {
    pub(super) vault: Vault,
    pub(super) embedding: Option<crate::semantic::Embedder>,
    pub(super) writer: Option<Arc<Writer>>,
    pub(super) policy: ToolPolicy,
    pub(super) cache: IndexCache,
    /// Why `--semantic` has no model (the download failed, say), for `vault_info` and refusals.
    pub(super) embedding_off: Option<String>,
}

impl ServeOptions {
    /// `base` with what these options say about texts, scans and Obsidian's excluded files.
    pub(super) fn engine_options(
        &self,
        config: &Config,
        base: EngineOptions,
    ) -> anyhow::Result<EngineOptions> {
        let folder = match self
            .prompts_folder
            .as_ref()
            .or(config.prompts_folder.as_ref())
        {
            Some(f) => Some(
                crate::vault::VaultPath::parse_folder(f.trim().trim_matches('/'))
                    .map_err(|e| anyhow::anyhow!("--prompts-folder {f}: {e}"))?,
            ),
            None => None,
        };
        let prompts = crate::engine::PromptOptions {
            folder,
            builtin: !self.no_builtin_prompts && config.builtin_prompts.unwrap_or(true),
        };
        let untrusted: Vec<String> = config
            .untrusted
            .iter()
            .chain(&self.untrusted)
            .cloned()
            .collect();
        let shared: Vec<String> = config.shared.iter().chain(&self.shared).cloned().collect();
        let trust = crate::obsidian::provenance::TrustRules::new(&untrusted, &shared)
            .map_err(|e| anyhow::anyhow!("untrusted or shared folders: {e}"))?;
        Ok(EngineOptions {
            prompts,
            trust,
            scan_budget: std::time::Duration::from_millis(self.scan_budget),
            exact_scan_max_notes: self.exact_scan_max_notes,
            keep_texts: !self.no_text_cache,
            hide_obsidian_excluded: !(self.show_obsidian_excluded || config.show_obsidian_excluded),
            hidden_text: self.hidden_text.or(config.hidden_text).unwrap_or_default(),
            pdf: std::sync::Arc::new(crate::engine::pdf::PdfReader::start()),
            index_pdfs: self.index_pdfs || config.index_pdfs,
            ..base
        })
    }

    /// Opens the config file, the vault, the model (a bad folder fails before any work, and its
    /// files are read, or downloaded, before the sandbox closes the filesystem and the network;
    /// a folder given wins over the config file's `semantic`), the state folder and the index
    /// cache.
    pub(super) fn open(&self, host: &Host, http: bool) -> anyhow::Result<(Opened, Config)> {
        let (vault, config) = self.vault.open(host)?;
        let semantic = &self.semantic;
        let mut embedding_off = None;
        let embedding = match &semantic.embedding_model {
            Some(dir) => {
                let started = std::time::Instant::now();
                let m = crate::semantic::load_model(host, dir)?;
                tracing::info!(model = %m.info().name, dimensions = m.dimensions(),
                    ms = started.elapsed().as_millis() as u64, "embedding model loaded");
                Some(m)
            }
            None if semantic.semantic || config.semantic => match semantic_model(host, semantic)? {
                Ok(m) => Some(m),
                Err(why) => {
                    embedding_off = Some(why);
                    None
                }
            },
            None => None,
        };
        let vault = vault.with_write_scopes(self.write.scopes()?);
        let writer = self.write.writer(&vault, &config, http)?;
        let policy = config
            .policy(
                self.tools.as_deref(),
                &crate::server::CapvaultServer::tool_names(),
            )
            .map_err(|e| anyhow::anyhow!("tools: {e}"))?;
        let cache = if self.no_index_cache {
            IndexCache::Off
        } else {
            match self
                .index_cache
                .clone()
                .or_else(crate::vault::cache::default_root)
            {
                None => IndexCache::Unavailable("no cache folder for this user".to_owned()),
                Some(root) => match IndexCacheDir::open(&root, &vault) {
                    Ok(dir) => IndexCache::Dir(Arc::new(dir)),
                    Err(e) => {
                        tracing::warn!(error = %e, "index cache unavailable; indexing every note at each start");
                        IndexCache::Unavailable(e.to_string())
                    }
                },
            }
        };
        Ok((
            Opened {
                vault,
                embedding,
                writer,
                policy,
                cache,
                embedding_off,
            },
            config,
        ))
    }
}

impl VaultArgs {
    /// The config file, then the vault with every exclusion (flags and file).
    fn open(&self, host: &Host) -> anyhow::Result<(Vault, Config)> {
        let config = crate::config::load(host, self.config.as_deref())?;
        let mut patterns = self.exclude.clone();
        patterns.extend(config.exclude.iter().cloned());
        let excluded = crate::vault::Exclusions::new(&patterns).map_err(anyhow::Error::msg)?;
        let vault = Vault::open(
            &self.vault,
            Limits {
                max_read_bytes: self.max_file_size,
            },
        )?
        .with_exclusions(excluded);
        Ok((vault, config))
    }
}

impl WriteArgs {
    /// The write scopes, as vault paths.
    fn scopes(&self) -> anyhow::Result<Vec<crate::vault::VaultPath>> {
        self.write_scope
            .iter()
            .map(|s| {
                crate::vault::VaultPath::parse_folder(s)
                    .map_err(|e| anyhow::anyhow!("--write-scope {s}: {e}"))
            })
            .collect()
    }

    /// The writer, when `--write` is given; `http`: served over HTTP (where `if_match` is
    /// required unless the flag or the config file say otherwise).
    fn writer(
        &self,
        vault: &Vault,
        config: &Config,
        http: bool,
    ) -> anyhow::Result<Option<Arc<Writer>>> {
        if !self.write {
            return Ok(None);
        }
        let root = state_root(self.state_dir.as_deref())?;
        let state = StateDir::open(&root, vault)
            .map_err(|e| anyhow::anyhow!("{e} (--state-dir {})", root.display()))?;
        let audit = match &self.audit_log {
            Some(p) => Some(AuditFile::open(p, vault).map_err(anyhow::Error::msg)?),
            None => None,
        };
        let options = WriteOptions {
            permanent_delete: self.allow_permanent_delete,
            history_max_bytes: self.history_max_mb.saturating_mul(1024 * 1024),
            history_max_age: std::time::Duration::from_secs(
                self.history_max_days.saturating_mul(24 * 3600),
            ),
            confirm: self.confirm.or(config.confirm).unwrap_or_default()
                == crate::config::Confirm::Destructive,
            require_if_match: self
                .require_if_match
                .or(config.require_if_match)
                .unwrap_or(http),
        };
        Ok(Some(Arc::new(Writer::new(state, audit, options))))
    }
}

impl HttpArgs {
    /// The HTTP options; reads the token file, `CAPVAULT_TOKEN` and the TLS files now.
    fn options(&self, host: &Host) -> anyhow::Result<crate::http::HttpOptions> {
        const MAX_SECRET_FILE: u64 = 1024 * 1024;
        let mut tokens = crate::http::Tokens::none();
        if let Ok(t) = std::env::var("CAPVAULT_TOKEN")
            && !t.is_empty()
        {
            tokens.add_env(&t).map_err(anyhow::Error::msg)?;
        }
        if let Some(path) = &self.token_file {
            let file = host.file(path)?;
            let bytes = file
                .read_private(MAX_SECRET_FILE)
                .map_err(|e| anyhow::anyhow!("--token-file {e}"))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("--token-file {}: not UTF-8", file.shown()))?;
            tokens
                .add_file(&text, &crate::server::CapvaultServer::tool_names())
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", file.shown()))?;
            if tokens.is_empty() {
                anyhow::bail!("--token-file {}: no token in the file", file.shown());
            }
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let cert = host
                    .file(cert)
                    .and_then(|f| f.read_public(MAX_SECRET_FILE))
                    .map_err(|e| anyhow::anyhow!("--tls-cert {e}"))?;
                let key = host
                    .file(key)
                    .and_then(|f| f.read_private(MAX_SECRET_FILE))
                    .map_err(|e| anyhow::anyhow!("--tls-key {e}"))?;
                Some(crate::http::TlsPem { cert, key })
            }
            _ => None,
        };
        let limits = crate::http::HttpLimits {
            max_body_bytes: self.max_body_bytes,
            max_response_bytes: self.max_response_bytes,
            request_timeout: std::time::Duration::from_secs(self.request_timeout),
            max_in_flight: self.max_in_flight as usize,
            max_in_flight_per_client: self.max_in_flight_per_client as usize,
            max_sessions: self.max_sessions as usize,
            max_sessions_per_token: self.max_sessions_per_token as usize,
            header_timeout: std::time::Duration::from_secs(self.header_timeout),
            max_connections_per_address: self.max_connections_per_client as usize,
            session_idle: std::time::Duration::from_secs(self.session_idle),
            ..crate::http::HttpLimits::default()
        };
        let options = crate::http::HttpOptions {
            listen: self.listen,
            allowed_hosts: self.allowed_host.clone(),
            allowed_origins: self.allowed_origin.clone(),
            tokens,
            tls,
            insecure_http: self.insecure_http,
            limits,
            oauth: None,
        };
        Ok(options)
    }
}

/// The model of `--semantic`: the default one (or the testing aid's) from the user's cache
/// folder, downloaded there first when missing. A model that cannot be had is a warning, not
/// an error: the server then serves keyword search only, and says why (the `Err`, naming no
/// host path).
fn semantic_model(
    host: &Host,
    test: &SemanticArgs,
) -> anyhow::Result<Result<crate::semantic::Embedder, String>> {
    use crate::semantic::fetch;
    let spec = match &test.semantic_repo {
        None => fetch::ModelSpec::default_model(),
        Some(repo) => fetch::ModelSpec::from_args(
            Some(repo),
            test.semantic_revision.as_deref(),
            &test.semantic_sha256,
        )
        .map_err(|e| anyhow::anyhow!("--semantic-repo: {e}"))?,
    };
    let off = "semantic search is off; serving keyword search only";
    let Some(folder) = spec.cache_folder() else {
        tracing::warn!("{off}: no cache folder for this user (pass --embedding-model DIR)");
        return Ok(Err(
            "there is no cache folder for this user to keep it in".to_owned()
        ));
    };
    let started = std::time::Instant::now();
    let report = |line: &str| tracing::info!("embedding model download: {line}");
    match fetch::fetch_blocking(host, &spec, &folder, true, &fetch::endpoint(), &report) {
        Ok(done) if !done.downloaded.is_empty() => {
            tracing::info!(repo = %spec.repo, revision = %spec.revision,
                folder = %folder.display(), "embedding model downloaded");
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(
                "{off}: the embedding model {} could not be downloaded: {e} (run `capvault \
                 model fetch` to retry)",
                spec.repo
            );
            return Ok(Err(format!(
                "the model {} could not be downloaded: {e}",
                spec.repo
            )));
        }
    }
    match crate::semantic::load_model(host, &folder) {
        Ok(m) => {
            tracing::info!(model = %m.info().name, dimensions = m.dimensions(),
                ms = started.elapsed().as_millis() as u64, "embedding model loaded");
            Ok(Ok(m))
        }
        Err(e) => {
            tracing::warn!("{off}: {e}");
            Ok(Err(format!(
                "the downloaded model {} could not be loaded",
                spec.repo
            )))
        }
    }
}

/// Confines this process (and every thread it will start) to what `serve` needs.
fn apply_sandbox(
    vault: &Vault,
    writer: Option<&Writer>,
    cache: &IndexCache,
    oauth: Option<&crate::vault::state::PrivateFiles>,
    (connect_ports, name_lookups): (Vec<u16>, bool),
    mode: SandboxMode,
) -> anyhow::Result<()> {
    let (state, audit) = match writer.map(Writer::folders) {
        Some((s, a)) => (Some(s), a),
        None => (None, None),
    };
    let plan = sandbox::Plan {
        vault,
        vault_writable: writer.is_some(),
        cache: match cache {
            IndexCache::Dir(d) => Some(d),
            _ => None,
        },
        state,
        audit,
        oauth,
        connect_ports,
        name_lookups,
    };
    let mode = match mode {
        SandboxMode::BestEffort => sandbox::Mode::BestEffort,
        SandboxMode::Require => sandbox::Mode::Require,
        SandboxMode::Off => sandbox::Mode::Off,
    };
    let report = sandbox::apply(&plan, mode).map_err(anyhow::Error::msg)?;
    match report.state {
        sandbox::State::Enforced | sandbox::State::Partial => tracing::info!(
            state = ?report.state,
            abi = report.abi,
            filesystem = %report.filesystem,
            network = %report.network,
            "sandbox (Landlock)"
        ),
        sandbox::State::Off => tracing::info!("sandbox off"),
        sandbox::State::Unavailable => tracing::warn!(
            filesystem = %report.filesystem,
            "no sandbox: this kernel has no Landlock; capvault's own checks still confine every request"
        ),
    }
    Ok(())
}
/// Serves `engine`'s vault over stdin/stdout until the client disconnects (stdin closes) or
/// SIGINT or SIGTERM arrives, then shuts the engine down: background work stopped, threads
/// joined, the index cache saved a last time.
pub async fn serve_stdio(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
) -> anyhow::Result<()> {
    tracing::info!(
        vault = engine.vault().name(),
        writes = writer.is_some(),
        "serving over stdio"
    );
    engine.start();
    let server = build_server(&engine, writer, policy)?;
    let served = tokio::select! {
        service = server.serve(rmcp::transport::stdio()) => match service {
            Ok(service) => {
                let token = service.cancellation_token();
                tokio::select! {
                    quit = service.waiting() => quit.map(|_| ()).map_err(anyhow::Error::from),
                    signal = shutdown_signal() => {
                        tracing::info!(signal, "shutting down");
                        token.cancel();
                        Ok(())
                    }
                }
            }
            // A 2026-07-28 client never sends `initialize`: rmcp answers its stateless requests
            // while it waits, and the session ends when the client closes stdin.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
            Err(e) => Err(anyhow::Error::from(e).context("the MCP handshake failed")),
        },
        signal = shutdown_signal() => {
            tracing::info!(signal, "shutting down before the handshake");
            Ok(())
        }
    };
    tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    served
}

/// Serves `engine`'s vault over Streamable HTTP (`options`, on `listener`) until SIGINT or SIGTERM, every
/// session on the one engine; then lets requests in flight finish and shuts the engine down.
pub async fn serve_http(
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
    options: crate::http::HttpOptions,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    let server = build_server(&engine, writer, policy)?;
    engine.start();
    let served = crate::http::serve(server, options, listener, shutdown_signal())
        .await
        .map_err(anyhow::Error::from);
    tokio::task::spawn_blocking(move || engine.shutdown()).await?;
    served
}

/// Waits for SIGINT or SIGTERM (Ctrl-C elsewhere); returns its name.
pub async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            _ => {
                tracing::warn!("cannot listen for signals; stop the server by closing stdin");
                std::future::pending().await
            }
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    }
}
