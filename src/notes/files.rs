//! The vault as Obsidian sees it, beyond single notes: `vault_info`, daily notes, canvases,
//! attachments. Replies are assembled here; the tool handlers only parse and call.

use schemars::JsonSchema;
use serde::Serialize;

use super::settings::{VaultSettings, load_settings};
use super::view::{ViewRequest, view_note};
use super::{NoteError, rfc3339, sha256_hex};
use crate::engine::{Engine, IndexStatus, Phase};
use crate::model::Model;
use crate::obsidian::{canvas, moment};
use crate::vault::{Vault, VaultError, VaultPath};

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
    /// Distinct tags, parents of nested tags included (`a/b` counts `a` and `a/b`): the
    /// `total` of `list_tags`.
    pub tags: Option<usize>,
    /// The search index and what keeps it fresh: state, documents, build progress, watcher.
    pub index: IndexStatus,
    /// Settings read from the vault's `.obsidian` folder.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub settings: VaultSettings,
    /// Whether the write tools are enabled (the server runs with `--write`).
    pub writes_enabled: bool,
    /// The folders writes are confined to (`--write-scope`); empty: the whole vault.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write_scopes: Vec<String>,
    /// The largest file capvault reads, in bytes.
    pub max_file_size: u64,
    /// When the parsed model was last brought up to date (RFC 3339).
    pub model_updated: Option<String>,
    /// How long the first full parse of the vault took, in milliseconds.
    pub model_build_ms: Option<u64>,
    /// What the Landlock sandbox enforces: state, abi, filesystem, network.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub sandbox: Option<crate::vault::sandbox::Report>,
    /// The embedding model (name, revision, dimensions) and how far embedding is, or with
    /// `--semantic` and no model, `state: unavailable`, why and the ways out; absent without
    /// `--embedding-model` or `--semantic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Embedding>,
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
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
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

/// `vault_info`'s `embedding`: the model loaded, or why the one asked for is missing.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Embedding {
    /// A model is loaded.
    Loaded(crate::engine::EmbeddingStatus),
    /// `--semantic` was given and no model could be had.
    Unavailable {
        /// `unavailable`.
        state: &'static str,
        /// What went wrong.
        reason: String,
        /// The ways out.
        fix: &'static str,
    },
}

/// The facts `vault_info` reports. Counts are null while the first build runs.
pub fn vault_info(engine: &Engine, writes_enabled: bool) -> Result<VaultInfo, NoteError> {
    let vault = engine.vault();
    // During the first build, answer at once with the build's progress.
    let building = !engine.is_ready() && engine.phase() != Phase::NotStarted;
    let mut info = VaultInfo {
        name: vault.name().to_owned(),
        notes: None,
        canvases: None,
        attachments: None,
        tags: None,
        index: engine.status(),
        settings: load_settings(vault),
        writes_enabled,
        write_scopes: vault.write_scopes().iter().map(|p| p.to_string()).collect(),
        max_file_size: vault.limits().max_read_bytes,
        model_updated: None,
        model_build_ms: None,
        sandbox: crate::vault::sandbox::report().cloned(),
        embedding: match (engine.embedding_status(), engine.embedding_unavailable()) {
            (Some(status), _) => Some(Embedding::Loaded(status)),
            (None, Some(why)) => Some(Embedding::Unavailable {
                state: "unavailable",
                reason: why.to_owned(),
                fix: super::search::MODEL_WAYS_OUT,
            }),
            (None, None) => None,
        },
    };
    if !building {
        let model = engine.model()?;
        let counts = model.counts();
        info.notes = Some(counts.notes);
        info.canvases = Some(counts.canvases);
        info.attachments = Some(counts.attachments + counts.bases);
        info.tags = Some(super::graph::tag_total(&model));
        info.model_updated = model.refreshed_at().map(rfc3339);
        info.model_build_ms = model.build_time().map(|d| d.as_millis() as u64);
    }
    Ok(info)
}

/// The day `arg` names: `YYYY-MM-DD`, `today` (default), `yesterday` or `tomorrow`, in the
/// server's local time.
pub fn parse_date(arg: Option<&str>) -> Result<chrono::NaiveDate, NoteError> {
    let today = chrono::Local::now().date_naive();
    match arg.map(str::trim).unwrap_or("today") {
        "today" | "" => Ok(today),
        "yesterday" => Ok(today - chrono::Days::new(1)),
        "tomorrow" => Ok(today + chrono::Days::new(1)),
        other => chrono::NaiveDate::parse_from_str(other, "%Y-%m-%d").map_err(|_| {
            NoteError::InvalidArgument(format!(
                "`date` must be YYYY-MM-DD, today, yesterday or tomorrow (got `{other}`)"
            ))
        }),
    }
}

/// The daily note of `date`, where the vault's settings put it, read as `read_note` reads a
/// note (the first page of its text).
pub fn daily_note(vault: &Vault, date: chrono::NaiveDate) -> Result<DailyNote, NoteError> {
    let (path, settings) = daily_note_path(vault, date)?;
    let cfg = &settings.daily_notes;
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
    let mut reply = DailyNote {
        message: format!("no daily note for {day}: it would be {path}"),
        date: day,
        path: path.to_string(),
        exists: false,
        content: None,
        truncated: false,
        sha256: None,
        source,
        format,
    };
    match view_note(vault, &path, &ViewRequest::default()) {
        Ok(view) => {
            reply.message = format!("daily note for {}", reply.date);
            reply.exists = true;
            reply.truncated = view.next_offset.is_some();
            reply.content = view.content;
            reply.sha256 = Some(view.sha256);
            Ok(reply)
        }
        Err(NoteError::Vault(VaultError::NotFound(_))) => Ok(reply),
        Err(e) => Err(e),
    }
}

/// Where the vault's settings put the daily note of `date`, with the settings read.
pub fn daily_note_path(
    vault: &Vault,
    date: chrono::NaiveDate,
) -> Result<(VaultPath, VaultSettings), NoteError> {
    let settings = load_settings(vault);
    let cfg = &settings.daily_notes;
    let path_text = moment::daily_note_path(&cfg.folder, &cfg.format, date).map_err(|e| {
        NoteError::InvalidArgument(format!(
            "cannot build the daily note's name from format `{}`: {e}",
            cfg.format
        ))
    })?;
    let path = VaultPath::parse(&path_text).map_err(|e| {
        NoteError::InvalidArgument(format!(
            "the daily-note settings give `{path_text}`, which capvault cannot open: {e}"
        ))
    })?;
    Ok((path, settings))
}

/// `read_canvas`: the canvas `name` means (`Board` finds `Board.canvas`), as [`read_canvas`]
/// reads it.
pub fn read_canvas_named(
    engine: &crate::engine::Engine,
    name: &super::locate::Named,
) -> Result<CanvasReply, NoteError> {
    let path = super::locate::locate_kind(engine, &name.input, name.path.clone(), "canvas")?;
    let model = engine.model()?;
    read_canvas(engine.vault(), &model, &path)
}

/// `read_attachment`: the file `name` means (as [`super::locate::locate`] finds it), read as
/// [`read_attachment`] reads it; the path found comes back with the reply.
pub fn read_attachment_named(
    engine: &crate::engine::Engine,
    name: &super::locate::Named,
) -> Result<(VaultPath, AttachmentInfo, Vec<u8>), NoteError> {
    let path = super::locate::locate(engine, &name.input, name.path.clone())?;
    let (info, bytes) = read_attachment(engine.vault(), &path)?;
    Ok((path, info, bytes))
}

/// The canvas at `path`, validated, with every file node resolved against the model.
pub fn read_canvas(
    vault: &Vault,
    model: &Model,
    path: &VaultPath,
) -> Result<CanvasReply, NoteError> {
    if path.extension() != Some("canvas") {
        return Err(NoteError::InvalidArgument(format!(
            "{path}: not a canvas (a `.canvas` file)"
        )));
    }
    let data = vault.read_file(path)?;
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
}

/// An attachment's bytes and facts; files over [`MAX_ATTACHMENT_BYTES`] (or the vault's read
/// cap) are refused before a byte is read, never truncated.
pub fn read_attachment(
    vault: &Vault,
    path: &VaultPath,
) -> Result<(AttachmentInfo, Vec<u8>), NoteError> {
    let meta = vault.stat_file(path)?;
    let limit = MAX_ATTACHMENT_BYTES.min(vault.limits().max_read_bytes);
    if meta.size > limit {
        return Err(NoteError::TooLarge(format!(
            "{path}: is {} bytes, over the {limit}-byte limit for attachments; refused",
            meta.size
        )));
    }
    let data = vault.read_file(path)?;
    if data.bytes.len() as u64 > limit {
        return Err(NoteError::TooLarge(format!(
            "{path}: grew past the {limit}-byte limit while being read"
        )));
    }
    let mime = mime_guess::from_path(path.file_name())
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_owned();
    let info = AttachmentInfo {
        path: path.to_string(),
        mime_type: mime,
        size: data.meta.size,
        sha256: sha256_hex(&data.bytes),
        modified: rfc3339(data.meta.modified),
    };
    Ok((info, data.bytes))
}
