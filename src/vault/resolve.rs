//! The resolver: walks a [`VaultPath`] one component at a time from the root handle.
//!
//! Every step is a single-name `openat`/`fstatat` on a directory handle we already hold, with
//! `O_NOFOLLOW` and through cap-std (so `RESOLVE_BENEATH` applies too). When a step meets a
//! symlink, the resolver reads its target (`readlinkat` on the same handle), refuses absolute
//! targets, and splices the target's components into the path still to walk. `..` from a link
//! target pops one folder off the stack of handles; popping past the root is an escape.
//!
//! Because the walk never asks the kernel to follow a link, what is opened is exactly the
//! location that was checked: a symlink swapped in mid-walk is either seen (and re-checked) or
//! makes the no-follow open fail (and the step is retried). That is why policy holds on the
//! *resolved* location: a component that starts with `.`, reached through a link, is refused
//! just as it would be in the client's own path.

use std::collections::VecDeque;
use std::io::Read;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions};

use super::error::VaultError;
use super::exclude::Exclusions;
use super::path::{PathError, VaultPath, check_component};

/// How many symlinks one resolution may pass through (Linux's own limit is 40).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// What the caller expects at the end of the path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Want {
    File,
    Dir,
    Any,
}

/// The object a path resolved to, opened, with where it really is.
pub(crate) enum Resolved {
    File {
        file: File,
        /// `fstat` of the open handle (never of a path).
        meta: Metadata,
    },
    Dir {
        dir: Dir,
    },
}

/// Resolves `requested` beneath `root`, refusing any location `excluded` names. Errors name
/// `requested` (what the client asked for).
pub(crate) fn resolve(
    root: &Dir,
    requested: &VaultPath,
    want: Want,
    excluded: &Exclusions,
) -> Result<Resolved, VaultError> {
    // The path as typed, whether or not it exists; then each location the walk reaches.
    if excluded.excludes(requested.as_str()) {
        return Err(VaultError::Excluded(requested.clone()));
    }
    let pending = requested.components().map(str::to_owned).collect();
    resolve_components(root, pending, requested, want, Hidden::Refuse, excluded)
}

/// Whether hidden names may be walked through.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Hidden {
    /// Client requests and scans: a hidden name anywhere on the way is refused.
    Refuse,
    /// The server's own reads of the vault's config folder (never a client path).
    Allow,
}

/// Resolves `pending` components beneath `root`; errors name `requested`.
pub(crate) fn resolve_components(
    root: &Dir,
    pending: VecDeque<String>,
    requested: &VaultPath,
    want: Want,
    hidden: Hidden,
    excluded: &Exclusions,
) -> Result<Resolved, VaultError> {
    walk(root, pending, requested, want, hidden, excluded).map(|(r, _)| r)
}

/// [`resolve_components`] for a client path (nothing hidden), also returning where a folder it
/// resolved to really is (vault-relative, link targets spliced in; empty for the root).
pub(crate) fn resolve_components_real(
    root: &Dir,
    pending: VecDeque<String>,
    requested: &VaultPath,
    want: Want,
    excluded: &Exclusions,
) -> Result<(Resolved, String), VaultError> {
    walk(root, pending, requested, want, Hidden::Refuse, excluded)
}

fn walk(
    root: &Dir,
    mut pending: VecDeque<String>,
    requested: &VaultPath,
    want: Want,
    hidden: Hidden,
    excluded: &Exclusions,
) -> Result<(Resolved, String), VaultError> {
    let mut stack: Vec<Dir> = Vec::new();
    // The real location of each folder on the stack, for the exclusion rule.
    let mut real: Vec<String> = Vec::new();
    let mut hops = 0usize;

    while let Some(name) = pending.pop_front() {
        match name.as_str() {
            "" | "." => continue,
            ".." => {
                if stack.pop().is_none() {
                    return Err(VaultError::Escapes(requested.clone()));
                }
                real.pop();
                continue;
            }
            _ => {}
        }
        // Client paths were validated already; names spliced in from link targets are checked
        // here, so a link can never lead into a hidden folder or to a name we would refuse.
        match check_component(&name) {
            Ok(()) => {}
            Err(PathError::Hidden) if hidden == Hidden::Allow => {}
            Err(PathError::Hidden) => return Err(VaultError::LeadsToHidden(requested.clone())),
            Err(_) => return Err(VaultError::NotFound(requested.clone())),
        }
        // Where this step really is (link targets spliced in): an excluded folder or file is
        // refused however it is reached.
        if !excluded.is_empty() {
            let here = match real.last() {
                Some(parent) => format!("{parent}/{name}"),
                None => name.clone(),
            };
            if excluded.excludes(&here) {
                return Err(VaultError::Excluded(requested.clone()));
            }
        }
        let current = stack.last().unwrap_or(root);
        let meta = current
            .symlink_metadata(&name)
            .map_err(|e| VaultError::from_io(requested, &e))?;
        let file_type = meta.file_type();

        if file_type.is_symlink() {
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return Err(VaultError::SymlinkLoop(requested.clone()));
            }
            let target = super::sys::read_link(current, name.as_str())
                .map_err(|e| VaultError::from_io(requested, &e))?;
            let target = target
                .to_str()
                .ok_or_else(|| VaultError::NotFound(requested.clone()))?;
            if target.starts_with('/') {
                return Err(VaultError::Escapes(requested.clone()));
            }
            for component in target.rsplit('/') {
                pending.push_front(component.to_owned());
            }
            continue;
        }

        if file_type.is_dir() {
            match current.open_dir_nofollow(&name) {
                Ok(dir) => {
                    real.push(match real.last() {
                        Some(parent) => format!("{parent}/{name}"),
                        None => name.clone(),
                    });
                    stack.push(dir);
                }
                Err(e) if super::sys::raced_into_symlink(&e) => {
                    // Replaced by a symlink since the fstatat: look at it again.
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(VaultError::SymlinkLoop(requested.clone()));
                    }
                    pending.push_front(name);
                }
                Err(e) => return Err(VaultError::from_io(requested, &e)),
            }
            continue;
        }

        // A file of some kind: it must be the last component. Like the kernel, a trailing
        // `/` or `/.` (left over from a link target) after a file is "not a directory".
        if !pending.is_empty() {
            return Err(VaultError::NotFound(requested.clone()));
        }
        if want == Want::Dir {
            return Err(VaultError::NotAFolder(requested.clone()));
        }
        if !file_type.is_file() {
            return Err(VaultError::NotRegular {
                path: requested.clone(),
                kind: kind_name(&meta),
            });
        }
        match open_regular_nofollow(current, &name, requested) {
            Ok((file, meta)) => return Ok((Resolved::File { file, meta }, String::new())),
            Err(OpenOutcome::Symlink) => {
                // Replaced by a symlink since the fstatat: look at it again.
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(VaultError::SymlinkLoop(requested.clone()));
                }
                pending.push_front(name);
            }
            Err(OpenOutcome::Failed(e)) => return Err(e),
        }
    }

    // Every component walked: we stand on a folder.
    if want == Want::File {
        return Err(VaultError::IsAFolder(requested.clone()));
    }
    let dir = match stack.pop() {
        Some(dir) => dir,
        None => root
            .try_clone()
            .map_err(|e| VaultError::from_io(requested, &e))?,
    };
    Ok((Resolved::Dir { dir }, real.pop().unwrap_or_default()))
}

/// Why [`open_regular_nofollow`] did not return a file.
pub(crate) enum OpenOutcome {
    /// `name` is (now) a symlink: the caller must resolve it.
    Symlink,
    /// Anything else, already mapped to an error naming `path`.
    Failed(VaultError),
}

/// Opens `name` in `dir` for reading without following a symlink and without blocking (a FIFO
/// opens at once instead of waiting for a writer), then checks with `fstat` on the handle that
/// it is a regular file. Errors name `path`.
pub(crate) fn open_regular_nofollow(
    dir: &Dir,
    name: &str,
    path: &VaultPath,
) -> Result<(File, Metadata), OpenOutcome> {
    let mut options = OpenOptions::new();
    super::sys::nonblocking(options.read(true).follow(FollowSymlinks::No));
    match dir.open_with(name, &options) {
        Ok(file) => {
            let meta = file
                .metadata()
                .map_err(|e| OpenOutcome::Failed(VaultError::from_io(path, &e)))?;
            if meta.is_file() {
                Ok((file, meta))
            } else {
                Err(OpenOutcome::Failed(VaultError::NotRegular {
                    path: path.clone(),
                    kind: kind_name(&meta),
                }))
            }
        }
        Err(e) if super::sys::raced_into_symlink(&e) => Err(OpenOutcome::Symlink),
        Err(e) => Err(OpenOutcome::Failed(VaultError::from_io(path, &e))),
    }
}

/// Reads a whole regular file from an open handle, refusing it before reading when its size
/// is over `limit`, and again if it grows past `limit` while being read.
pub(crate) fn read_capped(
    file: File,
    size: u64,
    limit: u64,
    path: &VaultPath,
) -> Result<Vec<u8>, VaultError> {
    if size > limit {
        return Err(VaultError::TooLarge {
            path: path.clone(),
            size,
            limit,
        });
    }
    // `size <= limit`, and limit is configured in bytes of memory we are willing to hold.
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| VaultError::from_io(path, &e))?;
    if bytes.len() as u64 > limit {
        return Err(VaultError::TooLarge {
            path: path.clone(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// A short name for a non-regular file type.
pub(crate) fn kind_name(meta: &Metadata) -> &'static str {
    use cap_fs_ext::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else if t.is_dir() {
        "folder"
    } else if t.is_symlink() {
        "symlink"
    } else {
        "special file"
    }
}
