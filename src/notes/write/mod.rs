//! The write operations behind the write tools (only served with `--write`).
//!
//! Every operation runs under the [`Writer`]'s two locks (one per process, then the vault's
//! writers' lock in the state folder, shared by every capvault process on the vault), reads what
//! it changes through the capability layer, computes the new bytes with the pure edits of
//! [`crate::markdown::edit`] and [`crate::markdown::yaml_edit`], and commits them:
//!
//! 1. the version replaced or removed is kept in the state folder's history;
//! 2. [`Vault::write_file`] (or a move or removal) checks the version once more right before
//!    the rename, so an edit by Obsidian or a sync tool in between is a `conflict`, not lost;
//! 3. the audit log gets a line (tool, path, old and new sha256; never content);
//! 4. the engine reconciles the paths, so the reply comes after search, lists and backlinks
//!    see the change.
//!
//! `dry_run` stops before step 1 and returns the unified diff instead.

mod canvas;
pub mod confirm;
mod daily;
mod delete;
mod frontmatter;
mod history;
mod relink;
mod tags;
mod task;
mod text;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{NoteError, rfc3339, sha256_hex};
use crate::engine::Engine;
use crate::markdown::edit::{self, EditError, Replace};
use crate::markdown::yaml_edit::{self, FrontmatterError};
use crate::model::heading_key;
use crate::vault::private::Lock;
use crate::vault::state::{AuditFile, Log, StateDir};
use crate::vault::{Entry, Expect, MAX_WRITE_DEPTH, Vault, VaultError, VaultPath};

pub use canvas::{CanvasRequest, EditCanvasRequest, canvas_path, create_canvas, edit_canvas};
pub use daily::{AppendPeriodicRequest, PeriodArgs, append_periodic_note};
pub(crate) use daily::{fill as fill_template, template_formats};
pub use delete::{DeleteRequest, DeleteResult, delete_note};
pub use frontmatter::{FrontmatterRequest, update_frontmatter};
pub use history::{
    HistoryEntry, HistoryRequest, NoteHistory, RestoreRequest, note_history, restore_note,
};
pub use relink::{MoveRequest, MoveResult, MovedLinks, move_note};
pub use tags::{
    RenameTagRequest, RenamedNote, SkippedNote, TagNoteRequest, TagNoteResult, TagRename,
    rename_tag, tag_note,
};
pub use task::{TaskStatusRequest, set_task_status};
pub use text::{
    AppendRequest, CreateRequest, CreateTarget, EditRequest, WriteRequest, append_to_note,
    create_note, edit_note, write_note,
};

/// Largest note a write tool writes (the vault's read cap applies too).
pub const MAX_WRITE_BYTES: usize = 8 * 1024 * 1024;
/// Longest diff a dry run returns, in bytes (longer ones are cut, and say so).
pub const MAX_DIFF_BYTES: usize = 64 * 1024;
/// Most edits in one `edit_note` call.
pub const MAX_EDITS: usize = 100;
/// How long a write waits for another writer before giving up with `unavailable`.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server allows its writers, and how much history it keeps.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `--allow-permanent-delete`: `delete_note(permanent = true)` may remove files for good.
    pub permanent_delete: bool,
    /// Kept versions above this many bytes in all are pruned, oldest first.
    pub history_max_bytes: u64,
    /// Kept versions older than this are pruned.
    pub history_max_age: Duration,
    /// `--confirm destructive`: deletes, whole-note replacements, folder moves, tag renames and
    /// restores wait for the person's yes.
    pub confirm: bool,
    /// `--require-if-match`: a change to an existing note must name the version it read.
    pub require_if_match: bool,
    /// `--state-dir` as given (`None`: the user's state folder), for the `capvault confirm`
    /// command a held change tells the person to run.
    pub state_dir: Option<std::path::PathBuf>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            permanent_delete: false,
            history_max_bytes: 512 * 1024 * 1024,
            history_max_age: Duration::from_secs(90 * 24 * 3600),
            confirm: false,
            require_if_match: false,
            state_dir: None,
        }
    }
}

/// The one writer of a vault in this process: its state folder, audit log and locks. Shared by
/// every session (`Arc<Writer>`).
#[derive(Debug)]
pub struct Writer {
    state: StateDir,
    audit: Option<AuditFile>,
    options: WriteOptions,
    /// Serialises this process's writes (the state folder's lock serialises processes).
    local: Mutex<u64>,
    /// The questions to the person open under `--confirm destructive`.
    confirmations: confirm::Confirmations,
    /// What each client read lately (the audit log names it beside a change).
    reads: confirm::Reads,
    /// The vault's name in a server of several: the audit log's lines carry it (one
    /// `--audit-log` file may take every vault's changes).
    vault_name: std::sync::OnceLock<String>,
}

/// Both locks, held for one operation.
struct Held<'w> {
    count: MutexGuard<'w, u64>,
    _vault: Lock,
}

/// A file's bytes and version, as read before a change.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// One file's change, as [`Writer::commit`] makes it.
pub(crate) struct Change<'a> {
    /// The tool making it (for the history and the audit log).
    pub tool: &'static str,
    /// The file written.
    pub path: &'a VaultPath,
    /// Its bytes and version now; `None`: a new file.
    pub before: Option<&'a Current>,
    /// Its new bytes.
    pub new: Vec<u8>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// A change's place in a batch of changes made by one call (a tag rename), for the history.
#[derive(Debug, Clone, Copy)]
struct Batch<'a> {
    id: &'a str,
    new_sha256: &'a str,
}

/// The reply of every tool that writes one note.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WriteResult {
    /// The note written (vault-relative).
    pub path: String,
    /// Its new version (for a dry run: the version it would have).
    pub sha256: String,
    /// The version it replaced; absent when the note is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_sha256: Option<String>,
    /// Its new size in bytes.
    pub size: u64,
    /// True when the note did not exist before.
    pub created: bool,
    /// True when nothing was changed: `diff` shows what would be.
    pub dry_run: bool,
    /// The unified diff of the change (dry runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Folders created on the way.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub folders_created: Vec<String>,
    /// Anything the client should know (a hard link left with the old bytes...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One `edit_note` replacement, as clients send it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TextEdit {
    /// Text that occurs exactly once in the note.
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
}

impl Writer {
    /// A writer keeping history in `state` (and the audit log there, or in `audit`).
    /// The state folder and the audit log, for the sandbox's rules.
    pub fn folders(&self) -> (&StateDir, Option<&AuditFile>) {
        (&self.state, self.audit.as_ref())
    }

    pub fn new(state: StateDir, audit: Option<AuditFile>, options: WriteOptions) -> Writer {
        let w = Writer {
            state,
            audit,
            options,
            local: Mutex::new(0),
            confirmations: confirm::Confirmations::default(),
            reads: confirm::Reads::default(),
            vault_name: std::sync::OnceLock::new(),
        };
        let pruned = w
            .state
            .lock_writers(LOCK_TIMEOUT)
            .and_then(|_held| history::prune(&w));
        if let Err(e) = pruned {
            tracing::warn!(error = %e, "note history not pruned");
        }
        w
    }

    /// Names the vault in the audit log's lines (a server of several vaults; the first call
    /// wins).
    pub fn set_vault_name(&self, name: &str) {
        let _ = self.vault_name.set(name.to_owned());
    }

    /// Whether permanent deletion is allowed.
    pub fn permanent_delete(&self) -> bool {
        self.options.permanent_delete
    }

    /// The options it was made with.
    pub fn options(&self) -> &WriteOptions {
        &self.options
    }

    /// The questions to the person open under `--confirm destructive`.
    pub fn confirmations(&self) -> &confirm::Confirmations {
        &self.confirmations
    }

    /// What each client read lately.
    pub fn reads(&self) -> &confirm::Reads {
        &self.reads
    }

    /// The state folder.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// Holds the vault's writes (this process's and other capvault processes'), once `engine`'s
    /// first build is done: a write is then an ordinary change to the model and the kept texts,
    /// so the change feed carries the version it replaced (a one-shot `capvault call --write`
    /// writes before anything else has built the engine).
    fn hold(&self, engine: &Engine) -> Result<Held<'_>, NoteError> {
        engine.ensure_built();
        let count = crate::locks::lock(&self.local);
        let vault = self.state.lock_writers(LOCK_TIMEOUT).map_err(|_| {
            NoteError::Unavailable(
                "another capvault process is writing to this vault; try again".to_owned(),
            )
        })?;
        Ok(Held {
            count,
            _vault: vault,
        })
    }

    /// Keeps `old` in the history, as the version `tool` replaced or removed at `path`.
    fn keep(&self, tool: &str, path: &str, old: &Current) -> Result<(), NoteError> {
        self.keep_in(tool, path, old, None)
    }

    /// [`Self::keep`], the line also naming the batch the change belongs to and the version
    /// that replaces this one (so the batch can be undone only where nothing changed since).
    fn keep_in(
        &self,
        tool: &str,
        path: &str,
        old: &Current,
        batch: Option<Batch<'_>>,
    ) -> Result<(), NoteError> {
        self.state
            .keep_version(&old.sha256, &old.bytes)
            .and_then(|()| {
                let mut line = serde_json::json!({
                    "time": rfc3339(SystemTime::now()),
                    "tool": tool,
                    "path": path,
                    "sha256": old.sha256,
                    "size": old.bytes.len(),
                });
                if let Some(b) = batch {
                    line["batch"] = b.id.into();
                    line["new_sha256"] = b.new_sha256.into();
                }
                self.state.append(Log::History, &line.to_string())
            })
            .map_err(|e| {
                NoteError::Unavailable(format!(
                    "could not keep the old version in the history ({}); nothing was changed",
                    e.kind()
                ))
            })
    }

    /// Records one change in the audit log.
    fn audit(
        &self,
        tool: &str,
        path: &str,
        old: Option<&str>,
        new: Option<&str>,
        to: Option<&str>,
    ) {
        let mut line = serde_json::json!({
            "time": rfc3339(SystemTime::now()),
            "tool": tool,
            "path": path,
            "old_sha256": old,
            "new_sha256": new,
        });
        if let Some(to) = to {
            line["to"] = Value::String(to.to_owned());
        }
        if let Some(v) = self.vault_name.get() {
            line["vault"] = Value::String(v.clone());
        }
        if let Some(actor) = confirm::current_actor() {
            if let Some(c) = actor.client {
                line["client"] = Value::String(c);
            }
            if let Some(c) = actor.credential {
                line["credential"] = Value::String(c);
            }
            if !actor.read_before.is_empty() {
                line["read_before"] = actor.read_before.into();
            }
        }
        let line = line.to_string();
        let written = match &self.audit {
            Some(file) => file.append(&line),
            None => self.state.append(Log::Audit, &line),
        };
        if let Err(e) = written {
            tracing::error!(error = %e, "audit log not written");
        }
    }

    /// Makes `change`: writes its new bytes at its path in place of `before` (or as a new
    /// file), keeping history and logging, then reconciles the engine. With `dry_run`, returns
    /// the diff only.
    fn commit(
        &self,
        engine: &Engine,
        held: &mut Held<'_>,
        change: Change<'_>,
    ) -> Result<WriteResult, NoteError> {
        self.commit_in(engine, held, change, None)
    }

    /// [`Self::commit`] of one change of the batch `batch` (its history line says so).
    fn commit_in(
        &self,
        engine: &Engine,
        held: &mut Held<'_>,
        change: Change<'_>,
        batch: Option<&str>,
    ) -> Result<WriteResult, NoteError> {
        let Change {
            tool,
            path,
            before,
            new,
            dry_run,
        } = change;
        if new.len() > MAX_WRITE_BYTES || new.len() as u64 > engine.vault().limits().max_read_bytes
        {
            return Err(NoteError::TooLarge(format!(
                "{path}: the new text is {} bytes, over the write limit",
                new.len()
            )));
        }
        if before.is_none() && path.components().count() > MAX_WRITE_DEPTH {
            return Err(too_deep(path));
        }
        let sha = sha256_hex(&new);
        let mut result = WriteResult {
            path: path.to_string(),
            sha256: sha.clone(),
            previous_sha256: before.map(|b| b.sha256.clone()),
            size: new.len() as u64,
            created: before.is_none(),
            dry_run,
            diff: None,
            folders_created: Vec::new(),
            note: None,
        };
        if dry_run {
            let old = before.map(|b| String::from_utf8_lossy(&b.bytes).into_owned());
            result.diff = Some(unified_diff(
                path.as_str(),
                old.as_deref(),
                &String::from_utf8_lossy(&new),
            ));
            return Ok(result);
        }
        let vault = engine.vault();
        let expect = match before {
            Some(b) => {
                if b.sha256 == sha {
                    // Nothing changes: no write, no history, no audit line.
                    result.note = Some("the note already has this content".to_owned());
                    return Ok(result);
                }
                let batch = batch.map(|id| Batch {
                    id,
                    new_sha256: &sha,
                });
                self.keep_in(tool, path.as_str(), b, batch)?;
                Expect::Version(b.sha256.clone())
            }
            None => {
                if let Some(parent) = path.parent()
                    && !parent.is_root()
                {
                    result.folders_created = vault
                        .create_folders(&parent)?
                        .into_iter()
                        .map(|p| p.to_string())
                        .collect();
                }
                Expect::Absent
            }
        };
        let written = vault.write_file(path, &new, &expect)?;
        *held.count += 1;
        if written.other_links > 0 {
            result.note = Some(format!(
                "the old file had {} other hard link(s); they keep the old content",
                written.other_links
            ));
        }
        self.audit(
            tool,
            path.as_str(),
            before.map(|b| b.sha256.as_str()),
            Some(&sha),
            None,
        );
        engine.sync(path)?;
        self.maybe_prune(*held.count);
        Ok(result)
    }

    fn maybe_prune(&self, count: u64) {
        if count.is_multiple_of(200)
            && let Err(e) = history::prune(self)
        {
            tracing::warn!(error = %e, "note history not pruned");
        }
    }
}

/// The note a write tool names: `.md` added when the path has no extension.
pub fn note_path(input: &str) -> Result<VaultPath, NoteError> {
    let typed = VaultPath::parse(input)?;
    if typed.is_root() {
        return Err(NoteError::invalid("path", "path is empty"));
    }
    match typed.extension() {
        Some("md") => Ok(typed),
        Some(ext) if ext.eq_ignore_ascii_case("md") => Ok(typed),
        Some("canvas" | "base") => Err(NoteError::invalid(
            "path",
            format!("{typed}: not a note (use the canvas tools for canvases)"),
        )),
        _ => Ok(VaultPath::parse(&format!("{typed}.md"))?),
    }
}

/// What is at `path` now; a missing path or a parent that is a file is `None`.
fn entry_at(vault: &Vault, path: &VaultPath) -> Result<Option<Entry>, NoteError> {
    match vault.entry(path) {
        Ok(found) => Ok(found),
        Err(VaultError::NotFound(_) | VaultError::NotAFolder(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A note a write tool names: as the client typed it, and parsed by [`note_path`] (`.md` added
/// when left out).
#[derive(Debug, Clone)]
pub struct NoteName {
    input: String,
    path: VaultPath,
}

impl NoteName {
    /// Parses `input` as [`note_path`] does.
    pub fn parse(input: &str) -> Result<Self, NoteError> {
        Ok(NoteName {
            path: note_path(input)?,
            input: input.to_owned(),
        })
    }
}

/// A file or folder a write tool names: as the client typed it, and parsed.
#[derive(Debug, Clone)]
pub struct EntryName {
    input: String,
    path: VaultPath,
}

impl EntryName {
    /// Parses `input` as a vault path.
    pub fn parse(input: &str) -> Result<Self, NoteError> {
        Ok(EntryName {
            path: VaultPath::parse(input)?,
            input: input.to_owned(),
        })
    }
}

/// The existing note `name` names, found as `read_note` finds it: the typed path (`.md` added
/// when left out), else a bare name or partial path resolved as a wikilink from the vault root;
/// a miss is `not_found` (or `ambiguous`) with suggestions.
pub(crate) fn existing_note(engine: &Engine, name: &NoteName) -> Result<VaultPath, NoteError> {
    let (input, path) = (name.input.as_str(), &name.path);
    if entry_at(engine.vault(), path)?.is_some() {
        return Ok(path.clone());
    }
    let found = {
        let model = engine.model()?;
        crate::notes::locate::locate_in(&model, input.trim(), path)?
    };
    if found.extension() != Some("md") {
        return Err(NoteError::invalid(
            "path",
            format!("`{}` names {found}, which is not a note", input.trim()),
        ));
    }
    Ok(found)
}

/// The existing file or folder `name` names (a note's `.md` may be left out, a bare name
/// resolves as for [`existing_note`]).
pub(crate) fn existing_entry(
    engine: &Engine,
    name: &EntryName,
) -> Result<(VaultPath, Entry), NoteError> {
    let vault = engine.vault();
    let (input, typed) = (name.input.as_str(), name.path.clone());
    if let Some(e) = entry_at(vault, &typed)? {
        return Ok((typed, e));
    }
    if let Ok(md) = note_path(input)
        && let Some(e) = entry_at(vault, &md)?
    {
        return Ok((md, e));
    }
    let found = {
        let model = engine.model()?;
        crate::notes::locate::locate_in(&model, input.trim(), &typed)?
    };
    match entry_at(vault, &found)? {
        Some(e) => Ok((found, e)),
        None => Err(VaultError::NotFound(typed).into()),
    }
}

/// Reads the file at `path` as it is now (`None` when nothing is there).
pub(crate) fn read_current(vault: &Vault, path: &VaultPath) -> Result<Option<Current>, NoteError> {
    match vault.read_file(path) {
        Ok(data) => Ok(Some(Current {
            sha256: sha256_hex(&data.bytes),
            bytes: data.bytes,
        })),
        Err(VaultError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The note at `path`, which must exist, at version `if_match` when given.
fn existing(
    vault: &Vault,
    path: &VaultPath,
    if_match: Option<&str>,
) -> Result<(Current, String), NoteError> {
    let Some(current) = read_current(vault, path)? else {
        return Err(VaultError::NotFound(path.clone()).into());
    };
    check_version(path, &current, if_match)?;
    let text =
        String::from_utf8(current.bytes.clone()).map_err(|_| VaultError::NotUtf8(path.clone()))?;
    Ok((current, text))
}

/// Fails with `conflict` when `if_match` is given and is not the current version.
pub(crate) fn check_version(
    path: &VaultPath,
    current: &Current,
    if_match: Option<&str>,
) -> Result<(), NoteError> {
    match if_match.map(str::trim) {
        Some(want) if !want.eq_ignore_ascii_case(&current.sha256) => Err(VaultError::Changed {
            path: path.clone(),
            current_sha256: current.sha256.clone(),
        }
        .into()),
        _ => Ok(()),
    }
}

/// The unified diff between two texts (`old` absent: a new file), at most [`MAX_DIFF_BYTES`].
pub fn unified_diff(path: &str, old: Option<&str>, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old.unwrap_or(""), new);
    let from = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let mut text = diff
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .to_string();
    if text.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[diff cut at 64 KiB]\n");
    }
    text
}

/// The refusal of a write that would leave a file more than [`MAX_WRITE_DEPTH`] levels deep.
fn too_deep(path: &VaultPath) -> NoteError {
    NoteError::Refused(format!(
        "{path}: writes put nothing more than {MAX_WRITE_DEPTH} folder levels deep; nothing was \
         changed"
    ))
}

fn edit_error(path: &VaultPath, e: EditError) -> NoteError {
    match e {
        EditError::Count {
            what,
            count: 0,
            headings,
        } => NoteError::NotFound {
            message: if headings.is_empty() {
                format!("{path}: {what} occurs 0 times; nothing was changed")
            } else {
                format!(
                    "{path}: {what} occurs 0 times; nothing was changed; headings: {}",
                    headings.join(" | ")
                )
            },
            suggestions: Vec::new(),
        },
        EditError::Count { what, count, .. } => NoteError::Ambiguous {
            message: format!(
                "{path}: {what} occurs {count} times (it must occur exactly once); nothing was changed"
            ),
            suggestions: Vec::new(),
        },
        other => {
            let param = match other {
                EditError::EmptyHeading => "heading",
                _ => "edits",
            };
            NoteError::invalid(param, format!("{path}: {other}; nothing was changed"))
        }
    }
}

/// The refusal of a frontmatter edit asked through the argument `param` (`set`,
/// `frontmatter`, `add`): a note whose frontmatter cannot be edited is about `path`, a key both
/// set and removed about `remove`.
fn frontmatter_error(path: &VaultPath, e: FrontmatterError, param: &'static str) -> NoteError {
    let param = match e {
        FrontmatterError::Malformed { .. } | FrontmatterError::Layout(_) => "path",
        FrontmatterError::SetAndRemoved(_) => "remove",
        FrontmatterError::BadKey(_) | FrontmatterError::NoReadBack => param,
    };
    NoteError::invalid(param, format!("{path}: {e}"))
}

fn check_size(what: &str, text: &str) -> Result<(), NoteError> {
    if text.len() > MAX_WRITE_BYTES {
        return Err(NoteError::TooLarge(format!(
            "{what} is {} bytes, over the {MAX_WRITE_BYTES}-byte write limit",
            text.len()
        )));
    }
    Ok(())
}
