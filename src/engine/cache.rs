//! The search index and the folder it is kept in between runs: created empty or loaded from the
//! cache folder by the first build, saved there every [`SAVE_EVERY`](super::SAVE_EVERY) while
//! it changes and at shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use super::{Engine, Texts};
use crate::index::{IndexError, SearchIndex, Stamp};
use crate::locks::{lock, write};
use crate::vault::VaultPath;
use crate::vault::cache::IndexCacheDir;

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

/// Notes of a loaded index and the versions it indexed.
pub(super) type Stamps = HashMap<VaultPath, Stamp>;

/// The search index, its cache folder, and the notes the loaded cache held.
#[derive(Debug)]
pub(super) struct IndexStore {
    /// Set by the first build (created empty, or loaded from the cache).
    index: OnceLock<SearchIndex>,
    /// The cache folder, if any: fixed when the engine opens, so reading it takes no lock (a
    /// lock around it, held while the first build loaded the index, once made `Engine::start`
    /// and with it the first answer wait about 150 ms for the load at 100,000 notes).
    folder: IndexCache,
    /// Held while the index is saved to the folder: one save at a time.
    saving: Mutex<()>,
    /// Notes of the loaded cache and their stamps, until the first build has compared them with
    /// the vault.
    cached: Mutex<Option<Stamps>>,
}

impl IndexStore {
    pub(super) fn new(folder: IndexCache) -> Self {
        IndexStore {
            index: OnceLock::new(),
            folder,
            saving: Mutex::new(()),
            cached: Mutex::new(None),
        }
    }

    /// The index, once the first build created or loaded it (ready or not).
    pub(super) fn get(&self) -> Option<&SearchIndex> {
        self.index.get()
    }

    /// The cache folder, when there is one.
    pub(super) fn dir(&self) -> Option<&Arc<IndexCacheDir>> {
        match &self.folder {
            IndexCache::Dir(d) => Some(d),
            _ => None,
        }
    }

    /// The loaded cache's notes, for the first reconcile to compare with the vault.
    pub(super) fn take_cached(&self) -> Option<Stamps> {
        lock(&self.cached).take()
    }

    /// Keeps the loaded cache's notes for the first reconcile (again, when one failed).
    pub(super) fn set_cached(&self, stamps: Stamps) {
        *lock(&self.cached) = Some(stamps);
    }
}

impl Engine {
    /// Sets up what keeping the search index in its cache folder between runs needs (the
    /// notes' texts there too, the status). Called by [`Engine::open`], before
    /// [`Engine::start`]; the first build loads the index.
    pub(super) fn init_index_cache(&self) {
        let cache = &self.index.folder;
        if let (IndexCache::Dir(dir), true) = (cache, self.options.keep_texts) {
            // The notes' texts go to the same private folder (see `texts`).
            match Texts::in_folder(Arc::clone(dir)) {
                Ok(t) => *write(&self.texts) = t,
                Err(e) => {
                    tracing::warn!(error = %e, "note texts kept in memory: the cache folder refused them");
                }
            }
        }
        self.status.report().cache = match cache {
            IndexCache::Off => "off".to_owned(),
            IndexCache::Dir(_) => "building".to_owned(),
            IndexCache::Unavailable(why) => format!("unavailable: {why}"),
        };
    }

    /// True when the index is kept in a cache folder.
    pub(super) fn has_index_cache(&self) -> bool {
        self.index.dir().is_some()
    }

    /// Saves the index to its cache folder if there is one and the index changed since the last
    /// save. Errors are logged and shown by `vault_info`; a save that met a merge in progress is
    /// simply retried next time.
    pub(super) fn save_index(&self, saved: &mut Vec<u8>) {
        let (Some(ix), true) = (self.index.get(), self.is_ready()) else {
            return;
        };
        let Some(dir) = self.index.dir() else {
            return;
        };
        let _one_at_a_time = lock(&self.index.saving);
        let started = Instant::now();
        match ix.save(dir, saved) {
            Ok(true) => {
                tracing::debug!(
                    ms = started.elapsed().as_millis() as u64,
                    "index cache saved"
                );
                self.status.report().cache_saved = Some(SystemTime::now());
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "index cache not saved");
                self.status.report().last_error = Some(format!("index cache not saved: {e}"));
            }
        }
    }

    /// Creates the index and sets it: loaded from the cache when there is a usable one (its
    /// notes and stamps then wait for the first reconcile, and it is served meanwhile), empty
    /// otherwise. Merges are held until the first build is done.
    pub(super) fn create_index(&self) -> Result<(), IndexError> {
        let ix = self.open_index()?;
        ix.hold_merges();
        let _ = self.index.index.set(ix);
        if lock(&self.index.cached)
            .as_ref()
            .is_some_and(|c| !c.is_empty())
        {
            self.status.serve_cached();
        }
        Ok(())
    }

    fn open_index(&self) -> Result<SearchIndex, IndexError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let Some(dir) = self.index.dir() else {
            return SearchIndex::new(threads);
        };
        let fresh = || SearchIndex::new_in(Arc::clone(dir), threads);
        let loaded = SearchIndex::load(dir, threads).and_then(|ix| match ix {
            None => Ok(None),
            Some(ix) => {
                let stamps = ix.stamps()?;
                Ok(Some((ix, stamps)))
            }
        });
        match loaded {
            Ok(Some((ix, stamps))) => {
                self.index.set_cached(stamps);
                Ok(ix)
            }
            Ok(None) => {
                self.status.report().cache = "new".to_owned();
                fresh()
            }
            Err(why) => {
                tracing::info!(reason = %why, "index cache not usable; building afresh");
                if let Err(e) = crate::index::cache::clear(dir) {
                    tracing::warn!(error = %e, "could not clear the index cache");
                }
                self.status.report().cache = format!("rebuilt: {why}");
                fresh()
            }
        }
    }
}
