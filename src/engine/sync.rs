//! Reconciles: the model, the index, the kept texts and the embeddings' dirty set brought up to
//! date with the vault together, one scope list per batch, and the query-time freshness policy.
//!
//! Every reconcile is serialised; it computes the difference without holding the model, then
//! takes the write lock only to apply it, and commits the index once per batch.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use super::Engine;
use super::changes;
use super::lifecycle::release_free_memory;
use super::texts::Slot;
use crate::index::Stamp;
use crate::locks::{lock, read, recover, write};
use crate::model::{Change, ModelRead, NoteRead};
use crate::vault::{VaultError, VaultPath, is_note_name};

/// What serialises reconciles and what they remember between them.
#[derive(Debug)]
pub(super) struct Reconciles {
    /// Held by the reconcile running; when the last one finished.
    last: Mutex<Option<Instant>>,
    /// True until a reconcile first runs: nothing has been staged in the index yet, so the first
    /// one knows which notes it holds (none, or the cached ones) and adds the others without a
    /// delete. A delete costs about 1 KB until the commit and a lookup at it: staged for every
    /// note of a first build, that was 100 MB at 100,000 notes. A retried first build deletes as
    /// usual (the failed attempt may have staged some notes).
    nothing_staged: AtomicBool,
}

impl Reconciles {
    pub(super) fn new() -> Self {
        Reconciles {
            last: Mutex::new(None),
            nothing_staged: AtomicBool::new(true),
        }
    }
}

impl Engine {
    /// The model, reconciled first if the query-time policy asks for it.
    pub fn model(&self) -> Result<ModelRead<'_>, VaultError> {
        // A query that arrives during the first build waits for it (or runs it).
        self.ensure_built();
        if let Some(max_age) = self.options.query_max_age {
            let stale = lock(&self.reconciles.last).is_none_or(|t| t.elapsed() >= max_age);
            if stale {
                self.sync(&VaultPath::root())?;
            }
        }
        Ok(self.model.current())
    }

    /// Brings the query-time freshness policy to bear without reading the model (for searches).
    pub fn refresh_if_stale(&self) -> Result<(), VaultError> {
        if self.options.query_max_age.is_some() && self.is_ready() {
            drop(self.model()?);
        }
        Ok(())
    }

    /// Reconciles one scope (a file, a folder and below, or the root) with the vault, updating
    /// model and index together.
    pub fn sync(&self, scope: &VaultPath) -> Result<(), VaultError> {
        self.sync_all(std::slice::from_ref(scope))
    }

    /// Reconciles several scopes in one batch (one index commit).
    ///
    /// Before the first build, the first build itself: it reads every scope anyway, and only it
    /// compares the vault with the index cache. A scope reconciled first would leave the vault
    /// compared with nothing (every older change cursor expired, the write's diff lost, no
    /// index cache saved), as a one-shot `capvault call --write` did.
    pub fn sync_all(&self, scopes: &[VaultPath]) -> Result<(), VaultError> {
        if !self.background.built.is_completed() {
            self.ensure_built();
            return if self.is_stopping() {
                Err(VaultError::Stopped)
            } else {
                Ok(())
            };
        }
        self.in_pool(|| self.sync_all_here(scopes))
    }

    /// The first build's reconcile of the whole vault (see [`Engine::sync_all`]).
    pub(super) fn sync_first(&self) -> Result<(), VaultError> {
        self.in_pool(|| self.sync_all_here(std::slice::from_ref(&VaultPath::root())))
    }

    /// (Never inlined: called on the engine's own pool and directly, see [`Engine::build`].)
    #[inline(never)]
    fn sync_all_here(&self, scopes: &[VaultPath]) -> Result<(), VaultError> {
        let mut last = lock(&self.reconciles.last);
        let started = Instant::now();
        let first = self.model.current().refreshed_at().is_none();
        let index = self.index.get();
        // On the first build after loading the cache: the notes it holds, with their stamps.
        let cached = if first {
            self.index.take_cached()
        } else {
            None
        };
        // Whether the index holds no version of a note but the cached ones (see
        // `nothing_staged`).
        let unstaged = self.reconciles.nothing_staged.swap(false, Ordering::AcqRel);
        let reused = AtomicU64::new(0);
        let stager = read(&self.texts).stager();
        let fresh_texts: Mutex<Vec<(VaultPath, Slot)>> = Mutex::new(Vec::new());
        // What the change log needs: every note read that is not as the index cache had it
        // (none on a first build with no cache to compare with: nothing tells what changed).
        let logging = !first || cached.is_some();
        let hashed: Mutex<changes::Hashed> = Mutex::new(HashMap::new());
        let kept_bytes = AtomicUsize::new(0);
        let stage = |n: NoteRead<'_>| {
            if first {
                self.status.note_read();
            }
            if self.options.keep_texts {
                let slot = stager.stage(n.path, n.text);
                lock(&fresh_texts).push((n.path.clone(), slot));
            }
            let in_cache = cached.as_ref().map(|c| c.get(n.path));
            if let Some(Some(stamp)) = in_cache
                && *stamp == Stamp::of(n.meta)
            {
                // Indexed as it is now: the cached document stands.
                reused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if let Some(ix) = index {
                let held = !unstaged || matches!(in_cache, Some(Some(_)));
                let staged = if held { ix.stage(n) } else { ix.stage_new(n) };
                if let Err(e) = staged {
                    tracing::warn!(path = %n.path, error = %e, "could not index a note");
                }
            }
            if logging {
                let len = n.text.len();
                let text = (len <= changes::MAX_ONE_TEXT
                    && kept_bytes.fetch_add(len, Ordering::Relaxed) + len
                        <= changes::MAX_BATCH_TEXT_BYTES)
                    .then(|| Arc::<str>::from(n.text));
                lock(&hashed).insert(n.path.clone(), (changes::sha_of(n.text), len as u64, text));
            }
        };
        let mut changes: Vec<Change> = Vec::new();
        let scopes = minimal_scopes(scopes);
        for scope in &scopes {
            let found = self.model.current().changes_under(
                &self.vault,
                scope,
                &stage,
                self.background.stop_flag(),
            );
            let (mut c, _) = match found {
                Ok(found) => found,
                Err(e) => {
                    // The next first-build attempt compares with the cache again (it alone knows
                    // which cached notes the vault no longer has).
                    if let Some(cached) = cached {
                        self.index.set_cached(cached);
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
                let notes: HashSet<&VaultPath> = changes
                    .iter()
                    .filter_map(|c| match c {
                        Change::Note(p, ..) => Some(p),
                        _ => None,
                    })
                    .collect();
                for p in c.keys().filter(|p| !notes.contains(p)) {
                    ix.stage_removal(p);
                }
                self.status.report().cache = format!(
                    "reused {} of {} notes",
                    reused.load(Ordering::Relaxed),
                    notes.len()
                );
            }
        }
        // What the change log will say, found against the model and texts before this batch;
        // logged once the model has it (whoever reads an entry finds the note as it says).
        let mut logged = None;
        if logging {
            let model = self.model.current();
            let texts = read(&self.texts);
            let found = changes::Found {
                first,
                cached: cached.as_ref(),
                model: &model,
                texts: self.options.keep_texts.then_some(&*texts),
                hashed: recover(hashed.into_inner()),
            };
            let (observed, versions) = changes::observe(&self.change_log, &changes, found);
            drop(texts);
            drop(model);
            logged = Some((observed, versions));
        } else if first {
            self.change_log.gap();
        }
        if self.options.keep_texts {
            let mut texts = write(&self.texts);
            let removed = changes.iter().filter_map(|c| match c {
                Change::Removed(p) | Change::File(p, _) => Some(p),
                Change::Note(..) => None,
            });
            texts.apply(removed, recover(fresh_texts.into_inner()));
        }
        let changed = !changes.is_empty();
        let read_time = started.elapsed();
        let n = changes.len();
        // The index first: searchable as soon as possible (the model's link resolution can take
        // seconds on a first build of a large vault).
        if let Some(ix) = index
            && (changed || first)
            && let Err(e) = ix.commit()
        {
            tracing::warn!(error = %e, "search index commit failed");
            self.status.report().last_error = Some(e.to_string());
        }
        if first {
            self.status.mark_index_committed();
            // What tantivy's indexing freed, handed back before the model's link resolution
            // allocates on top of everything kept (the build's peak).
            release_free_memory();
        }
        let committed = started.elapsed();
        // Notes to re-embed, marked once the model has them (the embedder reads their stamps
        // from it).
        let dirty: Vec<VaultPath> = if !first && self.semantic().is_some() {
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
        if let Some((observed, versions)) = logged {
            self.change_log.record(observed, versions);
        }
        self.mark_dirty(dirty.iter());
        if changed {
            tracing::debug!(
                changes = n,
                read_parse_stage_ms = read_time.as_millis() as u64,
                index_commit_ms = (committed - read_time).as_millis() as u64,
                model_apply_ms = (started.elapsed() - committed).as_millis() as u64,
                "reconciled"
            );
            self.status.report().last_update = Some(SystemTime::now());
            // Sessions waiting for changes (prompts list_changed) look again.
            self.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        *last = Some(Instant::now());
        Ok(())
    }
}

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
    fn scopes_under_other_scopes_are_dropped() {
        let p = |s: &str| VaultPath::parse_folder(s).unwrap();
        let got = minimal_scopes(&[p("A/B/c.md"), p("A/B"), p("A/Bc.md"), p("Z.md"), p("A/B")]);
        assert_eq!(got, vec![p("A/B"), p("A/Bc.md"), p("Z.md")]);
        assert_eq!(minimal_scopes(&[p("x.md"), p("")]), vec![p("")]);
    }
}
