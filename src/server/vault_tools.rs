//! Tools about the vault as Obsidian sees it: `vault_info`, `get_daily_note`, `read_canvas`,
//! `read_attachment`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use super::{CapvaultServer, resources::uri_for};
use crate::engine::IndexStatus;
use crate::notes::settings::{VaultSettings, load_settings};
use crate::notes::{NoteError, rfc3339, sha256_hex};
use crate::obsidian::{canvas, moment};
use crate::vault::{VaultError, VaultPath, is_note_name};

/// Default cap on attachment size (6 MiB): larger files are refused before reading.
pub const MAX_ATTACHMENT_BYTES: u64 = 6 * 1024 * 1024;

/// Reply of `vault_info`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VaultInfo {
    /// The vault folder's name.
    pub name: String,
    /// Markdown notes (null while the first build runs: see `index`).
    pub notes: Option<usize>,
    /// Canvas files (`.canvas`).
    pub canvases: Option<usize>,
    /// Other files (images, PDFs, audio...).
    pub attachments: Option<usize>,
    /// Distinct tags.
    pub tags: Option<usize>,
    /// The search index and what keeps it fresh: state, documents, build progress, watcher.
    pub index: IndexStatus,
    /// Settings read from the vault's `.obsidian` folder.
    pub settings: VaultSettings,
    /// Whether write tools are enabled (capvault is read-only today).
    pub writes_enabled: bool,
    /// The largest file capvault reads, in bytes.
    pub max_file_size: u64,
    /// When the parsed model was last brought up to date (RFC 3339).
    pub model_updated: Option<String>,
    /// How long the first full parse of the vault took, in milliseconds.
    pub model_build_ms: Option<u64>,
}

/// Arguments of `get_daily_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DailyNoteArgs {
    /// The day, `YYYY-MM-DD`, or `today` (default), `yesterday`, `tomorrow` (the server's local date).
    pub date: Option<String>,
}

/// Reply of `get_daily_note`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DailyNote {
    /// The day, `YYYY-MM-DD`.
    pub date: String,
    /// Where the vault's settings put that day's note.
    pub path: String,
    /// Whether the note exists.
    pub exists: bool,
    /// The note's text, when it exists (at most 40,000 characters; use `read_note` for more).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// True when `content` was cut.
    pub truncated: bool,
    /// SHA-256 of the note, when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Which settings located it: periodic-notes, daily-notes or default.
    pub source: String,
    /// The folder and Moment.js format used.
    pub format: String,
    /// What happened, in a sentence.
    pub message: String,
}

/// Arguments taking one file path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// Path of the file relative to the vault root, e.g. `Boards/Plan.canvas`.
    pub path: String,
}

/// A canvas file node and where it leads.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanvasFile {
    /// The node's id.
    pub node: String,
    /// The `file` field as written.
    pub file: String,
    /// The vault path it opens, or null when missing.
    pub resolved: Option<String>,
}

/// Reply of `read_canvas`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanvasReply {
    /// Vault-relative path.
    pub path: String,
    /// The document, validated against JSON Canvas 1.0.
    pub canvas: canvas::Canvas,
    /// Every file node, resolved against the vault.
    pub files: Vec<CanvasFile>,
    /// SHA-256 of the file.
    pub sha256: String,
}

/// Structured part of `read_attachment`'s reply (the bytes come as an embedded resource).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AttachmentInfo {
    /// Vault-relative path.
    pub path: String,
    /// MIME type guessed from the extension.
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// Last modification time, RFC 3339 (UTC).
    pub modified: String,
}

fn parse_date(arg: Option<&str>) -> Result<chrono::NaiveDate, String> {
    let today = chrono::Local::now().date_naive();
    match arg.map(str::trim).unwrap_or("today") {
        "today" | "" => Ok(today),
        "yesterday" => Ok(today - chrono::Days::new(1)),
        "tomorrow" => Ok(today + chrono::Days::new(1)),
        other => chrono::NaiveDate::parse_from_str(other, "%Y-%m-%d").map_err(|_| {
            format!("invalid date `{other}`: use YYYY-MM-DD, today, yesterday or tomorrow")
        }),
    }
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
    pub async fn vault_info(&self) -> Result<Json<VaultInfo>, String> {
        let engine = Arc::clone(self.engine());
        tokio::task::spawn_blocking(move || {
            let vault = engine.vault();
            // During the first build, answer at once with the build's progress.
            let building = !engine.is_ready() && engine.status().state != "not started";
            let (mut notes, mut canvases, mut attachments) = (0, 0, 0);
            let (mut tags, mut updated, mut build_ms) = (0, None, None);
            if !building {
                let model = engine.model().map_err(|e| e.to_string())?;
                for path in model.files().keys() {
                    if is_note_name(path.file_name()) {
                        notes += 1;
                    } else if path.extension() == Some("canvas") {
                        canvases += 1;
                    } else {
                        attachments += 1;
                    }
                }
                tags = model.tags().len();
                updated = model.refreshed_at().map(rfc3339);
                build_ms = model.build_time().map(|d| d.as_millis() as u64);
            }
            let counted = |n: usize| (!building).then_some(n);
            Ok(VaultInfo {
                name: vault.name().to_owned(),
                notes: counted(notes),
                canvases: counted(canvases),
                attachments: counted(attachments),
                tags: counted(tags),
                index: engine.status(),
                settings: load_settings(vault),
                writes_enabled: false,
                max_file_size: vault.limits().max_read_bytes,
                model_updated: updated,
                model_build_ms: build_ms,
            })
        })
        .await
        .map_err(|_| "internal error: the operation was aborted".to_owned())?
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
    ) -> Result<Json<DailyNote>, String> {
        let date = parse_date(args.date.as_deref())?;
        self.blocking(move |vault| {
            let settings = load_settings(vault);
            let cfg = &settings.daily_notes;
            let path_text =
                moment::daily_note_path(&cfg.folder, &cfg.format, date).map_err(|e| {
                    format!(
                        "cannot build the daily note's name from format `{}`: {e}",
                        cfg.format
                    )
                })?;
            let path = VaultPath::parse(&path_text).map_err(|e| {
                format!(
                    "the daily-note settings give `{path_text}`, which capvault cannot open: {e}"
                )
            })?;
            let day = date.format("%Y-%m-%d").to_string();
            let source = serde_json::to_value(cfg.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let format = if cfg.folder.is_empty() {
                cfg.format.clone()
            } else {
                format!("{}/{}", cfg.folder.trim_matches('/'), cfg.format)
            };
            match vault.read_file(&path) {
                Ok(data) => {
                    let sha256 = sha256_hex(&data.bytes);
                    let text = String::from_utf8(data.bytes)
                        .map_err(|_| VaultError::NotUtf8(path.clone()).to_string())?;
                    let total = text.chars().count();
                    let content: String = text.chars().take(40_000).collect();
                    Ok(DailyNote {
                        message: format!("daily note for {day}"),
                        date: day,
                        path: path.to_string(),
                        exists: true,
                        truncated: total > 40_000,
                        content: Some(content),
                        sha256: Some(sha256),
                        source,
                        format,
                    })
                }
                Err(VaultError::NotFound(_)) => Ok(DailyNote {
                    message: format!("no daily note for {day}: it would be {path}"),
                    date: day,
                    path: path.to_string(),
                    exists: false,
                    content: None,
                    truncated: false,
                    sha256: None,
                    source,
                    format,
                }),
                Err(e) => Err(e.to_string()),
            }
        })
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
    ) -> Result<Json<CanvasReply>, String> {
        let path = VaultPath::parse(&args.path).map_err(|e| format!("invalid path: {e}"))?;
        if path.extension() != Some("canvas") {
            return Err(format!("{path}: not a canvas (a `.canvas` file)"));
        }
        self.with_model(move |vault, model| {
            let data = vault.read_file(&path)?;
            let doc = canvas::parse_canvas(&data.bytes)
                .map_err(|e| NoteError::InvalidArgument(format!("{path}: {e}")))?;
            let files = doc
                .file_nodes()
                .map(|(id, file)| CanvasFile {
                    node: id.to_owned(),
                    file: file.to_owned(),
                    resolved: VaultPath::parse(file)
                        .ok()
                        .filter(|p| model.files().contains_key(p))
                        .map(|p| p.to_string()),
                })
                .collect();
            Ok(CanvasReply {
                path: path.to_string(),
                sha256: sha256_hex(&data.bytes),
                canvas: doc,
                files,
            })
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
    ) -> Result<CallToolResult, String> {
        let path = VaultPath::parse(&args.path).map_err(|e| format!("invalid path: {e}"))?;
        self.blocking(move |vault| {
            let meta = vault.stat_file(&path).map_err(|e| e.to_string())?;
            let limit = MAX_ATTACHMENT_BYTES.min(vault.limits().max_read_bytes);
            if meta.size > limit {
                return Err(format!(
                    "{path}: is {} bytes, over the {limit}-byte limit for attachments; refused",
                    meta.size
                ));
            }
            let data = vault.read_file(&path).map_err(|e| e.to_string())?;
            if data.bytes.len() as u64 > limit {
                return Err(format!(
                    "{path}: grew past the {limit}-byte limit while being read"
                ));
            }
            let mime = mime_guess::from_path(path.file_name())
                .first_raw()
                .unwrap_or("application/octet-stream")
                .to_owned();
            let info = AttachmentInfo {
                path: path.to_string(),
                mime_type: mime.clone(),
                size: data.meta.size,
                sha256: sha256_hex(&data.bytes),
                modified: rfc3339(data.meta.modified),
            };
            let value = serde_json::to_value(&info).map_err(|e| e.to_string())?;
            let mut result = CallToolResult::structured(value);
            result.content.push(ContentBlock::resource(
                ResourceContents::blob(STANDARD.encode(&data.bytes), uri_for(&path))
                    .with_mime_type(mime),
            ));
            Ok(result)
        })
        .await
    }
}
