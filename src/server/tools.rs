//! The tools. Names are fixed: clients and docs depend on them.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::NoteError;
use crate::notes::filter::NoteFilter;
use crate::notes::list::{
    self, FolderPage, FoldersRequest, KindFilter, ListPage, ListQuery, ListRequest,
};
use crate::notes::search::{self, Mode, SearchRequest, SearchResults, SearchScope};
use crate::notes::view::{self, Format, NoteView, ReadRequest, ViewRequest};
use crate::vault::VaultError;
use crate::vault::VaultPath;

/// Arguments of `read_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNoteArgs {
    /// Vault-relative path, e.g. `Projects/Plan.md`, or a note name.
    pub path: String,
    /// `outline`: headings, line numbers; `metadata`: aliases, tags, links, headings, block ids.
    #[serde(default)]
    pub format: Format,
    /// Only the section under this heading.
    pub section: Option<String>,
    /// Only these lines, 1-based: `"10-20"`, `"10-"` or `"10"`.
    pub lines: Option<String>,
    /// A `next_offset`.
    pub offset: Option<u64>,
    /// Most characters of text (default 40000).
    #[schemars(range(min = 1, max = crate::notes::view::MAX_MAX_CHARS))]
    pub max_chars: Option<u32>,
    /// Also evaluate Dataview inline queries (`= expr`) into `inline`.
    #[serde(default)]
    pub evaluate_inline: bool,
    /// Also send the images the text embeds, as pictures (at most 4).
    #[serde(default)]
    pub include_images: bool,
}

/// Arguments of `list_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNotesArgs {
    /// Default: the whole vault.
    #[serde(default)]
    pub folder: String,
    /// Include subfolders.
    #[serde(default = "yes")]
    pub recursive: bool,
    /// Notes per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::list::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
    /// This tag or one under it.
    pub tag: Option<String>,
    /// Notes whose frontmatter has this key.
    pub property: Option<String>,
    /// With `property`: equal to this (any case, any list item).
    pub value: Option<String>,
    /// Paths matching this glob (`*` within a folder, `**` across).
    pub glob: Option<String>,
    /// Which files (`any`: every file).
    #[serde(default)]
    pub kind: KindFilter,
    // As in search_notes.
    pub trust: Option<crate::obsidian::provenance::Trust>,
}

/// Arguments of `list_folders`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFoldersArgs {
    /// Default: the vault root.
    #[serde(default)]
    pub folder: String,
    /// Levels down (default 2).
    #[schemars(range(min = 1, max = crate::notes::list::MAX_FOLDER_DEPTH))]
    pub depth: Option<u32>,
    /// Folders per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::list::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `search_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchNotesArgs {
    /// Ranked: words (all must match), `"phrases"`, `-word` to exclude. Exact: a piece of
    /// text. Regex: a Rust regex.
    pub query: String,
    /// `exact`, `regex`: every matching line; `semantic`, `hybrid` need a model (then
    /// `hybrid` is the default, else `ranked`).
    pub mode: Option<Mode>,
    /// Most hits (default 20).
    #[schemars(range(min = 1, max = crate::notes::search::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// Match case exactly (exact and regex).
    #[serde(default)]
    pub case_sensitive: bool,
    /// Only notes under this folder.
    pub folder: Option<String>,
    /// This tag or one under it.
    pub tag: Option<String>,
    /// Notes whose frontmatter has this key.
    pub property: Option<String>,
    /// With `property`: equal to this (any case, any list item).
    pub value: Option<String>,
    /// Modified at or after: `2026-11-30` or `2026-11-30T08:00:00Z`.
    pub modified_after: Option<String>,
    /// Modified before this date or time.
    pub modified_before: Option<String>,
    /// No clippings; `own`: no shared either.
    pub trust: Option<crate::obsidian::provenance::Trust>,
    /// Exact: the first hits at once, `total` estimated.
    #[serde(default)]
    pub estimate: bool,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

fn yes() -> bool {
    true
}

#[tool_router(vis = "pub(super)")]
impl CapvaultServer {
    /// One note's text (whole, a section or lines; long notes in pages), outline, frontmatter
    /// or metadata, with its size, time and `sha256` version.
    #[tool(
        annotations(
            title = "Read note",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ),
        output_schema = rmcp::handler::server::tool::schema_for_output::<NoteView>()
    )]
    pub async fn read_note(
        &self,
        Parameters(args): Parameters<ReadNoteArgs>,
    ) -> Result<rmcp::model::CallToolResult, ToolError> {
        let view = ViewRequest {
            format: args.format,
            section: args.section,
            lines: args.lines,
            offset: args.offset,
            max_chars: args.max_chars,
            evaluate_inline: args.evaluate_inline,
            include_images: args.include_images,
            hidden_text: Default::default(),
        };
        let req = ReadRequest::new(args.path, view).map_err(read_hint)?;
        let mut view = self
            .with_engine(move |engine| view::read(engine, &req).map_err(read_hint))
            .await?;
        let images = std::mem::take(&mut view.image_content);
        let value = serde_json::to_value(&view).map_err(|e| ToolError::internal(e.to_string()))?;
        let mut result = rmcp::model::CallToolResult::structured(value);
        for image in images {
            result.content.push(rmcp::model::ContentBlock::image(
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &image.bytes),
                image.mime,
            ));
        }
        Ok(result)
    }

    /// Notes (Markdown files) in the vault or a folder, newest first, paged.
    #[tool(annotations(
        title = "List notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn list_notes(
        &self,
        Parameters(args): Parameters<ListNotesArgs>,
    ) -> Result<Json<ListPage>, ToolError> {
        let folder = VaultPath::parse_folder(&args.folder)?;
        let filter = NoteFilter::new(args.tag, args.property, args.value, args.glob)?;
        let query = ListQuery {
            folder,
            recursive: args.recursive,
            limit: args.limit,
            cursor: args.cursor,
            filter_id: 0,
            kind: args.kind,
        };
        let req = ListRequest::new(query, filter).with_trust(args.trust);
        self.note(move |engine| list::list(engine, &req)).await
    }

    /// The folder tree, with the notes and files in each folder and below.
    #[tool(annotations(
        title = "List folders",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn list_folders(
        &self,
        Parameters(args): Parameters<ListFoldersArgs>,
    ) -> Result<Json<FolderPage>, ToolError> {
        let req = FoldersRequest::new(&args.folder, args.depth, args.limit, args.cursor)?;
        self.note(move |engine| list::folders(engine, &req)).await
    }

    /// Search notes by words (ranked by relevance, one hit per note at its best line), exact
    /// text or a regex.
    #[tool(annotations(
        title = "Search notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn search_notes(
        &self,
        Parameters(args): Parameters<SearchNotesArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<SearchResults>, ToolError> {
        let scope = SearchScope {
            folder: args.folder,
            tag: args.tag,
            property: args.property,
            value: args.value,
            modified_after: args.modified_after,
            modified_before: args.modified_before,
            trust: args.trust,
        };
        let req = SearchRequest::new(
            args.query,
            args.mode,
            args.limit,
            args.case_sensitive,
            scope,
            args.cursor,
        )?
        .estimating(args.estimate);
        let engine = Arc::clone(self.engine());
        // While the index builds, a client that asked for progress hears how the build goes.
        let progress = match context.meta.get_progress_token() {
            Some(token) if req.waits_for_build(&engine) => {
                // The first report goes out before the scan starts (a fast scan would otherwise
                // finish before a spawned reporter ever ran); then every 200 ms.
                let peer = context.peer.clone();
                if notify_build_progress(&engine, &peer, &token).await {
                    Some(tokio::spawn(report_build_progress(
                        Arc::clone(&engine),
                        peer,
                        token,
                    )))
                } else {
                    None
                }
            }
            _ => None,
        };
        let result = self.note(move |engine| search::run(engine, &req)).await;
        if let Some(task) = progress {
            task.abort();
        }
        result
    }
}

/// The refusal of a folder given to `read_note`, pointing to `list_notes`.
fn folder_hint(folder: &VaultPath) -> ToolError {
    ToolError::invalid(
        "path",
        format!(
            "{folder}: is a folder, not a note; list its notes with `list_notes` (`folder`: \"{folder}\")"
        ),
    )
}

/// `read_note`'s errors with the tool to use instead: `list_notes` for a folder,
/// `read_attachment` for a file that is not text.
fn read_hint(e: NoteError) -> ToolError {
    match e {
        NoteError::Vault(VaultError::IsAFolder(folder)) => folder_hint(&folder),
        NoteError::Vault(VaultError::NotUtf8(path)) => {
            let mut t = ToolError::from(VaultError::NotUtf8(path));
            t.message.push_str("; `read_attachment` returns its bytes");
            t
        }
        other => other.into(),
    }
}

/// Sends the build's progress to `peer` every 200 ms until the build is done (or the task is
/// aborted when the reply is ready).
async fn report_build_progress(
    engine: Arc<crate::engine::Engine>,
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
) {
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if !notify_build_progress(&engine, &peer, &token).await {
            return;
        }
    }
}

/// Sends the build's progress once; false when the peer is gone or the build is done.
async fn notify_build_progress(
    engine: &crate::engine::Engine,
    peer: &rmcp::Peer<RoleServer>,
    token: &rmcp::model::ProgressToken,
) -> bool {
    let status = engine.status();
    let param = ProgressNotificationParam::new(token.clone(), status.progress.done as f64)
        .with_total(status.progress.total.max(status.progress.done) as f64)
        .with_message(format!("search index {}", status.state));
    peer.notify_progress(param).await.is_ok() && !engine.is_ready()
}
