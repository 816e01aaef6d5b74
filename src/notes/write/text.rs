//! The text operations: `create_note`, `write_note`, `edit_note` and `append_to_note`.

use super::*;

/// Which note `create_note` creates.
#[derive(Debug, Clone)]
pub enum CreateTarget {
    /// The note at this path.
    Path(NoteName),
    /// The note of a period, where `get_periodic_note` finds it, from the period's template
    /// unless the request names another.
    Periodic(PeriodArgs),
}

/// What `create_note` asks.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// The new note.
    pub target: CreateTarget,
    /// Its text (after the template's).
    pub content: String,
    /// Frontmatter properties.
    pub frontmatter: Option<Map<String, Value>>,
    /// A template's name or path.
    pub template: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `create_note`: a new note (failing if one exists), from `content`, an optional frontmatter
/// and an optional template of the vault's templates folder; or a periodic note from its
/// period's template.
pub fn create_note(
    writer: &Writer,
    engine: &Engine,
    req: &CreateRequest,
) -> Result<WriteResult, NoteError> {
    let (content, dry_run) = (req.content.as_str(), req.dry_run);
    check_size("content", content)?;
    let mut held = writer.hold(engine)?;
    let (path, periodic) = match &req.target {
        CreateTarget::Path(note) => (note.path.clone(), None),
        CreateTarget::Periodic(at) => {
            let located = at.locate(engine)?;
            if located.exists {
                return Err(VaultError::Exists(located.path).into());
            }
            (located.path.clone(), Some(located))
        }
    };
    let vault = engine.vault();
    if let Some(found) = vault.entry(&path)? {
        return Err(match found {
            Entry::Folder => VaultError::IsAFolder(path.clone()),
            Entry::File(_) => VaultError::Exists(path.clone()),
        }
        .into());
    }
    let base = match (req.template.as_deref(), &periodic) {
        (Some(name), _) => Some(daily::template_text(engine, name, &path)?),
        (None, Some(p)) => Some(daily::new_periodic_text(engine, p)?),
        (None, None) => None,
    };
    let mut text = match base {
        Some(mut t) => {
            if !content.is_empty() {
                t = edit::append(&t, content);
            }
            t
        }
        None => content.to_owned(),
    };
    if let Some(props) = &req.frontmatter
        && !props.is_empty()
    {
        text = yaml_edit::update(&text, props, &[])
            .map_err(|e| frontmatter_error(&path, e, "frontmatter"))?;
    }
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "create_note",
            path: &path,
            before: None,
            new: text.into_bytes(),
            dry_run,
        },
    )
}

/// What `write_note` asks.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// The note.
    pub note: NoteName,
    /// Its whole new text.
    pub content: String,
    /// Its version as read (required).
    pub if_match: String,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `write_note`: replaces an existing note whole; `if_match` is required.
pub fn write_note(
    writer: &Writer,
    engine: &Engine,
    req: &WriteRequest,
) -> Result<WriteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let (content, if_match, dry_run) = (req.content.as_str(), req.if_match.as_str(), req.dry_run);
    check_size("content", content)?;
    let mut held = writer.hold(engine)?;
    let Some(current) = read_current(engine.vault(), &path)? else {
        return Err(VaultError::NotFound(path).into());
    };
    check_version(&path, &current, Some(if_match))?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "write_note",
            path: &path,
            before: Some(&current),
            new: content.as_bytes().to_vec(),
            dry_run,
        },
    )
}

/// What `edit_note` asks.
#[derive(Debug, Clone)]
pub struct EditRequest {
    /// The note.
    pub note: NoteName,
    /// The replacements, all or none.
    pub edits: Vec<TextEdit>,
    /// Its version as read, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `edit_note`: every replacement applies, or none.
pub fn edit_note(
    writer: &Writer,
    engine: &Engine,
    req: &EditRequest,
) -> Result<WriteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let (edits, if_match, dry_run) = (&req.edits, req.if_match.as_deref(), req.dry_run);
    if edits.is_empty() || edits.len() > MAX_EDITS {
        return Err(NoteError::invalid(
            "edits",
            format!("edits must hold 1 to {MAX_EDITS} replacements"),
        ));
    }
    for e in edits {
        check_size("an edit", &e.old_text)?;
        check_size("an edit", &e.new_text)?;
    }
    let mut held = writer.hold(engine)?;
    let (current, text) = existing(engine.vault(), &path, if_match)?;
    let replaces: Vec<Replace> = edits
        .iter()
        .map(|e| Replace {
            old_text: e.old_text.clone(),
            new_text: e.new_text.clone(),
        })
        .collect();
    let new = edit::replace_each(&text, &replaces).map_err(|e| edit_error(&path, e))?;
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "edit_note",
            path: &path,
            before: Some(&current),
            new: new.into_bytes(),
            dry_run,
        },
    )
}

/// What `append_to_note` asks.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    /// The note.
    pub note: NoteName,
    /// The text to add.
    pub content: String,
    /// The section to add it to (`Parent/Child` nests); `None`: the note.
    pub heading: Option<String>,
    /// At the start (after the frontmatter, or the heading's line) rather than the end.
    pub at_start: bool,
    /// Its version as read, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `append_to_note`: at the end (or with `at_start` the start) of the note, or of the section
/// under `heading`.
pub fn append_to_note(
    writer: &Writer,
    engine: &Engine,
    req: &AppendRequest,
) -> Result<WriteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let (content, heading) = (req.content.as_str(), req.heading.as_deref());
    let (if_match, dry_run) = (req.if_match.as_deref(), req.dry_run);
    check_size("content", content)?;
    let mut held = writer.hold(engine)?;
    let (current, text) = existing(engine.vault(), &path, if_match)?;
    let new = match (heading, req.at_start) {
        (Some(h), false) => edit::append_to_section(&text, h, content, &heading_key)
            .map_err(|e| edit_error(&path, e))?,
        (Some(h), true) => edit::prepend_to_section(&text, h, content, &heading_key)
            .map_err(|e| edit_error(&path, e))?,
        (None, false) => edit::append(&text, content),
        (None, true) => edit::prepend(&text, content),
    };
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "append_to_note",
            path: &path,
            before: Some(&current),
            new: new.into_bytes(),
            dry_run,
        },
    )
}
