//! The model's files newest first ([`Model::recent`]), kept in step with its files and counts.

use std::collections::BTreeSet;

use super::{FileCounts, FileKind, Model, nanos};
use crate::vault::{FileMeta, VaultPath};

/// A file in [`Model::recent`] order: newest first (nanoseconds since the epoch, reversed),
/// then by path.
pub type Recent = (std::cmp::Reverse<u128>, VaultPath);

impl Model {
    /// Every file, newest first then by path.
    pub fn recent(&self) -> &BTreeSet<Recent> {
        &self.recent
    }

    /// Records `path` with `meta` in `files`, the counts and the recency order.
    pub(super) fn put_file(&mut self, path: VaultPath, meta: FileMeta) {
        let key = (std::cmp::Reverse(nanos(meta.modified)), path.clone());
        match self.files.insert(path.clone(), meta) {
            Some(old) => {
                self.recent
                    .remove(&(std::cmp::Reverse(nanos(old.modified)), path));
            }
            None => *self.counts.slot(FileKind::of(&path)) += 1,
        }
        self.recent.insert(key);
    }

    /// Rebuilds the counts and the recency order from `files` (after a bulk build).
    pub(super) fn count_files(&mut self) {
        let mut counts = FileCounts::default();
        let mut recent: Vec<Recent> = Vec::with_capacity(self.files.len());
        for (p, m) in &self.files {
            *counts.slot(FileKind::of(p)) += 1;
            recent.push((std::cmp::Reverse(nanos(m.modified)), p.clone()));
        }
        recent.sort_unstable();
        self.counts = counts;
        self.recent = recent.into_iter().collect();
    }

    /// Forgets `path` in `files`, the counts and the recency order.
    pub(super) fn drop_file(&mut self, path: &VaultPath) -> Option<FileMeta> {
        let old = self.files.remove(path)?;
        *self.counts.slot(FileKind::of(path)) -= 1;
        self.recent
            .remove(&(std::cmp::Reverse(nanos(old.modified)), path.clone()));
        Some(old)
    }
}
