//! Tools about the vault as Obsidian sees it: `vault_info`, `get_daily_note`, `read_canvas`,
//! `read_attachment`. The replies are built in [`crate::notes::files`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError, resources::uri_for};
use crate::notes::files::{self, AttachmentInfo, CanvasReply, DailyNote, VaultInfo, parse_date};
use crate::notes::locate::locate;
use crate::vault::VaultPath;

/// Arguments of `get_daily_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DailyNoteArgs {
    /// The day, `YYYY-MM-DD`, or `today` (default), `yesterday`, `tomorrow` (the server's local date).
    pub date: Option<String>,
}

/// Arguments taking one file path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// Path of the file relative to the vault root, e.g. `Boards/Plan.canvas`.
    pub path: String,
}

#[tool_router(router = vault_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Facts about the vault: counts of notes, canvases and attachments, the Obsidian settings
    /// capvault honours (links, attachments, trash, daily notes, templates), and whether writes
    /// are enabled.
    #[tool(annotations(
        title = "Vault information",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn vault_info(&self) -> Result<Json<VaultInfo>, ToolError> {
        let writes = self.writes_enabled();
        self.with_engine(move |engine| Ok(files::vault_info(engine, writes)?))
            .await
            .map(Json)
    }

    /// Today's daily note (or another day's), found where the vault's Daily notes or Periodic
    /// Notes settings put it. Says so plainly when that day has no note.
    #[tool(annotations(
        title = "Get a daily note",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_daily_note(
        &self,
        Parameters(args): Parameters<DailyNoteArgs>,
    ) -> Result<Json<DailyNote>, ToolError> {
        let date = parse_date(args.date.as_deref())?;
        self.blocking(move |vault| Ok(files::daily_note(vault, date)?))
            .await
            .map(Json)
    }

    /// A canvas (`.canvas`, JSON Canvas 1.0): its nodes and edges, spec violations listed, and
    /// every file node resolved to a vault path.
    #[tool(annotations(
        title = "Read a canvas",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn read_canvas(
        &self,
        Parameters(args): Parameters<PathArgs>,
    ) -> Result<Json<CanvasReply>, ToolError> {
        let typed = VaultPath::parse(&args.path)?;
        self.with_engine(move |engine| {
            let path = locate(engine, &args.path, typed)?;
            let model = engine.model()?;
            Ok(files::read_canvas(engine.vault(), &model, &path)?)
        })
        .await
        .map(Json)
    }

    /// An attachment's original bytes (image, PDF, audio...) as an embedded resource with its
    /// MIME type, size and SHA-256. Files over 6 MiB are refused, never truncated.
    #[tool(
        annotations(
            title = "Read an attachment",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::tool::schema_for_output::<AttachmentInfo>()
    )]
    pub async fn read_attachment(
        &self,
        Parameters(args): Parameters<PathArgs>,
    ) -> Result<CallToolResult, ToolError> {
        let typed = VaultPath::parse(&args.path)?;
        self.with_engine(move |engine| {
            let path = locate(engine, &args.path, typed)?;
            let (info, bytes) = files::read_attachment(engine.vault(), &path)?;
            let mime = info.mime_type.clone();
            let value =
                serde_json::to_value(&info).map_err(|e| ToolError::internal(e.to_string()))?;
            let mut result = CallToolResult::structured(value);
            result.content.push(ContentBlock::resource(
                ResourceContents::blob(STANDARD.encode(&bytes), uri_for(&path))
                    .with_mime_type(mime),
            ));
            Ok(result)
        })
        .await
    }
}
