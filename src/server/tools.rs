//! The tools. Names are fixed: clients and docs depend on them.

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::CapvaultServer;
use crate::notes::list::{ListPage, ListQuery, list_notes};
use crate::notes::search::{SearchQuery, SearchResults, search_exact};
use crate::notes::{NoteText, read_note};
use crate::vault::VaultPath;

/// Arguments of `read_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNoteArgs {
    /// Path of the note relative to the vault root, with `/` separators, e.g. `Projects/Plan.md`.
    pub path: String,
}

/// Arguments of `list_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNotesArgs {
    /// Folder to list, relative to the vault root; empty (the default) lists the whole vault.
    #[serde(default)]
    pub folder: String,
    /// Include notes in subfolders (default true).
    #[serde(default = "yes")]
    pub recursive: bool,
    /// Maximum notes per page, 1 to 1000 (default 100).
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page, to get the next one.
    pub cursor: Option<String>,
}

/// Arguments of `search_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchNotesArgs {
    /// Text to find in note bodies and file names (an exact substring).
    pub query: String,
    /// Maximum number of hits, 1 to 200 (default 20).
    pub limit: Option<u32>,
    /// Match letter case exactly (default false).
    #[serde(default)]
    pub case_sensitive: bool,
    /// Only search notes under this folder (relative to the vault root).
    pub folder: Option<String>,
}

fn yes() -> bool {
    true
}

#[tool_router(vis = "pub(super)")]
impl CapvaultServer {
    /// Read one note: its full Markdown text, size, modification time and SHA-256 version.
    #[tool(annotations(
        title = "Read note",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn read_note(
        &self,
        Parameters(args): Parameters<ReadNoteArgs>,
    ) -> Result<Json<NoteText>, String> {
        let path = VaultPath::parse(&args.path).map_err(|e| format!("invalid path: {e}"))?;
        self.blocking(move |vault| read_note(vault, &path).map_err(|e| e.to_string()))
            .await
            .map(Json)
    }

    /// List notes (Markdown files) in the vault or one folder, newest first, with paging.
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
    ) -> Result<Json<ListPage>, String> {
        let folder =
            VaultPath::parse_folder(&args.folder).map_err(|e| format!("invalid folder: {e}"))?;
        let query = ListQuery {
            folder,
            recursive: args.recursive,
            limit: args.limit,
            cursor: args.cursor,
        };
        self.blocking(move |vault| list_notes(vault, &query).map_err(|e| e.to_string()))
            .await
            .map(Json)
    }

    /// Search all notes for an exact piece of text (case-insensitive by default). Hits are
    /// matching lines with an excerpt; notes whose file name contains the text rank first.
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
    ) -> Result<Json<SearchResults>, String> {
        let folder = VaultPath::parse_folder(args.folder.as_deref().unwrap_or(""))
            .map_err(|e| format!("invalid folder: {e}"))?;
        let query = SearchQuery {
            query: args.query,
            limit: args.limit,
            case_sensitive: args.case_sensitive,
            folder,
        };
        self.blocking(move |vault| search_exact(vault, &query).map_err(|e| e.to_string()))
            .await
            .map(Json)
    }
}
