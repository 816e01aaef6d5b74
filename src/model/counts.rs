//! What kind of file a path names, and how many files of each kind the model has.

use super::Model;
use crate::vault::{VaultPath, is_note_name};

/// What kind of file a path names, by its extension as Obsidian sees it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A Markdown note (`.md`).
    Note,
    /// A JSON Canvas (`.canvas`).
    Canvas,
    /// An Obsidian Base (`.base`).
    Base,
    /// Anything else (images, PDFs, audio...).
    Attachment,
}

impl FileKind {
    /// The kind of the file at `path`.
    pub fn of(path: &VaultPath) -> FileKind {
        FileKind::of_name(path.file_name())
    }

    /// The kind of a file called `name`.
    pub fn of_name(name: &str) -> FileKind {
        if is_note_name(name) {
            return FileKind::Note;
        }
        match name.rsplit_once('.').map(|(_, e)| e) {
            Some(e) if e.eq_ignore_ascii_case("canvas") => FileKind::Canvas,
            Some(e) if e.eq_ignore_ascii_case("base") => FileKind::Base,
            _ => FileKind::Attachment,
        }
    }
}

/// How many files of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// Markdown notes.
    pub notes: usize,
    /// Canvases.
    pub canvases: usize,
    /// Bases.
    pub bases: usize,
    /// Everything else.
    pub attachments: usize,
}

impl FileCounts {
    pub(super) fn slot(&mut self, kind: FileKind) -> &mut usize {
        match kind {
            FileKind::Note => &mut self.notes,
            FileKind::Canvas => &mut self.canvases,
            FileKind::Base => &mut self.bases,
            FileKind::Attachment => &mut self.attachments,
        }
    }

    /// Files of `kind`.
    pub fn of(&self, kind: FileKind) -> usize {
        match kind {
            FileKind::Note => self.notes,
            FileKind::Canvas => self.canvases,
            FileKind::Base => self.bases,
            FileKind::Attachment => self.attachments,
        }
    }
}

impl Model {
    /// How many files of each kind the vault has.
    pub fn counts(&self) -> FileCounts {
        self.counts
    }
}
