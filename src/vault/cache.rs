//! The search index's cache folder: a second capability, outside the vault.
//!
//! The index is rebuilt from the vault whenever this cache is missing, stale or damaged, so
//! nothing in it is trusted beyond what a checksum proves; it exists only so that a restart
//! reconciles instead of re-indexing every note. It lives under the user's cache folder
//! (`~/.cache/capvault` on Linux), one sub-folder per vault named after the vault root's device
//! and inode numbers (never its host path), and never inside the vault: [`IndexCacheDir::open`]
//! walks up from the cache folder, handle by handle, and refuses it if the vault root is one of
//! its ancestors (a string comparison of paths would miss symlinks).
//!
//! The folder is a [`PrivateDir`] (`0700` folders, `0600` files: the index holds every word of
//! the vault; another user's folder, or one others can write to, is refused, since what is in it
//! could have been planted to steer searches), and [`IndexCacheDir`] derefs to it: files are
//! written whole to a temporary name, synced, then renamed, so a crash leaves either the old or
//! the new file ([`PrivateDir::write`]); the index's positions files are created new and
//! written in place ([`PrivateDir::create`]), named by no manifest until synced. What this
//! module adds is the folder's layout: one `capvault` process per vault uses the folder at a
//! time (an exclusive lock on its `lock` file; a second one runs with its index in memory
//! only), and a `vault-birth` file says which vault its files belong to. Both names are
//! reserved: the index cannot reach them.

use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use super::Vault;
use super::private::{self, FolderError, Lock, PrivateDir};

pub use super::private::MAX_FILES;

/// Sub-folder of the cache root holding one index folder per vault; bump the suffix if the
/// layout below it changes.
const INDEX_FOLDER: &str = "index-1";
/// The lock file's name inside a vault's cache folder.
const LOCK_FILE: &str = "lock";
/// Which vault the folder's files belong to: the root's birth time. The folder is named after
/// the root's device and inode numbers, which a folder made after the vault was deleted can
/// reuse; its files must not be served for that other folder.
const BIRTH_FILE: &str = "vault-birth";
/// The names the folder keeps to itself.
const RESERVED: &[&str] = &[LOCK_FILE, BIRTH_FILE];
/// The embeddings cache's file (semantic search's vectors, `crate::semantic::saved`): the
/// search index's saves and clears leave it alone; a folder emptied for another vault loses it.
pub const EMBEDDINGS_FILE: &str = "embeddings.bin";
/// The notes' texts while a process runs (`crate::engine::texts`): a scratch file, made anew at
/// each start, that the index's saves and clears leave alone.
pub const TEXTS_FILE: &str = "texts.bin";
/// The other name of the texts' scratch file: a rewrite goes to the other name, never renamed
/// over the one in use.
pub const TEXTS_ALT_FILE: &str = "texts.bin.tmp";

/// The PDFs' texts (`--index-pdfs`, `crate::engine::pdfs`): the search index's saves and
/// clears leave it alone.
pub const PDF_TEXTS_FILE: &str = "pdf-texts.json";

/// The change log (`crate::engine::changes`): entries, and the note versions diffs need. The
/// search index's saves and clears leave them alone.
pub const CHANGES_LOG_FILE: &str = "changes.log";
/// See [`CHANGES_LOG_FILE`].
pub const CHANGES_TEXTS_FILE: &str = "changes.texts";

/// The files kept beside the index.
const SIDE_FILES: [&str; 6] = [
    EMBEDDINGS_FILE,
    CHANGES_LOG_FILE,
    CHANGES_TEXTS_FILE,
    TEXTS_FILE,
    TEXTS_ALT_FILE,
    PDF_TEXTS_FILE,
];

/// True for the files kept beside the index that its saves and clears must leave alone (and
/// the temporary names they are written under).
pub fn is_side_file(name: &str) -> bool {
    SIDE_FILES
        .iter()
        .any(|side| name == *side || name == private::temp_name(side))
}

/// Why the index cache cannot be used. Shown in `vault_info` and the log, so it never names a
/// host path.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache folder lies inside the vault.
    #[error("the index cache folder is inside the vault; it must be outside")]
    InsideVault,
    /// Another capvault process serves this vault with the same cache folder.
    #[error("another capvault process is using the index cache of this vault")]
    Busy,
    /// The path is relative after all, or names `..`.
    #[error("the index cache folder must be an absolute path without `..`")]
    BadPath,
    /// The vault's cache folder is another user's, or others may write in it: its content
    /// could have been planted.
    #[error("the index cache folder belongs to another user or others can write to it")]
    NotPrivate,
    /// The filesystem refused.
    #[error("index cache folder: {0}")]
    Io(#[from] io::Error),
}

impl From<FolderError> for CacheError {
    fn from(e: FolderError) -> CacheError {
        match e {
            FolderError::InsideVault => CacheError::InsideVault,
            FolderError::BadPath => CacheError::BadPath,
            FolderError::NotPrivate => CacheError::NotPrivate,
            FolderError::Io(e) | FolderError::Ancestor { source: e, .. } => CacheError::Io(e),
        }
    }
}

/// The cache folder of one vault's search index, open and locked for this process: a
/// [`PrivateDir`] (which it derefs to) with its lock and birth files reserved.
#[derive(Debug)]
pub struct IndexCacheDir {
    dir: PrivateDir,
    /// Held (and so locked) for the life of the process.
    _lock: Lock,
}

impl std::ops::Deref for IndexCacheDir {
    type Target = PrivateDir;

    fn deref(&self) -> &PrivateDir {
        &self.dir
    }
}

/// The default cache root: the platform's per-user cache folder plus `capvault`.
pub fn default_root() -> Option<std::path::PathBuf> {
    dirs::cache_dir().map(|d| d.join("capvault"))
}

/// The default root of downloaded embedding models: the cache root plus `models`
/// (`~/.cache/capvault/models` on Linux; see [`super::download`]).
pub fn models_root() -> Option<std::path::PathBuf> {
    default_root().map(|d| d.join("models"))
}

impl IndexCacheDir {
    /// Opens (creating what is missing) the cache folder of `vault` under `root`, and locks it
    /// without waiting. Refuses a `root` inside the vault before creating anything.
    pub fn open(root: &Path, vault: &Vault) -> Result<IndexCacheDir, CacheError> {
        let (dev, ino) = vault.identity()?;
        let dir = private::open_outside(root, vault, INDEX_FOLDER)?
            .sub_dir(&format!("{dev:x}-{ino:x}"))?;
        let lock = dir
            .lock(LOCK_FILE, Duration::ZERO)
            .map_err(|e| match e.kind() {
                io::ErrorKind::WouldBlock => CacheError::Busy,
                _ => CacheError::Io(e),
            })?;
        check_birth(&dir, vault.birth_time())?;
        Ok(IndexCacheDir {
            dir: dir.reserve(RESERVED),
            _lock: lock,
        })
    }
}

/// Empties `dir` when its files were written for another vault than `birth` says (another root
/// folder that reuses the inode number), or when it cannot say (written before it recorded
/// this); then records `birth`. Without a birth time (a filesystem that keeps none), the device
/// and inode numbers alone name the vault.
fn check_birth(dir: &PrivateDir, birth: Option<String>) -> Result<(), CacheError> {
    let Some(birth) = birth else {
        return Ok(());
    };
    let recorded = match dir.open_file(BIRTH_FILE) {
        Ok(f) => {
            let mut bytes = Vec::new();
            f.reader().take(256).read_to_end(&mut bytes)?;
            Some(bytes)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    if recorded.as_deref() == Some(birth.as_bytes()) {
        return Ok(());
    }
    // A clear cut short leaves files a load refuses (missing or damaged): rebuilt then.
    for name in dir.names()? {
        if !RESERVED.contains(&name.as_str()) {
            dir.remove(&name)?;
        }
    }
    dir.replace(BIRTH_FILE, birth.as_bytes())?;
    Ok(())
}

/// True for a name the cache may hold: one a [`PrivateDir`] accepts ([`private::valid_name`]),
/// other than the lock and birth files.
pub fn valid_name(name: &str) -> bool {
    private::valid_name(name) && !RESERVED.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    #[cfg(unix)]
    fn a_cache_folder_others_can_write_to_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        let cache = tmp.path().join("cache");
        drop(IndexCacheDir::open(&cache, &vault).unwrap());
        let folder = std::fs::read_dir(cache.join(INDEX_FOLDER))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            IndexCacheDir::open(&cache, &vault),
            Err(CacheError::NotPrivate)
        ));
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(IndexCacheDir::open(&cache, &vault).is_ok());
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn a_cache_written_for_another_folder_with_the_same_inode_is_emptied() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        assert!(
            vault.birth_time().is_some(),
            "this filesystem records no birth time"
        );
        let cache = tmp.path().join("cache");
        let dir = IndexCacheDir::open(&cache, &vault).unwrap();
        dir.write("seg.idx", b"index of this vault").unwrap();
        drop(dir);
        // Reopened for the same vault: kept, and the birth file is not one of its files.
        let dir = IndexCacheDir::open(&cache, &vault).unwrap();
        assert_eq!(dir.names().unwrap(), ["seg.idx"]);
        assert_eq!(
            dir.read("seg.idx", 100).unwrap().unwrap(),
            b"index of this vault"
        );
        drop(dir);
        // Recorded for another folder (what a reused inode number looks like): emptied.
        let folder = std::fs::read_dir(cache.join(INDEX_FOLDER))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::write(folder.join(BIRTH_FILE), "12345.000000000").unwrap();
        let dir = IndexCacheDir::open(&cache, &vault).unwrap();
        assert!(dir.names().unwrap().is_empty());
        assert_eq!(
            std::fs::read_to_string(folder.join(BIRTH_FILE)).unwrap(),
            vault.birth_time().unwrap()
        );
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture
    fn a_file_written_in_pieces_replaces_the_old_one_whole_or_not_at_all() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        let dir = IndexCacheDir::open(&tmp.path().join("cache"), &vault).unwrap();
        dir.write_with("vectors.bin", |w| {
            w.write_all(b"first ")?;
            w.write_all(b"save")
        })
        .unwrap();
        let file = dir.open_file("vectors.bin").unwrap();
        let mut back = Vec::new();
        file.reader().read_to_end(&mut back).unwrap();
        assert_eq!(back, b"first save");
        // A writer that fails half-way leaves the previous file, and no temporary file.
        let failed = dir.write_with("vectors.bin", |w| {
            w.write_all(b"second, cut")?;
            Err(io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(
            dir.read("vectors.bin", 100).unwrap().unwrap(),
            b"first save"
        );
        assert_eq!(dir.names().unwrap(), ["vectors.bin"]);
    }

    #[test]
    fn cache_file_names_are_plain_and_short() {
        assert!(valid_name("meta.json"));
        assert!(valid_name("0a1b2c3d.17.del"));
        for bad in [
            "",
            ".hidden",
            "a/b",
            "..",
            "lock",
            "vault-birth",
            "a\\b",
            &"x".repeat(101),
        ] {
            assert!(!valid_name(bad), "{bad:?} accepted");
        }
    }
}
