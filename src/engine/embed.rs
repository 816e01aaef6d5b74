//! The engine's embeddings: every note cut into sections ([`crate::semantic::chunk`]) and
//! embedded by the static model in the background once the keyword index is ready, then kept in
//! step from the same reconciles that update model and index (changed notes are marked dirty
//! and re-embedded within about 100 ms).
//!
//! With an index cache folder, the vectors are saved there too ([`crate::semantic::saved`]):
//! after the whole vault is embedded, at most once a minute while notes change, and at
//! shutdown. A restart loads them first and re-embeds only the notes whose version changed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, Weak};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Serialize;

use super::Engine;
use super::stop::Stop;
use crate::locks::{lock, read, write};
use crate::semantic::store::Section;
use crate::semantic::{Embedder, VectorStore, chunk, saved};
use crate::vault::cache::{EMBEDDINGS_FILE, IndexCacheDir};
use crate::vault::{FileMeta, VaultPath};

/// Notes embedded between two updates of the store (and two checks for a shutdown).
const BATCH: usize = 256;
/// How often changed notes are re-embedded.
const DIRTY_EVERY: Duration = Duration::from_millis(100);
/// Least time between two saves of the vectors while notes change.
const SAVE_EVERY: Duration = Duration::from_secs(60);
/// Notes past which a transformer is warned about (minutes of embedding on two cores).
const TRANSFORMER_NOTES: usize = 10_000;
/// Largest embeddings cache file read (about 300 bytes a section: millions of sections).
const MAX_SAVED_BYTES: u64 = 4 << 30;

/// The model and the vectors.
pub struct Semantic {
    model: Arc<Embedder>,
    store: RwLock<VectorStore>,
    /// Notes changed (or removed) since they were last embedded.
    dirty: Mutex<HashSet<VaultPath>>,
    /// True once every note of the first build has been embedded.
    complete: AtomicBool,
    done: AtomicU64,
    total: AtomicU64,
    embed_ms: Mutex<Option<u64>>,
    /// What became of the embeddings cache (for `vault_info`).
    cache: Mutex<String>,
    /// True when the store changed since it was last saved.
    unsaved: AtomicBool,
    /// Notes embedded (not taken from the cache) by the first pass over the vault.
    fresh: AtomicU64,
    /// The vault's boilerplate lines, left out of what is embedded (see
    /// [`Engine::boilerplate_of`]).
    boilerplate: RwLock<Arc<chunk::Boilerplate>>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The embedding model and how far embedding is, for `vault_info` and search replies.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct EmbeddingStatus {
    /// The model's name.
    pub model: String,
    /// The model's revision, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Dimensions of its vectors.
    pub dimensions: usize,
    /// `waiting` (for the keyword index), `embedding` or `ready`.
    pub state: &'static str,
    /// Notes embedded so far, and of how many.
    pub embedded: u64,
    /// Notes to embed.
    pub total: u64,
    /// Sections (vectors) held.
    pub sections: usize,
    /// How long embedding the whole vault took, once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_ms: Option<u64>,
    /// The embeddings cache: `off` (no index cache folder), `new`, `loaded N notes` (until the
    /// first pass), `reused N of M notes`, or `rebuilt: <reason>`.
    pub cache: String,
}

/// The engine's semantic search: the model and vectors once set, or why it could not be had.
#[derive(Debug, Default)]
pub(super) struct Embeddings {
    /// The embedding model and the notes' vectors, with `--embedding-model`.
    semantic: OnceLock<Arc<Semantic>>,
    /// Why `--semantic` has no model (the download or the load failed).
    unavailable: OnceLock<String>,
}

/// A note's new vectors: path, version stamp, sections.
type Embedded = (VaultPath, u64, Vec<(Section, Vec<f32>)>);

/// A note's version as the store records it.
fn stamp(meta: &FileMeta) -> u64 {
    let t = crate::model::nanos(meta.modified) as u64;
    t ^ meta.size.rotate_left(40) ^ meta.ino.rotate_left(20)
}

impl Semantic {
    /// The model.
    pub fn model(&self) -> &Embedder {
        &self.model
    }

    /// The vectors.
    pub fn store(&self) -> RwLockReadGuard<'_, VectorStore> {
        read(&self.store)
    }

    /// True once every note has been embedded once.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// The vectors of one note's text, section by section.
    pub fn embed_note(&self, path: &VaultPath, text: &str) -> Vec<(Section, Vec<f32>)> {
        let boilerplate = Arc::clone(&read(&self.boilerplate));
        let chunks = chunk::chunks_without(path.stem(), text, &boilerplate);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        let vectors = self.model.embed_many(&texts);
        chunks
            .into_iter()
            .zip(vectors)
            .filter_map(|(c, v)| {
                let v = v?;
                let section = Section {
                    line: c.line,
                    heading: c.heading.map(String::into_boxed_str),
                };
                Some((section, v))
            })
            .collect()
    }
}

impl Engine {
    /// Turns on semantic search with `model`. Call before [`Engine::start`]; the first call
    /// wins.
    #[cfg(feature = "semantic")]
    pub fn set_embedding_model(&self, model: impl Into<Embedder>) {
        self.share_embedding_model(Arc::new(model.into()));
    }

    /// `set_embedding_model` with a model other engines use too (a server of several
    /// vaults loads it once).
    pub fn share_embedding_model(&self, model: Arc<Embedder>) {
        let dims = model.dimensions();
        let _ = self.embeddings.semantic.set(Arc::new(Semantic {
            model,
            store: RwLock::new(VectorStore::new(dims)),
            dirty: Mutex::new(HashSet::new()),
            complete: AtomicBool::new(false),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            embed_ms: Mutex::new(None),
            cache: Mutex::new("off".to_owned()),
            unsaved: AtomicBool::new(false),
            fresh: AtomicU64::new(0),
            boilerplate: RwLock::new(Arc::default()),
        }));
    }

    /// Records why the embedding model that was asked for could not be had (no path of the
    /// host in `why`): searches by meaning and `vault_info` say it.
    pub fn set_embedding_unavailable(&self, why: String) {
        let _ = self.embeddings.unavailable.set(why);
    }

    /// Why the embedding model asked for is missing, if it is.
    pub fn embedding_unavailable(&self) -> Option<&str> {
        match self.embeddings.semantic.get() {
            Some(_) => None,
            None => self.embeddings.unavailable.get().map(String::as_str),
        }
    }

    /// The embedding model and vectors, when semantic search is on.
    pub fn semantic(&self) -> Option<&Semantic> {
        self.embeddings.semantic.get().map(|s| &**s)
    }

    /// How far embedding is, when semantic search is on.
    pub fn embedding_status(&self) -> Option<EmbeddingStatus> {
        let s = self.embeddings.semantic.get()?;
        let info = s.model.info();
        let state = if s.is_complete() {
            "ready"
        } else if self.is_ready() {
            "embedding"
        } else {
            "waiting"
        };
        Some(EmbeddingStatus {
            model: info.name.clone(),
            revision: info.revision.clone(),
            dimensions: info.dimensions,
            state,
            embedded: s.done.load(Ordering::Relaxed),
            total: s.total.load(Ordering::Relaxed),
            sections: s.store().sections(),
            embed_ms: *lock(&s.embed_ms),
            cache: lock(&s.cache).clone(),
        })
    }

    /// Marks notes to re-embed (called by every reconcile after the first build).
    pub(super) fn mark_dirty<'a>(&self, paths: impl Iterator<Item = &'a VaultPath>) {
        if let Some(s) = self.embeddings.semantic.get() {
            lock(&s.dirty).extend(paths.cloned());
        }
    }

    /// Embeds `paths` (in parallel) and stores the vectors; a path the model no longer has as a
    /// note is removed from the store. Returns how many notes were embedded (the others were
    /// current already).
    fn embed_paths(&self, s: &Semantic, paths: &[VaultPath]) -> usize {
        let model = self.model_now();
        let todo: Vec<(&VaultPath, u64)> = paths
            .iter()
            .filter_map(|p| {
                let note = model.note(p)?;
                let st = stamp(&note.meta);
                (s.store().stamp(p) != Some(st)).then_some((p, st))
            })
            .collect();
        let gone: Vec<&VaultPath> = paths.iter().filter(|p| model.note(p).is_none()).collect();
        drop(model);
        let texts = self.texts();
        let made: Vec<Embedded> = todo
            .par_iter()
            .filter_map(|&(p, st)| {
                let kept = texts.as_ref().and_then(|t| t.get(p));
                let vectors = match kept {
                    Some(t) => s.embed_note(p, &t.text),
                    None => {
                        let data = self.vault.read_file(p).ok()?;
                        s.embed_note(p, &String::from_utf8_lossy(&data.bytes))
                    }
                };
                Some((p.clone(), st, vectors))
            })
            .collect();
        drop(texts);
        let embedded = made.len();
        let mut store = write(&s.store);
        if embedded > 0 || !gone.is_empty() {
            s.unsaved.store(true, Ordering::Release);
        }
        for p in gone {
            store.remove(p);
        }
        for (p, st, v) in made {
            store.insert(p, st, v);
        }
        embedded
    }

    /// The lines found in many of `paths`' notes ([`chunk::boilerplate`]).
    fn boilerplate_of(&self, paths: &[VaultPath]) -> chunk::Boilerplate {
        let texts = self.texts();
        let counts = paths
            .par_iter()
            .fold(HashMap::<u64, u32>::new, |mut counts, p| {
                let keys = match texts.as_ref().and_then(|t| t.get(p)) {
                    Some(t) => chunk::line_keys(p.stem(), &t.text),
                    None => match self.vault.read_file(p) {
                        Ok(d) => chunk::line_keys(p.stem(), &String::from_utf8_lossy(&d.bytes)),
                        Err(_) => return counts,
                    },
                };
                for k in keys {
                    *counts.entry(k).or_default() += 1;
                }
                counts
            })
            .reduce(HashMap::new, |mut a, b| {
                for (k, n) in b {
                    *a.entry(k).or_default() += n;
                }
                a
            });
        chunk::boilerplate(counts, paths.len())
    }

    /// Embeds every note of the model, in batches, unless a stop is requested.
    fn embed_all(&self, s: &Semantic) {
        let started = Instant::now();
        let paths: Vec<VaultPath> = self.model_now().notes().keys().cloned().collect();
        s.total.store(paths.len() as u64, Ordering::Relaxed);
        if s.model.is_transformer() && paths.len() > TRANSFORMER_NOTES {
            tracing::warn!(
                notes = paths.len(),
                "a transformer embeds about 50 sections a second on two cores: this vault will \
                 take a long time (keyword search serves meanwhile); a static model made by \
                 `capvault model import` embeds it in seconds"
            );
        }
        // The vectors loaded from the cache were made without the boilerplate saved with them:
        // the notes embedded now leave out the same lines. A first start counts them.
        let loaded = lock(&s.cache).starts_with("loaded");
        if !loaded {
            let boilerplate = self.boilerplate_of(&paths);
            tracing::info!(
                lines = boilerplate.len(),
                ms = started.elapsed().as_millis() as u64,
                "boilerplate lines found"
            );
            *write(&s.boilerplate) = Arc::new(boilerplate);
        }
        for batch in paths.chunks(BATCH) {
            if self.is_stopping() {
                return;
            }
            let n = self.embed_paths(s, batch);
            s.fresh.fetch_add(n as u64, Ordering::Relaxed);
            s.done.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        // Notes the cache held that are no longer notes.
        self.forget_gone(s);
        {
            let mut cache = lock(&s.cache);
            if cache.starts_with("loaded") {
                let fresh = s.fresh.load(Ordering::Relaxed) as usize;
                *cache = format!(
                    "reused {} of {} notes",
                    paths.len().saturating_sub(fresh),
                    paths.len()
                );
            }
        }
        let ms = started.elapsed().as_millis() as u64;
        *lock(&s.embed_ms) = Some(ms);
        s.complete.store(true, Ordering::Release);
        tracing::info!(
            notes = paths.len(),
            sections = s.store().sections(),
            ms,
            "notes embedded"
        );
    }

    /// Drops the vectors of every note the model no longer has.
    fn forget_gone(&self, s: &Semantic) {
        let model = self.model_now();
        let mut store = write(&s.store);
        let before = store.len();
        store.retain(|p| model.note(p).is_some());
        if store.len() != before {
            s.unsaved.store(true, Ordering::Release);
        }
    }

    /// Re-embeds the notes marked dirty.
    fn embed_dirty(&self, s: &Semantic) {
        let paths: Vec<VaultPath> = std::mem::take(&mut *lock(&s.dirty)).into_iter().collect();
        if paths.is_empty() {
            return;
        }
        let model = self.model_now();
        // A folder's removal names the folder: forget every note under it that is gone.
        let total = model.note_count() as u64;
        drop(model);
        for batch in paths.chunks(BATCH) {
            self.embed_paths(s, batch);
        }
        self.forget_gone(s);
        s.total.store(total, Ordering::Relaxed);
        s.done.store(total, Ordering::Relaxed);
    }
}

impl Engine {
    /// The folder the vectors are saved in: the index cache folder, when there is one.
    fn embeddings_dir(&self) -> Option<Arc<IndexCacheDir>> {
        self.index.dir().cloned()
    }

    /// Loads the saved vectors, if any were saved by this model. A file that fails a check is
    /// removed and every note embedded again.
    fn load_embeddings(&self, s: &Semantic) {
        let Some(dir) = self.embeddings_dir() else {
            return;
        };
        let started = Instant::now();
        let status = match dir.open_file(EMBEDDINGS_FILE) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "new".to_owned(),
            Err(e) => {
                let _ = dir.remove(EMBEDDINGS_FILE);
                format!("rebuilt: cannot read the embeddings cache ({})", e.kind())
            }
            Ok(file) if file.len() > MAX_SAVED_BYTES => {
                let _ = dir.remove(EMBEDDINGS_FILE);
                "rebuilt: the embeddings cache is larger than any this server writes".to_owned()
            }
            Ok(file) => {
                let info = s.model.info();
                let loaded = saved::read(
                    file.reader(),
                    file.len(),
                    s.model.fingerprint(),
                    info.dimensions,
                );
                drop(file);
                match loaded {
                    Ok((store, boilerplate)) => {
                        let n = store.len();
                        *write(&s.store) = store;
                        *write(&s.boilerplate) = Arc::new(boilerplate);
                        tracing::info!(
                            notes = n,
                            ms = started.elapsed().as_millis() as u64,
                            "embeddings cache loaded"
                        );
                        format!("loaded {n} notes")
                    }
                    Err(why) => {
                        tracing::info!(reason = %why, "embeddings cache not usable; embedding afresh");
                        let _ = dir.remove(EMBEDDINGS_FILE);
                        format!("rebuilt: {why}")
                    }
                }
            }
        };
        *lock(&s.cache) = status;
    }

    /// Saves the vectors if they changed since the last save. Errors are logged and shown by
    /// `vault_info`; the previous save stays in place.
    pub(super) fn save_embeddings(&self) {
        let Some(s) = self.embeddings.semantic.get() else {
            return;
        };
        let Some(dir) = self.embeddings_dir() else {
            return;
        };
        if !s.unsaved.swap(false, Ordering::AcqRel) {
            return;
        }
        let started = Instant::now();
        // The store stays read-locked while it is written out: searches go on, a re-embed
        // waits for the write (to the page cache: well under a second at 100,000 notes).
        let written = dir.write_with(EMBEDDINGS_FILE, |file| {
            let boilerplate = Arc::clone(&read(&s.boilerplate));
            saved::write(&s.store(), s.model.fingerprint(), &boilerplate, file)
        });
        match written {
            Ok(()) => tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                "embeddings cache saved"
            ),
            Err(e) => {
                s.unsaved.store(true, Ordering::Release);
                tracing::warn!(error = %e, "embeddings cache not saved");
                self.status.report().last_error = Some(format!("embeddings cache not saved: {e}"));
            }
        }
    }
}

/// The embedding thread: waits for the keyword index, embeds every note, then keeps up with
/// changes until the engine stops.
pub(super) fn run_embedder(weak: &Weak<Engine>, stop: &Stop) {
    // The saved vectors first: semantic search answers from them while the index builds.
    {
        let Some(e) = weak.upgrade() else { return };
        let Some(s) = e.embeddings.semantic.get().cloned() else {
            return;
        };
        e.load_embeddings(&s);
    }
    loop {
        match weak.upgrade() {
            Some(e) if e.is_ready() => break,
            Some(_) => {}
            None => return,
        }
        if stop.sleep(DIRTY_EVERY) {
            return;
        }
    }
    {
        let Some(e) = weak.upgrade() else { return };
        let Some(s) = e.embeddings.semantic.get().cloned() else {
            return;
        };
        e.embed_all(&s);
        if s.is_complete() {
            e.save_embeddings();
        }
    }
    let mut saved_at = Instant::now();
    while !stop.sleep(DIRTY_EVERY) {
        let Some(e) = weak.upgrade() else { return };
        let Some(s) = e.embeddings.semantic.get().cloned() else {
            return;
        };
        e.embed_dirty(&s);
        if saved_at.elapsed() >= SAVE_EVERY && s.unsaved.load(Ordering::Acquire) {
            e.save_embeddings();
            saved_at = Instant::now();
        }
    }
}
