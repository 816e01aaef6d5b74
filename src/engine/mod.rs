//! The engine: the vault model and the search index, built together and kept fresh together.
//!
//! At startup one background pass reads every note once through the capability layer; each
//! parse feeds the model and the index. After that, three things bring both up to date, always
//! by re-reading through the vault (never trusting a path or content from elsewhere):
//!
//! - the file watcher ([`crate::vault::watch`]): a debounced burst of events becomes a set of
//!   scopes (files or folders) to reconcile; an overflow of the kernel queue, or a burst touching
//!   more than [`MAX_SCOPES`] places, becomes a full reconcile;
//! - a periodic full reconcile (a stat scan of every file; only changed files are re-read), which
//!   also covers anything the watcher missed;
//! - optionally, a query-time reconcile when the model is older than `--rescan-after`.
//!
//! Its parts, by concern: [`options`](EngineOptions) (what it is told), `status` ([`Phase`],
//! [`IndexStatus`]), `lifecycle` (the first build, [`Engine::start`], the watcher,
//! [`Engine::shutdown`]), `sync` (reconciles: [`Engine::sync_all`]), `cache` (the index and its
//! cache folder), `excluded` (Obsidian's Excluded files), `texts` (every note's text, for
//! exact and regex search) and `embed` (semantic search's vectors).

use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use crate::index::SearchIndex;
use crate::locks::read;
use crate::model::{ModelRead, SharedModel};
use crate::vault::Vault;

mod cache;
pub mod changes;
mod embed;
mod excluded;
pub use excluded::Distrusted;
mod lifecycle;
mod options;
pub mod pdf;
pub mod pdfs;
mod status;
mod stop;
mod sync;
mod texts;

pub use cache::IndexCache;
pub use embed::{EmbeddingStatus, Semantic};
pub use lifecycle::{FIRST_SAVE_AFTER, MAX_SCOPES, SAVE_EVERY};
pub use options::{EXACT_SCAN_MAX_NOTES, EngineOptions, PromptOptions, SCAN_BUDGET};
pub use status::{IndexStatus, Phase, Progress};
pub use texts::{Kept, NoteText, Slot, Texts};

/// The model and the index of one vault, and what keeps them fresh. One per vault, shared by
/// every session (`Arc<Engine>`); background threads hold it only weakly, so it is dropped with
/// its last session, and [`Engine::shutdown`] stops and joins them.
pub struct Engine {
    vault: Arc<Vault>,
    options: EngineOptions,
    model: SharedModel,
    /// The search index and its cache folder.
    index: cache::IndexStore,
    /// Every note's text, when [`EngineOptions::keep_texts`] (updated with the model and index).
    texts: RwLock<Texts>,
    /// Serialises reconciles.
    reconciles: sync::Reconciles,
    /// Where the first build is, and what `vault_info` reports.
    status: status::Status,
    /// The background threads and the request that stops them.
    background: lifecycle::Background,
    /// Obsidian's Excluded files as last read.
    excluded: excluded::ExcludedFiles,
    /// Semantic search, with `--embedding-model`.
    embeddings: embed::Embeddings,
    /// Counts the reconciles that changed something, for whoever waits on a change.
    changes: tokio::sync::watch::Sender<u64>,
    /// The text of PDFs read lately.
    pdf_texts: pdf::TextCache,
    /// Every PDF's text, with `--index-pdfs`.
    pdf_store: std::sync::OnceLock<Arc<pdfs::PdfStore>>,
    /// Every note created, changed, moved or deleted, numbered (`changes_since`).
    change_log: changes::ChangeLog,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // The last reference may be dropped on one of the engine's own threads: wake them all
        // (they hold only weak references and end), but join none here.
        self.request_stop();
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine for `vault` with its index cache, shared from the start. Call
    /// [`Engine::start`] to build in the background; otherwise the first query builds.
    pub fn open(vault: Vault, options: EngineOptions, cache: IndexCache) -> Arc<Engine> {
        // Hidden text marked or stripped: a `%%` comment's Dataview fields are not read, so
        // that a query's values cannot carry what the policy keeps from the client.
        if options.hidden_text != crate::markdown::hidden::Policy::Show {
            crate::obsidian::dataview::read_comment_fields(false);
        }
        let change_log = match &cache {
            IndexCache::Dir(dir) => changes::ChangeLog::open(Arc::clone(dir)),
            _ => changes::ChangeLog::in_memory(),
        };
        let engine = Engine {
            change_log,
            vault: Arc::new(vault),
            options,
            model: SharedModel::new(),
            index: cache::IndexStore::new(cache),
            texts: RwLock::new(Texts::in_memory()),
            reconciles: sync::Reconciles::new(),
            status: status::Status::new(),
            background: lifecycle::Background::new(),
            excluded: excluded::ExcludedFiles::default(),
            embeddings: embed::Embeddings::default(),
            changes: tokio::sync::watch::Sender::new(0),
            pdf_texts: pdf::TextCache::default(),
            pdf_store: std::sync::OnceLock::new(),
        };
        if engine.options.index_pdfs {
            match pdfs::PdfStore::new() {
                Ok(store) => {
                    let _ = engine.pdf_store.set(Arc::new(store));
                }
                Err(e) => tracing::warn!(error = %e, "PDFs will not be searched"),
            }
        }
        engine.init_index_cache();
        Arc::new(engine)
    }

    /// The options it was opened with.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// A receiver that is marked each time a reconcile changed the model (a note or file
    /// added, changed or removed). It holds no reference to the engine.
    pub fn watch_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The change log (see [`changes`]).
    pub fn change_log(&self) -> &changes::ChangeLog {
        &self.change_log
    }

    /// The vault.
    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// The vault, shared.
    pub fn shared_vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    /// How long a scanning search may run.
    pub fn scan_budget(&self) -> Duration {
        self.options.scan_budget
    }

    /// See [`EngineOptions::exact_scan_max_notes`].
    pub fn exact_scan_max_notes(&self) -> usize {
        self.options.exact_scan_max_notes
    }

    /// True when note texts are kept (see [`EngineOptions::keep_texts`]).
    pub fn keeps_texts(&self) -> bool {
        self.options.keep_texts
    }

    /// The search index, once its first build is committed (which comes before the model's:
    /// ranked search does not wait for link resolution).
    pub fn index(&self) -> Option<&SearchIndex> {
        self.index
            .get()
            .filter(|_| self.status.is_index_committed())
    }

    /// The index as the cache folder held it, while the first build after a restart is still
    /// comparing it with the vault (then [`Engine::index`] is `None`): it answers as of the last
    /// run, so notes changed while capvault was stopped may be missing or out of date until the
    /// build is done.
    pub fn cached_index(&self) -> Option<&SearchIndex> {
        self.index.get().filter(|_| self.status.is_serving_cached())
    }

    /// The notes' kept texts (see [`Texts`]), once the first build is complete and if kept at all.
    pub fn texts(&self) -> Option<RwLockReadGuard<'_, Texts>> {
        (self.options.keep_texts && self.is_ready()).then(|| read(&self.texts))
    }

    /// The text of the PDF whose bytes are `bytes` (hashing to `sha256`), read by the PDF
    /// worker, or kept from an earlier read.
    pub fn pdf_text(
        &self,
        sha256: &str,
        bytes: &[u8],
    ) -> Arc<Result<crate::media::pdf::PdfText, crate::media::pdf::PdfError>> {
        self.pdf_texts.get_or_read(&self.options.pdf, sha256, bytes)
    }

    /// The model as it is now, without reconciling or waiting (see [`Engine::model`] for the
    /// model brought up to date first).
    pub fn model_now(&self) -> ModelRead<'_> {
        self.model.current()
    }
}
