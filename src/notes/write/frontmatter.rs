//! `update_frontmatter`: properties set and removed in a note's YAML, the rest kept as written.

use super::*;

/// What `update_frontmatter` asks.
#[derive(Debug, Clone)]
pub struct FrontmatterRequest {
    /// The note.
    pub note: NoteName,
    /// Properties to set.
    pub set: Map<String, Value>,
    /// Property names to remove.
    pub remove: Vec<String>,
    /// Its version as read, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `update_frontmatter`: set and remove properties, everything else byte for byte.
pub fn update_frontmatter(
    writer: &Writer,
    engine: &Engine,
    req: &FrontmatterRequest,
) -> Result<WriteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let (set, remove) = (&req.set, req.remove.as_slice());
    let (if_match, dry_run) = (req.if_match.as_deref(), req.dry_run);
    if set.is_empty() && remove.is_empty() {
        return Err(NoteError::invalid(
            "set",
            "give properties to `set` or names to `remove`",
        ));
    }
    let mut held = writer.hold(engine)?;
    let (current, text) = existing(engine.vault(), &path, if_match)?;
    let new =
        yaml_edit::update(&text, set, remove).map_err(|e| frontmatter_error(&path, e, "set"))?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "update_frontmatter",
            path: &path,
            before: Some(&current),
            new: new.into_bytes(),
            dry_run,
        },
    )
}
