//! The command line: every subcommand, flag and its help text (clap). `main.rs` parses it and
//! hands each command to its module in [`crate::app`]; the structs only describe, the modules act.
// The doc comments below are the --help text clap prints verbatim: an URL in one stays bare.
#![allow(rustdoc::bare_urls)]

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::vault::DEFAULT_MAX_READ_BYTES;

/// A capability-confined MCP server for Obsidian vaults.
///
/// capvault lets AI clients (Claude Desktop, Claude Code, Cursor, any MCP client) search, read
/// and, with `serve --write`, edit the notes of one vault folder, and nothing outside it: every
/// file access goes through one directory handle opened on the vault, and paths that leave it
/// fail in the kernel.
impl Cli {
    /// The command line, parsed; exits with clap's usage error when `serve` is given an
    /// HTTP-only option (`--listen`, `--token-file`, `--tls-cert`...) without
    /// `--transport http`: served over stdio, it would be ignored without a word.
    pub fn parse_checked() -> Cli {
        use clap::CommandFactory;
        let matches = Cli::command().get_matches();
        Cli::checked(&matches).unwrap_or_else(|e| e.exit())
    }

    /// `args` (the program's name first) parsed as [`Cli::parse_checked`] parses the command
    /// line, with the same checks, or the error it would exit with: what `capvault install`
    /// checks a client's entry with.
    pub fn try_parse_checked_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::CommandFactory;
        let matches = Cli::command().try_get_matches_from(args)?;
        Cli::checked(&matches)
    }

    /// The command line `matches` holds, refused when `serve` is given an HTTP-only option
    /// without `--transport http`.
    fn checked(matches: &clap::ArgMatches) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
        if let Some(("serve", m)) = matches.subcommand()
            && m.get_one::<Transport>("transport") == Some(&Transport::Stdio)
        {
            let probe = HttpArgs::augment_args(clap::Command::new("http"));
            let given: Vec<String> = probe
                .get_arguments()
                .filter(|a| m.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .collect();
            if !given.is_empty() {
                return Err(Cli::command().error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "{} only apply to `serve --transport http`; add `--transport http`, or leave them out to serve over stdio",
                        given.join(", ")
                    ),
                ));
            }
        }
        Cli::from_arg_matches(matches)
    }
}

#[derive(Parser, Debug)]
#[command(name = "capvault", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve a vault to an MCP client over stdin/stdout (what client configurations run).
    Serve(ServeArgs),
    /// Run one tool in-process and print its JSON result (to try a tool or reproduce a bug),
    /// with the options of `serve` that change answers; or list the tools (--list).
    ///
    /// Example: capvault call ~/Notes search_notes '{"query": "garden"}'
    Call(CallArgs),
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
    Install(InstallArgs),
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
    /// Say yes (or no) to changes held by `serve --confirm destructive` that the client could
    /// not ask you about: lists each with what it changes and asks in the terminal. The
    /// assistant's same call, made again, then goes ahead once.
    Confirm {
        /// The vault folder.
        vault: PathBuf,
        /// Only the change with this code (from the server's log).
        code: Option<String>,
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
    /// Internal: the PDF worker `serve` starts (reads PDFs from stdin in confined children).
    #[command(hide = true)]
    PdfWorker,
}

// The structs below have no doc comment of their own: clap would take it for the subcommand's
// help, which is the variant's above.

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub options: Box<ServeOptions>,
    /// More vault folders: one server for all of them, each vault separate (tools then take
    /// `vault`, its name). Without any folder, the config file's `[[vault]]` tables.
    #[arg(value_name = "MORE_VAULTS")]
    pub more_vaults: Vec<PathBuf>,
    /// How clients connect: `stdio` (the client starts capvault; what client
    /// configurations run) or `http` (Streamable HTTP at `/mcp`, for many clients and
    /// remote access; see the README's "Remote access").
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,
    #[command(flatten)]
    pub http: Box<HttpArgs>,
    /// Also rescan the vault before a query when the last rescan is older than this many
    /// milliseconds (0: before every query). Off by default: the file watcher and the
    /// periodic reconcile keep the index fresh.
    #[arg(long, value_name = "MS")]
    pub rescan_after: Option<u64>,
    /// Seconds between full reconciles (a stat scan of every file that re-reads only what
    /// changed), which back up the file watcher.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub reconcile_every: u64,
    /// Do not watch the vault for changes (rely on the periodic reconcile).
    #[arg(long)]
    pub no_watch: bool,
    /// Testing aid: wait this many milliseconds after opening the index, before the first
    /// build reads the vault.
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    pub index_delay: u64,
    /// The Landlock sandbox (Linux): `best-effort` applies what the kernel supports and
    /// says what that is, `require` refuses to start without it, `off` disables it. The
    /// process may then reach only the vault, its cache and state folders, and the time
    /// zone database, and make no network connection.
    #[arg(long, value_enum, default_value_t = SandboxMode::BestEffort)]
    pub sandbox: SandboxMode,
    /// Testing aid: after the sandbox applies, try to read this host file and report the
    /// outcome on stderr.
    #[arg(long, value_name = "PATH", hide = true)]
    pub sandbox_probe: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CallArgs {
    #[command(flatten)]
    pub options: Box<ServeOptions>,
    /// Tool name (`capvault call VAULT --list` lists them), e.g. search_notes or get_links.
    pub tool: Option<String>,
    /// Tool arguments as a JSON object (default: {}).
    pub json_args: Option<String>,
    /// List the tools these options offer, one line each: name and what it does.
    #[arg(long, conflicts_with_all = ["tool", "json_args"])]
    pub list: bool,
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// The client: claude-desktop, claude-code, cursor, vscode, windsurf, zed, codex, gemini.
    #[arg(required_unless_present = "list")]
    pub client: Option<String>,
    /// The vault folder.
    #[arg(required_unless_present = "list")]
    pub vault: Option<PathBuf>,
    /// More vault folders: one entry serves them all (`capvault serve A B`).
    #[arg(value_name = "MORE_VAULTS", conflicts_with = "list")]
    pub more_vaults: Vec<PathBuf>,
    /// The server's name in the client. Default: the entry that serves this vault already,
    /// else `capvault`, else (another vault has it) `capvault-<folder name>`.
    #[arg(long)]
    pub name: Option<String>,
    /// Let the client write (the server runs with --write).
    #[arg(long)]
    pub write: bool,
    /// A tool profile for the server (--tools).
    #[arg(long, value_name = "PROFILE")]
    pub tools: Option<String>,
    /// Print the change only.
    #[arg(long)]
    pub dry_run: bool,
    /// List the supported clients, their config files here, and what they hold.
    #[arg(long, conflicts_with_all = ["client", "vault"])]
    pub list: bool,
}

/// The options of `serve` that change its answers, shared with `call`.
#[derive(Args, Debug)]
pub struct ServeOptions {
    #[command(flatten)]
    pub vault: VaultArgs,
    /// Do not keep note texts in memory: saves about the vault's Markdown size, but exact and
    /// regex searches then read every candidate note from disk.
    #[arg(long)]
    pub no_text_cache: bool,
    /// Folder that keeps the search index between runs, so a restart re-indexes only the
    /// notes that changed (default: the user's cache folder, `~/.cache/capvault` on Linux).
    /// It must be outside the vault; it holds every word of the vault, readable only by you.
    #[arg(long, value_name = "DIR", conflicts_with = "no_index_cache", value_parser = absolute_path)]
    pub index_cache: Option<PathBuf>,
    /// Keep the search index in memory only: every start indexes every note.
    #[arg(long)]
    pub no_index_cache: bool,
    #[command(flatten)]
    pub semantic: Box<SemanticArgs>,
    /// Milliseconds a scanning search (exact, regex) may run before it returns partial results.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    pub scan_budget: u64,
    /// An exact search for words found in more notes than this reads the notes in the
    /// index's ranked order, only as many as its page needs, and reports the number of notes
    /// as its total; up to this many, it reads them all and counts every matching line.
    #[arg(long, value_name = "NOTES", default_value_t = crate::engine::EXACT_SCAN_MAX_NOTES)]
    pub exact_scan_max_notes: usize,
    /// Which tools to offer: `all` (default), `read` (the reading and search tools),
    /// `minimal` (search_notes, read_note, list_notes), or tool names separated by commas.
    /// Overrides the config file's `tools`.
    #[arg(long, value_name = "PROFILE")]
    pub tools: Option<String>,
    /// Include the files Obsidian's "Excluded files" setting names (`userIgnoreFilters` in
    /// `.obsidian/app.json`) in search, list and graph results. By default they are left out,
    /// as Obsidian does; they are always readable by path.
    #[arg(long)]
    pub show_obsidian_excluded: bool,
    /// Search covers the text of the vault's PDFs too (hits name the page). Their text is read
    /// in the background, in a confined worker process, and kept with the index cache.
    #[arg(long)]
    pub index_pdfs: bool,
    /// MCP prompts written in the vault: every note under this vault folder is a prompt
    /// (name from the file, `description` and `arguments` from the frontmatter, `{{argument}}`
    /// filled in, `![[Note]]` embeds expanded). Overrides the config file's `prompts_folder`.
    #[arg(long, value_name = "FOLDER")]
    pub prompts_folder: Option<String>,
    /// Leave out the built-in prompts (daily-review, summarize-note, suggest-links).
    #[arg(long)]
    pub no_builtin_prompts: bool,
    /// Text in a note that its reader never sees in Obsidian (zero-width, bidi and tag
    /// characters, HTML and %% comments, elements hidden by style, long blank runs, misleading
    /// links) is always reported in a `hidden` summary. `show` (default) leaves it in the text,
    /// `mark` makes it visible (`⟦U+200B⟧`, `⟦hidden: html comment⟧…⟦/hidden⟧`), `strip`
    /// removes it. Overrides the config file's `hidden_text`.
    #[arg(long, value_name = "POLICY", value_parser = parse_hidden_text)]
    pub hidden_text: Option<crate::markdown::hidden::Policy>,
    /// Notes under this folder (a glob, as --exclude takes) count as `clipped`, like web
    /// clippings: untrusted text (repeatable; added to the config file's `untrusted`).
    #[arg(long, value_name = "GLOB")]
    pub untrusted: Vec<String>,
    /// Notes under this folder count as `shared`: written by someone else (repeatable; added to
    /// the config file's `shared`).
    #[arg(long, value_name = "GLOB")]
    pub shared: Vec<String>,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(Args, Debug)]
pub struct SemanticArgs {
    /// Semantic search: the folder of a static embedding model (model2vec format:
    /// `config.json`, `tokenizer.json`, `model.safetensors`; `capvault model import` makes
    /// one from a sentence-transformers folder). Adds `semantic` and `hybrid` search modes
    /// (hybrid becomes the default) and `related_notes`.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    pub embedding_model: Option<PathBuf>,
    /// Semantic search with the default model (potion-base-8M, 31 MB): loaded from the
    /// user's cache folder, downloaded there first when missing (pinned and checked, as
    /// `capvault model fetch` does). If the download fails the server still starts, with
    /// keyword search only. Use --embedding-model DIR for another model or offline machines.
    #[arg(long, conflicts_with = "embedding_model")]
    pub semantic: bool,
    // Testing aid: the model `--semantic` downloads instead of the default one (the tests
    // serve a tiny model from a loopback hub). The same rules as `capvault model fetch`: a
    // commit and three sha256 pins.
    #[arg(long, value_name = "OWNER/NAME", hide = true)]
    pub semantic_repo: Option<String>,
    #[arg(long, value_name = "COMMIT", hide = true)]
    pub semantic_revision: Option<String>,
    #[arg(long, value_name = "FILE=HEX", hide = true)]
    pub semantic_sha256: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
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
pub enum ModelCommand {
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
pub enum TokensCommand {
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
pub fn absolute_path(arg: &str) -> Result<PathBuf, String> {
    if arg.is_empty() {
        return Err("an empty path".to_owned());
    }
    std::path::absolute(arg).map_err(|e| format!("{arg}: {e}"))
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthKind {
    /// capvault is its own authorization server, for the vault's owner.
    Builtin,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxMode {
    BestEffort,
    Require,
    Off,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

/// The HTTP transport's listener, credentials and limits.
#[derive(Args, Debug)]
pub struct HttpArgs {
    /// Address and port to listen on (`--transport http`). Loopback by default; any other
    /// address needs tokens, and TLS or --insecure-http.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    pub listen: std::net::SocketAddr,
    /// Also accept this name in the Host header (`name` or `name:port`; repeatable). Loopback
    /// names are always accepted; anything else is refused (DNS-rebinding protection).
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// Also accept requests from browser pages of this origin (`https://app.example.org`;
    /// repeatable). Other Origins get 403; requests without one (non-browser clients) pass.
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// Bearer tokens, one per line: `TOKEN [read|write] [PROFILE] [name=NAME]` (TOKEN may be
    /// `sha256:<hex>`, what `capvault token new --append FILE` adds). The file must be private
    /// (mode 600).
    /// The environment variable CAPVAULT_TOKEN adds one more, with full rights.
    #[arg(long, value_name = "FILE", value_parser = absolute_path)]
    pub token_file: Option<PathBuf>,
    /// TLS certificate chain (PEM) to serve HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_key", value_parser = absolute_path)]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM; must be private, mode 600).
    #[arg(long, value_name = "FILE", requires = "tls_cert", value_parser = absolute_path)]
    pub tls_key: Option<PathBuf>,
    /// Allow a non-loopback listener without TLS, because a TLS-terminating proxy is in front.
    #[arg(long)]
    pub insecure_http: bool,
    /// Largest request body in bytes (413 above it).
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest response body in bytes (a backstop: tool replies are bounded far below it).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_response_bytes: usize,
    /// Seconds one request may take (503 after).
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    /// Requests in flight in all (503 above it).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight: u32,
    /// Requests in flight per client (address, token and session; 429 above it).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight_per_client: u32,
    /// Open sessions (2025-11-25 clients; 503 for a new one above it).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: u32,
    /// Open sessions per token or OAuth grant (503 to that token above it).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions_per_token: u32,
    /// Seconds a connection may take to send a request's headers, or stay idle between
    /// requests, before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Open connections per client address (a new one above it is closed at once).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_client: u32,
    /// Seconds after which an unused session is closed (default: 30 minutes).
    #[arg(long, value_name = "SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..))]
    pub session_idle: u64,
    /// OAuth for remote clients: `builtin` makes capvault its own authorization server, with a
    /// consent page that asks for the passphrase `capvault passwd` set.
    #[arg(long, value_enum, value_name = "KIND", conflicts_with = "oauth_issuer")]
    pub oauth: Option<OAuthKind>,
    /// Accept JWT access tokens of this issuer (its identifier, e.g.
    /// https://auth.example.org/realms/main); its keys come from --jwks-file, --jwks-url or
    /// its metadata, fetched at startup.
    #[arg(long, value_name = "URL")]
    pub oauth_issuer: Option<String>,
    /// The issuer's keys (a JWKS file), instead of fetching them.
    #[arg(
        long,
        value_name = "FILE",
        requires = "oauth_issuer",
        conflicts_with = "jwks_url",
        value_parser = absolute_path
    )]
    pub jwks_file: Option<PathBuf>,
    /// Where the issuer's keys are (default: its metadata's jwks_uri).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub jwks_url: Option<String>,
    /// With --oauth builtin, also accept clients whose client_id is the HTTPS URL of their
    /// metadata document (what newer MCP clients use instead of registering). capvault then
    /// fetches such documents, so the sandbox allows name lookups and connections to port 443.
    #[arg(long, requires = "oauth")]
    pub oauth_client_metadata: bool,
    /// Testing aid: trust this CA (PEM) for client metadata documents, and allow them on
    /// loopback addresses and any port.
    #[arg(
        long,
        value_name = "FILE",
        hide = true,
        requires = "oauth_client_metadata",
        value_parser = absolute_path
    )]
    pub oauth_test_ca: Option<PathBuf>,
    /// Testing aid: the least seconds between two fetches of the issuer's keys (default 60).
    #[arg(long, value_name = "SECS", hide = true, requires = "oauth_issuer")]
    pub jwks_refetch_after: Option<u64>,
    /// This server's public URL (https://vault.example.org), as clients reach it: OAuth
    /// tokens must be issued for `<URL>/mcp`. Default: the listen address (loopback only).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

/// Permission to write, and where history goes.
#[derive(Args, Debug)]
pub struct WriteArgs {
    /// Offer the write tools (create, edit, append, frontmatter, periodic notes, move, delete,
    /// history and restore). Without it the server is read-only and lists no write tool.
    /// `CAPVAULT_WRITE=true` does the same (an MCP bundle's "Allow changes" setting).
    #[arg(long, env = "CAPVAULT_WRITE")]
    pub write: bool,
    /// Allow writes only inside this folder (repeatable; checked where a path really leads,
    /// through symlinks). Default: the whole vault (hidden and excluded places never).
    #[arg(long, value_name = "FOLDER")]
    pub write_scope: Vec<String>,
    /// Let `delete_note(permanent = true)` remove files for good (otherwise deletes go to the
    /// vault's `.trash`).
    #[arg(long)]
    pub allow_permanent_delete: bool,
    /// Folder for the note history, audit log and writers' lock (default: the user's state
    /// folder, `~/.local/state/capvault` on Linux). It must be outside the vault.
    #[arg(long, value_name = "DIR", value_parser = absolute_path)]
    pub state_dir: Option<PathBuf>,
    /// Write the audit log (one JSON line per change, never note content) to this file
    /// instead of the state folder. It must be outside the vault.
    #[arg(long, value_name = "FILE", value_parser = absolute_path)]
    pub audit_log: Option<PathBuf>,
    /// `destructive`: deletes, whole-note replacements (`write_note`), folder moves, tag renames
    /// and restores wait for the person's yes, asked through the client (MCP elicitation) or,
    /// for a client that cannot ask, given with `capvault confirm`. `off` (the default) asks
    /// nothing. Overrides the config file's `confirm`.
    #[arg(long, value_name = "WHAT", value_enum)]
    pub confirm: Option<crate::config::Confirm>,
    /// Refuse a change to an existing note that does not carry `if_match` (the version the client
    /// read). The default over HTTP; `--require-if-match=false` turns it off there. Overrides
    /// the config file's `require_if_match`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub require_if_match: Option<bool>,
    /// Keep at most this many MiB of earlier note versions (oldest pruned first).
    #[arg(long, value_name = "MIB", default_value_t = 512)]
    pub history_max_mb: u64,
    /// Keep earlier note versions at most this many days.
    #[arg(long, value_name = "DAYS", default_value_t = 90)]
    pub history_max_days: u64,
}

#[derive(Args, Debug)]
pub struct VaultArgs {
    /// The vault folder (an Obsidian vault or any folder of Markdown notes).
    pub vault: Option<PathBuf>,
    /// Largest file, in bytes, that capvault will read; larger files are refused unread.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_READ_BYTES)]
    pub max_file_size: u64,
    /// Remove paths matching this glob from the vault (repeatable; any letter case; a folder
    /// that matches takes everything in it): never read, listed, searched, linked or indexed.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// The config file (TOML: tools, exclude, disabled_tools, [tool.NAME] name/description).
    /// Default: capvault/config.toml in your config folder, if it exists.
    #[arg(long, value_name = "FILE", value_parser = absolute_path)]
    pub config: Option<PathBuf>,
}

/// `--hidden-text`: `show`, `mark` or `strip`.
fn parse_hidden_text(s: &str) -> Result<crate::markdown::hidden::Policy, String> {
    use crate::markdown::hidden::Policy;
    match s {
        "show" => Ok(Policy::Show),
        "mark" => Ok(Policy::Mark),
        "strip" => Ok(Policy::Strip),
        other => Err(format!("`{other}` is not one of show, mark, strip")),
    }
}
