//! The disk side of the model: walking the vault through the capability layer, reading the notes
//! that are new or changed (size, modification time or inode differ), and parsing them on the
//! rayon pool while the walk goes on. What it finds is a list of [`Change`]s for
//! [`Model::apply`]; nothing here changes the model.

use super::*;
use crate::locks::lock;

impl Model {
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
        self.changes_under(vault, &VaultPath::root(), on_note, &AtomicBool::new(false))
    }

    /// What changed at `scope` (a file, or a folder and everything below it) since the model
    /// last saw it: the targeted reconcile behind file-watcher events. A scope that no longer
    /// exists (deleted, or moved away) removes what the model had there; the root scope is a full
    /// [`Model::changes_since_with`].
    ///
    /// A folder is walked on one thread while the rayon pool parses: a note the model does not
    /// know yet is read straight away (its metadata comes from the open handle, so it costs no
    /// separate `stat`); a known file is `stat`ed and read again only when its size, time or
    /// inode changed.
    ///
    /// Once `stop` is set the walk ends early and this returns [`VaultError::Stopped`] (the
    /// server is shutting down): nothing of a stopped walk is applied.
    pub fn changes_under(
        &self,
        vault: &Vault,
        scope: &VaultPath,
        on_note: &(dyn Fn(NoteRead<'_>) + Sync),
        stop: &AtomicBool,
    ) -> Result<(Vec<Change>, RefreshStats), VaultError> {
        let walked = if scope.is_root() {
            self.walk_and_parse(vault, scope, on_note, stop)?
        } else {
            match vault.stat_file(scope) {
                Ok(meta) => self.one_file(vault, scope, meta, on_note),
                Err(VaultError::IsAFolder(_)) => {
                    self.walk_and_parse(vault, scope, on_note, stop)?
                }
                // Gone, or no longer something the vault serves (a symlink out, a FIFO...).
                Err(_) => Walked::default(),
            }
        };
        let mut stats = RefreshStats {
            files: walked.files,
            ..RefreshStats::default()
        };
        let mut changes = Vec::new();
        let removed: Vec<VaultPath> = self
            .files
            .range::<VaultPath, _>(scope..)
            .take_while(|(p, _)| scope.is_root() || p.as_str().starts_with(scope.as_str()))
            .filter(|(p, _)| p.starts_with(scope) && !walked.known.contains(*p))
            .map(|(p, _)| p.clone())
            .collect();
        stats.removed = removed.len();
        changes.extend(removed.into_iter().map(Change::Removed));
        changes.extend(walked.others);
        stats.parsed = walked.notes.len();
        changes.extend(walked.notes);
        Ok((changes, stats))
    }

    /// Walks `folder`, reading and parsing (in parallel) the notes that are new or changed.
    fn walk_and_parse(
        &self,
        vault: &Vault,
        folder: &VaultPath,
        on_note: &(dyn Fn(NoteRead<'_>) + Sync),
        stop: &AtomicBool,
    ) -> Result<Walked, VaultError> {
        // Notes travel in batches: handing them over one by one costs a thread wake-up each,
        // about as much as reading the note. A few batches in flight keep the pool busy without
        // holding many texts.
        let (tx, rx) = mpsc::sync_channel::<Vec<ReadNote>>(4);
        let names = TagNames::default();
        std::thread::scope(|s| {
            let walker = s.spawn(move || self.walk(vault, folder, &mut Batcher::new(tx), stop));
            let notes: Vec<Change> = rx
                .into_iter()
                .par_bridge()
                .flat_map_iter(|batch| {
                    batch
                        .into_iter()
                        .map(|(path, meta, bytes)| parsed_note(path, meta, bytes, &names, on_note))
                })
                .collect();
            let mut walked = walker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            walked.notes = notes;
            Ok(walked)
        })
    }

    /// The walking half of [`Model::walk_and_parse`]: sends the notes to parse to `tx`.
    fn walk(
        &self,
        vault: &Vault,
        folder: &VaultPath,
        batcher: &mut Batcher,
        stop: &AtomicBool,
    ) -> Result<Walked, VaultError> {
        let mut walked = Walked::default();
        vault.walk(folder, true, &|_| true, &mut |entry| {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return std::ops::ControlFlow::Break(());
            }
            let known = self.files.get(&entry.path);
            let is_note = is_note_name(entry.path.file_name());
            if is_note && known.is_none() {
                // New: read it at once; the handle's metadata is what the next refresh compares.
                match entry.read(vault) {
                    Ok(data) => {
                        walked.files += 1;
                        // A closed channel means the parsing side is gone (it panicked).
                        if batcher.push((entry.path, data.meta, data.bytes)).is_err() {
                            return std::ops::ControlFlow::Break(());
                        }
                    }
                    Err(e) => {
                        tracing::warn!(path = %entry.path, error = %e, "could not read a note; kept as a file");
                        match entry.meta(vault) {
                            Ok(meta) => {
                                walked.files += 1;
                                walked.others.push(Change::File(entry.path, meta));
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "skipped a file the scan could not stat");
                            }
                        }
                    }
                }
                return std::ops::ControlFlow::Continue(());
            }
            let meta = match entry.meta(vault) {
                Ok(meta) => meta,
                Err(e) => {
                    tracing::warn!(error = %e, "skipped a file the scan could not stat");
                    return std::ops::ControlFlow::Continue(());
                }
            };
            walked.files += 1;
            if known.is_some() {
                walked.known.insert(entry.path.clone());
            }
            if known == Some(&meta) {
                return std::ops::ControlFlow::Continue(());
            }
            if !is_note {
                walked.others.push(Change::File(entry.path, meta));
                return std::ops::ControlFlow::Continue(());
            }
            match entry.read(vault) {
                Ok(data) => {
                    if batcher.push((entry.path, data.meta, data.bytes)).is_err() {
                        return std::ops::ControlFlow::Break(());
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %entry.path, error = %e, "could not read a note; kept as a file");
                    walked.others.push(Change::File(entry.path, meta));
                }
            }
            std::ops::ControlFlow::Continue(())
        })?;
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(VaultError::Stopped);
        }
        Ok(walked)
    }

    /// [`Model::changes_under`] for a scope that is one file, with its metadata.
    fn one_file(
        &self,
        vault: &Vault,
        path: &VaultPath,
        meta: FileMeta,
        on_note: &(dyn Fn(NoteRead<'_>) + Sync),
    ) -> Walked {
        let mut walked = Walked {
            files: 1,
            ..Walked::default()
        };
        let known = self.files.get(path);
        if known.is_some() {
            walked.known.insert(path.clone());
        }
        if known == Some(&meta) {
            return walked;
        }
        if !is_note_name(path.file_name()) {
            walked.others.push(Change::File(path.clone(), meta));
            return walked;
        }
        match vault.read_file(path) {
            Ok(data) => {
                // The scan's metadata is what the next refresh compares against.
                walked.notes.push(parsed_note(
                    path.clone(),
                    meta,
                    data.bytes,
                    &TagNames::default(),
                    on_note,
                ));
            }
            Err(e) => {
                tracing::warn!(path = %path, error = %e, "could not read a note; kept as a file");
                walked.others.push(Change::File(path.clone(), meta));
            }
        }
        walked
    }
}

/// A note read by a walk, to parse.
type ReadNote = (VaultPath, FileMeta, Vec<u8>);

/// Groups the notes a walk reads into batches for the parsing side; the last one goes when the
/// batcher is dropped.
struct Batcher {
    tx: mpsc::SyncSender<Vec<ReadNote>>,
    batch: Vec<ReadNote>,
    bytes: usize,
}

impl Batcher {
    /// At most this many notes per batch...
    const NOTES: usize = 32;
    /// ...and about this many bytes of text.
    const BYTES: usize = 256 * 1024;

    fn new(tx: mpsc::SyncSender<Vec<ReadNote>>) -> Self {
        Batcher {
            tx,
            batch: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds a note, sending the batch when full. An error means the receiving side is gone.
    fn push(&mut self, note: ReadNote) -> Result<(), ()> {
        self.bytes += note.2.len();
        self.batch.push(note);
        if self.batch.len() >= Self::NOTES || self.bytes >= Self::BYTES {
            self.bytes = 0;
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(Self::NOTES));
            return self.tx.send(batch).map_err(drop);
        }
        Ok(())
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            // Nothing to do if the receiving side is gone.
            let _ = self.tx.send(std::mem::take(&mut self.batch));
        }
    }
}

/// What a walk found.
#[derive(Default)]
struct Walked {
    /// Files seen (with metadata).
    files: usize,
    /// Files seen that the model already had (the others under the scope were removed).
    known: HashSet<VaultPath>,
    /// New or changed notes, parsed.
    notes: Vec<Change>,
    /// New or changed other files, and notes that could not be read.
    others: Vec<Change>,
}

/// The tag names met during one scan, so that notes carrying the same tag share one copy of its
/// name (half a million tag occurrences at 100,000 notes, a few thousand distinct names).
#[derive(Default)]
struct TagNames(Mutex<HashSet<std::sync::Arc<str>>>);

impl TagNames {
    /// Points each tag of `parsed` at the shared copy of its name.
    fn share(&self, parsed: &mut ParsedNote) {
        if parsed.tags.is_empty() {
            return;
        }
        let mut names = lock(&self.0);
        for tag in &mut parsed.tags {
            match names.get(&*tag.name) {
                Some(shared) => tag.name = shared.clone(),
                None => {
                    names.insert(tag.name.clone());
                }
            }
        }
    }
}

/// Parses a note read as `bytes` and hands it to `on_note`.
fn parsed_note(
    path: VaultPath,
    meta: FileMeta,
    bytes: Vec<u8>,
    names: &TagNames,
    on_note: &(dyn Fn(NoteRead<'_>) + Sync),
) -> Change {
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    let mut parsed = markdown::parse_note(&text);
    // Dataview's data, from the whole parse (before it is cut below).
    let data = NoteData::extract(&text, &parsed);
    on_note(NoteRead {
        path: &path,
        meta: &meta,
        text: &text,
        parsed: &parsed,
    });
    // The search index had the whole parse; the model keeps a bounded part.
    if parsed.keep_at_most(super::MAX_ITEMS_PER_NOTE) {
        tracing::warn!(
            path = %path,
            omitted = parsed.omitted,
            "the note has more than {} tags, headings, block ids or links of one kind: \
             only the first {} of each are kept for links, backlinks and tags",
            super::MAX_ITEMS_PER_NOTE,
            super::MAX_ITEMS_PER_NOTE,
        );
    }
    names.share(&mut parsed);
    Change::Note(path, meta, parsed, data)
}
