//! The engine's life: the first build, the background threads that keep it fresh (the watcher,
//! the periodic reconcile, the cache saver, the embedder), and the shutdown that stops and joins
//! them. Each thread holds the engine weakly, between the moments it works.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, Once, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(super) use super::stop::Stop;
use super::{Engine, embed};
use crate::locks::lock;
use crate::vault::watch::{Batch, Debounce, WatchMsg, Watcher};
use crate::vault::{VaultError, VaultPath, is_note_name};

/// A burst touching more places than this is reconciled with one full scan instead.
pub const MAX_SCOPES: usize = 1000;

/// How often the index is saved to its cache folder when it changed (the first save comes
/// [`FIRST_SAVE_AFTER`] after the first build).
pub const SAVE_EVERY: Duration = Duration::from_secs(30);
/// Delay between the end of the first build and the first save to the cache.
pub const FIRST_SAVE_AFTER: Duration = Duration::from_secs(2);

/// The first build's once, the stop request, and the threads it stops.
#[derive(Debug)]
pub(super) struct Background {
    /// Runs the first build exactly once, whoever asks first.
    pub(super) built: Once,
    /// Starts the PDFs' thread exactly once.
    pdfs: Once,
    /// Set by [`Engine::shutdown`] (or the drop of the last reference): background threads end.
    stop: Arc<Stop>,
    /// The background threads, joined by [`Engine::shutdown`].
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The watcher's channel, to wake its loop at shutdown.
    watch_tx: Mutex<Option<Sender<WatchMsg>>>,
}

impl Background {
    pub(super) fn new() -> Self {
        Background {
            built: Once::new(),
            pdfs: Once::new(),
            stop: Arc::default(),
            threads: Mutex::default(),
            watch_tx: Mutex::default(),
        }
    }

    /// The stop flag, for walks that poll it.
    pub(super) fn stop_flag(&self) -> &AtomicBool {
        self.stop.flag()
    }
}

impl Engine {
    /// Runs the first build if it has not run yet; returns when it is complete.
    pub fn ensure_built(&self) {
        self.background
            .built
            .call_once(|| self.in_pool(|| self.build()));
    }

    /// Runs `f` on this engine's thread pool (its own in a server of several vaults), so the
    /// parallel work inside uses it.
    pub(crate) fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.options.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// The first build: reads every note once, feeding model and index. (Never inlined: it is
    /// called both on the engine's own pool and directly, and inlined it would be compiled
    /// into each path.)
    #[inline(never)]
    fn build(&self) {
        let started = Instant::now();
        if let Err(e) = self.create_index() {
            self.status.fail(e.to_string());
        }
        // Tests watch the building state (and a restart's cached index) through this pause; a
        // shutdown during it makes the walk below stop at once.
        self.background.stop.sleep(self.options.build_delay);
        // Count the notes first (names only, no stat), so progress has a total.
        let mut count = 0u64;
        let counted = self
            .vault
            .walk(&VaultPath::root(), true, &is_note_name, &mut |_| {
                count += 1;
                std::ops::ControlFlow::Continue(())
            });
        if counted.is_ok() {
            self.status.set_total(count);
        }
        match self.sync_first() {
            Ok(()) => {
                let ms = started.elapsed().as_millis() as u64;
                self.status.report().build_ms = Some(ms);
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
                self.status.fail(e.to_string());
            }
        }
        self.status.mark_ready();
        release_free_memory();
        if let Some(ix) = self.index.get()
            && let Err(e) = ix.resume_merges()
        {
            tracing::warn!(error = %e, "search index merges not resumed");
            self.status.report().last_error = Some(e.to_string());
        }
    }

    /// Starts the first build, the watcher and the periodic reconcile on background threads.
    /// Returns at once. Each thread holds the engine weakly, between the moments it works.
    pub fn start(self: &Arc<Self>) {
        self.start_with(std::thread::Builder::new);
    }

    /// [`Engine::start`] with each thread made from `builder()` (tests use it to make a spawn
    /// fail).
    pub fn start_with(self: &Arc<Self>, builder: impl Fn() -> std::thread::Builder) {
        if !self.status.start_once() {
            return;
        }
        self.status.report().watcher = if self.options.watch {
            "starting"
        } else {
            "off"
        }
        .to_owned();
        let weak = Arc::downgrade(self);
        self.spawn("build", builder(), move || {
            let Some(engine) = weak.upgrade() else { return };
            engine.ensure_built();
            let watch = engine.options.watch && !engine.is_stopping();
            drop(engine);
            if watch {
                run_watcher(&weak);
            }
        });
        if self.has_index_cache() {
            let weak = Arc::downgrade(self);
            let stop = Arc::clone(&self.background.stop);
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
        self.start_pdf_indexer_with(builder());
        if self.semantic().is_some() {
            let weak = Arc::downgrade(self);
            let stop = Arc::clone(&self.background.stop);
            self.spawn("embed", builder(), move || {
                embed::run_embedder(&weak, &stop)
            });
        }
        let weak = Arc::downgrade(self);
        let stop = Arc::clone(&self.background.stop);
        let every = self.options.periodic;
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

    /// Starts the thread that reads the PDFs' texts (`--index-pdfs`) and nothing else: a one-shot
    /// `capvault call`, which starts no watcher, uses it. It waits for the first build, which
    /// someone else starts ([`Engine::ensure_built`]). At most once per engine, [`Engine::start`]
    /// included.
    pub fn start_pdf_indexer(self: &Arc<Self>) {
        self.start_pdf_indexer_with(std::thread::Builder::new());
    }

    fn start_pdf_indexer_with(self: &Arc<Self>, builder: std::thread::Builder) {
        if self.pdfs().is_none() {
            return;
        }
        self.background.pdfs.call_once(|| {
            let weak = Arc::downgrade(self);
            let stop = Arc::clone(&self.background.stop);
            self.spawn("pdfs", builder, move || {
                super::pdfs::run_pdf_indexer(&weak, &stop)
            });
        });
    }

    /// Starts `f` on a background thread called `name`, which [`Engine::shutdown`] joins. A
    /// thread that cannot be started is logged and shown by `vault_info` (`index.last_error`).
    fn spawn(&self, name: &str, builder: std::thread::Builder, f: impl FnOnce() + Send + 'static) {
        let f = move || {
            yield_to_requests();
            f()
        };
        match builder.name(format!("capvault-{name}")).spawn(f) {
            Ok(t) => lock(&self.background.threads).push(t),
            Err(e) => {
                tracing::error!(thread = name, error = %e, "could not start a background thread");
                let mut r = self.status.report();
                let this = format!("could not start the {name} thread: {e}");
                r.last_error = Some(match r.last_error.take() {
                    Some(before) if before.starts_with("could not start") => {
                        format!("{before}; {this}")
                    }
                    _ => this,
                });
            }
        }
    }

    /// Wakes every background thread to end (they hold only weak references), joining none.
    pub(super) fn request_stop(&self) {
        self.background.stop.set();
        if let Some(tx) = lock(&self.background.watch_tx).take() {
            let _ = tx.send(WatchMsg::Stop);
        }
    }

    /// Stops the background work (the first build, the watcher, the periodic reconcile, the
    /// cache saver), waits for each thread to end, then saves the index cache a last time if the
    /// index is built. Idempotent. A build stopped half way leaves the cache as the last save
    /// left it.
    pub fn shutdown(&self) {
        self.request_stop();
        let threads = std::mem::take(&mut *lock(&self.background.threads));
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
    pub(super) fn is_stopping(&self) -> bool {
        self.background.stop.is_set()
    }
}

/// Runs the watcher on this thread until the engine stops or is dropped.
fn run_watcher(weak: &Weak<Engine>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = {
        let Some(engine) = weak.upgrade() else { return };
        *lock(&engine.background.watch_tx) = Some(tx.clone());
        // After publishing the sender: a shutdown either sees it or was seen here.
        if engine.is_stopping() {
            return;
        }
        let watcher = match Watcher::start(&engine.vault, tx) {
            Ok(w) => {
                engine.status.report().watcher = "watching".to_owned();
                w
            }
            Err(e) => {
                tracing::warn!(error = %e, "file watcher unavailable; relying on periodic reconcile");
                engine.status.report().watcher = format!("unavailable: {e}");
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
    let debounce = Debounce::default();
    while let Some(batch) = debounce.next_batch(&rx) {
        let Some(engine) = weak.upgrade() else { break };
        if engine.is_stopping() {
            break;
        }
        let result = match batch {
            Batch::Rescan => engine.sync(&VaultPath::root()),
            Batch::Paths(paths) if paths.len() > MAX_SCOPES => engine.sync(&VaultPath::root()),
            Batch::Paths(paths) => engine.sync_all(&paths),
            Batch::Error(e) => {
                engine.status.report().last_error = Some(format!("watcher: {e}"));
                engine.sync(&VaultPath::root())
            }
        };
        match result {
            Ok(()) | Err(VaultError::Stopped) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reconcile after file events failed");
                engine.status.report().last_error = Some(e.to_string());
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
pub(super) fn release_free_memory() {
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn release_free_memory() {}

/// The nice value of the engine's background threads (and of the threads they start, which
/// inherit it: tantivy's indexing and merging threads, the watcher's): a request, served on
/// threads at the process's own priority, takes a core from them at once. On two cores a
/// start that loads a large index cache left the first `initialize` waiting for a time slice.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`]. On Linux the nice
/// value belongs to a thread; elsewhere it belongs to the process, so nothing is changed there.
/// Raising a nice value needs no privilege; a failure is only logged.
fn yield_to_requests() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(None, BACKGROUND_NICE) {
        tracing::debug!(error = %e, "background thread's priority unchanged");
    }
}
