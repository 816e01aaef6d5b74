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
    self, DeleteResult, EntryName, MoveResult, NoteHistory, NoteName, TextEdit, WriteResult, Writer,
};
use crate::obsidian::canvas_edit::CanvasOp;
use crate::obsidian::periodic::Period;

/// Arguments of `create_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNoteArgs {
    /// Path of the new note (`.md` may be left out).
    pub path: Option<String>,
    pub period: Option<Period>,
    /// As in get_periodic_note.
    pub date: Option<String>,
    /// The text (after the template's).
    #[serde(default, alias = "text")]
    pub content: String,
    pub frontmatter: Option<Map<String, Value>>,
    /// A template's name or path.
    pub template: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `write_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteNoteArgs {
    // Path of the note (the name says it).
    pub path: String,
    /// The note's whole new text.
    #[serde(alias = "text")]
    pub content: String,
    pub if_match: String,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `edit_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditNoteArgs {
    // Path of the note (the name says it).
    pub path: String,
    /// Replacements, 1 to 100, all or none.
    pub edits: Vec<TextEdit>,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `append_to_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendArgs {
    // Path of the note (the name says it).
    pub path: String,
    /// Text to add, on lines of its own.
    #[serde(alias = "text")]
    pub content: String,
    /// At the end of this heading's own text (`Parent/Child` nests).
    pub heading: Option<String>,
    /// At the start instead, after the frontmatter or the heading's line.
    #[serde(default)]
    pub at_start: bool,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `set_task_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStatusArgs {
    pub path: String,
    /// From 1, as `list_tasks` gives it.
    #[schemars(range(min = 1))]
    pub line: usize,
    /// `toggle` (default), `todo`, `done`, `in_progress`, `cancelled` or a symbol.
    pub status: Option<String>,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `update_frontmatter`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrontmatterArgs {
    // Path of the note (the name says it).
    pub path: String,
    #[serde(default)]
    pub set: Map<String, Value>,
    #[serde(default)]
    pub remove: Vec<String>,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `rename_tag`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameTagArgs {
    /// The tag (`#` optional).
    pub from: Option<String>,
    pub to: Option<String>,
    /// A rename's `batch`.
    pub undo: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `tag_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagNoteArgs {
    // Path of the note (the name says it).
    pub path: String,
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `delete_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    pub path: String,
    /// Remove for good, not to `.trash` (needs `--allow-permanent-delete`).
    #[serde(default)]
    pub permanent: bool,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `move_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveArgs {
    /// The note, attachment or folder to move.
    pub from: String,
    /// The new path (must not exist).
    pub to: String,
    /// Rewrite the links to it.
    #[serde(default = "yes")]
    pub update_links: bool,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `note_history`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    /// Path of the note (maybe deleted).
    pub path: String,
    /// Most versions (default 50).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Arguments of `restore_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    // Path of the note (the name says it).
    pub path: String,
    /// The version, from `note_history`.
    pub sha256: String,
    pub if_match: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `append_periodic_note` (and `append_daily_note`, its former name).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendPeriodicArgs {
    // `content`, as the other writing tools name it, is read too (no schema bytes spent).
    #[serde(alias = "content")]
    pub text: String,
    pub period: Option<Period>,
    /// As in get_periodic_note.
    pub date: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `create_canvas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCanvasArgs {
    pub path: String,
    /// `{"nodes": [...], "edges": [...]}` as `read_canvas` returns them.
    pub canvas: Map<String, Value>,
    #[serde(default)]
    pub dry_run: bool,
}

/// Arguments of `edit_canvas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditCanvasArgs {
    pub path: String,
    /// Operations, in order, all or none.
    pub ops: Vec<CanvasOp>,
    pub if_match: Option<String>,
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
        let actor = super::call::ACTOR.try_with(Clone::clone).ok();
        self.with_engine(move |engine| {
            write::confirm::as_actor(actor, || f(&writer, engine)).map_err(ToolError::from)
        })
        .await
        .map(Json)
    }
}

#[tool_router(router = write_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Create a note (never over one), optionally from a template, with frontmatter; or a
    /// periodic note (`period`, `date`) from its template.
    #[tool(annotations(
        title = "Create note",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn create_note(
        &self,
        Parameters(a): Parameters<CreateNoteArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let target = match (a.path, a.period.is_some() || a.date.is_some()) {
            (Some(path), false) => write::CreateTarget::Path(NoteName::parse(&path)?),
            (None, true) => write::CreateTarget::Periodic(write::PeriodArgs {
                period: a.period,
                date: a.date,
            }),
            (Some(_), true) => {
                return Err(ToolError::invalid(
                    "path",
                    "give `path`, or `period` and `date` for a periodic note, not both",
                ));
            }
            (None, false) => {
                return Err(ToolError::invalid(
                    "path",
                    "`path` is required (or `period` and `date` for a periodic note)",
                ));
            }
        };
        let req = write::CreateRequest {
            target,
            content: a.content,
            frontmatter: a.frontmatter,
            template: a.template,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::create_note(w, e, &req)).await
    }

    /// Replace a note's whole text; a note changed since `if_match` is a `conflict`.
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
        let req = write::WriteRequest {
            note: NoteName::parse(&a.path)?,
            content: a.content,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::write_note(w, e, &req)).await
    }

    /// Replace exact pieces of a note's text; each `old_text` must occur exactly once.
    #[tool(annotations(
        title = "Edit note",
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    pub async fn edit_note(
        &self,
        Parameters(a): Parameters<EditNoteArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let req = write::EditRequest {
            note: NoteName::parse(&a.path)?,
            edits: a.edits,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::edit_note(w, e, &req)).await
    }

    /// Add text at the end (or start) of a note or of one heading's own text, as a paragraph of
    /// its own.
    #[tool(annotations(
        title = "Add to note",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn append_to_note(
        &self,
        Parameters(a): Parameters<AppendArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let req = write::AppendRequest {
            note: NoteName::parse(&a.path)?,
            content: a.content,
            heading: a.heading,
            at_start: a.at_start,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::append_to_note(w, e, &req))
            .await
    }

    /// Set a task's checkbox as the Tasks plugin does: done/cancelled dates, a recurring
    /// task's next occurrence.
    #[tool(annotations(
        title = "Set task status",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn set_task_status(
        &self,
        Parameters(a): Parameters<TaskStatusArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let req = write::TaskStatusRequest {
            note: NoteName::parse(&a.path)?,
            line: a.line,
            status: a.status,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        let today = chrono::Local::now().date_naive();
        self.write(move |w, e| write::set_task_status(w, e, &req, today))
            .await
    }

    /// Rename a tag and those under it in every note (merging into an existing one); `undo`
    /// with the returned `batch` reverses it.
    #[tool(annotations(
        title = "Rename tag",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn rename_tag(
        &self,
        Parameters(a): Parameters<RenameTagArgs>,
    ) -> Result<Json<write::TagRename>, ToolError> {
        let req = write::RenameTagRequest::new(
            a.from.as_deref(),
            a.to.as_deref(),
            a.undo.as_deref(),
            a.dry_run,
        )?;
        self.write(move |w, e| write::rename_tag(w, e, &req)).await
    }

    /// Add and remove a note's frontmatter tags.
    #[tool(annotations(
        title = "Tag note",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn tag_note(
        &self,
        Parameters(a): Parameters<TagNoteArgs>,
    ) -> Result<Json<write::TagNoteResult>, ToolError> {
        let req = write::TagNoteRequest::new(
            NoteName::parse(&a.path)?,
            &a.add,
            &a.remove,
            a.if_match,
            a.dry_run,
        )?;
        self.write(move |w, e| write::tag_note(w, e, &req)).await
    }

    /// Set and remove frontmatter properties; everything else stays byte for byte.
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
        let req = write::FrontmatterRequest {
            note: NoteName::parse(&a.path)?,
            set: a.set,
            remove: a.remove,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::update_frontmatter(w, e, &req))
            .await
    }

    /// Delete a note, attachment or folder (to Obsidian's trash); `restore_note` brings a note
    /// back.
    #[tool(annotations(
        title = "Delete note",
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    pub async fn delete_note(
        &self,
        Parameters(a): Parameters<DeleteArgs>,
    ) -> Result<Json<DeleteResult>, ToolError> {
        let req = write::DeleteRequest {
            target: EntryName::parse(&a.path)?,
            permanent: a.permanent,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::delete_note(w, e, &req)).await
    }

    /// Move or rename a note, attachment or folder, rewriting every link to it.
    #[tool(annotations(
        title = "Move note",
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    pub async fn move_note(
        &self,
        Parameters(a): Parameters<MoveArgs>,
    ) -> Result<Json<MoveResult>, ToolError> {
        let req = write::MoveRequest {
            from: EntryName::parse(&a.from)?,
            to: a.to,
            update_links: a.update_links,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::move_note(w, e, &req)).await
    }

    /// A note's earlier versions kept by capvault's writes, newest first.
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
        let req = write::HistoryRequest::new(&a.path, limit)?;
        self.write(move |w, e| write::note_history(w, e, &req))
            .await
    }

    /// Bring back a version from `note_history` (a deleted note too); undoable the same way.
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
        let req = write::RestoreRequest {
            note: NoteName::parse(&a.path)?,
            sha256: a.sha256,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::restore_note(w, e, &req))
            .await
    }

    /// Add `- HH:MM text` to a daily note, `- text` to another period's (today's daily note by
    /// default); created from its template if missing.
    #[tool(annotations(
        title = "Append to periodic note",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn append_periodic_note(
        &self,
        Parameters(a): Parameters<AppendPeriodicArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let at = write::PeriodArgs {
            period: a.period,
            date: a.date,
        };
        let req = write::AppendPeriodicRequest::new(a.text, at, a.dry_run)?;
        self.write(move |w, e| write::append_periodic_note(w, e, &req))
            .await
    }

    /// Create a canvas (JSON Canvas 1.0) from nodes and edges.
    #[tool(annotations(
        title = "Create canvas",
        read_only_hint = false,
        destructive_hint = false,
        open_world_hint = false
    ))]
    pub async fn create_canvas(
        &self,
        Parameters(a): Parameters<CreateCanvasArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let req = write::CanvasRequest {
            path: write::canvas_path(&a.path)?,
            canvas: a.canvas,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::create_canvas(w, e, &req))
            .await
    }

    /// Add, update and remove a canvas's nodes and edges (a node's edges go with it).
    #[tool(annotations(
        title = "Edit canvas",
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    pub async fn edit_canvas(
        &self,
        Parameters(a): Parameters<EditCanvasArgs>,
    ) -> Result<Json<WriteResult>, ToolError> {
        let req = write::EditCanvasRequest {
            path: write::canvas_path(&a.path)?,
            ops: a.ops,
            if_match: a.if_match,
            dry_run: a.dry_run,
        };
        self.write(move |w, e| write::edit_canvas(w, e, &req)).await
    }
}
