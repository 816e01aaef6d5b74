//! The portable implementation: cap-std and cap-fs-ext calls only. Windows runs it; Linux runs
//! it with the `portable-fs` feature, so that CI proves it with the attack table, the race
//! tests and the write tests. Where it guarantees less than the Unix one, it says so here and
//! in SECURITY.md ("Platforms").

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, File};

/// Renames `src/from` to `dst/to` unless `to` exists (then `AlreadyExists`). A file: a hard
/// link then an unlink, which the system refuses atomically when `to` exists. A folder (or a
/// file on a filesystem without hard links, FAT or exFAT): a check, then the rename. Between
/// the two, a local program could create `to`; on Windows the rename then fails (a folder is
/// never replaced, and a file only where there are no hard links); on Unix an empty folder
/// created there in that instant would be replaced.
pub(crate) fn rename_no_replace(
    src: &Dir,
    from: &str,
    dst: &Dir,
    to: &str,
    is_dir: bool,
) -> io::Result<()> {
    if !is_dir {
        match src.hard_link(from, dst, to) {
            Ok(()) => return src.remove_file(from),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
            // No hard links here: the check and rename below.
            Err(_) => {}
        }
    }
    match dst.symlink_metadata(to) {
        Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => src.rename(from, dst, to),
        Err(e) => Err(e),
    }
}

/// Flushes `folder`'s entries to disk: the folder opened for reading (`.`) and synced. Windows
/// cannot open a folder as a file; NTFS journals its entries, and this does nothing there.
pub(crate) fn sync_folder(folder: &Dir) -> io::Result<()> {
    match folder.open(".") {
        Ok(f) => f.sync_all(),
        Err(_) if cfg!(windows) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Flushes `file`'s bytes to disk (`fsync`, `FlushFileBuffers`).
pub(crate) fn sync_file(file: &File) -> io::Result<()> {
    file.sync_all()
}

/// Sets `file`'s permission bits to `mode` (Unix); Windows has none to set.
pub(crate) fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        file.set_permissions(cap_std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, mode);
        Ok(())
    }
}

/// The target of the symlink `name` in `dir`, as written (cap-std's `read_link_contents`,
/// which leaves the judging to the resolver).
pub(crate) fn read_link(dir: &Dir, name: &str) -> io::Result<PathBuf> {
    dir.read_link_contents(name)
}

/// The error of a no-follow open that met a symlink or a file where the resolver saw a
/// folder: the entry changed in between.
pub(crate) fn raced_into_symlink(e: &io::Error) -> bool {
    #[cfg(unix)]
    if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
        return true;
    }
    e.kind() == io::ErrorKind::NotADirectory
}

/// When the folder `root` was created, where the filesystem records it (cap-std's `created`).
pub(crate) fn birth_time(root: &Dir) -> Option<String> {
    super::created(root)
}

/// The path the file watcher watches: the path the vault was opened at, checked to still be
/// the handle's folder (a folder swapped in there since is refused, and the watcher not
/// started: the periodic reconcile still finds every change).
pub(crate) fn watch_root(root: &Dir, host_path: &Path) -> io::Result<PathBuf> {
    super::checked_watch_path(root, host_path.to_path_buf())
}
