//! Where the engine is in its life ([`Phase`]) and what `vault_info` and search replies report
//! about its index ([`IndexStatus`]), from one [`Status`] that the rest of the engine updates
//! through methods named after the events.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use super::Engine;
use crate::index::SearchIndex;
use crate::locks::lock;

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

/// What [`IndexStatus`] reports in words and times, kept under one lock.
#[derive(Debug, Default)]
pub(super) struct Report {
    /// The first build failed.
    pub failed: bool,
    pub last_update: Option<SystemTime>,
    pub build_ms: Option<u64>,
    pub watcher: String,
    pub cache: String,
    pub cache_saved: Option<SystemTime>,
    pub last_error: Option<String>,
}

/// The engine's status: the first build's steps as flags read without a lock, its progress, and
/// the [`Report`]. [`Phase`] is computed from them.
#[derive(Debug)]
pub(super) struct Status {
    /// Background work was started ([`Engine::start`]).
    started: AtomicBool,
    /// The first build's index commit is done (it comes before the model is applied).
    index_committed: AtomicBool,
    /// The index loaded from the cache folder is served as it was saved, until the first build
    /// has compared it with the vault.
    serving_cached: AtomicBool,
    /// The first build is complete (model and index).
    ready: AtomicBool,
    /// Notes read by the first build.
    done: AtomicU64,
    /// Notes the first build counted before reading.
    total: AtomicU64,
    report: Mutex<Report>,
}

impl Status {
    pub(super) fn new() -> Self {
        Status {
            started: AtomicBool::new(false),
            index_committed: AtomicBool::new(false),
            serving_cached: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            report: Mutex::new(Report {
                watcher: "not started".to_owned(),
                cache: "off".to_owned(),
                ..Report::default()
            }),
        }
    }

    /// Records that background work starts; true only the first time.
    pub(super) fn start_once(&self) -> bool {
        !self.started.swap(true, Ordering::AcqRel)
    }

    /// The first build read one more note.
    pub(super) fn note_read(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// The first build counted `notes` notes to read.
    pub(super) fn set_total(&self, notes: u64) {
        self.total.store(notes, Ordering::Release);
    }

    /// The index just loaded from the cache folder is served until the first build is done.
    pub(super) fn serve_cached(&self) {
        self.serving_cached.store(true, Ordering::Release);
    }

    /// The first build's index commit is done: the index is current, no longer the cached one.
    pub(super) fn mark_index_committed(&self) {
        self.index_committed.store(true, Ordering::Release);
        self.serving_cached.store(false, Ordering::Release);
    }

    /// True once the first build's index commit is done.
    pub(super) fn is_index_committed(&self) -> bool {
        self.index_committed.load(Ordering::Acquire)
    }

    /// True while the index is the one loaded from the cache folder, not yet compared.
    pub(super) fn is_serving_cached(&self) -> bool {
        self.serving_cached.load(Ordering::Acquire) && !self.is_index_committed()
    }

    /// The first build is complete (or failed: then the engine goes on without it).
    pub(super) fn mark_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// True once the first build is complete.
    pub(super) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The report, locked.
    pub(super) fn report(&self) -> MutexGuard<'_, Report> {
        lock(&self.report)
    }

    /// The first build failed, for this reason.
    pub(super) fn fail(&self, why: String) {
        let mut r = self.report();
        r.failed = true;
        r.last_error = Some(why);
    }

    /// The phase, given the report (locked by the caller) and whether a stop was requested.
    fn phase(&self, r: &Report, stopping: bool) -> Phase {
        if stopping {
            Phase::Stopped
        } else if r.failed {
            Phase::Failed
        } else if self.is_index_committed() {
            Phase::Ready
        } else if self.started.load(Ordering::Acquire) || self.done.load(Ordering::Relaxed) > 0 {
            Phase::Building
        } else {
            Phase::NotStarted
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            done: self.done.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
        }
    }
}

impl Engine {
    /// The index state.
    pub fn status(&self) -> IndexStatus {
        let r = self.status.report();
        IndexStatus {
            state: self.status.phase(&r, self.is_stopping()),
            documents: self
                .index()
                .or_else(|| self.cached_index())
                .map_or(0, SearchIndex::num_docs),
            progress: self.status.progress(),
            last_update: r.last_update.map(crate::model::rfc3339),
            build_ms: r.build_ms,
            watcher: r.watcher.clone(),
            reconcile_every_s: self.options.periodic.as_secs(),
            cache: r.cache.clone(),
            cache_saved: r.cache_saved.map(crate::model::rfc3339),
            last_error: r.last_error.clone(),
        }
    }

    /// Where the engine is in its life.
    pub fn phase(&self) -> Phase {
        self.status.phase(&self.status.report(), self.is_stopping())
    }

    /// True once the first build is complete (model and index).
    pub fn is_ready(&self) -> bool {
        self.status.is_ready()
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
}
