//! `capvault serve`: everything set up before the async runtime starts (the options read, the
//! vault, cache and state folders opened, credentials read, the listener bound, the embedding
//! model loaded, then the Landlock sandbox applied), and the serving itself, over stdio or HTTP.
//! The options that change answers ([`ServeOptions`]) are opened here for `call` too.

use std::sync::Arc;

use rmcp::ServiceExt;

#[cfg(feature = "http")]
use super::cli::HttpArgs;
#[cfg(feature = "semantic")]
use super::cli::SemanticArgs;
use super::cli::{SandboxMode, ServeArgs, ServeOptions, Transport, WriteArgs};
use super::{build_server, state_root};
use crate::config::Config;
use crate::engine::{Engine, EngineOptions, IndexCache};
use crate::notes::write::{WriteOptions, Writer};
use crate::server::ToolPolicy;
use crate::vault::cache::IndexCacheDir;
use crate::vault::host::Host;
use crate::vault::state::{AuditFile, StateDir};
use crate::vault::{Limits, Vault, sandbox};

/// One vault of a server ready to run: its name, engine, writer and tool profile.
pub struct ServedVault {
    name: String,
    engine: Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: ToolPolicy,
}

/// A server ready to run: every folder open, credentials read, the listener bound, the sandbox
/// applied.
pub struct Prepared {
    vaults: Vec<ServedVault>,
    http: Option<Listening>,
}

/// The HTTP transport's options and bound listener.
#[cfg(feature = "http")]
type Listening = (crate::http::HttpOptions, std::net::TcpListener);
/// Without the HTTP transport there is none.
#[cfg(not(feature = "http"))]
type Listening = std::convert::Infallible;

impl Prepared {
    /// Everything `serve` does before the runtime starts, synchronous and single-threaded:
    /// credentials and certificates read, folders opened, the listener bound, the model
    /// loaded (or downloaded), then the sandbox applied.
    pub fn new(host: &Host, args: ServeArgs) -> anyhow::Result<Prepared> {
        let ServeArgs {
            options,
            more_vaults,
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
            #[cfg(feature = "http")]
            Transport::Http => Some(http_args.options(host)?),
            #[cfg(not(feature = "http"))]
            Transport::Http => return Err(super::not_built("http", "--transport http")),
            Transport::Stdio => None,
        };
        let (opened, config) = options.open_all(host, http.is_some(), &more_vaults)?;
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
        #[cfg(feature = "http")]
        let (http, oauth) = listen(host, &http_args, http, &opened, &options.write)?;
        #[cfg(not(feature = "http"))]
        let (http, oauth) = {
            let _ = http_args;
            (http, Network::default())
        };
        #[cfg(feature = "oauth")]
        let oauth_files = oauth.server.as_ref().and_then(|rs| match &rs.issuer {
            crate::http::oauth::Issuer::Builtin(auth) => Some(auth.store_files()),
            _ => None,
        });
        #[cfg(not(feature = "oauth"))]
        let oauth_files = None;
        apply_sandbox(
            &opened,
            oauth_files,
            (oauth.connect_ports.clone(), oauth.name_lookups),
            sandbox,
        )?;
        if let Some(path) = sandbox_probe {
            eprintln!("capvault: sandbox probe: {}", sandbox::probe(&path));
        }
        let several = opened.len() > 1;
        let vaults = opened
            .into_iter()
            .map(|o| {
                let mut engine_options = engine_options.clone();
                if several {
                    // Each vault parses on its own pool: a large vault's first build never
                    // queues a small one's work behind its own.
                    engine_options.pool = rayon::ThreadPoolBuilder::new()
                        .thread_name(|i| format!("capvault-parse-{i}"))
                        .build()
                        .ok()
                        .map(Arc::new);
                }
                let engine = Engine::open(o.vault, engine_options, o.cache);
                if let Some(m) = o.embedding {
                    engine.share_embedding_model(m);
                }
                if let Some(why) = o.embedding_off {
                    engine.set_embedding_unavailable(why);
                }
                ServedVault {
                    name: o.name,
                    engine,
                    writer: o.writer,
                    policy: o.policy,
                }
            })
            .collect();
        Ok(Prepared { vaults, http })
    }

    /// Serves until the client leaves (stdio) or a signal arrives.
    pub async fn serve(self) -> anyhow::Result<()> {
        match self.http {
            #[cfg(feature = "http")]
            Some((options, listener)) => serve_http(self.vaults, options, listener).await,
            #[cfg(not(feature = "http"))]
            Some(never) => match never {},
            None => serve_stdio(self.vaults).await,
        }
    }
}

/// Whether `capvault ARGS` (a client entry's arguments: `serve VAULT... [OPTIONS]`) would
/// start serving, checked by the command line's own parser and `serve`'s own checks (see
/// [`ServeOptions::check`]), without starting anything: the refusal `serve` would give.
pub fn check_entry_args(host: &Host, args: &[String]) -> anyhow::Result<()> {
    use super::cli::{Cli, Command};
    let argv = std::iter::once("capvault".to_owned()).chain(args.iter().cloned());
    let cli = Cli::try_parse_checked_from(argv).map_err(|e| {
        // clap's own text: `error: ...`, then usage and a hint; the first line says it.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        anyhow::anyhow!("{}", first.trim_start_matches("error: "))
    })?;
    let Command::Serve(serve) = cli.command else {
        anyhow::bail!("the arguments do not start with `serve`");
    };
    if serve.transport != Transport::Stdio {
        anyhow::bail!("a client starts capvault over stdio, not `--transport http`");
    }
    serve.options.check(host, &serve.more_vaults)
}

/// What the network needs from the sandbox: OAuth's outgoing connections.
#[cfg(not(feature = "oauth"))]
#[derive(Default)]
struct Network {
    connect_ports: Vec<u16>,
    name_lookups: bool,
}

#[cfg(feature = "oauth")]
use super::oauth::OAuthPrepared as Network;

/// The HTTP listener bound, its options checked and OAuth set up (when on), for the vaults
/// `opened`.
#[cfg(feature = "http")]
fn listen(
    host: &Host,
    http_args: &HttpArgs,
    http: Option<crate::http::HttpOptions>,
    opened: &[Opened],
    write: &WriteArgs,
) -> anyhow::Result<(Option<Listening>, Network)> {
    #[cfg_attr(not(feature = "oauth"), allow(unused_mut))]
    let Some(mut options) = http else {
        return Ok((None, Network::default()));
    };
    for name in options.tokens.vault_names() {
        if !opened.iter().any(|o| o.name == name) {
            anyhow::bail!(
                "--token-file: `vaults={name}` names no vault this server serves (its \
                 vaults: {})",
                opened
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let listener = crate::http::bind(&options)?;
    #[cfg(feature = "oauth")]
    let oauth = {
        let first = &opened[0];
        let state = if http_args.oauth.is_some() {
            // The authorization server's store lives in the first vault's state folder.
            let files = match &first.writer {
                Some(w) => w.folders().0.private_files("oauth"),
                None => StateDir::open(&state_root(write.state_dir.as_deref())?, &first.vault)
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .private_files("oauth"),
            };
            Some(files.map_err(|e| anyhow::anyhow!("state folder: {e}"))?)
        } else {
            None
        };
        // The consent page names the vault (one), or lets the owner choose (several).
        let shown: Vec<String> = if opened.len() == 1 {
            vec![first.vault.name().to_owned()]
        } else {
            opened.iter().map(|o| o.name.clone()).collect()
        };
        http_args.oauth(
            host,
            &mut options,
            listener.local_addr()?,
            state,
            &shown,
            opened.iter().any(|o| o.writer.is_some()),
        )?
    };
    #[cfg(not(feature = "oauth"))]
    let oauth = {
        let _ = (host, write);
        if http_args.oauth.is_some() || http_args.oauth_issuer.is_some() {
            return Err(super::not_built("oauth", "OAuth (--oauth, --oauth-issuer)"));
        }
        Network::default()
    };
    options.check().map_err(anyhow::Error::msg)?;
    Ok((Some((options, listener)), oauth))
}

/// What [`ServeOptions`] open for one vault: the vault (with its write scopes), the model, the
/// writer, the tool policy and the index cache.
pub(super) struct Opened {
    /// The name clients pass as `vault` when the server has several.
    pub(super) name: String,
    pub(super) vault: Vault,
    pub(super) embedding: Option<Arc<crate::semantic::Embedder>>,
    pub(super) writer: Option<Arc<Writer>>,
    pub(super) policy: ToolPolicy,
    pub(super) cache: IndexCache,
    /// Why `--semantic` has no model (the download failed, say), for `vault_info` and refusals.
    pub(super) embedding_off: Option<String>,
}

/// A vault's embedding model, or why the one asked for could not be had.
type EmbeddingChoice = (Option<Arc<crate::semantic::Embedder>>, Option<String>);

/// One vault to serve: its folder, and its `[[vault]]` table when the config file has one.
struct VaultSpec {
    folder: std::path::PathBuf,
    entry: Option<crate::config::VaultEntry>,
}

impl ServeOptions {
    /// `base` with what these options say about texts, scans and Obsidian's excluded files,
    /// and the PDF worker started.
    pub(super) fn engine_options(
        &self,
        config: &Config,
        base: EngineOptions,
    ) -> anyhow::Result<EngineOptions> {
        let options = self.answer_options(config, base)?;
        Ok(EngineOptions {
            pdf: std::sync::Arc::new(crate::engine::pdf::PdfReader::start(options.index_pdfs)),
            ..options
        })
    }

    /// `base` with what these options say about texts, scans and Obsidian's excluded files,
    /// checked; no worker started.
    fn answer_options(
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
        let index_pdfs = self.index_pdfs || config.index_pdfs;
        if index_pdfs && cfg!(not(feature = "pdf")) {
            return Err(super::not_built(
                "pdf",
                "PDF search (--index-pdfs, `index_pdfs = true`)",
            ));
        }
        Ok(EngineOptions {
            prompts,
            trust,
            scan_budget: std::time::Duration::from_millis(self.scan_budget),
            exact_scan_max_notes: self.exact_scan_max_notes,
            keep_texts: !self.no_text_cache,
            hide_obsidian_excluded: !(self.show_obsidian_excluded || config.show_obsidian_excluded),
            hidden_text: self.hidden_text.or(config.hidden_text).unwrap_or_default(),
            index_pdfs,
            ..base
        })
    }

    /// Opens the config file and the one vault these options name (`call`).
    pub(super) fn open(&self, host: &Host, http: bool) -> anyhow::Result<(Opened, Config)> {
        let Some(folder) = &self.vault.vault else {
            anyhow::bail!("name the vault folder: capvault call ~/Notes TOOL '{{...}}'");
        };
        let config = crate::config::load(host, self.vault.config.as_deref())?;
        let spec = VaultSpec {
            folder: folder.clone(),
            entry: entry_for(&config, folder),
        };
        let model = self
            .embedding(host, &config, std::slice::from_ref(&spec))?
            .remove(0);
        let opened = self.open_one(&config, &spec, http, model)?;
        Ok((opened, config))
    }

    /// The vaults to serve: those on the command line (`first` and `more`), else the config
    /// file's `[[vault]]` tables; at least one, at most [`crate::server::vaults::MAX_VAULTS`].
    fn specs(
        &self,
        config: &Config,
        more: &[std::path::PathBuf],
    ) -> anyhow::Result<Vec<VaultSpec>> {
        let named: Vec<&std::path::PathBuf> = self.vault.vault.iter().chain(more).collect();
        let specs: Vec<VaultSpec> = if named.is_empty() {
            config
                .vault
                .iter()
                .map(|e| {
                    Ok(VaultSpec {
                        folder: e.folder()?,
                        entry: Some(e.clone()),
                    })
                })
                .collect::<anyhow::Result<_>>()?
        } else {
            named
                .into_iter()
                .map(|f| VaultSpec {
                    folder: f.clone(),
                    entry: entry_for(config, f),
                })
                .collect()
        };
        if specs.is_empty() {
            anyhow::bail!(
                "name the vault folder: `capvault serve ~/Notes` (several: `capvault serve \
                 ~/Work ~/Personal`, or [[vault]] tables in the config file)"
            );
        }
        if specs.len() > crate::server::vaults::MAX_VAULTS {
            anyhow::bail!(
                "at most {} vaults in one server",
                crate::server::vaults::MAX_VAULTS
            );
        }
        Ok(specs)
    }

    /// Whether `serve` with these options and `more` vault folders would start, as far as
    /// can be known without opening a folder for writing or starting a thread: the config
    /// file, every vault's tool profile, exclusions and write scopes, the flags that need
    /// `--write`, and the options that change answers. (`capvault install` checks a client's
    /// entry with it; the vault folders themselves are checked by opening them.)
    fn check(&self, host: &Host, more: &[std::path::PathBuf]) -> anyhow::Result<()> {
        let config = crate::config::load(host, self.vault.config.as_deref())?;
        self.answer_options(&config, EngineOptions::default())?;
        let mut any_write = false;
        for spec in self.specs(&config, more)? {
            let entry = spec.entry.unwrap_or_default();
            self.exclusions(&config, &entry)?;
            self.vault_scopes(&entry)?;
            self.policy(&config, &entry)?;
            any_write |= entry.write.unwrap_or(self.write.write);
        }
        self.write.check_write_only(any_write)
    }

    /// Opens the config file and every vault to serve: those on the command line (`first` and
    /// `more`), else the config file's `[[vault]]` tables. Each gets its own name (distinct),
    /// writer, state, index cache and tool profile; the embedding model is loaded once.
    pub(super) fn open_all(
        &self,
        host: &Host,
        http: bool,
        more: &[std::path::PathBuf],
    ) -> anyhow::Result<(Vec<Opened>, Config)> {
        let config = crate::config::load(host, self.vault.config.as_deref())?;
        let specs = self.specs(&config, more)?;
        let models = self.embedding(host, &config, &specs)?;
        let mut opened: Vec<Opened> = Vec::new();
        for (spec, model) in specs.iter().zip(models) {
            let mut one = self.open_one(&config, spec, http, model)?;
            // Two folders of one name: the later one gets a number.
            if opened.iter().any(|o| o.name == one.name) {
                if spec.entry.as_ref().is_some_and(|e| e.name.is_some()) {
                    anyhow::bail!("two vaults are named `{}`: give one another name", one.name);
                }
                let base = one.name.clone();
                let mut n = 2;
                while opened.iter().any(|o| o.name == one.name) {
                    one.name = format!("{base}-{n}");
                    n += 1;
                }
            }
            opened.push(one);
        }
        self.write
            .check_write_only(opened.iter().any(|o| o.writer.is_some()))?;
        if opened.len() > 1 {
            for o in &opened {
                if let Some(w) = &o.writer {
                    w.set_vault_name(&o.name);
                }
            }
            let list: Vec<&str> = opened.iter().map(|o| o.name.as_str()).collect();
            tracing::info!(vaults = %list.join(", "), "serving several vaults");
        }
        Ok((opened, config))
    }

    /// Each of `specs`' embedding model (or why it could not be had), in order: none without
    /// semantic search; else its `[[vault]]` table's `embedding_model`, `--embedding-model`, or
    /// the default model (downloaded when missing). Every model is loaded once, before the
    /// sandbox, and shared by the vaults that name it.
    fn embedding(
        &self,
        host: &Host,
        config: &Config,
        specs: &[VaultSpec],
    ) -> anyhow::Result<Vec<EmbeddingChoice>> {
        let mut loaded: Vec<(Option<std::path::PathBuf>, EmbeddingChoice)> = Vec::new();
        let mut out = Vec::new();
        for spec in specs {
            if !self.wants_semantic(config, spec) {
                out.push((None, None));
                continue;
            }
            let table_dir = spec
                .entry
                .as_ref()
                .map(crate::config::VaultEntry::embedding_folder)
                .transpose()?
                .flatten();
            let dir = table_dir.or_else(|| self.semantic.embedding_model.clone());
            if let Some((_, choice)) = loaded.iter().find(|(d, _)| *d == dir) {
                out.push(choice.clone());
                continue;
            }
            let choice = match &dir {
                Some(dir) => {
                    let started = std::time::Instant::now();
                    let m = crate::semantic::load_model(host, dir)?;
                    tracing::info!(model = %m.info().name, dimensions = m.dimensions(),
                        ms = started.elapsed().as_millis() as u64, "embedding model loaded");
                    (Some(Arc::new(m)), None)
                }
                #[cfg(feature = "semantic")]
                None => match semantic_model(host, &self.semantic)? {
                    Ok(m) => (Some(Arc::new(m)), None),
                    Err(why) => (None, Some(why)),
                },
                #[cfg(not(feature = "semantic"))]
                None => {
                    return Err(super::not_built(
                        "semantic",
                        "semantic search (--semantic, `semantic = true`)",
                    ));
                }
            };
            loaded.push((dir, choice.clone()));
            out.push(choice);
        }
        Ok(out)
    }

    /// True when the vault of `spec` has semantic search: its table's `semantic` (or a model
    /// folder it names), else a model folder given, `--semantic` or the file's `semantic`.
    fn wants_semantic(&self, config: &Config, spec: &VaultSpec) -> bool {
        let default =
            self.semantic.embedding_model.is_some() || self.semantic.semantic || config.semantic;
        let entry = spec.entry.as_ref();
        entry
            .and_then(|e| e.semantic)
            .unwrap_or(default || entry.is_some_and(|e| e.embedding_model.is_some()))
    }

    /// The paths removed from a vault: `--exclude`, the config file's and its table's.
    fn exclusions(
        &self,
        config: &Config,
        entry: &crate::config::VaultEntry,
    ) -> anyhow::Result<crate::vault::Exclusions> {
        let mut patterns = self.vault.exclude.clone();
        patterns.extend(config.exclude.iter().cloned());
        patterns.extend(entry.exclude.iter().cloned());
        crate::vault::Exclusions::new(&patterns).map_err(anyhow::Error::msg)
    }

    /// A vault's write scopes: `--write-scope` and its table's.
    fn vault_scopes(
        &self,
        entry: &crate::config::VaultEntry,
    ) -> anyhow::Result<Vec<crate::vault::VaultPath>> {
        let mut scopes = self.write.scopes()?;
        for s in &entry.write_scope {
            scopes.push(
                crate::vault::VaultPath::parse_folder(s)
                    .map_err(|e| anyhow::anyhow!("[[vault]] write_scope {s}: {e}"))?,
            );
        }
        Ok(scopes)
    }

    /// A vault's tool policy: its table's `tools`, else `--tools`, else the config file's,
    /// less its table's disabled tools.
    fn policy(
        &self,
        config: &Config,
        entry: &crate::config::VaultEntry,
    ) -> anyhow::Result<ToolPolicy> {
        let known = crate::server::CapvaultServer::tool_names();
        let mut policy = config
            .policy(entry.tools.as_deref().or(self.tools.as_deref()), &known)
            .map_err(|e| anyhow::anyhow!("tools: {e}"))?;
        for t in &entry.disabled_tools {
            policy
                .disable(t, &known)
                .map_err(|e| anyhow::anyhow!("[[vault]] disabled_tools: {e}"))?;
        }
        Ok(policy)
    }

    /// Opens one vault with every exclusion, its write scopes, writer, tool policy and index
    /// cache (a bad folder fails before any work).
    fn open_one(
        &self,
        config: &Config,
        spec: &VaultSpec,
        http: bool,
        (embedding, embedding_off): EmbeddingChoice,
    ) -> anyhow::Result<Opened> {
        let entry = spec.entry.clone().unwrap_or_default();
        let excluded = self.exclusions(config, &entry)?;
        let vault = Vault::open(
            &spec.folder,
            Limits {
                max_read_bytes: self.vault.max_file_size,
            },
        )?
        .with_exclusions(excluded);
        let name = match &entry.name {
            Some(n) if crate::server::vaults::valid_name(n) => n.clone(),
            Some(n) => anyhow::bail!(
                "[[vault]] name `{n}`: use 1 to {} letters, digits, `-`, `_` or `.`",
                crate::server::vaults::MAX_NAME
            ),
            None => crate::server::vaults::name_from_folder(vault.name()),
        };
        let vault = vault.with_write_scopes(self.vault_scopes(&entry)?);
        let write = entry.write.unwrap_or(self.write.write);
        let writer = self.write.writer(&vault, config, http, write)?;
        let policy = self.policy(config, &entry)?;
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
        Ok(Opened {
            name,
            vault,
            embedding,
            writer,
            policy,
            cache,
            embedding_off,
        })
    }
}

/// The config file's `[[vault]]` table for the folder `folder` names, if one has its path.
fn entry_for(config: &Config, folder: &std::path::Path) -> Option<crate::config::VaultEntry> {
    let want = std::path::absolute(folder).ok()?;
    let trim = |p: &std::path::Path| p.components().collect::<std::path::PathBuf>();
    config
        .vault
        .iter()
        .find(|e| e.folder().is_ok_and(|f| trim(&f) == trim(&want)))
        .cloned()
}

impl WriteArgs {
    /// Refuses a flag that only means something with writes on when no vault is `written`.
    fn check_write_only(&self, written: bool) -> anyhow::Result<()> {
        if !written && let Some(flag) = self.write_only_flag() {
            anyhow::bail!(
                "{flag} needs --write (or `write = true` in a [[vault]] table of the config file)"
            );
        }
        Ok(())
    }

    /// The first flag given that only means something with writes on.
    pub(super) fn write_only_flag(&self) -> Option<&'static str> {
        [
            (!self.write_scope.is_empty(), "--write-scope"),
            (self.allow_permanent_delete, "--allow-permanent-delete"),
            (self.audit_log.is_some(), "--audit-log"),
            (self.confirm.is_some(), "--confirm"),
            (self.require_if_match.is_some(), "--require-if-match"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

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

    /// The writer, when `write` (`--write`, or the vault's table); `http`: served over HTTP
    /// (where `if_match` is required unless the flag or the config file say otherwise).
    fn writer(
        &self,
        vault: &Vault,
        config: &Config,
        http: bool,
        write: bool,
    ) -> anyhow::Result<Option<Arc<Writer>>> {
        if !write {
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
            state_dir: self.state_dir.clone(),
        };
        Ok(Some(Arc::new(Writer::new(state, audit, options))))
    }
}

#[cfg(feature = "http")]
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
#[cfg(feature = "semantic")]
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

/// Confines this process (and every thread it will start) to what `serve` needs: the vaults,
/// their caches, state folders and audit logs, the authorization server's files.
fn apply_sandbox(
    opened: &[Opened],
    oauth: Option<&crate::vault::private::PrivateDir>,
    (connect_ports, name_lookups): (Vec<u16>, bool),
    mode: SandboxMode,
) -> anyhow::Result<()> {
    let mut plan = sandbox::Plan {
        vaults: Vec::new(),
        caches: Vec::new(),
        states: Vec::new(),
        audits: Vec::new(),
        oauth,
        connect_ports,
        name_lookups,
    };
    for o in opened {
        plan.vaults.push((&o.vault, o.writer.is_some()));
        if let IndexCache::Dir(d) = &o.cache {
            plan.caches.push(d);
        }
        if let Some((state, audit)) = o.writer.as_deref().map(Writer::folders) {
            plan.states.push(state);
            plan.audits.extend(audit);
        }
    }
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
        sandbox::State::Unavailable if cfg!(target_os = "linux") => tracing::warn!(
            filesystem = %report.filesystem,
            "no sandbox: this kernel has no Landlock; capvault's own checks still confine every request"
        ),
        // No process sandbox exists here (SECURITY.md, "Platforms"): said once, not warned of.
        sandbox::State::Unavailable => tracing::info!(
            "no process sandbox on this platform (Landlock is Linux's); capvault's own checks \
             confine every request"
        ),
    }
    Ok(())
}
/// The server of `vaults` (one vault's, or one over several), after removing what interrupted
/// writes left behind.
fn server_of(vaults: &[ServedVault]) -> anyhow::Result<crate::server::CapvaultServer> {
    let mut members = Vec::new();
    for v in vaults {
        members.push(crate::server::vaults::Member {
            name: v.name.clone(),
            server: build_server(&v.engine, v.writer.clone(), &v.policy)?,
        });
    }
    if members.len() == 1 {
        return Ok(members.remove(0).server);
    }
    Ok(crate::server::CapvaultServer::several(members)?)
}

/// Shuts every vault's engine down: background work stopped, threads joined, index caches saved.
async fn shutdown(vaults: Vec<ServedVault>) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || {
        for v in vaults {
            v.engine.shutdown();
        }
    })
    .await?;
    Ok(())
}

/// Serves `vaults` over stdin/stdout until the client disconnects (stdin closes) or
/// SIGINT or SIGTERM arrives, then shuts the engines down: background work stopped, threads
/// joined, the index caches saved a last time.
pub async fn serve_stdio(vaults: Vec<ServedVault>) -> anyhow::Result<()> {
    for v in &vaults {
        tracing::info!(
            vault = v.engine.vault().name(),
            writes = v.writer.is_some(),
            "serving over stdio"
        );
        v.engine.start();
    }
    let server = server_of(&vaults)?;
    if crate::vault::host::stdin_is_terminal() {
        // Typed in a terminal: the silence would look like a hang.
        eprintln!(
            "capvault: waiting for an MCP client on stdin (this is what a client starts and \
             talks to; a person at a terminal has nothing to type here). Set a client up with \
             `capvault install <client> <vault>`, try a tool with `capvault call <vault> --list`, \
             or see the whole exchange with `capvault demo`. Ctrl-C stops."
        );
    }
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
    shutdown(vaults).await?;
    served
}

#[cfg(feature = "http")]
/// Serves `vaults` over Streamable HTTP (`options`, on `listener`) until SIGINT or SIGTERM,
/// every session on the same engines; then lets requests in flight finish and shuts the
/// engines down.
pub async fn serve_http(
    vaults: Vec<ServedVault>,
    options: crate::http::HttpOptions,
    listener: std::net::TcpListener,
) -> anyhow::Result<()> {
    let server = server_of(&vaults)?;
    for v in &vaults {
        v.engine.start();
    }
    let served = crate::http::serve(server, options, listener, shutdown_signal())
        .await
        .map_err(anyhow::Error::from);
    shutdown(vaults).await?;
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
