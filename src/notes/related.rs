//! `related_notes`: the notes nearest in meaning to one note (its sections' mean vector against
//! every other note's best section), optionally leaving out the notes it already links to or is
//! linked from, which makes the list a set of link suggestions.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::Serialize;

use super::{NoteError, check_limit};
use crate::engine::Engine;
use crate::model::Target;
use crate::vault::VaultPath;

/// Default number of related notes.
pub const DEFAULT_LIMIT: u32 = 10;
/// Most related notes a client may ask for.
pub const MAX_LIMIT: u32 = 50;

/// One related note.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct RelatedNote {
    /// Vault-relative path.
    pub path: String,
    /// Cosine similarity of its best section to the note (1 is identical).
    pub score: f64,
    /// 1-based line where that section starts.
    pub line: u32,
    /// That section's heading, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
}

/// Reply of `related_notes`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RelatedNotes {
    /// The note asked about (resolved path).
    pub path: String,
    /// Nearest first.
    pub related: Vec<RelatedNote>,
    /// Remarks (embedding still in progress).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What `related_notes` asks: the note as typed and parsed, how many, and whether linked notes
/// count.
#[derive(Debug, Clone)]
pub struct RelatedRequest {
    /// The note.
    pub note: super::locate::Named,
    /// Most notes (default [`DEFAULT_LIMIT`]).
    pub limit: Option<u32>,
    /// Leave out notes already linked either way.
    pub unlinked_only: bool,
}

/// `related_notes` for the note the request names: the model's note at the typed path, else the
/// one [`super::locate::locate_in`] finds.
pub fn related(engine: &Engine, req: &RelatedRequest) -> Result<RelatedNotes, NoteError> {
    let (input, typed) = (&req.note.input, &req.note.path);
    let path = {
        let model = engine.model()?;
        if model.note(typed).is_some() {
            typed.clone()
        } else {
            super::locate::locate_in(&model, input, typed)?
        }
    };
    related_notes(engine, &path, req.limit, req.unlinked_only)
}

/// The notes nearest `path` in meaning. `path` must be a note of the model.
pub fn related_notes(
    engine: &Engine,
    path: &VaultPath,
    limit: Option<u32>,
    unlinked_only: bool,
) -> Result<RelatedNotes, NoteError> {
    let limit = check_limit(limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let Some(sem) = engine.semantic() else {
        return Err(super::search::no_model(engine));
    };
    let model = engine.model()?;
    let Some(note) = model.note(path) else {
        return Err(NoteError::NotFound {
            message: format!("{path} is not a note"),
            suggestions: Vec::new(),
        });
    };
    let mut skip: HashSet<VaultPath> = HashSet::new();
    skip.insert(path.clone());
    if unlinked_only {
        for t in model.targets(note) {
            if let Target::File { path: p, .. } = t {
                skip.insert(p);
            }
        }
        skip.extend(model.backlinks(path).cloned());
    }
    let ignored = engine.user_ignored();
    let mut notes = Vec::new();
    if !sem.is_complete() {
        notes.push(
            "notes are still being embedded: related notes cover only those embedded so far"
                .to_owned(),
        );
    }
    let centroid = match sem.store().centroid(path) {
        Some(c) => Some(c),
        None => {
            // Not embedded yet: embed it now.
            let data = engine.vault().read_file(path)?;
            let vectors = sem.embed_note(path, &String::from_utf8_lossy(&data.bytes));
            mean(
                &vectors
                    .iter()
                    .map(|(_, v)| v.as_slice())
                    .collect::<Vec<_>>(),
            )
        }
    };
    let Some(centroid) = centroid else {
        notes.push("the note has no word the embedding model knows".to_owned());
        return Ok(RelatedNotes {
            path: path.to_string(),
            related: Vec::new(),
            notes,
        });
    };
    let keep = |p: &VaultPath| {
        !skip.contains(p)
            && model.note(p).is_some()
            && ignored.as_ref().is_none_or(|f| !f.matches(p.as_str()))
    };
    let nearest = sem.store().nearest(&centroid, limit, keep);
    Ok(RelatedNotes {
        path: path.to_string(),
        related: nearest
            .into_iter()
            .map(|n| RelatedNote {
                path: n.path.to_string(),
                score: (f64::from(n.score) * 1000.0).round() / 1000.0,
                line: n.section.line,
                heading: n.section.heading.map(String::from),
            })
            .collect(),
        notes,
    })
}

/// The normalised mean of `vectors`, if any is non-zero.
fn mean(vectors: &[&[f32]]) -> Option<Vec<f32>> {
    let first = vectors.first()?;
    let mut sum = vec![0f32; first.len()];
    for v in vectors {
        for (s, x) in sum.iter_mut().zip(*v) {
            *s += x;
        }
    }
    crate::semantic::normalise(&mut sum).then_some(sum)
}
