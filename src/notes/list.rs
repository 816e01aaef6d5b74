//! `list_notes`: the notes (or other files) of a folder, newest first, paged with a keyset
//! cursor, from the vault model's recency order (no walk); and `list_folders`, the folder tree
//! with counts. While the first build runs, `list_notes` without filters walks the disk instead.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::paging::{fingerprint, page};
use super::{NoteError, check_limit, cursor, rfc3339};
use crate::model::{FileKind, Model, nanos};
use crate::obsidian::config::IgnoreFilters;
use crate::vault::{Vault, VaultPath};

/// Default and largest page size.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page size a client may ask for.
pub const MAX_LIMIT: u32 = 1000;

/// What to list.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Folder to list (the root when empty).
    pub folder: VaultPath,
    /// Include notes in subfolders.
    pub recursive: bool,
    /// Page size.
    pub limit: Option<u32>,
    /// `next_cursor` from the previous page.
    pub cursor: Option<String>,
    /// Identifies the filters in force (0 for none), so a cursor cannot cross filters.
    pub filter_id: u64,
    /// Which files.
    pub kind: KindFilter,
}

/// Which files `list_notes` lists.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum KindFilter {
    /// Markdown notes (the default).
    #[default]
    Note,
    /// Canvases (`.canvas`).
    Canvas,
    /// Bases (`.base`).
    Base,
    /// Attachments (everything else).
    Attachment,
    /// Every file.
    Any,
}

impl KindFilter {
    fn admits(self, kind: FileKind) -> bool {
        match self {
            KindFilter::Any => true,
            KindFilter::Note => kind == FileKind::Note,
            KindFilter::Canvas => kind == FileKind::Canvas,
            KindFilter::Base => kind == FileKind::Base,
            KindFilter::Attachment => kind == FileKind::Attachment,
        }
    }

    fn only(self) -> Option<FileKind> {
        match self {
            KindFilter::Any => None,
            KindFilter::Note => Some(FileKind::Note),
            KindFilter::Canvas => Some(FileKind::Canvas),
            KindFilter::Base => Some(FileKind::Base),
            KindFilter::Attachment => Some(FileKind::Attachment),
        }
    }
}

/// One note in a listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NoteSummary {
    /// Vault-relative path.
    pub path: String,
    /// Last modification time, RFC 3339 (UTC).
    pub modified: String,
    /// Size in bytes.
    pub size: u64,
    /// What kind of file (only with `kind: any`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<FileKind>,
}

/// One page of a listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListPage {
    /// Notes on this page, newest first (ties by path).
    pub notes: Vec<NoteSummary>,
    /// Number of notes the query matches in all.
    pub total: usize,
    /// True when more notes follow this page (see `next_cursor`).
    pub truncated: bool,
    /// Pass this back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The sort key, and what a cursor remembers.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
struct Key {
    /// Modification time in nanoseconds since the epoch.
    m: u128,
    /// Path.
    p: String,
}

#[derive(Serialize, Deserialize)]
struct ListCursor {
    /// The folder and recursion of the query the cursor belongs to.
    f: String,
    r: bool,
    /// The filters of the query (see [`ListQuery::filter_id`]).
    #[serde(default)]
    x: u64,
    /// The last key returned.
    k: Key,
    /// The kind filter.
    #[serde(default)]
    t: KindFilter,
}

/// Newest first, then by path.
fn order(a: &Key, b: &Key) -> Ordering {
    b.m.cmp(&a.m).then_with(|| a.p.cmp(&b.p))
}

/// The key a cursor resumes after, checked against the query it was made for.
fn resume_after(query: &ListQuery) -> Result<Option<Key>, NoteError> {
    let Some(c) = &query.cursor else {
        return Ok(None);
    };
    let c: ListCursor = cursor::decode(c)?;
    if c.f != query.folder.as_str()
        || c.r != query.recursive
        || c.x != query.filter_id
        || c.t != query.kind
    {
        return Err(NoteError::invalid(
            "cursor",
            "this cursor belongs to a listing with other arguments; start again without a cursor",
        ));
    }
    Ok(Some(c.k))
}

fn next_cursor(query: &ListQuery, last: &Key) -> String {
    cursor::encode(&ListCursor {
        f: query.folder.as_str().to_owned(),
        r: query.recursive,
        x: query.filter_id,
        k: last.clone(),
        t: query.kind,
    })
}

/// True when `path` is listed by a listing of `folder`.
fn in_folder(path: &VaultPath, folder: &VaultPath, recursive: bool) -> bool {
    (folder.is_root() || path.starts_with(folder))
        && (recursive || path.components().count() == folder.components().count() + 1)
}
/// The files a filtered listing can come from: the tag index's notes for a tag filter, a
/// folder's range of the model otherwise. `None` when neither narrows the listing.
struct Candidates<'m> {
    paths: Vec<&'m VaultPath>,
    /// The tag's note sets (the tag and each nested one), when a tag picked the paths.
    tag_sets: Vec<&'m std::collections::BTreeSet<VaultPath>>,
}

impl Candidates<'_> {
    /// True when `p` is one of the candidates, for a path within the listing's folder.
    fn holds(&self, p: &VaultPath) -> bool {
        self.tag_sets.is_empty() || self.tag_sets.iter().any(|s| s.contains(p))
    }
}

/// The candidates of a listing by tag (from the tag index) or by folder (a range of the model).
fn candidates<'m>(
    model: &'m Model,
    query: &ListQuery,
    tag: Option<&str>,
) -> Option<Candidates<'m>> {
    if let Some(t) = tag {
        let nested = format!("{t}/");
        let sets: Vec<&std::collections::BTreeSet<VaultPath>> = model
            .tags()
            .range::<str, _>((std::ops::Bound::Included(t), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.as_str() == t || k.starts_with(&nested))
            .filter(|(k, _)| k.as_str() == t || k.starts_with(&nested))
            .map(|(_, notes)| notes)
            .collect();
        let mut out: Vec<&VaultPath> = sets.iter().flat_map(|s| s.iter()).collect();
        if sets.len() > 1 {
            // A note may carry the tag and a nested one.
            out.sort_unstable();
            out.dedup();
        }
        return Some(Candidates {
            paths: out,
            tag_sets: sets,
        });
    }
    if query.folder.is_root() {
        return None;
    }
    let f = &query.folder;
    Some(Candidates {
        paths: model
            .files()
            .range::<VaultPath, _>(f..)
            .take_while(|(p, _)| p.as_str().starts_with(f.as_str()))
            .map(|(p, _)| p)
            .collect(),
        tag_sets: Vec::new(),
    })
}

/// What `list_notes` asks: where and which page ([`ListQuery`]), with the tag, property and
/// glob filters.
#[derive(Debug)]
pub struct ListRequest {
    query: ListQuery,
    filter: super::filter::NoteFilter,
    trust: Option<crate::obsidian::provenance::Trust>,
}

impl ListRequest {
    /// The request for `query` under `filter` (the query's `filter_id` is set from it, so a
    /// cursor cannot cross filters).
    pub fn new(mut query: ListQuery, filter: super::filter::NoteFilter) -> Self {
        query.filter_id = filter.id();
        ListRequest {
            query,
            filter,
            trust: None,
        }
    }

    /// The same request, leaving out what `trust` does not admit (clippings, shared notes).
    pub fn with_trust(mut self, trust: Option<crate::obsidian::provenance::Trust>) -> Self {
        if trust.is_some() {
            self.query.filter_id = fingerprint(&(self.query.filter_id, trust));
        }
        self.trust = trust;
        self
    }
}

/// `list_notes`: from the model; or, while the first build runs and no filter needs the model,
/// by walking the disk (answering at once rather than waiting for the build). Obsidian's
/// Excluded files are left out either way.
pub fn list(engine: &crate::engine::Engine, req: &ListRequest) -> Result<ListPage, NoteError> {
    let (query, filter) = (&req.query, &req.filter);
    if filter.is_empty() && req.trust.is_none() && !engine.is_ready() {
        let ignored = engine.user_ignored();
        return list_notes_walk(engine.vault(), query, ignored.as_deref());
    }
    let model = engine.model()?;
    // With a tag, the tag index picks the candidates: the rest of the filter checks them.
    let rest = filter.without_tag();
    let keep = |p: &VaultPath| rest.matches(&model, p);
    let keep: Option<&dyn Fn(&VaultPath) -> bool> =
        if rest.is_empty() { None } else { Some(&keep) };
    let ignored = engine
        .user_ignored()
        .map(|f| engine.user_ignored_files(&model, &f));
    // What the trust filter leaves out is left out as Excluded files are.
    let ignored = match (ignored, req.trust.map(|t| engine.distrusted(&model, t))) {
        (Some(a), Some(d)) => Some(std::sync::Arc::new(a.union(&d.files).cloned().collect())),
        (None, Some(d)) => Some(std::sync::Arc::clone(&d.files)),
        (a, None) => a,
    };
    list_notes(
        engine.vault(),
        &model,
        query,
        keep,
        filter.tag(),
        ignored.as_deref(),
    )
}

/// Lists files per `query` from the model, newest first. `keep`, when given, filters by path
/// (tag, property and glob filters); `tag`, the normalised tag filter if there is one, lets the
/// tag index pick the candidates; `ignored` files (Obsidian's Excluded files) are left out.
/// `vault` only checks that a folder exists.
pub fn list_notes(
    vault: &Vault,
    model: &Model,
    query: &ListQuery,
    keep: Option<&dyn Fn(&VaultPath) -> bool>,
    tag: Option<&str>,
    ignored: Option<&HashSet<VaultPath>>,
) -> Result<ListPage, NoteError> {
    let limit = check_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = resume_after(query)?;
    if !query.folder.is_root() {
        vault.check_folder(&query.folder)?;
    }
    let admits = |p: &VaultPath| {
        query.kind.admits(FileKind::of(p))
            && in_folder(p, &query.folder, query.recursive)
            && keep.is_none_or(|k| k(p))
            && ignored.is_none_or(|i| !i.contains(p))
    };
    // Ignored files a whole-vault count must leave out.
    let ignored_here = |kind: Option<FileKind>| {
        ignored.map_or(0, |i| {
            i.iter()
                .filter(|p| kind.is_none_or(|k| FileKind::of(p) == k))
                .count()
        })
    };
    let recent = model.recent();
    let found = candidates(model, query, tag);
    let mut known_total = None;
    if let Some(found) = &found {
        // Few candidates: order them. Many: walk the recency order and stop at the page's end,
        // which reads about `limit * files / candidates` entries instead of every candidate's
        // metadata.
        let every_note = query.folder.is_root()
            && query.recursive
            && keep.is_none()
            && query.kind.admits(FileKind::Note);
        let admitted = if every_note && found.tag_sets.len() == 1 && ignored.is_none() {
            // One tag, nothing else to check: its set's size (the tag index holds notes only).
            found.tag_sets[0].len()
        } else {
            found.paths.iter().filter(|p| admits(p)).count()
        };
        if admitted.saturating_mul(admitted) < recent.len().saturating_mul(limit + 1) {
            let paths: Vec<&VaultPath> = found
                .paths
                .iter()
                .copied()
                .filter(|p| ignored.is_none_or(|i| !i.contains(*p)))
                .collect();
            return list_from(model, query, keep, paths, limit, after);
        }
        known_total = Some(admitted);
    }
    let admits = |p: &VaultPath| admits(p) && found.as_ref().is_none_or(|f| f.holds(p));
    let from = match &after {
        Some(k) => std::ops::Bound::Excluded((
            std::cmp::Reverse(k.m),
            VaultPath::parse(&k.p).map_err(|_| {
                NoteError::invalid("cursor", "this cursor is damaged; start again without one")
            })?,
        )),
        None => std::ops::Bound::Unbounded,
    };
    // The whole vault of one kind, unfiltered: the model counts it, so the scan stops at the
    // page's end.
    let counted = known_total.or_else(|| {
        (query.folder.is_root() && query.recursive && keep.is_none()).then(|| {
            let c = model.counts();
            let all = match query.kind.only() {
                Some(k) => c.of(k),
                None => c.notes + c.canvases + c.bases + c.attachments,
            };
            all.saturating_sub(ignored_here(query.kind.only()))
        })
    });
    let mut page: Vec<NoteSummary> = Vec::new();
    let mut last: Option<Key> = None;
    let mut more = false;
    let mut before = 0usize;
    if after.is_some() && counted.is_none() {
        // The total counts every match, those before the cursor too.
        before = recent
            .range((std::ops::Bound::Unbounded, from.clone()))
            .filter(|(_, p)| admits(p))
            .count();
        before += usize::from(matches!(&from, std::ops::Bound::Excluded((_, p)) if admits(p)));
    }
    let mut after_page = 0usize;
    for (std::cmp::Reverse(m), p) in recent.range((from, std::ops::Bound::Unbounded)) {
        if !admits(p) {
            continue;
        }
        if page.len() == limit {
            more = true;
            if counted.is_some() {
                break;
            }
            after_page += 1;
            continue;
        }
        let Some(meta) = model.files().get(p) else {
            continue;
        };
        last = Some(Key {
            m: *m,
            p: p.as_str().to_owned(),
        });
        page.push(NoteSummary {
            path: p.to_string(),
            modified: rfc3339(meta.modified),
            size: meta.size,
            kind: (query.kind == KindFilter::Any).then(|| FileKind::of(p)),
        });
    }
    let total = counted.unwrap_or(before + page.len() + after_page);
    let next_cursor = if more {
        last.as_ref().map(|k| next_cursor(query, k))
    } else {
        None
    };
    Ok(ListPage {
        notes: page,
        total,
        truncated: next_cursor.is_some(),
        next_cursor,
    })
}

/// A page of `found` (candidate paths), sorted newest first.
fn list_from(
    model: &Model,
    query: &ListQuery,
    keep: Option<&dyn Fn(&VaultPath) -> bool>,
    found: Vec<&VaultPath>,
    limit: usize,
    after: Option<Key>,
) -> Result<ListPage, NoteError> {
    let mut keyed: Vec<(std::cmp::Reverse<u128>, &VaultPath, &crate::vault::FileMeta)> = found
        .into_iter()
        .filter(|p| {
            query.kind.admits(FileKind::of(p))
                && in_folder(p, &query.folder, query.recursive)
                && keep.is_none_or(|k| k(p))
        })
        .filter_map(|p| {
            let meta = model.files().get(p)?;
            Some((std::cmp::Reverse(nanos(meta.modified)), p, meta))
        })
        .collect();
    let total = keyed.len();
    if let Some(k) = &after {
        let at = (std::cmp::Reverse(k.m), k.p.as_str());
        keyed.retain(|(m, p, _)| (*m, p.as_str()) > at);
    }
    // Only the page needs ordering: select it, then sort it.
    let cmp = |a: &(std::cmp::Reverse<u128>, &VaultPath, &crate::vault::FileMeta),
               b: &(std::cmp::Reverse<u128>, &VaultPath, &crate::vault::FileMeta)| {
        (a.0, a.1).cmp(&(b.0, b.1))
    };
    let more = keyed.len() > limit;
    if more {
        keyed.select_nth_unstable_by(limit, cmp);
        keyed.truncate(limit);
    }
    keyed.sort_unstable_by(cmp);
    let page = keyed;
    let next_cursor = more.then(|| page.last()).flatten().map(|(m, p, _)| {
        next_cursor(
            query,
            &Key {
                m: m.0,
                p: p.as_str().to_owned(),
            },
        )
    });
    Ok(ListPage {
        notes: page
            .into_iter()
            .map(|(_, p, meta)| NoteSummary {
                path: p.to_string(),
                modified: rfc3339(meta.modified),
                size: meta.size,
                kind: (query.kind == KindFilter::Any).then(|| FileKind::of(p)),
            })
            .collect(),
        total,
        truncated: next_cursor.is_some(),
        next_cursor,
    })
}

/// [`list_notes`] by walking the disk, for the seconds before the first build has a model
/// (no filters then but Obsidian's Excluded files, `ignored`).
pub fn list_notes_walk(
    vault: &Vault,
    query: &ListQuery,
    ignored: Option<&IgnoreFilters>,
) -> Result<ListPage, NoteError> {
    let limit = check_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = resume_after(query)?;
    let mut all: Vec<(Key, SystemTime, u64)> = Vec::new();
    let kind = query.kind;
    vault.walk(
        &query.folder,
        query.recursive,
        &|name| kind.admits(FileKind::of_name(name)),
        &mut |entry| {
            if super::cancel::requested() {
                return ControlFlow::Break(());
            }
            if ignored.is_some_and(|i| i.matches(entry.path.as_str())) {
                return ControlFlow::Continue(());
            }
            match entry.meta(vault) {
                Ok(meta) => all.push((
                    Key {
                        m: nanos(meta.modified),
                        p: entry.path.as_str().to_owned(),
                    },
                    meta.modified,
                    meta.size,
                )),
                Err(e) => tracing::warn!(path = %entry.path, error = %e, "listing skipped a file"),
            }
            ControlFlow::Continue(())
        },
    )?;
    super::cancel::check()?;
    let total = all.len();
    all.sort_unstable_by(|a, b| order(&a.0, &b.0));
    let start = match &after {
        Some(k) => all.partition_point(|(key, _, _)| order(key, k) != Ordering::Greater),
        None => 0,
    };
    let page: Vec<_> = all.iter().skip(start).take(limit).collect();
    let next_cursor = if start + page.len() < all.len() {
        page.last().map(|(k, _, _)| next_cursor(query, k))
    } else {
        None
    };
    Ok(ListPage {
        notes: page
            .into_iter()
            .map(|(k, modified, size)| NoteSummary {
                kind: (kind == KindFilter::Any)
                    .then(|| VaultPath::parse(&k.p).map(|p| FileKind::of(&p)).ok())
                    .flatten(),
                path: k.p.clone(),
                modified: rfc3339(*modified),
                size: *size,
            })
            .collect(),
        total,
        truncated: next_cursor.is_some(),
        next_cursor,
    })
}

/// Default and largest depth of `list_folders`.
pub const DEFAULT_FOLDER_DEPTH: u32 = 2;
/// Deepest `list_folders` goes.
pub const MAX_FOLDER_DEPTH: u32 = 32;

/// One folder of the tree, with what it holds (subfolders included).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FolderSummary {
    /// Vault-relative path of the folder.
    pub path: String,
    /// Levels below the folder asked for (1: a direct subfolder).
    pub depth: u32,
    /// Notes in it and below.
    pub notes: usize,
    /// Files of every kind in it and below.
    pub files: usize,
}

/// Reply of `list_folders`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FolderPage {
    /// Folders in path order (a parent before its subfolders).
    pub folders: Vec<FolderSummary>,
    /// Folders in all.
    pub total: usize,
    /// True when more folders follow (see `next_cursor`).
    pub truncated: bool,
    /// Pass back as `cursor` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What `list_folders` asks: the folder (parsed), how deep, and which page.
#[derive(Debug, Clone)]
pub struct FoldersRequest {
    folder: VaultPath,
    depth: Option<u32>,
    limit: Option<u32>,
    cursor: Option<String>,
}

impl FoldersRequest {
    /// Parses `folder` (empty: the vault root). The depth is checked by [`folders`], after the
    /// model is ready, as before.
    pub fn new(
        folder: &str,
        depth: Option<u32>,
        limit: Option<u32>,
        cursor: Option<String>,
    ) -> Result<Self, NoteError> {
        Ok(FoldersRequest {
            folder: VaultPath::parse_folder(folder)?,
            depth,
            limit,
            cursor,
        })
    }
}

/// `list_folders`: one page of the folder tree under the request's folder, from an up-to-date
/// model.
pub fn folders(
    engine: &crate::engine::Engine,
    req: &FoldersRequest,
) -> Result<FolderPage, NoteError> {
    let model = engine.model()?;
    let p = list_folders(
        &model,
        &req.folder,
        req.depth,
        req.limit,
        req.cursor.as_deref(),
    )?;
    Ok(FolderPage {
        truncated: p.truncated(),
        folders: p.items,
        total: p.total,
        next_cursor: p.next_cursor,
    })
}

/// The folders under `folder` down to `depth` levels, in path order (a tree read top-down),
/// with note and file counts, from the model. Folders holding no visible file are not listed.
pub fn list_folders(
    model: &Model,
    folder: &VaultPath,
    depth: Option<u32>,
    limit: Option<u32>,
    cursor_text: Option<&str>,
) -> Result<super::paging::Page<FolderSummary>, NoteError> {
    let depth = depth.unwrap_or(DEFAULT_FOLDER_DEPTH);
    if !(1..=MAX_FOLDER_DEPTH).contains(&depth) {
        return Err(NoteError::invalid(
            "depth",
            format!("`depth` must be between 1 and {MAX_FOLDER_DEPTH} (got {depth})"),
        ));
    }
    // Every folder of the vault with its counts, once per state of the model.
    crate::model::memo_key!(FolderTree: std::collections::BTreeMap<String, (usize, usize)>);
    let tree = model.memo::<FolderTree>(|| {
        let mut tree: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
        for p in model.files().keys() {
            let note = usize::from(FileKind::of(p) == FileKind::Note);
            let mut end = 0;
            let s = p.as_str();
            while let Some(i) = s[end..].find('/') {
                end += i;
                let e = tree.entry(s[..end].to_owned()).or_insert((0, 0));
                e.0 += note;
                e.1 += 1;
                end += 1;
            }
        }
        tree
    });
    let base = folder.components().count() as u32;
    let prefix = if folder.is_root() {
        String::new()
    } else {
        format!("{folder}/")
    };
    let exists = folder.is_root() || tree.contains_key(folder.as_str());
    if !exists {
        return Err(NoteError::NotFound {
            message: format!("{folder}: no such folder, or it holds no file capvault serves"),
            suggestions: Vec::new(),
        });
    }
    let all: Vec<FolderSummary> = tree
        .range::<str, _>((
            std::ops::Bound::Included(prefix.as_str()),
            std::ops::Bound::Unbounded,
        ))
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(k, (notes, files))| {
            let d = k.matches('/').count() as u32 + 1 - base;
            (d <= depth).then(|| FolderSummary {
                path: k.clone(),
                depth: d,
                notes: *notes,
                files: *files,
            })
        })
        .collect();
    let q = fingerprint(&("folders", folder.as_str(), depth));
    page(all, limit, DEFAULT_LIMIT, MAX_LIMIT, cursor_text, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folders_request_parses_its_folder_and_keeps_the_rest() {
        let r = FoldersRequest::new("Projects/Plans", Some(3), Some(10), Some("c".into())).unwrap();
        assert_eq!(r.folder.as_str(), "Projects/Plans");
        assert_eq!(
            (r.depth, r.limit, r.cursor.as_deref()),
            (Some(3), Some(10), Some("c"))
        );
        assert!(
            FoldersRequest::new("", None, None, None)
                .unwrap()
                .folder
                .is_root()
        );
    }

    #[test]
    fn a_folders_request_refuses_a_folder_outside_the_vault() {
        let e = FoldersRequest::new("../up", None, None, None).unwrap_err();
        assert!(matches!(e, NoteError::Vault(_)), "{e:?}");
    }
}
