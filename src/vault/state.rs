//! capvault's state folder: what the write tools keep outside the vault.
//!
//! One folder per vault under the user's state folder (`~/.local/state/capvault/state-1/<vault
//! id>` on Linux), opened as a third capability handle and refused inside the vault, like the
//! index cache: both are a [`PrivateDir`] (`0700` folders, `0600` files, this user's, names
//! checked, nothing followed). It holds:
//!
//! - `versions/<sha256>`: the bytes of every note version a write replaced or removed,
//!   content-addressed (a version kept twice is stored once), each written whole to a temporary
//!   name, synced and renamed;
//! - `history.jsonl`: one line per kept version (time, tool, path, sha256, size), appended;
//! - `audit.jsonl`: one line per write (time, tool, path, old and new sha256), appended and
//!   synced, never note content (`--audit-log` puts it elsewhere: [`AuditFile`]);
//! - `writers.lock`: the lock every capvault process writing to the vault takes for the length
//!   of one write, so two servers on one vault never interleave a read-modify-write;
//! - private sub-folders of other modules' own files ([`StateDir::private_files`]: `oauth`,
//!   `confirm`).

use std::io::{self, Read, Seek};
use std::path::Path;
use std::time::{Duration, SystemTime};

use cap_std::fs::{Dir, File};

pub mod identity;

use super::private::{self, FILE_MODE, FolderError, Lock, PrivateDir};
use super::{Ambient, Vault, ambient};

/// Sub-folder of the state root holding one folder per vault; bump the suffix if the layout
/// changes.
const STATE_FOLDER: &str = "state-1";
/// The folder of kept versions.
const VERSIONS: &str = "versions";
/// The writers' lock file.
const WRITERS_LOCK: &str = "writers.lock";

/// The append-only logs of the state folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log {
    /// `history.jsonl`: the versions kept.
    History,
    /// `audit.jsonl`: every write.
    Audit,
}

impl Log {
    fn name(self) -> &'static str {
        match self {
            Log::History => "history.jsonl",
            Log::Audit => "audit.jsonl",
        }
    }
}

/// The default state root: the platform's per-user state folder (or, where it has none, its
/// local data folder) plus `capvault`.
pub fn default_root() -> Option<std::path::PathBuf> {
    dirs::state_dir()
        .or_else(dirs::data_local_dir)
        .map(|d| d.join("capvault"))
}

/// One vault's state folder, open.
#[derive(Debug)]
pub struct StateDir {
    dir: PrivateDir,
    versions: PrivateDir,
    /// Which folder of the state root this is, and how it was matched to the vault.
    choice: Choice,
}

/// The state folder chosen for a vault: its id and how it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The folder's name under `state-1`.
    pub id: String,
    /// How it matched the vault.
    pub how: identity::How,
    /// What the user was told about it.
    pub notices: Vec<String>,
}

/// The `state-1` folder under `root` if it exists (checked outside the vault and private).
fn open_existing_base(root: &Path, vault: &Vault) -> Result<Option<PrivateDir>, StateError> {
    let path = std::path::absolute(root)?.join(STATE_FOLDER);
    let dir = match ambient(Ambient::Open(&path)) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    private::ensure_outside(&dir, vault.identity()?)?;
    Ok(Some(PrivateDir::new(dir, FILE_MODE)?))
}

/// Why the state folder could not be opened, reported or changed. Names no host path except
/// a detached state's own folder ([`StateError::Alive`]), shown to the person at the
/// command line.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state folder lies inside the vault.
    #[error("the state folder is inside the vault; it must be outside")]
    InsideVault,
    /// It (or one of the state folders beside it) is another user's, or others may write in it.
    #[error("the state folder belongs to another user or others can write to it")]
    NotPrivate,
    /// The path is relative after all, or names `..`.
    #[error("the state folder must be an absolute path without `..`")]
    BadPath,
    /// The filesystem refused (only the kind of failure is shown).
    #[error("state folder: {}", .0.kind())]
    Io(io::Error),
    /// `capvault state --adopt` with a name that is not a state id.
    #[error("{0:?} is not a state id (capvault state VAULT lists them)")]
    NotStateId(String),
    /// `capvault state --adopt` with an id no state has.
    #[error("there is no state {0} (capvault state VAULT lists them)")]
    NoSuchState(String),
    /// Adopting a state whose vault folder still exists, without `--force`.
    #[error(
        "state {id} belongs to the vault at {path}, which still exists; adopting it would give \
         two vaults one history (--force to do it anyway)"
    )]
    Alive { id: String, path: String },
}

impl From<io::Error> for StateError {
    fn from(e: io::Error) -> StateError {
        StateError::Io(e)
    }
}

impl From<FolderError> for StateError {
    fn from(e: FolderError) -> StateError {
        match e {
            FolderError::InsideVault => StateError::InsideVault,
            FolderError::NotPrivate => StateError::NotPrivate,
            FolderError::BadPath => StateError::BadPath,
            FolderError::Io(e) | FolderError::Ancestor { source: e, .. } => StateError::Io(e),
        }
    }
}

/// Why `--audit-log FILE` was refused: the path as the user typed it, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct AuditError {
    path: String,
    problem: AuditProblem,
}

/// What is wrong with an audit log's path ([`AuditError`]).
#[derive(Debug, thiserror::Error)]
pub enum AuditProblem {
    /// The filesystem refused.
    #[error("{0}")]
    Io(io::Error),
    /// No folder or no file name.
    #[error("not a file path")]
    NotFile,
    /// The file name is not UTF-8.
    #[error("the name is not UTF-8")]
    NotUtf8,
    /// The folder is the vault or inside it.
    #[error("must be outside the vault")]
    InsideVault,
}

/// One kept version, as the versions folder lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptVersion {
    /// Its sha256 (the file's name).
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was kept.
    pub kept: SystemTime,
}

impl StateDir {
    /// The folder's handle, for the sandbox's rules (Landlock, Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn dir(&self) -> &Dir {
        self.dir.dir()
    }

    /// Opens (creating what is missing) the state folder of `vault` under `root`: the one
    /// [`identity::choose`] picks (the same folder, moved or restored), or a new one. Refuses a
    /// `root` inside the vault before creating anything. What the user should hear (a restore,
    /// an earlier state left alone) is logged. The error never names a host path.
    pub fn open(root: &Path, vault: &Vault) -> Result<StateDir, StateError> {
        let base = private::open_outside(root, vault, STATE_FOLDER)?;
        let (dir, choice) = {
            let _registry = identity::lock(&base)?;
            let (records, legacy) = identity::read_all(&base)?;
            let current = identity::Current::of(vault)?;
            let choice =
                identity::choose(&records, &legacy, &current, &identity::DiskProbe { vault });
            let id = match &choice.id {
                Some(id) => id.clone(),
                None => identity::new_id()?,
            };
            let dir = base.sub_dir(&id)?;
            let record = identity::record_of(vault, &id)?;
            identity::write_record(&dir, &record)?;
            let choice = Choice {
                id,
                how: choice.how,
                notices: choice.notices,
            };
            (dir, choice)
        };
        match &choice.how {
            identity::How::Same | identity::How::Legacy => {
                tracing::debug!(state = %choice.id, "state folder: {}", choice.how.describe())
            }
            how => tracing::info!(state = %choice.id, "state folder: {}", how.describe()),
        }
        for notice in &choice.notices {
            tracing::warn!("{notice}");
        }
        let versions = dir.sub_dir(VERSIONS)?;
        Ok(StateDir {
            dir,
            versions,
            choice,
        })
    }

    /// Which state folder this is and how it was found.
    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    /// What `capvault state` shows for `vault` under `root`, creating nothing: `None` when no
    /// vault has a state there yet.
    pub fn report(root: &Path, vault: &Vault) -> Result<Option<identity::Report>, StateError> {
        let Some(base) = open_existing_base(root, vault)? else {
            return Ok(None);
        };
        Ok(Some(identity::report(&base, vault)?))
    }

    /// Makes state `id` (a folder name `capvault state` lists) the state of `vault`; see
    /// [`identity`]. Returns the state the vault had before, now detached.
    pub fn adopt(
        root: &Path,
        vault: &Vault,
        id: &str,
        force: bool,
    ) -> Result<Option<String>, StateError> {
        let base = private::open_outside(root, vault, STATE_FOLDER)?;
        identity::adopt(&base, vault, id, force)
    }

    /// A private sub-folder for another module's small files (`oauth`: the authorization
    /// server's clients, tokens and passphrase hash; `confirm`), created when missing: lowercase
    /// letters, not the versions folder.
    pub fn private_files(&self, name: &str) -> io::Result<PrivateDir> {
        if name == VERSIONS || !name.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad folder name",
            ));
        }
        Ok(self.dir.sub_dir(name)?)
    }

    /// Takes the writers' lock, waiting at most `timeout` for another writer (in this process
    /// or another) to finish.
    pub fn lock_writers(&self, timeout: Duration) -> io::Result<Lock> {
        self.dir.lock(WRITERS_LOCK, timeout)
    }

    /// Keeps `bytes` as version `sha256` (nothing to do when it is kept already).
    pub fn keep_version(&self, sha256: &str, bytes: &[u8]) -> io::Result<()> {
        check_sha(sha256)?;
        if self.versions.stamp(sha256).is_some() {
            return Ok(());
        }
        self.versions.replace(sha256, bytes)
    }

    /// The bytes of version `sha256`, if kept (at most `max` bytes).
    pub fn read_version(&self, sha256: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
        check_sha(sha256)?;
        self.versions.read(sha256, max)
    }

    /// True when version `sha256` is kept.
    pub fn has_version(&self, sha256: &str) -> bool {
        check_sha(sha256).is_ok() && self.versions.stamp(sha256).is_some()
    }

    /// Every kept version (at most `max`).
    pub fn kept_versions(&self, max: usize) -> io::Result<Vec<KeptVersion>> {
        Ok(self
            .versions
            .files(max)?
            .into_iter()
            .filter(|(name, _)| check_sha(name).is_ok())
            .map(|(sha256, stamp)| KeptVersion {
                sha256,
                size: stamp.len(),
                kept: stamp.modified(),
            })
            .collect())
    }

    /// Forgets version `sha256`.
    pub fn drop_version(&self, sha256: &str) -> io::Result<()> {
        check_sha(sha256)?;
        self.versions.remove(sha256)
    }

    /// Appends `line` (one JSON object, no line break) to `log`, and syncs it.
    pub fn append(&self, log: Log, line: &str) -> io::Result<()> {
        self.dir.append(log.name(), &with_newline(line)).map(drop)
    }

    /// The last `max` bytes of `log` at most, from the start of a line (empty when missing).
    pub fn read_log(&self, log: Log, max: u64) -> io::Result<Vec<u8>> {
        read_tail(self.dir.open_read(log.name()), max)
    }

    /// Replaces `log` with `bytes` (temporary file, sync, rename): pruning.
    pub fn rewrite_log(&self, log: Log, bytes: &[u8]) -> io::Result<()> {
        self.dir.replace(log.name(), bytes)
    }
}

/// An audit log at a place of the user's choosing (`--audit-log FILE`), outside the vault: a
/// file the user named, in a folder of theirs (not a [`PrivateDir`]), reached by that one name
/// through the same append-open ([`private::append_open`]).
#[derive(Debug)]
pub struct AuditFile {
    dir: Dir,
    name: String,
}

impl AuditFile {
    /// The folder's handle, for the sandbox's rules (Landlock, Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Opens the folder of `path` (which must exist, outside the vault); the file is created
    /// `0600` at the first write, never through a symlink. The error may name `path`: only the
    /// user who started the server sees it.
    pub fn open(path: &Path, vault: &Vault) -> Result<AuditFile, AuditError> {
        let err = |problem| AuditError {
            path: path.display().to_string(),
            problem,
        };
        let path = std::path::absolute(path).map_err(|e| err(AuditProblem::Io(e)))?;
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(err(AuditProblem::NotFile));
        };
        let name = name
            .to_str()
            .ok_or_else(|| err(AuditProblem::NotUtf8))?
            .to_owned();
        let dir = ambient(Ambient::Open(folder)).map_err(|e| err(AuditProblem::Io(e)))?;
        let id = vault.identity().map_err(|e| err(AuditProblem::Io(e)))?;
        private::ensure_outside(&dir, id).map_err(|_| err(AuditProblem::InsideVault))?;
        // Checked now, so a bad file is reported at startup.
        private::append_open(&dir, &name, FILE_MODE).map_err(|e| err(AuditProblem::Io(e)))?;
        Ok(AuditFile { dir, name })
    }

    /// Appends `line` and syncs it.
    pub fn append(&self, line: &str) -> io::Result<()> {
        private::append_to(&self.dir, &self.name, FILE_MODE, &with_newline(line)).map(drop)
    }

    /// The last `max` bytes at most, from the start of a line.
    pub fn read(&self, max: u64) -> io::Result<Vec<u8>> {
        read_tail(private::open_regular(&self.dir, &self.name), max)
    }
}

fn check_sha(name: &str) -> io::Result<()> {
    if name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a sha256 in lowercase hex",
        ))
    }
}

/// `line` and a line break, to be appended in one write.
fn with_newline(line: &str) -> Vec<u8> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    buf
}

/// The last `max` bytes at most of the log `opened`, from the start of a line (empty when it
/// does not exist).
fn read_tail(opened: io::Result<(File, u64)>, max: u64) -> io::Result<Vec<u8>> {
    let (mut file, len) = match opened {
        Ok(opened) => opened,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let skip = len.saturating_sub(max);
    file.seek(io::SeekFrom::Start(skip))?;
    let mut bytes = Vec::new();
    Read::take(&mut file, max).read_to_end(&mut bytes)?;
    if skip > 0 {
        // Starts at a line.
        let cut = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
        bytes.drain(..cut);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn a_state_folder_inside_the_vault_is_refused_and_versions_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        let e = StateDir::open(&root.join("state"), &vault).unwrap_err();
        assert!(e.to_string().contains("inside the vault"), "{e}");
        assert!(!root.join("state").exists(), "created before the check");
        let state = StateDir::open(&tmp.path().join("state"), &vault).unwrap();
        let sha = crate::vault::sha256_hex(b"old");
        state.keep_version(&sha, b"old").unwrap();
        assert_eq!(state.read_version(&sha, 10).unwrap().unwrap(), b"old");
        assert!(state.read_version("../x", 10).is_err());
        state.append(Log::Audit, "{\"a\":1}").unwrap();
        state.append(Log::Audit, "{\"a\":2}").unwrap();
        assert_eq!(
            state.read_log(Log::Audit, 1000).unwrap(),
            b"{\"a\":1}\n{\"a\":2}\n"
        );
        // A tail starts at a line.
        assert_eq!(state.read_log(Log::Audit, 10).unwrap(), b"{\"a\":2}\n");
        let kept = state.kept_versions(10).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].sha256, sha);
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn the_writers_lock_is_exclusive_until_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        let state = StateDir::open(&tmp.path().join("state"), &vault).unwrap();
        let held = state.lock_writers(Duration::from_millis(10)).unwrap();
        let again = state.lock_writers(Duration::from_millis(20));
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        drop(held);
        assert!(state.lock_writers(Duration::from_millis(10)).is_ok());
    }
}
