//! The folder a model is downloaded into (`capvault model fetch`, `serve --semantic`): the file
//! side of the download, for [`crate::semantic::fetch`], which does the HTTP and the hashing.
//!
//! The folder is opened (created when missing) through [`ambient`] once; every later step acts
//! on a plain name in that handle, never following a symlink at the last step: a file is read
//! only when it is a regular file, a download is appended to `<name>.part` and renamed over
//! `<name>` after a sync of the file, then the folder is synced. A folder another user owns, or
//! that others may write to, is refused (its files could change between the check of their
//! digest and their load). Errors may name the host path: only the user who typed it sees them.

use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path};
use std::time::{Duration, Instant};

use super::sys::UnixMode;
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, OpenOptions};

use super::{Ambient, ambient};

/// Mode of the folders a download creates under the user's cache folder.
pub const PRIVATE_FOLDER: u32 = 0o700;
/// Mode of the folders a download creates elsewhere (`--out`).
pub const SHARED_FOLDER: u32 = 0o755;

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

/// A model folder, open.
#[derive(Debug)]
pub struct DownloadDir {
    dir: Dir,
    shown: String,
}

/// Held while one process downloads into a folder (an `flock` on the folder itself).
#[derive(Debug)]
pub struct DownloadLock {
    _folder: cap_std::fs::File,
}

/// A file of the folder, open: a finished file for reading, or a `.part` for reading (from its
/// start) and appending.
#[derive(Debug)]
pub struct DownloadFile {
    file: cap_std::fs::File,
    shown: String,
}

/// A name the folder accepts: one plain component, no leading dot, no separator.
fn check_name(name: &str) -> io::Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 200
        && !name.contains(['/', '\\', '\0']);
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a plain file name"),
        ))
    }
}

impl DownloadDir {
    /// Opens the folder at `path` (absolute or relative to the current folder, without `..`),
    /// creating it and the missing folders above it with `mode`: [`super::host::Host::download_dir`].
    pub(super) fn create(path: &Path, mode: u32) -> Result<DownloadDir, DownloadError> {
        let shown = path.display().to_string();
        let err = &io_err(shown.clone());
        let path = std::path::absolute(path).map_err(err)?;
        if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return Err(DownloadError::DotDot { path: shown });
        }
        let mut missing = Vec::new();
        let mut at = path.as_path();
        let mut dir = loop {
            match ambient(Ambient::Open(at)) {
                Ok(d) => break d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let (Some(name), Some(parent)) = (at.file_name(), at.parent()) else {
                        return Err(err(e));
                    };
                    missing.push(name.to_owned());
                    at = parent;
                }
                Err(e) => return Err(io_err(at.display().to_string())(e)),
            }
        };
        for name in missing.iter().rev() {
            let mut b = DirBuilder::new();
            b.unix_mode(mode);
            match dir.create_dir_with(name, &b) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(err(e)),
                _ => {}
            }
            dir = dir.open_dir_nofollow(name).map_err(err)?;
        }
        let meta = dir.dir_metadata().map_err(err)?;
        if !super::sys::private_to_owner(&meta) {
            return Err(DownloadError::NotPrivate { path: shown });
        }
        Ok(DownloadDir { dir, shown })
    }

    /// The folder as given, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Waits (at most `wait`) until no other process downloads into this folder, and keeps it
    /// so until the lock is dropped.
    pub fn lock(&self, wait: Duration) -> Result<DownloadLock, DownloadError> {
        use super::sys::{LockFailed, try_lock};
        // The folder itself on Unix; Windows cannot open a folder as a file: a lock file there.
        #[cfg(unix)]
        let opened = self.dir.open_with(".", OpenOptions::new().read(true));
        #[cfg(not(unix))]
        let opened = self.dir.open_with(
            ".capvault-download.lock",
            OpenOptions::new().read(true).write(true).create(true),
        );
        let mut folder = opened.map_err(io_err(self.shown.clone()))?;
        let until = Instant::now() + wait;
        loop {
            match try_lock(folder) {
                Ok(folder) => return Ok(DownloadLock { _folder: folder }),
                Err((again, LockFailed::Busy)) if Instant::now() < until => {
                    folder = again;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err((_, LockFailed::Busy)) => {
                    return Err(DownloadError::Busy {
                        path: self.shown.clone(),
                    });
                }
                Err((_, LockFailed::Io(e))) => return Err(io_err(self.shown.clone())(e)),
            }
        }
    }

    /// The regular file `name`, open for reading; `None` when there is none. A symlink or
    /// anything else that is not a regular file is an error.
    pub fn open_file(&self, name: &str) -> Result<Option<DownloadFile>, DownloadError> {
        let shown = format!("{}/{name}", self.shown.trim_end_matches('/'));
        check_name(name).map_err(io_err(shown.clone()))?;
        let opened = self.dir.open_with(
            name,
            super::sys::nonblocking(OpenOptions::new().read(true).follow(FollowSymlinks::No)),
        );
        let file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(DownloadError::NoFollow {
                    path: shown,
                    source,
                });
            }
        };
        let file = DownloadFile { file, shown };
        file.check_regular()?;
        Ok(Some(file))
    }

    /// `<name>.part`, open for reading from its start and appending (created, `0644`, when
    /// missing; never through a symlink).
    pub fn open_part(&self, name: &str) -> Result<DownloadFile, DownloadError> {
        let part = format!("{name}{PART_SUFFIX}");
        let shown = format!("{}/{part}", self.shown.trim_end_matches('/'));
        check_name(name).map_err(io_err(shown.clone()))?;
        let file = self
            .dir
            .open_with(
                &part,
                super::sys::nonblocking(
                    OpenOptions::new()
                        .read(true)
                        .append(true)
                        .create(true)
                        .follow(FollowSymlinks::No),
                )
                .unix_mode(0o644),
            )
            .map_err(|source| DownloadError::NoFollow {
                path: shown.clone(),
                source,
            })?;
        let file = DownloadFile { file, shown };
        file.check_regular()?;
        Ok(file)
    }

    /// Makes `<name>.part` the file `name`: syncs it, renames it over `name` (atomically: a
    /// reader sees the old file or the new one), then syncs the folder.
    pub fn commit_part(&self, name: &str, part: DownloadFile) -> Result<(), DownloadError> {
        let err = &io_err(format!("{}/{name}", self.shown.trim_end_matches('/')));
        check_name(name).map_err(err)?;
        part.file.sync_all().map_err(err)?;
        drop(part);
        self.dir
            .rename(format!("{name}{PART_SUFFIX}"), &self.dir, name)
            .map_err(err)?;
        self.sync().map_err(err)
    }

    /// Removes `<name>.part` (nothing to do when there is none).
    pub fn remove_part(&self, name: &str) -> Result<(), DownloadError> {
        let err = &io_err(format!("{}/{name}{PART_SUFFIX}", self.shown));
        check_name(name).map_err(err)?;
        match self.dir.remove_file(format!("{name}{PART_SUFFIX}")) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(err(e)),
            _ => self.sync().map_err(err),
        }
    }

    /// Removes `<name>.part` if it is empty (a download that failed before its first byte).
    pub fn remove_empty_part(&self, name: &str) -> Result<(), DownloadError> {
        check_name(name).map_err(io_err(format!("{}/{name}", self.shown)))?;
        let part = format!("{name}{PART_SUFFIX}");
        match self.dir.symlink_metadata(&part) {
            Ok(m) if m.is_file() && m.len() == 0 => self.remove_part(name),
            _ => Ok(()),
        }
    }

    fn sync(&self) -> io::Result<()> {
        super::sys::sync_folder(&self.dir)
    }
}

impl DownloadFile {
    fn check_regular(&self) -> Result<(), DownloadError> {
        let meta = self.file.metadata().map_err(io_err(self.shown.clone()))?;
        if meta.is_file() {
            Ok(())
        } else {
            Err(DownloadError::NotAFile {
                path: self.shown.clone(),
            })
        }
    }

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
