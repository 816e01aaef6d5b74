//! Queries: Obsidian Bases (`query_base`, `list_bases`; the work is in [`crate::notes::bases`]),
//! and Dataview's and the Tasks plugin's queries (`run_query`; in [`crate::notes::query`]).

use rmcp::handler::server::wrapper::Json;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::bases::{self, BaseArgs, BaseList, BaseReply, BaseRequest};
use crate::notes::query::{self, Language, QueryArgs, QueryReply, QueryRequest};
use crate::vault::VaultPath;

/// Arguments of `query_base`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryBaseArgs {
    /// A `.base` file, or a note with ```base blocks.
    pub path: Option<String>,
    /// Which block of that note, from 1.
    #[schemars(range(min = 1))]
    pub block: Option<usize>,
    /// Or a base's YAML, e.g. `filters: 'file.hasTag("book")'`.
    pub base: Option<String>,
    /// View name (default: the first).
    pub view: Option<String>,
    /// The note `this` is (default: the file holding the base).
    pub this: Option<String>,
    /// Rows per page (default 50).
    #[schemars(range(min = 1, max = crate::notes::bases::MAX_ROWS))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `run_query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunQueryArgs {
    /// `dataview` (DQL) or `tasks` (the Tasks plugin's lines); default: as the query reads.
    pub language: Option<Language>,
    /// E.g. `TABLE rating FROM #book SORT rating DESC`, or `not done\ndue before tomorrow`.
    pub query: Option<String>,
    /// Or a note with ```dataview / ```tasks blocks (`this` is the note).
    pub path: Option<String>,
    /// Which block, from 1.
    #[schemars(range(min = 1))]
    pub block: Option<usize>,
    /// Rows per page (default 50).
    #[schemars(range(min = 1, max = crate::notes::query::MAX_ROWS))]
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// Arguments of `list_bases`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListBasesArgs {
    /// Only under this folder.
    pub folder: Option<String>,
    /// Bases per page (default 50).
    #[schemars(range(min = 1, max = crate::notes::bases::MAX_ROWS))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

#[tool_router(router = base_router, vis = "pub(super)")]
impl CapvaultServer {
    /// Evaluate an Obsidian Base (a `.base` file, a ```base block, or YAML): one view's rows,
    /// sorted, grouped and summarised as Obsidian shows them.
    #[tool(annotations(
        title = "Query a base",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn query_base(
        &self,
        Parameters(args): Parameters<QueryBaseArgs>,
    ) -> Result<Json<BaseReply>, ToolError> {
        let req = BaseRequest::new(BaseArgs {
            path: args.path,
            block: args.block,
            base: args.base,
            view: args.view,
            this: args.this,
            limit: args.limit,
            cursor: args.cursor,
        })?;
        self.note(move |engine| bases::query(engine, req)).await
    }

    /// Run a Dataview (DQL) or Tasks query, or a note's ```dataview/```tasks block, on the
    /// files: rows and the Markdown Obsidian shows. dataviewjs is never run.
    #[tool(annotations(
        title = "Run a Dataview or Tasks query",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn run_query(
        &self,
        Parameters(args): Parameters<RunQueryArgs>,
    ) -> Result<Json<QueryReply>, ToolError> {
        let req = QueryRequest::new(QueryArgs {
            language: args.language,
            query: args.query,
            path: args.path,
            block: args.block,
            limit: args.limit,
            cursor: args.cursor,
        })?;
        self.note(move |engine| query::run_query(engine, req)).await
    }

    /// Every `.base` file and ```base block, with its views.
    #[tool(annotations(
        title = "List bases",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn list_bases(
        &self,
        Parameters(args): Parameters<ListBasesArgs>,
    ) -> Result<Json<BaseList>, ToolError> {
        let folder = match args.folder.as_deref() {
            None | Some("") | Some("/") => None,
            Some(f) => Some(VaultPath::parse_folder(f)?),
        };
        self.note(move |engine| {
            bases::list_bases(engine, folder.as_ref(), args.limit, args.cursor.as_deref())
        })
        .await
    }
}
