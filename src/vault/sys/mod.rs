//! What the capability layer asks of the operating system beyond cap-std's portable calls, one
//! implementation per platform behind one interface. Every rule (the no-follow resolver, hidden
//! names, exclusions, version checks) is above this module and the same everywhere; only these
//! calls differ:
//!
//! - [`rename_no_replace`]: a rename that fails when the target exists, atomically where the
//!   system has it (`renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on macOS;
//!   elsewhere a hard link then an unlink for a file, and a check then a rename for a folder).
//! - [`sync_file`] and [`sync_folder`]: durability (`F_FULLFSYNC` on macOS, whose `fsync` does
//!   not reach the disk's own cache).
//! - [`set_mode`], [`process_alive`], [`read_link`], [`raced_into_symlink`], [`birth_time`].
//! - [`watch_root`]: the path the file watcher watches for a vault handle (`/proc/self/fd/N` on
//!   Linux, so no host path is used; the handle's own path from `F_GETPATH` on macOS; elsewhere
//!   the path the vault was opened at), re-checked to be the handle's folder.
//!
//! `unix.rs` serves Linux and macOS. `portable.rs` uses cap-std and cap-fs-ext only: it is what
//! Windows runs, and the `portable-fs` feature makes Linux run it too, so the attack table, the
//! race tests and the write tests prove on every CI run the logic other platforms rely on.
//! What differs in what each guarantees is in SECURITY.md ("Platforms").
//!
//! Common to every implementation: [`nonblocking`] (no FIFO or terminal can stall an open on
//! Unix), [`private_to_owner`] (Unix modes; Windows relies on the profile folder's ACLs) and
//! [`try_lock`] (the standard library's advisory lock: `flock` on Unix, `LockFileEx` on
//! Windows).

use std::io;
use std::path::PathBuf;

use cap_std::fs::{Dir, File, Metadata, OpenOptions};

#[cfg(all(unix, not(feature = "portable-fs")))]
mod unix;
#[cfg(all(unix, not(feature = "portable-fs")))]
pub(crate) use unix::*;

#[cfg(any(not(unix), feature = "portable-fs"))]
mod portable;
#[cfg(any(not(unix), feature = "portable-fs"))]
pub(crate) use portable::*;

/// Opens without blocking on a FIFO and without taking a terminal as the controlling one
/// (Unix's `O_NONBLOCK | O_NOCTTY`); nothing to do elsewhere.
pub(crate) fn nonblocking(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
    }
    #[cfg(not(unix))]
    {
        options
    }
}

/// True when `meta` (a file or folder of capvault's own) belongs to this user and no one else
/// may write it (Unix: owner is the effective user, no group or other write bit). Windows has no
/// mode bits: the per-user profile folders' ACLs keep them private, and this is always true.
pub(crate) fn private_to_owner(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        meta.uid() == rustix::process::geteuid().as_raw() && meta.mode() & 0o022 == 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// True when `meta` belongs to this user (Unix); always true on Windows (see
/// [`private_to_owner`]).
pub(crate) fn owned_by_me(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        meta.uid() == rustix::process::geteuid().as_raw()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// Why [`try_lock`] did not lock.
#[derive(Debug)]
pub(crate) enum LockFailed {
    /// Another holder has it.
    Busy,
    /// The lock call failed.
    Io(io::Error),
}

/// Takes the exclusive advisory lock of `file` without waiting (released when the file is
/// closed, however the process ends). Gives the file back either way.
pub(crate) fn try_lock(file: File) -> Result<File, (File, LockFailed)> {
    use std::fs::TryLockError;
    let file = file.into_std();
    match file.try_lock() {
        Ok(()) => Ok(File::from_std(file)),
        Err(TryLockError::WouldBlock) => Err((File::from_std(file), LockFailed::Busy)),
        Err(TryLockError::Error(e)) => Err((File::from_std(file), LockFailed::Io(e))),
    }
}

/// The device and file number of `meta`: its inode on Unix; on Windows the volume's serial
/// number and the file index (0 where the metadata came without them, as a folder listing's).
pub(crate) fn file_id(meta: &Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(windows)]
    {
        use cap_primitives::fs::_WindowsByHandle;
        (
            meta.volume_serial_number().map_or(0, u64::from),
            meta.file_index().unwrap_or(0),
        )
    }
}

/// How many names (hard links) `meta`'s file has (1 where the system does not say).
pub(crate) fn links(meta: &Metadata) -> u64 {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        meta.nlink()
    }
    #[cfg(windows)]
    {
        use cap_primitives::fs::_WindowsByHandle;
        meta.number_of_links().map_or(1, u64::from)
    }
}

/// `meta`'s permission bits (Unix). Windows has a read-only flag only: `0o444` or `0o644`.
pub(crate) fn mode(meta: &Metadata) -> u32 {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        meta.mode()
    }
    #[cfg(not(unix))]
    {
        if meta.permissions().readonly() {
            0o444
        } else {
            0o644
        }
    }
}

/// The permission bits a file or folder is created with: Unix's; nothing on Windows (a new
/// file there inherits its folder's ACL).
pub(crate) trait UnixMode {
    /// Sets the bits (`0o600`...) on Unix.
    fn unix_mode(&mut self, mode: u32) -> &mut Self;
}

impl UnixMode for OpenOptions {
    fn unix_mode(&mut self, mode: u32) -> &mut Self {
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            self.mode(mode)
        }
        #[cfg(not(unix))]
        {
            let _ = mode;
            self
        }
    }
}

impl UnixMode for cap_std::fs::DirBuilder {
    fn unix_mode(&mut self, mode: u32) -> &mut Self {
        #[cfg(unix)]
        {
            use cap_std::fs::DirBuilderExt;
            self.mode(mode)
        }
        #[cfg(not(unix))]
        {
            let _ = mode;
            self
        }
    }
}

/// Fills `buf` from `file` at `offset` (a file shorter than that is an error): `pread`.
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    cap_std::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Writes all of `buf` to `file` at `offset` (the file grows as needed): `pwrite`.
#[cfg(unix)]
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    cap_std::fs::FileExt::write_all_at(file, buf, offset)
}

/// [`read_exact_at`] on Windows: positioned `ReadFile`s until `buf` is full.
#[cfg(windows)]
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match cap_std::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`write_all_at`] on Windows: positioned `WriteFile`s until `buf` is written.
#[cfg(windows)]
pub(crate) fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match cap_std::fs::FileExt::seek_write(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// When the folder `root` was created (cap-std's `created`), as `secs.nanos`.
#[cfg_attr(
    all(target_os = "linux", not(feature = "portable-fs")),
    allow(dead_code)
)]
fn created(root: &Dir) -> Option<String> {
    let at = root.dir_metadata().ok()?.created().ok()?.into_std();
    let since = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!("{}.{:09}", since.as_secs(), since.subsec_nanos()))
}

/// `path` when it names the folder `root` is (same device and file number); else an error.
#[cfg_attr(
    all(target_os = "linux", not(feature = "portable-fs")),
    allow(dead_code)
)]
fn checked_watch_path(root: &Dir, path: PathBuf) -> io::Result<PathBuf> {
    use cap_fs_ext::MetadataExt;
    let there = super::ambient(super::Ambient::Open(&path))?.dir_metadata()?;
    let here = root.dir_metadata()?;
    if (there.dev(), there.ino()) == (here.dev(), here.ino()) {
        Ok(path)
    } else {
        Err(io::Error::other(
            "the vault folder was moved or replaced since it was opened",
        ))
    }
}

/// True when a process with this id exists (it may belong to another user). Windows: not
/// asked; taken as alive, so another process's temporary file is never removed.
pub(crate) fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        // 0 and negative ids name process groups, not a process.
        let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        // Signal 0: only whether the process exists (EPERM: it does, another user's).
        !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        )
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// The portable watcher's path is the one the vault was opened at only while that path
    /// still names the same folder: a folder moved away and another put in its place is refused.
    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn a_watch_path_that_no_longer_names_the_vault_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let vault = tmp.path().join("vault");
        std::fs::create_dir(&vault).unwrap();
        let root = super::super::ambient(super::super::Ambient::Open(&vault)).unwrap();
        assert_eq!(checked_watch_path(&root, vault.clone()).unwrap(), vault);
        std::fs::rename(&vault, tmp.path().join("moved")).unwrap();
        assert!(checked_watch_path(&root, vault.clone()).is_err());
        std::fs::create_dir(&vault).unwrap();
        assert!(checked_watch_path(&root, vault.clone()).is_err());
    }
}
