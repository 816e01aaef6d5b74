//! The tools that need an embedding model (listed only when one is loaded): `related_notes`.

use rmcp::handler::server::wrapper::Json;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::locate::Named;
use crate::notes::related::{self, RelatedNotes, RelatedRequest};

/// Arguments of `related_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelatedNotesArgs {
    /// The note (a path or a note name).
    pub path: String,
    /// Most notes (default 10).
    #[schemars(range(min = 1, max = crate::notes::related::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// Leave out notes already linked either way (link suggestions).
    #[serde(default)]
    pub unlinked_only: bool,
}

#[tool_router(router = semantic_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Notes nearest in meaning to a note, best first, each with its closest section. With
    /// `unlinked_only`, only notes not already linked either way: candidates for new links.
    #[tool(annotations(
        title = "Find related notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn related_notes(
        &self,
        Parameters(args): Parameters<RelatedNotesArgs>,
    ) -> Result<Json<RelatedNotes>, ToolError> {
        let req = RelatedRequest {
            note: Named::parse(args.path)?,
            limit: args.limit,
            unlinked_only: args.unlinked_only,
        };
        self.note(move |engine| related::related(engine, &req))
            .await
    }
}
