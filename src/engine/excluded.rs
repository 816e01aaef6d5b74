//! Obsidian's "Excluded files" (`userIgnoreFilters` in `.obsidian/app.json`): left out of search,
//! list and graph results as Obsidian leaves them out, unless `--show-obsidian-excluded`. And the
//! files a `trust` filter leaves out (clippings, shared notes: [`crate::obsidian::provenance`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Engine;
use crate::locks::lock;
use crate::model::Model;
use crate::obsidian::config::IgnoreFilters;
use crate::obsidian::provenance::{Provenance, Trust};
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

crate::model::memo_key!(
    /// The files of one state of the model each `trust` filter leaves out (`own`, `shared`).
    Distrusted: Mutex<[Option<Arc<HashSet<VaultPath>>>; 2]>);

impl Engine {
    /// Where the text of `path` came from, as the model has it (a file the model has not
    /// parsed counts by its folder alone).
    pub fn provenance(&self, model: &Model, path: &VaultPath) -> Provenance {
        let props = model
            .note(path)
            .and_then(|n| n.parsed.frontmatter.properties());
        self.options.trust.of(path.as_str(), props)
    }

    /// Where the text of `path` came from now: from the model's parse, or, for a note the model
    /// has not parsed yet (the first build is running), from its frontmatter read now.
    pub fn provenance_now(&self, path: &VaultPath) -> Provenance {
        {
            let model = self.model_now();
            if model.note(path).is_some() || !crate::vault::is_note_name(path.as_str()) {
                return self.provenance(&model, path);
            }
        }
        let parsed = self
            .vault
            .read_file(path)
            .ok()
            .map(|d| crate::markdown::parse_note(&String::from_utf8_lossy(&d.bytes)));
        self.options.trust.of(
            path.as_str(),
            parsed.as_ref().and_then(|p| p.frontmatter.properties()),
        )
    }

    /// The files of `model` that `trust` leaves out, computed once per state of the model.
    pub fn distrusted(&self, model: &Model, trust: Trust) -> Arc<HashSet<VaultPath>> {
        let slot = model.memo::<Distrusted>(|| Mutex::new([None, None]));
        let mut slot = lock(&slot);
        let i = match trust {
            Trust::Own => 0,
            Trust::Shared => 1,
        };
        if let Some(files) = &slot[i] {
            return Arc::clone(files);
        }
        let files: Arc<HashSet<VaultPath>> = Arc::new(
            model
                .files()
                .keys()
                .filter(|p| !trust.admits(self.provenance(model, p)))
                .cloned()
                .collect(),
        );
        slot[i] = Some(Arc::clone(&files));
        files
    }
}
