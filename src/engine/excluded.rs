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
use crate::obsidian::provenance::{Provenance, Trust, clipped, is_source_key};
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
    DistrustedMemo: Mutex<[Option<Arc<Distrusted>>; 2]>);

/// The files a `trust` filter leaves out: every one (for the scans' checks), and the same as the
/// search index best excludes them: whole folders (one term each) and the files outside them.
#[derive(Debug, Default)]
pub struct Distrusted {
    /// Every file left out.
    pub files: Arc<HashSet<VaultPath>>,
    /// The topmost folders whose every file is left out.
    pub folders: Vec<VaultPath>,
    /// The files left out that are not under one of `folders`.
    pub loose: Arc<HashSet<VaultPath>>,
}

impl Distrusted {
    /// Splits `files` (left out, of all the model's `paths`) into whole folders and the rest.
    fn new(files: HashSet<VaultPath>, paths: &[&VaultPath]) -> Distrusted {
        if files.is_empty() {
            return Distrusted::default();
        }
        // Per folder: its files, and how many of them are left out.
        let mut counts: foldhash::HashMap<&str, (u32, u32)> = foldhash::HashMap::default();
        for p in paths {
            let out = files.contains(*p);
            let s = p.as_str();
            for (i, _) in s.match_indices('/') {
                let c = counts.entry(&s[..i]).or_default();
                c.0 += 1;
                c.1 += u32::from(out);
            }
        }
        let whole = |f: &str| counts.get(f).is_some_and(|(all, out)| all == out);
        let topmost = |f: &str| !f.match_indices('/').any(|(i, _)| whole(&f[..i]));
        let mut folders: Vec<VaultPath> = counts
            .keys()
            .filter(|f| whole(f) && topmost(f))
            .filter_map(|f| VaultPath::parse_folder(f).ok())
            .collect();
        folders.sort();
        let loose: HashSet<VaultPath> = files
            .iter()
            .filter(|p| {
                let s = p.as_str();
                !s.match_indices('/').any(|(i, _)| whole(&s[..i]))
            })
            .cloned()
            .collect();
        Distrusted {
            files: Arc::new(files),
            folders,
            loose: Arc::new(loose),
        }
    }
}

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
    pub fn distrusted(&self, model: &Model, trust: Trust) -> Arc<Distrusted> {
        let slot = model.memo::<DistrustedMemo>(|| Mutex::new([None, None]));
        let mut slot = lock(&slot);
        let i = match trust {
            Trust::Own => 0,
            Trust::Shared => 1,
        };
        if let Some(d) = &slot[i] {
            return Arc::clone(d);
        }
        let paths: Vec<&VaultPath> = model.files().keys().collect();
        let mut files: HashSet<VaultPath> = HashSet::new();
        // Clippings by their frontmatter: only when some note has a `source` or `tags` key.
        let rules = &self.options.trust;
        if model.property_keys().keys().any(|k| is_source_key(k)) {
            files.extend(
                model
                    .notes()
                    .iter()
                    .filter(|(_, n)| n.parsed.frontmatter.properties().is_some_and(clipped))
                    .map(|(p, _)| p.clone()),
            );
        }
        // The folders the config names: each folder matched once, then each file by itself.
        if !rules.is_empty() {
            let mut by_folder: foldhash::HashMap<&str, Provenance> = foldhash::HashMap::default();
            for p in &paths {
                let s = p.as_str();
                let folder = match s.rsplit_once('/') {
                    Some((f, _)) => *by_folder.entry(f).or_insert_with(|| rules.by_path(f)),
                    None => Provenance::Own,
                };
                if !trust.admits(rules.by_path_in(folder, s)) {
                    files.insert((*p).clone());
                }
            }
        }
        let d = Arc::new(Distrusted::new(files, &paths));
        slot[i] = Some(Arc::clone(&d));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_folders_are_found_and_the_rest_is_loose() {
        let all: Vec<VaultPath> = [
            "Clip/a.md",
            "Clip/b.md",
            "Clip/Deep/c.md",
            "Mixed/own.md",
            "Mixed/clip.md",
            "top.md",
            "Team/Sub/x.md",
        ]
        .iter()
        .map(|p| VaultPath::parse(p).unwrap())
        .collect();
        let out: HashSet<VaultPath> = [
            "Clip/a.md",
            "Clip/b.md",
            "Clip/Deep/c.md",
            "Mixed/clip.md",
            "Team/Sub/x.md",
        ]
        .iter()
        .map(|p| VaultPath::parse(p).unwrap())
        .collect();
        let refs: Vec<&VaultPath> = all.iter().collect();
        let d = Distrusted::new(out.clone(), &refs);
        let folders: Vec<&str> = d.folders.iter().map(VaultPath::as_str).collect();
        assert_eq!(folders, vec!["Clip", "Team"]);
        let loose: Vec<&str> = d.loose.iter().map(VaultPath::as_str).collect();
        assert_eq!(loose, vec!["Mixed/clip.md"]);
        assert_eq!(*d.files, out);
    }
}
