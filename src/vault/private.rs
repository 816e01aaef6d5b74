//! capvault's own folders outside the vault, one type for all of them: [`PrivateDir`] holds the
//! index cache ([`super::cache`]), the state folder and its sub-folders ([`super::state`]) and
//! the folder a model is downloaded into ([`super::download`]). Those modules know only their
//! own file names and formats; every rule about reaching a file is here, once:
//!
//! - **Opening.** [`open_folder`] turns a host path into a folder handle through [`ambient`]:
//!   made absolute, refused with `.` or `..` in it, the deepest existing ancestor opened and,
//!   for the cache and state folders, proven not to be the vault or inside it
//!   ([`ensure_outside`], handle by handle, so a symlink cannot hide it) before anything is
//!   created; the missing folders are then made one at a time, never through a symlink. A
//!   [`PrivateDir`] is only made from a folder that belongs to this user and that no one else
//!   may write to (its files could otherwise have been planted); its sub-folders are created
//!   `0700` and checked the same way.
//! - **Names.** One rule, [`valid_name`]: 1 to [`MAX_NAME`] bytes of ASCII letters, digits, `.`,
//!   `-` and `_`, not starting with a dot. So no separator, no `.` or `..`, no absolute path,
//!   nothing hidden, no NUL or control character, no name another platform reads as another
//!   file's. A folder may also reserve names of its own ([`PrivateDir::reserve`]: the index
//!   cache's lock and birth files), which its users then cannot name.
//! - **Files.** Opened by name in the folder's handle without following a symlink
//!   (`O_NOFOLLOW`) nor blocking on a FIFO (`O_NONBLOCK`), and used only when `fstat` on the
//!   handle says regular file. Created with the folder's file mode (`0600`; `0644` in a
//!   download folder, whose models others may read), exclusively where a new file is meant.
//! - **Replacing** a file ([`PrivateDir::write_with`]): written to a temporary name
//!   ([`temp_name`]), synced, renamed over the name; [`PrivateDir::replace`] also syncs the
//!   folder.
//! - **Appending**: one function, [`append_open`] (`O_APPEND`, created when missing, no symlink
//!   followed, and then only a regular file of this user). The audit log (`--audit-log`), a file
//!   the user named in a folder of their own, is appended through it too.
//! - **Locking**: one function, `hold`: an advisory lock (`flock`; `LockFileEx` on Windows)
//!   taken without blocking and retried until a deadline, on a lock file of the folder
//!   ([`PrivateDir::lock`]) or on the folder itself ([`PrivateDir::lock_folder`], downloads:
//!   nothing is added to a model's folder). Released when the [`Lock`] is dropped or the
//!   process ends, however it ends.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, File, Metadata, OpenOptions};

use super::sys::{self, UnixMode};
use super::{Ambient, Vault, ambient};

/// Longest name a private folder accepts.
pub const MAX_NAME: usize = 100;
/// Most files listed from a private folder at once ([`PrivateDir::names`]).
pub const MAX_FILES: usize = 100_000;
/// Mode of the folders made for capvault's own use.
pub(super) const FOLDER_MODE: u32 = 0o700;
/// Mode of the files made in them.
pub(super) const FILE_MODE: u32 = 0o600;
/// Ancestors checked above a folder before giving up (deeper is refused).
const MAX_DEPTH: usize = 256;
/// Longest pause between two tries of a lock.
const MAX_PAUSE: Duration = Duration::from_millis(100);
/// Where a platform that cannot lock a folder handle ([`PrivateDir::lock_folder`]) locks it.
#[cfg(not(unix))]
const FOLDER_LOCK: &str = ".capvault-download.lock";

/// True for a name a private folder may hold: 1 to [`MAX_NAME`] bytes of ASCII letters,
/// digits, `.`, `-` and `_`, not starting with a dot.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The temporary name `name` is written under before it is renamed into place. One per name:
/// a file left by a crash is removed by the next write of the name, so writes of one name must
/// not overlap (the index cache is one process's; every write in the state folder holds one of
/// its locks).
pub fn temp_name(name: &str) -> String {
    format!("{name}.tmp")
}

/// What a private folder refused, inside the `io::Error` it returns ([`refusal`]).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The name breaks [`valid_name`], or is one the folder reserves.
    #[error("not a plain file name")]
    BadName,
    /// The name is not a regular file (a folder, a FIFO...), or, to append, not this user's.
    #[error("not a regular file of this user")]
    NotAFile,
}

fn refused(why: Refused) -> io::Error {
    let kind = match why {
        Refused::BadName => io::ErrorKind::InvalidInput,
        Refused::NotAFile => io::ErrorKind::InvalidData,
    };
    io::Error::new(kind, why)
}

/// What a private folder refused, when that is why `e` happened.
pub fn refusal(e: &io::Error) -> Option<&Refused> {
    e.get_ref()?.downcast_ref()
}

/// Why a private folder could not be opened. The messages name no host path but
/// [`FolderError::Ancestor`]'s; each folder's own error says which folder it is.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The folder is the vault or lies inside it.
    #[error("the folder is inside the vault; it must be outside")]
    InsideVault,
    /// The path names `.` or `..` (or lies deeper than can be checked).
    #[error("the folder must be an absolute path without `..`")]
    BadPath,
    /// It is another user's, or others may write in it.
    #[error("the folder belongs to another user or others can write to it")]
    NotPrivate,
    /// The filesystem refused.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// An existing folder above it could not be opened (`at`, absolute).
    #[error("{}: {source}", at.display())]
    Ancestor { at: PathBuf, source: io::Error },
}

impl From<FolderError> for io::Error {
    fn from(e: FolderError) -> io::Error {
        match e {
            FolderError::Io(e) | FolderError::Ancestor { source: e, .. } => e,
            other => io::Error::new(io::ErrorKind::PermissionDenied, other),
        }
    }
}

/// Opens the folder at `path` (absolute or relative to the current folder, without `.` or
/// `..`), creating it and the missing folders above it with `mode`, never through a symlink.
/// With `outside` (a vault root's device and inode), the deepest folder that exists is first
/// proven not to be the vault or inside it: nothing is created before. The folder itself is not
/// checked to be private (the index cache and state folders are a sub-folder of it).
pub(super) fn open_folder(
    path: &Path,
    mode: u32,
    outside: Option<(u64, u64)>,
) -> Result<Dir, FolderError> {
    let path = std::path::absolute(path)?;
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(FolderError::BadPath);
    }
    // The deepest ancestor that exists; the rest is created below it, after the check.
    let mut missing = Vec::new();
    let mut at = path.as_path();
    let mut dir = loop {
        match ambient(Ambient::Open(at)) {
            Ok(d) => break d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (Some(name), Some(parent)) = (at.file_name(), at.parent()) else {
                    return Err(e.into());
                };
                missing.push(name.to_owned());
                at = parent;
            }
            Err(source) => {
                return Err(FolderError::Ancestor {
                    at: at.to_owned(),
                    source,
                });
            }
        }
    };
    if let Some(vault) = outside {
        ensure_outside(&dir, vault)?;
    }
    for name in missing.iter().rev() {
        dir = create_sub_dir(&dir, Path::new(name), mode)?;
    }
    Ok(dir)
}

/// The private folder `kind` (`index-1`, `state-1`) under `root`, created `0700` with what is
/// missing above it, and refused when `root` is the vault or inside it (checked before anything
/// is created).
pub(super) fn open_outside(
    root: &Path,
    vault: &Vault,
    kind: &str,
) -> Result<PrivateDir, FolderError> {
    let parent = open_folder(root, FOLDER_MODE, Some(vault.identity()?))?;
    PrivateDir::checked(&parent, kind, FOLDER_MODE, FILE_MODE)
}

/// Fails when `vault` (device, inode) is `dir` or one of its ancestors: walks up by `..`
/// handles, comparing device and inode.
pub(super) fn ensure_outside(dir: &Dir, vault: (u64, u64)) -> Result<(), FolderError> {
    let id = |d: &Dir| -> io::Result<(u64, u64)> { Ok(sys::file_id(&d.dir_metadata()?)) };
    let mut here = id(dir)?;
    let mut parent = ambient(Ambient::Parent(dir))?;
    for _ in 0..MAX_DEPTH {
        if here == vault {
            return Err(FolderError::InsideVault);
        }
        let up = id(&parent)?;
        if up == here {
            return Ok(()); // the filesystem root is its own parent
        }
        here = up;
        parent = ambient(Ambient::Parent(&parent))?;
    }
    Err(FolderError::BadPath)
}

/// Creates folder `name` in `dir` with `mode` unless it exists, then opens it: only a real
/// folder, never a symlink.
fn create_sub_dir(dir: &Dir, name: &Path, mode: u32) -> io::Result<Dir> {
    let mut builder = DirBuilder::new();
    builder.unix_mode(mode);
    match dir.create_dir_with(name, &builder) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    open_sub_dir(dir, name)
}

/// Opens the existing folder `name` in `dir`: only a real folder, never a symlink.
fn open_sub_dir(dir: &Dir, name: &Path) -> io::Result<Dir> {
    if !dir.symlink_metadata(name)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a folder (a symlink?)",
        ));
    }
    dir.open_dir_nofollow(name)
}

/// Opens `name` in `dir` for reading: no symlink followed, no FIFO waited on, a regular file
/// only. Its length comes from `fstat` on the handle. The name is not checked: see
/// [`PrivateDir::open_read`] (and the audit log, whose name the user gave).
pub(super) fn open_regular(dir: &Dir, name: &str) -> io::Result<(File, u64)> {
    let file = dir.open_with(
        name,
        sys::nonblocking(OpenOptions::new().read(true).follow(FollowSymlinks::No)),
    )?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refused(Refused::NotAFile));
    }
    Ok((file, meta.len()))
}

/// The one append-open: `name` in `dir` opened for reading and appending (`O_APPEND`), created
/// with `mode` when missing, never through a symlink nor waiting on a FIFO, and used only when
/// it is a regular file of this user. The name is not checked: see [`PrivateDir::append`] (and
/// the audit log, whose name the user gave).
pub(super) fn append_open(dir: &Dir, name: &str, mode: u32) -> io::Result<File> {
    let file = dir.open_with(
        name,
        sys::nonblocking(
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .follow(FollowSymlinks::No),
        )
        .unix_mode(mode),
    )?;
    let meta = file.metadata()?;
    if !meta.is_file() || !sys::owned_by_me(&meta) {
        return Err(refused(Refused::NotAFile));
    }
    Ok(file)
}

/// Appends `bytes` to `name` in `dir` through [`append_open`], in one `write(2)` (lines of
/// concurrent writers never interleave), and makes them durable. Returns the file's length
/// before.
pub(super) fn append_to(dir: &Dir, name: &str, mode: u32, bytes: &[u8]) -> io::Result<u64> {
    let mut file = append_open(dir, name, mode)?;
    let at = file.metadata()?.len();
    file.write_all(bytes)?;
    file.sync_data()?;
    Ok(at)
}

/// The one lock: takes the exclusive advisory lock of `file` without blocking, and tries again
/// (every 2 ms at first, then less and less often, every 100 ms at most) until `wait` has
/// passed; then fails with [`io::ErrorKind::WouldBlock`].
fn hold(mut file: File, wait: Duration) -> io::Result<Lock> {
    let until = Instant::now().checked_add(wait);
    let mut pause = Duration::from_millis(2);
    loop {
        match sys::try_lock(file) {
            Ok(file) => return Ok(Lock { _file: file }),
            Err((again, sys::LockFailed::Busy)) => {
                let now = Instant::now();
                let left = until.map_or(MAX_PAUSE, |until| until.saturating_duration_since(now));
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "another process holds the lock",
                    ));
                }
                file = again;
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err((_, sys::LockFailed::Io(e))) => return Err(e),
        }
    }
}

/// A lock taken by [`PrivateDir::lock`] or [`PrivateDir::lock_folder`]: held until dropped (or
/// the process ends).
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// What identifies one version of a file: a replacement changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    ino: u64,
    len: u64,
    modified: SystemTime,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            ino: sys::file_id(meta).1,
            len: meta.len(),
            modified: meta
                .modified()
                .map(|t| t.into_std())
                .unwrap_or(SystemTime::UNIX_EPOCH),
        }
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// When it was last modified (the Unix epoch where the system does not say).
    pub fn modified(&self) -> SystemTime {
        self.modified
    }
}

/// One of capvault's own folders outside the vault, open: checked to be this user's and
/// writable by no one else, and every file in it reached by a name [`valid_name`] accepts.
#[derive(Debug)]
pub struct PrivateDir {
    dir: Dir,
    /// The mode its files are created with.
    file_mode: u32,
    /// Names its users may not reach (the owner's own files).
    reserved: &'static [&'static str],
}

impl PrivateDir {
    /// `dir` as a private folder whose files are created with `file_mode`; refused when it is
    /// another user's or others may write to it.
    pub(super) fn new(dir: Dir, file_mode: u32) -> Result<PrivateDir, FolderError> {
        if !sys::private_to_owner(&dir.dir_metadata()?) {
            return Err(FolderError::NotPrivate);
        }
        Ok(PrivateDir {
            dir,
            file_mode,
            reserved: &[],
        })
    }

    /// The folder `name` of `parent`, created with `mode` when missing, as a private folder.
    fn checked(
        parent: &Dir,
        name: &str,
        mode: u32,
        file_mode: u32,
    ) -> Result<PrivateDir, FolderError> {
        if !valid_name(name) {
            return Err(refused(Refused::BadName).into());
        }
        PrivateDir::new(create_sub_dir(parent, Path::new(name), mode)?, file_mode)
    }

    /// The same folder with `names` reserved: what follows may not name them (the index cache
    /// keeps its lock and birth files from the index's reach).
    pub(super) fn reserve(mut self, names: &'static [&'static str]) -> PrivateDir {
        self.reserved = names;
        self
    }

    /// The folder's handle, for the sandbox's rules (Landlock, Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// True for a name this folder accepts: [`valid_name`], and not reserved.
    pub fn allows(&self, name: &str) -> bool {
        valid_name(name) && !self.reserved.contains(&name)
    }

    fn check(&self, name: &str) -> io::Result<()> {
        if self.allows(name) {
            Ok(())
        } else {
            Err(refused(Refused::BadName))
        }
    }

    /// The sub-folder `name`, created `0700` when missing, private like this one.
    pub(super) fn sub_dir(&self, name: &str) -> Result<PrivateDir, FolderError> {
        self.check(name)?;
        PrivateDir::checked(&self.dir, name, FOLDER_MODE, self.file_mode)
    }

    /// The existing sub-folder `name` (nothing is created), private like this one.
    pub(super) fn open_sub_dir(&self, name: &str) -> Result<PrivateDir, FolderError> {
        self.check(name)?;
        PrivateDir::new(open_sub_dir(&self.dir, Path::new(name))?, self.file_mode)
    }

    /// The names of its sub-folders (at most `max`; symlinks and names it refuses left out).
    pub(super) fn folder_names(&self, max: usize) -> io::Result<Vec<String>> {
        self.list(max, true)
    }

    /// The names of its regular files (at most [`MAX_FILES`]; symlinks, names it refuses and
    /// reserved names left out).
    pub fn names(&self) -> io::Result<Vec<String>> {
        self.list(MAX_FILES, false)
    }

    /// Its regular files (at most `max`) with their length and time.
    pub(super) fn files(&self, max: usize) -> io::Result<Vec<(String, Stamp)>> {
        Ok(self
            .list(max, false)?
            .into_iter()
            .filter_map(|name| self.stamp(&name).map(|s| (name, s)))
            .collect())
    }

    fn list(&self, max: usize, folders: bool) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in self.dir.entries()? {
            if out.len() >= max {
                break;
            }
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let kind = entry.file_type()?;
            if self.allows(&name)
                && if folders {
                    kind.is_dir()
                } else {
                    kind.is_file()
                }
            {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// What version of `name` is there now (`None` when it is missing or not a regular file).
    pub fn stamp(&self, name: &str) -> Option<Stamp> {
        self.check(name).ok()?;
        let meta = self.dir.symlink_metadata(name).ok()?;
        meta.is_file().then(|| Stamp::of(&meta))
    }

    /// `name` open for reading, and its length ([`open_regular`]).
    pub(super) fn open_read(&self, name: &str) -> io::Result<(File, u64)> {
        self.check(name)?;
        open_regular(&self.dir, name)
    }

    /// The bytes of `name`, `None` when it does not exist; a file larger than `max` bytes (or
    /// that grows past it while read) is an error.
    pub fn read(&self, name: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
        let (mut file, len) = match self.open_read(name) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let too_large = |how| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} {how} {max} bytes"),
            )
        };
        if len > max {
            return Err(too_large("is larger than"));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        Read::take(&mut file, max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(too_large("grew past"));
        }
        Ok(Some(bytes))
    }

    /// `name` open for reads at offsets (the index serves its cached positions files from the
    /// disk this way). The handle stays valid if the file is removed from the folder meanwhile.
    pub fn open_file(&self, name: &str) -> io::Result<ReadFile> {
        let (file, len) = self.open_read(name)?;
        Ok(ReadFile { file, len })
    }

    /// Creates file `name`, which must not exist, to be written in place: the index's segment
    /// files as tantivy writes them, which no manifest names until they are complete and
    /// synced ([`NewFile::finish`], [`ReadFile::sync`]). Never follows a symlink.
    pub fn create(&self, name: &str) -> io::Result<NewFile> {
        self.check(name)?;
        let file = self.dir.open_with(
            name,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .follow(FollowSymlinks::No)
                .unix_mode(self.file_mode),
        )?;
        Ok(NewFile { file, len: 0 })
    }

    /// Creates `name` empty, for reads and writes at offsets while this process runs: whatever
    /// had the name (a file, or a symlink planted there) is removed first, and the new file is
    /// created with no symlink followed.
    pub fn scratch(&self, name: &str) -> io::Result<ScratchFile> {
        self.remove(name)?;
        Ok(ScratchFile {
            file: self.create(name)?.file,
        })
    }

    /// Replaces `name` whole, atomically: `bytes` written to [`temp_name`], synced, renamed
    /// over it (the folder is not synced: see [`PrivateDir::replace`]).
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_with(name, |file| file.write_all(bytes))
    }

    /// Replaces `name` whole, atomically, its bytes written by `fill` as they are made (so a
    /// large file is never held whole in memory): to [`temp_name`], synced, then renamed over
    /// `name`. If `fill` fails, the temporary file is removed and `name` is left as it was.
    pub fn write_with(
        &self,
        name: &str,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.check(name)?;
        let tmp = temp_name(name);
        let _ = self.dir.remove_file(&tmp);
        let mut file = self.dir.open_with(
            &tmp,
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .follow(FollowSymlinks::No)
                .unix_mode(self.file_mode),
        )?;
        let written = fill(&mut file).and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written {
            let _ = self.dir.remove_file(&tmp);
            return Err(e);
        }
        self.dir.rename(&tmp, &self.dir, name)
    }

    /// [`PrivateDir::write`], then the folder synced: the new file survives a crash.
    pub fn replace(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write(name, bytes)?;
        self.sync()
    }

    /// Appends `bytes` to `name` ([`append_open`]: created with the folder's file mode when
    /// missing, never through a symlink) in one write, and makes them durable. Returns the
    /// offset they were written at (the file's length before). The caller serialises appends
    /// to one file when it uses that offset.
    pub fn append(&self, name: &str, bytes: &[u8]) -> io::Result<u64> {
        self.check(name)?;
        append_to(&self.dir, name, self.file_mode, bytes)
    }

    /// `name` open for reading and appending ([`append_open`]).
    pub(super) fn open_append(&self, name: &str) -> io::Result<File> {
        self.check(name)?;
        append_open(&self.dir, name, self.file_mode)
    }

    /// Renames `from` over `to` (both names in the folder).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.dir.rename(from, &self.dir, to)
    }

    /// Removes a file (a missing file is not an error).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        self.check(name)?;
        match self.dir.remove_file(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Makes the renames and removals done so far durable.
    pub fn sync(&self) -> io::Result<()> {
        sys::sync_folder(&self.dir)
    }

    /// Takes the lock file `name` (created with the folder's file mode when missing, never
    /// through a symlink, a regular file only), waiting at most `wait` for its holder in this
    /// process or another ([`io::ErrorKind::WouldBlock`] after that).
    pub fn lock(&self, name: &str, wait: Duration) -> io::Result<Lock> {
        self.check(name)?;
        let file = self.dir.open_with(
            name,
            sys::nonblocking(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .follow(FollowSymlinks::No),
            )
            .unix_mode(self.file_mode),
        )?;
        if !file.metadata()?.is_file() {
            return Err(refused(Refused::NotAFile));
        }
        hold(file, wait)
    }

    /// Locks the folder itself, so that nothing is added to it (a model's folder), waiting at
    /// most `wait` as [`PrivateDir::lock`] does. Windows cannot lock a folder handle: a hidden
    /// lock file there.
    pub(super) fn lock_folder(&self, wait: Duration) -> io::Result<Lock> {
        #[cfg(unix)]
        let file = self.dir.open_with(".", OpenOptions::new().read(true))?;
        #[cfg(not(unix))]
        let file = self.dir.open_with(
            FOLDER_LOCK,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .follow(FollowSymlinks::No)
                .unix_mode(self.file_mode),
        )?;
        hold(file, wait)
    }
}

/// A file of a private folder open for reading at offsets ([`PrivateDir::open_file`]).
#[derive(Debug)]
pub struct ReadFile {
    file: File,
    len: u64,
}

impl ReadFile {
    /// Its length when opened (the index cache never rewrites a file in place).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `buf` from `offset`; a file cut short since it was opened is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        sys::read_exact_at(&self.file, buf, offset)
    }

    /// Reads the file front to back, its length when opened at most (for a file too large
    /// to read whole).
    pub fn reader(&self) -> impl Read + '_ {
        Read::take(&self.file, self.len)
    }

    /// Makes the file's content durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

/// A scratch file open for reads and writes at offsets (see [`PrivateDir::scratch`]).
#[derive(Debug)]
pub struct ScratchFile {
    file: File,
}

impl ScratchFile {
    /// Writes all of `buf` at `offset` (the file grows as needed).
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        sys::write_all_at(&self.file, buf, offset)
    }

    /// Fills `buf` from `offset`; a file shorter than that is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        sys::read_exact_at(&self.file, buf, offset)
    }
}

/// A new file being written (see [`PrivateDir::create`]).
#[derive(Debug)]
pub struct NewFile {
    file: File,
    len: u64,
}

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl NewFile {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before anything is written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives up on the file (the folder refused a write): returns the bytes written so far,
    /// read back. The caller removes the file.
    pub fn abandon(self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large"))?;
        let mut bytes = vec![0; len];
        sys::read_exact_at(&self.file, &mut bytes, 0)?;
        Ok(bytes)
    }

    /// The file, complete, open for reads at offsets (not yet synced).
    pub fn finish(mut self) -> io::Result<ReadFile> {
        self.file.flush()?;
        Ok(ReadFile {
            file: self.file,
            len: self.len,
        })
    }
}

#[cfg(test)]
mod tests;
