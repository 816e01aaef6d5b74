//! Tools about the vault as Obsidian sees it: `vault_info`, `changes_since`, `get_periodic_note`,
//! `read_canvas`, `read_attachment`. The replies are built in [`crate::notes::files`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError, resources::uri_for};
use crate::engine::changes::ChangeKind;
use crate::notes::changes::{self, ChangesReply, ChangesRequest};
use crate::notes::files::{
    self, AttachmentBody, AttachmentFormat, AttachmentInfo, AttachmentRequest, CanvasReply,
    VaultInfo,
};
use crate::notes::locate::Named;
use crate::notes::periodic::{self, PeriodicNote};
use crate::obsidian::periodic::Period;
use crate::vault::VaultPath;

/// Arguments of `get_periodic_note` (and `get_daily_note`, its former name).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeriodicNoteArgs {
    /// Default: as `date` names it, else day.
    pub period: Option<Period>,
    /// today (default), yesterday, tomorrow, this/last/next week|month|quarter|year,
    /// YYYY-MM-DD, YYYY-Www, YYYY-Qn, YYYY-MM, YYYY.
    pub date: Option<String>,
    /// End of a range: list its notes.
    pub to: Option<String>,
}

/// Arguments taking one file path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// Vault-relative, or a file name.
    pub path: String,
}

/// Arguments of `read_attachment`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentArgs {
    /// Vault-relative, or a file name.
    pub path: String,
    /// `original`: the bytes, even of an image.
    #[serde(default)]
    pub format: AttachmentFormat,
    /// An image's longest side (default 1568).
    #[schemars(range(min = 16, max = crate::media::image::MAX_MAX_SIDE))]
    pub max_pixels: Option<u32>,
    /// A PDF's pages: `3`, `2-5`, `1,4-6`.
    pub pages: Option<String>,
}

/// Arguments of `changes_since`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangesArgs {
    pub cursor: Option<String>,
    /// Or: RFC 3339, a date (YYYY-MM-DD, yesterday, this week), an age (24h, 7d).
    pub since: Option<String>,
    pub folder: Option<String>,
    pub tag: Option<String>,
    pub kinds: Option<Vec<ChangeKind>>,
    /// Notes per page (default 50).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
    pub diffs: Option<bool>,
}

#[tool_router(router = vault_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Notes created, changed (with a diff), moved or deleted since `cursor` (from vault_info or
    /// a reply) or `since`, oldest first.
    #[tool(annotations(
        title = "Changes since",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn changes_since(
        &self,
        Parameters(args): Parameters<ChangesArgs>,
    ) -> Result<Json<ChangesReply>, ToolError> {
        let req = ChangesRequest {
            cursor: args.cursor,
            since: args.since,
            folder: match args.folder.as_deref() {
                Some(f) => Some(VaultPath::parse_folder(f)?),
                None => None,
            },
            tag: args.tag,
            // At most the four kinds, however long the list sent.
            kinds: {
                let mut k = args.kinds.unwrap_or_default();
                k.sort_by_key(|k| *k as u8);
                k.dedup();
                k
            },
            limit: args.limit.map(|l| l as usize),
            no_diffs: args.diffs == Some(false),
        };
        self.with_engine(move |engine| Ok(changes::changes_since(engine, &req)?))
            .await
            .map(Json)
    }

    /// Counts of notes, files and tags, the Obsidian settings honoured, index and embedding
    /// state, whether writes are on.
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

    /// A daily, weekly, monthly, quarterly or yearly note where the vault's settings put it;
    /// with `to`, a range's notes.
    #[tool(annotations(
        title = "Periodic note",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_periodic_note(
        &self,
        Parameters(args): Parameters<PeriodicNoteArgs>,
    ) -> Result<Json<PeriodicNote>, ToolError> {
        self.with_engine(move |engine| {
            Ok(periodic::periodic_note(
                engine,
                args.period,
                args.date.as_deref(),
                args.to.as_deref(),
            )?)
        })
        .await
        .map(Json)
    }

    /// A canvas (JSON Canvas 1.0): its nodes and edges, issues, and file nodes' vault paths.
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
        let name = Named::parse(args.path)?;
        self.note(move |engine| files::read_canvas_named(engine, &name))
            .await
    }

    /// An attachment: an image as a picture (scaled to fit), SVG and PDF as text, else its
    /// bytes; with its `sha256`.
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
        Parameters(args): Parameters<AttachmentArgs>,
    ) -> Result<CallToolResult, ToolError> {
        let req = AttachmentRequest {
            name: Named::parse(args.path)?,
            format: args.format,
            max_side: args.max_pixels,
            pages: args.pages,
        };
        self.with_engine(move |engine| {
            let (path, info, body) = files::read_attachment_named(engine, &req)?;
            let mime = info.mime_type.clone();
            let value =
                serde_json::to_value(&info).map_err(|e| ToolError::internal(e.to_string()))?;
            let mut result = CallToolResult::structured(value);
            result.content.push(match body {
                AttachmentBody::Image(bytes, mime) => {
                    ContentBlock::image(STANDARD.encode(&bytes), mime)
                }
                AttachmentBody::Text(text) => ContentBlock::text(text),
                AttachmentBody::Bytes(bytes) => ContentBlock::resource(
                    ResourceContents::blob(STANDARD.encode(&bytes), uri_for(&path))
                        .with_mime_type(mime),
                ),
            });
            Ok(result)
        })
        .await
    }
}
