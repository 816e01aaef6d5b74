//! The `capvault` command line. Parses arguments, sets up logging (stderr only: stdout belongs
//! to the MCP protocol) and hands over to [`capvault::app`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use capvault::engine::IndexCache;
use capvault::notes::write::{WriteOptions, Writer};
use capvault::vault::cache::IndexCacheDir;
use capvault::vault::state::{AuditFile, StateDir};
use capvault::vault::{DEFAULT_MAX_READ_BYTES, Limits, Vault, sandbox};

/// A capability-confined MCP server for Obsidian vaults.
///
/// capvault lets AI clients (Claude Desktop, Claude Code, Cursor, any MCP client) search and read
/// the notes of one vault folder, and nothing outside it: every file access goes through one
/// directory handle opened on the vault, and paths that leave it fail in the kernel.
#[derive(Parser, Debug)]
#[command(name = "capvault", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve a vault to an MCP client over stdin/stdout (what client configurations run).
    Serve {
        #[command(flatten)]
        options: Box<ServeOptions>,
        /// How clients connect: `stdio` (the client starts capvault; what client
        /// configurations run) or `http` (Streamable HTTP at `/mcp`, for many clients and
        /// remote access; see the README's "Remote access").
        #[arg(long, value_enum, default_value_t = Transport::Stdio)]
        transport: Transport,
        #[command(flatten)]
        http: Box<HttpArgs>,
        /// Also rescan the vault before a query when the last rescan is older than this many
        /// milliseconds (0: before every query). Off by default: the file watcher and the
        /// periodic reconcile keep the index fresh.
        #[arg(long, value_name = "MS")]
        rescan_after: Option<u64>,
        /// Seconds between full reconciles (a stat scan of every file that re-reads only what
        /// changed), which back up the file watcher.
        #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        reconcile_every: u64,
        /// Do not watch the vault for changes (rely on the periodic reconcile).
        #[arg(long)]
        no_watch: bool,
        /// Testing aid: wait this many milliseconds after opening the index, before the first
        /// build reads the vault.
        #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
        index_delay: u64,
        /// The Landlock sandbox (Linux): `best-effort` applies what the kernel supports and
        /// says what that is, `require` refuses to start without it, `off` disables it. The
        /// process may then reach only the vault, its cache and state folders, and the time
        /// zone database, and make no network connection.
        #[arg(long, value_enum, default_value_t = SandboxMode::BestEffort)]
        sandbox: SandboxMode,
        /// Testing aid: after the sandbox applies, try to read this host file and report the
        /// outcome on stderr.
        #[arg(long, value_name = "PATH", hide = true)]
        sandbox_probe: Option<PathBuf>,
    },
    /// Run one tool in-process and print its JSON result (to try a tool or reproduce a bug),
    /// with the options of `serve` that change answers; or list the tools (--list).
    ///
    /// Example: capvault call ~/Notes search_notes '{"query": "garden"}'
    Call {
        #[command(flatten)]
        options: Box<ServeOptions>,
        /// Tool name (`capvault call VAULT --list` lists them), e.g. search_notes or get_links.
        #[arg(required_unless_present = "list")]
        tool: Option<String>,
        /// Tool arguments as a JSON object (default: {}).
        json_args: Option<String>,
        /// List the tools these options offer, one line each: name and what it does.
        #[arg(long, conflicts_with_all = ["tool", "json_args"])]
        list: bool,
    },
    /// Serve the built-in example vault to an in-process client and show the session: a first
    /// look by default, every message whole with --full.
    Demo {
        /// Every step, and every JSON-RPC message whole.
        #[arg(long)]
        full: bool,
    },
    /// Set capvault up in an MCP client: adds (or updates) one server entry in the client's own
    /// config file, keeping everything else, with a backup beside it; prints the change.
    ///
    /// Example: capvault install claude-desktop ~/Notes
    Install {
        /// The client: claude-desktop, claude-code, cursor, vscode, windsurf, zed, codex, gemini.
        #[arg(required_unless_present = "list")]
        client: Option<String>,
        /// The vault folder.
        #[arg(required_unless_present = "list")]
        vault: Option<PathBuf>,
        /// The server's name in the client. Default: the entry that serves this vault already,
        /// else `capvault`, else (another vault has it) `capvault-<folder name>`.
        #[arg(long)]
        name: Option<String>,
        /// Let the client write (the server runs with --write).
        #[arg(long)]
        write: bool,
        /// A tool profile for the server (--tools).
        #[arg(long, value_name = "PROFILE")]
        tools: Option<String>,
        /// Print the change only.
        #[arg(long)]
        dry_run: bool,
        /// List the supported clients, their config files here, and what they hold.
        #[arg(long, conflicts_with_all = ["client", "vault"])]
        list: bool,
    },
    /// Remove capvault's entry from an MCP client's config file (with a backup beside it).
    Uninstall {
        /// The client (see `capvault install --list`).
        client: String,
        /// The server's name in the client.
        #[arg(long, default_value = "capvault")]
        name: String,
        /// Print the change only.
        #[arg(long)]
        dry_run: bool,
    },
    /// Build an MCP bundle (.mcpb) of this binary that Claude Desktop installs with a double
    /// click, asking for the vault folder and whether to allow changes.
    Bundle {
        /// Where to write the bundle.
        #[arg(long, default_value = "capvault.mcpb", value_parser = absolute_path)]
        out: PathBuf,
        /// Compression level: 0 stores the binary as it is, 1 (fastest) to 9 (smallest).
        #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(0..=9))]
        level: u8,
    },
    /// Bearer tokens for the HTTP transport.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Set the owner's passphrase for the built-in OAuth server (`serve --oauth builtin`):
    /// the consent page asks for it before a remote client gets access. Stored only as an
    /// argon2id hash in the vault's state folder. Reads it from the terminal (twice), or one
    /// line from stdin when stdin is not a terminal.
    Passwd {
        /// The vault folder.
        vault: PathBuf,
        /// The state folder (default: the user's state folder).
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        state_dir: Option<PathBuf>,
    },
    /// Which state folder (history, passphrase, grants, audit log, writers' lock) a vault uses,
    /// how it was recognised, and every other state; `--adopt ID` gives the vault an earlier
    /// one (after a copy to another disk, say).
    State {
        /// The vault folder.
        vault: PathBuf,
        /// Make the state with this id (from the list) the vault's own; the one it had is kept
        /// and listed, detached.
        #[arg(long, value_name = "ID")]
        adopt: Option<String>,
        /// Adopt a state whose own folder still exists elsewhere (both vaults would then share
        /// one history until one of them adopts another).
        #[arg(long, requires = "adopt")]
        force: bool,
        /// The state folder (default: the user's state folder).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// The access the built-in OAuth server has granted to remote clients: list or revoke it
    /// (a revoked client's tokens stop working at its next request).
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// Embedding models for semantic search (`serve --semantic`, `serve --embedding-model DIR`).
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Check what makes a client show no tools or the server misbehave, with how to fix each,
    /// then start the server as a client would and run one search.
    Doctor {
        /// The vault folder.
        vault: PathBuf,
    },
}

/// The options of `serve` that change its answers, shared with `call`.
#[derive(Args, Debug)]
struct ServeOptions {
    #[command(flatten)]
    vault: VaultArgs,
    /// Do not keep note texts in memory: saves about the vault's Markdown size, but exact and
    /// regex searches then read every candidate note from disk.
    #[arg(long)]
    no_text_cache: bool,
    /// Folder that keeps the search index between runs, so a restart re-indexes only the
    /// notes that changed (default: the user's cache folder, `~/.cache/capvault` on Linux).
    /// It must be outside the vault; it holds every word of the vault, readable only by you.
    #[arg(long, value_name = "DIR", conflicts_with = "no_index_cache", value_parser = absolute_path)]
    index_cache: Option<PathBuf>,
    /// Keep the search index in memory only: every start indexes every note.
    #[arg(long)]
    no_index_cache: bool,
    #[command(flatten)]
    semantic: Box<SemanticArgs>,
    /// Milliseconds a scanning search (exact, regex) may run before it returns partial results.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    scan_budget: u64,
    /// An exact search for words found in more notes than this reads the notes in the
    /// index's ranked order, only as many as its page needs, and reports the number of notes
    /// as its total; up to this many, it reads them all and counts every matching line.
    #[arg(long, value_name = "NOTES", default_value_t = capvault::engine::EXACT_SCAN_MAX_NOTES)]
    exact_scan_max_notes: usize,
    /// Which tools to offer: `all` (default), `read` (the reading and search tools),
    /// `minimal` (search_notes, read_note, list_notes), or tool names separated by commas.
    /// Overrides the config file's `tools`.
    #[arg(long, value_name = "PROFILE")]
    tools: Option<String>,
    /// Include the files Obsidian's "Excluded files" setting names (`userIgnoreFilters` in
    /// `.obsidian/app.json`) in search, list and graph results. By default they are left out,
    /// as Obsidian does; they are always readable by path.
    #[arg(long)]
    show_obsidian_excluded: bool,
    #[command(flatten)]
    write: WriteArgs,
}

/// What [`ServeOptions`] open: the vault (with its write scopes), the model, the writer, the
/// tool policy and the index cache.
struct Opened {
    vault: Vault,
    embedding: Option<capvault::semantic::Embedder>,
    writer: Option<std::sync::Arc<Writer>>,
    policy: capvault::server::ToolPolicy,
    cache: IndexCache,
    /// Why `--semantic` has no model (the download failed, say), for `vault_info` and refusals.
    embedding_off: Option<String>,
}

impl ServeOptions {
    /// `base` with what these options say about texts, scans and Obsidian's excluded files.
    fn freshness(
        &self,
        config: &capvault::config::Config,
        base: capvault::engine::Freshness,
    ) -> capvault::engine::Freshness {
        capvault::engine::Freshness {
            scan_budget: std::time::Duration::from_millis(self.scan_budget),
            exact_scan_max_notes: self.exact_scan_max_notes,
            keep_texts: !self.no_text_cache,
            hide_obsidian_excluded: !(self.show_obsidian_excluded || config.show_obsidian_excluded),
            ..base
        }
    }

    /// Opens the config file, the vault, the model (a bad folder fails before any work, and its
    /// files are read, or downloaded, before the sandbox closes the filesystem and the network;
    /// a folder given wins over the config file's `semantic`), the state folder and the index
    /// cache.
    fn open(&self) -> anyhow::Result<(Opened, capvault::config::Config)> {
        let (vault, config) = self.vault.open()?;
        let semantic = &self.semantic;
        let mut embedding_off = None;
        let embedding = match &semantic.embedding_model {
            Some(dir) => {
                let started = std::time::Instant::now();
                let m = capvault::semantic::load_model(dir).map_err(anyhow::Error::msg)?;
                tracing::info!(model = %m.info().name, dimensions = m.dimensions(),
                    ms = started.elapsed().as_millis() as u64, "embedding model loaded");
                Some(m)
            }
            None if semantic.semantic || config.semantic => match semantic_model(semantic)? {
                Ok(m) => Some(m),
                Err(why) => {
                    embedding_off = Some(why);
                    None
                }
            },
            None => None,
        };
        let vault = vault.with_write_scopes(self.write.scopes()?);
        let writer = self.write.writer(&vault)?;
        let policy = config
            .policy(
                self.tools.as_deref(),
                &capvault::server::CapvaultServer::tool_names(),
            )
            .map_err(|e| anyhow::anyhow!("tools: {e}"))?;
        let cache = if self.no_index_cache {
            IndexCache::Off
        } else {
            match self
                .index_cache
                .clone()
                .or_else(capvault::vault::cache::default_root)
            {
                None => IndexCache::Unavailable("no cache folder for this user".to_owned()),
                Some(root) => match IndexCacheDir::open(&root, &vault) {
                    Ok(dir) => IndexCache::Dir(std::sync::Arc::new(dir)),
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

#[derive(Args, Debug)]
struct SemanticArgs {
    /// Semantic search: the folder of a static embedding model (model2vec format:
    /// `config.json`, `tokenizer.json`, `model.safetensors`; `capvault model import` makes
    /// one from a sentence-transformers folder). Adds `semantic` and `hybrid` search modes
    /// (hybrid becomes the default) and `related_notes`.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    embedding_model: Option<PathBuf>,
    /// Semantic search with the default model (potion-base-8M, 31 MB): loaded from the
    /// user's cache folder, downloaded there first when missing (pinned and checked, as
    /// `capvault model fetch` does). If the download fails the server still starts, with
    /// keyword search only. Use --embedding-model DIR for another model or offline machines.
    #[arg(long, conflicts_with = "embedding_model")]
    semantic: bool,
    // Testing aid: the model `--semantic` downloads instead of the default one (the tests
    // serve a tiny model from a loopback hub). The same rules as `capvault model fetch`: a
    // commit and three sha256 pins.
    #[arg(long, value_name = "OWNER/NAME", hide = true)]
    semantic_repo: Option<String>,
    #[arg(long, value_name = "COMMIT", hide = true)]
    semantic_revision: Option<String>,
    #[arg(long, value_name = "FILE=HEX", hide = true)]
    semantic_sha256: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Print a fresh random token on stdout (nothing else goes there), and add its line (its
    /// SHA-256 digest, so the file holds no secret) to a --token-file with --append, or show
    /// the line on stderr.
    ///
    /// Example: capvault token new --name laptop --append ~/.config/capvault/tokens
    New {
        /// Name the token (shown in the access log): letters, digits, `-`, `_`, `.`.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Add the token's line to this token file, created private (mode 600) if missing; a
        /// file others can read is refused.
        #[arg(long, value_name = "FILE", value_parser = absolute_path)]
        append: Option<PathBuf>,
        /// What the token may do: `read` (the reading tools) or `write` (also the write tools,
        /// when the server runs with --write).
        #[arg(long, value_enum, default_value_t = Scope::Read)]
        scope: Scope,
        /// Narrow the token to a tool profile (`read`, `minimal`, or tool names separated by
        /// commas).
        #[arg(long, value_name = "PROFILE")]
        tools: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum ModelCommand {
    /// Build a static embedding model from a sentence-transformers folder (`config.json`,
    /// `tokenizer.json`, `model.safetensors` of a BERT encoder such as all-MiniLM-L6-v2): the
    /// transformer runs once on every token (about a minute), offline. With --corpus, the model
    /// is then tuned on a vault's notes so that it ranks them more as the transformer would
    /// (minutes more: about 8 minutes in all for a vault of 6,500 notes on two cores, 20 at
    /// 100,000).
    Import {
        /// The sentence-transformers folder.
        #[arg(value_parser = absolute_path)]
        source: PathBuf,
        /// Folder to write the static model to (created if missing).
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        out: PathBuf,
        /// Dimensions to keep (principal components).
        #[arg(long, default_value_t = 256)]
        dimensions: usize,
        /// A vault to tune the model on (usually the one it will serve; at most 20,000 of its
        /// sections and 64,000 runs of their words are used, and up to 10,000 of its words join
        /// the vocabulary whole). The model then carries traces of those notes' words: keep it
        /// as private as the vault.
        #[arg(long, value_name = "VAULT", value_parser = absolute_path)]
        corpus: Option<PathBuf>,
    },
    /// Download a static model (model2vec format) from the Hugging Face hub into a folder,
    /// check every file's sha256 against its pin, and load it. Without options: the default
    /// model (minishlab/potion-base-8M at a pinned commit), into the user's cache folder,
    /// where `serve --semantic` finds it. An interrupted download resumes when run again.
    /// `HF_ENDPOINT` names a mirror (https only).
    Fetch {
        /// Another model's repository (OWNER/NAME); it then needs --revision and a --sha256
        /// for each of its three files.
        #[arg(long, value_name = "OWNER/NAME")]
        repo: Option<String>,
        /// The commit to download (40 hex digits; a branch or tag is refused).
        #[arg(long, value_name = "COMMIT")]
        revision: Option<String>,
        /// The sha256 a file must have: config.json=HEX, tokenizer.json=HEX,
        /// model.safetensors=HEX (repeat for each).
        #[arg(long, value_name = "FILE=HEX")]
        sha256: Vec<String>,
        /// Folder to download into (default: the user's cache folder,
        /// `~/.cache/capvault/models/<owner>--<name>/<commit>` on Linux).
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        out: Option<PathBuf>,
    },
    /// Check a static model folder and show what it is.
    Check {
        /// The model folder.
        #[arg(value_parser = absolute_path)]
        dir: PathBuf,
        /// Also embed this text and print how many dimensions are non-zero.
        #[arg(long)]
        text: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum TokensCommand {
    /// List the grants: id, client, scope, when granted, last refreshed, when it expires;
    /// with --token-file, also the bearer tokens of that file (name, scope, tools).
    List {
        /// The vault folder.
        vault: PathBuf,
        /// The state folder (default: the user's state folder).
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        state_dir: Option<PathBuf>,
        /// Also list the tokens of this token file (`serve --token-file`).
        #[arg(long, value_name = "FILE", value_parser = absolute_path)]
        token_file: Option<PathBuf>,
    },
    /// Revoke one grant (its id from `capvault tokens list`, or its first characters) or all.
    Revoke {
        /// The vault folder.
        vault: PathBuf,
        /// The grant's id.
        #[arg(required_unless_present = "all")]
        id: Option<String>,
        /// Revoke every grant and forget every registered client.
        #[arg(long, conflicts_with = "id")]
        all: bool,
        /// The state folder (default: the user's state folder).
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        state_dir: Option<PathBuf>,
    },
}

/// Every path flag's parser: the path made absolute against the current folder now, so a
/// relative path means what it meant where the command was typed (file helpers split a path
/// into its folder and name, and a bare name has no folder).
fn absolute_path(arg: &str) -> Result<PathBuf, String> {
    if arg.is_empty() {
        return Err("an empty path".to_owned());
    }
    std::path::absolute(arg).map_err(|e| format!("{arg}: {e}"))
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum OAuthKind {
    /// capvault is its own authorization server, for the vault's owner.
    Builtin,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Read,
    Write,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum SandboxMode {
    BestEffort,
    Require,
    Off,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

/// The HTTP transport's listener, credentials and limits.
#[derive(Args, Debug)]
struct HttpArgs {
    /// Address and port to listen on (`--transport http`). Loopback by default; any other
    /// address needs tokens, and TLS or --insecure-http.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    listen: std::net::SocketAddr,
    /// Also accept this name in the Host header (`name` or `name:port`; repeatable). Loopback
    /// names are always accepted; anything else is refused (DNS-rebinding protection).
    #[arg(long, value_name = "HOST")]
    allowed_host: Vec<String>,
    /// Also accept requests from browser pages of this origin (`https://app.example.org`;
    /// repeatable). Other Origins get 403; requests without one (non-browser clients) pass.
    #[arg(long, value_name = "ORIGIN")]
    allowed_origin: Vec<String>,
    /// Bearer tokens, one per line: `TOKEN [read|write] [PROFILE] [name=NAME]` (TOKEN may be
    /// `sha256:<hex>`, what `capvault token new --append FILE` adds). The file must be private
    /// (mode 600).
    /// The environment variable CAPVAULT_TOKEN adds one more, with full rights.
    #[arg(long, value_name = "FILE", value_parser = absolute_path)]
    token_file: Option<PathBuf>,
    /// TLS certificate chain (PEM) to serve HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_key", value_parser = absolute_path)]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM; must be private, mode 600).
    #[arg(long, value_name = "FILE", requires = "tls_cert", value_parser = absolute_path)]
    tls_key: Option<PathBuf>,
    /// Allow a non-loopback listener without TLS, because a TLS-terminating proxy is in front.
    #[arg(long)]
    insecure_http: bool,
    /// Largest request body in bytes (413 above it).
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
    /// Largest response body in bytes (a backstop: tool replies are bounded far below it).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    max_response_bytes: usize,
    /// Seconds one request may take (503 after).
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    request_timeout: u64,
    /// Requests in flight in all (503 above it).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    max_in_flight: u32,
    /// Requests in flight per client (address, token and session; 429 above it).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    max_in_flight_per_client: u32,
    /// Open sessions (2025-11-25 clients; 503 for a new one above it).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// Open sessions per token or OAuth grant (503 to that token above it).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions_per_token: u32,
    /// Seconds a connection may take to send a request's headers, or stay idle between
    /// requests, before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// Open connections per client address (a new one above it is closed at once).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_client: u32,
    /// Seconds after which an unused session is closed (default: 30 minutes).
    #[arg(long, value_name = "SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..))]
    session_idle: u64,
    /// OAuth for remote clients: `builtin` makes capvault its own authorization server, with a
    /// consent page that asks for the passphrase `capvault passwd` set.
    #[arg(long, value_enum, value_name = "KIND", conflicts_with = "oauth_issuer")]
    oauth: Option<OAuthKind>,
    /// Accept JWT access tokens of this issuer (its identifier, e.g.
    /// https://auth.example.org/realms/main); its keys come from --jwks-file, --jwks-url or
    /// its metadata, fetched at startup.
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,
    /// The issuer's keys (a JWKS file), instead of fetching them.
    #[arg(
        long,
        value_name = "FILE",
        requires = "oauth_issuer",
        conflicts_with = "jwks_url",
        value_parser = absolute_path
    )]
    jwks_file: Option<PathBuf>,
    /// Where the issuer's keys are (default: its metadata's jwks_uri).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    jwks_url: Option<String>,
    /// With --oauth builtin, also accept clients whose client_id is the HTTPS URL of their
    /// metadata document (what newer MCP clients use instead of registering). capvault then
    /// fetches such documents, so the sandbox allows name lookups and connections to port 443.
    #[arg(long, requires = "oauth")]
    oauth_client_metadata: bool,
    /// Testing aid: trust this CA (PEM) for client metadata documents, and allow them on
    /// loopback addresses and any port.
    #[arg(
        long,
        value_name = "FILE",
        hide = true,
        requires = "oauth_client_metadata",
        value_parser = absolute_path
    )]
    oauth_test_ca: Option<PathBuf>,
    /// Testing aid: the least seconds between two fetches of the issuer's keys (default 60).
    #[arg(long, value_name = "SECS", hide = true, requires = "oauth_issuer")]
    jwks_refetch_after: Option<u64>,
    /// This server's public URL (https://vault.example.org), as clients reach it: OAuth
    /// tokens must be issued for `<URL>/mcp`. Default: the listen address (loopback only).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
}

impl HttpArgs {
    /// The HTTP options; reads the token file, `CAPVAULT_TOKEN` and the TLS files now.
    fn options(&self) -> anyhow::Result<capvault::http::HttpOptions> {
        use capvault::vault::host::HostFile;
        const MAX_SECRET_FILE: u64 = 1024 * 1024;
        let mut tokens = capvault::http::Tokens::none();
        if let Ok(t) = std::env::var("CAPVAULT_TOKEN")
            && !t.is_empty()
        {
            tokens.add_env(&t).map_err(anyhow::Error::msg)?;
        }
        if let Some(path) = &self.token_file {
            let file = HostFile::at(path).map_err(anyhow::Error::msg)?;
            let bytes = file
                .read_private(MAX_SECRET_FILE)
                .map_err(|e| anyhow::anyhow!("--token-file {e}"))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("--token-file {}: not UTF-8", file.shown()))?;
            tokens
                .add_file(&text, &capvault::server::CapvaultServer::tool_names())
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", file.shown()))?;
            if tokens.is_empty() {
                anyhow::bail!("--token-file {}: no token in the file", file.shown());
            }
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let cert = HostFile::at(cert)
                    .and_then(|f| f.read_public(MAX_SECRET_FILE))
                    .map_err(|e| anyhow::anyhow!("--tls-cert {e}"))?;
                let key = HostFile::at(key)
                    .and_then(|f| f.read_private(MAX_SECRET_FILE))
                    .map_err(|e| anyhow::anyhow!("--tls-key {e}"))?;
                Some(capvault::http::TlsPem { cert, key })
            }
            _ => None,
        };
        let limits = capvault::http::HttpLimits {
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
            ..capvault::http::HttpLimits::default()
        };
        let options = capvault::http::HttpOptions {
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

    /// The OAuth resource server, when OAuth is on: checks the public URL, opens the
    /// authorization server's store or reads the issuer's keys (fetching them now, before
    /// the sandbox). Adds the public URL's host and origin to those the guard accepts.
    fn oauth(
        &self,
        options: &mut capvault::http::HttpOptions,
        local: std::net::SocketAddr,
        state: Option<capvault::vault::state::PrivateFiles>,
        vault_name: &str,
        write: bool,
    ) -> anyhow::Result<OAuthPrepared> {
        use capvault::http::oauth::{self, Issuer, ResourceServer};
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
            let store = std::sync::Arc::new(oauth::Store::new(files));
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
                    let pem = capvault::vault::host::HostFile::at(path)
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
            Issuer::Builtin(std::sync::Arc::new(oauth::AuthServer::new(
                base.clone(),
                resource.clone(),
                vault_name.to_owned(),
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
                    let bytes = capvault::vault::host::HostFile::at(path)
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
            Issuer::External(std::sync::Arc::new(verifier))
        };
        let rs = std::sync::Arc::new(ResourceServer::new(base, write, issuer));
        options.oauth = Some(std::sync::Arc::clone(&rs));
        Ok(OAuthPrepared {
            server: Some(rs),
            connect_ports,
            name_lookups,
        })
    }
}

/// What OAuth needs from the sandbox.
#[derive(Default)]
struct OAuthPrepared {
    server: Option<std::sync::Arc<capvault::http::oauth::ResourceServer>>,
    connect_ports: Vec<u16>,
    /// The process must look up host names (client metadata documents).
    name_lookups: bool,
}

/// Fetches the issuer's JWKS now (before the sandbox): from `jwks_url`, or from the
/// `jwks_uri` of the issuer's metadata. Returns the document, the source for refetches (its
/// host pinned to the address used now) and the port refetches connect to.
fn fetch_jwks(
    issuer: &str,
    jwks_url: Option<&str>,
) -> anyhow::Result<(
    serde_json::Value,
    capvault::http::oauth::jwt::KeySource,
    u16,
)> {
    use capvault::http::oauth::jwt;
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

/// Largest token file read by `token new --append` and `tokens list --token-file`.
const MAX_TOKEN_FILE: u64 = 1024 * 1024;

/// `tokens list --token-file`: each token of the file, by name, with its scope and tools.
fn list_token_file(path: &std::path::Path) -> anyhow::Result<()> {
    use capvault::vault::host::HostFile;
    let file = HostFile::at(path).map_err(anyhow::Error::msg)?;
    let bytes = file
        .read_private(MAX_TOKEN_FILE)
        .map_err(|e| anyhow::anyhow!("--token-file {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--token-file {}: not UTF-8", file.shown()))?;
    let mut tokens = capvault::http::Tokens::none();
    tokens
        .add_file(&text, &capvault::server::CapvaultServer::tool_names())
        .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", file.shown()))?;
    println!("Bearer tokens in {}:", file.shown());
    println!("{:<40} {:<10} TOOLS", "NAME", "SCOPE");
    for g in tokens.grants() {
        let tools = g.tools.as_ref().map_or_else(
            || "all".to_owned(),
            |t| t.iter().cloned().collect::<Vec<_>>().join(","),
        );
        println!(
            "{:<40} {:<10} {tools}",
            g.id,
            if g.write { "read,write" } else { "read" }
        );
    }
    println!();
    Ok(())
}

/// Adds `line` to the token file at `path` (replaced atomically, mode 600), after checking
/// that what is there is a private, valid token file that does not hold the name already.
fn append_token_line(path: &std::path::Path, line: &str) -> anyhow::Result<()> {
    use capvault::vault::host::HostFile;
    let mut file = HostFile::at(path).map_err(anyhow::Error::msg)?.private();
    let mut text = if file.is_file() {
        let bytes = file
            .read_private(MAX_TOKEN_FILE)
            .map_err(|e| anyhow::anyhow!("--append {e}"))?;
        String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("--append {}: not UTF-8", file.shown()))?
    } else {
        String::new()
    };
    let names = capvault::server::CapvaultServer::tool_names();
    capvault::http::Tokens::none()
        .add_file(&text, &names)
        .map_err(|e| anyhow::anyhow!("--append {}: {e}; nothing was added", file.shown()))?;
    if let Some(name) = line.split_whitespace().find(|w| w.starts_with("name=")) {
        let taken = text
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == name));
        if taken {
            anyhow::bail!(
                "--append {}: a token is already {name}; choose another --name",
                file.shown()
            );
        }
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    file.replace(text.as_bytes(), None)
        .map_err(|e| anyhow::anyhow!("--append {e}"))?;
    Ok(())
}

/// The state folder root: `--state-dir` or the user's state folder.
fn state_root(arg: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    arg.map(std::path::Path::to_path_buf)
        .or_else(capvault::vault::state::default_root)
        .ok_or_else(|| anyhow::anyhow!("no state folder for this user: pass --state-dir"))
}

/// `capvault state`: shows the vault's state folder and the others, or adopts one.
fn state_command(
    vault: &std::path::Path,
    adopt: Option<&str>,
    force: bool,
    state_dir: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let vault = Vault::open(vault, Limits::default())?;
    let root = state_root(state_dir)?;
    let folder = root.join("state-1");
    if let Some(id) = adopt {
        let previous = StateDir::adopt(&root, &vault, id, force).map_err(anyhow::Error::msg)?;
        println!(
            "{} now uses the state {}",
            vault.name(),
            folder.join(id).display()
        );
        if let Some(previous) = previous {
            println!("its earlier state {previous} is kept, detached (capvault state lists it)");
        }
        return Ok(());
    }
    let Some(report) = StateDir::report(&root, &vault).map_err(anyhow::Error::msg)? else {
        println!(
            "No vault has a state under {} yet (`capvault serve --write` makes one).",
            folder.display()
        );
        return Ok(());
    };
    match &report.choice.id {
        Some(id) => println!(
            "{} uses {}: {}",
            vault.name(),
            folder.join(id).display(),
            report.choice.how.describe()
        ),
        None => println!(
            "{} has no state yet: `capvault serve --write` makes a new one under {}",
            vault.name(),
            folder.display()
        ),
    }
    for notice in &report.choice.notices {
        println!("note: {notice}");
    }
    println!("\nstates under {}:", folder.display());
    for s in &report.states {
        let mine = report.choice.id.as_deref() == Some(s.id.as_str());
        let (path, seen, detached) = match &s.record {
            Some(r) => (
                r.path.as_str(),
                chrono::DateTime::from_timestamp(r.seen as i64, 0)
                    .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
                    .unwrap_or_default(),
                r.detached,
            ),
            None => ("(recorded before vault.json)", String::new(), false),
        };
        let mut flags = Vec::new();
        if mine {
            flags.push("this vault".to_owned());
        }
        if detached {
            flags.push("detached".to_owned());
        }
        if s.record.is_some() && !s.alive {
            flags.push("its folder is gone".to_owned());
        }
        if s.oauth {
            flags.push("OAuth".to_owned());
        }
        println!(
            "  {}  {path}  seen {seen}  {} versions ({} KiB){}",
            s.id,
            s.versions.0,
            s.versions.1.div_ceil(1024),
            if flags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", flags.join(", "))
            }
        );
    }
    Ok(())
}

/// The built-in authorization server's store of `vault` (for `passwd` and `tokens`).
fn oauth_store(
    vault: &std::path::Path,
    state_dir: Option<&std::path::Path>,
) -> anyhow::Result<capvault::http::oauth::Store> {
    let vault = Vault::open(vault, Limits::default())?;
    let root = state_root(state_dir)?;
    let state = StateDir::open(&root, &vault)
        .map_err(|e| anyhow::anyhow!("{e} (--state-dir {})", root.display()))?;
    let files = state
        .private_files("oauth")
        .map_err(|e| anyhow::anyhow!("state folder: {e}"))?;
    Ok(capvault::http::oauth::Store::new(files))
}

/// Permission to write, and where history goes.
#[derive(Args, Debug)]
struct WriteArgs {
    /// Offer the write tools (create, edit, append, frontmatter, daily notes, move, delete,
    /// history and restore). Without it the server is read-only and lists no write tool.
    /// `CAPVAULT_WRITE=true` does the same (an MCP bundle's "Allow changes" setting).
    #[arg(long, env = "CAPVAULT_WRITE")]
    write: bool,
    /// Allow writes only inside this folder (repeatable; checked where a path really leads,
    /// through symlinks). Default: the whole vault (hidden and excluded places never).
    #[arg(long, value_name = "FOLDER", requires = "write")]
    write_scope: Vec<String>,
    /// Let `delete_note(permanent = true)` remove files for good (otherwise deletes go to the
    /// vault's `.trash`).
    #[arg(long, requires = "write")]
    allow_permanent_delete: bool,
    /// Folder for the note history, audit log and writers' lock (default: the user's state
    /// folder, `~/.local/state/capvault` on Linux). It must be outside the vault.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    state_dir: Option<PathBuf>,
    /// Write the audit log (one JSON line per change, never note content) to this file
    /// instead of the state folder. It must be outside the vault.
    #[arg(long, value_name = "FILE", requires = "write", value_parser = absolute_path)]
    audit_log: Option<PathBuf>,
    /// Keep at most this many MiB of earlier note versions (oldest pruned first).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    history_max_mb: u64,
    /// Keep earlier note versions at most this many days.
    #[arg(long, value_name = "DAYS", default_value_t = 90)]
    history_max_days: u64,
}

impl WriteArgs {
    /// The write scopes, as vault paths.
    fn scopes(&self) -> anyhow::Result<Vec<capvault::vault::VaultPath>> {
        self.write_scope
            .iter()
            .map(|s| {
                capvault::vault::VaultPath::parse_folder(s)
                    .map_err(|e| anyhow::anyhow!("--write-scope {s}: {e}"))
            })
            .collect()
    }

    /// The writer, when `--write` is given.
    fn writer(&self, vault: &Vault) -> anyhow::Result<Option<std::sync::Arc<Writer>>> {
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
        };
        Ok(Some(std::sync::Arc::new(Writer::new(
            state, audit, options,
        ))))
    }
}

#[derive(Args, Debug)]
struct VaultArgs {
    /// The vault folder (an Obsidian vault or any folder of Markdown notes).
    vault: PathBuf,
    /// Largest file, in bytes, that capvault will read; larger files are refused unread.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_READ_BYTES)]
    max_file_size: u64,
    /// Remove paths matching this glob from the vault (repeatable; any letter case; a folder
    /// that matches takes everything in it): never read, listed, searched, linked or indexed.
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// The config file (TOML: tools, exclude, disabled_tools, [tool.NAME] name/description).
    /// Default: capvault/config.toml in your config folder, if it exists.
    #[arg(long, value_name = "FILE", value_parser = absolute_path)]
    config: Option<PathBuf>,
}

impl VaultArgs {
    /// The config file, then the vault with every exclusion (flags and file).
    fn open(&self) -> anyhow::Result<(Vault, capvault::config::Config)> {
        let config = capvault::config::load(self.config.as_deref()).map_err(anyhow::Error::msg)?;
        let mut patterns = self.exclude.clone();
        patterns.extend(config.exclude.iter().cloned());
        let excluded = capvault::vault::Exclusions::new(&patterns).map_err(anyhow::Error::msg)?;
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

/// Caps glibc's malloc at two arenas (it would create up to eight per core, one per thread that
/// contends). The server's heap is mostly the vault model and index, built once by a handful of
/// threads and kept: with many arenas, the memory each build thread frees stays reserved in its
/// own arena. Measured at 100k notes: peak RSS 1,236 -> 1,166 MB, resident after the build
/// 1,194 -> 1,084 MB, build time unchanged (docs/performance.md). Called before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets a tuning parameter of the allocator; it is called once, before
    // this process starts any other thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

fn main() -> ExitCode {
    limit_malloc_arenas();
    // rustls's `ring` provider for every TLS use (the HTTPS listener and the issuer's keys
    // name it too).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    if prints_to_a_reader(&cli.command) {
        end_quietly_on_a_closed_pipe();
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // A log line that cannot be written (stderr closed, or a full disk under it) is lost,
        // never reported with `eprintln!`, which panics the thread that logged: a warning
        // during the first build stopped it for good.
        .log_internal_errors(false)
        .with_env_filter(
            EnvFilter::try_from_env("CAPVAULT_LOG")
                .unwrap_or_else(|_| EnvFilter::new("capvault=info")),
        )
        .init();
    // `serve` opens every folder, reads every credential and binds its listener here, then
    // applies the sandbox, all before the runtime starts a thread.
    let job = match cli.command {
        Command::Serve { .. } => match prepare_serve(cli.command) {
            Ok(p) => Job::Serve(Box::new(p)),
            Err(e) => return failure(&e),
        },
        Command::Call { .. } => match prepare_call(cli.command) {
            Ok(c) => Job::Call(Box::new(c)),
            Err(e) => return failure(&e),
        },
        other => Job::Other(Box::new(other)),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capvault: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match job {
            Job::Serve(p) => p.serve().await,
            Job::Call(c) => c.run().await,
            Job::Other(command) => run(*command).await,
        }
    });
    // Everything that matters has finished (the engine is shut down, replies are written); a
    // read of stdin may still be blocked on a thread of the runtime after a signal, and a plain
    // drop of the runtime would wait for it forever.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(&e),
    }
}

/// Whether `command` prints for a reader (a terminal or a pipe such as `| head`), so that a
/// reader that stops early should end it by SIGPIPE. Not `serve` (its stdout is the protocol
/// and the client's leaving is handled), not `doctor` (the server it starts may close its pipe,
/// which is a finding) and not `model fetch` (a connection closed under a vectored write must
/// be an error, not a signal): those two write with `writeln!`, and [`failure`] ends them
/// quietly on a broken pipe.
fn prints_to_a_reader(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve { .. }
            | Command::Doctor { .. }
            | Command::Model {
                command: ModelCommand::Fetch { .. }
            }
    )
}

/// A closed stdout (`capvault install --list | head -3`) ends the process as it ends other
/// command-line tools: by SIGPIPE, silently, instead of an error about a broken pipe.
#[cfg(unix)]
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: restores the default action of one signal (the Rust runtime set it to ignore);
    // called before any thread starts, with a valid handler constant.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_on_a_closed_pipe() {}

/// Reports `e` on stderr and returns the failure code, or ends quietly with success when the
/// reader of stdout has gone. Each cause is shown once: a message that already ends with its
/// cause's text (the vault's "cannot open vault folder X: <OS error>") does not repeat it.
fn failure(e: &anyhow::Error) -> ExitCode {
    let closed = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if closed {
        return ExitCode::SUCCESS;
    }
    eprintln!("capvault: {}", error_text(e));
    ExitCode::FAILURE
}

/// `e` and its causes on one line, without a cause the message before it already shows.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) || text.contains(&format!("{part}: ")) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// What `main` runs: the prepared server, or another subcommand.
enum Job {
    Serve(Box<Prepared>),
    Call(Box<PreparedCall>),
    Other(Box<Command>),
}

/// A server ready to run: every folder open, credentials read, the listener bound, the sandbox
/// applied.
struct Prepared {
    engine: std::sync::Arc<capvault::engine::Engine>,
    writer: Option<std::sync::Arc<Writer>>,
    policy: capvault::server::ToolPolicy,
    http: Option<(capvault::http::HttpOptions, std::net::TcpListener)>,
}

impl Prepared {
    async fn serve(self) -> anyhow::Result<()> {
        match self.http {
            Some((options, listener)) => {
                capvault::app::serve_http(self.engine, self.writer, &self.policy, options, listener)
                    .await
            }
            None => capvault::app::serve_stdio(self.engine, self.writer, &self.policy).await,
        }
    }
}

/// `call`, its vault and options opened as `serve` opens them (before the runtime: the
/// `--semantic` download runs its own).
struct PreparedCall {
    engine: std::sync::Arc<capvault::engine::Engine>,
    writer: Option<std::sync::Arc<Writer>>,
    policy: capvault::server::ToolPolicy,
    /// The tool and its arguments; `None` lists the tools.
    tool: Option<(String, Option<String>)>,
}

fn prepare_call(command: Command) -> anyhow::Result<PreparedCall> {
    let Command::Call {
        options,
        tool,
        json_args,
        list,
    } = command
    else {
        unreachable!("prepare_call is called for call only")
    };
    let (opened, config) = options.open()?;
    let freshness = options.freshness(&config, capvault::engine::Freshness::default());
    let engine = capvault::engine::Engine::open(opened.vault, freshness, opened.cache);
    if let Some(why) = opened.embedding_off {
        engine.set_embedding_unavailable(why);
    }
    if let Some(m) = opened.embedding {
        engine.set_embedding_model(m);
    }
    let tool = match (list, tool) {
        (true, _) | (false, None) => None,
        (false, Some(t)) => Some((t, json_args)),
    };
    Ok(PreparedCall {
        engine,
        writer: opened.writer,
        policy: opened.policy,
        tool,
    })
}

impl PreparedCall {
    async fn run(self) -> anyhow::Result<()> {
        let mut out = std::io::stdout();
        let engine = std::sync::Arc::clone(&self.engine);
        let done = match &self.tool {
            Some((tool, args)) => {
                capvault::app::call_tool(
                    std::sync::Arc::clone(&self.engine),
                    self.writer,
                    &self.policy,
                    tool,
                    args.as_deref(),
                    &mut out,
                )
                .await
            }
            None => {
                capvault::app::list_tools(
                    std::sync::Arc::clone(&self.engine),
                    self.writer,
                    &self.policy,
                    &mut out,
                )
                .await
            }
        };
        // The index cache is saved as `serve` saves it at its end.
        tokio::task::spawn_blocking(move || engine.shutdown()).await?;
        done
    }
}

/// `capvault model ...`.
async fn model_command(command: ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Fetch {
            repo,
            revision,
            sha256,
            out,
        } => {
            use capvault::semantic::fetch;
            let spec = fetch::ModelSpec::from_args(repo.as_deref(), revision.as_deref(), &sha256)
                .map_err(anyhow::Error::msg)?;
            let in_cache = out.is_none();
            let folder = match out {
                Some(dir) => dir,
                None => spec.cache_folder().ok_or_else(|| {
                    anyhow::anyhow!("no cache folder for this user: pass --out DIR")
                })?,
            };
            let report = |line: &str| eprintln!("capvault: model fetch: {line}");
            let done = fetch::fetch(&spec, &folder, in_cache, &fetch::endpoint(), &report)
                .await
                .map_err(anyhow::Error::msg)?;
            let m = capvault::semantic::load_model(&folder).map_err(|e| {
                anyhow::anyhow!("{e} (the files match their pins, but do not load as a model)")
            })?;
            let info = m.info();
            let received: u64 = done.downloaded.iter().map(|(_, n)| n).sum();
            let mut out = std::io::stdout();
            writeln!(
                out,
                "{} at {} is in {} ({} downloaded now, {} there already; every sha256 matches \
                 its pin): {} tokens x {} dimensions.",
                spec.repo,
                spec.revision,
                folder.display(),
                if done.downloaded.is_empty() {
                    "nothing".to_owned()
                } else {
                    format!("{received} bytes")
                },
                done.present.len(),
                info.vocabulary,
                info.dimensions,
            )?;
            if in_cache && spec.is_default() {
                writeln!(out, "Serve with: capvault serve VAULT --semantic")?;
            } else {
                writeln!(
                    out,
                    "Serve with: capvault serve VAULT --embedding-model {}",
                    folder.display()
                )?;
            }
            Ok(())
        }
        ModelCommand::Import {
            source,
            out,
            dimensions,
            corpus,
        } => {
            #[cfg(feature = "import")]
            {
                use capvault::semantic::import::{self, Progress};
                let last = std::sync::Mutex::new((0usize, 0usize));
                let progress = |p: Progress| {
                    let (stage, done, total, what) = match p {
                        Progress::Tokens(d, n) => (0, d, n, "tokens"),
                        Progress::Texts(d, n) => (1, d, n, "corpus texts"),
                        Progress::Epochs(d, n) => (2, d, n, "tuning passes"),
                    };
                    let tenth = done * 10 / total.max(1);
                    let mut last = last
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if *last != (stage, tenth) {
                        *last = (stage, tenth);
                        eprintln!("capvault: model import: {done} of {total} {what}");
                    }
                };
                let made = import::import(&source, &out, dimensions, corpus.as_deref(), &progress)
                    .map_err(anyhow::Error::msg)?;
                if let Some(t) = &made.tuned {
                    println!(
                        "Tuned on {} sections of the corpus ({} texts with runs of their words; \
                         {} of its words added to the vocabulary whole): held-out agreement with \
                         the transformer (mean cosine) {:.3} -> {:.3}.",
                        t.sections, t.texts, t.words, t.fit.before, t.fit.after
                    );
                } else {
                    eprintln!(
                        "capvault: model import: without --corpus the model knows each word \
                         alone; --corpus <your vault> tunes it on your notes, and it then finds \
                         them by meaning much better (README: Semantic search)."
                    );
                }
                println!(
                    "Wrote a static model of {} tokens x {} dimensions ({:.0}% of the variance) \
                     to {} in {:.0} s. Serve with --embedding-model {}",
                    made.tokens,
                    made.dimensions,
                    made.variance_kept * 100.0,
                    out.display(),
                    made.seconds,
                    out.display()
                );
                Ok(())
            }
            #[cfg(not(feature = "import"))]
            {
                let _ = (source, out, dimensions, corpus);
                anyhow::bail!("this capvault was built without the `import` feature")
            }
        }
        ModelCommand::Check { dir, text } => {
            let started = std::time::Instant::now();
            let m = capvault::semantic::load_model(&dir).map_err(anyhow::Error::msg)?;
            let info = m.info();
            println!(
                "{}: {} tokens x {} dimensions, revision {}, loaded in {} ms",
                info.name,
                info.vocabulary,
                info.dimensions,
                info.revision.as_deref().unwrap_or("unknown"),
                started.elapsed().as_millis()
            );
            if let Some(t) = text {
                match m.embed(&t) {
                    Some(v) => println!(
                        "{} non-zero dimensions",
                        v.iter().filter(|x| **x != 0.0).count()
                    ),
                    None => println!("no token of the text is known to the model"),
                }
            }
            Ok(())
        }
    }
}

/// Everything `serve` does before the runtime starts: synchronous, single-threaded.
fn prepare_serve(command: Command) -> anyhow::Result<Prepared> {
    let Command::Serve {
        options,
        transport,
        http,
        rescan_after,
        reconcile_every,
        no_watch,
        index_delay,
        sandbox,
        sandbox_probe,
    } = command
    else {
        unreachable!("prepare_serve is called for serve only")
    };
    let ms = std::time::Duration::from_millis;
    // Credentials and certificates first: a bad flag fails before any work.
    let http_args = http;
    let http = match transport {
        Transport::Http => Some(http_args.options()?),
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
    ) = options.open()?;
    let freshness = options.freshness(
        &config,
        capvault::engine::Freshness {
            query_max_age: rescan_after.map(ms),
            periodic: std::time::Duration::from_secs(reconcile_every),
            watch: !no_watch,
            build_delay: ms(index_delay),
            ..capvault::engine::Freshness::default()
        },
    );
    let write = &options.write;
    let mut oauth = OAuthPrepared::default();
    let mut oauth_files = None;
    let http = match http {
        Some(mut options) => {
            let listener = capvault::http::bind(&options)?;
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
        && let capvault::http::oauth::Issuer::Builtin(auth) = &rs.issuer
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
    let engine = capvault::engine::Engine::open(vault, freshness, cache);
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

/// The model of `--semantic`: the default one (or the testing aid's) from the user's cache
/// folder, downloaded there first when missing. A model that cannot be had is a warning, not
/// an error: the server then serves keyword search only, and says why (the `Err`, naming no
/// host path).
fn semantic_model(
    test: &SemanticArgs,
) -> anyhow::Result<Result<capvault::semantic::Embedder, String>> {
    use capvault::semantic::fetch;
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
    match fetch::fetch_blocking(&spec, &folder, true, &fetch::endpoint(), &report) {
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
    match capvault::semantic::load_model(&folder) {
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
    oauth: Option<&capvault::vault::state::PrivateFiles>,
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

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve { .. } => unreachable!("serve is prepared before the runtime starts"),
        Command::Call { .. } => unreachable!("call is prepared before the runtime starts"),
        Command::Demo { full } => {
            let show = if full {
                capvault::demo::Show::Full
            } else {
                capvault::demo::Show::Brief
            };
            capvault::demo::run(Box::new(std::io::stdout()), show).await
        }
        Command::Install {
            client,
            vault,
            name,
            write,
            tools,
            dry_run,
            list,
        } => {
            let mut out = std::io::stdout();
            if list {
                return capvault::setup::list(&mut out).map_err(anyhow::Error::msg);
            }
            let (Some(client), Some(vault)) = (client, vault) else {
                anyhow::bail!("give a client and a vault (or --list)");
            };
            let req = capvault::setup::InstallRequest {
                client,
                vault,
                name,
                write,
                tools,
                dry_run,
            };
            capvault::setup::install(&req, &mut out).map_err(anyhow::Error::msg)
        }
        Command::Uninstall {
            client,
            name,
            dry_run,
        } => capvault::setup::uninstall(&client, &name, dry_run, &mut std::io::stdout())
            .map_err(anyhow::Error::msg),
        Command::Bundle { out, level } => {
            capvault::setup::bundle::build(&out, level, &mut std::io::stdout())
                .map_err(anyhow::Error::msg)
        }
        Command::Token {
            command:
                TokenCommand::New {
                    name,
                    append,
                    scope,
                    tools,
                },
        } => {
            if let Some(spec) = &tools {
                capvault::server::policy::profile_tools(
                    spec,
                    &capvault::server::CapvaultServer::tool_names(),
                )
                .map_err(|e| anyhow::anyhow!("--tools: {e}"))?;
            }
            let (token, line) = capvault::http::auth::new_token(
                scope == Scope::Write,
                tools.as_deref(),
                name.as_deref(),
            )
            .map_err(anyhow::Error::msg)?;
            // The file first: a refused file leaves no token printed that works nowhere.
            if let Some(path) = &append {
                append_token_line(path, &line)?;
            }
            println!("{token}");
            match &append {
                Some(path) => eprintln!(
                    "capvault: the token above is for the client (Authorization: Bearer ...); \
                     its digest is now in {} (serve with --token-file {}).",
                    path.display(),
                    path.display()
                ),
                None => eprintln!(
                    "\nThe line above is the token: give it to the client (Authorization: Bearer ...).\n\
                     Add this line to the server's --token-file (it holds only the token's digest), \
                     or let --append FILE add it:\n\n{line}\n"
                ),
            }
            Ok(())
        }
        Command::State {
            vault,
            adopt,
            force,
            state_dir,
        } => state_command(&vault, adopt.as_deref(), force, state_dir.as_deref()),
        Command::Passwd { vault, state_dir } => {
            let store = oauth_store(&vault, state_dir.as_deref())?;
            let passphrase = capvault::vault::host::read_passphrase(
                "New passphrase for the consent page: ",
                "Once more: ",
            )
            .map_err(anyhow::Error::msg)?;
            store.set_passphrase(&passphrase)?;
            eprintln!(
                "capvault: passphrase set (kept as an argon2id hash). Serve with --oauth builtin."
            );
            Ok(())
        }
        Command::Tokens {
            command:
                TokensCommand::List {
                    vault,
                    state_dir,
                    token_file,
                },
        } => {
            if let Some(path) = &token_file {
                list_token_file(path)?;
            }
            let store = oauth_store(&vault, state_dir.as_deref())?;
            let grants = store.grants()?;
            if grants.is_empty() {
                println!("No client has access.");
            } else {
                let day = |t: u64| {
                    chrono::DateTime::from_timestamp(t as i64, 0)
                        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
                        .unwrap_or_default()
                };
                println!(
                    "{:<16} {:<10} {:<17} {:<17} {:<17} CLIENT",
                    "ID", "SCOPE", "GRANTED", "REFRESHED", "EXPIRES"
                );
                for g in grants {
                    println!(
                        "{:<16} {:<10} {:<17} {:<17} {:<17} {}",
                        g.id,
                        if g.write { "read,write" } else { "read" },
                        day(g.created),
                        day(g.last_refresh),
                        day(g.expires()),
                        g.client_name
                    );
                }
            }
            Ok(())
        }
        Command::Tokens {
            command:
                TokensCommand::Revoke {
                    vault,
                    id,
                    all,
                    state_dir,
                },
        } => {
            let store = oauth_store(&vault, state_dir.as_deref())?;
            if all {
                let n = store.revoke_all()?;
                println!("Revoked {n} grant(s) and forgot every registered client.");
            } else {
                let id = id.unwrap_or_default();
                match store.revoke(&id)? {
                    Some(g) => println!("Revoked {g}."),
                    None => anyhow::bail!(
                        "no grant (or more than one) matches `{id}`: see `capvault tokens list`"
                    ),
                }
            }
            Ok(())
        }
        Command::Model { command } => model_command(command).await,
        Command::Doctor { vault } => capvault::setup::doctor::run(&vault, &mut std::io::stdout())
            .await
            .map_err(anyhow::Error::msg),
    }
}
