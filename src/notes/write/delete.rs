//! `delete_note`: a note, an attachment or a folder to the trash Obsidian uses, or removed for good.

use super::*;

/// What `delete_note` asks.
#[derive(Debug, Clone)]
pub struct DeleteRequest {
    /// The note, attachment or folder.
    pub target: EntryName,
    /// Remove it for good, not to the trash.
    pub permanent: bool,
    /// A file's version as read, when given.
    pub if_match: Option<String>,
    /// Change nothing; say what would happen.
    pub dry_run: bool,
}

/// The reply of `delete_note`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeleteResult {
    /// What was deleted (vault-relative).
    pub path: String,
    /// Where it went in the vault's trash (`.trash/...`), unless removed for good.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trashed_to: Option<String>,
    /// True when it was removed for good.
    pub permanent: bool,
    /// Its version, for a file (kept in the history: `restore_note` brings it back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// True when nothing was changed.
    pub dry_run: bool,
    /// How the vault's trash setting was honoured.
    pub message: String,
}

/// `delete_note`: a note, attachment or folder, into the vault's `.trash` as Obsidian's
/// `trashOption` says, or for good when allowed and asked. A folder holding anything the client
/// cannot see (hidden or excluded entries), or nested deeper than [`MAX_WRITE_DEPTH`] levels, is
/// refused; one removed for good must hold only folders and files, each kept in the history.
pub fn delete_note(
    writer: &Writer,
    engine: &Engine,
    req: &DeleteRequest,
) -> Result<DeleteResult, NoteError> {
    let (permanent, if_match, dry_run) = (req.permanent, req.if_match.as_deref(), req.dry_run);
    if req.target.path.is_root() {
        return Err(NoteError::invalid(
            "path",
            "the vault root cannot be deleted",
        ));
    }
    let vault = engine.vault();
    let _held = writer.hold(engine)?;
    let (path, entry) = existing_entry(engine, &req.target)?;
    let current = if let Entry::File(_) = entry {
        let c = read_current(vault, &path)?.ok_or_else(|| VaultError::NotFound(path.clone()))?;
        check_version(&path, &c, if_match)?;
        Some(c)
    } else {
        if if_match.is_some() {
            return Err(NoteError::invalid(
                "if_match",
                format!("{path} is a folder: if_match applies to files"),
            ));
        }
        None
    };
    let settings = crate::notes::settings::load_settings(vault);
    use crate::obsidian::config::TrashOption;
    let wants_permanent = permanent || settings.app.trash_option == TrashOption::Permanent;
    if wants_permanent && !writer.permanent_delete() {
        return Err(NoteError::Refused(if permanent {
            "permanent deletion is off on this server (it needs --allow-permanent-delete); \
             without `permanent`, the note goes to the vault's .trash"
                .to_owned()
        } else {
            "the vault's trash setting is \"permanently delete\", which this server does not do \
             without --allow-permanent-delete; pass permanent = false to use .trash"
                .to_owned()
        }));
    }
    let permanent = permanent || (wants_permanent && writer.permanent_delete());
    let folder_files = match entry {
        Entry::Folder => Some(folder_to_delete(vault, &path, permanent)?),
        Entry::File(_) => None,
    };
    let (would, done) = if dry_run {
        ("would be", "would move")
    } else {
        ("", "moved")
    };
    let message = if permanent {
        match &folder_files {
            Some(files) => format!(
                "{would} removed for good; its {} file(s) {} in the history (note_history, \
                 restore_note)",
                files.len(),
                if dry_run { "would be kept" } else { "are kept" }
            ),
            None if dry_run => {
                "would be removed for good (its last version would be kept in the history)"
                    .to_owned()
            }
            None => "removed for good (its last version is kept in the history)".to_owned(),
        }
    } else {
        match settings.app.trash_option {
            TrashOption::System => format!(
                "{done} to the vault's .trash: the system trash is outside the vault, which \
                 capvault never reaches"
            ),
            _ => format!("{done} to the vault's .trash, as Obsidian's trash setting says"),
        }
    };
    let message = message.trim_start().to_owned();
    let mut result = DeleteResult {
        path: path.to_string(),
        trashed_to: None,
        permanent,
        sha256: current.as_ref().map(|c| c.sha256.clone()),
        dry_run,
        message,
    };
    if dry_run {
        return Ok(result);
    }
    let expect = current.as_ref().map(|c| c.sha256.as_str());
    if let Some(c) = &current {
        writer.keep("delete_note", path.as_str(), c)?;
    } else if let Some(files) = &folder_files {
        // A folder's files are kept too: required before removing it for good; for the trash
        // (which holds them anyway) only when the folder is small enough.
        match history::keep_files(writer, engine, &path, files) {
            Err(NoteError::TooLarge(_)) if !permanent => {}
            other => other?,
        }
    }
    if permanent {
        vault.remove_entry(&path, expect)?;
        writer.audit("delete_note", path.as_str(), expect, None, None);
    } else {
        let moved = vault.trash_entry(&path, expect)?;
        writer.audit("delete_note", path.as_str(), expect, None, Some(&moved.to));
        result.trashed_to = Some(moved.to);
    }
    engine.sync(&path)?;
    Ok(result)
}

/// The files of the folder `path`, checked before it is deleted: nothing in it may be hidden
/// from the client or excluded (deleting would take what it cannot see), it may not be nested
/// deeper than [`MAX_WRITE_DEPTH`] levels, and one removed for good may hold only folders and
/// regular files (which the history keeps).
fn folder_to_delete(
    vault: &Vault,
    path: &VaultPath,
    permanent: bool,
) -> Result<Vec<VaultPath>, NoteError> {
    let survey = vault.survey_folder(path, None, MAX_WRITE_DEPTH)?;
    if survey.too_many {
        return Err(NoteError::TooLarge(format!(
            "{path} holds too many entries to check; nothing was deleted"
        )));
    }
    if survey.too_deep {
        return Err(NoteError::Refused(format!(
            "{path} is nested more than {MAX_WRITE_DEPTH} levels deep; nothing was deleted"
        )));
    }
    if survey.unseen > 0 {
        return Err(NoteError::Refused(format!(
            "{path} holds {} hidden or excluded entries that this server does not show; \
             deleting it would take them too, so nothing was deleted",
            survey.unseen
        )));
    }
    if permanent && survey.other > 0 {
        return Err(NoteError::Refused(format!(
            "{path} holds {} symlinks or special files, which the history cannot keep; nothing \
             was removed (without `permanent`, it goes to the vault's .trash)",
            survey.other
        )));
    }
    Ok(survey.files)
}
