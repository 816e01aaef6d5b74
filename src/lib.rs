//! # capvault
//!
//! An MCP (Model Context Protocol) server that lets AI clients search and read an Obsidian vault,
//! and touch nothing else on the machine.
//!
//! ## Layout
//!
//! The crate is built in layers around one rule: **only the capability layer touches the
//! filesystem**.
//!
//! - [`vault`]: the capability layer. [`vault::Vault::open`] opens the vault root once as a
//!   `cap_std::fs::Dir` (the single use of ambient authority in the program); every file
//!   operation after that goes through that handle. [`vault::VaultPath`] is the validated,
//!   vault-relative path type every request is parsed into; the resolver walks it one no-follow
//!   step at a time so that symlinks can neither leave the vault nor lead into hidden folders.
//!   clippy's `disallowed-methods` (`clippy.toml`) keeps `std::fs`/`tokio::fs` out of every other
//!   module.
//! - [`notes`]: the operations behind the tools (read, list, search) as plain functions over a
//!   `Vault`, with bounded results and errors written for the client.
//! - [`server`]: the MCP server (rmcp): thin tool handlers and the resources API. Handlers parse
//!   arguments, call [`notes`], shape replies.
//! - [`app`]: what the subcommands do (`serve` over stdio, `call` one tool in-process);
//!   [`demo`]: the `demo` subcommand with its wire capture.
//! - `main.rs`: the command line (clap) and logging (stderr only; stdout is the protocol).
//!
//! See `docs/architecture.md` for the same map with the reasons behind it, and `SECURITY.md` for
//! the guarantees and where they stop.

pub mod app;
pub mod demo;
pub mod markdown;
pub mod model;
pub mod notes;
pub mod obsidian;
pub mod server;
pub mod vault;
