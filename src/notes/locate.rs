//! Paths as people and models write them: `Categories/Books.md`, `Categories/Books`, `Books`,
//! `books.md`. A typed path that exists is used as it is; otherwise `.md` may be left out, and
//! a bare name resolves as a wikilink from the vault root resolves, when exactly one file
//! matches. A miss is `not_found` (or `ambiguous`) with up to five suggestions.
//!
//! The result is always a path the vault model holds (only visible, served files are there) or
//! the typed path itself, and it is read through the vault like any typed path, so every rule
//! (hidden, excluded, outside) applies to it.

use crate::engine::Engine;
use crate::model::Model;
use crate::model::linkres::Resolution;
use crate::vault::{VaultError, VaultPath};

use super::NoteError;

/// A file a reading tool names: as the client typed it, and parsed (no `..`, hidden or
/// absolute part); [`locate`] finds what it means.
#[derive(Debug, Clone)]
pub struct Named {
    /// As typed.
    pub input: String,
    /// As parsed.
    pub path: VaultPath,
}

impl Named {
    /// Parses `input` as a vault path.
    pub fn parse(input: String) -> Result<Self, NoteError> {
        Ok(Named {
            path: VaultPath::parse(&input)?,
            input,
        })
    }
}

/// Most suggestions in an error.
pub const MAX_SUGGESTIONS: usize = 5;

/// The vault path `input` means. `input` has been parsed as `typed` already (so it holds no
/// `..`, hidden or absolute part).
pub fn locate(engine: &Engine, input: &str, typed: VaultPath) -> Result<VaultPath, NoteError> {
    match engine.vault().stat_file(&typed) {
        Err(VaultError::NotFound(_)) | Err(VaultError::NotAFolder(_)) => {}
        // There is something: the read reports what (a folder, a refusal, the note itself).
        _ => return Ok(typed),
    }
    let model = engine.model()?;
    locate_in(&model, input.trim(), &typed)
}

/// [`locate`] for a tool that reads one kind of file: `Board` finds `Board.canvas` (at that
/// path, or by name anywhere) before the rules for notes apply.
pub fn locate_kind(
    engine: &Engine,
    input: &str,
    typed: VaultPath,
    ext: &str,
) -> Result<VaultPath, NoteError> {
    if typed.extension() != Some(ext)
        && let Ok(with) = VaultPath::parse(&format!("{typed}.{ext}"))
    {
        if engine.vault().stat_file(&with).is_ok() {
            return Ok(with);
        }
        let model = engine.model()?;
        if let Ok(found) = locate_in(&model, &format!("{}.{ext}", input.trim()), &with) {
            return Ok(found);
        }
    }
    locate(engine, input, typed)
}

/// [`locate`] once the typed path is known to be missing.
pub fn locate_in(model: &Model, input: &str, typed: &VaultPath) -> Result<VaultPath, NoteError> {
    if typed.extension() != Some("md")
        && let Ok(with_md) = VaultPath::parse(&format!("{typed}.md"))
        && model.files().contains_key(&with_md)
    {
        return Ok(with_md);
    }
    match model.resolve(input.trim_start_matches('/'), None) {
        Resolution::Found { path, alternatives } if alternatives.is_empty() => Ok(path),
        Resolution::Found { path, alternatives } => {
            let n = alternatives.len() + 1;
            let suggestions = std::iter::once(path)
                .chain(alternatives)
                .take(MAX_SUGGESTIONS)
                .map(|p| p.to_string())
                .collect();
            Err(NoteError::Ambiguous {
                message: format!("`{input}` matches {n} files; give the full path"),
                suggestions,
            })
        }
        Resolution::NotFound => Err(NoteError::NotFound {
            message: format!("{typed}: not found"),
            suggestions: suggest(model, typed),
        }),
    }
}

/// Up to five files whose names look like `typed`'s: the same name elsewhere first, then names
/// that contain it or that it contains, then close spellings.
pub fn suggest(model: &Model, typed: &VaultPath) -> Vec<String> {
    let want = typed.stem().to_lowercase();
    if want.is_empty() {
        return Vec::new();
    }
    let folder = typed.as_str().rsplit_once('/').map_or("", |(f, _)| f);
    let ext = typed.extension().unwrap_or("md");
    let mut scored: Vec<(u8, bool, bool, usize, &VaultPath)> = model
        .files()
        .keys()
        .filter_map(|p| {
            let stem = p.stem().to_lowercase();
            let rank = if stem == want {
                0
            } else if stem.contains(&want) || want.contains(&stem) && stem.len() >= 3 {
                1
            } else if strsim::jaro_winkler(&stem, &want) >= 0.88 {
                2
            } else {
                return None;
            };
            // Then: the same kind of file, then the same folder, then shorter paths.
            let other_kind = p.extension() != Some(ext);
            let other_folder = p.as_str().rsplit_once('/').map_or("", |(f, _)| f) != folder;
            Some((rank, other_kind, other_folder, p.as_str().len(), p))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(.., p)| p.to_string())
        .collect()
}
