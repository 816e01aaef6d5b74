//! Linux and macOS: the calls cap-std has no portable form of, through rustix.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, File};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// Renames `src/from` to `dst/to` unless `to` exists (then `AlreadyExists`, or
/// `DirectoryNotEmpty` for a folder), in one call: `renameat2(RENAME_NOREPLACE)` on Linux,
/// `renameatx_np(RENAME_EXCL)` on macOS. Where the filesystem (or an old macOS) lacks it, a file
/// is hard-linked then unlinked, which fails the same way when the target exists; a folder is
/// refused (`InvalidInput`).
pub(crate) fn rename_no_replace(
    src: &Dir,
    from: &str,
    dst: &Dir,
    to: &str,
    is_dir: bool,
) -> io::Result<()> {
    match rustix::fs::renameat_with(src, from, dst, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP)
            if !is_dir && src.symlink_metadata(from).is_ok_and(|m| m.is_file()) =>
        {
            rustix::fs::linkat(src, from, dst, to, AtFlags::empty())?;
            src.remove_file(from)
        }
        Err(e) => Err(e.into()),
    }
}

/// Flushes `folder`'s entries to disk. Folder handles are `O_PATH` on Linux (they only name
/// the folder), which `fsync` refuses: the folder itself (`.`, never a path) is opened for
/// reading for it.
pub(crate) fn sync_folder(folder: &Dir) -> io::Result<()> {
    let fd = rustix::fs::openat(
        folder,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fsync(&fd)?;
    Ok(())
}

/// Flushes `file`'s bytes to the disk. On macOS `fsync` stops at the drive's own cache:
/// `F_FULLFSYNC` goes through it (where the filesystem has it; else `fsync`).
pub(crate) fn sync_file(file: &File) -> io::Result<()> {
    #[cfg(target_vendor = "apple")]
    if rustix::fs::fcntl_fullfsync(file).is_ok() {
        return Ok(());
    }
    file.sync_all()
}

/// Sets `file`'s permission bits to `mode` exactly (what the umask took off at creation too).
pub(crate) fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    rustix::fs::fchmod(file, Mode::from_raw_mode(mode as _))?;
    Ok(())
}

/// The target of the symlink `name` in `dir`, as written (absolute or not: the resolver
/// judges it).
pub(crate) fn read_link(dir: &Dir, name: &str) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(
        target.into_bytes(),
    )))
}

/// `ELOOP` (a no-follow open met a symlink) or `ENOTDIR` (a no-follow folder open met a
/// symlink or a file): the entry changed between the resolver's look and its open.
pub(crate) fn raced_into_symlink(e: &io::Error) -> bool {
    let raw = e.raw_os_error();
    raw == Some(Errno::LOOP.raw_os_error()) || raw == Some(Errno::NOTDIR.raw_os_error())
}

/// When the folder `root` was created, as `secs.nanos`, where the filesystem records it
/// (`statx` on Linux; `stat`'s birth time on macOS).
pub(crate) fn birth_time(root: &Dir) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{StatxFlags, statx};
        let st = statx(root, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME).ok()?;
        (st.stx_mask & StatxFlags::BTIME.bits() != 0)
            .then(|| format!("{}.{:09}", st.stx_btime.tv_sec, st.stx_btime.tv_nsec))
    }
    #[cfg(not(target_os = "linux"))]
    {
        super::created(root)
    }
}

/// The path the file watcher watches for the vault folder `root` (opened at `host_path`).
/// Linux: `/proc/self/fd/<root>/.`, the handle's own folder whatever was renamed or swapped at
/// the host path since (the trailing `/.` makes it a folder to the watcher's walk). macOS: the
/// handle's current path (`F_GETPATH`), checked to still be the handle's folder.
pub(crate) fn watch_root(root: &Dir, host_path: &Path) -> io::Result<PathBuf> {
    let _ = host_path;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        Ok(PathBuf::from(format!(
            "/proc/self/fd/{}/.",
            root.as_raw_fd()
        )))
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::unix::ffi::OsStringExt;
        let path = rustix::fs::getpath(root)?;
        let path = PathBuf::from(std::ffi::OsString::from_vec(path.into_bytes()));
        super::checked_watch_path(root, path)
    }
}
