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

use crate::model::{Model, SharedModel};
use crate::notes::NoteError;
use crate::vault::Vault;

pub use resources::{URI_PREFIX, path_from_uri, uri_for};

/// How old the vault model may be before a query rescans the vault.
pub const DEFAULT_RESCAN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1000);

/// The capvault MCP server. Cheap to clone: the vault is shared.
#[derive(Clone)]
pub struct CapvaultServer {
    /// The vault every request is served from.
    vault: Arc<Vault>,
    /// The parsed vault (notes, tags, links), refreshed before each query that needs it.
    model: Arc<SharedModel>,
    /// Routes `tools/call` to the `#[tool]` methods.
    tool_router: ToolRouter<Self>,
}

impl CapvaultServer {
    /// A server for `vault` whose model rescans the vault when older than one second.
    pub fn new(vault: Vault) -> Self {
        Self::with_rescan_interval(vault, DEFAULT_RESCAN_INTERVAL)
    }

    /// A server for `vault` whose model rescans the vault when older than `interval` (zero: on
    /// every model query).
    pub fn with_rescan_interval(vault: Vault, interval: std::time::Duration) -> Self {
        CapvaultServer {
            vault: Arc::new(vault),
            model: Arc::new(SharedModel::new(interval)),
            tool_router: Self::tool_router() + Self::knowledge_router() + Self::vault_router(),
        }
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

    /// Builds the model in the background (when called inside a tokio runtime), so the first
    /// model query finds most of the work done. The server answers at once meanwhile.
    pub fn start_background_build(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let (vault, model) = (Arc::clone(&self.vault), Arc::clone(&self.model));
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            match model.fresh(&vault) {
                Ok(m) => tracing::info!(
                    notes = m.note_count(),
                    ms = started.elapsed().as_millis() as u64,
                    "vault model built"
                ),
                Err(e) => tracing::warn!(error = %e, "vault model build failed"),
            }
        });
    }

    /// Runs `f` on the blocking pool with the vault and an up-to-date model.
    async fn with_model<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(&Vault, &Model) -> Result<T, NoteError> + Send + 'static,
    {
        let (vault, model) = (Arc::clone(&self.vault), Arc::clone(&self.model));
        tokio::task::spawn_blocking(move || {
            let fresh = model.fresh(&vault).map_err(|e| e.to_string())?;
            f(&vault, &fresh).map_err(|e| e.to_string())
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
