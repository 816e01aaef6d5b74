//! Scans: depth-first walks over directory handles.
//!
//! A walk holds one open directory handle per level of depth (never one per pending sibling),
//! lists each folder's names up front in sorted order, and looks at every entry with a no-follow
//! `fstatat` on the handle of its folder. Hidden names, names a client could not ask for,
//! special files and unreadable entries are skipped (the last with a log line naming only the
//! vault-relative path). A symlink is passed to the resolver: a link to a regular file inside
//! the vault is reported under the link's own path; a link to a folder is not descended (as in
//! Obsidian, which ignores links to folders of the same vault, and it makes loops impossible);
//! a link that leads outside, into a hidden place, or nowhere is skipped.

use std::ops::ControlFlow;

use std::cell::OnceCell;

use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, FileType};

use super::error::VaultError;
use super::path::{VaultPath, check_component};
use super::resolve::{Resolved, Want, resolve};
use super::{FileMeta, Vault};

/// Deepest folder level a scan descends to; deeper folders are skipped with a warning.
pub const MAX_SCAN_DEPTH: usize = 128;

/// One regular file met by a scan.
pub struct ScanEntry<'a> {
    /// Where the client would address it (the link's path for an in-vault file symlink).
    pub path: VaultPath,
    /// Size and times, fetched on first use (a search that reads the file never needs them).
    meta: OnceCell<FileMeta>,
    source: Source<'a>,
}

enum Source<'a> {
    /// A regular file directly in `dir` under `name`.
    Direct { dir: &'a Dir, name: &'a str },
    /// A symlink: reading re-resolves it from the root.
    Link,
}

impl ScanEntry<'_> {
    /// Size and times of the file (`fstatat` without following, or of the link's target).
    pub fn meta(&self, vault: &Vault) -> Result<FileMeta, VaultError> {
        if let Some(meta) = self.meta.get() {
            return Ok(*meta);
        }
        let meta = match &self.source {
            Source::Direct { dir, name } => dir
                .symlink_metadata(name)
                .map(|m| FileMeta::from_metadata(&m))
                .map_err(|e| VaultError::from_io(&self.path, &e))?,
            Source::Link => vault.stat_file(&self.path)?,
        };
        Ok(*self.meta.get_or_init(|| meta))
    }

    /// Reads the file's bytes under the vault's size cap, with the metadata of the handle read.
    pub fn read(&self, vault: &Vault) -> Result<super::FileData, VaultError> {
        match &self.source {
            Source::Direct { dir, name } => vault.read_in(dir, name, &self.path),
            Source::Link => vault.read_file(&self.path),
        }
    }
}

struct Frame {
    path: VaultPath,
    dir: Dir,
    names: std::vec::IntoIter<(String, FileType)>,
}

/// Walks `folder` (the root when empty), calling `visit` for each regular file whose name
/// passes `want_name`. `visit` may stop the walk early with `ControlFlow::Break`.
pub(crate) fn walk(
    vault: &Vault,
    folder: &VaultPath,
    recursive: bool,
    want_name: &dyn Fn(&str) -> bool,
    visit: &mut dyn FnMut(ScanEntry<'_>) -> ControlFlow<()>,
) -> Result<(), VaultError> {
    let Resolved::Dir { dir } = resolve(&vault.root, folder, Want::Dir, &vault.excluded)? else {
        return Err(VaultError::NotAFolder(folder.clone()));
    };
    let names = list_names(&dir, folder).map_err(|e| VaultError::from_io(folder, &e))?;
    let mut frames = vec![Frame {
        path: folder.clone(),
        dir,
        names: names.into_iter(),
    }];

    while let Some(depth) = frames.len().checked_sub(1) {
        let frame = &mut frames[depth];
        let Some((name, file_type)) = frame.names.next() else {
            frames.pop();
            continue;
        };
        let Ok(path) = frame.path.join(&name) else {
            // Hidden, or a name no client could ask for: not part of the vault's surface.
            continue;
        };
        if vault.excluded.excludes(path.as_str()) {
            continue;
        }
        if file_type.is_dir() {
            if !recursive {
                continue;
            }
            if depth + 1 >= MAX_SCAN_DEPTH {
                tracing::warn!(path = %path, "skipped a folder nested too deep");
                continue;
            }
            let child = match frame.dir.open_dir_nofollow(&name) {
                Ok(child) => child,
                Err(e) => {
                    tracing::warn!(path = %path, error = ?e.kind(), "skipped an unreadable folder");
                    continue;
                }
            };
            match list_names(&child, &path) {
                Ok(names) => frames.push(Frame {
                    path,
                    dir: child,
                    names: names.into_iter(),
                }),
                Err(e) => {
                    tracing::warn!(path = %path, error = ?e.kind(), "skipped an unreadable folder");
                }
            }
            continue;
        }
        if !want_name(&name) {
            continue;
        }
        if file_type.is_file() {
            let flow = visit(ScanEntry {
                meta: OnceCell::new(),
                source: Source::Direct {
                    dir: &frame.dir,
                    name: &name,
                },
                path,
            });
            if flow.is_break() {
                return Ok(());
            }
        } else if file_type.is_symlink() {
            match resolve(&vault.root, &path, Want::Any, &vault.excluded) {
                Ok(Resolved::File { meta, .. }) => {
                    let flow = visit(ScanEntry {
                        meta: OnceCell::from(FileMeta::from_metadata(&meta)),
                        source: Source::Link,
                        path,
                    });
                    if flow.is_break() {
                        return Ok(());
                    }
                }
                Ok(Resolved::Dir { .. }) => {}
                Err(e) => tracing::debug!(path = %path, error = %e, "skipped a symlink"),
            }
        }
        // FIFOs, sockets and devices are never part of a scan.
    }
    Ok(())
}

/// The names in `dir` with their types (from the directory entry, no extra `stat` where the
/// filesystem reports types), sorted by name, skipping hidden and non-UTF-8 names.
fn list_names(dir: &Dir, at: &VaultPath) -> std::io::Result<Vec<(String, FileType)>> {
    let mut names = Vec::new();
    for entry in dir.entries()? {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                tracing::warn!(path = %at, error = ?e.kind(), "skipped an unreadable entry");
                continue;
            }
        };
        let name = match entry.file_name().into_string() {
            Ok(name) if check_component(&name).is_ok() => name,
            Ok(_) => continue,
            Err(_) => {
                tracing::debug!(path = %at, "skipped a name that is not UTF-8");
                continue;
            }
        };
        match entry.file_type() {
            Ok(file_type) => names.push((name, file_type)),
            Err(e) => {
                tracing::warn!(path = %at, error = ?e.kind(), "skipped an unreadable entry");
            }
        }
    }
    names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(names)
}
