//! Obsidian's "Excluded files" (`userIgnoreFilters` in `.obsidian/app.json`): left out of search,
//! list and graph results as Obsidian leaves them out, unless `--show-obsidian-excluded`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Engine;
use crate::locks::lock;
use crate::model::Model;
use crate::obsidian::config::IgnoreFilters;
use crate::vault::VaultPath;

/// How long `app.json`'s Excluded files are used before the file is read again.
const SETTINGS_MAX_AGE: Duration = Duration::from_secs(1);

/// `app.json` as last read, when, and the Excluded files it names.
#[derive(Debug, Default)]
pub(super) struct ExcludedFiles {
    seen: Mutex<Option<SeenSettings>>,
}

#[derive(Debug)]
struct SeenSettings {
    bytes: Vec<u8>,
    at: Instant,
    filters: Option<Arc<IgnoreFilters>>,
}

crate::model::memo_key!(
    /// The memo of the files of one state of the model that Obsidian's Excluded files name,
    /// and the filters that named them.
    IgnoredFiles: Mutex<Option<(Arc<IgnoreFilters>, Arc<HashSet<VaultPath>>)>>);

impl Engine {
    /// Obsidian's Excluded files, when results are to leave them out: `None` when the vault
    /// names none (or they are shown). `app.json` is read again when the last read is over a
    /// second old (so an edit applies within a second, and a burst of calls reads it once), and
    /// parsed again only when its bytes changed.
    pub fn user_ignored(&self) -> Option<Arc<IgnoreFilters>> {
        if !self.options.hide_obsidian_excluded {
            return None;
        }
        if let Some(seen) = lock(&self.excluded.seen).as_ref()
            && seen.at.elapsed() < SETTINGS_MAX_AGE
        {
            return seen.filters.clone();
        }
        let bytes = match self.vault.read_config(crate::vault::ConfigFile::App) {
            Ok(Some(b)) => b,
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::debug!(error = %e, "app.json could not be read");
                Vec::new()
            }
        };
        let mut cached = lock(&self.excluded.seen);
        if let Some(seen) = cached.as_mut()
            && seen.bytes == bytes
        {
            seen.at = Instant::now();
            return seen.filters.clone();
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
        *cached = Some(SeenSettings {
            bytes,
            at: Instant::now(),
            filters: filters.clone(),
        });
        filters
    }

    /// The files of `model` that `filters` exclude, computed once per state of the model.
    pub fn user_ignored_files(
        &self,
        model: &Model,
        filters: &Arc<IgnoreFilters>,
    ) -> Arc<HashSet<VaultPath>> {
        let slot = model.memo::<IgnoredFiles>(|| Mutex::new(None));
        let mut slot = lock(&slot);
        if let Some((f, files)) = slot.as_ref()
            && Arc::ptr_eq(f, filters)
        {
            return Arc::clone(files);
        }
        let files: Arc<HashSet<VaultPath>> = Arc::new(
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
}
