//! capvault's integration tests: one test crate, one module per subject (as ripgrep does), so
//! the library and its dependencies are linked once instead of once per file. Measured in
//! `docs/performance.md` ("Test binaries"). Run one subject with
//! `cargo test --test integration writes::`, one test with its full name.
//!
//! `common` holds the shared harness: fixture trees and a real rmcp client on the real binary.
//!
//! The suite is Unix's (symlinks, FIFOs, modes and signals in its fixtures): on Windows this
//! crate is empty, and the unit tests and the demo are what runs there (docs/platforms.md).
#![cfg(unix)]

mod common;

mod attacks;
mod bases;
mod bundle;
mod cancel;
mod changes;
mod cli;
mod confirm;
mod contract;
mod crash;
mod dockerfile;
mod hidden_text;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "images")]
mod images;
mod index_cache;
mod install;
mod knowledge;
mod layers;
#[cfg(target_os = "linux")]
mod memory_bounds;
#[cfg(feature = "semantic")]
mod model_fetch;
#[cfg(feature = "import")]
mod model_import;
mod move_real_vaults;
#[cfg(feature = "oauth")]
mod oauth_builtin;
// It starts the server with `--sandbox require` (Landlock).
#[cfg(all(feature = "oauth", target_os = "linux"))]
mod oauth_client_doc;
#[cfg(feature = "oauth")]
mod oauth_issuer;
mod obsidian_real_vaults;
#[cfg(feature = "pdf")]
mod pdfs;
mod periodic;
#[cfg(target_os = "linux")]
mod priority;
mod prompts;
mod provenance;
mod races;
mod real_vaults;
mod run_query;
#[cfg(target_os = "linux")]
mod sandbox;
mod search;
#[cfg(feature = "semantic")]
mod semantic;
#[cfg(feature = "semantic")]
mod semantic_quality;
mod sessions;
mod state;
mod tags;
mod tasks;
mod tools;
// It lists the tools with an embedding model (the tests' own small one) too.
#[cfg(feature = "semantic")]
mod tools_doc;
mod vaults;
mod writes;
