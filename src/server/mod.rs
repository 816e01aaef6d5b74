//! The MCP server: tool handlers and resources over one [`Vault`].
//!
//! Handlers are thin: parse arguments (paths become [`VaultPath`](crate::vault::VaultPath)s here, at the boundary),
//! run the core operation from [`crate::notes`] on a blocking thread, shape the reply. Tool
//! failures are `isError` results with a short message; JSON-RPC errors are kept for protocol
//! faults (and for `resources/read`, which has no other way to fail).
//!
//! This file holds the server type, its constructors and the module list; each concern has its
//! own file (`docs/architecture.md` lists them): the tool routers (`router.rs`), the rmcp handler
//! (`handler.rs`), a tool call's steps (`call.rs`), its reply (`reply.rs`), a held call
//! (`confirm_call.rs`), the instructions (`instructions.rs`).

mod args;
mod base_tools;
mod call;
mod confirm;
mod confirm_call;
pub mod error;
pub mod grant;
mod handler;
mod instructions;
mod knowledge;
pub mod policy;
mod prompts;
mod reply;
mod resources;
mod router;
mod semantic_tools;
mod subscriptions;
mod task_tools;
mod tools;
mod vault_tools;
pub mod vaults;
mod write_tools;

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::Tool;

use crate::engine::Engine;
use crate::notes::write::Writer;
use crate::vault::Vault;
use router::ROUTERS;

pub use args::Parameters;
pub use error::{Code, ToolError};
pub use grant::Grant;
pub use policy::{PolicyError, ToolPolicy};
pub use resources::{URI_PREFIX, UriError, path_from_uri, uri_for};

/// The tools as clients see them: filtered, renamed, schemas cleaned. Built once per server.
#[derive(Debug)]
struct ToolTable {
    /// What `tools/list` returns.
    listed: Vec<Tool>,
    /// The names clients call, to the names in the code.
    names: BTreeMap<String, String>,
}

/// One MCP session's server: cheap to clone, and every session of a vault shares one
/// [`Engine`] (`CapvaultServer::new(Arc::clone(&engine), policy)` per session). A clone is a new
/// session: it shares everything but the notes subscribed to.
pub struct CapvaultServer {
    /// The vault every request is served from.
    vault: Arc<Vault>,
    /// The parsed vault (notes, tags, links) and the search index, kept fresh together.
    engine: Arc<Engine>,
    /// Routes `tools/call` to the `#[tool]` methods.
    tool_router: ToolRouter<Self>,
    /// The tools this server offers.
    tools: Arc<ToolTable>,
    /// The vault's writer, when the server runs with `--write` (the write tools are listed
    /// only then).
    writer: Option<Arc<Writer>>,
    /// Notes are served as resources: only when the tool profile offers `read_note` (as a
    /// token's scope decides over HTTP).
    resources: bool,
    /// A server of several vaults: each vault's own server, chosen by the `vault` argument
    /// ([`vaults`]); this one's engine and writer are then the first vault's.
    set: Option<Arc<vaults::VaultSet>>,
    /// This session's `resources/subscribe` subscriptions.
    subscribed: Arc<subscriptions::Subscribed>,
}

impl Clone for CapvaultServer {
    fn clone(&self) -> Self {
        CapvaultServer {
            vault: Arc::clone(&self.vault),
            engine: Arc::clone(&self.engine),
            tool_router: self.tool_router.clone(),
            tools: Arc::clone(&self.tools),
            writer: self.writer.clone(),
            resources: self.resources,
            set: self.set.clone(),
            subscribed: Arc::default(),
        }
    }
}

impl std::fmt::Debug for CapvaultServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapvaultServer")
            .field("tools", &self.tools.names.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl CapvaultServer {
    /// A session on `engine`, offering the tools `policy` allows. Fails only when the policy
    /// renames two tools to one name.
    pub fn new(engine: Arc<Engine>, policy: &ToolPolicy) -> Result<Self, PolicyError> {
        Self::build(engine, None, policy)
    }

    /// A session on `engine` that may also write through `writer` (`--write`): the write tools
    /// are listed, as `policy` allows.
    pub fn writable(
        engine: Arc<Engine>,
        writer: Arc<Writer>,
        policy: &ToolPolicy,
    ) -> Result<Self, PolicyError> {
        Self::build(engine, Some(writer), policy)
    }

    fn build(
        engine: Arc<Engine>,
        writer: Option<Arc<Writer>>,
        policy: &ToolPolicy,
    ) -> Result<Self, PolicyError> {
        let mut tool_router = ROUTERS.read.clone();
        if engine.semantic().is_some() {
            tool_router += ROUTERS.semantic.clone();
        }
        if writer.is_some() {
            tool_router += ROUTERS.write.clone();
        }
        let (listed, names) = policy.apply(tool_router.list_all())?;
        let resources = policy.allows("read_note");
        Ok(CapvaultServer {
            vault: Arc::clone(engine.shared_vault()),
            engine,
            tool_router,
            tools: Arc::new(ToolTable { listed, names }),
            writer,
            resources,
            set: None,
            subscribed: Arc::default(),
        })
    }

    /// True when the server may write (`--write`).
    pub fn writes_enabled(&self) -> bool {
        self.writer.is_some()
    }

    /// A session on `engine` with every tool.
    pub fn with_all_tools(engine: Arc<Engine>) -> Self {
        // The default policy renames nothing, so it cannot fail.
        match Self::new(engine, &ToolPolicy::all()) {
            Ok(s) => s,
            Err(e) => unreachable!("the default tool policy failed: {e}"),
        }
    }

    /// The engine (model and index).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The vault being served.
    pub fn vault(&self) -> &Vault {
        &self.vault
    }
}
