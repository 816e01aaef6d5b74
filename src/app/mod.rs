//! What the `capvault` subcommands do. `main.rs` parses the command line ([`cli`]) and hands
//! each command to its module here:
//!
//! - [`serve`]: `serve`, set up before the async runtime starts (folders, credentials, the
//!   listener, the model, the sandbox), then over stdio or HTTP; its options that change answers
//!   are opened the same way for `call`.
//! - [`call`]: `call`, one tool (or the tool list) through an in-process client.
//! - [`oauth`]: OAuth set-up for `serve --transport http` (the built-in authorization server's
//!   store, an external issuer's keys), and `passwd`.
//! - [`tokens`]: `token new` (bearer tokens and token files) and `tokens list|revoke` (the
//!   built-in authorization server's grants).
//! - [`state`]: `state`, the vault's state folder and the others.
//! - [`confirm`]: `confirm`, the person's yes for held changes (`serve --confirm destructive`)
//!   a client could not ask about.
//! - [`model`]: `model import|fetch|check`.
//! - [`install`]: `install`, `uninstall`, `bundle` and `doctor`, on top of [`crate::setup`].
//!
//! What they share is below: the server for an engine, and the in-process client that `call`,
//! the demo and the tests connect through.

pub mod call;
pub mod cli;
pub mod confirm;
pub mod install;
pub mod model;
#[cfg(feature = "oauth")]
pub mod oauth;
pub mod serve;
pub mod state;
#[cfg(feature = "http")]
pub mod tokens;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};

use crate::engine::{Engine, EngineOptions, IndexCache};
use crate::notes::write::Writer;
use crate::server::{CapvaultServer, ToolPolicy};
use crate::vault::Vault;

/// The error for a command or option this build left out: which feature has it, and where the
/// full build is.
pub fn not_built(feature: &str, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} is not in this build of capvault (built without the `{feature}` feature): install \
         the full build (README, Install), or build with `--features {feature}`"
    )
}

/// The state folder root: `--state-dir` or the user's state folder.
fn state_root(arg: Option<&Path>) -> anyhow::Result<PathBuf> {
    arg.map(Path::to_path_buf)
        .or_else(crate::vault::state::default_root)
        .ok_or_else(|| anyhow::anyhow!("no state folder for this user: pass --state-dir"))
}

/// The server for `engine` (writable with `writer`), after removing what interrupted writes
/// left behind.
fn build_server(
    engine: &Arc<Engine>,
    writer: Option<Arc<Writer>>,
    policy: &ToolPolicy,
) -> anyhow::Result<CapvaultServer> {
    if writer.is_some() {
        // What writes killed mid-way left behind (hidden temporary files), in the background.
        let engine = Arc::clone(engine);
        tokio::task::spawn_blocking(move || {
            let n = engine.vault().remove_stale_temps();
            if n > 0 {
                tracing::info!(removed = n, "temporary files of interrupted writes removed");
            }
        });
    }
    match writer {
        Some(w) => CapvaultServer::writable(Arc::clone(engine), w, policy),
        None => CapvaultServer::new(Arc::clone(engine), policy),
    }
    .map_err(anyhow::Error::msg)
}

/// The first sentence of a tool's description (what `call --list`, the demo and a bundle's
/// tool list show).
pub fn first_sentence(description: &str) -> String {
    let text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = text
        .split(". ")
        .next()
        .unwrap_or(&text)
        .trim_end_matches('.');
    format!("{first}.")
}

/// An engine for `vault` with the default options and no index cache (one-shot use).
pub fn one_shot_engine(vault: Vault) -> Arc<Engine> {
    Engine::open(vault, EngineOptions::default(), IndexCache::Off)
}

/// Starts `server` on one end of an in-memory pipe and connects an rmcp client to the other,
/// through `wrap` (the demo uses it to capture the wire). The server task ends with the client.
pub async fn connect_in_process<S>(
    server: CapvaultServer,
    wrap: impl FnOnce(tokio::io::DuplexStream) -> S,
) -> anyhow::Result<RunningService<RoleClient, ()>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (server_end, client_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        match server.serve(server_end).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::error!(error = %e, "in-process server failed to start"),
        }
    });
    let client = ().serve(wrap(client_end)).await?;
    Ok(client)
}
