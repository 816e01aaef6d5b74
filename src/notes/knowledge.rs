//! The graph tools' operations, one function per tool (`get_links`, `find_broken_links`,
//! `find_orphans`, `get_neighbors`, `list_tags`, `resolve_link`): each takes its request, reads
//! the engine's model, keeps what the model memoises, leaves out Obsidian's Excluded files and
//! cuts the page. The handlers in `server/knowledge.rs` only build the request and wrap the
//! reply.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::NoteError;
use super::graph::{
    self, BrokenLink, Direction, InLink, LinkResolution, Neighbor, OutLink, TagCount, TagSort,
};
use super::locate::locate_in;
use super::paging::{Page, fingerprint, page, page_of};
use crate::engine::Engine;
use crate::model::Model;
use crate::vault::VaultPath;

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

impl<T: JsonSchema> From<Page<T>> for PageReply<T> {
    fn from(p: Page<T>) -> Self {
        PageReply {
            truncated: p.truncated(),
            items: p.items,
            total: p.total,
            next_cursor: p.next_cursor,
        }
    }
}

/// A page request: how many items, from where.
#[derive(Debug, Clone, Default)]
pub struct Paging {
    /// Items per page (default [`graph::DEFAULT_LIMIT`]).
    pub limit: Option<u32>,
    /// A `next_cursor` from the previous page.
    pub cursor: Option<String>,
}

/// What `get_links` asks: the note as typed and parsed, which links, which page.
#[derive(Debug, Clone)]
pub struct LinksRequest {
    input: String,
    path: VaultPath,
    direction: Direction,
    paging: Paging,
}

impl LinksRequest {
    /// Parses the note's path; a cursor pages one list, so it needs direction `out` or `in`.
    pub fn new(path: String, direction: Direction, paging: Paging) -> Result<Self, NoteError> {
        let typed = VaultPath::parse(&path)?;
        if paging.cursor.is_some() && direction == Direction::Both {
            return Err(NoteError::invalid(
                "direction",
                "a cursor pages one list: pass direction `out` or `in` with it",
            ));
        }
        Ok(LinksRequest {
            input: path,
            path: typed,
            direction,
            paging,
        })
    }
}

/// What `find_broken_links` asks: the folder (root: the whole vault) and the page.
#[derive(Debug, Clone)]
pub struct BrokenLinksRequest {
    folder: VaultPath,
    paging: Paging,
}

impl BrokenLinksRequest {
    /// Parses the folder (`""`: the whole vault).
    pub fn new(folder: &str, paging: Paging) -> Result<Self, NoteError> {
        Ok(BrokenLinksRequest {
            folder: VaultPath::parse_folder(folder)?,
            paging,
        })
    }
}

/// What `find_orphans` asks.
#[derive(Debug, Clone, Default)]
pub struct OrphansRequest {
    /// Only notes that also link to nothing.
    pub no_outbound: bool,
    /// Which page.
    pub paging: Paging,
}

/// What `get_neighbors` asks: the start note, how far, which links, which page.
#[derive(Debug, Clone)]
pub struct NeighborsRequest {
    input: String,
    path: VaultPath,
    depth: u32,
    direction: Direction,
    paging: Paging,
}

/// The farthest `get_neighbors` goes, in links.
pub const MAX_DEPTH: u32 = 5;

impl NeighborsRequest {
    /// Parses the start note's path and checks `depth` (default 1, at most [`MAX_DEPTH`]).
    pub fn new(
        path: String,
        depth: Option<u32>,
        direction: Direction,
        paging: Paging,
    ) -> Result<Self, NoteError> {
        let typed = VaultPath::parse(&path)?;
        let depth = depth.unwrap_or(1);
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(NoteError::invalid(
                "depth",
                format!("`depth` must be between 1 and {MAX_DEPTH} (got {depth})"),
            ));
        }
        Ok(NeighborsRequest {
            input: path,
            path: typed,
            depth,
            direction,
            paging,
        })
    }
}

/// What `list_tags` asks.
#[derive(Debug, Clone, Default)]
pub struct TagsRequest {
    /// Only this tag and those nested under it.
    pub prefix: Option<String>,
    /// The order.
    pub sort: TagSort,
    /// Which page.
    pub paging: Paging,
}

/// What `resolve_link` asks: the link's text, and the note holding it (parsed).
#[derive(Debug, Clone)]
pub struct ResolveRequest {
    link: String,
    from: Option<VaultPath>,
}

impl ResolveRequest {
    /// Parses `from`, the path of the note that holds the link.
    pub fn new(link: String, from: Option<&str>) -> Result<Self, NoteError> {
        Ok(ResolveRequest {
            link,
            from: from.map(VaultPath::parse).transpose()?,
        })
    }
}

/// The path `input` (parsed as `typed`) means: itself when the model has it, else what
/// [`locate_in`] finds (or its `not_found` with suggestions).
fn located(model: &Model, input: &str, typed: &VaultPath) -> Result<VaultPath, NoteError> {
    if model.files().contains_key(typed) {
        return Ok(typed.clone());
    }
    locate_in(model, input, typed)
}

/// One page of a model list (borrowed: only the page is cloned), with the graph tools' page
/// sizes.
fn graph_page_of<T: JsonSchema + Clone>(
    all: &[T],
    paging: &Paging,
    query: u64,
) -> Result<PageReply<T>, NoteError> {
    Ok(page_of(
        all,
        paging.limit,
        graph::DEFAULT_LIMIT,
        graph::MAX_LIMIT,
        paging.cursor.as_deref(),
        query,
    )?
    .into())
}

/// `get_links`: a note's outgoing links and backlinks, each list paged.
pub fn get_links(engine: &Engine, req: &LinksRequest) -> Result<LinksReply, NoteError> {
    let model = &*engine.model()?;
    let path = located(model, &req.input, &req.path)?;
    let mut reply = LinksReply {
        path: path.to_string(),
        outgoing: None,
        outgoing_total: None,
        incoming: None,
        incoming_total: None,
        truncated: false,
        next_cursor: None,
    };
    let (limit, cursor) = (req.paging.limit, req.paging.cursor.as_deref());
    if req.direction != Direction::In {
        let all = graph::outgoing(model, &path)?;
        let q = fingerprint(&("out", path.as_str()));
        let p = page(
            all,
            limit,
            graph::DEFAULT_LIMIT,
            graph::MAX_LIMIT,
            cursor,
            q,
        )?;
        reply.truncated |= p.truncated();
        reply.outgoing_total = Some(p.total);
        reply.next_cursor = p.next_cursor;
        reply.outgoing = Some(p.items);
    }
    if req.direction != Direction::Out {
        let p = graph::incoming(model, engine.vault(), &path, limit, cursor)?;
        reply.truncated |= p.truncated();
        reply.incoming_total = Some(p.total);
        if req.direction == Direction::In {
            reply.next_cursor = p.next_cursor;
        }
        reply.incoming = Some(p.items);
    }
    Ok(reply)
}

/// `find_broken_links`: the vault's broken links (computed once per state of the model), those
/// under the folder and outside Obsidian's Excluded files, paged.
pub fn find_broken_links(
    engine: &Engine,
    req: &BrokenLinksRequest,
) -> Result<PageReply<BrokenLink>, NoteError> {
    let folder = &req.folder;
    let model = &*engine.model()?;
    if !folder.is_root() {
        engine.vault().check_folder(folder)?;
    }
    crate::model::memo_key!(BrokenLinks: Vec<BrokenLink>);
    let all = model.memo::<BrokenLinks>(|| graph::broken_links(model, &VaultPath::root()));
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
        return graph_page_of(&under, &req.paging, q);
    }
    graph_page_of(&all, &req.paging, q)
}

/// `find_orphans`: notes nothing links to (computed once per state of the model), outside
/// Obsidian's Excluded files, paged.
pub fn find_orphans(engine: &Engine, req: &OrphansRequest) -> Result<PageReply<String>, NoteError> {
    let model = &*engine.model()?;
    crate::model::memo_key!(Orphans: Vec<String>);
    crate::model::memo_key!(OrphansNoOutbound: Vec<String>);
    let all = if req.no_outbound {
        model.memo::<OrphansNoOutbound>(|| graph::orphans(model, true))
    } else {
        model.memo::<Orphans>(|| graph::orphans(model, false))
    };
    let q = fingerprint(&("orphans", req.no_outbound));
    if let Some(f) = engine.user_ignored() {
        let shown: Vec<String> = all.iter().filter(|p| !f.matches(p)).cloned().collect();
        return graph_page_of(&shown, &req.paging, q);
    }
    graph_page_of(&all, &req.paging, q)
}

/// `get_neighbors`: notes within `depth` links, nearest first, neither listing nor passing
/// through Obsidian's Excluded files, paged.
pub fn get_neighbors(
    engine: &Engine,
    req: &NeighborsRequest,
) -> Result<PageReply<Neighbor>, NoteError> {
    let model = &*engine.model()?;
    let path = located(model, &req.input, &req.path)?;
    let ignored = engine.user_ignored();
    let hidden = |p: &VaultPath| ignored.as_ref().is_some_and(|f| f.matches(p.as_str()));
    let all = graph::neighbors(model, &path, req.depth as usize, req.direction, &hidden)?;
    let q = fingerprint(&("neighbors", path.as_str(), req.depth, req.direction));
    graph_page_of(&all, &req.paging, q)
}

/// `list_tags`: tag counts (the unfiltered lists computed once per state of the model), paged.
pub fn list_tags(engine: &Engine, req: &TagsRequest) -> Result<PageReply<TagCount>, NoteError> {
    let model = &*engine.model()?;
    crate::model::memo_key!(TagsByCount: Vec<TagCount>);
    crate::model::memo_key!(TagsByName: Vec<TagCount>);
    let all = match (req.prefix.as_deref(), req.sort) {
        (None, TagSort::Count) => {
            model.memo::<TagsByCount>(|| graph::tag_counts(model, None, TagSort::Count))
        }
        (None, TagSort::Name) => {
            model.memo::<TagsByName>(|| graph::tag_counts(model, None, TagSort::Name))
        }
        (prefix, sort) => Arc::new(graph::tag_counts(model, prefix, sort)),
    };
    let q = fingerprint(&("tags", req.prefix.as_deref(), req.sort));
    graph_page_of(&all, &req.paging, q)
}

/// `resolve_link`: which file the link opens from `from`, which must be a note.
pub fn resolve_link(engine: &Engine, req: &ResolveRequest) -> Result<LinkResolution, NoteError> {
    let model = &*engine.model()?;
    if let Some(f) = &req.from
        && model.note(f).is_none()
    {
        return Err(NoteError::invalid(
            "from",
            format!("{f}: not a note of the vault (`from` names the note that contains the link)"),
        ));
    }
    graph::resolve_link(model, &req.link, req.from.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cursor() -> Paging {
        Paging {
            limit: None,
            cursor: Some("c".to_owned()),
        }
    }

    #[test]
    fn a_cursor_for_both_link_lists_is_refused_when_the_request_is_built() {
        let e = LinksRequest::new("A.md".to_owned(), Direction::Both, with_cursor()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a cursor pages one list: pass direction `out` or `in` with it"
        );
        assert!(LinksRequest::new("A.md".to_owned(), Direction::In, with_cursor()).is_ok());
        // The path is parsed first: a refused path wins over the cursor.
        let e = LinksRequest::new("../A.md".to_owned(), Direction::Both, with_cursor());
        assert!(matches!(e, Err(NoteError::Vault(_))), "{e:?}");
    }

    #[test]
    fn a_neighbour_depth_outside_one_to_five_is_refused_when_the_request_is_built() {
        for depth in [0, 6, u32::MAX] {
            let e = NeighborsRequest::new(
                "A.md".to_owned(),
                Some(depth),
                Direction::Both,
                Paging::default(),
            )
            .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("`depth` must be between 1 and 5 (got {depth})")
            );
        }
        let r = NeighborsRequest::new("A.md".to_owned(), None, Direction::Out, Paging::default());
        assert_eq!(r.map(|r| r.depth).ok(), Some(1));
    }
}
