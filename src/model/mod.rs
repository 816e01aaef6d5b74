//! The vault model: every note parsed, with the tag index, forward links and backlinks.
//!
//! Built by one scan through the capability layer ([`Model::changes_under`], in `scan.rs`: the
//! disk side) and kept current by the engine's reconciles: a stat-based reconcile (size, modification time, inode) that re-reads only notes that changed
//! and applies the difference ([`Model::apply`]). Link resolution depends on which files exist and
//! on the headings and block ids of target notes, so a change re-resolves exactly the notes whose
//! links it can affect: those that link to the changed note, and those whose link targets name an
//! added or removed file.
//!
//! ## How a build goes
//!
//! - **Scan, read, parse** ([`Model::changes_under`]): one thread walks the vault through the
//!   capability layer, reading each new or changed note through the folder handle the walk
//!   already holds (no path walk from the root per file), and hands the texts in batches to the
//!   rayon pool, which parses them (and feeds the search index through the callback) while the
//!   walk goes on.
//! - **Apply** ([`Model::apply`]): on the first build, every file gets an integer id in path
//!   order, links are resolved in parallel against the immutable file index, and the backlinks,
//!   tag and link-name indexes are built in bulk (sorted inputs, so the ordered maps are built
//!   without rebalancing). Later batches re-resolve only what they can affect, in parallel too.
//!
//! Backlinks are lists of note ids per file id, kept in path order; the index from link names to
//! the notes using them is keyed by a hash of the name (a collision only makes a refresh re-check
//! a note that did not need it). No note text is kept in memory, only what the parser extracted.
//!
//! Beside the model: its memo of whole-vault answers (`memo.rs`), the recency order
//! (`recent.rs`), the counts by kind of file (`counts.rs`) and the subpath cache that link
//! resolution uses (`subpaths.rs`).

mod counts;
pub mod dataview;
pub mod linkres;
mod memo;
mod recent;
mod scan;
mod subpaths;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, RwLock, RwLockReadGuard, mpsc};
use std::time::{Instant, SystemTime};

use rayon::prelude::*;

use crate::locks::{read, write};
use crate::markdown::{self, Link, ParsedNote};
use crate::vault::{FileMeta, Vault, VaultError, VaultPath, is_note_name};
use dataview::{NoteData, Task};
use linkres::{FileIndex, HashKeyed, LinkRef, Resolution, Scratch, key_into};
use subpaths::SubpathCache;

pub use counts::{FileCounts, FileKind};
pub(crate) use memo::memo_key;
pub use memo::{Memo, MemoKey};
pub use recent::Recent;
pub use subpaths::{heading_key, subpath_exists};

/// Most tags, headings, block ids and links (each) the model keeps of one note; the rest are
/// counted ([`ParsedNote::omitted`]) and logged. With them a note costs the model at most a few
/// megabytes whatever its size (a 5.9 MB note of headings cost 253 MB), while a real index note
/// has a few thousand links. Reads parse the note afresh and show everything.
pub const MAX_ITEMS_PER_NOTE: usize = 20_000;

/// Where one link leads, as Obsidian would open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file of the vault; `subpath_ok` is false when its `#heading` or `#^block` is missing.
    File {
        /// The file opened.
        path: VaultPath,
        /// False when the heading or block named by the link does not exist in the target.
        subpath_ok: bool,
    },
    /// Nothing matches: a broken link.
    Broken,
}

/// One parsed note with its links resolved.
#[derive(Debug, Clone)]
pub struct Note {
    /// Size, time and inode when parsed.
    pub meta: FileMeta,
    /// What the parser extracted.
    pub parsed: ParsedNote,
    /// Where each of `parsed.links` leads (same order), as file ids: see [`Model::targets`].
    targets: Vec<LinkTo>,
}

/// Where one link leads, in 4 bytes (the model keeps one per link of the vault): a file id and
/// whether its subpath exists, or broken. Ids held here are never stale: a removed file's id is
/// released only after every note that reached it was relinked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LinkTo(u32);

impl LinkTo {
    const BROKEN: LinkTo = LinkTo(u32::MAX);

    fn file(id: u32, subpath_ok: bool) -> LinkTo {
        // Ids are below 2^31: that many files would not fit in memory.
        debug_assert!(id < u32::MAX >> 1);
        LinkTo((id << 1) | u32::from(subpath_ok))
    }

    /// The file id, unless broken.
    fn id(self) -> Option<u32> {
        (self != LinkTo::BROKEN).then_some(self.0 >> 1)
    }
}

/// How a refresh went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Files seen by the scan.
    pub files: usize,
    /// Notes (re)parsed.
    pub parsed: usize,
    /// Files removed since the last refresh.
    pub removed: usize,
    /// Notes whose links were re-resolved.
    pub relinked: usize,
}

/// A change to apply to the model.
// Most changes are notes, so boxing the large variant would add an allocation per note and
// save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Change {
    /// A note was added or modified: its metadata, parse and Dataview data.
    Note(VaultPath, FileMeta, ParsedNote, NoteData),
    /// Another file (attachment, canvas) was added or modified.
    File(VaultPath, FileMeta),
    /// A file was removed.
    Removed(VaultPath),
}

/// One note as a refresh read it, handed to [`Model::changes_since_with`]'s callback.
#[derive(Debug, Clone, Copy)]
pub struct NoteRead<'a> {
    /// The note.
    pub path: &'a VaultPath,
    /// Its metadata from the scan.
    pub meta: &'a FileMeta,
    /// Its text (invalid UTF-8 replaced).
    pub text: &'a str,
    /// What the parser extracted.
    pub parsed: &'a ParsedNote,
}

/// The model of one vault.
#[derive(Debug, Default)]
pub struct Model {
    /// Every visible regular file and its metadata.
    files: BTreeMap<VaultPath, FileMeta>,
    /// The same files, with their ids, indexed for link resolution.
    index: FileIndex,
    /// Parsed notes.
    notes: BTreeMap<VaultPath, Note>,
    /// Normalised tag → notes carrying it (exactly, not rolled up).
    tags: BTreeMap<String, BTreeSet<VaultPath>>,
    /// Normalised tag → the casing first seen, for display, where it differs from the
    /// normalised form.
    tag_display: HashMap<String, String>,
    /// Property key → how many notes have it in their frontmatter.
    property_keys: HashMap<Box<str>, u32>,
    /// File id → ids of the notes that link to it (resolved links only), in path order.
    backlinks: Vec<Vec<u32>>,
    /// hash(key(file name a link target would match)) → ids of notes with such a link.
    by_link_name: HashKeyed<Vec<u32>>,
    /// When the last refresh finished.
    refreshed_at: Option<SystemTime>,
    /// How long the first full build took.
    build_time: Option<std::time::Duration>,
    /// How many files of each kind `files` holds.
    counts: FileCounts,
    /// Every file, newest first then by path: what `list_notes` pages through.
    recent: BTreeSet<Recent>,
    /// The Dataview data (page inline fields, tasks) of the notes that have any.
    dataview: BTreeMap<VaultPath, NoteData>,
    /// Tasks in `dataview`.
    task_count: usize,
    /// The tasks with a Tasks due date (📅): (due, note, index in its `tasks`).
    by_due: BTreeSet<(chrono::NaiveDate, VaultPath, u32)>,
    /// Whole-vault answers computed from this state of the model (orphans, broken links, tag
    /// counts), kept until the next change.
    memo: Memo,
}

/// RFC 3339 in UTC with millisecond precision: how every time is written in replies.
pub fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Nanoseconds since the epoch (0 before it).
pub fn nanos(t: SystemTime) -> u128 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// What resolving one note's links gives: the targets (same order as the links), the ids of
/// the files reached (sorted, each once) for the backlinks, and the hashes of the links' name
/// keys (sorted, each once) for the link-name index.
struct Resolved {
    targets: Vec<LinkTo>,
    reached: Vec<u32>,
    names: Vec<u64>,
}

impl Model {
    /// Number of notes.
    pub fn note_count(&self) -> usize {
        self.notes.len()
    }

    /// Every file (notes, attachments, canvases) with its metadata, in path order.
    pub fn files(&self) -> &BTreeMap<VaultPath, FileMeta> {
        &self.files
    }

    /// The parsed notes, in path order.
    pub fn notes(&self) -> &BTreeMap<VaultPath, Note> {
        &self.notes
    }

    /// One note.
    pub fn note(&self, path: &VaultPath) -> Option<&Note> {
        self.notes.get(path)
    }

    /// The Dataview data of the notes that have inline fields or tasks, in path order.
    pub fn dataview(&self) -> &BTreeMap<VaultPath, NoteData> {
        &self.dataview
    }

    /// The Dataview data of one note (`None`: it has no inline field and no task, or is not a
    /// note of the model).
    pub fn note_dataview(&self, path: &VaultPath) -> Option<&NoteData> {
        self.dataview.get(path)
    }

    /// A note's page inline fields (outside lists and on list items that are not tasks), in
    /// text order.
    pub fn inline_fields(&self, path: &VaultPath) -> &[dataview::Field] {
        self.dataview.get(path).map_or(&[], |d| &d.fields)
    }

    /// Every task of the vault, by path then line.
    pub fn tasks(&self) -> impl Iterator<Item = (&VaultPath, &Task)> {
        self.dataview
            .iter()
            .flat_map(|(p, d)| d.tasks.iter().map(move |t| (p, t)))
    }

    /// The tasks due strictly after `after` and strictly before `before` (either may be left
    /// open), by due date then path and line.
    pub fn tasks_due(
        &self,
        after: Option<chrono::NaiveDate>,
        before: Option<chrono::NaiveDate>,
    ) -> impl Iterator<Item = (&VaultPath, &Task)> {
        use std::ops::Bound;
        let low = match after.and_then(|a| a.succ_opt()) {
            Some(d) => Bound::Included((d, VaultPath::root(), 0)),
            None if after.is_some() => {
                Bound::Excluded((chrono::NaiveDate::MAX, VaultPath::root(), u32::MAX))
            }
            None => Bound::Unbounded,
        };
        let high = match before {
            Some(b) => Bound::Excluded((b, VaultPath::root(), 0)),
            None => Bound::Unbounded,
        };
        let empty = matches!((&low, &high), (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h)) if l >= h);
        let range = if empty {
            None
        } else {
            Some(self.by_due.range((low, high)))
        };
        range.into_iter().flatten().filter_map(|(_, p, i)| {
            let task = self.dataview.get(p)?.tasks.get(*i as usize)?;
            Some((p, task))
        })
    }

    /// How many tasks the vault has.
    pub fn task_count(&self) -> usize {
        self.task_count
    }

    /// Where each of `note.parsed.links` leads (same order). `note` is one of this model's.
    pub fn targets<'a>(&'a self, note: &'a Note) -> impl Iterator<Item = Target> + 'a {
        note.targets
            .iter()
            .map(|t| match t.id().and_then(|id| self.index.path(id)) {
                Some(path) => Target::File {
                    path: path.clone(),
                    subpath_ok: t.0 & 1 == 1,
                },
                None => Target::Broken,
            })
    }

    /// Every file, indexed for link resolution (a move clones it to resolve links as they
    /// would be after the move).
    pub fn file_index(&self) -> &FileIndex {
        &self.index
    }

    /// Notes with a link whose last path segment has the key `name_key` (one of
    /// [`FileIndex::file_name_keys`] of a file: the links that can reach a file of that name,
    /// resolved or not). May include a note whose link only shares the key's hash.
    pub fn notes_linking_name(&self, name_key: &str) -> impl Iterator<Item = &VaultPath> {
        let h = self.index.hash_key(name_key);
        self.by_link_name
            .get(&h)
            .into_iter()
            .flatten()
            .filter_map(|&id| self.index.path(id))
    }

    /// Notes that link to `path` (resolved links), in path order.
    pub fn backlinks(&self, path: &VaultPath) -> impl Iterator<Item = &VaultPath> {
        self.index
            .id(path)
            .and_then(|id| self.backlinks.get(id as usize))
            .into_iter()
            .flatten()
            .filter_map(|&source| self.index.path(source))
    }

    /// Every property key in the notes' frontmatter, with how many notes have it.
    pub fn property_keys(&self) -> &HashMap<Box<str>, u32> {
        &self.property_keys
    }

    /// The tag index: normalised tag → notes with exactly that tag.
    pub fn tags(&self) -> &BTreeMap<String, BTreeSet<VaultPath>> {
        &self.tags
    }

    /// How a normalised tag was first written.
    pub fn tag_display<'a>(&'a self, normalized: &'a str) -> &'a str {
        self.tag_display
            .get(normalized)
            .map(String::as_str)
            .unwrap_or(normalized)
    }

    /// Resolves a link target as Obsidian would, from `from`.
    pub fn resolve(&self, target: &str, from: Option<&VaultPath>) -> Resolution {
        self.index.resolve(target, from)
    }

    /// When the model was last brought up to date.
    pub fn refreshed_at(&self) -> Option<SystemTime> {
        self.refreshed_at
    }

    /// How long the first full build took.
    pub fn build_time(&self) -> Option<std::time::Duration> {
        self.build_time
    }

    /// Applies a batch of changes, then re-resolves the links they can affect. Returns how many
    /// notes were relinked.
    pub fn apply(&mut self, changes: Vec<Change>) -> usize {
        self.memo.clear();
        if self.files.is_empty() {
            self.build(changes)
        } else {
            self.update(changes)
        }
    }

    /// The first build: everything at once, in bulk and in parallel.
    fn build(&mut self, changes: Vec<Change>) -> usize {
        let mut dataview: Vec<(VaultPath, NoteData)> = Vec::new();
        let entries: Vec<(VaultPath, FileMeta, Option<ParsedNote>)> = changes
            .into_iter()
            .filter_map(|c| match c {
                Change::Note(path, meta, parsed, data) => {
                    dataview.push((path.clone(), data));
                    Some((path, meta, Some(parsed)))
                }
                Change::File(path, meta) => Some((path, meta, None)),
                Change::Removed(_) => None,
            })
            .collect();
        // Path order (ids follow it, so every list of ids built in id order is in path order).
        // The entries are large: sort their positions, then move each once. Of several changes
        // to one path, the last is kept.
        let mut order: Vec<(VaultPath, usize)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.0.clone(), i))
            .collect();
        order.par_sort_unstable();
        order.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 = next.1;
            }
            same
        });
        let mut slots: Vec<Option<(VaultPath, FileMeta, Option<ParsedNote>)>> =
            entries.into_iter().map(Some).collect();
        let entries: Vec<(VaultPath, FileMeta, Option<ParsedNote>)> = order
            .into_iter()
            .filter_map(|(_, i)| slots[i].take())
            .collect();
        drop(slots);

        self.index = FileIndex::from_sorted(entries.iter().map(|e| &e.0));
        self.backlinks = vec![Vec::new(); self.index.id_bound()];

        // Resolve every link in parallel against the finished index. Ids are positions in
        // `entries`, which is in path order like the index was filled.
        let index = &self.index;
        let parsed_of = |id: u32| entries.get(id as usize).and_then(|e| e.2.as_ref());
        // Per note: its links resolved, and its tags (the hash of the normalised form, and the
        // name as the note writes it), while its parse is in the cache. The normalised text is not kept:
        // half a million short strings held at once would raise the build's peak.
        type NoteTags<'e> = Vec<(u64, &'e str)>;
        let resolved: Vec<(Option<Resolved>, NoteTags<'_>)> = entries
            .par_chunks(RESOLVE_CHUNK)
            .enumerate()
            .map_init(Lookups::default, |(scratch, subpaths), (chunk, run)| {
                let first = chunk * RESOLVE_CHUNK;
                let notes: Vec<(u32, &VaultPath, &ParsedNote)> = run
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (path, _, parsed))| {
                        Some(((first + i) as u32, path, parsed.as_ref()?))
                    })
                    .collect();
                let mut resolved =
                    resolve_notes(index, &notes, scratch, subpaths, &parsed_of).into_iter();
                run.iter()
                    .map(|(_, _, parsed)| {
                        let tags = parsed.as_ref().map_or_else(Vec::new, |p| {
                            note_tags(p)
                                .into_iter()
                                .map(|(norm, shown)| (index.hash_key(&norm), shown))
                                .collect()
                        });
                        (parsed.as_ref().and_then(|_| resolved.next()), tags)
                    })
                    .collect::<Vec<_>>()
            })
            .flat_map_iter(Vec::into_iter)
            .collect();
        // Backlinks: sources visited in id order, so every list comes out in path order.
        let (mut resolved, note_tags): (Vec<Option<Resolved>>, Vec<NoteTags<'_>>) =
            resolved.into_iter().unzip();
        let mut counts = vec![0u32; self.backlinks.len()];
        for r in resolved.iter().flatten() {
            for &t in &r.reached {
                counts[t as usize] += 1;
            }
        }
        for (list, &n) in self.backlinks.iter_mut().zip(&counts) {
            list.reserve_exact(n as usize);
        }
        // The per-note lists are freed as they are used up: this is the build's peak.
        for (source, r) in resolved.iter_mut().enumerate() {
            for &t in r.iter().flat_map(|r| &r.reached) {
                self.backlinks[t as usize].push(source as u32);
            }
            if let Some(r) = r {
                r.reached = Vec::new();
            }
        }
        let mut name_rows: Vec<(u64, u32)> =
            Vec::with_capacity(resolved.iter().flatten().map(|r| r.names.len()).sum());
        for (id, r) in resolved.iter_mut().enumerate() {
            if let Some(r) = r {
                name_rows.extend(
                    std::mem::take(&mut r.names)
                        .into_iter()
                        .map(|h| (h, id as u32)),
                );
            }
        }
        // The link-name index, the tag index and the file map are independent: built side by
        // side. Tags and link names are grouped by sorting rows keyed by hashes (no string
        // comparisons, no hash-table probe per row).
        let link_names = move || {
            let mut rows = name_rows;
            rows.par_sort_unstable();
            let mut by_link_name: HashKeyed<Vec<u32>> = HashKeyed::default();
            by_link_name.reserve(rows.chunk_by(|a, b| a.0 == b.0).count());
            for group in rows.chunk_by(|a, b| a.0 == b.0) {
                by_link_name.insert(group[0].0, group.iter().map(|r| r.1).collect());
            }
            by_link_name
        };
        let tag_index = || {
            let mut rows: Vec<(u64, u32, &str)> =
                Vec::with_capacity(note_tags.iter().map(Vec::len).sum());
            for (id, tags) in note_tags.into_iter().enumerate() {
                rows.extend(tags.into_iter().map(|(h, shown)| (h, id as u32, shown)));
            }
            rows.par_sort_unstable_by_key(|r| (r.0, r.1));
            let groups: Vec<&[(u64, u32, &str)]> = rows.chunk_by(|a, b| a.0 == b.0).collect();
            // Each tag: its notes (ids ascending, so paths in order: the set is built in bulk)
            // and how its first note (in path order) writes it. Rows that merely share a hash
            // are told apart by their normalised text, worked out again here (a row written
            // exactly as a tag already seen in the group is that tag).
            let mut tags: Vec<(String, BTreeSet<VaultPath>, &str)> = groups
                .into_par_iter()
                .flat_map_iter(|group| {
                    let mut split: Vec<(String, Vec<u32>, &str)> = Vec::new();
                    for &(_, id, name) in group {
                        if let Some(s) = split.iter_mut().find(|s| s.2 == name) {
                            s.1.push(id);
                            continue;
                        }
                        let norm = markdown::normalize_tag(name);
                        match split.iter_mut().find(|s| s.0 == norm) {
                            Some(s) => s.1.push(id),
                            None => split.push((norm, vec![id], name)),
                        }
                    }
                    split.into_iter().map(|(norm, ids, shown)| {
                        let set = ids
                            .iter()
                            .filter_map(|&id| entries.get(id as usize).map(|e| e.0.clone()))
                            .collect();
                        (norm, set, shown_tag(shown))
                    })
                })
                .collect();
            tags.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let display: HashMap<String, String> = tags
                .iter()
                .filter(|(norm, _, shown)| norm != shown)
                .map(|(norm, _, shown)| (norm.clone(), (*shown).to_owned()))
                .collect();
            let tags: BTreeMap<String, BTreeSet<VaultPath>> =
                tags.into_iter().map(|(norm, set, _)| (norm, set)).collect();
            (tags, display)
        };
        let file_map = || -> BTreeMap<VaultPath, FileMeta> {
            entries.iter().map(|(p, m, _)| (p.clone(), *m)).collect()
        };
        let (by_link_name, ((tags, tag_display), files)) =
            rayon::join(link_names, || rayon::join(tag_index, file_map));
        self.by_link_name = by_link_name;
        self.tags = tags;
        self.tag_display = tag_display;
        self.files = files;
        self.count_files();
        let notes: BTreeMap<VaultPath, Note> = entries
            .into_iter()
            .zip(resolved)
            .filter_map(|((path, meta, parsed), r)| {
                Some((
                    path,
                    Note {
                        meta,
                        parsed: parsed?,
                        targets: r.map(|r| r.targets).unwrap_or_default(),
                    },
                ))
            })
            .collect();
        self.notes = notes;
        let mut property_keys: HashMap<Box<str>, u32> = HashMap::new();
        for note in self.notes.values() {
            count_property_keys(&mut property_keys, &note.parsed, true);
        }
        self.property_keys = property_keys;
        // Of several changes to one path, the last is kept (as above); empty data is not kept.
        dataview.reverse();
        dataview.sort_by(|a, b| a.0.cmp(&b.0));
        dataview.dedup_by(|next, kept| next.0 == kept.0);
        self.dataview = dataview
            .into_iter()
            .filter(|(_, d)| !d.is_empty())
            .collect();
        self.task_count = self.dataview.values().map(|d| d.tasks.len()).sum();
        let mut by_due: Vec<(chrono::NaiveDate, VaultPath, u32)> = self
            .dataview
            .iter()
            .flat_map(|(p, d)| due_entries(p, d))
            .collect();
        by_due.sort_unstable();
        self.by_due = by_due.into_iter().collect();
        self.notes.len()
    }

    /// A later batch: applied change by change, then the affected notes are relinked.
    fn update(&mut self, changes: Vec<Change>) -> usize {
        let mut relink: Vec<u32> = Vec::new();
        let mut names_changed: Vec<u64> = Vec::new();
        let mut released: Vec<u32> = Vec::new();
        for change in changes {
            match change {
                Change::Note(path, meta, parsed, data) => {
                    self.put_dataview(&path, data);
                    let id = self.add_file(&path, &mut names_changed);
                    self.put_file(path.clone(), meta);
                    // Notes linking here may gain or lose a heading or block.
                    relink.extend_from_slice(&self.backlinks[id as usize]);
                    // Its old links stop counting before its parse is replaced.
                    self.unlink_sources(id);
                    self.remove_note_entries(id);
                    self.add_note_entries(id, &path, &parsed);
                    self.notes.insert(
                        path,
                        Note {
                            meta,
                            parsed,
                            targets: Vec::new(),
                        },
                    );
                    relink.push(id);
                }
                Change::File(path, meta) => {
                    self.add_file(&path, &mut names_changed);
                    self.put_file(path, meta);
                }
                Change::Removed(path) => {
                    if self.drop_file(&path).is_none() {
                        continue;
                    }
                    self.put_dataview(&path, NoteData::default());
                    let Some(id) = self.index.id(&path) else {
                        continue;
                    };
                    names_changed.extend(self.file_name_hashes(path.file_name()));
                    // Its sources relink (to another file or to nothing).
                    let sources = std::mem::take(&mut self.backlinks[id as usize]);
                    relink.extend(sources);
                    if self.notes.contains_key(&path) {
                        self.remove_note_entries(id);
                        self.unlink_sources(id);
                        self.notes.remove(&path);
                    }
                    self.index.remove(&path);
                    // Not reused within this batch: ids in `relink` must stay unambiguous.
                    released.push(id);
                }
            }
        }
        for h in &names_changed {
            if let Some(sources) = self.by_link_name.get(h) {
                relink.extend_from_slice(sources);
            }
        }
        relink.sort_unstable();
        relink.dedup();
        relink.retain(|&id| {
            self.index
                .path(id)
                .is_some_and(|p| self.notes.contains_key(p))
        });
        self.relink(&relink);
        for id in released {
            self.index.release(id);
        }
        relink.len()
    }

    /// Replaces the Dataview data of `path` (empty data: none kept).
    fn put_dataview(&mut self, path: &VaultPath, data: NoteData) {
        let old = if data.is_empty() {
            self.dataview.remove(path)
        } else {
            self.task_count += data.tasks.len();
            self.by_due.extend(due_entries(path, &data));
            self.dataview.insert(path.clone(), data)
        };
        if let Some(old) = old {
            self.task_count -= old.tasks.len();
            for entry in due_entries(path, &old) {
                // An entry the new data has too (same date, same place) stays.
                let kept = self
                    .dataview
                    .get(path)
                    .and_then(|d| d.tasks.get(entry.2 as usize))
                    .is_some_and(|t| t.tasks.due == Some(entry.0));
                if !kept {
                    self.by_due.remove(&entry);
                }
            }
        }
    }

    /// Indexes `path` if it is new (noting the link names it can now satisfy); returns its id.
    fn add_file(&mut self, path: &VaultPath, names_changed: &mut Vec<u64>) -> u32 {
        if let Some(id) = self.index.id(path) {
            return id;
        }
        let id = self.index.insert(path);
        if self.backlinks.len() < self.index.id_bound() {
            self.backlinks.resize_with(self.index.id_bound(), Vec::new);
        }
        names_changed.extend(self.file_name_hashes(path.file_name()));
        id
    }

    /// Hashes of the link-name keys a file named `file_name` can satisfy.
    fn file_name_hashes(&self, file_name: &str) -> Vec<u64> {
        FileIndex::file_name_keys(file_name)
            .iter()
            .map(|k| self.index.hash_key(k))
            .collect()
    }

    /// Re-resolves the links of `sources` (ids of notes, sorted): in parallel, then the
    /// backlinks are updated.
    fn relink(&mut self, sources: &[u32]) {
        let index = &self.index;
        let notes = &self.notes;
        let parsed_of = |id: u32| index.path(id).and_then(|p| notes.get(p)).map(|n| &n.parsed);
        let resolved: Vec<(u32, Resolved)> = sources
            .par_chunks(RESOLVE_CHUNK)
            .map_init(Lookups::default, |(scratch, subpaths), run| {
                let notes: Vec<(u32, &VaultPath, &ParsedNote)> = run
                    .iter()
                    .filter_map(|&id| {
                        let path = index.path(id)?;
                        Some((id, path, &notes.get(path)?.parsed))
                    })
                    .collect();
                let resolved = resolve_notes(index, &notes, scratch, subpaths, &parsed_of);
                notes.iter().map(|n| n.0).zip(resolved).collect::<Vec<_>>()
            })
            .flat_map_iter(Vec::into_iter)
            .collect();
        for (id, r) in resolved {
            self.unlink_sources(id);
            for &t in &r.reached {
                self.link_source(t, id);
            }
            if let Some(note) = self.index.path(id).and_then(|p| self.notes.get_mut(p)) {
                note.targets = r.targets;
            }
        }
    }

    /// Records that note `source` links to file `target`, keeping the list in path order.
    fn link_source(&mut self, target: u32, source: u32) {
        let index = &self.index;
        let Some(list) = self.backlinks.get_mut(target as usize) else {
            return;
        };
        let key = index.path(source);
        if let Err(at) = list.binary_search_by(|&x| index.path(x).cmp(&key)) {
            list.insert(at, source);
        }
    }

    /// Drops note `source` from the backlinks of every file it resolved to.
    fn unlink_sources(&mut self, source: u32) {
        let Some(note) = self.index.path(source).and_then(|p| self.notes.get(p)) else {
            return;
        };
        let mut reached: Vec<u32> = note.targets.iter().filter_map(|t| t.id()).collect();
        reached.sort_unstable();
        reached.dedup();
        let index = &self.index;
        let key = index.path(source);
        for t in reached {
            if let Some(list) = self.backlinks.get_mut(t as usize)
                && let Ok(at) = list.binary_search_by(|&x| index.path(x).cmp(&key))
            {
                list.remove(at);
            }
        }
    }

    /// Removes what note `id`'s previous parse contributed to the tag and link-name indexes.
    fn remove_note_entries(&mut self, id: u32) {
        let Some(path) = self.index.path(id).cloned() else {
            return;
        };
        let Some(old) = self.notes.get(&path) else {
            return;
        };
        let tags: Vec<String> = note_tags(&old.parsed).into_iter().map(|t| t.0).collect();
        let names = link_name_hashes(&self.index, &old.parsed, &mut String::new());
        count_property_keys(&mut self.property_keys, &old.parsed, false);
        for t in tags {
            if let Some(set) = self.tags.get_mut(&t) {
                set.remove(&path);
                if set.is_empty() {
                    self.tags.remove(&t);
                    self.tag_display.remove(&t);
                }
            }
        }
        for h in names {
            if let Some(list) = self.by_link_name.get_mut(&h) {
                list.retain(|&x| x != id);
                if list.is_empty() {
                    self.by_link_name.remove(&h);
                }
            }
        }
    }

    fn add_note_entries(&mut self, id: u32, path: &VaultPath, parsed: &ParsedNote) {
        count_property_keys(&mut self.property_keys, parsed, true);
        for (norm, name) in note_tags(parsed) {
            let shown = shown_tag(name);
            match self.tags.get_mut(&norm) {
                Some(set) => {
                    set.insert(path.clone());
                }
                None => {
                    if shown != norm {
                        self.tag_display.insert(norm.clone(), shown.to_owned());
                    }
                    self.tags.insert(norm, BTreeSet::from([path.clone()]));
                }
            }
        }
        for h in link_name_hashes(&self.index, parsed, &mut String::new()) {
            self.by_link_name.entry(h).or_default().push(id);
        }
    }

    /// Where `link` in `source` leads.
    pub fn target_of(&self, link: &Link, source: &VaultPath) -> Target {
        match self.index.resolve(link.target(), Some(source)) {
            Resolution::Found { path, .. } => {
                let subpath_ok = match (link.subpath(), self.notes.get(&path)) {
                    (None, _) => true,
                    (Some(sub), Some(target)) => subpath_exists(&target.parsed, sub),
                    // A subpath into a non-note (a PDF page is not a subpath) cannot be checked.
                    (Some(_), None) => true,
                };
                Target::File { path, subpath_ok }
            }
            Resolution::NotFound => Target::Broken,
        }
    }

    /// Records that a refresh that began at `started` is complete.
    pub fn mark_refreshed(&mut self, started: Instant) {
        if self.refreshed_at.is_none() {
            self.build_time = Some(started.elapsed());
        }
        self.refreshed_at = Some(SystemTime::now());
    }
}

/// The `by_due` entries of a note's tasks.
fn due_entries<'a>(
    path: &'a VaultPath,
    data: &'a NoteData,
) -> impl Iterator<Item = (chrono::NaiveDate, VaultPath, u32)> + 'a {
    data.tasks
        .iter()
        .enumerate()
        .filter_map(move |(i, t)| Some((t.tasks.due?, path.clone(), u32::try_from(i).ok()?)))
}

/// How many notes have their links resolved as one batch ([`FileIndex::resolve_batch`]).
const RESOLVE_CHUNK: usize = 32;

/// Resolves every link of `notes` (id, path, parse), as one batch. `parsed_of` gives the parse
/// of a target note (for `#heading` and `#^block` subpaths).
fn resolve_notes<'n>(
    index: &FileIndex,
    notes: &[(u32, &VaultPath, &ParsedNote)],
    scratch: &mut Scratch,
    subpaths: &mut SubpathCache,
    parsed_of: &dyn Fn(u32) -> Option<&'n ParsedNote>,
) -> Vec<Resolved> {
    let links: Vec<LinkRef<'_>> = notes
        .iter()
        .flat_map(|&(from, from_path, parsed)| {
            parsed.links.iter().map(move |l| LinkRef {
                target: l.target(),
                from,
                from_path,
            })
        })
        .collect();
    let mut found = Vec::with_capacity(links.len());
    let mut names = Vec::with_capacity(links.len());
    index.resolve_batch(&links, scratch, &mut found, &mut names);
    let mut found = found.into_iter();
    let mut names = names.into_iter();
    notes
        .iter()
        .map(|(_, _, parsed)| {
            let mut note_names: Vec<u64> = names.by_ref().take(parsed.links.len()).collect();
            note_names.sort_unstable();
            note_names.dedup();
            let mut reached = Vec::new();
            let targets = parsed
                .links
                .iter()
                .map(|link| {
                    let Some(t) = found.next().flatten() else {
                        return LinkTo::BROKEN;
                    };
                    if index.path(t).is_none() {
                        return LinkTo::BROKEN;
                    }
                    let subpath_ok = match (link.subpath(), parsed_of(t)) {
                        (None, _) => true,
                        (Some(sub), Some(target)) => subpaths.exists(t, target, sub),
                        // A subpath into a non-note (a PDF page is not a subpath) cannot be
                        // checked.
                        (Some(_), None) => true,
                    };
                    reached.push(t);
                    LinkTo::file(t, subpath_ok)
                })
                .collect();
            reached.sort_unstable();
            reached.dedup();
            Resolved {
                targets,
                reached,
                names: note_names,
            }
        })
        .collect()
}

/// The normalised tags of a note, each once, with its name as the note first writes it (shown
/// as [`shown_tag`]).
fn note_tags(parsed: &ParsedNote) -> Vec<(String, &str)> {
    let mut out = parsed.distinct_tags();
    out.retain(|(norm, _)| !norm.is_empty());
    out
}

/// How a tag is shown: its name as written, without `#`.
fn shown_tag(name: &str) -> &str {
    name.trim_start_matches('#')
}

/// Hashes of the link-name keys of a note's links, each once: the key under which the model
/// remembers which notes link to a target is its last path segment (`note` for
/// `[[Folder/Note#H]]`'s target `Folder/Note`).
fn link_name_hashes(index: &FileIndex, parsed: &ParsedNote, buf: &mut String) -> Vec<u64> {
    let mut out: Vec<u64> = parsed
        .links
        .iter()
        .map(|l| {
            let target = l.target().trim();
            key_into(target.rsplit('/').next().unwrap_or(target), buf);
            index.hash_key(buf)
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// What one thread of a build or relink reuses from note to note: the link resolver's buffers
/// and the subpath lookups.
type Lookups = (Scratch, SubpathCache);

/// Counts a note's property keys in (`add`) or out of `counts`; a key no note has any more
/// is removed.
fn count_property_keys(counts: &mut HashMap<Box<str>, u32>, parsed: &ParsedNote, add: bool) {
    for (k, _) in parsed
        .frontmatter
        .properties()
        .into_iter()
        .flat_map(|p| p.iter())
    {
        match counts.get_mut(k) {
            Some(n) if add => *n += 1,
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    counts.remove(k);
                }
            }
            None if add => {
                counts.insert(k.into(), 1);
            }
            None => {}
        }
    }
}

/// The model behind a lock. The engine computes each difference without holding it (scans and
/// parses under the read lock, or none), then takes the write lock only to apply it, so readers
/// wait at most for that; when to reconcile is the engine's business.
#[derive(Debug, Default)]
pub struct SharedModel {
    model: RwLock<Model>,
}

impl SharedModel {
    /// An empty model.
    pub fn new() -> Self {
        SharedModel::default()
    }

    /// Applies changes computed from [`Model::changes_under`] (by a caller that serialises its
    /// reconciles), recording a refresh that began at `started`.
    pub fn apply_changes(&self, changes: Vec<Change>, started: Instant) {
        held::check("to apply changes");
        let mut model = write(&self.model);
        if !changes.is_empty() {
            model.apply(changes);
        }
        model.mark_refreshed(started);
    }

    /// The model as it is, without refreshing. A thread takes one at a time: a second read
    /// while the first is held waits behind any writer that queued in between, which waits for
    /// the first (a deadlock); debug builds panic on the second take instead.
    pub fn current(&self) -> ModelRead<'_> {
        held::check("for a second read");
        let guard = read(&self.model);
        held::enter();
        ModelRead { guard }
    }
}

/// A read of the model ([`SharedModel::current`]): the model as it was when taken, until
/// dropped.
#[derive(Debug)]
pub struct ModelRead<'a> {
    guard: RwLockReadGuard<'a, Model>,
}

impl std::ops::Deref for ModelRead<'_> {
    type Target = Model;
    fn deref(&self) -> &Model {
        &self.guard
    }
}

impl Drop for ModelRead<'_> {
    fn drop(&mut self) {
        held::leave();
    }
}

/// How many reads of the model this thread holds (debug builds count; release builds do
/// nothing): the check that catches a second lock on one thread in tests, every time, rather
/// than the rare run where a writer comes between the two.
mod held {
    #[cfg(debug_assertions)]
    thread_local! {
        static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Panics (debug builds) when this thread holds a read of the model already.
    pub(super) fn check(why: &str) {
        #[cfg(debug_assertions)]
        HELD.with(|h| {
            assert!(
                h.get() == 0,
                "the model's lock taken {why} while this thread holds a read of it: a writer \
                 queued in between would deadlock"
            )
        });
        let _ = why;
    }

    pub(super) fn enter() {
        #[cfg(debug_assertions)]
        HELD.with(|h| h.set(h.get() + 1));
    }

    pub(super) fn leave() {
        #[cfg(debug_assertions)]
        HELD.with(|h| h.set(h.get() - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "while this thread holds a read of it")]
    fn a_second_read_of_the_model_on_one_thread_panics_in_debug_builds() {
        let shared = SharedModel::new();
        let _first = shared.current();
        let _second = shared.current();
    }

    #[test]
    fn reads_of_the_model_one_after_another_and_on_other_threads_are_fine() {
        let shared = SharedModel::new();
        drop(shared.current());
        let _held = shared.current();
        std::thread::scope(|s| {
            s.spawn(|| drop(shared.current()));
        });
    }

    #[test]
    fn notes_scanned_together_share_one_copy_of_each_tag_name() {
        #[allow(clippy::disallowed_methods)] // the test writes its own fixture
        fn write(root: &std::path::Path, name: &str, text: &str) {
            std::fs::write(root.join(name), text).unwrap();
        }
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "a.md",
            "---\ntags: [Shared]\n---\n#Shared #only-a\n",
        );
        write(tmp.path(), "b.md", "#Shared #shared\n");
        let vault = Vault::open(tmp.path(), crate::vault::Limits::default()).unwrap();
        let mut m = Model::default();
        let (changes, _) = m.changes_since(&vault).unwrap();
        m.apply(changes);
        let names: Vec<&std::sync::Arc<str>> = m
            .notes()
            .values()
            .flat_map(|n| &n.parsed.tags)
            .map(|t| &t.name)
            .filter(|n| ***n == *"Shared")
            .collect();
        assert_eq!(names.len(), 3);
        assert!(names.iter().all(|n| std::sync::Arc::ptr_eq(n, names[0])));
        // Names that differ, even only in case, stay apart: a tag shows as its note writes it.
        let lower = m.notes()[&VaultPath::parse("b.md").unwrap()].parsed.tags[1]
            .name
            .clone();
        assert_eq!(&*lower, "shared");
        assert_eq!(m.tags()["shared"].len(), 2);
    }

    #[test]
    fn a_model_resolves_subpaths_into_a_note_of_many_headings() {
        let (target, source) = subpaths::heading_bomb(20_000);
        let started = Instant::now();
        let m = built(&[("S.md", &source), ("T.md", &target)]);
        // A sanity bound only: the scan of every heading per link took minutes.
        assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
        let ok: Vec<bool> = m
            .targets(m.note(&p("S.md")).unwrap())
            .map(|t| {
                matches!(
                    t,
                    Target::File {
                        subpath_ok: true,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(ok.len(), 40_000);
        assert!(ok.chunks(4).all(|c| c == [true, true, false, false]));
    }

    #[test]
    fn a_note_of_100_000_tags_is_filed_in_linear_time() {
        // 50,000 distinct tags, each written twice (the second time in capitals).
        let mut text = String::from("---\ntags: [Big]\n---\n");
        for i in 0..50_000 {
            text.push_str(&format!("#big{i} #BIG{i} "));
        }
        let parsed = markdown::parse_note(&text);
        assert_eq!(parsed.tags.len(), 100_001);
        let started = Instant::now();
        let tags = note_tags(&parsed);
        // A sanity bound: comparing each tag with every earlier one took minutes.
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
        assert_eq!(tags.len(), 50_001);
        assert_eq!(tags[0], ("big".to_owned(), "Big"));
        assert_eq!(tags[50_000], ("big49999".to_owned(), "big49999"));
    }

    #[allow(clippy::disallowed_methods)] // the tests write their own fixtures
    fn scanned(files: &[(&str, &str)]) -> (tempfile::TempDir, Model) {
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(tmp.path().join(name), text).unwrap();
        }
        let vault = Vault::open(tmp.path(), crate::vault::Limits::default()).unwrap();
        let mut m = Model::default();
        let (changes, _) = m.changes_since(&vault).unwrap();
        m.apply(changes);
        (tmp, m)
    }

    #[test]
    fn memo_keys_of_one_value_type_stay_apart_and_a_change_clears_them() {
        memo_key!(Count: usize);
        memo_key!(Double: usize);
        let (_tmp, mut m) = scanned(&[("a.md", "x"), ("b.md", "y")]);
        let mut runs = 0;
        let n = m.notes().len();
        assert_eq!(
            *m.memo::<Count>(|| {
                runs += 1;
                n
            }),
            2
        );
        assert_eq!(
            *m.memo::<Count>(|| {
                runs += 1;
                99
            }),
            2
        );
        assert_eq!(
            *m.memo::<Double>(|| {
                runs += 1;
                2 * n
            }),
            4
        );
        assert_eq!(runs, 2);
        m.apply(Vec::new());
        assert_eq!(*m.memo::<Count>(|| 7), 7);
    }

    #[test]
    fn the_model_keeps_at_most_20_000_items_of_each_kind_per_note() {
        let over = MAX_ITEMS_PER_NOTE + 5_000;
        let mut text = String::new();
        for i in 0..over {
            text.push_str(&format!("# H{i}\n[[B]] #t{i}\n"));
        }
        let (_tmp, m) = scanned(&[("A.md", &text), ("B.md", "[[A#H3]]\n")]);
        let a = m.note(&p("A.md")).unwrap();
        assert_eq!(a.parsed.links.len(), MAX_ITEMS_PER_NOTE);
        assert_eq!(a.parsed.headings.len(), MAX_ITEMS_PER_NOTE);
        assert_eq!(a.parsed.tags.len(), MAX_ITEMS_PER_NOTE);
        assert_eq!(a.parsed.omitted, 15_000);
        assert_eq!(m.tags().len(), MAX_ITEMS_PER_NOTE);
        // What is kept still works: links, backlinks, subpaths.
        assert_eq!(m.backlinks(&p("B.md")).count(), 1);
        let b = m.note(&p("B.md")).unwrap();
        assert!(matches!(
            m.targets(b).next(),
            Some(Target::File {
                subpath_ok: true,
                ..
            })
        ));
    }

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    fn meta(n: u64) -> FileMeta {
        FileMeta {
            size: n,
            modified: SystemTime::UNIX_EPOCH,
            ino: n,
            nlink: 1,
            created: None,
        }
    }

    fn change(path: &str, text: &str) -> Change {
        if is_note_name(path) {
            let parsed = markdown::parse_note(text);
            let data = NoteData::extract(text, &parsed);
            Change::Note(p(path), meta(text.len() as u64), parsed, data)
        } else {
            Change::File(p(path), meta(0))
        }
    }

    const VAULT: &[(&str, &str)] = &[
        (
            "Home.md",
            "---\ntags: [Start]\n---\n# Home\n[[Plan]] [[Plan#Goals]] [[Plan#Nope]] [[Same]] \
             [[img.png]] [[Missing]] #Project/Alpha\n",
        ),
        (
            "Plan.md",
            "# Plan\n## Goals\ntext ^blk1\n\n[[Home]] [[#Goals]] [[./Sub/Same]] #project/alpha\n",
        ),
        (
            "Sub/Same.md",
            "[[Home#^nope]] [[Plan#^blk1]] [[../Plan]] [[Same]] #Other\n",
        ),
        ("Other/Same.md", "[[Same]] [[same.md]] [[Other/Same]]\n"),
        ("img.png", ""),
        ("Sub/Deep/x.md", "[[Same]] [[img]] [[IMG.PNG]] #start\n"),
    ];

    /// Everything a query can see, in a comparable form.
    fn snapshot(m: &Model) -> Vec<String> {
        let mut out = Vec::new();
        for (path, note) in m.notes() {
            out.push(format!("{path}: {:?}", m.targets(note).collect::<Vec<_>>()));
        }
        for path in m.files().keys() {
            let sources: Vec<&str> = m.backlinks(path).map(VaultPath::as_str).collect();
            out.push(format!("{path} <- {sources:?}"));
        }
        for (tag, notes) in m.tags() {
            out.push(format!("#{tag}: {notes:?}"));
        }
        out
    }

    fn built(files: &[(&str, &str)]) -> Model {
        let mut m = Model::default();
        m.apply(
            files
                .iter()
                .map(|(path, text)| change(path, text))
                .collect(),
        );
        m
    }

    #[test]
    fn first_build_resolves_like_obsidian() {
        let m = built(VAULT);
        let home = m.note(&p("Home.md")).unwrap();
        let file = |path: &str, ok: bool| Target::File {
            path: p(path),
            subpath_ok: ok,
        };
        assert_eq!(
            m.targets(home).collect::<Vec<_>>(),
            [
                file("Plan.md", true),
                file("Plan.md", true),
                file("Plan.md", false),
                // Two notes named Same, neither nearer: the shallower, then the smaller path.
                file("Other/Same.md", true),
                file("img.png", true),
                Target::Broken,
            ]
        );
        assert_eq!(
            m.targets(m.note(&p("Sub/Deep/x.md")).unwrap())
                .collect::<Vec<_>>(),
            [
                file("Sub/Same.md", true),
                Target::Broken,
                file("img.png", true)
            ]
        );
        let back: Vec<&str> = m.backlinks(&p("Plan.md")).map(VaultPath::as_str).collect();
        assert_eq!(back, ["Home.md", "Plan.md", "Sub/Same.md"]);
        assert_eq!(m.tag_display("project/alpha"), "Project/Alpha");
        assert_eq!(m.tags()["start"].len(), 2);
        assert_eq!(m.note_count(), 5);
    }

    #[test]
    fn a_tag_is_filed_once_under_its_normal_form_and_shown_as_its_first_note_writes_it() {
        let m = built(&[
            (
                "a.md",
                "---\ntags: [\"#Mixed/Case\", Other]\n---\n#mixed/case #MIXED/case\n",
            ),
            ("b.md", "#mixed/CASE #other #Ünï\n"),
            ("c.md", "#ünï\n"),
        ]);
        let notes = |t: &str| -> Vec<&str> { m.tags()[t].iter().map(VaultPath::as_str).collect() };
        assert_eq!(notes("mixed/case"), ["a.md", "b.md"]);
        assert_eq!(notes("other"), ["a.md", "b.md"]);
        assert_eq!(notes("ünï"), ["b.md", "c.md"]);
        assert_eq!(m.tag_display("mixed/case"), "Mixed/Case");
        assert_eq!(m.tag_display("other"), "Other");
        assert_eq!(m.tag_display("ünï"), "Ünï");
        assert_eq!(m.tags().len(), 3);
    }

    #[test]
    fn one_change_at_a_time_ends_like_one_build() {
        let whole = snapshot(&built(VAULT));
        for order in [
            VAULT.to_vec(),
            VAULT.iter().rev().copied().collect::<Vec<_>>(),
        ] {
            let mut m = Model::default();
            for (path, text) in &order {
                m.apply(vec![change(path, text)]);
            }
            assert_eq!(snapshot(&m), whole);
        }
    }

    #[test]
    fn removing_and_re_adding_files_relinks_the_notes_that_name_them() {
        let mut m = built(VAULT);
        let whole = snapshot(&m);
        m.apply(vec![
            Change::Removed(p("Other/Same.md")),
            Change::Removed(p("img.png")),
        ]);
        let home: Vec<Target> = m.targets(m.note(&p("Home.md")).unwrap()).collect();
        assert_eq!(
            home[3],
            Target::File {
                path: p("Sub/Same.md"),
                subpath_ok: true
            }
        );
        assert_eq!(home[4], Target::Broken);
        assert_eq!(m.backlinks(&p("img.png")).count(), 0);
        // Added back in one batch with a new file (the freed ids are not mixed up).
        m.apply(vec![
            change("img.png", ""),
            change("New.md", "[[Home]]"),
            change("Other/Same.md", VAULT[3].1),
        ]);
        m.apply(vec![Change::Removed(p("New.md"))]);
        assert_eq!(snapshot(&m), whole);
    }

    #[test]
    fn editing_a_note_updates_its_backlinks_and_the_subpaths_into_it() {
        let mut m = built(&[("A.md", "[[B#Part]] [[C]]"), ("B.md", "x"), ("C.md", "")]);
        let a = |m: &Model| m.targets(m.note(&p("A.md")).unwrap()).collect::<Vec<_>>();
        assert_eq!(
            a(&m)[0],
            Target::File {
                path: p("B.md"),
                subpath_ok: false
            }
        );
        m.apply(vec![change("B.md", "# Part\n")]);
        assert_eq!(
            a(&m)[0],
            Target::File {
                path: p("B.md"),
                subpath_ok: true
            }
        );
        // A drops its link to C: C has no backlink left.
        m.apply(vec![change("A.md", "[[B#Part]]")]);
        assert_eq!(m.backlinks(&p("C.md")).count(), 0);
        assert_eq!(
            m.backlinks(&p("B.md"))
                .map(VaultPath::as_str)
                .collect::<Vec<_>>(),
            ["A.md"]
        );
        // A removed: nothing links to B any more.
        m.apply(vec![Change::Removed(p("A.md"))]);
        assert_eq!(m.backlinks(&p("B.md")).count(), 0);
        assert_eq!(m.note_count(), 2);
    }
}
