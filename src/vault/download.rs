//! The folder a model is downloaded into (`capvault model fetch`, `serve --semantic`): the file
//! side of the download, for [`crate::semantic::fetch`], which does the HTTP and the hashing.
//!
//! The folder is a [`PrivateDir`], opened (created when missing) through [`private::open_folder`]
//! once; every later step acts on a plain name in that handle, never following a symlink: a
//! file is read only when it is a regular file, a download is appended to `<name>.part` and
//! renamed over `<name>` after a sync of the file, then the folder is synced. A folder another
//! user owns, or that others may write to, is refused (its files could change between the check
//! of their digest and their load). Its files are created `0644` (a model others may read), and
//! the lock is taken on the folder itself, so nothing but the model's files is ever in it.
//! Errors may name the host path: only the user who typed it sees them.

use std::io::{self, Read, Seek, Write};
use std::path::Path;
use std::time::Duration;

use super::private::{self, FolderError, Lock, PrivateDir, Refused};

/// Mode of the folders a download creates under the user's cache folder.
pub const PRIVATE_FOLDER: u32 = 0o700;
/// Mode of the folders a download creates elsewhere (`--out`).
pub const SHARED_FOLDER: u32 = 0o755;
/// Mode of the files a download creates.
const FILE_MODE: u32 = 0o644;

/// The suffix of a file being downloaded.
pub const PART_SUFFIX: &str = ".part";

/// Why a model folder or one of its files could not be had: which (the path as the user gave
/// it, then the file's name), what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The operating system refused (or a name is not a plain file name).
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
    /// Opening a file without following a symlink failed.
    #[error("{path}: {source} (symlinks are not followed here)")]
    NoFollow { path: String, source: io::Error },
    /// The folder's path has `..` or `.` in it.
    #[error("{path}: give a folder path without `..`")]
    DotDot { path: String },
    /// Another user owns the folder, or others may write to it.
    #[error("{path}: the folder belongs to another user or others may write to it")]
    NotPrivate { path: String },
    /// Another process holds the folder's lock past the wait.
    #[error("{path}: another capvault is downloading into this folder")]
    Busy { path: String },
    /// Not a regular file.
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
}

fn io_err(path: String) -> impl Fn(io::Error) -> DownloadError {
    move |source| DownloadError::Io {
        path: path.clone(),
        source,
    }
}

/// Why a file of the folder could not be opened: a name the folder refuses, not a regular
/// file, or the open itself (a symlink, most likely).
fn open_err(path: String, source: io::Error) -> DownloadError {
    match private::refusal(&source) {
        Some(Refused::NotAFile) => DownloadError::NotAFile { path },
        Some(Refused::BadName) => DownloadError::Io { path, source },
        None => DownloadError::NoFollow { path, source },
    }
}

/// A model folder, open.
#[derive(Debug)]
pub struct DownloadDir {
    dir: PrivateDir,
    shown: String,
}

/// A file of the folder, open: a finished file for reading, or a `.part` for reading (from its
/// start) and appending.
#[derive(Debug)]
pub struct DownloadFile {
    file: cap_std::fs::File,
    shown: String,
}

impl DownloadDir {
    /// Opens the folder at `path` (absolute or relative to the current folder, without `..`),
    /// creating it and the missing folders above it with `mode`: [`super::host::Host::download_dir`].
    pub(super) fn create(path: &Path, mode: u32) -> Result<DownloadDir, DownloadError> {
        let shown = path.display().to_string();
        let dir = private::open_folder(path, mode, None)
            .and_then(|dir| PrivateDir::new(dir, FILE_MODE))
            .map_err(|e| match e {
                FolderError::BadPath => DownloadError::DotDot {
                    path: shown.clone(),
                },
                FolderError::NotPrivate => DownloadError::NotPrivate {
                    path: shown.clone(),
                },
                FolderError::Ancestor { at, source } => io_err(at.display().to_string())(source),
                other => io_err(shown.clone())(other.into()),
            })?;
        Ok(DownloadDir { dir, shown })
    }

    /// The folder as given, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// `name` in the folder, for messages.
    fn shown_file(&self, name: &str) -> String {
        format!("{}/{name}", self.shown.trim_end_matches('/'))
    }

    /// Waits (at most `wait`) until no other process downloads into this folder, and keeps it
    /// so until the lock is dropped (a lock on the folder itself).
    pub fn lock(&self, wait: Duration) -> Result<Lock, DownloadError> {
        self.dir.lock_folder(wait).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock => DownloadError::Busy {
                path: self.shown.clone(),
            },
            _ => io_err(self.shown.clone())(e),
        })
    }

    /// The regular file `name`, open for reading; `None` when there is none. A symlink or
    /// anything else that is not a regular file is an error.
    pub fn open_file(&self, name: &str) -> Result<Option<DownloadFile>, DownloadError> {
        let shown = self.shown_file(name);
        match self.dir.open_read(name) {
            Ok((file, _)) => Ok(Some(DownloadFile { file, shown })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(open_err(shown, e)),
        }
    }

    /// `<name>.part`, open for reading from its start and appending (created, `0644`, when
    /// missing; never through a symlink).
    pub fn open_part(&self, name: &str) -> Result<DownloadFile, DownloadError> {
        let part = format!("{name}{PART_SUFFIX}");
        let shown = self.shown_file(&part);
        match self.dir.open_append(&part) {
            Ok(file) => Ok(DownloadFile { file, shown }),
            Err(e) => Err(open_err(shown, e)),
        }
    }

    /// Makes `<name>.part` the file `name`: syncs it, renames it over `name` (atomically: a
    /// reader sees the old file or the new one), then syncs the folder.
    pub fn commit_part(&self, name: &str, part: DownloadFile) -> Result<(), DownloadError> {
        let err = &io_err(self.shown_file(name));
        part.file.sync_all().map_err(err)?;
        drop(part);
        self.dir
            .rename(&format!("{name}{PART_SUFFIX}"), name)
            .map_err(err)?;
        self.dir.sync().map_err(err)
    }

    /// Removes `<name>.part` (nothing to do when there is none).
    pub fn remove_part(&self, name: &str) -> Result<(), DownloadError> {
        let part = format!("{name}{PART_SUFFIX}");
        let err = &io_err(self.shown_file(&part));
        self.dir.remove(&part).map_err(err)?;
        self.dir.sync().map_err(err)
    }

    /// Removes `<name>.part` if it is empty (a download that failed before its first byte).
    pub fn remove_empty_part(&self, name: &str) -> Result<(), DownloadError> {
        let part = format!("{name}{PART_SUFFIX}");
        if !self.dir.allows(&part) {
            return Err(io_err(self.shown_file(&part))(io::Error::new(
                io::ErrorKind::InvalidInput,
                Refused::BadName,
            )));
        }
        match self.dir.stamp(&part) {
            Some(s) if s.is_empty() => self.remove_part(name),
            _ => Ok(()),
        }
    }
}

impl DownloadFile {
    /// The file as named, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Its length now.
    pub fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// True when it is empty.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Empties it (a download that starts over).
    pub fn truncate(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()
    }

    /// Flushes what was written to the disk.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

impl Read for DownloadFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// Writes append (a `.part`); a finished file was opened read-only and refuses them.
impl Write for DownloadFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // test fixtures
    use super::*;

    #[cfg(unix)]
    #[test]
    fn parts_append_commit_and_refuse_symlinks_and_odd_names() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a/b");
        let dir = DownloadDir::create(&path, PRIVATE_FOLDER).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(dir.open_file("x.json").unwrap().is_none());

        let mut part = dir.open_part("x.json").unwrap();
        part.write_all(b"hello ").unwrap();
        drop(part);
        let mut part = dir.open_part("x.json").unwrap();
        assert_eq!(part.len().unwrap(), 6);
        let mut seen = Vec::new();
        part.read_to_end(&mut seen).unwrap();
        assert_eq!(seen, b"hello ");
        part.write_all(b"world").unwrap();
        dir.commit_part("x.json", part).unwrap();
        assert_eq!(std::fs::read(path.join("x.json")).unwrap(), b"hello world");
        assert!(!path.join("x.json.part").exists());

        let mut part = dir.open_part("y").unwrap();
        part.write_all(b"abc").unwrap();
        part.truncate().unwrap();
        assert_eq!(part.len().unwrap(), 0);
        part.write_all(b"abc").unwrap();
        dir.remove_empty_part("y").unwrap();
        assert!(path.join("y.part").exists());
        part.truncate().unwrap();
        dir.remove_empty_part("y").unwrap();
        assert!(!path.join("y.part").exists());

        std::os::unix::fs::symlink("/etc/passwd", path.join("z")).unwrap();
        assert!(dir.open_file("z").is_err());
        std::os::unix::fs::symlink("/tmp/elsewhere", path.join("z.part")).unwrap();
        assert!(dir.open_part("z").is_err());
        assert!(!Path::new("/tmp/elsewhere").exists());
        for bad in ["", ".hidden", "a/b", "../x"] {
            assert!(dir.open_file(bad).is_err(), "{bad}");
            assert!(dir.open_part(bad).is_err(), "{bad}");
        }
        assert!(DownloadDir::create(&tmp.path().join("a/../c"), PRIVATE_FOLDER).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_others_may_write_to_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(DownloadDir::create(&path, SHARED_FOLDER).is_err());
    }

    #[test]
    fn one_process_downloads_into_a_folder_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DownloadDir::create(tmp.path(), SHARED_FOLDER).unwrap();
        let held = dir.lock(Duration::ZERO).unwrap();
        // flock is per open file description: a second open conflicts as another process would.
        let other = DownloadDir::create(tmp.path(), SHARED_FOLDER).unwrap();
        assert!(other.lock(Duration::from_millis(10)).is_err());
        drop(held);
        assert!(other.lock(Duration::ZERO).is_ok());
    }
}
