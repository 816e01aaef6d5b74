//! The MCP server: tool handlers and resources over one [`Vault`].
//!
//! Handlers are thin: parse arguments (paths become [`VaultPath`]s here, at the boundary),
//! run the core operation from [`crate::notes`] on a blocking thread, shape the reply. Tool
//! failures are `isError` results with a short message; JSON-RPC errors are kept for protocol
//! faults (and for `resources/read`, which has no other way to fail).

mod knowledge;
mod resources;
mod tools;
mod vault_tools;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use crate::engine::{Engine, Freshness};
use crate::model::Model;
use crate::notes::NoteError;
use crate::vault::Vault;

pub use resources::{URI_PREFIX, path_from_uri, uri_for};

/// The capvault MCP server. Cheap to clone: the vault is shared.
#[derive(Clone)]
pub struct CapvaultServer {
    /// The vault every request is served from.
    vault: Arc<Vault>,
    /// The parsed vault (notes, tags, links) and the search index, kept fresh together.
    engine: Arc<Engine>,
    /// Routes `tools/call` to the `#[tool]` methods.
    tool_router: ToolRouter<Self>,
}

impl CapvaultServer {
    /// A server for `vault` with the default freshness (file watcher, periodic reconcile). Call
    /// [`CapvaultServer::start`] to build the model and index in the background; otherwise the
    /// first query that needs the model builds it.
    pub fn new(vault: Vault) -> Self {
        Self::with_freshness(vault, Freshness::default())
    }

    /// A server for `vault` kept fresh as `freshness` says.
    pub fn with_freshness(vault: Vault, freshness: Freshness) -> Self {
        let vault = Arc::new(vault);
        CapvaultServer {
            engine: Arc::new(Engine::new(Arc::clone(&vault), freshness)),
            vault,
            tool_router: Self::tool_router() + Self::knowledge_router() + Self::vault_router(),
        }
    }

    /// Starts the background work: the first build of model and index, then the file watcher
    /// and the periodic reconcile. The server answers at once meanwhile.
    pub fn start(&self) {
        self.engine.start();
    }

    /// The engine (model and index).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The vault being served.
    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// Runs `f` on the blocking pool (vault operations do synchronous I/O).
    async fn blocking<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(&Vault) -> Result<T, String> + Send + 'static,
    {
        let vault = Arc::clone(&self.vault);
        tokio::task::spawn_blocking(move || f(&vault))
            .await
            .map_err(|_| "internal error: the operation was aborted".to_owned())?
    }

    /// Runs `f` on the blocking pool with the vault and an up-to-date model.
    async fn with_model<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(&Vault, &Model) -> Result<T, NoteError> + Send + 'static,
    {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || {
            let fresh = engine.model().map_err(|e| e.to_string())?;
            f(engine.vault(), &fresh).map_err(|e| e.to_string())
        })
        .await
        .map_err(|_| "internal error: the operation was aborted".to_owned())?
    }

    fn instructions(&self) -> String {
        format!(
            "capvault serves the Obsidian vault \"{name}\" (read-only). Notes are Markdown files \
             addressed by paths relative to the vault root, with `/` separators, like \
             `Projects/Plan.md`. Use `search_notes` to find notes by text, `list_notes` to \
             browse folders (newest first), and `read_note` to read one note (its `sha256` is its \
             version). Notes are also resources under `{URI_PREFIX}<path>`. Hidden folders \
             (`.obsidian`, `.git`, `.trash`) and anything outside the vault are not accessible.",
            name = self.vault.name()
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CapvaultServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(self.instructions())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let vault = Arc::clone(&self.vault);
        tokio::task::spawn_blocking(move || resources::list(&vault, cursor.as_deref()))
            .await
            .map_err(|_| ErrorData::internal_error("the listing was aborted", None))?
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let vault = Arc::clone(&self.vault);
        let uri = request.uri;
        tokio::task::spawn_blocking(move || resources::read(&vault, &uri))
            .await
            .map_err(|_| ErrorData::internal_error("the read was aborted", None))?
            .map(Into::into)
    }
}
