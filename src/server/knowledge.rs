//! Tools over the vault model: links, backlinks, broken links, orphans, neighbours, tags,
//! link resolution.

use rmcp::handler::server::wrapper::Json;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CapvaultServer, Parameters, ToolError};
use crate::notes::graph::{
    self, BrokenLink, Direction, InLink, LinkResolution, Neighbor, OutLink, TagCount, TagSort,
};
use crate::notes::locate::locate_in;
use crate::notes::paging::{fingerprint, page};
use crate::vault::VaultPath;

/// Arguments of `get_links`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetLinksArgs {
    /// The note (any file, for backlinks).
    pub path: String,
    /// `out`, `in` (backlinks) or `both` (default).
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

/// Reply of `get_links`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LinksReply {
    /// The note asked about.
    pub path: String,
    /// Outgoing links in text order (direction `out` or `both`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outgoing: Option<Vec<OutLink>>,
    /// Number of outgoing links in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outgoing_total: Option<usize>,
    /// Backlinks by source path then line (direction `in` or `both`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incoming: Option<Vec<InLink>>,
    /// Number of backlinks in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incoming_total: Option<usize>,
    /// True when a list was cut; page with `direction` `out` or `in` and `cursor`.
    pub truncated: bool,
    /// Cursor for the next page (direction `out` or `in` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Arguments of `find_broken_links`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrokenLinksArgs {
    /// Only notes under this folder.
    #[serde(default)]
    pub folder: String,
    /// Results per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// A `next_cursor`.
    pub cursor: Option<String>,
}

/// A page of a list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PageReply<T: JsonSchema> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Items in all.
    pub total: usize,
    /// True when more items exist than this page returns.
    pub truncated: bool,
    /// Pass back as `cursor` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl<T: JsonSchema> From<crate::notes::paging::Page<T>> for PageReply<T> {
    fn from(p: crate::notes::paging::Page<T>) -> Self {
        PageReply {
            truncated: p.truncated(),
            items: p.items,
            total: p.total,
            next_cursor: p.next_cursor,
        }
    }
}

/// Arguments of `find_orphans`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrphansArgs {
    /// Only notes that also link to nothing.
    #[serde(default)]
    pub no_outbound: bool,
    /// Results per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// A `next_cursor`.
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
    /// `out`, `in` (backlinks) or `both` (default).
    #[serde(default = "both")]
    pub direction: Direction,
    /// Notes per page (default 100).
    #[schemars(range(min = 1, max = crate::notes::graph::MAX_LIMIT))]
    pub limit: Option<u32>,
    /// A `next_cursor`.
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
    /// A `next_cursor`.
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

/// The path `input` (parsed as `typed`) means: itself when the model has it, else what
/// [`locate_in`] finds (or its `not_found` with suggestions).
fn located(
    model: &crate::model::Model,
    input: &str,
    typed: VaultPath,
) -> Result<VaultPath, crate::notes::NoteError> {
    if model.files().contains_key(&typed) {
        return Ok(typed);
    }
    locate_in(model, input, &typed)
}

/// One page of a model list (borrowed: only the page is cloned), with the graph tools' page
/// sizes.
fn graph_page_of<T: JsonSchema + Clone>(
    all: &[T],
    limit: Option<u32>,
    cursor: Option<&str>,
    query: u64,
) -> Result<PageReply<T>, crate::notes::NoteError> {
    Ok(crate::notes::paging::page_of(
        all,
        limit,
        graph::DEFAULT_LIMIT,
        graph::MAX_LIMIT,
        cursor,
        query,
    )?
    .into())
}

fn parse_path(p: &str) -> Result<VaultPath, ToolError> {
    Ok(VaultPath::parse(p)?)
}

#[tool_router(router = knowledge_router, vis = "pub(super)")]
impl CapvaultServer {
    /// A note's outgoing links (target, resolved path, line, status) and backlinks.
    #[tool(annotations(
        title = "Get links and backlinks",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_links(
        &self,
        Parameters(args): Parameters<GetLinksArgs>,
    ) -> Result<Json<LinksReply>, ToolError> {
        let typed = parse_path(&args.path)?;
        if args.cursor.is_some() && args.direction == Direction::Both {
            return Err(ToolError::invalid(
                "a cursor pages one list: pass direction `out` or `in` with it",
            ));
        }
        self.with_model(move |vault, model| {
            let path = located(model, &args.path, typed)?;
            let mut reply = LinksReply {
                path: path.to_string(),
                outgoing: None,
                outgoing_total: None,
                incoming: None,
                incoming_total: None,
                truncated: false,
                next_cursor: None,
            };
            if args.direction != Direction::In {
                let all = graph::outgoing(model, &path)?;
                let q = fingerprint(&("out", path.as_str()));
                let p = page(
                    all,
                    args.limit,
                    graph::DEFAULT_LIMIT,
                    graph::MAX_LIMIT,
                    args.cursor.as_deref(),
                    q,
                )?;
                reply.truncated |= p.truncated();
                reply.outgoing_total = Some(p.total);
                reply.next_cursor = p.next_cursor;
                reply.outgoing = Some(p.items);
            }
            if args.direction != Direction::Out {
                let p = graph::incoming(model, vault, &path, args.limit, args.cursor.as_deref())?;
                reply.truncated |= p.truncated();
                reply.incoming_total = Some(p.total);
                if args.direction == Direction::In {
                    reply.next_cursor = p.next_cursor;
                }
                reply.incoming = Some(p.items);
            }
            Ok(reply)
        })
        .await
        .map(Json)
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
        let folder = VaultPath::parse_folder(&args.folder)?;
        self.with_engine(move |engine| {
            let model = &*engine.model()?;
            if !folder.is_root() {
                engine.vault().check_folder(&folder)?;
            }
            let all = model.memo("broken_links", || {
                graph::broken_links(model, &VaultPath::root())
            });
            let ignored = engine.user_ignored();
            let q = fingerprint(&("broken", folder.as_str()));
            if !folder.is_root() || ignored.is_some() {
                let under: Vec<BrokenLink> = all
                    .iter()
                    .filter(|b| {
                        folder.is_root()
                            || (b.source.starts_with(folder.as_str())
                                && b.source.as_bytes().get(folder.as_str().len()) == Some(&b'/'))
                    })
                    .filter(|b| ignored.as_ref().is_none_or(|f| !f.matches(&b.source)))
                    .cloned()
                    .collect();
                return Ok(graph_page_of(
                    &under,
                    args.limit,
                    args.cursor.as_deref(),
                    q,
                )?);
            }
            Ok(graph_page_of(&all, args.limit, args.cursor.as_deref(), q)?)
        })
        .await
        .map(Json)
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
        self.with_engine(move |engine| {
            let model = &*engine.model()?;
            let key = if args.no_outbound {
                "orphans_no_outbound"
            } else {
                "orphans"
            };
            let all = model.memo(key, || graph::orphans(model, args.no_outbound));
            let q = fingerprint(&("orphans", args.no_outbound));
            if let Some(f) = engine.user_ignored() {
                let shown: Vec<String> = all.iter().filter(|p| !f.matches(p)).cloned().collect();
                return Ok(graph_page_of(
                    &shown,
                    args.limit,
                    args.cursor.as_deref(),
                    q,
                )?);
            }
            Ok(graph_page_of(&all, args.limit, args.cursor.as_deref(), q)?)
        })
        .await
        .map(Json)
    }

    /// Notes within a few links of a note (breadth-first), nearest first.
    #[tool(annotations(
        title = "Get neighbouring notes",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    pub async fn get_neighbors(
        &self,
        Parameters(args): Parameters<NeighborsArgs>,
    ) -> Result<Json<PageReply<Neighbor>>, ToolError> {
        let typed = parse_path(&args.path)?;
        let depth = args.depth.unwrap_or(1);
        if !(1..=5).contains(&depth) {
            return Err(ToolError::invalid(format!(
                "`depth` must be between 1 and 5 (got {depth})"
            )));
        }
        self.with_engine(move |engine| {
            let model = &*engine.model()?;
            let path = located(model, &args.path, typed)?;
            let ignored = engine.user_ignored();
            let hidden = |p: &VaultPath| ignored.as_ref().is_some_and(|f| f.matches(p.as_str()));
            let all = graph::neighbors(model, &path, depth as usize, args.direction, &hidden)?;
            let q = fingerprint(&("neighbors", path.as_str(), depth, args.direction));
            Ok(graph_page_of(&all, args.limit, args.cursor.as_deref(), q)?)
        })
        .await
        .map(Json)
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
        self.with_model(move |_, model| {
            let all = match (args.prefix.as_deref(), args.sort) {
                (None, TagSort::Count) => model.memo("tags_by_count", || {
                    graph::tag_counts(model, None, TagSort::Count)
                }),
                (None, TagSort::Name) => model.memo("tags_by_name", || {
                    graph::tag_counts(model, None, TagSort::Name)
                }),
                (prefix, sort) => std::sync::Arc::new(graph::tag_counts(model, prefix, sort)),
            };
            let q = fingerprint(&("tags", args.prefix.as_deref(), args.sort));
            graph_page_of(&all, args.limit, args.cursor.as_deref(), q)
        })
        .await
        .map(Json)
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
        let from = args.from.as_deref().map(parse_path).transpose()?;
        self.with_model(move |_, model| {
            if let Some(f) = &from
                && model.note(f).is_none()
            {
                return Err(crate::notes::NoteError::InvalidArgument(format!(
                    "{f}: not a note of the vault (`from` names the note that contains the link)"
                )));
            }
            graph::resolve_link(model, &args.link, from.as_ref())
        })
        .await
        .map(Json)
    }
}
