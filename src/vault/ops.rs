//! The changes a write tool makes besides writing a file: folders created, entries moved (never
//! over anything), moved to Obsidian's `.trash`, or removed. Like [`Vault::write_file`], each
//! resolves the folder that holds the entry the way a read does (no-follow, inside the vault,
//! nothing hidden or excluded, inside the write scopes where the folder really is) and then acts
//! on one name in that folder's handle, so a folder swapped for a symlink meanwhile changes
//! nothing outside what was checked.

use super::sys::UnixMode;
use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, DirBuilder};

use super::error::VaultError;
use super::path::{VaultPath, check_component};
use super::resolve;
use super::sys::sync_folder;
use super::write::sha256_hex;
use super::{FileMeta, Vault};

/// Obsidian's trash folder at the vault root (`trashOption: "local"`).
pub const TRASH_FOLDER: &str = ".trash";

/// Most names tried in the trash before giving up (`Note.md`, `Note 1.md`, ...).
const MAX_TRASH_NAMES: u32 = 10_000;

/// Permission bits of a folder capvault creates (before the umask), as editors create them.
const NEW_FOLDER_MODE: u32 = 0o755;

/// Most path components a write leaves a file at: folders are not created, nor moved, deeper.
pub const MAX_WRITE_DEPTH: usize = 64;

/// Most entries [`Vault::survey_folder`] looks at.
pub const MAX_SURVEY_ENTRIES: usize = 100_000;

/// What a folder holds, as [`Vault::survey_folder`] found it on disk (not as the model has it).
#[derive(Debug, Default)]
pub struct FolderSurvey {
    /// The regular files a client can name (not hidden, not excluded), in walk order.
    pub files: Vec<VaultPath>,
    /// Entries no client can see: hidden names (`.git`), names no vault path can hold, entries
    /// `--exclude` refuses where they are (not descended into).
    pub unseen: usize,
    /// Visible entries that `--exclude` would refuse at the destination asked about.
    pub excluded_at_destination: usize,
    /// Symlinks, FIFOs, sockets and devices.
    pub other: usize,
    /// The deepest level reached below the folder (1: its own entries).
    pub depth: usize,
    /// The folder holds entries deeper than the depth asked about (not looked at).
    pub too_deep: bool,
    /// The folder holds more than [`MAX_SURVEY_ENTRIES`] entries (the walk stopped).
    pub too_many: bool,
}

/// One open folder of a survey.
struct SurveyFrame {
    /// Its path as the client names it, and as it would be at the destination.
    path: String,
    at_destination: Option<String>,
    entries: cap_std::fs::ReadDir,
}

/// What an entry is, looked at without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File(FileMeta),
    /// A folder.
    Folder,
}

/// Where a move put an entry, as the vault shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The new location, vault-relative (in the trash: `.trash/Note 1.md`).
    pub to: String,
}

impl Vault {
    /// What is at `path` (a symlink, FIFO or device is refused); `None` when nothing is.
    pub fn entry(&self, path: &VaultPath) -> Result<Option<Entry>, VaultError> {
        let (folder, name, _) = match self.parent_real(path) {
            Ok(found) => found,
            Err(VaultError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        match folder.symlink_metadata(&name) {
            Ok(meta) if meta.is_file() => Ok(Some(Entry::File(FileMeta::from_metadata(&meta)))),
            Ok(meta) if meta.is_dir() => Ok(Some(Entry::Folder)),
            Ok(meta) => Err(VaultError::NotRegular {
                path: path.clone(),
                kind: resolve::kind_name(&meta),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(VaultError::from_io(path, &e)),
        }
    }

    /// Where the entry `path` really is in the vault: the in-vault symlinks among its folders
    /// followed (`plink/sub` where `plink -> Projects` is `Projects/sub`), each step checked
    /// as every access is (hidden, excluded and outside targets refused). Its folders must
    /// exist; the last component is kept as written.
    pub fn real_path(&self, path: &VaultPath) -> Result<VaultPath, VaultError> {
        let (_, _, here) = self.parent_real(path)?;
        Ok(VaultPath::parse(&here)?)
    }

    /// Creates the folder `path` and every missing folder above it; returns those it created,
    /// outermost first. A folder may be created inside a write scope or on the way to one.
    pub fn create_folders(&self, path: &VaultPath) -> Result<Vec<VaultPath>, VaultError> {
        let mut created = Vec::new();
        let mut at = VaultPath::root();
        for component in path.components() {
            at = at.join(component)?;
            let (folder, name, here) = self.parent_real(&at)?;
            if !self.may_write_at(&here) && !self.on_the_way_to_a_scope(&here) {
                return Err(VaultError::OutsideWriteScope(at));
            }
            let mut builder = DirBuilder::new();
            builder.unix_mode(NEW_FOLDER_MODE);
            match folder.create_dir_with(&name, &builder) {
                Ok(()) => {
                    sync_folder(&folder).map_err(|e| VaultError::from_io(&at, &e))?;
                    created.push(at.clone());
                }
                // Something is there already: the next step's walk says what (a folder, a
                // link to one inside the vault, or something refused).
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(VaultError::from_io(&at, &e)),
            }
        }
        Ok(created)
    }

    /// Moves the file or folder at `from` to `to`, which must not exist (never replaced:
    /// `renameat2(RENAME_NOREPLACE)`, or a hard link then an unlink for a file where the
    /// filesystem lacks it). With `expect`, a file must be at that version. A folder cannot go
    /// inside itself.
    pub fn move_entry(
        &self,
        from: &VaultPath,
        to: &VaultPath,
        expect: Option<&str>,
    ) -> Result<Moved, VaultError> {
        if to.starts_with(from) {
            return Err(VaultError::Io {
                path: to.clone(),
                kind: std::io::ErrorKind::InvalidInput,
            });
        }
        let (src, src_name) = self.parent_of(from)?;
        let is_dir = check_entry(&src, &src_name, from, expect, self)?;
        let (dst, dst_name) = self.parent_of(to)?;
        rename_between(&src, &src_name, &dst, &dst_name, is_dir, to)?;
        sync_folder(&dst).map_err(|e| VaultError::from_io(to, &e))?;
        sync_folder(&src).map_err(|e| VaultError::from_io(from, &e))?;
        Ok(Moved { to: to.to_string() })
    }

    /// Moves the file or folder at `path` into the vault's `.trash` folder (created if
    /// missing), under its own name or, when that is taken, `Name 1.md`, `Name 2.md`...
    pub fn trash_entry(&self, path: &VaultPath, expect: Option<&str>) -> Result<Moved, VaultError> {
        let (src, name) = self.parent_of(path)?;
        let is_dir = check_entry(&src, &name, path, expect, self)?;
        let trash = self.trash_folder(path)?;
        let (stem, ext) = match (is_dir, name.rfind('.')) {
            (false, Some(i)) if i > 0 => (&name[..i], &name[i..]),
            _ => (name.as_str(), ""),
        };
        for n in 0..MAX_TRASH_NAMES {
            let candidate = if n == 0 {
                name.clone()
            } else {
                format!("{stem} {n}{ext}")
            };
            match rename_between(&src, &name, &trash, &candidate, is_dir, path) {
                Ok(()) => {
                    sync_folder(&trash).map_err(|e| VaultError::from_io(path, &e))?;
                    sync_folder(&src).map_err(|e| VaultError::from_io(path, &e))?;
                    return Ok(Moved {
                        to: format!("{TRASH_FOLDER}/{candidate}"),
                    });
                }
                Err(VaultError::Exists(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VaultError::Exists(path.clone()))
    }

    /// Removes the file at `path` (at version `expect`, when given) or the folder at `path` with
    /// everything in it (nothing below it is followed through a link).
    pub fn remove_entry(&self, path: &VaultPath, expect: Option<&str>) -> Result<(), VaultError> {
        let (folder, name) = self.parent_of(path)?;
        let is_dir = check_entry(&folder, &name, path, expect, self)?;
        let removed = if is_dir {
            folder.remove_dir_all(&name)
        } else {
            folder.remove_file(&name)
        };
        removed.map_err(|e| VaultError::from_io(path, &e))?;
        sync_folder(&folder).map_err(|e| VaultError::from_io(path, &e))
    }

    /// Walks the folder `path` without following links and without skipping anything, and says
    /// what it holds ([`FolderSurvey`]): what a move or deletion of the folder would carry
    /// along. With `destination`, also counts the entries that `--exclude` would refuse there.
    /// Descends at most `max_depth` levels and looks at most at [`MAX_SURVEY_ENTRIES`] entries;
    /// holds one folder handle per level.
    pub fn survey_folder(
        &self,
        path: &VaultPath,
        destination: Option<&VaultPath>,
        max_depth: usize,
    ) -> Result<FolderSurvey, VaultError> {
        let (parent, name, real) = self.parent_real(path)?;
        let io = |e: std::io::Error| VaultError::from_io(path, &e);
        let dir = parent.open_dir_nofollow(&name).map_err(io)?;
        let mut survey = FolderSurvey::default();
        let mut frames = vec![(
            SurveyFrame {
                path: path.to_string(),
                at_destination: destination.map(ToString::to_string),
                entries: dir.entries().map_err(io)?,
            },
            real,
            dir,
        )];
        let mut seen = 0usize;
        while let Some(level) = frames.len().checked_sub(1) {
            let (frame, real, dir) = &mut frames[level];
            let Some(entry) = frame.entries.next() else {
                frames.pop();
                continue;
            };
            seen += 1;
            if seen > MAX_SURVEY_ENTRIES {
                survey.too_many = true;
                break;
            }
            survey.depth = survey.depth.max(level + 1);
            if level + 1 > max_depth {
                survey.too_deep = true;
                continue;
            }
            let entry = entry.map_err(io)?;
            let kind = entry.file_type().map_err(io)?;
            let name = match entry.file_name().into_string() {
                Ok(n) if check_component(&n).is_ok() => n,
                _ => {
                    survey.unseen += 1;
                    continue;
                }
            };
            let here = format!("{}/{name}", frame.path);
            let real_here = format!("{real}/{name}");
            if self.excluded.excludes(&here) || self.excluded.excludes(&real_here) {
                survey.unseen += 1;
                continue;
            }
            let there = frame.at_destination.as_ref().map(|d| format!("{d}/{name}"));
            if there.as_ref().is_some_and(|t| self.excluded.excludes(t)) {
                survey.excluded_at_destination += 1;
                continue;
            }
            if kind.is_dir() {
                let child = dir.open_dir_nofollow(&name).map_err(io)?;
                let entries = child.entries().map_err(io)?;
                frames.push((
                    SurveyFrame {
                        path: here,
                        at_destination: there,
                        entries,
                    },
                    real_here,
                    child,
                ));
            } else if kind.is_file() {
                survey.files.push(VaultPath::parse(&here)?);
            } else {
                survey.other += 1;
            }
        }
        Ok(survey)
    }

    /// The `.trash` folder's handle: a real folder at the root (created `0755` if missing),
    /// never a symlink.
    fn trash_folder(&self, path: &VaultPath) -> Result<Dir, VaultError> {
        let io = |e: std::io::Error| VaultError::from_io(path, &e);
        let mut builder = DirBuilder::new();
        builder.unix_mode(NEW_FOLDER_MODE);
        match self.root.create_dir_with(TRASH_FOLDER, &builder) {
            Ok(()) => sync_folder(&self.root).map_err(io)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let meta = self.root.symlink_metadata(TRASH_FOLDER).map_err(io)?;
        if !meta.is_dir() {
            return Err(VaultError::NotRegular {
                path: path.clone(),
                kind: "trash that is not a folder",
            });
        }
        self.root.open_dir_nofollow(TRASH_FOLDER).map_err(io)
    }

    /// True when `here` is a folder above one of the write scopes (created on the way to it).
    fn on_the_way_to_a_scope(&self, here: &str) -> bool {
        self.write_scopes.iter().any(|s| {
            s.as_str()
                .strip_prefix(here)
                .is_some_and(|rest| rest.starts_with('/'))
        })
    }
}

/// Checks the entry `name` in `folder` before it moves or goes: a file (at version `expect`
/// when given) or a folder; nothing there is [`VaultError::NotFound`], a symlink or special
/// file is refused. Returns whether it is a folder.
fn check_entry(
    folder: &Dir,
    name: &str,
    path: &VaultPath,
    expect: Option<&str>,
    vault: &Vault,
) -> Result<bool, VaultError> {
    let meta = folder
        .symlink_metadata(name)
        .map_err(|e| VaultError::from_io(path, &e))?;
    if meta.is_dir() {
        return Ok(true);
    }
    if !meta.is_file() {
        return Err(VaultError::NotRegular {
            path: path.clone(),
            kind: resolve::kind_name(&meta),
        });
    }
    if let Some(want) = expect {
        let (file, meta) = match resolve::open_regular_nofollow(folder, name, path) {
            Ok(opened) => opened,
            Err(resolve::OpenOutcome::Symlink) => {
                return Err(VaultError::NotRegular {
                    path: path.clone(),
                    kind: "symlink",
                });
            }
            Err(resolve::OpenOutcome::Failed(e)) => return Err(e),
        };
        let bytes = resolve::read_capped(file, meta.len(), vault.limits.max_read_bytes, path)?;
        let now = sha256_hex(&bytes);
        if !now.eq_ignore_ascii_case(want) {
            return Err(VaultError::Changed {
                path: path.clone(),
                current_sha256: now,
            });
        }
    }
    Ok(false)
}

/// Renames `from` in `src` to `to` in `dst` unless `to` exists ([`super::sys`]). Errors name
/// `path`.
fn rename_between(
    src: &Dir,
    from: &str,
    dst: &Dir,
    to: &str,
    is_dir: bool,
    path: &VaultPath,
) -> Result<(), VaultError> {
    super::sys::rename_no_replace(src, from, dst, to, is_dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty => {
            VaultError::Exists(path.clone())
        }
        std::io::ErrorKind::InvalidInput => VaultError::Io {
            path: path.clone(),
            kind: std::io::ErrorKind::InvalidInput,
        },
        _ => VaultError::from_io(path, &e),
    })
}
