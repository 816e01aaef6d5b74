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
//! Every reconcile is serialised; it computes the difference without holding the model, then
//! takes the write lock only to apply it, and commits the index once per batch.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, RwLockReadGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::index::{SearchIndex, Stamp};
use crate::model::{Change, Model, NoteRead, SharedModel};
use crate::obsidian::config::IgnoreFilters;
use crate::vault::cache::IndexCacheDir;
use crate::vault::watch::WatchMsg;
use crate::vault::{Vault, VaultError, VaultPath, is_note_name};

mod embed;
mod texts;

pub use embed::{EmbeddingStatus, Semantic};
pub use texts::{Kept, NoteText, Slot, Texts};

/// How long a scanning search (exact, regex, ranked while the index builds) may run by default.
pub const SCAN_BUDGET: Duration = Duration::from_secs(3);

/// The default [`Freshness::exact_scan_max_notes`]: reading 20,000 notes' kept texts takes
/// about 30 ms on two cores.
pub const EXACT_SCAN_MAX_NOTES: usize = 20_000;

/// A burst touching more places than this is reconciled with one full scan instead.
pub const MAX_SCOPES: usize = 1000;

/// How often the index is saved to its cache folder when it changed (the first save comes
/// [`FIRST_SAVE_AFTER`] after the first build).
pub const SAVE_EVERY: Duration = Duration::from_secs(30);
/// Delay between the end of the first build and the first save to the cache.
pub const FIRST_SAVE_AFTER: Duration = Duration::from_secs(2);

/// Where the search index is kept between runs.
#[derive(Debug)]
pub enum IndexCache {
    /// Nowhere: every start indexes every note (`--no-index-cache`, one-shot `capvault call`).
    Off,
    /// In this folder, outside the vault, open and locked for this process.
    Dir(Arc<IndexCacheDir>),
    /// Wanted but not usable, for this reason (shown by `vault_info`).
    Unavailable(String),
}

/// When the engine brings itself up to date, and how long scans may take.
#[derive(Debug, Clone, Copy)]
pub struct Freshness {
    /// Reconcile before a query when the last reconcile is older than this (`None`: never at
    /// query time; the watcher and the periodic reconcile keep things fresh).
    pub query_max_age: Option<Duration>,
    /// Full reconcile at this interval.
    pub periodic: Duration,
    /// Watch the vault for changes.
    pub watch: bool,
    /// How long a scanning search (exact, regex, ranked while the index builds) may run.
    pub scan_budget: Duration,
    /// An exact search whose words are in more notes than this reads them in the index's ranked
    /// order, only as many as its page needs (its `total` is then the index's count of notes);
    /// at most this many, it reads them all and counts every matching line.
    pub exact_scan_max_notes: usize,
    /// Wait this long between opening the index (and its cache) and the first build's walk
    /// (tests use it to observe the building state).
    pub build_delay: Duration,
    /// Keep every note's text (in the index cache folder's `texts.bin`, or in memory without
    /// one), so exact and regex searches scan one file or RAM instead of every note on disk.
    pub keep_texts: bool,
    /// Leave Obsidian's "Excluded files" (`userIgnoreFilters`) out of search, list and graph
    /// results, as Obsidian does (they stay readable by path).
    pub hide_obsidian_excluded: bool,
}

impl Default for Freshness {
    fn default() -> Self {
        Freshness {
            query_max_age: None,
            periodic: Duration::from_secs(60),
            watch: true,
            scan_budget: SCAN_BUDGET,
            exact_scan_max_notes: EXACT_SCAN_MAX_NOTES,
            build_delay: Duration::ZERO,
            keep_texts: true,
            hide_obsidian_excluded: true,
        }
    }
}

/// Where the engine is in its life.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Nothing started yet (one-shot `capvault call`): searches are answered by a scan.
    NotStarted,
    /// The first build is running: searches are answered by a scan.
    Building,
    /// The index is built and kept fresh.
    Ready,
    /// The first build failed (see `last_error`): searches are answered by a scan.
    Failed,
    /// The server is shutting down.
    Stopped,
}

impl Phase {
    /// The phase as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::NotStarted => "not_started",
            Phase::Building => "building",
            Phase::Ready => "ready",
            Phase::Failed => "failed",
            Phase::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The index state as `vault_info` and search replies report it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct IndexStatus {
    /// `not_started`, `building`, `ready`, `failed` or `stopped`: while not `ready`, searches
    /// are answered by a scan (after a restart, ranked ones by the index the last run saved).
    pub state: Phase,
    /// Notes searchable in the index (after a restart, in the saved index still being checked).
    pub documents: u64,
    /// Build progress: notes read so far, and notes to read (0 until counted).
    pub progress: Progress,
    /// When the index last changed (RFC 3339), if it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_update: Option<String>,
    /// How long the first build took, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_ms: Option<u64>,
    /// `watching`, `starting`, `off`, `not started` (one-shot `capvault call`), or
    /// `unavailable: <reason>` (then only the periodic reconcile keeps the index fresh).
    pub watcher: String,
    /// Seconds between full reconciles (stat scans).
    pub reconcile_every_s: u64,
    /// The index cache: `off`, `unavailable: <reason>`, `building` (the first build has not
    /// finished), `new` (no cache yet: every note indexed), `reused N of M notes` (loaded, then
    /// only changed notes re-indexed), or `rebuilt: <reason>` (the cache could not be used).
    pub cache: String,
    /// When the index was last saved to its cache folder (RFC 3339), if it has been.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_saved: Option<String>,
    /// The last error met while indexing, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Notes read of notes to read.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema, PartialEq, Eq)]
pub struct Progress {
    /// Notes read so far.
    pub done: u64,
    /// Notes to read (0 until the first scan has counted them).
    pub total: u64,
}

#[derive(Debug, Default)]
struct Status {
    failed: bool,
    last_update: Option<SystemTime>,
    build_ms: Option<u64>,
    watcher: String,
    cache: String,
    cache_saved: Option<SystemTime>,
    last_error: Option<String>,
}

/// A stop request that sleeping background threads wake up for.
#[derive(Debug, Default)]
struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Stop {
    fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Sleeps for `d` or until a stop is requested; true when one was.
    fn sleep(&self, d: Duration) -> bool {
        let held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let _held = self
            .wake
            .wait_timeout_while(held, d, |_| !self.is_set())
            .unwrap_or_else(|e| e.into_inner());
        self.is_set()
    }
}

/// The model and the index of one vault, and what keeps them fresh. One per vault, shared by
/// every session (`Arc<Engine>`); background threads hold it only weakly, so it is dropped with
/// its last session, and [`Engine::shutdown`] stops and joins them.
pub struct Engine {
    vault: Arc<Vault>,
    model: SharedModel,
    /// Set by the first build (created empty, or loaded from the cache).
    index: std::sync::OnceLock<SearchIndex>,
    /// The cache folder, if any.
    cache: Mutex<IndexCache>,
    /// Notes of the loaded cache and their stamps, until the first build has compared them with
    /// the vault.
    cached: Mutex<Option<std::collections::HashMap<VaultPath, Stamp>>>,
    /// True until a reconcile first runs: nothing has been staged in the index yet, so the first
    /// one knows which notes it holds (none, or the cached ones) and adds the others without a
    /// delete. A delete costs about 1 KB until the commit and a lookup at it: staged for every
    /// note of a first build, that was 100 MB at 100,000 notes. A retried first build deletes as
    /// usual (the failed attempt may have staged some notes).
    unstaged: AtomicBool,
    freshness: Freshness,
    /// Serialises reconciles; holds when the last one finished.
    syncing: Mutex<Option<Instant>>,
    ready: AtomicBool,
    /// True once the first build's index commit is done (before the model is applied).
    index_ready: AtomicBool,
    /// True while the index loaded from the cache folder is served as it was saved, before the
    /// first build has compared it with the vault.
    provisional: AtomicBool,
    /// Every note's text, when [`Freshness::keep_texts`] (updated with the model and index).
    texts: std::sync::RwLock<Texts>,
    done: AtomicU64,
    total: AtomicU64,
    status: Mutex<Status>,
    /// Bumped after every applied change (tests and benchmarks wait on it).
    generation: AtomicUsize,
    /// Runs the first build exactly once, whoever asks first.
    built: std::sync::Once,
    /// True once background work was started.
    started: AtomicBool,
    /// Set by [`Engine::shutdown`] (or the drop of the last reference): background threads end.
    stop: Arc<Stop>,
    /// The background threads, joined by [`Engine::shutdown`].
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The watcher's channel, to wake its loop at shutdown.
    watch_tx: Mutex<Option<Sender<WatchMsg>>>,
    /// `app.json` as last read, when, and the Excluded files it names.
    ignored: Mutex<Option<SeenSettings>>,
    /// The embedding model and the notes' vectors, with `--embedding-model`.
    semantic: std::sync::OnceLock<Arc<Semantic>>,
    /// Why `--semantic` has no model (the download or the load failed).
    semantic_unavailable: std::sync::OnceLock<String>,
}

/// `app.json`'s bytes, when they were read, and the Excluded files they name.
type SeenSettings = (Vec<u8>, Instant, Option<Arc<IgnoreFilters>>);

/// How long `app.json`'s Excluded files are used before the file is read again.
const SETTINGS_MAX_AGE: Duration = Duration::from_secs(1);

/// The files of one state of the model that Obsidian's Excluded files name, and the filters
/// that named them.
type IgnoredFiles = Mutex<
    Option<(
        Arc<IgnoreFilters>,
        Arc<std::collections::HashSet<VaultPath>>,
    )>,
>;

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
    /// An engine for `vault`; nothing is read until [`Engine::build`].
    pub fn new(vault: Arc<Vault>, freshness: Freshness) -> Self {
        Engine {
            vault,
            model: SharedModel::new(),
            index: std::sync::OnceLock::new(),
            cache: Mutex::new(IndexCache::Off),
            cached: Mutex::new(None),
            unstaged: AtomicBool::new(true),
            freshness,
            syncing: Mutex::new(None),
            ready: AtomicBool::new(false),
            index_ready: AtomicBool::new(false),
            provisional: AtomicBool::new(false),
            texts: std::sync::RwLock::new(Texts::in_memory()),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            status: Mutex::new(Status {
                watcher: "not started".to_owned(),
                cache: "off".to_owned(),
                ..Status::default()
            }),
            generation: AtomicUsize::new(0),
            built: std::sync::Once::new(),
            started: AtomicBool::new(false),
            stop: Arc::new(Stop::default()),
            threads: Mutex::new(Vec::new()),
            watch_tx: Mutex::new(None),
            ignored: Mutex::new(None),
            semantic: std::sync::OnceLock::new(),
            semantic_unavailable: std::sync::OnceLock::new(),
        }
    }

    /// Records why the embedding model that was asked for could not be had (no path of the
    /// host in `why`): searches by meaning and `vault_info` say it.
    pub fn set_embedding_unavailable(&self, why: String) {
        let _ = self.semantic_unavailable.set(why);
    }

    /// Why the embedding model asked for is missing, if it is.
    pub fn embedding_unavailable(&self) -> Option<&str> {
        match self.semantic.get() {
            Some(_) => None,
            None => self.semantic_unavailable.get().map(String::as_str),
        }
    }

    /// An engine for `vault` with its index cache, shared from the start. Call
    /// [`Engine::start`] to build in the background; otherwise the first query builds.
    pub fn open(vault: Vault, freshness: Freshness, cache: IndexCache) -> Arc<Engine> {
        let engine = Engine::new(Arc::new(vault), freshness);
        engine.set_index_cache(cache);
        Arc::new(engine)
    }

    /// The vault, shared.
    pub fn shared_vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    fn request_stop(&self) {
        self.stop.set();
        if let Some(tx) = self
            .watch_tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = tx.send(WatchMsg::Stop);
        }
    }

    /// Stops the background work (the first build, the watcher, the periodic reconcile, the
    /// cache saver), waits for each thread to end, then saves the index cache a last time if the
    /// index is built. Idempotent. A build stopped half way leaves the cache as the last save
    /// left it.
    pub fn shutdown(&self) {
        self.request_stop();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        let me = std::thread::current().id();
        for t in threads {
            if t.thread().id() == me {
                continue;
            }
            let name = t.thread().name().unwrap_or("background").to_owned();
            if t.join().is_err() {
                tracing::error!(thread = %name, "a background thread panicked");
            }
        }
        self.save_index(&mut Vec::new());
        self.save_embeddings();
        tracing::debug!("engine stopped");
    }

    /// True once a shutdown was requested.
    pub fn is_stopping(&self) -> bool {
        self.stop.is_set()
    }

    /// Starts `f` on a background thread called `name`, which [`Engine::shutdown`] joins. A
    /// thread that cannot be started is logged and shown by `vault_info` (`index.last_error`).
    fn spawn(&self, name: &str, builder: std::thread::Builder, f: impl FnOnce() + Send + 'static) {
        match builder.name(format!("capvault-{name}")).spawn(f) {
            Ok(t) => self
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(t),
            Err(e) => {
                tracing::error!(thread = name, error = %e, "could not start a background thread");
                let mut s = self.lock_status();
                let this = format!("could not start the {name} thread: {e}");
                s.last_error = Some(match s.last_error.take() {
                    Some(before) if before.starts_with("could not start") => {
                        format!("{before}; {this}")
                    }
                    _ => this,
                });
            }
        }
    }

    /// Keeps the search index in `cache` between runs. Call before [`Engine::start`]; the first
    /// build loads it.
    pub fn set_index_cache(&self, cache: IndexCache) {
        if let (IndexCache::Dir(dir), true) = (&cache, self.freshness.keep_texts) {
            // The notes' texts go to the same private folder (see `texts`).
            match Texts::in_folder(Arc::clone(dir)) {
                Ok(t) => *self.texts.write().unwrap_or_else(|e| e.into_inner()) = t,
                Err(e) => {
                    tracing::warn!(error = %e, "note texts kept in memory: the cache folder refused them");
                }
            }
        }
        self.lock_status().cache = match &cache {
            IndexCache::Off => "off".to_owned(),
            IndexCache::Dir(_) => "building".to_owned(),
            IndexCache::Unavailable(why) => format!("unavailable: {why}"),
        };
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = cache;
    }

    /// Saves the index to its cache folder if there is one and the index changed since the last
    /// save. Errors are logged and shown by `vault_info`; a save that met a merge in progress is
    /// simply retried next time.
    pub fn save_index(&self, saved: &mut Vec<u8>) {
        let (Some(ix), true) = (self.index.get(), self.is_ready()) else {
            return;
        };
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let IndexCache::Dir(dir) = &*cache else {
            return;
        };
        let started = Instant::now();
        match ix.save(dir, saved) {
            Ok(true) => {
                tracing::debug!(
                    ms = started.elapsed().as_millis() as u64,
                    "index cache saved"
                );
                self.lock_status().cache_saved = Some(SystemTime::now());
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "index cache not saved");
                self.lock_status().last_error = Some(format!("index cache not saved: {e}"));
            }
        }
    }

    /// Creates the index: loaded from the cache when there is a usable one (its notes and
    /// stamps then wait in `cached` for the first reconcile), empty otherwise.
    fn create_index(&self) -> Result<SearchIndex, String> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let IndexCache::Dir(dir) = &*cache else {
            return SearchIndex::new(threads).map_err(|e| e.to_string());
        };
        let fresh = || SearchIndex::new_in(Arc::clone(dir), threads).map_err(|e| e.to_string());
        let loaded = SearchIndex::load(dir, threads).and_then(|ix| match ix {
            None => Ok(None),
            Some(ix) => ix
                .stamps()
                .map(|s| Some((ix, s)))
                .map_err(|e| e.to_string()),
        });
        match loaded {
            Ok(Some((ix, stamps))) => {
                *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(stamps);
                Ok(ix)
            }
            Ok(None) => {
                self.lock_status().cache = "new".to_owned();
                fresh()
            }
            Err(why) => {
                tracing::info!(reason = %why, "index cache not usable; building afresh");
                if let Err(e) = crate::index::cache::clear(dir) {
                    tracing::warn!(error = %e, "could not clear the index cache");
                }
                self.lock_status().cache = format!("rebuilt: {why}");
                fresh()
            }
        }
    }

    /// Runs the first build if it has not run yet; returns when it is complete.
    pub fn ensure_built(&self) {
        self.built.call_once(|| self.build());
    }

    /// How long a scanning search may run.
    pub fn scan_budget(&self) -> Duration {
        self.freshness.scan_budget
    }

    /// See [`Freshness::exact_scan_max_notes`].
    pub fn exact_scan_max_notes(&self) -> usize {
        self.freshness.exact_scan_max_notes
    }

    /// The vault.
    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// The search index, once its first build is committed (which comes before the model's:
    /// ranked search does not wait for link resolution).
    pub fn index(&self) -> Option<&SearchIndex> {
        self.index
            .get()
            .filter(|_| self.index_ready.load(Ordering::Acquire))
    }

    /// The index as the cache folder held it, while the first build after a restart is still
    /// comparing it with the vault (then [`Engine::index`] is `None`): it answers as of the last
    /// run, so notes changed while capvault was stopped may be missing or out of date until the
    /// build is done.
    pub fn cached_index(&self) -> Option<&SearchIndex> {
        self.index.get().filter(|_| {
            self.provisional.load(Ordering::Acquire) && !self.index_ready.load(Ordering::Acquire)
        })
    }

    /// True when note texts are kept (see [`Freshness::keep_texts`]).
    pub fn keeps_texts(&self) -> bool {
        self.freshness.keep_texts
    }

    /// Obsidian's Excluded files, when results are to leave them out: `None` when the vault
    /// names none (or they are shown). `app.json` is read again when the last read is over a
    /// second old (so an edit applies within a second, and a burst of calls reads it once), and
    /// parsed again only when its bytes changed.
    pub fn user_ignored(&self) -> Option<Arc<IgnoreFilters>> {
        if !self.freshness.hide_obsidian_excluded {
            return None;
        }
        if let Some((_, at, filters)) = self
            .ignored
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && at.elapsed() < SETTINGS_MAX_AGE
        {
            return filters.clone();
        }
        let bytes = match self.vault.read_config(crate::vault::ConfigFile::App) {
            Ok(Some(b)) => b,
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::debug!(error = %e, "app.json could not be read");
                Vec::new()
            }
        };
        let mut cached = self.ignored.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, at, filters)) = cached.as_mut()
            && *seen == bytes
        {
            *at = Instant::now();
            return filters.clone();
        }
        let filters = crate::obsidian::config::parse_app(&bytes)
            .ok()
            .map(|app| {
                let (f, errors) = IgnoreFilters::new(&app.user_ignore_filters);
                for e in errors {
                    tracing::warn!("{e}");
                }
                f
            })
            .filter(|f| !f.is_empty())
            .map(Arc::new);
        *cached = Some((bytes, Instant::now(), filters.clone()));
        filters
    }

    /// The files of `model` that `filters` exclude, computed once per state of the model.
    pub fn user_ignored_files(
        &self,
        model: &Model,
        filters: &Arc<IgnoreFilters>,
    ) -> Arc<std::collections::HashSet<VaultPath>> {
        let slot = model.memo::<IgnoredFiles>("user_ignored_files", || Mutex::new(None));
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, files)) = slot.as_ref()
            && Arc::ptr_eq(f, filters)
        {
            return Arc::clone(files);
        }
        let files: Arc<std::collections::HashSet<VaultPath>> = Arc::new(
            model
                .files()
                .keys()
                .filter(|p| filters.matches(p.as_str()))
                .cloned()
                .collect(),
        );
        *slot = Some((Arc::clone(filters), Arc::clone(&files)));
        files
    }

    /// The notes' kept texts (see [`Texts`]), once the first build is complete and if kept at all.
    pub fn texts(&self) -> Option<std::sync::RwLockReadGuard<'_, Texts>> {
        (self.freshness.keep_texts && self.is_ready())
            .then(|| self.texts.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// True once the first build is complete (model and index).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// How many batches of changes have been applied.
    pub fn generation(&self) -> usize {
        self.generation.load(Ordering::Acquire)
    }

    /// The first build: reads every note once, feeding model and index.
    fn build(&self) {
        let started = Instant::now();
        match self.create_index() {
            Ok(ix) => {
                ix.hold_merges();
                let _ = self.index.set(ix);
                let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
                if cached.as_ref().is_some_and(|c| !c.is_empty()) {
                    self.provisional.store(true, Ordering::Release);
                }
            }
            Err(e) => {
                let mut s = self.lock_status();
                s.failed = true;
                s.last_error = Some(e);
            }
        }
        // Tests watch the building state (and a restart's cached index) through this pause; a
        // shutdown during it makes the walk below stop at once.
        self.stop.sleep(self.freshness.build_delay);
        // Count the notes first (names only, no stat), so progress has a total.
        let mut count = 0u64;
        let counted = self
            .vault
            .walk(&VaultPath::root(), true, &is_note_name, &mut |_| {
                count += 1;
                std::ops::ControlFlow::Continue(())
            });
        if counted.is_ok() {
            self.total.store(count, Ordering::Release);
        }
        match self.sync(&VaultPath::root()) {
            Ok(()) => {
                let ms = started.elapsed().as_millis() as u64;
                self.lock_status().build_ms = Some(ms);
                tracing::info!(
                    notes = self.model.current().note_count(),
                    ms,
                    "vault model and search index built"
                );
            }
            Err(VaultError::Stopped) => {
                tracing::debug!("first build stopped by shutdown");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "first build failed");
                let mut s = self.lock_status();
                s.failed = true;
                s.last_error = Some(e.to_string());
            }
        }
        self.ready.store(true, Ordering::Release);
        release_free_memory();
        if let Some(ix) = self.index.get()
            && let Err(e) = ix.resume_merges()
        {
            tracing::warn!(error = %e, "search index merges not resumed");
            self.lock_status().last_error = Some(e.to_string());
        }
    }

    /// The model, reconciled first if the query-time policy asks for it.
    pub fn model(&self) -> Result<RwLockReadGuard<'_, Model>, VaultError> {
        // A query that arrives during the first build waits for it (or runs it).
        self.ensure_built();
        if let Some(max_age) = self.freshness.query_max_age {
            let stale = self
                .syncing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none_or(|t| t.elapsed() >= max_age);
            if stale {
                self.sync(&VaultPath::root())?;
            }
        }
        Ok(self.model.current())
    }

    /// The model as it is now, without reconciling or waiting.
    pub fn model_now(&self) -> RwLockReadGuard<'_, Model> {
        self.model.current()
    }

    /// Brings the query-time freshness policy to bear without reading the model (for searches).
    pub fn refresh_if_stale(&self) -> Result<(), VaultError> {
        if self.freshness.query_max_age.is_some() && self.is_ready() {
            drop(self.model()?);
        }
        Ok(())
    }

    /// Waits until the first build is complete or `timeout` passes.
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while !self.is_ready() {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Reconciles one scope (a file, a folder and below, or the root) with the vault, updating
    /// model and index together.
    pub fn sync(&self, scope: &VaultPath) -> Result<(), VaultError> {
        self.sync_all(std::slice::from_ref(scope))
    }

    /// Reconciles several scopes in one batch (one index commit).
    pub fn sync_all(&self, scopes: &[VaultPath]) -> Result<(), VaultError> {
        let mut last = self.syncing.lock().unwrap_or_else(|e| e.into_inner());
        let started = Instant::now();
        let first = self.model.current().refreshed_at().is_none();
        let index = self.index.get();
        // On the first build after loading the cache: the notes it holds, with their stamps.
        let cached = if first {
            self.cached.lock().unwrap_or_else(|e| e.into_inner()).take()
        } else {
            None
        };
        // Whether the index holds no version of a note but the cached ones (see `unstaged`).
        let unstaged = self.unstaged.swap(false, Ordering::AcqRel);
        let reused = AtomicU64::new(0);
        let stager = self
            .texts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .stager();
        let fresh_texts: Mutex<Vec<(VaultPath, Slot)>> = Mutex::new(Vec::new());
        let stage = |n: NoteRead<'_>| {
            if first {
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            if self.freshness.keep_texts {
                let slot = stager.stage(n.path, n.text);
                fresh_texts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((n.path.clone(), slot));
            }
            let in_cache = cached.as_ref().map(|c| c.get(n.path));
            if let Some(Some(stamp)) = in_cache
                && *stamp == Stamp::of(n.meta)
            {
                // Indexed as it is now: the cached document stands.
                reused.fetch_add(1, Ordering::Relaxed);
            } else if let Some(ix) = index {
                let held = !unstaged || matches!(in_cache, Some(Some(_)));
                let staged = if held { ix.stage(n) } else { ix.stage_new(n) };
                if let Err(e) = staged {
                    tracing::warn!(path = %n.path, error = %e, "could not index a note");
                }
            }
        };
        let mut changes: Vec<Change> = Vec::new();
        let scopes = minimal_scopes(scopes);
        for scope in &scopes {
            let found =
                self.model
                    .current()
                    .changes_under(&self.vault, scope, &stage, &self.stop.flag);
            let (mut c, _) = match found {
                Ok(found) => found,
                Err(e) => {
                    // The next first-build attempt compares with the cache again (it alone knows
                    // which cached notes the vault no longer has).
                    if cached.is_some() {
                        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = cached;
                    }
                    return Err(e);
                }
            };
            changes.append(&mut c);
        }
        if let Some(ix) = index {
            for c in &changes {
                match c {
                    Change::Removed(p) => ix.stage_removal(p),
                    // A note that could not be read is kept as a plain file: not searchable.
                    Change::File(p, _) if is_note_name(p.file_name()) => ix.stage_removal(p),
                    _ => {}
                }
            }
            if let Some(c) = &cached {
                // Cached notes the vault no longer has (deleted or renamed while stopped).
                let notes: std::collections::HashSet<&VaultPath> = changes
                    .iter()
                    .filter_map(|c| match c {
                        Change::Note(p, ..) => Some(p),
                        _ => None,
                    })
                    .collect();
                for p in c.keys().filter(|p| !notes.contains(p)) {
                    ix.stage_removal(p);
                }
                self.lock_status().cache = format!(
                    "reused {} of {} notes",
                    reused.load(Ordering::Relaxed),
                    notes.len()
                );
            }
        }
        if self.freshness.keep_texts {
            let mut texts = self.texts.write().unwrap_or_else(|e| e.into_inner());
            let removed = changes.iter().filter_map(|c| match c {
                Change::Removed(p) | Change::File(p, _) => Some(p),
                Change::Note(..) => None,
            });
            texts.apply(
                removed,
                fresh_texts.into_inner().unwrap_or_else(|e| e.into_inner()),
            );
        }
        let changed = !changes.is_empty();
        let read = started.elapsed();
        let n = changes.len();
        // The index first: searchable as soon as possible (the model's link resolution can take
        // seconds on a first build of a large vault).
        if let Some(ix) = index
            && (changed || first)
            && let Err(e) = ix.commit()
        {
            tracing::warn!(error = %e, "search index commit failed");
            self.lock_status().last_error = Some(e.to_string());
        }
        if first {
            self.index_ready.store(true, Ordering::Release);
            self.provisional.store(false, Ordering::Release);
            // What tantivy's indexing freed, handed back before the model's link resolution
            // allocates on top of everything kept (the build's peak).
            release_free_memory();
        }
        let committed = started.elapsed();
        // Notes to re-embed, marked once the model has them (the embedder reads their stamps
        // from it).
        let dirty: Vec<VaultPath> = if !first && self.semantic.get().is_some() {
            changes
                .iter()
                .map(|c| match c {
                    Change::Note(p, ..) | Change::File(p, _) | Change::Removed(p) => p.clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
        self.model.apply_changes(changes, started);
        self.mark_dirty(dirty.iter());
        if changed {
            tracing::debug!(
                changes = n,
                read_parse_stage_ms = read.as_millis() as u64,
                index_commit_ms = (committed - read).as_millis() as u64,
                model_apply_ms = (started.elapsed() - committed).as_millis() as u64,
                "reconciled"
            );
        }
        if changed {
            self.lock_status().last_update = Some(SystemTime::now());
        }
        *last = Some(Instant::now());
        drop(last);
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Starts the first build, the watcher and the periodic reconcile on background threads.
    /// Returns at once. Each thread holds the engine weakly, between the moments it works.
    pub fn start(self: &Arc<Self>) {
        self.start_with(std::thread::Builder::new);
    }

    /// [`Engine::start`] with each thread made from `builder()` (tests use it to make a spawn
    /// fail).
    pub fn start_with(self: &Arc<Self>, builder: impl Fn() -> std::thread::Builder) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        self.lock_status().watcher = if self.freshness.watch {
            "starting"
        } else {
            "off"
        }
        .to_owned();
        let weak = Arc::downgrade(self);
        self.spawn("build", builder(), move || {
            let Some(engine) = weak.upgrade() else { return };
            engine.ensure_built();
            let watch = engine.freshness.watch && !engine.is_stopping();
            drop(engine);
            if watch {
                run_watcher(&weak);
            }
        });
        if matches!(
            *self.cache.lock().unwrap_or_else(|e| e.into_inner()),
            IndexCache::Dir(_)
        ) {
            let weak = Arc::downgrade(self);
            let stop = Arc::clone(&self.stop);
            self.spawn("cache", builder(), move || {
                let mut saved = Vec::new();
                while !weak.upgrade().is_some_and(|e| e.is_ready()) {
                    if stop.sleep(Duration::from_millis(200)) {
                        return;
                    }
                }
                let mut wait = FIRST_SAVE_AFTER;
                while !stop.sleep(wait) {
                    wait = SAVE_EVERY;
                    let Some(e) = weak.upgrade() else { return };
                    e.save_index(&mut saved);
                }
            });
        }
        if self.semantic.get().is_some() {
            let weak = Arc::downgrade(self);
            let stop = Arc::clone(&self.stop);
            self.spawn("embed", builder(), move || {
                embed::run_embedder(&weak, &stop)
            });
        }
        let weak = Arc::downgrade(self);
        let stop = Arc::clone(&self.stop);
        let every = self.freshness.periodic;
        self.spawn("sync", builder(), move || {
            while !stop.sleep(every) {
                let Some(e) = weak.upgrade() else { return };
                if e.is_ready()
                    && let Err(err) = e.sync(&VaultPath::root())
                    && !matches!(err, VaultError::Stopped)
                {
                    tracing::warn!(error = %err, "periodic reconcile failed");
                }
            }
        });
    }

    /// The index state.
    pub fn status(&self) -> IndexStatus {
        let s = self.lock_status();
        let ready = self.index_ready.load(Ordering::Acquire);
        IndexStatus {
            state: self.phase_with(&s, ready),
            documents: self
                .index()
                .or_else(|| self.cached_index())
                .map_or(0, SearchIndex::num_docs),
            progress: Progress {
                done: self.done.load(Ordering::Relaxed),
                total: self.total.load(Ordering::Relaxed),
            },
            last_update: s.last_update.map(crate::model::rfc3339),
            build_ms: s.build_ms,
            watcher: s.watcher.clone(),
            reconcile_every_s: self.freshness.periodic.as_secs(),
            cache: s.cache.clone(),
            cache_saved: s.cache_saved.map(crate::model::rfc3339),
            last_error: s.last_error.clone(),
        }
    }

    /// Where the engine is in its life.
    pub fn phase(&self) -> Phase {
        let ready = self.index_ready.load(Ordering::Acquire);
        self.phase_with(&self.lock_status(), ready)
    }

    fn phase_with(&self, s: &Status, ready: bool) -> Phase {
        if self.is_stopping() {
            Phase::Stopped
        } else if s.failed {
            Phase::Failed
        } else if ready {
            Phase::Ready
        } else if self.started.load(Ordering::Acquire) || self.done.load(Ordering::Relaxed) > 0 {
            Phase::Building
        } else {
            Phase::NotStarted
        }
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs the watcher on this thread until the engine stops or is dropped.
fn run_watcher(weak: &Weak<Engine>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = {
        let Some(engine) = weak.upgrade() else { return };
        *engine.watch_tx.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx.clone());
        // After publishing the sender: a shutdown either sees it or was seen here.
        if engine.is_stopping() {
            return;
        }
        let watcher = match crate::vault::watch::Watcher::start(&engine.vault, tx) {
            Ok(w) => {
                engine.lock_status().watcher = "watching".to_owned();
                w
            }
            Err(e) => {
                tracing::warn!(error = %e, "file watcher unavailable; relying on periodic reconcile");
                engine.lock_status().watcher = format!("unavailable: {e}");
                return;
            }
        };
        // A build that ran before the watch was in place may have missed changes.
        match engine.sync(&VaultPath::root()) {
            Ok(()) | Err(VaultError::Stopped) => {}
            Err(e) => tracing::warn!(error = %e, "reconcile after starting the watcher failed"),
        }
        watcher
    };
    let debounce = crate::vault::watch::Debounce::default();
    while let Some(batch) = debounce.next_batch(&rx) {
        let Some(engine) = weak.upgrade() else { break };
        if engine.is_stopping() {
            break;
        }
        let result = match batch {
            crate::vault::watch::Batch::Rescan => engine.sync(&VaultPath::root()),
            crate::vault::watch::Batch::Paths(paths) if paths.len() > MAX_SCOPES => {
                engine.sync(&VaultPath::root())
            }
            crate::vault::watch::Batch::Paths(paths) => engine.sync_all(&paths),
            crate::vault::watch::Batch::Error(e) => {
                engine.lock_status().last_error = Some(format!("watcher: {e}"));
                engine.sync(&VaultPath::root())
            }
        };
        match result {
            Ok(()) | Err(VaultError::Stopped) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reconcile after file events failed");
                engine.lock_status().last_error = Some(e.to_string());
            }
        }
    }
    drop(watcher);
}

/// Hands the memory the first build freed back to the system. The build's transient allocations
/// (read buffers, documents on their way to tantivy, the model's intermediate maps) leave free
/// pages scattered through glibc's heap, which it only returns from the top. Measured at 100,000
/// notes: resident 982 -> 868 MB once the build is over (`docs/performance.md`). Also called
/// between the first index commit and the model's link resolution, the build's peak.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

/// Drops scopes that lie under another scope of the list (the root covers everything).
fn minimal_scopes(scopes: &[VaultPath]) -> Vec<VaultPath> {
    let mut sorted: Vec<VaultPath> = scopes.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut out: Vec<VaultPath> = Vec::with_capacity(sorted.len());
    for s in sorted {
        if out.iter().any(|kept| s.starts_with(kept)) {
            continue;
        }
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_text_holds_the_note_name_apart_from_the_text() {
        let path = VaultPath::parse("Folder/My note.v2.md").unwrap();
        let kept = NoteText::new(&path, "# Title\nbody");
        assert_eq!(kept.name(), "My note.v2");
        assert_eq!(kept.text(), "# Title\nbody");
        let empty = NoteText::new(&VaultPath::parse("x.md").unwrap(), "");
        assert_eq!((empty.name(), empty.text()), ("x", ""));
    }

    #[test]
    fn scopes_under_other_scopes_are_dropped() {
        let p = |s: &str| VaultPath::parse_folder(s).unwrap();
        let got = minimal_scopes(&[p("A/B/c.md"), p("A/B"), p("A/Bc.md"), p("Z.md"), p("A/B")]);
        assert_eq!(got, vec![p("A/B"), p("A/Bc.md"), p("Z.md")]);
        assert_eq!(minimal_scopes(&[p("x.md"), p("")]), vec![p("")]);
    }
}
