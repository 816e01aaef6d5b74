//! The link graph and tag queries over the vault model: `get_links`, `find_broken_links`,
//! `find_orphans`, `get_neighbors`, `list_tags`, `resolve_link`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Serialize;

use super::NoteError;
use super::paging::{Page, fingerprint, page};
use super::search::excerpt;
use crate::markdown::{self, Link, LinkKind, Subpath};
use crate::model::linkres::Resolution;
use crate::model::{Model, Target};
use crate::vault::{Vault, VaultPath};

/// Default and largest page sizes for graph lists.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page a client may ask for.
pub const MAX_LIMIT: u32 = 1000;

/// How a link's target fared.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkStatus {
    /// Opens a file, and its heading or block (if any) exists.
    Resolved,
    /// No file matches.
    Broken,
    /// The file exists but the `#heading` does not.
    MissingHeading,
    /// The file exists but the `#^block` does not.
    MissingBlock,
}

/// One outgoing link.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OutLink {
    /// The link as written, e.g. `[[Plan#Goals|the plan]]`.
    pub raw: String,
    /// The path part of the link, e.g. `Plan`.
    pub target: String,
    /// `#Heading` or `#^block`, when the link has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subpath: Option<String>,
    /// The vault path it opens, or null when broken.
    pub resolved: Option<String>,
    /// wikilink | embed | markdown | frontmatter.
    pub kind: LinkKind,
    /// 1-based line of the link.
    pub line: usize,
    /// Whether the link works.
    pub status: LinkStatus,
}

/// One incoming link (backlink).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InLink {
    /// The note that links here.
    pub source: String,
    /// 1-based line of the link in the source.
    pub line: usize,
    /// The source line, at most 200 characters.
    pub excerpt: String,
}

fn subpath_text(sub: Option<&Subpath>) -> Option<String> {
    match sub {
        None => None,
        Some(Subpath::Heading(chain)) => Some(format!("#{}", chain.join("#"))),
        Some(Subpath::Block(id)) => Some(format!("#^{id}")),
    }
}

fn status(link: &Link, target: &Target) -> LinkStatus {
    match target {
        Target::Broken => LinkStatus::Broken,
        Target::File {
            subpath_ok: true, ..
        } => LinkStatus::Resolved,
        Target::File { .. } => match link.subpath() {
            Some(Subpath::Block(_)) => LinkStatus::MissingBlock,
            _ => LinkStatus::MissingHeading,
        },
    }
}

fn out_link(link: &Link, target: &Target) -> OutLink {
    OutLink {
        raw: link.raw.to_string(),
        target: link.target().to_owned(),
        subpath: subpath_text(link.subpath()),
        resolved: match target {
            Target::File { path, .. } => Some(path.to_string()),
            Target::Broken => None,
        },
        kind: link.kind,
        line: link.pos.line as usize,
        status: status(link, target),
    }
}

/// The outgoing links of a note, in text order.
pub fn outgoing(model: &Model, path: &VaultPath) -> Result<Vec<OutLink>, NoteError> {
    let note = model
        .note(path)
        .ok_or_else(|| NoteError::invalid("path", format!("{path}: not a note of the vault")))?;
    Ok(note
        .parsed
        .links
        .iter()
        .zip(model.targets(note))
        .map(|(l, t)| out_link(l, &t))
        .collect())
}

/// The links into `path` from other notes (and itself), by source path then line. Excerpts are
/// read from the sources, so only the requested page's sources are read.
pub fn incoming(
    model: &Model,
    vault: &Vault,
    path: &VaultPath,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> Result<Page<InLink>, NoteError> {
    if !model.files().contains_key(path) {
        return Err(NoteError::invalid(
            "path",
            format!("{path}: not a file of the vault"),
        ));
    }
    let mut found: Vec<(VaultPath, usize, usize, usize)> = Vec::new(); // source, line, start, end
    for source in model.backlinks(path) {
        let Some(note) = model.note(source) else {
            continue;
        };
        for (l, t) in note.parsed.links.iter().zip(model.targets(note)) {
            if matches!(&t, Target::File { path: p, .. } if p == path) {
                found.push((
                    source.clone(),
                    l.pos.line as usize,
                    l.pos.start as usize,
                    l.pos.end as usize,
                ));
            }
        }
    }
    let query = fingerprint(&("in", path.as_str()));
    let page = page(found, limit, DEFAULT_LIMIT, MAX_LIMIT, cursor, query)?;
    let mut texts: BTreeMap<VaultPath, Option<String>> = BTreeMap::new();
    let items = page
        .items
        .into_iter()
        .map(|(source, line, start, _end)| {
            let text = texts.entry(source.clone()).or_insert_with(|| {
                vault
                    .read_file(&source)
                    .ok()
                    .map(|d| String::from_utf8_lossy(&d.bytes).into_owned())
            });
            let excerpt_text = text
                .as_deref()
                .and_then(|t| t.lines().nth(line.saturating_sub(1)))
                .map(|l| {
                    let line_start = text
                        .as_deref()
                        // The note may have changed since it was parsed: `get` instead of
                        // slicing, so a stale offset off a character boundary cannot panic.
                        .and_then(|t| t.get(..start.min(t.len())))
                        .map(|before| before.rfind('\n').map_or(0, |i| i + 1))
                        .unwrap_or(0);
                    let at = start.saturating_sub(line_start);
                    let chars_before = l.get(..at.min(l.len())).map_or(0, |s| s.chars().count());
                    excerpt(l, chars_before, 1)
                })
                .unwrap_or_default();
            InLink {
                source: source.to_string(),
                line,
                excerpt: excerpt_text,
            }
        })
        .collect();
    Ok(Page {
        items,
        total: page.total,
        next_cursor: page.next_cursor,
    })
}

/// A broken link somewhere in the vault.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BrokenLink {
    /// The note containing the link.
    pub source: String,
    /// 1-based line.
    pub line: usize,
    /// The link as written.
    pub raw: String,
    /// Its path part.
    pub target: String,
    /// broken (no such file) | missing_heading | missing_block.
    pub status: LinkStatus,
}

/// Every broken link of notes under `folder`, by source path then line.
pub fn broken_links(model: &Model, folder: &VaultPath) -> Vec<BrokenLink> {
    let mut out = Vec::new();
    for (path, note) in model.notes() {
        if !path.starts_with(folder) {
            continue;
        }
        for (l, t) in note.parsed.links.iter().zip(model.targets(note)) {
            let s = status(l, &t);
            if s != LinkStatus::Resolved {
                out.push(BrokenLink {
                    source: path.to_string(),
                    line: l.pos.line as usize,
                    raw: l.raw.to_string(),
                    target: l.target().to_owned(),
                    status: s,
                });
            }
        }
    }
    out
}

/// Notes nothing else links to (self-links do not count); with `no_outbound`, only those that
/// also link to nothing.
pub fn orphans(model: &Model, no_outbound: bool) -> Vec<String> {
    model
        .notes()
        .iter()
        .filter(|(path, note)| {
            let inbound = model.backlinks(path).any(|s| s != *path);
            let outbound = model
                .targets(note)
                .any(|t| matches!(&t, Target::File { path: p, .. } if p != *path));
            !(inbound || (no_outbound && outbound))
        })
        .map(|(p, _)| p.to_string())
        .collect()
}

/// Which links `get_neighbors` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Links from the note to others.
    Out,
    /// Links from others to the note.
    In,
    /// Both.
    Both,
}

/// A note reached by `get_neighbors`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Neighbor {
    /// Vault path.
    pub path: String,
    /// Number of links from the start note (1 = direct).
    pub distance: usize,
}

/// Breadth-first neighbours of `start` up to `depth` links away, nearest first, then by path;
/// `hidden` notes (Obsidian's Excluded files) are neither listed nor passed through.
pub fn neighbors(
    model: &Model,
    start: &VaultPath,
    depth: usize,
    direction: Direction,
    hidden: &dyn Fn(&VaultPath) -> bool,
) -> Result<Vec<Neighbor>, NoteError> {
    if !model.files().contains_key(start) {
        return Err(NoteError::invalid(
            "path",
            format!("{start}: not a file of the vault"),
        ));
    }
    let mut seen: BTreeSet<VaultPath> = BTreeSet::from([start.clone()]);
    let mut out = Vec::new();
    let mut queue = VecDeque::from([(start.clone(), 0usize)]);
    while let Some((node, d)) = queue.pop_front() {
        super::cancel::check()?;
        if d == depth {
            continue;
        }
        let mut next: BTreeSet<VaultPath> = BTreeSet::new();
        if direction != Direction::In
            && let Some(note) = model.note(&node)
        {
            for t in model.targets(note) {
                if let Target::File { path, .. } = t {
                    next.insert(path);
                }
            }
        }
        if direction != Direction::Out {
            next.extend(model.backlinks(&node).cloned());
        }
        for n in next {
            if !hidden(&n) && seen.insert(n.clone()) {
                out.push(Neighbor {
                    path: n.to_string(),
                    distance: d + 1,
                });
                queue.push_back((n, d + 1));
            }
        }
    }
    out.sort_by(|a, b| {
        a.distance
            .cmp(&b.distance)
            .then_with(|| a.path.cmp(&b.path))
    });
    Ok(out)
}

/// A tag with the number of notes that carry it or one of its nested tags.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TagCount {
    /// The tag without `#`, as first written in the vault (`Project/Alpha`).
    pub tag: String,
    /// Notes carrying this tag or a tag nested under it.
    pub notes: usize,
}

/// How `list_tags` orders tags.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema, Hash, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum TagSort {
    /// Most notes first, then by name.
    #[default]
    Count,
    /// By name.
    Name,
}

/// Every tag (nested tags rolled up into their parents) under `prefix`. A tag with no nested
/// tags costs one lookup; only parents pay for a union of their children's notes.
pub fn tag_counts(model: &Model, prefix: Option<&str>, sort: TagSort) -> Vec<TagCount> {
    let tags = model.tags();
    let prefix = prefix.map(markdown::normalize_tag);
    let names = tag_names(model);
    let mut out: Vec<TagCount> = names
        .into_iter()
        .filter(|t| {
            prefix
                .as_deref()
                .is_none_or(|p| markdown::tag_matches(t, p))
        })
        .map(|t| {
            let child_prefix = format!("{t}/");
            let mut children = tags
                .range::<str, _>((
                    std::ops::Bound::Included(child_prefix.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(k, _)| k.starts_with(&child_prefix))
                .peekable();
            let notes = if children.peek().is_none() {
                tags.get(t).map_or(0, BTreeSet::len)
            } else {
                let mut all: std::collections::HashSet<&VaultPath> =
                    tags.get(t).into_iter().flatten().collect();
                for (_, set) in children {
                    all.extend(set);
                }
                all.len()
            };
            TagCount {
                tag: display_tag(model, t),
                notes,
            }
        })
        .collect();
    if sort == TagSort::Count {
        out.sort_by(|a, b| {
            b.notes
                .cmp(&a.notes)
                .then_with(|| a.tag.to_lowercase().cmp(&b.tag.to_lowercase()))
        });
    }
    out
}

/// Every distinct tag, normalised, with the parents of nested tags (`a/b` gives `a` and
/// `a/b`): what `list_tags` lists.
fn tag_names(model: &Model) -> BTreeSet<&str> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for tag in model.tags().keys() {
        for (i, c) in tag.char_indices() {
            if c == '/' {
                names.insert(&tag[..i]);
            }
        }
        names.insert(tag);
    }
    names
}

/// How many tags `list_tags` lists: distinct tags, parents of nested tags included. Counted
/// once per state of the model (`vault_info` asks on every call: a set of every tag name cost
/// 0.5 ms at 10,000 notes).
pub fn tag_total(model: &Model) -> usize {
    crate::model::memo_key!(TagTotal: usize);
    *model.memo::<TagTotal>(|| tag_names(model).len())
}

/// The display form of a (possibly rolled-up parent) normalised tag.
fn display_tag(model: &Model, normalized: &str) -> String {
    let shown = model.tag_display(normalized);
    if shown != normalized {
        return shown.to_owned();
    }
    // A parent that never appears alone: take its casing from a child.
    let prefix = format!("{normalized}/");
    model
        .tags()
        .range(prefix.clone()..)
        .next()
        .filter(|(t, _)| t.starts_with(&prefix))
        .and_then(|(t, _)| {
            // The child's display form, cut after as many `/`-separated parts as the parent
            // has (lower-casing can change byte lengths, so cut by parts, not bytes).
            let parts = normalized.split('/').count();
            let shown: Vec<&str> = model.tag_display(t).split('/').take(parts).collect();
            let shown = shown.join("/");
            (markdown::normalize_tag(&shown) == normalized).then_some(shown)
        })
        .unwrap_or_else(|| normalized.to_owned())
}

/// What `resolve_link` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkResolution {
    /// The path Obsidian would open, or null.
    pub resolved: Option<String>,
    /// resolved | broken | ambiguous | missing_heading | missing_block.
    pub status: String,
    /// The link's path part as parsed.
    pub target: String,
    /// `#Heading` or `#^block`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subpath: Option<String>,
    /// Other files the link could have meant (nearest first), when ambiguous.
    pub candidates: Vec<String>,
    /// Notes whose `aliases` match the link text (a hint: aliases are not link targets).
    pub alias_matches: Vec<String>,
    /// A sentence explaining the outcome.
    pub explanation: String,
}

/// Resolves a link (`[[Note#H|alias]]`, `![[img.png]]`, `[t](a%20b.md)` or a bare `Note#H`) as
/// Obsidian would from the note `from`.
pub fn resolve_link(
    model: &Model,
    link: &str,
    from: Option<&VaultPath>,
) -> Result<LinkResolution, NoteError> {
    let link = link.trim();
    if link.is_empty() || link.len() > 4096 {
        return Err(NoteError::invalid(
            "link",
            "link must be 1 to 4096 bytes, like `[[Note#Heading]]` or `Folder/Note`",
        ));
    }
    let parsed = markdown::parse_note(link);
    let bare;
    let l: &Link = match parsed.links.first() {
        Some(l) => l,
        None => {
            let text = if link.starts_with("[[") || link.starts_with("![[") {
                link.to_owned()
            } else {
                format!("[[{link}]]")
            };
            bare = markdown::parse_note(&text);
            bare.links.first().ok_or_else(|| {
                NoteError::invalid("link", format!(
                    "cannot read `{link}` as a link; give `[[Note]]`, `[[Note#Heading]]` or a path"
                ))
            })?
        }
    };
    let subpath = subpath_text(l.subpath());
    let alias_key = crate::model::linkres::key(l.target());
    // Every alias's lookup key and the notes that carry it, once per state of the model.
    crate::model::memo_key!(AliasIndex: std::collections::HashMap<String, Vec<VaultPath>>);
    let aliases = model.memo::<AliasIndex>(|| {
        let mut by_key: std::collections::HashMap<String, Vec<VaultPath>> = Default::default();
        for (p, n) in model.notes() {
            for a in &n.parsed.aliases {
                let list = by_key.entry(crate::model::linkres::key(a)).or_default();
                if list.last() != Some(p) {
                    list.push(p.clone());
                }
            }
        }
        by_key
    });
    let alias_matches: Vec<String> = aliases
        .get(&alias_key)
        .into_iter()
        .flatten()
        .take(20)
        .map(|p| p.to_string())
        .collect();
    let (resolved, candidates, status, explanation) = match model.resolve(l.target(), from) {
        Resolution::NotFound => {
            let why = if alias_matches.is_empty() {
                format!("no file matches `{}`", l.target())
            } else {
                format!(
                    "no file matches `{}`, but it is an alias of {}; Obsidian links to the note's name, like `[[{}|{}]]`",
                    l.target(),
                    alias_matches.join(", "),
                    alias_matches[0].trim_end_matches(".md"),
                    l.target()
                )
            };
            (None, Vec::new(), "broken".to_owned(), why)
        }
        Resolution::Found { path, alternatives } => {
            let target = model.target_of(l, from.unwrap_or(&path));
            let st = status(l, &target);
            let (status, explanation) = match st {
                LinkStatus::MissingHeading => (
                    "missing_heading",
                    format!(
                        "{path} exists but has no heading {}",
                        subpath.clone().unwrap_or_default()
                    ),
                ),
                LinkStatus::MissingBlock => (
                    "missing_block",
                    format!(
                        "{path} exists but has no block {}",
                        subpath.clone().unwrap_or_default()
                    ),
                ),
                _ if !alternatives.is_empty() => (
                    "ambiguous",
                    format!(
                        "{} files match; Obsidian opens {path}, the nearest to the linking note",
                        alternatives.len() + 1
                    ),
                ),
                _ => ("resolved", format!("opens {path}")),
            };
            (
                Some(path.to_string()),
                alternatives.iter().map(|p| p.to_string()).collect(),
                status.to_owned(),
                explanation,
            )
        }
    };
    Ok(LinkResolution {
        resolved,
        status,
        target: l.target().to_owned(),
        subpath,
        candidates,
        alias_matches,
        explanation,
    })
}
