//! `--index-pdfs`: the text of every PDF in the vault, kept so that search covers it.
//!
//! Once the first build is ready, a background thread reads each visible PDF's text through
//! the PDF worker ([`super::pdf`], off the request path), and indexes each page as a document
//! of a second, in-memory search index ([`SearchIndex`], the same analyzer and scoring as the
//! notes') whose document paths are `<pdf path>#<page>`. It then follows the model: after every
//! reconcile that changed something, PDFs whose size, modification time or inode changed are
//! read again and removed ones dropped. The texts are saved in the index cache folder
//! ([`PDF_TEXTS_FILE`]), so a restart reads only the PDFs that changed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Engine;
use super::pdf::Lane;
use super::stop::Stop;
use crate::index::{SearchIndex, Stamp};
use crate::locks::{read, write};
use crate::media::pdf::{PdfError, PdfText};
use crate::vault::VaultPath;
use crate::vault::cache::PDF_TEXTS_FILE;

/// How often the thread looks for reconciles that changed something.
const CHECK_EVERY: Duration = Duration::from_millis(200);
/// How often a pass that reads many PDFs makes the pages read so far searchable.
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// Largest saved texts file read back.
const MAX_SAVED_BYTES: u64 = 2 << 30;
/// Version of the saved file's layout.
const SAVED_VERSION: u32 = 1;

/// One PDF's text as last read.
#[derive(Debug, Clone)]
pub struct PdfDoc {
    /// Its size, modification time and inode when read.
    stamp: Stamp,
    /// Its text, or why there is none.
    pub text: Result<Arc<PdfText>, PdfError>,
}

impl PdfDoc {
    fn pages(&self) -> usize {
        self.text.as_ref().map_or(0, |t| t.pages.len())
    }
}

/// The saved texts file: JSON, one entry per PDF.
#[derive(Deserialize)]
struct Saved {
    version: u32,
    docs: Vec<SavedDoc>,
}

#[derive(Deserialize)]
struct SavedDoc {
    path: String,
    size: u64,
    mtime_ns: i64,
    ino: u64,
    text: Result<PdfText, PdfError>,
}

#[derive(Serialize)]
struct SavedRef<'a> {
    version: u32,
    docs: Vec<SavedDocRef<'a>>,
}

#[derive(Serialize)]
struct SavedDocRef<'a> {
    path: &'a str,
    size: u64,
    mtime_ns: i64,
    ino: u64,
    text: Result<&'a PdfText, &'a PdfError>,
}

/// The PDFs' texts and their pages' index.
pub struct PdfStore {
    docs: RwLock<BTreeMap<VaultPath, PdfDoc>>,
    index: SearchIndex,
    /// PDFs read (not taken from the saved file) since the start.
    read_count: AtomicU64,
    /// Milliseconds the first pass took, once done (0 before).
    first_pass_ms: AtomicU64,
    /// PDFs the model lists, as of the last pass's start (0 before the first).
    listed: AtomicUsize,
    /// PDFs of the pass under way still to read (new or changed ones).
    to_read: AtomicUsize,
}

impl std::fmt::Debug for PdfStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdfStore")
            .field("pdfs", &read(&self.docs).len())
            .finish_non_exhaustive()
    }
}

/// A page's document path in the pages' index: `<pdf path>#<page>`.
pub fn page_key(path: &VaultPath, page: usize) -> Option<VaultPath> {
    VaultPath::parse(&format!("{path}#{page}")).ok()
}

/// The PDF and page a pages' index path stands for.
pub fn split_page_key(key: &VaultPath) -> Option<(VaultPath, u32)> {
    let (path, page) = key.as_str().rsplit_once('#')?;
    Some((VaultPath::parse(path).ok()?, page.parse().ok()?))
}

/// What `vault_info` says of the PDFs' texts.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PdfStatus {
    /// PDFs whose text is kept.
    pub pdfs: usize,
    /// Of those, PDFs with no text (scanned pages) or whose text could not be read.
    pub without_text: usize,
    /// Pages indexed.
    pub pages: usize,
    /// PDFs read by this run (the others' texts came from the index cache folder).
    pub read_this_run: u64,
    /// How long the first pass over the vault's PDFs took (absent until it is done).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_pass_ms: Option<u64>,
    /// PDFs new or changed that are still to be read (their hits are missing meanwhile).
    pub to_read: usize,
}

impl PdfStore {
    /// An empty store.
    pub fn new() -> Result<PdfStore, crate::index::IndexError> {
        Ok(PdfStore {
            docs: RwLock::new(BTreeMap::new()),
            index: SearchIndex::new(1)?,
            read_count: AtomicU64::new(0),
            first_pass_ms: AtomicU64::new(0),
            listed: AtomicUsize::new(0),
            to_read: AtomicUsize::new(0),
        })
    }

    /// The pages' index.
    pub fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// The text of the PDF at `path`, if kept.
    pub fn text(&self, path: &VaultPath) -> Option<Arc<PdfText>> {
        read(&self.docs).get(path)?.text.as_ref().ok().cloned()
    }

    /// Every kept PDF with text, in path order.
    pub fn texts(&self) -> Vec<(VaultPath, Arc<PdfText>)> {
        read(&self.docs)
            .iter()
            .filter_map(|(p, d)| Some((p.clone(), d.text.as_ref().ok()?.clone())))
            .collect()
    }

    /// What `vault_info` shows.
    pub fn status(&self) -> PdfStatus {
        let docs = read(&self.docs);
        let ms = self.first_pass_ms.load(Ordering::Acquire);
        PdfStatus {
            pdfs: docs.len(),
            without_text: docs
                .values()
                .filter(|d| d.text.as_ref().map_or(true, |t| !t.has_text()))
                .count(),
            pages: docs.values().map(PdfDoc::pages).sum(),
            read_this_run: self.read_count.load(Ordering::Relaxed),
            first_pass_ms: (ms > 0).then_some(ms),
            to_read: self.to_read.load(Ordering::Relaxed),
        }
    }

    /// Makes the pages staged so far searchable.
    fn commit(&self) {
        if let Err(e) = self.index.commit() {
            tracing::warn!(error = %e, "the PDF pages' index was not committed");
        }
    }

    /// Whether the first pass over the vault's PDFs is done (every PDF read or taken from the
    /// saved texts, or the pass stopped by a shutdown).
    pub fn first_pass_done(&self) -> bool {
        self.first_pass_ms.load(Ordering::Acquire) > 0
    }

    /// What a search answered before the first pass was done says: the PDFs are still being
    /// read, so hits in some of them are missing. `None` once the pass is done.
    pub fn unread_note(&self) -> Option<String> {
        if self.first_pass_done() {
            return None;
        }
        let listed = self.listed.load(Ordering::Relaxed);
        let left = self.to_read.load(Ordering::Relaxed);
        Some(if listed == 0 {
            "the PDFs are not read yet (they are read once the notes are indexed): hits in PDFs \
             are missing; ask again shortly"
                .to_owned()
        } else {
            format!(
                "the PDFs are still being read ({left} of {listed} to go): hits in those are \
                 missing; ask again shortly"
            )
        })
    }

    /// Stages `doc`'s pages for `path` in the pages' index (after removing what was there).
    fn stage(
        &self,
        path: &VaultPath,
        doc: &PdfDoc,
        old_pages: usize,
        meta: &crate::vault::FileMeta,
    ) {
        for page in 1..=old_pages {
            if let Some(key) = page_key(path, page) {
                self.index.stage_removal(&key);
            }
        }
        let Ok(text) = &doc.text else { return };
        let parsed = crate::markdown::parse_note("");
        for (i, page) in text.pages.iter().enumerate() {
            let Some(key) = page_key(path, i + 1) else {
                continue;
            };
            if page.trim().is_empty() {
                continue;
            }
            let note = crate::model::NoteRead {
                path: &key,
                meta,
                text: page,
                parsed: &parsed,
            };
            if let Err(e) = self.index.stage(note) {
                tracing::warn!(path = %path, error = %e, "a PDF page was not indexed");
            }
        }
    }
}

impl Engine {
    /// The PDFs' texts, with `--index-pdfs`.
    pub fn pdfs(&self) -> Option<&Arc<PdfStore>> {
        self.pdf_store.get()
    }

    /// Brings the PDFs' texts up to date with the model: reads the PDFs that are new or
    /// changed, drops the removed ones. Returns whether anything changed.
    fn refresh_pdfs(&self, store: &PdfStore, stop: &Stop) -> bool {
        let listed: Vec<(VaultPath, crate::vault::FileMeta)> = {
            let model = self.model_now();
            model
                .files()
                .iter()
                .filter(|(p, _)| crate::media::pdf::is_pdf_name(p.file_name()))
                .map(|(p, m)| (p.clone(), *m))
                .collect()
        };
        let mut changed = false;
        let gone: Vec<(VaultPath, usize)> = {
            let docs = read(&store.docs);
            let listed_paths: std::collections::HashSet<&VaultPath> =
                listed.iter().map(|(p, _)| p).collect();
            docs.iter()
                .filter(|(p, _)| !listed_paths.contains(p))
                .map(|(p, d)| (p.clone(), d.pages()))
                .collect()
        };
        for (path, pages) in gone {
            for page in 1..=pages {
                if let Some(key) = page_key(&path, page) {
                    store.index.stage_removal(&key);
                }
            }
            write(&store.docs).remove(&path);
            changed = true;
        }
        let limit = crate::media::pdf::MAX_PDF_BYTES.min(self.vault().limits().max_read_bytes);
        store.listed.store(listed.len(), Ordering::Relaxed);
        // The PDFs new or changed since read, each with what was known of it (stamp, pages).
        type Stale = (VaultPath, crate::vault::FileMeta, Option<(Stamp, usize)>);
        let stale: Vec<Stale> = {
            let docs = read(&store.docs);
            listed
                .into_iter()
                .filter_map(|(path, meta)| {
                    let known = docs.get(&path).map(|d| (d.stamp, d.pages()));
                    (!known.is_some_and(|(s, _)| s == Stamp::of(&meta)))
                        .then_some((path, meta, known))
                })
                .collect()
        };
        store.to_read.store(stale.len(), Ordering::Relaxed);
        let mut uncommitted = changed;
        let mut committed = Instant::now();
        for (path, meta, known) in stale {
            if stop.is_set() {
                break;
            }
            let stamp = Stamp::of(&meta);
            let text = if meta.size > limit {
                Err(PdfError::Damaged(format!(
                    "over the {limit}-byte limit for reading a PDF's text"
                )))
            } else {
                match self.vault().read_file(&path) {
                    Ok(data) => self
                        .options
                        .pdf
                        .read_in(Lane::Background, &data.bytes, &|| {
                            stop.is_set() && !self.options.finish_pdf_at_stop
                        })
                        .map(Arc::new),
                    Err(_) => {
                        store.to_read.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    }
                }
            };
            if stop.is_set() && matches!(text, Err(PdfError::NoReader(_))) {
                // Given up at shutdown: read at the next start.
                break;
            }
            store.to_read.fetch_sub(1, Ordering::Relaxed);
            store.read_count.fetch_add(1, Ordering::Relaxed);
            let doc = PdfDoc { stamp, text };
            store.stage(&path, &doc, known.map_or(0, |(_, n)| n), &meta);
            write(&store.docs).insert(path, doc);
            changed = true;
            uncommitted = true;
            // A long pass shows what it read as it goes (a one-shot call answers mid-pass).
            if committed.elapsed() >= COMMIT_EVERY {
                store.commit();
                committed = Instant::now();
                uncommitted = false;
            }
        }
        if uncommitted {
            store.commit();
        }
        changed
    }

    /// Loads the saved texts into `store` (those still current are kept by the first refresh).
    fn load_pdf_texts(&self, store: &PdfStore) {
        let Some(dir) = self.index.dir() else { return };
        let Ok(Some(bytes)) = dir.read(PDF_TEXTS_FILE, MAX_SAVED_BYTES) else {
            return;
        };
        let saved: Saved = match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(error = %e, "saved PDF texts not used");
                return;
            }
        };
        if saved.version != SAVED_VERSION {
            return;
        }
        let model = self.model_now();
        let files = model.files();
        let mut docs = write(&store.docs);
        for saved in saved.docs {
            let Ok(path) = VaultPath::parse(&saved.path) else {
                continue;
            };
            let Some(meta) = files.get(&path) else {
                continue;
            };
            let stamp = Stamp {
                size: saved.size,
                mtime_ns: saved.mtime_ns,
                ino: saved.ino,
            };
            // A text that could not be had for want of a reader is read again.
            if Stamp::of(meta) != stamp || matches!(saved.text, Err(PdfError::NoReader(_))) {
                continue;
            }
            let doc = PdfDoc {
                stamp,
                text: saved.text.map(Arc::new),
            };
            store.stage(&path, &doc, 0, meta);
            docs.insert(path, doc);
        }
        drop(docs);
        if let Err(e) = store.index.commit() {
            tracing::warn!(error = %e, "the PDF pages' index was not committed");
        }
    }

    /// Saves the texts to the index cache folder.
    fn save_pdf_texts(&self, store: &PdfStore) {
        let Some(dir) = self.index.dir() else { return };
        let docs = read(&store.docs);
        let result = dir.write_with(PDF_TEXTS_FILE, |file| {
            serde_json::to_writer(
                std::io::BufWriter::new(file),
                &SavedRef {
                    version: SAVED_VERSION,
                    docs: docs
                        .iter()
                        .filter(|(_, d)| !matches!(d.text, Err(PdfError::NoReader(_))))
                        .map(|(path, d)| SavedDocRef {
                            path: path.as_str(),
                            size: d.stamp.size,
                            mtime_ns: d.stamp.mtime_ns,
                            ino: d.stamp.ino,
                            text: d.text.as_deref(),
                        })
                        .collect(),
                },
            )
            .map_err(std::io::Error::other)
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, "PDF texts not saved");
        }
    }
}

/// The thread behind `--index-pdfs`: waits for the first build, loads the saved texts, reads
/// the rest, then follows the reconciles.
pub(super) fn run_pdf_indexer(weak: &Weak<Engine>, stop: &Stop) {
    loop {
        match weak.upgrade() {
            Some(e) if e.is_ready() => break,
            Some(_) => {}
            None => return,
        }
        if stop.sleep(CHECK_EVERY) {
            return;
        }
    }
    let (store, mut seen) = {
        let Some(e) = weak.upgrade() else { return };
        let Some(store) = e.pdfs().cloned() else {
            return;
        };
        let seen = *e.changes.borrow();
        let started = Instant::now();
        e.load_pdf_texts(&store);
        let read_any = e.refresh_pdfs(&store, stop);
        store.first_pass_ms.store(
            (started.elapsed().as_millis() as u64).max(1),
            Ordering::Release,
        );
        tracing::info!(
            pdfs = read(&store.docs).len(),
            read = store.read_count.load(Ordering::Relaxed),
            ms = started.elapsed().as_millis() as u64,
            "PDF texts ready"
        );
        if read_any {
            e.save_pdf_texts(&store);
        }
        (store, seen)
    };
    while !stop.sleep(CHECK_EVERY) {
        let Some(e) = weak.upgrade() else { return };
        let now = *e.changes.borrow();
        if now == seen {
            continue;
        }
        seen = now;
        if e.refresh_pdfs(&store, stop) {
            e.save_pdf_texts(&store);
        }
    }
}
