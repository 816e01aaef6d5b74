//! # capvault
//!
//! An MCP (Model Context Protocol) server that lets AI clients search, read and (with `--write`)
//! edit an Obsidian vault, and touch nothing else on the machine.
//!
//! ## Layout
//!
//! One rule holds the layers together: **only [`vault`] touches the filesystem** (clippy's
//! `disallowed-methods` keeps `std::fs` out of every other module). The modules, top layer
//! first. A module uses only modules of the layers below its own: `docs/architecture.md` lists
//! the layers and describes each module in full, and `tests/layers.rs` checks every import
//! against that list.
//!
//! - `main.rs`: parses the command line, logs to stderr (stdout is the protocol), hands each
//!   command to [`app`]; the one place that claims a [`vault::host::Host`].
//! - [`demo`]: `capvault demo`, the example vault served to an in-process client, the wire shown.
//! - [`app`]: the commands, one module each; [`app::cli`] defines them all (clap).
//! - [`setup`]: `install`, `uninstall`, `doctor` and `bundle`: clients' config files edited, their
//!   comments kept.
//! - [`config`]: the config file (TOML).
//! - [`http`]: the Streamable HTTP transport behind one gate (Host, Origin, tokens, limits, TLS),
//!   and [`http::oauth`].
//! - [`server`]: the MCP server (rmcp): thin tool handlers, resources, prompts, notifications,
//!   several vaults, the tool policy and the stable error codes ([`server::ToolError`]).
//! - [`notes`]: the operations behind the tools, over the vault, the model and the engine;
//!   [`notes::write`] holds the write operations.
//! - [`engine`]: one per vault: the model and the index built in the background and kept fresh
//!   together (watcher, reconciles), embeddings, PDFs, the change log.
//! - [`index`]: the full-text search index (tantivy) and its cache.
//! - [`model`]: the vault model: parsed notes, link resolution, tags, backlinks, Dataview data.
//! - [`obsidian`]: Obsidian's formats without I/O: settings, dates and periodic notes, canvases,
//!   Bases, Dataview, Tasks, and the budget their queries share.
//! - [`semantic`]: embedding models, sections, the vector store, `model import` and `model fetch`.
//! - [`markdown`]: one note parsed as Obsidian reads it, the byte-preserving edits, hidden text.
//! - [`net`]: outgoing HTTPS (where capvault may connect).
//! - [`media`]: images and PDFs made ready for a model, within budgets.
//! - [`vault`]: **the capability layer**: the vault opened once as a `cap_std::fs::Dir`, the
//!   validated [`vault::VaultPath`], the no-follow resolver, the one write path, capvault's own
//!   folders outside the vault (one [`vault::private::PrivateDir`]: the index cache, the state
//!   folder, model downloads), the Landlock sandbox.
//! - [`locks`]: locks that survive a panic.
//! - `test_alloc` (test builds only): a counting allocator.
//!
//! `SECURITY.md` says what is guaranteed and where it stops.

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
