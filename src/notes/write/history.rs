//! Note history: the versions writes replaced or removed, listed and restored, and pruned to
//! the configured size and age.

use std::collections::HashSet;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Change, Current, WriteResult, Writer, check_version, read_current};
use crate::engine::Engine;
use crate::notes::{NoteError, sha256_hex};
use crate::vault::state::Log;
use crate::vault::{VaultError, VaultPath};

/// Most of the history log read at once (its newest part).
const MAX_LOG_READ: u64 = 32 * 1024 * 1024;
/// Most versions listed from the versions folder when pruning.
const MAX_VERSIONS: usize = 1_000_000;
/// Most notes of a folder kept in the history before the folder is removed for good.
const MAX_FOLDER_NOTES: usize = 10_000;

/// One line of the history log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    /// When the version was replaced or removed (RFC 3339).
    pub time: String,
    /// The tool that did it.
    pub tool: String,
    /// The version's sha256: pass it to `restore_note`.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// False when it was pruned from the history since.
    #[serde(default = "yes")]
    pub available: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
pub(super) struct LogLine {
    time: String,
    tool: String,
    pub(super) path: String,
    /// The version replaced.
    pub(super) sha256: String,
    size: u64,
    /// The batch of changes this one belongs to (a tag rename).
    #[serde(default)]
    pub(super) batch: Option<String>,
    /// The version that replaced it (batch changes only).
    #[serde(default)]
    pub(super) new_sha256: Option<String>,
}

/// Reply of `note_history`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NoteHistory {
    /// The note (vault-relative).
    pub path: String,
    /// Its version now, if it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_sha256: Option<String>,
    /// Earlier versions, newest first.
    pub versions: Vec<HistoryEntry>,
}

pub(super) fn read_log(writer: &Writer) -> Result<Vec<LogLine>, NoteError> {
    let bytes = writer
        .state
        .read_log(Log::History, MAX_LOG_READ)
        .map_err(|e| NoteError::Unavailable(format!("the history is unreadable ({})", e.kind())))?;
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<LogLine>(line).ok())
        .collect())
}

/// What `note_history` asks: the note (maybe deleted) as typed and parsed, and how many
/// versions.
#[derive(Debug, Clone)]
pub struct HistoryRequest {
    input: String,
    path: VaultPath,
    limit: usize,
}

impl HistoryRequest {
    /// Parses the path as typed (the history may hold it without `.md`).
    pub fn new(path: &str, limit: usize) -> Result<Self, NoteError> {
        Ok(HistoryRequest {
            path: VaultPath::parse(path)?,
            input: path.to_owned(),
            limit,
        })
    }
}

/// `note_history`: the kept versions of `path`, newest first (at most `limit`).
pub fn note_history(
    writer: &Writer,
    engine: &Engine,
    req: &HistoryRequest,
) -> Result<NoteHistory, NoteError> {
    let (typed, limit) = (req.path.clone(), req.limit);
    let lines = read_log(writer)?;
    let path = if lines.iter().any(|l| l.path == typed.as_str()) {
        typed
    } else {
        let name = super::NoteName::parse(&req.input)?;
        let md = name.path.clone();
        if lines.iter().any(|l| l.path == md.as_str()) {
            md
        } else {
            // A bare name of a note that exists resolves as everywhere else.
            match super::existing_note(engine, &name) {
                Ok(found) => found,
                Err(NoteError::NotFound { .. } | NoteError::Vault(VaultError::NotFound(_))) => md,
                Err(e) => return Err(e),
            }
        }
    };
    // A path the vault refuses (outside, hidden, excluded) has no history to show either.
    let current = read_current(engine.vault(), &path)?.map(|c| c.sha256);
    let mut seen = HashSet::new();
    let versions = lines
        .into_iter()
        .rev()
        .filter(|l| l.path == path.as_str())
        .filter(|l| seen.insert(l.sha256.clone()))
        .take(limit)
        .map(|l| HistoryEntry {
            available: writer.state.has_version(&l.sha256),
            time: l.time,
            tool: l.tool,
            sha256: l.sha256,
            size: l.size,
        })
        .collect();
    Ok(NoteHistory {
        path: path.to_string(),
        current_sha256: current,
        versions,
    })
}

/// What `restore_note` asks.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    /// The note (maybe deleted).
    pub note: super::NoteName,
    /// The version to bring back, from `note_history`.
    pub sha256: String,
    /// The note's current version, when given.
    pub if_match: Option<String>,
    /// Only compute the diff.
    pub dry_run: bool,
}

/// `restore_note`: brings version `sha256` of `path` back through the same atomic write (the
/// version it replaces is kept, so a restore is undone the same way).
pub fn restore_note(
    writer: &Writer,
    engine: &Engine,
    req: &RestoreRequest,
) -> Result<WriteResult, NoteError> {
    let (sha256, if_match, dry_run) = (req.sha256.as_str(), req.if_match.as_deref(), req.dry_run);
    // An existing note is found as everywhere else; a deleted one is recreated where named.
    let path = match super::existing_note(engine, &req.note) {
        Ok(found) => found,
        Err(NoteError::NotFound { .. } | NoteError::Vault(VaultError::NotFound(_))) => {
            req.note.path.clone()
        }
        Err(e) => return Err(e),
    };
    let sha = sha256.trim().to_ascii_lowercase();
    let mut held = writer.hold(engine)?;
    let bytes = writer
        .state
        .read_version(&sha, engine.vault().limits().max_read_bytes)
        .map_err(|_| NoteError::invalid("sha256", "sha256 must be 64 hex digits"))?
        .ok_or_else(|| NoteError::NotFound {
            message: format!("no version {sha} in the history (see note_history)"),
            suggestions: Vec::new(),
        })?;
    if sha256_hex(&bytes) != sha {
        return Err(NoteError::Unavailable(format!(
            "the kept version {sha} is damaged; not restored"
        )));
    }
    let current: Option<Current> = read_current(engine.vault(), &path)?;
    if let Some(c) = &current {
        check_version(&path, c, if_match)?;
    } else if if_match.is_some() {
        return Err(VaultError::NotFound(path).into());
    }
    writer.commit(
        engine,
        &mut held,
        Change {
            tool: "restore_note",
            path: &path,
            before: current.as_ref(),
            new: bytes,
            dry_run,
        },
    )
}

/// Keeps every file of the folder `folder` (`files`, as the folder's survey found them) before
/// it is removed.
pub(super) fn keep_files(
    writer: &Writer,
    engine: &Engine,
    folder: &VaultPath,
    files: &[VaultPath],
) -> Result<(), NoteError> {
    if files.len() > MAX_FOLDER_NOTES {
        return Err(NoteError::TooLarge(format!(
            "{folder} holds more than {MAX_FOLDER_NOTES} files: too many to keep in the history \
             before removing it for good; move it to the trash instead"
        )));
    }
    for p in files {
        if let Some(c) = read_current(engine.vault(), p)? {
            writer.keep("delete_note", p.as_str(), &c)?;
        }
    }
    Ok(())
}

/// Prunes kept versions older than the age cap, then the oldest while over the size cap, and
/// drops their lines from the history log.
pub(super) fn prune(writer: &Writer) -> std::io::Result<()> {
    let state = &writer.state;
    let mut kept = state.kept_versions(MAX_VERSIONS)?;
    let now = SystemTime::now();
    kept.sort_by_key(|k| k.kept);
    let mut total: u64 = kept.iter().map(|k| k.size).sum();
    let mut gone = HashSet::new();
    for k in &kept {
        let old = now
            .duration_since(k.kept)
            .is_ok_and(|age| age > writer.options.history_max_age);
        if old || total > writer.options.history_max_bytes {
            state.drop_version(&k.sha256)?;
            total = total.saturating_sub(k.size);
            gone.insert(k.sha256.clone());
        }
    }
    if gone.is_empty() {
        return Ok(());
    }
    let log = state.read_log(Log::History, MAX_LOG_READ)?;
    let mut out = Vec::with_capacity(log.len());
    for line in log.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let drop = serde_json::from_slice::<LogLine>(line).is_ok_and(|l| gone.contains(&l.sha256));
        if !drop {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    state.rewrite_log(Log::History, &out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // test fixture

    use super::*;
    use crate::notes::write::{WriteOptions, Writer};
    use crate::vault::state::StateDir;
    use crate::vault::{Limits, Vault};

    #[test]
    fn pruning_keeps_the_newest_versions_within_the_size_cap_and_drops_their_log_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("v");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Limits::default()).unwrap();
        let state = StateDir::open(&tmp.path().join("state"), &vault).unwrap();
        let writer = Writer::new(
            state,
            None,
            WriteOptions {
                history_max_bytes: 250,
                ..WriteOptions::default()
            },
        );
        let mut shas = Vec::new();
        for i in 0..5u8 {
            let bytes = vec![b'a' + i; 100];
            let c = Current {
                sha256: sha256_hex(&bytes),
                bytes,
            };
            writer.keep("write_note", "n.md", &c).unwrap();
            shas.push(c.sha256);
            // Distinct modification times, oldest first.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        prune(&writer).unwrap();
        let kept: Vec<bool> = shas.iter().map(|s| writer.state.has_version(s)).collect();
        assert_eq!(kept, [false, false, false, true, true]);
        let lines = read_log(&writer).unwrap();
        let logged: Vec<&str> = lines.iter().map(|l| l.sha256.as_str()).collect();
        assert_eq!(logged, [shas[3].as_str(), shas[4].as_str()]);
        // The age cap: everything older than zero seconds goes.
        let aged = Writer {
            options: WriteOptions {
                history_max_age: std::time::Duration::ZERO,
                ..WriteOptions::default()
            },
            ..writer
        };
        prune(&aged).unwrap();
        assert!(shas.iter().all(|s| !aged.state.has_version(s)));
        assert!(read_log(&aged).unwrap().is_empty());
    }
}
