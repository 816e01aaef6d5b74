//! The vault model: every note parsed, with the tag index, forward links and backlinks.
//!
//! Built by one scan through the capability layer, parsing notes in parallel on all cores, and
//! kept current by [`Model::refresh`]: a stat-based reconcile (size, modification time, inode)
//! that re-reads only notes that changed and applies the difference one note at a time
//! ([`Model::apply`]). Link resolution depends on which files exist and on the headings and block
//! ids of target notes, so a change re-resolves exactly the notes whose links it can affect: those
//! that link to the changed note, and those whose link targets name an added or removed file.
//!
//! No note text is kept in memory, only what the parser extracted.

pub mod linkres;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::{Instant, SystemTime};

use rayon::prelude::*;

use crate::markdown::{self, Link, ParsedNote, Subpath};
use crate::vault::{FileMeta, Vault, VaultError, VaultPath, is_note_name};
use linkres::{FileIndex, Resolution, key};

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
    /// Where each of `parsed.links` leads (same order).
    pub targets: Vec<Target>,
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
#[derive(Debug)]
pub enum Change {
    /// A note was added or modified: its metadata and parse.
    Note(VaultPath, FileMeta, ParsedNote),
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
    /// The same files, indexed for link resolution.
    index: FileIndex,
    /// Parsed notes.
    notes: BTreeMap<VaultPath, Note>,
    /// Normalised tag → notes carrying it (exactly, not rolled up).
    tags: BTreeMap<String, BTreeSet<VaultPath>>,
    /// Normalised tag → the casing first seen, for display.
    tag_display: HashMap<String, String>,
    /// Target → notes that link to it (resolved links only).
    backlinks: HashMap<VaultPath, BTreeSet<VaultPath>>,
    /// key(file name a link target would match) → notes with such a link.
    by_link_name: HashMap<String, BTreeSet<VaultPath>>,
    /// When the last refresh finished.
    refreshed_at: Option<SystemTime>,
    /// How long the first full build took.
    build_time: Option<std::time::Duration>,
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

    /// Notes that link to `path` (resolved links), in path order.
    pub fn backlinks(&self, path: &VaultPath) -> impl Iterator<Item = &VaultPath> {
        self.backlinks.get(path).into_iter().flatten()
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

    /// Applies a batch of changes, then re-resolves the links they can affect.
    pub fn apply(&mut self, changes: Vec<Change>) -> usize {
        // On the first build every note is relinked anyway: skip working out which.
        let initial = self.notes.is_empty();
        let mut relink: BTreeSet<VaultPath> = BTreeSet::new();
        let mut names_changed: BTreeSet<String> = BTreeSet::new();
        for change in changes {
            match change {
                Change::Note(path, meta, parsed) => {
                    let is_new = !self.files.contains_key(&path);
                    if is_new {
                        self.index.insert(&path);
                        names_changed.extend(FileIndex::file_name_keys(path.file_name()));
                    }
                    self.files.insert(path.clone(), meta);
                    // Notes linking here may gain or lose a heading or block.
                    relink.extend(self.backlinks(&path).cloned());
                    self.remove_note_entries(&path);
                    self.add_note_entries(&path, &parsed);
                    self.notes.insert(
                        path.clone(),
                        Note {
                            meta,
                            parsed,
                            targets: Vec::new(),
                        },
                    );
                    relink.insert(path);
                }
                Change::File(path, meta) => {
                    if !self.files.contains_key(&path) {
                        self.index.insert(&path);
                        names_changed.extend(FileIndex::file_name_keys(path.file_name()));
                    }
                    self.files.insert(path, meta);
                }
                Change::Removed(path) => {
                    if self.files.remove(&path).is_none() {
                        continue;
                    }
                    self.index.remove(&path);
                    names_changed.extend(FileIndex::file_name_keys(path.file_name()));
                    relink.extend(self.backlinks(&path).cloned());
                    if self.notes.contains_key(&path) {
                        self.remove_note_entries(&path);
                        self.unlink_sources(&path);
                        self.notes.remove(&path);
                    }
                    relink.remove(&path);
                }
            }
        }
        if initial {
            relink = self.notes.keys().cloned().collect();
        } else {
            for name in &names_changed {
                if let Some(sources) = self.by_link_name.get(name) {
                    relink.extend(sources.iter().cloned());
                }
            }
        }
        relink.retain(|p| self.notes.contains_key(p));
        for path in &relink {
            self.relink(path);
        }
        relink.len()
    }

    /// Removes what `path`'s previous parse contributed to the tag and link-name indexes.
    fn remove_note_entries(&mut self, path: &VaultPath) {
        let Some(old) = self.notes.get(path) else {
            return;
        };
        let tags: Vec<String> = old
            .parsed
            .tags
            .iter()
            .map(|t| markdown::normalize_tag(&t.name))
            .collect();
        let names: Vec<String> = old
            .parsed
            .links
            .iter()
            .map(|l| FileIndex::link_name_key(&l.target))
            .collect();
        for t in tags {
            if let Some(set) = self.tags.get_mut(&t) {
                set.remove(path);
                if set.is_empty() {
                    self.tags.remove(&t);
                    self.tag_display.remove(&t);
                }
            }
        }
        for n in names {
            if let Some(set) = self.by_link_name.get_mut(&n) {
                set.remove(path);
                if set.is_empty() {
                    self.by_link_name.remove(&n);
                }
            }
        }
    }

    fn add_note_entries(&mut self, path: &VaultPath, parsed: &ParsedNote) {
        for t in &parsed.tags {
            let norm = markdown::normalize_tag(&t.name);
            if norm.is_empty() {
                continue;
            }
            self.tag_display
                .entry(norm.clone())
                .or_insert_with(|| t.name.trim_start_matches('#').to_owned());
            self.tags.entry(norm).or_default().insert(path.clone());
        }
        for l in &parsed.links {
            self.by_link_name
                .entry(FileIndex::link_name_key(&l.target))
                .or_default()
                .insert(path.clone());
        }
    }

    /// Drops `source` from the backlinks of every target it resolved to.
    fn unlink_sources(&mut self, source: &VaultPath) {
        let Some(note) = self.notes.get(source) else {
            return;
        };
        let targets: Vec<VaultPath> = note
            .targets
            .iter()
            .filter_map(|t| match t {
                Target::File { path, .. } => Some(path.clone()),
                Target::Broken => None,
            })
            .collect();
        for t in targets {
            if let Some(set) = self.backlinks.get_mut(&t) {
                set.remove(source);
                if set.is_empty() {
                    self.backlinks.remove(&t);
                }
            }
        }
    }

    /// Re-resolves every link of `source` and updates the backlinks.
    fn relink(&mut self, source: &VaultPath) {
        self.unlink_sources(source);
        let Some(note) = self.notes.get(source) else {
            return;
        };
        let targets: Vec<Target> = note
            .parsed
            .links
            .iter()
            .map(|l| self.target_of(l, source))
            .collect();
        for t in &targets {
            if let Target::File { path, .. } = t {
                self.backlinks
                    .entry(path.clone())
                    .or_default()
                    .insert(source.clone());
            }
        }
        if let Some(note) = self.notes.get_mut(source) {
            note.targets = targets;
        }
    }

    /// Where `link` in `source` leads.
    pub fn target_of(&self, link: &Link, source: &VaultPath) -> Target {
        match self.index.resolve(&link.target, Some(source)) {
            Resolution::Found { path, .. } => {
                let subpath_ok = match (&link.subpath, self.notes.get(&path)) {
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

    /// Brings the model up to date with the vault: a stat scan of every file, then a parallel
    /// re-read of the notes that are new or changed (size, mtime or inode differ).
    pub fn refresh(&mut self, vault: &Vault) -> Result<RefreshStats, VaultError> {
        let started = Instant::now();
        let (changes, mut stats) = self.changes_since(vault)?;
        stats.relinked = self.apply(changes);
        self.mark_refreshed(started);
        Ok(stats)
    }

    /// What changed in `vault` since the model was last refreshed: the read-only half of a
    /// refresh (scanning and parsing), which needs no write access to the model.
    pub fn changes_since(&self, vault: &Vault) -> Result<(Vec<Change>, RefreshStats), VaultError> {
        self.changes_since_with(vault, &|_| {})
    }

    /// [`Model::changes_since`], handing each note that was read to `on_note` as well (on the
    /// parallel workers, as soon as it is parsed): how the search index is fed from the same read.
    pub fn changes_since_with(
        &self,
        vault: &Vault,
        on_note: &(dyn Fn(NoteRead<'_>) + Sync),
    ) -> Result<(Vec<Change>, RefreshStats), VaultError> {
        self.changes_under(vault, &VaultPath::root(), on_note)
    }

    /// What changed at `scope` (a file, or a folder and everything below it) since the model
    /// last saw it: the targeted reconcile behind file-watcher events. A scope that no longer
    /// exists (deleted, or moved away) removes what the model had there; the root scope is a full
    /// [`Model::changes_since_with`].
    pub fn changes_under(
        &self,
        vault: &Vault,
        scope: &VaultPath,
        on_note: &(dyn Fn(NoteRead<'_>) + Sync),
    ) -> Result<(Vec<Change>, RefreshStats), VaultError> {
        let seen = if scope.is_root() {
            scan_files(vault, scope)?
        } else {
            match vault.stat_file(scope) {
                Ok(meta) => HashMap::from([(scope.clone(), meta)]),
                Err(VaultError::IsAFolder(_)) => scan_files(vault, scope)?,
                // Gone, or no longer something the vault serves (a symlink out, a FIFO...).
                Err(_) => HashMap::new(),
            }
        };
        let mut stats = RefreshStats {
            files: seen.len(),
            ..RefreshStats::default()
        };
        let mut changes = Vec::new();
        let removed: Vec<VaultPath> = self
            .files
            .range::<VaultPath, _>(scope..)
            .take_while(|(p, _)| scope.is_root() || p.as_str().starts_with(scope.as_str()))
            .filter(|(p, _)| p.starts_with(scope) && !seen.contains_key(*p))
            .map(|(p, _)| p.clone())
            .collect();
        stats.removed = removed.len();
        changes.extend(removed.into_iter().map(Change::Removed));

        let changed: Vec<(VaultPath, FileMeta)> = seen
            .into_iter()
            .filter(|(p, m)| self.files.get(p) != Some(m))
            .collect();
        let (notes, others): (Vec<_>, Vec<_>) = changed
            .into_iter()
            .partition(|(p, _)| is_note_name(p.file_name()));
        changes.extend(others.into_iter().map(|(p, m)| Change::File(p, m)));
        let parsed: Vec<Change> = notes
            .into_par_iter()
            .map(|(path, meta)| match vault.read_file(&path) {
                Ok(data) => {
                    let text = String::from_utf8_lossy(&data.bytes);
                    let parsed = markdown::parse_note(&text);
                    on_note(NoteRead {
                        path: &path,
                        meta: &meta,
                        text: &text,
                        parsed: &parsed,
                    });
                    // The scan's metadata is what the next refresh compares against.
                    Change::Note(path, meta, parsed)
                }
                Err(e) => {
                    tracing::warn!(path = %path, error = %e, "could not read a note; kept as a file");
                    Change::File(path, meta)
                }
            })
            .collect();
        stats.parsed = parsed
            .iter()
            .filter(|c| matches!(c, Change::Note(..)))
            .count();
        changes.extend(parsed);
        Ok((changes, stats))
    }

    /// Records that a refresh that began at `started` is complete.
    pub fn mark_refreshed(&mut self, started: Instant) {
        if self.refreshed_at.is_none() {
            self.build_time = Some(started.elapsed());
        }
        self.refreshed_at = Some(SystemTime::now());
    }
}

/// Every visible regular file of the vault with its metadata.
fn scan_files(
    vault: &Vault,
    folder: &VaultPath,
) -> Result<HashMap<VaultPath, FileMeta>, VaultError> {
    let mut seen = HashMap::new();
    vault.walk(folder, true, &|_| true, &mut |entry| {
        match entry.meta(vault) {
            Ok(meta) => {
                seen.insert(entry.path, meta);
            }
            Err(e) => tracing::warn!(error = %e, "skipped a file the scan could not stat"),
        }
        ControlFlow::Continue(())
    })?;
    Ok(seen)
}

/// True when the heading chain or block id named by `sub` exists in `target`.
pub fn subpath_exists(target: &ParsedNote, sub: &Subpath) -> bool {
    match sub {
        Subpath::Heading(chain) => match chain.last() {
            Some(last) => {
                let want = heading_key(last);
                target.headings.iter().any(|h| heading_key(&h.text) == want)
            }
            None => true,
        },
        Subpath::Block(id) => {
            let want = id.to_lowercase();
            target.block_ids.iter().any(|b| b.id.to_lowercase() == want)
        }
    }
}

/// How a `#Heading` subpath is compared with a note's headings, as Obsidian's `stripHeading`
/// does: punctuation and other special characters count as spaces, runs of spaces collapse, and
/// case and Unicode normalisation are ignored. So `[[README#What is the Hub]]` finds the heading
/// `What is the Hub?`.
pub fn heading_key(s: &str) -> String {
    let spaced: String = key(s)
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' || (!c.is_ascii() && !c.is_whitespace())
            {
                c
            } else {
                ' '
            }
        })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The model behind a lock, refreshed on demand: a refresh scans and parses without holding the
/// model, then takes the write lock only to apply the difference, so readers wait at most for that.
///
/// A query within `max_age` of the last completed refresh is answered from memory; an older one
/// first rescans (a stat scan plus re-reading what changed). With `max_age` zero every query sees
/// the disk as it is.
#[derive(Debug)]
pub struct SharedModel {
    model: RwLock<Model>,
    /// Serialises refreshes (concurrent callers wait for the one in progress, then re-check).
    refreshing: Mutex<Option<Instant>>,
    /// How old the model may be before a query rescans.
    max_age: std::time::Duration,
}

impl SharedModel {
    /// An empty model that rescans when older than `max_age`.
    pub fn new(max_age: std::time::Duration) -> Self {
        SharedModel {
            model: RwLock::new(Model::default()),
            refreshing: Mutex::new(None),
            max_age,
        }
    }

    /// Refreshes from `vault` if the model is older than the allowed age, then returns a read
    /// guard on the model.
    pub fn fresh(&self, vault: &Vault) -> Result<RwLockReadGuard<'_, Model>, VaultError> {
        {
            let mut last = self.refreshing.lock().unwrap_or_else(|e| e.into_inner());
            let stale = last.is_none_or(|t| t.elapsed() >= self.max_age);
            if stale {
                let started = Instant::now();
                let (changes, _stats) = self.current().changes_since(vault)?;
                let mut model = self.model.write().unwrap_or_else(|e| e.into_inner());
                if !changes.is_empty() {
                    model.apply(changes);
                }
                model.mark_refreshed(started);
                *last = Some(Instant::now());
            }
        }
        Ok(self.current())
    }

    /// Applies changes computed from [`Model::changes_under`] (by a caller that serialises its
    /// reconciles), recording a refresh that began at `started`.
    pub fn apply_changes(&self, changes: Vec<Change>, started: Instant) {
        let mut model = self.model.write().unwrap_or_else(|e| e.into_inner());
        if !changes.is_empty() {
            model.apply(changes);
        }
        model.mark_refreshed(started);
    }

    /// The model as it is, without refreshing.
    pub fn current(&self) -> RwLockReadGuard<'_, Model> {
        self.model.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_subpaths_match_like_obsidian_strip_heading() {
        assert_eq!(
            heading_key("What is the Obsidian Hub?"),
            heading_key("What is the Obsidian Hub")
        );
        assert_eq!(heading_key("  Sowing   dates "), "sowing dates");
        assert_eq!(heading_key("A: b / c (d)"), "a b c d");
        assert_eq!(heading_key("Café ☕"), "café ☕");
        assert_ne!(heading_key("Plan A"), heading_key("Plan B"));
    }
}
