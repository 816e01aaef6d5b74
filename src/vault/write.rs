//! Writing one file, the only way the capability layer writes: atomically, durably, never in
//! place, never through a symlink, and never outside the vault or in a hidden or excluded
//! location, whatever is swapped in meanwhile.
//!
//! The folder that will hold the file is resolved like any read (a no-follow walk from the root
//! handle, every step checked where it really leads), and every later step acts on one name in
//! that folder's handle: a folder replaced by a symlink after the walk changes nothing, since the
//! handle is the folder that was checked. In that handle:
//!
//! 1. the current file is looked at without following a link (a symlink, folder or special file
//!    is refused) and, when the caller gave the version it expects, hashed;
//! 2. the new bytes go to a temporary file with a hidden name (created exclusively, so nothing
//!    that exists is ever opened for writing), which takes the old file's permission bits, and
//!    is flushed to disk;
//! 3. the expectation is checked again, then the temporary file is renamed over the target (or,
//!    to create, renamed with `RENAME_NOREPLACE`, so an existing file is never replaced), and the
//!    folder is flushed so the rename itself is durable.
//!
//! A rename replaces the directory entry, so a file hard-linked from elsewhere keeps its old
//! bytes there: the vault's copy is new, the other is untouched (the reply reports the count).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::sys::UnixMode;
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

use super::error::VaultError;
use super::path::{VaultPath, check_component};
use super::resolve::{self, OpenOutcome, Resolved, Want};
use super::{FileMeta, Vault};

/// Permission bits of a file created where none existed: what editors create (before the
/// process umask).
const NEW_FILE_MODE: u32 = 0o644;

/// What the caller expects to find at the path it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Nothing: the write creates the file and fails if one exists.
    Absent,
    /// The file, at this version (lowercase hex SHA-256 of its bytes).
    Version(String),
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Lowercase hex SHA-256 of the bytes written.
    pub sha256: String,
    /// The new file's size, time and inode.
    pub meta: FileMeta,
    /// Other hard links the replaced file had (0 when it had none, or when the file is new):
    /// they still hold the old bytes.
    pub other_links: u64,
}

/// Lowercase hex SHA-256 of `bytes`: the version a note's readers and writers compare.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// Prefix of every temporary file a write makes: hidden (so no scan, listing or watcher ever
/// takes it for a note), and recognisable.
pub const TEMP_PREFIX: &str = ".capvault-tmp-";

/// Makes temporary names unique within the process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

impl Vault {
    /// Writes `bytes` as the file at `path`, if what is there is what `expect` says; see the
    /// module documentation for how. A folder on the way that does not exist is
    /// [`VaultError::NotFound`].
    pub fn write_file(
        &self,
        path: &VaultPath,
        bytes: &[u8],
        expect: &Expect,
    ) -> Result<Written, VaultError> {
        let (folder, name) = self.parent_of(path)?;
        let existing = current(&folder, &name, path)?;
        check(&folder, &name, path, existing.as_ref(), expect, self)?;
        let mode = existing.as_ref().map_or(NEW_FILE_MODE, |e| e.mode);
        let temp = format!(
            "{TEMP_PREFIX}{}-{}",
            std::process::id(),
            NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
        );
        let result = write_temp(&folder, &temp, bytes, mode, path).and_then(|meta| {
            // Checked again right before the rename: an edit in between (Obsidian, a sync tool)
            // is a conflict, not lost.
            let now = current(&folder, &name, path)?;
            check(&folder, &name, path, now.as_ref(), expect, self)?;
            match expect {
                Expect::Absent => rename_no_replace(&folder, &temp, &name, path)?,
                Expect::Version(_) => folder
                    .rename(&temp, &folder, &name)
                    .map_err(|e| VaultError::from_io(path, &e))?,
            }
            super::sys::sync_folder(&folder).map_err(|e| VaultError::from_io(path, &e))?;
            Ok(Written {
                sha256: sha256_hex(bytes),
                meta,
                other_links: now.map_or(0, |e| e.nlink.saturating_sub(1)),
            })
        });
        if result.is_err() {
            // Gone already when the rename happened; otherwise it must not stay behind.
            let _ = folder.remove_file(&temp);
        }
        result
    }

    /// The folder that holds `path`, resolved like a read (no-follow, inside the vault, nothing
    /// hidden or excluded on the way), and the last name, itself checked against the exclusions
    /// and the write scopes where the folder really is.
    pub(super) fn parent_of(&self, path: &VaultPath) -> Result<(Dir, String), VaultError> {
        let (dir, name, here) = self.parent_real(path)?;
        if !self.may_write_at(&here) {
            return Err(VaultError::OutsideWriteScope(path.clone()));
        }
        Ok((dir, name))
    }

    /// [`Vault::parent_of`] without the write scopes, with the real vault path of the entry.
    pub(super) fn parent_real(
        &self,
        path: &VaultPath,
    ) -> Result<(Dir, String, String), VaultError> {
        if self.excluded.excludes(path.as_str()) {
            return Err(VaultError::Excluded(path.clone()));
        }
        let mut components: std::collections::VecDeque<String> =
            path.components().map(str::to_owned).collect();
        let Some(name) = components.pop_back() else {
            return Err(VaultError::IsAFolder(path.clone()));
        };
        check_component(&name)?;
        let (dir, real) = match resolve::resolve_components_real(
            &self.root,
            components,
            path,
            Want::Dir,
            &self.excluded,
        )? {
            (Resolved::Dir { dir }, real) => (dir, real),
            (Resolved::File { .. }, _) => return Err(VaultError::NotAFolder(path.clone())),
        };
        let here = if real.is_empty() {
            name.clone()
        } else {
            format!("{real}/{name}")
        };
        if self.excluded.excludes(&here) {
            return Err(VaultError::Excluded(path.clone()));
        }
        Ok((dir, name, here))
    }

    /// True when the real location `here` (a vault path as the walk found it) lies in one of
    /// the write scopes, or there are none.
    pub(super) fn may_write_at(&self, here: &str) -> bool {
        self.write_scopes.is_empty()
            || self.write_scopes.iter().any(|s| {
                let s = s.as_str();
                s.is_empty()
                    || here
                        .strip_prefix(s)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
    }
}

/// The regular file now at `name` in `folder`, if any.
struct Current {
    mode: u32,
    nlink: u64,
}

/// Looks at `name` in `folder` without following a link: `None` when nothing is there; a
/// symlink, folder or special file is refused.
fn current(folder: &Dir, name: &str, path: &VaultPath) -> Result<Option<Current>, VaultError> {
    match folder.symlink_metadata(name) {
        Ok(meta) if meta.is_file() => Ok(Some(Current {
            mode: super::sys::mode(&meta) & 0o7777,
            nlink: super::sys::links(&meta),
        })),
        Ok(meta) if meta.is_dir() => Err(VaultError::IsAFolder(path.clone())),
        Ok(meta) => Err(VaultError::NotRegular {
            path: path.clone(),
            kind: resolve::kind_name(&meta),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(VaultError::from_io(path, &e)),
    }
}

/// Checks `expect` against what is at `name`.
fn check(
    folder: &Dir,
    name: &str,
    path: &VaultPath,
    existing: Option<&Current>,
    expect: &Expect,
    vault: &Vault,
) -> Result<(), VaultError> {
    match (expect, existing) {
        (Expect::Absent, None) => Ok(()),
        (Expect::Absent, Some(_)) => Err(VaultError::Exists(path.clone())),
        (Expect::Version(_), None) => Err(VaultError::NotFound(path.clone())),
        (Expect::Version(want), Some(_)) => {
            let (file, meta) = match resolve::open_regular_nofollow(folder, name, path) {
                Ok(opened) => opened,
                Err(OpenOutcome::Symlink) => {
                    return Err(VaultError::NotRegular {
                        path: path.clone(),
                        kind: "symlink",
                    });
                }
                Err(OpenOutcome::Failed(e)) => return Err(e),
            };
            let bytes = resolve::read_capped(file, meta.len(), vault.limits.max_read_bytes, path)?;
            let now = sha256_hex(&bytes);
            if now.eq_ignore_ascii_case(want) {
                Ok(())
            } else {
                Err(VaultError::Changed {
                    path: path.clone(),
                    current_sha256: now,
                })
            }
        }
    }
}

/// Creates `temp` in `folder` exclusively, writes `bytes` with permission bits `mode`, and
/// flushes it to disk. Returns its metadata.
fn write_temp(
    folder: &Dir,
    temp: &str,
    bytes: &[u8],
    mode: u32,
    path: &VaultPath,
) -> Result<FileMeta, VaultError> {
    let io = |e: std::io::Error| VaultError::from_io(path, &e);
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .unix_mode(mode);
    let mut file = folder.open_with(temp, &options).map_err(io)?;
    // The old file's bits exactly (the umask applied to the create above).
    super::sys::set_mode(&file, mode).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    super::sys::sync_file(&file).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    Ok(FileMeta::from_metadata(&meta))
}

/// Renames `from` to `to` in `folder` unless `to` exists ([`super::sys::rename_no_replace`]).
pub(super) fn rename_no_replace(
    folder: &Dir,
    from: &str,
    to: &str,
    path: &VaultPath,
) -> Result<(), VaultError> {
    super::sys::rename_no_replace(folder, from, folder, to, false).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            VaultError::Exists(path.clone())
        } else {
            VaultError::from_io(path, &e)
        }
    })
}

/// Deepest folder [`Vault::remove_stale_temps`] looks into.
const MAX_TEMP_DEPTH: usize = 64;
/// Most folder entries [`Vault::remove_stale_temps`] looks at.
const MAX_TEMP_ENTRIES: usize = 10_000_000;

impl Vault {
    /// Removes the temporary files that writes of processes no longer running left behind (a
    /// crash or `kill -9` between creating one and renaming it). They are hidden, so no scan,
    /// listing or search ever shows them; this only takes their space back. Only visible
    /// folders are walked (writes never go elsewhere), never through a symlink. Returns how many
    /// were removed.
    pub fn remove_stale_temps(&self) -> usize {
        let mine = std::process::id();
        let mut removed = 0;
        let mut seen = 0;
        let mut stack: Vec<(Dir, usize)> = match self.root.try_clone() {
            Ok(d) => vec![(d, 0)],
            Err(_) => return 0,
        };
        while let Some((dir, depth)) = stack.pop() {
            let Ok(entries) = dir.entries() else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > MAX_TEMP_ENTRIES {
                    return removed;
                }
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if let Some(rest) = name.strip_prefix(TEMP_PREFIX) {
                    let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
                    if kind.is_file()
                        && let Some(pid) = pid
                        && pid != mine
                        && !super::sys::process_alive(pid)
                        && dir.remove_file(&name).is_ok()
                    {
                        removed += 1;
                    }
                } else if kind.is_dir() && !name.starts_with('.') && depth < MAX_TEMP_DEPTH {
                    use cap_fs_ext::DirExt;
                    if let Ok(child) = dir.open_dir_nofollow(&name) {
                        stack.push((child, depth + 1));
                    }
                }
            }
        }
        removed
    }
}
