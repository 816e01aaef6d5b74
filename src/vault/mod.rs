//! The capability layer: the only code in capvault that touches the filesystem.
//!
//! [`Vault::open`] opens the vault root once as a [`cap_std::fs::Dir`] (through `ambient`, the
//! one function in the program allowed ambient authority) and never opens the root's host path
//! again (its last component is the vault's display name, and the state folder records the
//! whole path to recognise the vault after a restore). Every vault file is reached from that
//! handle:
//!
//! - [`path`]: [`VaultPath`], the validated vault-relative path every request is parsed into.
//! - [`resolve`](mod@resolve): a component-at-a-time, no-follow walk that splices in symlink
//!   targets itself, so policy (inside the vault, nothing hidden) holds on where a path really
//!   leads, race-free.
//! - [`scan`]: depth-first walks over directory handles.
//! - [`example`]: the embedded example vault used by `capvault demo`.
//! - [`write`](mod@write): the one way a file is written: atomic, durable, version-checked, in a folder
//!   handle the resolver checked.
//! - `ops`: the other changes a write tool makes (folders created, moves that never replace,
//!   Obsidian's `.trash`, permanent removal), each acting on one name in checked folder handles.
//! - [`private`]: [`private::PrivateDir`], the one type behind capvault's own folders outside
//!   the vault (the three below): opened and proven outside the vault, private to this user,
//!   one name rule, no symlink followed, atomic replace, one append-open, one lock.
//! - [`state`]: capvault's state folder outside the vault (note history, the audit log, the
//!   writers' lock), a third handle.
//! - [`cache`]: the search index's cache folder, outside the vault, opened as a second handle
//!   and proven not to lie inside the vault.
//! - [`host`]: the user's own files outside any vault (the config, token, TLS and model files,
//!   clients' configs), reached only through a [`host::Host`], which `main.rs` claims once.
//! - [`download`]: the folder an embedding model is downloaded into (`.part` files appended,
//!   renamed when their digest is right), acting on plain names in one folder handle.
//!
//! clippy's `disallowed-methods` (see `clippy.toml`) keeps `std::fs`, `tokio::fs` and
//! ambient-authority constructors out of every other module; the one `#[allow]` is on the
//! private function `ambient`, which only opens folders: the vault root for [`Vault::open`], and
//! the private folders (and their ancestors, to check where they lie) for [`private`].

pub mod cache;
pub mod download;
pub mod error;
pub mod example;
pub mod exclude;
pub mod host;
mod ops;
pub mod path;
pub mod private;
mod resolve;
pub mod sandbox;
pub mod scan;
pub mod state;
pub mod sys;
pub mod watch;
pub mod write;

use std::ops::ControlFlow;
use std::path::Path;
use std::time::SystemTime;

use cap_std::fs::{Dir, Metadata};

pub use error::VaultError;
pub use exclude::Exclusions;
pub use ops::{Entry, FolderSurvey, MAX_WRITE_DEPTH, Moved, TRASH_FOLDER};
pub use path::{PathError, VaultPath};
pub use resolve::MAX_SYMLINK_HOPS;
pub use scan::ScanEntry;
pub use write::{Expect, Written, sha256_hex};

use resolve::{Resolved, Want, read_capped, resolve};

/// Obsidian's default config folder name.
pub const DEFAULT_CONFIG_DIR: &str = ".obsidian";

/// Default cap on the size of a file read in one piece (8 MiB).
pub const DEFAULT_MAX_READ_BYTES: u64 = 8 * 1024 * 1024;

/// The highest cap a vault accepts (1 GiB): [`Vault::open`] lowers a larger
/// [`Limits::max_read_bytes`] to this. It keeps every position in a note read from the vault
/// within the `u32` of [`crate::markdown::Pos`], even after invalid UTF-8 is replaced (which at
/// most triples the text).
pub const MAX_READ_BYTES_LIMIT: u64 = 1 << 30;

/// Limits that bound what one operation may read.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Files larger than this are refused before any byte is read (at most
    /// [`MAX_READ_BYTES_LIMIT`]).
    pub max_read_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
        }
    }
}

/// Size and times of a file, taken from `fstat`/`fstatat` of the file itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// Length in bytes.
    pub size: u64,
    /// Last modification time (the Unix epoch if the platform has none).
    pub modified: SystemTime,
    /// Inode number, for change detection.
    pub ino: u64,
    /// Number of hard links: above 1 means another name, maybe outside the vault, shares it.
    pub nlink: u64,
    /// Creation (birth) time, where the file system records it (`statx` on Linux).
    pub created: Option<SystemTime>,
}

impl FileMeta {
    fn from_metadata(meta: &Metadata) -> Self {
        FileMeta {
            size: meta.len(),
            modified: meta
                .modified()
                .map(|t| t.into_std())
                .unwrap_or(SystemTime::UNIX_EPOCH),
            ino: sys::file_id(meta).1,
            nlink: sys::links(meta),
            created: meta.created().ok().map(|t| t.into_std()),
        }
    }
}

/// A file's bytes with the metadata of the very handle they were read from.
#[derive(Debug)]
pub struct FileData {
    /// The whole content (at most [`Limits::max_read_bytes`]).
    pub bytes: Vec<u8>,
    /// Metadata from `fstat` on the open handle.
    pub meta: FileMeta,
}

/// Why the vault root could not be opened. Shown only to the person who started the server,
/// so it may name the host path they typed.
#[derive(Debug, thiserror::Error)]
#[error("cannot open vault folder {path}: {source}")]
pub struct OpenError {
    path: String,
    #[source]
    source: std::io::Error,
}

/// An open vault: the capability to reach the files below one folder, and nothing else.
#[derive(Debug)]
pub struct Vault {
    /// The root handle. Every file operation starts here.
    root: Dir,
    /// The root folder's own name, for display (never the full host path).
    name: String,
    /// Read limits in force.
    limits: Limits,
    /// Name of Obsidian's config folder at the vault root (hidden from clients).
    config_dir: String,
    /// Paths the server's configuration removes from the vault.
    excluded: Exclusions,
    /// Folders writes are confined to (`--write-scope`), as real vault paths; empty: anywhere.
    write_scopes: Vec<VaultPath>,
    /// The absolute path the root was opened at (`.` and `..` removed): never opened again,
    /// only recorded, so that the state folder can recognise the vault after its folder is
    /// restored at the same path ([`state::identity`]).
    host_path: std::path::PathBuf,
}

/// Largest settings file read from the config folder.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The settings files capvault reads from the vault's config folder (`.obsidian`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigFile {
    /// `app.json`: links, attachments, trash, excluded files.
    App,
    /// `daily-notes.json`: the core Daily notes plugin.
    DailyNotes,
    /// `templates.json`: the core Templates plugin.
    Templates,
    /// `core-plugins.json`: which core plugins are enabled.
    CorePlugins,
    /// `community-plugins.json`: which community plugins are enabled.
    CommunityPlugins,
    /// `plugins/periodic-notes/data.json`: the Periodic Notes plugin.
    PeriodicNotes,
    /// `types.json`: each property's type (text, number, date...), as the Properties view sets it.
    Types,
    /// `plugins/dataview/data.json`: the Dataview plugin's settings.
    Dataview,
    /// `plugins/obsidian-tasks-plugin/data.json`: the Tasks plugin's settings.
    Tasks,
}

impl ConfigFile {
    /// The file's path inside the config folder.
    pub fn relative_path(self) -> &'static str {
        match self {
            ConfigFile::App => "app.json",
            ConfigFile::DailyNotes => "daily-notes.json",
            ConfigFile::Templates => "templates.json",
            ConfigFile::CorePlugins => "core-plugins.json",
            ConfigFile::CommunityPlugins => "community-plugins.json",
            ConfigFile::PeriodicNotes => "plugins/periodic-notes/data.json",
            ConfigFile::Types => "types.json",
            ConfigFile::Dataview => "plugins/dataview/data.json",
            ConfigFile::Tasks => "plugins/obsidian-tasks-plugin/data.json",
        }
    }
}

/// What [`ambient`] may do with the process's ambient authority.
pub(crate) enum Ambient<'a> {
    /// Open the folder at a host path (the vault root, a private folder or one of its
    /// ancestors, the audit log's folder, a host file's folder).
    Open(&'a Path),
    /// Open the parent (`..`) of a folder already open: used only to prove that a private
    /// folder is not inside the vault, and to find the name of a vault opened as `.`.
    Parent(&'a Dir),
}

/// The single function in capvault that uses ambient authority (clippy's `disallowed-methods`
/// forbids it everywhere else). It only opens folders; everything below them is reached from the
/// handles it returns.
#[allow(clippy::disallowed_methods)] // The single, documented use of ambient authority.
pub(crate) fn ambient(what: Ambient<'_>) -> std::io::Result<Dir> {
    match what {
        Ambient::Open(path) => Dir::open_ambient_dir(path, cap_std::ambient_authority()),
        Ambient::Parent(dir) => dir.open_parent_dir(cap_std::ambient_authority()),
    }
}

/// `path` made absolute against the current folder, with `.` and `..` removed by name (so
/// `capvault serve .` names the folder itself). Symlinks are not resolved: the path is the one
/// the user gave.
fn lexically_absolute(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The opened folder's own name, for display (never the host path): the last component of
/// `root`, or, when `root` has none (`.`, `..`, `notes/..`), the entry of the folder's parent
/// with the folder's device and inode. "vault" when nothing names it (`/`, a mount point).
fn own_name(root: &Path, dir: &Dir) -> String {
    /// Entries of the parent looked at, at most.
    const MAX_SIBLINGS: usize = 1_000_000;
    if let Some(n) = root.file_name() {
        return n.to_string_lossy().into_owned();
    }
    let found = || -> Option<String> {
        let me = dir.dir_metadata().ok()?;
        let parent = ambient(Ambient::Parent(dir)).ok()?;
        parent
            .entries()
            .ok()?
            .take(MAX_SIBLINGS)
            .flatten()
            .find_map(|e| {
                let m = e.metadata().ok()?;
                (m.is_dir() && sys::file_id(&m) == sys::file_id(&me))
                    .then(|| e.file_name().to_string_lossy().into_owned())
            })
    };
    found().unwrap_or_else(|| "vault".to_owned())
}

impl Vault {
    /// Opens the folder at `root` as a vault, through `ambient`: after it returns, the host
    /// path is never opened again (only recorded, see [`state::identity`]). A read cap above
    /// [`MAX_READ_BYTES_LIMIT`] is lowered to it.
    pub fn open(root: &Path, mut limits: Limits) -> Result<Vault, OpenError> {
        limits.max_read_bytes = limits.max_read_bytes.min(MAX_READ_BYTES_LIMIT);
        let dir = ambient(Ambient::Open(root)).map_err(|source| OpenError {
            path: root.display().to_string(),
            source,
        })?;
        let host_path = lexically_absolute(root);
        let name = own_name(root, &dir);
        Ok(Vault {
            root: dir,
            name,
            limits,
            config_dir: DEFAULT_CONFIG_DIR.to_owned(),
            excluded: Exclusions::default(),
            write_scopes: Vec::new(),
            host_path,
        })
    }

    /// The same vault with writes confined to `scopes` (folders; empty: anywhere), checked on
    /// where a path really leads (before it is shared).
    pub fn with_write_scopes(mut self, scopes: Vec<VaultPath>) -> Vault {
        self.write_scopes = scopes;
        self
    }

    /// The folders writes are confined to (empty: anywhere).
    pub fn write_scopes(&self) -> &[VaultPath] {
        &self.write_scopes
    }

    /// The same vault with `excluded` removed from it (before it is shared).
    pub fn with_exclusions(mut self, excluded: Exclusions) -> Vault {
        self.excluded = excluded;
        self
    }

    /// What is excluded.
    pub fn exclusions(&self) -> &Exclusions {
        &self.excluded
    }

    /// The root folder's device and inode numbers: names the vault in the index cache without
    /// looking at its host path.
    pub(crate) fn identity(&self) -> std::io::Result<(u64, u64)> {
        let meta = self.root.dir_metadata()?;
        Ok(sys::file_id(&meta))
    }

    /// When the root folder was created (its birth time, as `secs.nanos`), where the
    /// filesystem records it: with the device and inode numbers, it tells a vault from a later
    /// folder that reuses the inode of a deleted one.
    pub(crate) fn birth_time(&self) -> Option<String> {
        sys::birth_time(&self.root)
    }

    /// The absolute path the vault was opened at, for the state folder's record only.
    pub(crate) fn host_path(&self) -> &Path {
        &self.host_path
    }

    /// The vault's display name: the root folder's own name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Reads a whole regular file (a note or attachment) under the size cap.
    pub fn read_file(&self, path: &VaultPath) -> Result<FileData, VaultError> {
        match resolve(&self.root, path, Want::File, &self.excluded)? {
            Resolved::File { file, meta } => {
                let meta = FileMeta::from_metadata(&meta);
                let bytes = read_capped(file, meta.size, self.limits.max_read_bytes, path)?;
                Ok(FileData { bytes, meta })
            }
            Resolved::Dir { .. } => Err(VaultError::IsAFolder(path.clone())),
        }
    }

    /// Metadata of a regular file, without reading it.
    pub fn stat_file(&self, path: &VaultPath) -> Result<FileMeta, VaultError> {
        match resolve(&self.root, path, Want::File, &self.excluded)? {
            Resolved::File { meta, .. } => Ok(FileMeta::from_metadata(&meta)),
            Resolved::Dir { .. } => Err(VaultError::IsAFolder(path.clone())),
        }
    }

    /// Reads one of Obsidian's settings files from the vault's config folder, under a 1 MiB cap.
    /// `Ok(None)` when the file does not exist. The config folder is hidden from clients; only
    /// this fixed list of files is ever read from it, and never written.
    pub fn read_config(&self, file: ConfigFile) -> Result<Option<Vec<u8>>, VaultError> {
        let mut components: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        components.push_back(self.config_dir.clone());
        components.extend(file.relative_path().split('/').map(str::to_owned));
        let display = VaultPath::internal(&format!("{}/{}", self.config_dir, file.relative_path()));
        match resolve::resolve_components(
            &self.root,
            components,
            &display,
            Want::File,
            resolve::Hidden::Allow,
            &Exclusions::default(),
        ) {
            Ok(Resolved::File { file, meta }) => {
                read_capped(file, meta.len(), MAX_CONFIG_BYTES, &display).map(Some)
            }
            Ok(Resolved::Dir { .. }) => Err(VaultError::IsAFolder(display)),
            Err(VaultError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The name of the vault's config folder (`.obsidian` unless configured otherwise).
    pub fn config_dir(&self) -> &str {
        &self.config_dir
    }

    /// True when the root holds its config folder (a real folder, not a symlink): the folder
    /// Obsidian opened as a vault.
    pub fn has_config_dir(&self) -> bool {
        self.root
            .symlink_metadata(&self.config_dir)
            .is_ok_and(|m| m.is_dir())
    }

    /// The visible folders just below the root (at most `max`, in name order) that hold a
    /// config folder of their own: vaults inside this folder, for a person who named their
    /// parent. Read without following symlinks.
    pub fn folders_holding_a_vault(&self, max: usize) -> Vec<VaultPath> {
        let Ok(entries) = self.root.entries() else {
            return Vec::new();
        };
        let mut found: Vec<VaultPath> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.'))
            .filter(|name| {
                self.root
                    .symlink_metadata(format!("{name}/{}", self.config_dir))
                    .is_ok_and(|m| m.is_dir())
            })
            .filter_map(|name| VaultPath::parse(&name).ok())
            .collect();
        found.sort();
        found.truncate(max);
        found
    }

    /// Checks that `path` is a folder (through in-vault symlinks if need be).
    pub fn check_folder(&self, path: &VaultPath) -> Result<(), VaultError> {
        resolve(&self.root, path, Want::Dir, &self.excluded).map(|_| ())
    }

    /// Walks `folder` and calls `visit` for every regular file whose name passes `want_name`.
    /// See [`scan`] for what is skipped.
    pub fn walk(
        &self,
        folder: &VaultPath,
        recursive: bool,
        want_name: &dyn Fn(&str) -> bool,
        visit: &mut dyn FnMut(ScanEntry<'_>) -> ControlFlow<()>,
    ) -> Result<(), VaultError> {
        scan::walk(self, folder, recursive, want_name, visit)
    }

    /// Reads `name` in the already-open folder `dir` (used by scans: no re-walk from the root).
    /// The open does not follow symlinks; if `name` has become a symlink since the folder was
    /// listed, the read starts again from the root through the resolver.
    fn read_in(&self, dir: &Dir, name: &str, path: &VaultPath) -> Result<FileData, VaultError> {
        match resolve::open_regular_nofollow(dir, name, path) {
            Ok((file, meta)) => {
                let meta = FileMeta::from_metadata(&meta);
                let bytes = read_capped(file, meta.size, self.limits.max_read_bytes, path)?;
                Ok(FileData { bytes, meta })
            }
            Err(resolve::OpenOutcome::Symlink) => self.read_file(path),
            Err(resolve::OpenOutcome::Failed(e)) => Err(e),
        }
    }
}

// The capability layer's own attack and write tests use Unix symlinks, FIFOs and modes.
#[cfg(all(test, unix))]
mod tests;
#[cfg(all(test, unix))]
mod write_tests;
// Names other platforms read as another file: on every platform.
#[cfg(test)]
mod names_tests;

/// True for a file name that Obsidian treats as a note.
pub fn is_note_name(name: &str) -> bool {
    name.len() > 3 && name.ends_with(".md")
}
