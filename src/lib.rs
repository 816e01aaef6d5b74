//! # capvault
//!
//! An MCP (Model Context Protocol) server that lets AI clients search, read and (with `--write`)
//! edit an Obsidian vault, and touch nothing else on the machine.
//!
//! ## Layout
//!
//! The crate is built in layers around one rule: **only the capability layer touches the
//! filesystem**.
//!
//! - [`vault`]: the capability layer. [`vault::Vault::open`] opens the vault root once as a
//!   `cap_std::fs::Dir`; every vault file operation after that goes through that handle. The
//!   search index's cache folder ([`vault::cache`]) is a second handle, outside the vault (proven
//!   by walking up from it), and the write tools' state folder ([`vault::state`]: history, audit
//!   log, writers' lock, OAuth grants; [`vault::state::identity`] recognises the vault's own
//!   folder after a move or a restore) a third. All are opened by one private function, the only use of ambient
//!   authority in the program. [`vault::VaultPath`] is the validated,
//!   vault-relative path type every request is parsed into; the resolver walks it one no-follow
//!   step at a time so that symlinks can neither leave the vault nor lead into hidden folders.
//!   clippy's `disallowed-methods` (`clippy.toml`) keeps `std::fs`/`tokio::fs` out of every other
//!   module.
//!   Paths the configuration excludes ([`vault::Exclusions`]) are refused by the same walk. The
//!   one way a file is written, [`vault::Vault::write_file`], acts on a name in a folder handle
//!   that walk checked: atomic, durable, version-checked; folders, moves that never replace, the
//!   trash and removals work the same way, inside the write scopes. The few system calls that
//!   differ by platform (no-replace renames, durability, the watcher's path, birth times) are
//!   behind [`vault::sys`], one implementation for Linux and macOS and a portable one (cap-std
//!   only) for Windows, which the `portable-fs` feature runs on Linux for the tests.
//! - [`markdown`]: pure parsing of one note (frontmatter, aliases, tags, headings, block ids, links
//!   with positions) as Obsidian reads it, how property values compare, and the byte-preserving
//!   edits the write tools make ([`markdown::edit`], [`markdown::yaml_edit`],
//!   [`markdown::tag_edit`]: tags renamed and frontmatter tag lists rewritten, read back), and
//!   what a reader of the rendered note never sees ([`markdown::hidden`]). No I/O.
//! - [`obsidian`]: Obsidian's own formats, parsed without I/O: `.obsidian` settings, Moment.js
//!   date formats for periodic notes (with the vault's week start) and the periods themselves
//!   ([`obsidian::periodic`]: weeks to years, the dates people name them by, the Periodic Notes
//!   plugin's template variables), JSON Canvas (and its validated edits), and Bases
//!   ([`obsidian::bases`]: the expression language and a bounded evaluator over any
//!   [`obsidian::bases::Source`] of files), Dataview ([`obsidian::dataview`]: inline fields,
//!   typed values, list items and tasks; [`obsidian::dataview::query`]: DQL over any
//!   [`obsidian::dataview::query::DvSource`]) and the Tasks plugin ([`obsidian::tasks`]: its
//!   query language, statuses, and the line a status change writes), with the plugins'
//!   JavaScript regular expressions compiled once for all ([`obsidian::jsregex`]).
//! - [`media`]: attachments made ready for a model, without I/O: images ([`media::image`])
//!   decoded within a pixel and allocation budget, sent as they are when they fit, else scaled
//!   down and re-encoded; a PDF's text by page ([`media::pdf`]), within bounds, run only in the
//!   PDF worker's confined child. The decoders and the PDF parser are the `images` and `pdf`
//!   features; without them an image or a PDF is sent as its own bytes, with the reason.
//! - [`net`]: outgoing HTTPS (where capvault may connect, how its clients are built), shared
//!   by the issuer's keys and the model download. No filesystem.
//! - [`model`]: the vault model built from the capability layer and the parser: every note parsed
//!   (in parallel), the file index for link resolution, tags, forward links and backlinks, kept
//!   current by stat-based diffs (of one file, one folder or the whole vault) applied one note at a
//!   time; each note's Dataview data (inline fields, tasks) kept compact beside them.
//! - [`index`]: the full-text search index (tantivy): schema, field boosts, filters, the query
//!   language, CJK bigrams, how a hit's line, excerpt and heading are chosen, the candidate notes
//!   of an exact search, and its cache, saved and loaded only through the cache folder's handle
//!   ([`vault::cache`]), never by path.
//! - [`semantic`]: semantic search's parts below the engine: the embedding model
//!   ([`semantic::Embedder`]: a static model in model2vec's format, parsed from bytes the
//!   capability layer read, bounded and validated; or, for small vaults, the BERT sentence
//!   transformer itself), notes cut into heading-sized sections (a vault's boilerplate lines
//!   left out), the vector store with exact nearest-neighbour
//!   search (int8 vectors), its bytes for the embeddings cache ([`semantic::saved`]: checked
//!   and tied to the model's fingerprint), `capvault model import` ([`semantic::import`]: a
//!   static model distilled from a sentence transformer run in-process by candle, and with
//!   `--corpus` given the vault's split words whole and tuned on its notes by
//!   [`semantic::tune`], the corpus read through
//!   [`vault::Vault`] like any vault) and
//!   `capvault model fetch` ([`semantic::fetch`]: a pinned model2vec model downloaded from the
//!   Hugging Face hub, each file checked by sha256 and written through [`vault::download`]).
//! - [`engine`]: the model and the index built together at startup in the background and kept
//!   fresh together: the file watcher ([`vault::watch`], hints only, every re-read through the
//!   vault), a periodic stat-based reconcile, and optional query-time reconciles. One engine per
//!   vault, shared by every session; [`engine::Engine::shutdown`] stops and joins its threads.
//!   With an embedding model it also embeds every note in the background once the index is
//!   ready (after loading the vectors saved in the index cache folder, so only changed notes
//!   are embedded again), and re-embeds the notes each reconcile changed. PDFs are read by a
//!   worker process ([`engine::pdf`]: started before the sandbox, confined to nothing, one
//!   forked child with memory and CPU limits per PDF); with `--index-pdfs` every PDF's pages
//!   are indexed in a second index ([`engine::pdfs`]) that search merges with the notes'.
//!   In parts by concern: options ([`engine::EngineOptions`]), status and phases
//!   ([`engine::Phase`], [`engine::IndexStatus`]), lifecycle (first build, start, watcher,
//!   shutdown), reconciles ([`engine::Engine::sync_all`]), the index cache, Obsidian's Excluded
//!   files, kept texts, embeddings, and the change log ([`engine::changes`]: every note created,
//!   changed, moved or deleted as the reconciles found it, numbered, kept in the cache folder
//!   across restarts with the versions diffs need).
//! - [`notes`]: the operations behind the tools (read views, list with filters, search, the link
//!   graph and tags, vault facts, settings, paths as people write them) as plain functions over a
//!   `Vault`, the model and the engine, with bounded, paged results and errors for the client;
//!   [`notes::bases`]: Bases over the vault model; [`notes::query`]: Dataview and Tasks queries
//!   over it; [`notes::tasks`]: the task list; [`notes::changes`]: `changes_since` over the
//!   change log (folded per note, paged, diffs, every exclusion on every field);
//!   [`notes::prompts`]: MCP prompts from the vault's
//!   prompts folder and built in; [`notes::write`]: the write operations (locks,
//!   history, audit, link rewrite on moves, task status) and [`notes::write::confirm`], what
//!   `--confirm destructive` keeps between a question to the person and the answer.
//! - [`server`]: the MCP server (rmcp): one session per client on a shared engine, thin tool
//!   handlers, the resources API and its change notifications (`resources/subscribe`,
//!   `subscriptions/listen`, from the change log), several vaults behind one server
//!   ([`server::vaults`]: each
//!   vault its own server, chosen by a `vault` argument, a URI's authority or a prompt's
//!   prefix), the tool policy (profiles, renames, lean standard schemas),
//!   the person in the loop (`--confirm destructive` through elicitation, `--require-if-match`,
//!   who made each change) and [`server::ToolError`], the stable error codes.
//! - [`app`]: the command line ([`app::cli`], clap) and what each subcommand does, one module
//!   each: [`app::serve`] (set up before the runtime, sandbox last; then over stdio until EOF or a
//!   signal, or over HTTP), [`app::call`] (one tool in-process), [`app::oauth`] (OAuth set-up,
//!   `passwd`), [`app::tokens`], [`app::state`], [`app::confirm`] (the person's yes from a
//!   terminal), [`app::model`], [`app::install`] (`install`,
//!   `uninstall`, `bundle`, `doctor`); [`http`]: the Streamable HTTP transport behind one gate (Host
//!   and Origin checks, bearer tokens with scopes passed to the server as a
//!   [`server::Grant`], limits, TLS, access log) and [`http::oauth`]: OAuth (RFC 9728 resource
//!   metadata; the built-in authorization server with its consent page, or an external issuer's
//!   JWTs); [`vault::sandbox`]: the Landlock sandbox
//!   `serve` applies to itself before its runtime starts; [`config`]: the config file; [`demo`]: the `demo` subcommand with its wire
//!   capture; [`setup`]: `install`, `uninstall` and `doctor` (clients' config files edited through
//!   [`vault::host`], keeping their comments and other servers). The user's own files outside
//!   any vault (the config, token, TLS, JWKS and model files, clients' configs) are reached only
//!   through a [`vault::host::Host`], claimed once in `main.rs` and passed down as `&Host`.
//! - [`locks`]: `lock`, `read` and `write` that take a lock even after a panic poisoned it, used
//!   by every layer instead of spelling the recovery out.
//!
//! Each module uses only those in layers below its own; the order is written once, in
//! `docs/architecture.md` ("Layers"), and `tests/layers.rs` checks every import against it.
//! - `main.rs`: parses the command line and hands each command to [`app`]; logging (stderr only;
//!   stdout is the protocol) and exit codes.
//!
//! See `docs/architecture.md` for the same map with the reasons behind it, and `SECURITY.md` for
//! the guarantees and where they stop.

// These docs are for contributors (`cargo doc --document-private-items`): public items may name
// the private limits and helpers they rely on.
#![allow(rustdoc::private_intra_doc_links)]

pub mod app;
pub mod config;
pub mod demo;
pub mod engine;
#[cfg(feature = "http")]
pub mod http;
pub mod index;
pub mod locks;
pub mod markdown;
pub mod media;
pub mod model;
#[cfg(feature = "net")]
pub mod net;
pub mod notes;
pub mod obsidian;
pub mod semantic;
pub mod server;
pub mod setup;
#[cfg(test)]
mod test_alloc;
pub mod vault;

/// The optional features (README, "Builds") and whether this build has each.
pub const FEATURES: [(&str, bool); 6] = [
    ("http", cfg!(feature = "http")),
    ("oauth", cfg!(feature = "oauth")),
    ("semantic", cfg!(feature = "semantic")),
    ("import", cfg!(feature = "import")),
    ("images", cfg!(feature = "images")),
    ("pdf", cfg!(feature = "pdf")),
];
