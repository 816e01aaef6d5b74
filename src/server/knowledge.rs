//! Tools over the vault model: links, backlinks, broken links, orphans, neighbours, tags,
//! link resolution.

use rmcp::handler::server::wrapper::Json;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::graph::{BrokenLink, Direction, LinkResolution, Neighbor, TagCount, TagSort};
use crate::notes::knowledge::{
    self, BrokenLinksRequest, LinksReply, LinksRequest, NeighborsRequest, OrphansRequest,
    PageReply, Paging, ResolveRequest, TagsRequest,
};

/// Arguments of `get_links`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetLinksArgs {
    /// The note (any file, for backlinks).
    pub path: String,
    /// `in`: backlinks; default `both`.
    #[serde(default = "both")]
    pub direction: Direction,
    /// Links per direction (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// A `next_cursor` (direction `out` or `in`).
    pub cursor: Option<String>,
}

fn both() -> Direction {
    Direction::Both
}

/// Arguments of `find_broken_links`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrokenLinksArgs {
    /// Only notes under this folder.
    #[serde(default)]
    pub folder: String,
    /// Per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `find_orphans`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrphansArgs {
    /// Only notes that also link to nothing.
    #[serde(default)]
    pub no_outbound: bool,
    /// Per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `get_neighbors`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NeighborsArgs {
    /// The starting note.
    pub path: String,
    /// Links away (default 1).
    #[schemars(range(min = 1, max = 5))]
    pub depth: Option<u32>,
    /// `in`: backlinks; default `both`.
    #[serde(default = "both")]
    pub direction: Direction,
    /// Notes per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `list_tags`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListTagsArgs {
    /// Only this tag and those nested under it.
    pub prefix: Option<String>,
    /// `count` (most used first, default) or `name`.
    #[serde(default)]
    pub sort: TagSort,
    /// Tags per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    // A `next_cursor` (the name says it).
    pub cursor: Option<String>,
}

/// Arguments of `resolve_link`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveLinkArgs {
    /// `[[Note#Heading|alias]]`, `![[image.png]]`, `[text](Note.md)` or `Note#Heading`.
    pub link: String,
    /// The note holding the link (picks among same-named notes).
    pub from: Option<String>,
}

fn paging(limit: Option<u32>, cursor: Option<String>) -> Paging {
    Paging { limit, cursor }
}

#[tool_router(router = knowledge_router, vis = "pub(super)")]
impl CapvaultServer {
    /// A note's outgoing links (target, resolved path, line, status) and backlinks.
    #[tool(annotations(
        title = "Links and backlinks",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_links(
        &self,
        Parameters(args): Parameters<GetLinksArgs>,
    ) -> Result<Json<LinksReply>, ToolError> {
        let req = LinksRequest::new(args.path, args.direction, paging(args.limit, args.cursor))?;
        self.note(move |engine| knowledge::get_links(engine, &req))
            .await
    }

    /// Links that lead nowhere: no such note, or a missing `#heading` or `#^block`.
    #[tool(annotations(
        title = "Find broken links",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn find_broken_links(
        &self,
        Parameters(args): Parameters<BrokenLinksArgs>,
    ) -> Result<Json<PageReply<BrokenLink>>, ToolError> {
        let req = BrokenLinksRequest::new(&args.folder, paging(args.limit, args.cursor))?;
        self.note(move |engine| knowledge::find_broken_links(engine, &req))
            .await
    }

    /// Notes that no other note links to (orphans).
    #[tool(annotations(
        title = "Find orphan notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn find_orphans(
        &self,
        Parameters(args): Parameters<OrphansArgs>,
    ) -> Result<Json<PageReply<String>>, ToolError> {
        let req = OrphansRequest {
            no_outbound: args.no_outbound,
            paging: paging(args.limit, args.cursor),
        };
        self.note(move |engine| knowledge::find_orphans(engine, &req))
            .await
    }

    /// Notes within a few links of a note nearest first.
    #[tool(annotations(
        title = "Neighbouring notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_neighbors(
        &self,
        Parameters(args): Parameters<NeighborsArgs>,
    ) -> Result<Json<PageReply<Neighbor>>, ToolError> {
        let req = NeighborsRequest::new(
            args.path,
            args.depth,
            args.direction,
            paging(args.limit, args.cursor),
        )?;
        self.note(move |engine| knowledge::get_neighbors(engine, &req))
            .await
    }

    /// Tags with their note counts; `a/b` also counts toward `a`.
    #[tool(annotations(
        title = "List tags",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn list_tags(
        &self,
        Parameters(args): Parameters<ListTagsArgs>,
    ) -> Result<Json<PageReply<TagCount>>, ToolError> {
        let req = TagsRequest {
            prefix: args.prefix,
            sort: args.sort,
            paging: paging(args.limit, args.cursor),
        };
        self.note(move |engine| knowledge::list_tags(engine, &req))
            .await
    }

    /// Which file a link opens in Obsidian, or why it opens nothing.
    #[tool(annotations(
        title = "Resolve a link",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn resolve_link(
        &self,
        Parameters(args): Parameters<ResolveLinkArgs>,
    ) -> Result<Json<LinkResolution>, ToolError> {
        let req = ResolveRequest::new(args.link, args.from.as_deref())?;
        self.note(move |engine| knowledge::resolve_link(engine, &req))
            .await
    }
}
