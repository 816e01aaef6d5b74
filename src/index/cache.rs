//! Saving the index to its cache folder and loading it back (the folder itself, and why it is
//! safe to have one, is [`crate::vault::cache`]).
//!
//! tantivy's segment files never change once written (deletions go to new `.del` files), so a
//! save writes only the files the cache lacks, then one manifest naming the files and holding
//! tantivy's `meta.json`, then removes what the manifest no longer names. The manifest is
//! written last and atomically: a crash at any point leaves the previous save loadable. A load
//! copies the files every query reads into RAM and serves the positions files (about half the
//! index, read only by phrase queries) from the cache folder itself, read at offsets as phrases
//! need them, so they live in the page cache rather than in the server's memory. It checks every
//! file's checksum and the schema, and refuses on any mismatch: the caller then clears the folder
//! and builds afresh. Segments written later (a vault's first build, new notes, merges) live in
//! RAM ([`Files`]), except their positions files: those are written straight into the cache
//! folder and read from there the same way. Such a file is complete but not synced until a save
//! syncs it, before the manifest names it; one a merge made obsolete stays until the next save.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use tantivy::directory::error::{DeleteError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, FileHandle, FileSlice, OwnedBytes, RamDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};
use tantivy::index::SegmentComponent;
use tantivy::schema::Schema;
use tantivy::{Directory, Index};

use crate::locks::{lock, read, write};
use crate::vault::cache::{IndexCacheDir, MAX_FILES, is_side_file, valid_name};
use crate::vault::private::{NewFile, ReadFile};

/// The index's files: the positions files, in the cache folder and read from the disk at
/// offsets, and everything else in RAM. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Files {
    ram: RamDirectory,
    disk: Arc<RwLock<HashMap<PathBuf, FileSlice>>>,
    /// Where new positions files are written, when there is a cache folder.
    spill: Option<Spill>,
}

/// The cache folder new positions files go to, and those of them not yet synced.
#[derive(Debug, Clone)]
struct Spill {
    dir: Arc<IndexCacheDir>,
    unsynced: Arc<Mutex<HashMap<String, Arc<OnDisk>>>>,
}

impl Files {
    /// Files that write new positions files into `dir` rather than RAM.
    pub fn spilling_to(dir: Arc<IndexCacheDir>) -> Files {
        Files {
            spill: Some(Spill {
                dir,
                unsynced: Arc::default(),
            }),
            ..Files::default()
        }
    }

    fn on_disk(&self, path: &Path) -> Option<FileSlice> {
        read(&self.disk).get(path).cloned()
    }

    /// A writer for a new positions file in the cache folder, or `None` (write to RAM) for
    /// other files, without a cache folder, or when the folder refuses.
    fn spill_writer(&self, path: &Path) -> Option<SpillWriter> {
        let spill = self.spill.as_ref()?;
        let name = path.to_str().filter(|n| is_positions(n) && valid_name(n))?;
        match spill.dir.create(name) {
            Ok(writer) => Some(SpillWriter {
                sink: Sink::Disk(writer),
                name: name.to_owned(),
                files: self.clone(),
            }),
            Err(e) => {
                tracing::debug!(error = %e, "positions file kept in memory");
                None
            }
        }
    }

    /// Makes a positions file written into the cache folder durable, if it is one not yet
    /// synced: before a manifest names it.
    fn sync_spilled(&self, name: &str) -> std::io::Result<()> {
        let Some(spill) = &self.spill else {
            return Ok(());
        };
        let file = lock(&spill.unsynced).get(name).cloned();
        if let Some(file) = file {
            file.0.sync()?;
            lock(&spill.unsynced).remove(name);
        }
        Ok(())
    }
}

/// Positions files: about half the index, read only by phrase queries.
fn is_positions(name: &str) -> bool {
    name.ends_with(".pos")
}

/// A positions file being written into the cache folder. Once complete it is read from there,
/// like the positions files a restart loads; it stays out of any manifest until a save has
/// synced it. If the folder refuses a write (a full disk), the file moves to memory and the
/// segment completes all the same.
struct SpillWriter {
    sink: Sink,
    name: String,
    files: Files,
}

/// Where a positions file being written goes.
enum Sink {
    /// The cache folder.
    Disk(NewFile),
    /// Memory, after the folder refused a write: what was written is read back.
    Memory(Vec<u8>),
    /// Complete.
    Done,
}

impl SpillWriter {
    /// Moves the file to memory after the folder refused a write (`error`); `buf` is the write
    /// that failed, of which the folder took the first `taken` bytes.
    fn move_to_memory(
        &mut self,
        writer: NewFile,
        taken: u64,
        buf: &[u8],
        error: &std::io::Error,
    ) -> std::io::Result<()> {
        let mut bytes = writer.abandon()?;
        if let Some(spill) = &self.files.spill {
            let _ = spill.dir.remove(&self.name);
        }
        tracing::debug!(%error, file = %self.name, "positions file kept in memory");
        let taken = usize::try_from(taken).unwrap_or(usize::MAX).min(buf.len());
        bytes.extend_from_slice(&buf[taken..]);
        self.sink = Sink::Memory(bytes);
        Ok(())
    }
}

impl std::io::Write for SpillWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Disk(mut w) => {
                let before = w.len();
                match w.write_all(buf) {
                    Ok(()) => self.sink = Sink::Disk(w),
                    Err(e) => {
                        let taken = w.len() - before;
                        self.move_to_memory(w, taken, buf, &e)?;
                    }
                }
                Ok(buf.len())
            }
            Sink::Memory(mut bytes) => {
                bytes.extend_from_slice(buf);
                self.sink = Sink::Memory(bytes);
                Ok(buf.len())
            }
            Sink::Done => Err(std::io::Error::other("the file is already complete")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for SpillWriter {
    fn terminate_ref(&mut self, _: AntiCallToken) -> std::io::Result<()> {
        match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Disk(writer) => {
                let file = Arc::new(OnDisk(writer.finish()?));
                if let Some(spill) = &self.files.spill {
                    lock(&spill.unsynced).insert(self.name.clone(), Arc::clone(&file));
                }
                write(&self.files.disk).insert(PathBuf::from(&self.name), FileSlice::new(file));
            }
            Sink::Memory(bytes) => {
                self.files.ram.atomic_write(Path::new(&self.name), &bytes)?;
            }
            Sink::Done => {}
        }
        Ok(())
    }
}

/// A cached segment file, read at offsets through the capability layer.
#[derive(Debug)]
struct OnDisk(ReadFile);

impl tantivy::HasLen for OnDisk {
    fn len(&self) -> usize {
        self.0.len() as usize
    }
}

impl FileHandle for OnDisk {
    fn read_bytes(&self, range: Range<usize>) -> std::io::Result<OwnedBytes> {
        if range.len() < ReadBuffers::SMALLEST {
            let mut buf = vec![0; range.len()];
            if !buf.is_empty() {
                self.0.read_exact_at(&mut buf, range.start as u64)?;
            }
            return Ok(OwnedBytes::new(buf));
        }
        let mut buf = READ_BUFFERS.take(range.len());
        let filled = match Arc::get_mut(&mut buf) {
            Some(b) => self
                .0
                .read_exact_at(&mut b[..range.len()], range.start as u64),
            None => Err(std::io::Error::other("a read buffer is shared")),
        };
        READ_BUFFERS.put_back(&buf);
        filled?;
        Ok(OwnedBytes::new(buf).slice(0..range.len()))
    }
}

/// Buffers for large reads of cached segment files, kept for the next read once tantivy drops
/// what it read. A phrase search reads a common word's whole positions list (megabytes for
/// `the`) on every run; a fresh buffer for each read cost the kernel a page fault and a page
/// of zeros per 4 KiB, a sixth of such a search's time (`orqu the` at 100,000 notes).
static READ_BUFFERS: ReadBuffers = ReadBuffers {
    kept: std::sync::Mutex::new(Vec::new()),
};

/// A few reusable buffers, [`ReadBuffers::MAX_BYTES`] in all.
struct ReadBuffers {
    kept: std::sync::Mutex<Vec<Arc<[u8]>>>,
}

impl ReadBuffers {
    /// Reads shorter than this get a buffer of their own (the allocator serves them from
    /// memory it already has).
    const SMALLEST: usize = 128 * 1024;
    /// Most bytes kept.
    const MAX_BYTES: usize = 32 * 1024 * 1024;

    /// A buffer of at least `len` bytes that nothing else holds: the smallest kept one that
    /// fits, or a new one (a size rounded up, so that it fits more reads).
    fn take(&self, len: usize) -> Arc<[u8]> {
        let mut kept = lock(&self.kept);
        let best = kept
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() >= len && Arc::strong_count(b) == 1)
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        if let Some(i) = best {
            // Held by the list alone, under its lock: out of it, the caller's is the only handle.
            return kept.swap_remove(i);
        }
        drop(kept);
        let size = len.next_multiple_of(Self::SMALLEST);
        std::iter::repeat_n(0u8, size).collect()
    }

    /// Keeps `buf` for a later read (while it fits in [`ReadBuffers::MAX_BYTES`], dropping
    /// unused smaller ones to make room).
    fn put_back(&self, buf: &Arc<[u8]>) {
        let mut kept = lock(&self.kept);
        if kept.iter().any(|b| Arc::ptr_eq(b, buf)) || buf.len() > Self::MAX_BYTES {
            return;
        }
        let mut total: usize = kept.iter().map(|b| b.len()).sum();
        while total + buf.len() > Self::MAX_BYTES {
            let Some(i) = kept
                .iter()
                .enumerate()
                .filter(|(_, b)| Arc::strong_count(b) == 1)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i)
            else {
                return;
            };
            total -= kept.swap_remove(i).len();
        }
        kept.push(Arc::clone(buf));
    }
}

impl tantivy::Directory for Files {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        match self.on_disk(path) {
            Some(slice) => Ok(Arc::new(slice)),
            None => self.ram.get_file_handle(path),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        if let (Some(spill), Some(name)) = (&self.spill, path.to_str()) {
            lock(&spill.unsynced).remove(name);
        }
        let removed = write(&self.disk).remove(path);
        match removed {
            // The file stays in the cache folder until a save no longer names it.
            Some(_) => Ok(()),
            None => self.ram.delete(path),
        }
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        Ok(self.on_disk(path).is_some() || self.ram.exists(path)?)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        if self.on_disk(path).is_some() {
            return Err(OpenWriteError::FileAlreadyExists(path.to_path_buf()));
        }
        match self.spill_writer(path) {
            Some(w) => Ok(std::io::BufWriter::new(Box::new(w))),
            None => self.ram.open_write(path),
        }
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        match self.on_disk(path) {
            Some(slice) => slice
                .read_bytes()
                .map(|b| b.as_slice().to_vec())
                .map_err(|e| OpenReadError::wrap_io_error(e, path.to_path_buf())),
            None => self.ram.atomic_read(path),
        }
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        self.ram.atomic_write(path, data)
    }

    fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.ram.watch(callback)
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the cached index was built by. Bump the number whenever a note's document changes
/// (fields, analyzers, what goes into them): a cache of another format is discarded.
pub const FORMAT: &str = "capvault index 2, tantivy 0.27";
/// The manifest's file name.
const MANIFEST: &str = "manifest.json";
/// Largest manifest read.
const MAX_MANIFEST: u64 = 64 << 20;
/// Largest index file read (tantivy's own segments stay far below this at 100,000 notes).
const MAX_FILE: u64 = 4 << 30;
/// tantivy's metadata file.
const META: &str = "meta.json";
/// tantivy's list of the files it manages (and may delete when a merge makes them obsolete).
const MANAGED: &str = ".managed.json";

/// Why the saved index cannot be used ([`load`]) or could not be saved ([`save`]). Names only
/// the cache's own file names, never a host path.
#[derive(Debug, thiserror::Error)]
pub enum IndexCacheError {
    /// The manifest exists but could not be read.
    #[error("cannot read the manifest: {0}")]
    ReadManifest(std::io::Error),
    /// The manifest is not the JSON a save writes.
    #[error("the manifest is not valid: {0}")]
    BadManifest(serde_json::Error),
    /// Another version of capvault wrote the cache (the format it names).
    #[error("the cache was written by another version ({0})")]
    OtherVersion(String),
    /// The manifest lists too many files, or a name no save writes.
    #[error("the manifest names files it cannot hold")]
    BadNames,
    /// One file of the cache failed (read, written, synced or checked).
    #[error("{name}: {cause}")]
    File { name: String, cause: FileCause },
    /// A positions file larger than any save writes.
    #[error("{0} is larger than {MAX_FILE} bytes")]
    TooLarge(String),
    /// tantivy could not open the saved index.
    #[error("cannot open: {0}")]
    Open(tantivy::TantivyError),
    /// The saved index has another schema than this version's.
    #[error("the cache has another schema")]
    OtherSchema,
    /// A file whose checksum does not match its content.
    #[error("{0} is damaged (checksum)")]
    Damaged(String),
    /// tantivy panicked opening the saved index.
    #[error("the cached index could not be opened (tantivy panicked)")]
    Panicked,
    /// The index's own `meta.json` could not be read.
    #[error("cannot read the index metadata: {0}")]
    ReadMeta(OpenReadError),
    /// tantivy could not list the committed segments.
    #[error("{0}")]
    Metas(tantivy::TantivyError),
    /// A commit landed while the save ran.
    #[error("the index changed during the save")]
    Changed,
    /// tantivy named a file outside the names the cache holds.
    #[error("tantivy named a file the cache cannot hold")]
    BadName,
    /// The cache folder could not be listed or synced.
    #[error("{0}")]
    Folder(std::io::Error),
    /// tantivy's metadata is not UTF-8.
    #[error("{0}")]
    MetaNotUtf8(std::string::FromUtf8Error),
    /// The manifest could not be encoded.
    #[error("{0}")]
    Encode(serde_json::Error),
    /// The loaded index could not be served or read.
    #[error("{0}")]
    Index(#[from] super::IndexError),
}

/// What went wrong with one file of the cache ([`IndexCacheError::File`]).
#[derive(Debug, thiserror::Error)]
pub enum FileCause {
    /// The filesystem, or the in-memory directory, refused.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// tantivy could not open the file.
    #[error("{0}")]
    Open(#[from] OpenReadError),
    /// tantivy's list of files could not be encoded.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

impl IndexCacheError {
    /// A failure of the file `name`.
    fn file(name: &str, cause: impl Into<FileCause>) -> IndexCacheError {
        IndexCacheError::File {
            name: name.to_owned(),
            cause: cause.into(),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    format: String,
    /// The segment files, in the cache folder under these names.
    files: Vec<String>,
    /// tantivy's `meta.json` as it was when the files were saved.
    meta: String,
}

/// Loads the cached index. `Ok(None)` when there is none yet; `Err` (a short reason) when there
/// is one that cannot be used: another format, another schema, a missing or damaged file.
pub fn load(
    dir: &Arc<IndexCacheDir>,
    schema: &Schema,
) -> Result<Option<(Index, Files)>, IndexCacheError> {
    let manifest = match dir.read(MANIFEST, MAX_MANIFEST) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => return Err(IndexCacheError::ReadManifest(e)),
    };
    let manifest: Manifest =
        serde_json::from_slice(&manifest).map_err(IndexCacheError::BadManifest)?;
    if manifest.format != FORMAT {
        return Err(IndexCacheError::OtherVersion(manifest.format));
    }
    if manifest.files.len() > MAX_FILES || !manifest.files.iter().all(|f| valid_name(f)) {
        return Err(IndexCacheError::BadNames);
    }
    let files = Files::spilling_to(Arc::clone(dir));
    {
        let mut disk = write(&files.disk);
        for name in &manifest.files {
            if !is_positions(name) {
                // Postings, term dictionaries, fast fields, norms and the path store are read
                // by every query: they are copied into RAM.
                let bytes = dir
                    .read(name, MAX_FILE)
                    .and_then(|b| b.ok_or_else(|| std::io::ErrorKind::NotFound.into()))
                    .map_err(|e| IndexCacheError::file(name, e))?;
                files
                    .ram
                    .atomic_write(Path::new(name), &bytes)
                    .map_err(|e| IndexCacheError::file(name, e))?;
                continue;
            }
            // Positions (half the index) are read only by phrase queries, a few blocks at a
            // time: they stay in the cache folder.
            let file = dir
                .open_file(name)
                .map_err(|e| IndexCacheError::file(name, e))?;
            if file.len() > MAX_FILE {
                return Err(IndexCacheError::TooLarge(name.clone()));
            }
            disk.insert(PathBuf::from(name), FileSlice::new(Arc::new(OnDisk(file))));
        }
    }
    files
        .ram
        .atomic_write(Path::new(META), manifest.meta.as_bytes())
        .map_err(|e| IndexCacheError::file(META, e))?;
    let managed =
        serde_json::to_vec(&manifest.files).map_err(|e| IndexCacheError::file(MANAGED, e))?;
    files
        .ram
        .atomic_write(Path::new(MANAGED), &managed)
        .map_err(|e| IndexCacheError::file(MANAGED, e))?;
    // tantivy trusts its files; a damaged one could panic deep inside it. `Index::open` reads
    // only the metadata, the checksums are checked before any segment is opened (the reader
    // opens them, in `SearchIndex::serve`), and all of it runs under catch_unwind all the same.
    let opened_files = files.clone();
    let opened = std::panic::catch_unwind(move || -> Result<Index, IndexCacheError> {
        let index = Index::open(opened_files).map_err(IndexCacheError::Open)?;
        if index.schema() != *schema {
            return Err(IndexCacheError::OtherSchema);
        }
        for name in &manifest.files {
            match index.directory().validate_checksum(Path::new(name)) {
                Ok(true) => {}
                Ok(false) => return Err(IndexCacheError::Damaged(name.clone())),
                Err(e) => return Err(IndexCacheError::file(name, e)),
            }
        }
        Ok(index)
    });
    match opened {
        Ok(Ok(index)) => Ok(Some((index, files))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(IndexCacheError::Panicked),
    }
}

/// Saves `index`, whose files are in `files`, unless `saved` (the `meta.json` of the last save)
/// shows nothing changed since. Returns whether it wrote: `Ok(false)` also when the index moved
/// on during the save (a merge ended and removed a file being read); the next save catches up.
/// An `Err` (the disk refused) leaves the previous save in place. Files are read from `files`
/// itself, footers included (tantivy's managed directory would hand them out without their
/// footer).
pub fn save(
    index: &Index,
    files: &Files,
    dir: &IndexCacheDir,
    saved: &mut Vec<u8>,
) -> Result<bool, IndexCacheError> {
    let read_meta = || {
        files
            .atomic_read(Path::new(META))
            .map_err(IndexCacheError::ReadMeta)
    };
    let meta = read_meta()?;
    if meta == *saved {
        return Ok(false);
    }
    match write_snapshot(index, files, dir, &meta) {
        Ok(()) => {
            *saved = meta;
            Ok(true)
        }
        Err(_) if read_meta().is_ok_and(|now| now != meta) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes the files of the commit whose `meta.json` is `meta`, then the manifest, then removes
/// what the manifest no longer names.
fn write_snapshot(
    index: &Index,
    files: &Files,
    dir: &IndexCacheDir,
    meta: &[u8],
) -> Result<(), IndexCacheError> {
    let metas = index.load_metas().map_err(IndexCacheError::Metas)?;
    let now = files
        .atomic_read(Path::new(META))
        .map_err(IndexCacheError::ReadMeta)?;
    if now != meta {
        return Err(IndexCacheError::Changed);
    }
    let managed: HashSet<PathBuf> = index.directory().list_managed_files();
    let mut keep: Vec<String> = Vec::new();
    for seg in &metas.segments {
        let uuid = seg.id().uuid_string();
        let deletes = seg
            .has_deletes()
            .then(|| seg.relative_path(SegmentComponent::Delete));
        for file in &managed {
            let Some(name) = file.to_str() else { continue };
            let Some(ext) = name
                .strip_prefix(uuid.as_str())
                .and_then(|r| r.strip_prefix('.'))
            else {
                continue;
            };
            let stale_deletes = ext.ends_with("del") && deletes.as_deref() != Some(file.as_path());
            if stale_deletes || ext.ends_with("temp") {
                continue;
            }
            keep.push(name.to_owned());
        }
    }
    keep.sort();
    if !keep.iter().all(|f| valid_name(f)) {
        return Err(IndexCacheError::BadName);
    }
    let existing: HashSet<String> = dir
        .names()
        .map_err(IndexCacheError::Folder)?
        .into_iter()
        .collect();
    for name in &keep {
        if existing.contains(name) {
            // Segment files never change once written; a positions file written here by the
            // index itself is synced before the manifest names it.
            files
                .sync_spilled(name)
                .map_err(|e| IndexCacheError::file(name, e))?;
            continue;
        }
        let file = files
            .open_read(Path::new(name))
            .map_err(|e| IndexCacheError::file(name, e))?;
        let bytes = file
            .read_bytes()
            .map_err(|e| IndexCacheError::file(name, e))?;
        dir.write(name, bytes.as_slice())
            .map_err(|e| IndexCacheError::file(name, e))?;
    }
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        files: keep,
        meta: String::from_utf8(meta.to_vec()).map_err(IndexCacheError::MetaNotUtf8)?,
    };
    let json = serde_json::to_vec(&manifest).map_err(IndexCacheError::Encode)?;
    dir.write(MANIFEST, &json)
        .map_err(|e| IndexCacheError::file(MANIFEST, e))?;
    dir.sync().map_err(IndexCacheError::Folder)?;
    let named: HashSet<&str> = manifest.files.iter().map(String::as_str).collect();
    for name in existing {
        if name != MANIFEST
            && !is_side_file(&name)
            && !named.contains(name.as_str())
            && valid_name(&name)
        {
            let _ = dir.remove(&name);
        }
    }
    Ok(())
}

/// Removes every file of the cache (it is unusable; the index is being built afresh).
pub fn clear(dir: &IndexCacheDir) -> std::io::Result<()> {
    // The manifest first: without it, whatever else remains is never loaded.
    dir.remove(MANIFEST)?;
    for name in dir.names()? {
        if valid_name(&name) && !is_side_file(&name) {
            dir.remove(&name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_reads_held_at_once_never_share_a_buffer_and_a_dropped_one_is_read_into_again() {
        let tmp = tempfile::tempdir().unwrap();
        let vault_root = tmp.path().join("vault");
        #[allow(clippy::disallowed_methods)] // test fixture
        std::fs::create_dir(&vault_root).unwrap();
        let vault = crate::vault::Vault::open(&vault_root, Default::default()).unwrap();
        let dir =
            crate::vault::cache::IndexCacheDir::open(&tmp.path().join("cache"), &vault).unwrap();
        // 1 MiB of bytes that differ at every offset modulo 251.
        let bytes: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        dir.write("seg.pos", &bytes).unwrap();
        let file = OnDisk(dir.open_file("seg.pos").unwrap());
        let len = 3 * ReadBuffers::SMALLEST / 2;
        let at = |start: usize| file.read_bytes(start..start + len).unwrap();
        let expect = |start: usize| &bytes[start..start + len];
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for round in 0..20 {
                        let a = at(t * 7 + round);
                        let b = at(t * 11 + round + 1);
                        // Both alive: each still holds its own range.
                        assert_eq!(a.as_slice(), expect(t * 7 + round));
                        assert_eq!(b.as_slice(), expect(t * 11 + round + 1));
                        drop(a);
                        let c = at(100 + round);
                        assert_eq!(b.as_slice(), expect(t * 11 + round + 1));
                        assert_eq!(c.as_slice(), expect(100 + round));
                    }
                });
            }
        });
        // A short read and one to the end of the file are whole too.
        assert_eq!(file.read_bytes(5..105).unwrap().as_slice(), &bytes[5..105]);
        let end = bytes.len();
        assert_eq!(
            file.read_bytes(end - len..end).unwrap().as_slice(),
            &bytes[end - len..]
        );
        // What is kept stays within its bound.
        let kept: usize = lock(&READ_BUFFERS.kept).iter().map(|b| b.len()).sum();
        assert!(kept <= ReadBuffers::MAX_BYTES, "{kept}");
    }
}
