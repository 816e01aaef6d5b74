//! The write tools, listed only when the server runs with `--write`. The operations are in
//! [`crate::notes::write`]; these handlers parse the arguments and call them.

use std::sync::Arc;

use rmcp::handler::server::wrapper::Json;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{CapvaultServer, Code, Parameters, ToolError};
use crate::notes::write::{
    self, DeleteResult, MoveResult, NoteHistory, TextEdit, WriteResult, Writer,
};
use crate::obsidian::canvas_edit::CanvasOp;

/// Arguments of `create_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNoteArgs {
    /// Path of the new note, e.g. `Projects/Plan.md` (`.md` is added when left out). Missing
    /// folders are created.
    pub path: String,
    /// The note's text (after the template, when one is given).
    #[serde(default)]
    pub content: String,
    /// Properties to put in the note's frontmatter.
    pub frontmatter: Option<Map<String, Value>>,
    /// A template to start from: a name in the vault's templates folder, or a path.
    pub template: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `write_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteNoteArgs {
    /// Path of the existing note.
    pub path: String,
    /// The note's whole new text.
    pub content: String,
    /// The note's `sha256` from `read_note`: the write fails with `conflict` if it changed.
    pub if_match: String,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `edit_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditNoteArgs {
    /// Path of the note.
    pub path: String,
    /// Replacements, 1 to 100: each `old_text` must occur exactly once; all apply or none.
    pub edits: Vec<TextEdit>,
    /// The note's `sha256` from `read_note`; the edit fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `append_to_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendArgs {
    /// Path of the note.
    pub path: String,
    /// Text to add, on lines of its own.
    pub content: String,
    /// Add at the end of this heading's own text (`Parent/Child` for a nested one) instead of
    /// the end of the note.
    pub heading: Option<String>,
    /// The note's `sha256` from `read_note`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `prepend_to_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrependArgs {
    /// Path of the note.
    pub path: String,
    /// Text to add at the start of the body (after the frontmatter).
    pub content: String,
    /// The note's `sha256` from `read_note`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `update_frontmatter`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrontmatterArgs {
    /// Path of the note.
    pub path: String,
    /// Properties to set (added when missing, replaced when present).
    #[serde(default)]
    pub set: Map<String, Value>,
    /// Property names to remove.
    #[serde(default)]
    pub remove: Vec<String>,
    /// The note's `sha256` from `read_note`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `delete_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// Path of the note, attachment or folder.
    pub path: String,
    /// Remove for good instead of moving to the vault's `.trash` (needs the server's
    /// `--allow-permanent-delete`).
    #[serde(default)]
    pub permanent: bool,
    /// For a file: its `sha256` from `read_note`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; say what would happen.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `move_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveArgs {
    /// The note, attachment or folder to move.
    pub from: String,
    /// Its new path (must not exist; a note keeps `.md` when left out).
    pub to: String,
    /// Rewrite every link that resolved to what moved, in every note and canvas (default true).
    #[serde(default = "yes")]
    pub update_links: bool,
    /// Change nothing; list the files and return the diffs of the link rewrites.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `note_history`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// Path of the note (it may have been deleted or moved away).
    pub path: String,
    /// Most versions listed, 1 to 200 (default 50).
    pub limit: Option<u32>,
}

/// Arguments of `restore_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    /// Path of the note to restore (recreated if it was deleted).
    pub path: String,
    /// The version to bring back, from `note_history`.
    pub sha256: String,
    /// The note's current `sha256`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `append_daily_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendDailyArgs {
    /// The entry: added as `- HH:MM text` (local time).
    pub text: String,
    /// The day, `YYYY-MM-DD`, `today` (default), `yesterday` or `tomorrow`.
    pub date: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `create_daily_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDailyArgs {
    /// The day, `YYYY-MM-DD`, `today` (default), `yesterday` or `tomorrow`.
    pub date: Option<String>,
    /// Text to add after the daily template.
    pub content: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `create_canvas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCanvasArgs {
    /// Path of the new canvas (`.canvas` is added when left out).
    pub path: String,
    /// The canvas: `{"nodes": [...], "edges": [...]}` with JSON Canvas 1.0 fields, as
    /// `read_canvas` returns them (ids are made up where missing).
    pub canvas: Map<String, Value>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `edit_canvas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditCanvasArgs {
    /// Path of the canvas.
    pub path: String,
    /// Operations, applied in order, all or none: `add_node`, `update_node`, `remove_node`
    /// (its edges go too), `add_edge`, `update_edge`, `remove_edge`.
    pub ops: Vec<CanvasOp>,
    /// The canvas's `sha256`; fails with `conflict` if it changed.
    pub if_match: Option<String>,
    /// Change nothing; return the diff.
    #[serde(default)]
    pub dry_run: bool,
}

fn yes() -> bool {
    true
}

impl CapvaultServer {
    /// The writer, or `refused` when the server is read-only (a write tool is only listed with
    /// `--write`; this guards a call by a name taken from elsewhere).
    fn writer(&self) -> Result<Arc<Writer>, ToolError> {
        self.writer.clone().ok_or_else(|| {
            ToolError::new(
                Code::Refused,
                "this server is read-only (start it with --write to allow changes)",
            )
        })
    }

    /// Runs a write on the blocking pool.
    async fn write<T, F>(&self, f: F) -> Result<Json<T>, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(&Writer, &crate::engine::Engine) -> Result<T, crate::notes::NoteError>
            + Send
            + 'static,
    {
        let writer = self.writer()?;
        self.with_engine(move |engine| f(&writer, engine).map_err(ToolError::from))
            .await
            .map(Json)
    }
}

#[tool_router(router = write_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Create a new note (fails if it exists), optionally from a template and with frontmatter
    /// properties. Missing folders are created. Returns the new `sha256`.
    #[tool(annotations(
        title = "Create note",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn create_note(
        &self,
        Parameters(a): Parameters<CreateNoteArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::create_note(
                w,
                e,
                &a.path,
                &a.content,
                a.frontmatter.as_ref(),
                a.template.as_deref(),
                a.dry_run,
            )
        })
        .await
    }

    /// Replace an existing note's whole text. `if_match` (the `sha256` from `read_note`) is
    /// required: a note changed since is a `conflict`, never overwritten. The old version is
    /// kept (`note_history`).
    #[tool(annotations(
        title = "Write note",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn write_note(
        &self,
        Parameters(a): Parameters<WriteNoteArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| write::write_note(w, e, &a.path, &a.content, &a.if_match, a.dry_run))
            .await
    }

    /// Replace exact pieces of a note's text: each `old_text` must occur exactly once (not
    /// found or found several times is an error with the count); all edits apply or none.
    #[tool(annotations(
        title = "Edit note",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn edit_note(
        &self,
        Parameters(a): Parameters<EditNoteArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::edit_note(w, e, &a.path, &a.edits, a.if_match.as_deref(), a.dry_run)
        })
        .await
    }

    /// Add text at the end of a note, or of a heading's own text, before its subheadings
    /// (`heading`; missing or repeated is an error). A paragraph before it gets a blank line.
    #[tool(annotations(
        title = "Append to note",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn append_to_note(
        &self,
        Parameters(a): Parameters<AppendArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::append_to_note(
                w,
                e,
                &a.path,
                &a.content,
                a.heading.as_deref(),
                a.if_match.as_deref(),
                a.dry_run,
            )
        })
        .await
    }

    /// Add text at the start of a note's body, after its frontmatter.
    #[tool(annotations(
        title = "Prepend to note",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn prepend_to_note(
        &self,
        Parameters(a): Parameters<PrependArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::prepend_to_note(w, e, &a.path, &a.content, a.if_match.as_deref(), a.dry_run)
        })
        .await
    }

    /// Set and remove frontmatter properties. The body and every other key, comment and blank
    /// line stay byte for byte; a note without frontmatter gets one; malformed frontmatter is
    /// refused.
    #[tool(annotations(
        title = "Update frontmatter",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn update_frontmatter(
        &self,
        Parameters(a): Parameters<FrontmatterArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::update_frontmatter(
                w,
                e,
                &a.path,
                &a.set,
                &a.remove,
                a.if_match.as_deref(),
                a.dry_run,
            )
        })
        .await
    }

    /// Delete a note, attachment or folder: into the vault's `.trash` (as Obsidian's trash
    /// setting says), or for good with `permanent` when the server allows it. The deleted
    /// version stays in `note_history` (`restore_note` brings it back).
    #[tool(annotations(
        title = "Delete note",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn delete_note(
        &self,
        Parameters(a): Parameters<DeleteArgs>,
    ) -> Result<Json<DeleteResult>, ToolError> {
        self.write(move |w, e| {
            write::delete_note(w, e, &a.path, a.permanent, a.if_match.as_deref(), a.dry_run)
        })
        .await
    }

    /// Move or rename a note, attachment or folder (never over an existing one), rewriting
    /// every link to it in every note and canvas so each still resolves to it, in the vault's
    /// link format. Returns the files changed.
    #[tool(annotations(
        title = "Move note",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn move_note(
        &self,
        Parameters(a): Parameters<MoveArgs>,
    ) -> Result<Json<MoveResult>, ToolError> {
        self.write(move |w, e| write::move_note(w, e, &a.from, &a.to, a.update_links, a.dry_run))
            .await
    }

    /// The earlier versions of a note kept by capvault's writes (time, tool, sha256, size),
    /// newest first.
    #[tool(annotations(
        title = "Note history",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn note_history(
        &self,
        Parameters(a): Parameters<HistoryArgs>,
    ) -> Result<Json<NoteHistory>, ToolError> {
        let limit = crate::notes::check_limit(a.limit, 50, 200)?;
        self.write(move |w, e| write::note_history(w, e, &a.path, limit))
            .await
    }

    /// Bring back an earlier version of a note (from `note_history`), recreating it if it was
    /// deleted. The version it replaces is kept, so a restore can be undone the same way.
    #[tool(annotations(
        title = "Restore note",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn restore_note(
        &self,
        Parameters(a): Parameters<RestoreArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::restore_note(w, e, &a.path, &a.sha256, a.if_match.as_deref(), a.dry_run)
        })
        .await
    }

    /// Add `- HH:MM text` to a day's daily note (today by default), found where the vault's
    /// settings put it, creating it from the daily template when missing.
    #[tool(annotations(
        title = "Append to daily note",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn append_daily_note(
        &self,
        Parameters(a): Parameters<AppendDailyArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::append_daily_note(w, e, &a.text, a.date.as_deref(), a.dry_run)
        })
        .await
    }

    /// Create a day's daily note (today by default) from the vault's daily template, where
    /// `get_daily_note` finds it. Fails if it exists.
    #[tool(annotations(
        title = "Create daily note",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn create_daily_note(
        &self,
        Parameters(a): Parameters<CreateDailyArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::create_daily_note(w, e, a.date.as_deref(), a.content.as_deref(), a.dry_run)
        })
        .await
    }

    /// Create a canvas (fails if it exists) from nodes and edges in JSON Canvas 1.0 form,
    /// validated before it is written.
    #[tool(annotations(
        title = "Create canvas",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn create_canvas(
        &self,
        Parameters(a): Parameters<CreateCanvasArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| write::create_canvas(w, e, &a.path, &a.canvas, a.dry_run))
            .await
    }

    /// Change a canvas: add, update and remove nodes and edges (a removed node's edges go
    /// too); unknown fields are kept and the result is validated before it is written.
    #[tool(annotations(
        title = "Edit canvas",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    pub async fn edit_canvas(
        &self,
        Parameters(a): Parameters<EditCanvasArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        self.write(move |w, e| {
            write::edit_canvas(w, e, &a.path, &a.ops, a.if_match.as_deref(), a.dry_run)
        })
        .await
    }
}
