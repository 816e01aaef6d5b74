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
//! Folders are created `0700` and files `0600`: the index holds every word of the vault. A vault's
//! cache folder that belongs to another user, or that others can write to, is refused (what is in
//! it could have been planted to steer searches). Files
//! are written whole to a temporary name, synced, then renamed, so a crash leaves either the old
//! or the new file ([`IndexCacheDir::write`]); the index's positions files are created new and
//! written in place ([`IndexCacheDir::create`]), named by no manifest until synced. One `capvault` process per vault uses the folder at a time (an exclusive lock
//! on its `lock` file); a second one runs with its index in memory only.

use std::io::{self, Read, Write};
use std::path::{Component, Path};

use super::sys::UnixMode;
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, OpenOptions};

use super::{Ambient, Vault, ambient};

/// Sub-folder of the cache root holding one index folder per vault; bump the suffix if the
/// layout below it changes.
const INDEX_FOLDER: &str = "index-1";
/// The lock file's name inside a vault's cache folder.
const LOCK_FILE: &str = "lock";
/// Which vault the folder's files belong to: the root's birth time. The folder is named after
/// the root's device and inode numbers, which a folder made after the vault was deleted can
/// reuse; its files must not be served for that other folder.
const BIRTH_FILE: &str = "vault-birth";
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

/// True for the files kept beside the index that its saves and clears must leave alone.
pub fn is_side_file(name: &str) -> bool {
    name == EMBEDDINGS_FILE
        || name == CHANGES_LOG_FILE
        || name == CHANGES_TEXTS_FILE
        || name == format!("{CHANGES_LOG_FILE}.tmp")
        || name == format!("{CHANGES_TEXTS_FILE}.tmp")
        || name == TEXTS_FILE
        || name == TEXTS_ALT_FILE
        || name == PDF_TEXTS_FILE
}

/// Longest file name accepted in the cache folder.
const MAX_NAME: usize = 100;
/// Most files listed from the cache folder.
pub const MAX_FILES: usize = 100_000;
/// Ancestors checked above the cache folder before giving up (deeper is refused).
const MAX_DEPTH: usize = 256;

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

/// The cache folder of one vault's search index, open and locked for this process.
#[derive(Debug)]
pub struct IndexCacheDir {
    dir: Dir,
    /// Held open (and so locked) for the life of the process.
    _lock: cap_std::fs::File,
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
    /// The folder's handle, for the sandbox's rules (Landlock, Linux).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Opens (creating what is missing) the cache folder of `vault` under `root`, and locks it.
    /// Refuses a `root` inside the vault before creating anything.
    pub fn open(root: &Path, vault: &Vault) -> Result<IndexCacheDir, CacheError> {
        let dir = open_private(root, vault, INDEX_FOLDER)?;
        let lock = dir.open_with(
            LOCK_FILE,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .follow(FollowSymlinks::No)
                .unix_mode(0o600),
        )?;
        let lock = lock_exclusive(lock)?;
        let cache = IndexCacheDir { dir, _lock: lock };
        cache.check_birth(vault.birth_time())?;
        Ok(cache)
    }

    /// Empties the folder when its files were written for another vault than `birth` says
    /// (another root folder that reuses the inode number), or when it cannot say (written before
    /// it recorded this); then records `birth`. Without a birth time (a filesystem that keeps
    /// none), the device and inode numbers alone name the vault.
    fn check_birth(&self, birth: Option<String>) -> Result<(), CacheError> {
        let Some(birth) = birth else {
            return Ok(());
        };
        let recorded = match self.dir.open_with(
            BIRTH_FILE,
            OpenOptions::new().read(true).follow(FollowSymlinks::No),
        ) {
            Ok(f) => {
                let mut bytes = Vec::new();
                Read::take(f, 256).read_to_end(&mut bytes)?;
                Some(bytes)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        if recorded.as_deref() == Some(birth.as_bytes()) {
            return Ok(());
        }
        // A clear cut short leaves files a load refuses (missing or damaged): rebuilt then.
        for name in self.names()? {
            if valid_name(&name) {
                self.remove(&name)?;
            }
        }
        let tmp = format!("{BIRTH_FILE}.tmp");
        let _ = self.dir.remove_file(&tmp);
        let mut file = self.dir.open_with(
            &tmp,
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .follow(FollowSymlinks::No)
                .unix_mode(0o600),
        )?;
        file.write_all(birth.as_bytes())?;
        file.sync_all()?;
        drop(file);
        self.dir.rename(&tmp, &self.dir, BIRTH_FILE)?;
        self.sync()?;
        Ok(())
    }

    /// The names of the files in the folder (at most [`MAX_FILES`]), lock file excepted.
    pub fn names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in self.dir.entries()? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name != LOCK_FILE && name != BIRTH_FILE && entry.file_type()?.is_file() {
                out.push(name);
                if out.len() >= MAX_FILES {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Reads a whole file, refusing one larger than `max` bytes.
    pub fn read(&self, name: &str, max: u64) -> io::Result<Vec<u8>> {
        check_name(name)?;
        let mut file = self.dir.open_with(
            name,
            OpenOptions::new().read(true).follow(FollowSymlinks::No),
        )?;
        let len = file.metadata()?.len();
        if len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is larger than {max} bytes"),
            ));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        Read::take(&mut file, max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} grew past {max} bytes"),
            ));
        }
        Ok(bytes)
    }

    /// Opens a file for reads at offsets (the index serves its cached segments from the disk
    /// this way, instead of holding them in memory). The handle stays valid if the file is
    /// removed from the folder meanwhile.
    pub fn open_file(&self, name: &str) -> io::Result<CacheFile> {
        check_name(name)?;
        let file = self.dir.open_with(
            name,
            OpenOptions::new().read(true).follow(FollowSymlinks::No),
        )?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is not a regular file"),
            ));
        }
        Ok(CacheFile {
            file,
            len: meta.len(),
        })
    }

    /// Creates file `name`, which must not exist, to be written in place: the index's segment
    /// files as tantivy writes them, which no manifest names until they are complete and
    /// synced ([`CacheWriter::finish`], [`CacheFile::sync`]). Never follows a symlink.
    pub fn create(&self, name: &str) -> io::Result<CacheWriter> {
        check_name(name)?;
        let file = self.dir.open_with(
            name,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .follow(FollowSymlinks::No)
                .unix_mode(0o600),
        )?;
        Ok(CacheWriter { file, len: 0 })
    }

    /// Writes a whole file atomically: to a temporary name, synced, then renamed over `name`.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_with(name, |file| file.write_all(bytes))
    }

    /// Writes a whole file atomically, its bytes written by `fill` as they are made (so a large
    /// file is never held whole in memory): to a temporary name, synced, then renamed over
    /// `name`. If `fill` fails, the temporary file is removed and `name` is left as it was.
    pub fn write_with(
        &self,
        name: &str,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        check_name(name)?;
        let tmp = format!("{name}.tmp");
        let _ = self.dir.remove_file(&tmp);
        let mut file = self.dir.open_with(
            &tmp,
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .follow(FollowSymlinks::No)
                .unix_mode(0o600),
        )?;
        let written = fill(&mut file).and_then(|()| file.sync_all());
        drop(file);
        if let Err(e) = written {
            let _ = self.dir.remove_file(&tmp);
            return Err(e);
        }
        self.dir.rename(&tmp, &self.dir, name)
    }

    /// Appends `bytes` to file `name` (created `0600` when missing, never through a symlink)
    /// and makes them durable. Returns the offset they were written at (the file's length
    /// before). One writer at a time: the caller serialises appends to one file.
    pub fn append(&self, name: &str, bytes: &[u8]) -> io::Result<u64> {
        check_name(name)?;
        let mut file = self.dir.open_with(
            name,
            OpenOptions::new()
                .append(true)
                .create(true)
                .follow(FollowSymlinks::No)
                .unix_mode(0o600),
        )?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is not a regular file"),
            ));
        }
        file.write_all(bytes)?;
        file.sync_data()?;
        Ok(meta.len())
    }

    /// Creates `name` empty, for reads and writes at offsets while this process runs: whatever
    /// had the name (a file, or a symlink planted there) is removed first, and the new file is
    /// created with no symlink followed.
    pub fn scratch(&self, name: &str) -> io::Result<ScratchFile> {
        self.remove(name)?;
        Ok(ScratchFile {
            file: self.create(name)?.file,
        })
    }

    /// Renames `from` over `to` (both names in the folder).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        self.dir.rename(from, &self.dir, to)
    }

    /// Removes a file (a missing file is not an error).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        check_name(name)?;
        match self.dir.remove_file(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Makes the renames done so far durable.
    pub fn sync(&self) -> io::Result<()> {
        super::sys::sync_folder(&self.dir)
    }
}

/// A cache file open for reading at offsets.
#[derive(Debug)]
pub struct CacheFile {
    file: cap_std::fs::File,
    len: u64,
}

impl CacheFile {
    /// Its length when opened (cache files are never rewritten in place).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `buf` from `offset`; a file cut short since it was opened is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        super::sys::read_exact_at(&self.file, buf, offset)
    }

    /// Reads the file front to back, its length when opened at most (for a file too large
    /// to read whole).
    pub fn reader(&self) -> impl Read + '_ {
        Read::take(&self.file, self.len)
    }

    /// Makes the file's content durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

/// A scratch file open for reads and writes at offsets (see [`IndexCacheDir::scratch`]).
#[derive(Debug)]
pub struct ScratchFile {
    file: cap_std::fs::File,
}

impl ScratchFile {
    /// Writes all of `buf` at `offset` (the file grows as needed).
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        super::sys::write_all_at(&self.file, buf, offset)
    }

    /// Fills `buf` from `offset`; a file shorter than that is an error.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        super::sys::read_exact_at(&self.file, buf, offset)
    }
}

/// A new cache file being written (see [`IndexCacheDir::create`]).
#[derive(Debug)]
pub struct CacheWriter {
    file: cap_std::fs::File,
    len: u64,
}

impl Write for CacheWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl CacheWriter {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before anything is written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives up on the file (the folder refused a write): returns the bytes written so far,
    /// read back. The caller removes the file.
    pub fn abandon(self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large"))?;
        let mut bytes = vec![0; len];
        super::sys::read_exact_at(&self.file, &mut bytes, 0)?;
        Ok(bytes)
    }

    /// The file, complete, open for reads at offsets (not yet synced).
    pub fn finish(mut self) -> io::Result<CacheFile> {
        self.file.flush()?;
        Ok(CacheFile {
            file: self.file,
            len: self.len,
        })
    }
}

/// True for a name the cache may hold: 1 to [`MAX_NAME`] bytes of ASCII letters, digits, `.`,
/// `-` and `_`, not starting with a dot.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name != LOCK_FILE
        && name != BIRTH_FILE
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

fn check_name(name: &str) -> io::Result<()> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a name the index cache holds",
        ))
    }
}

/// Opens sub-folder `name` of `dir`, creating it `0700` if missing. Never follows a symlink.
pub(super) fn sub_dir(dir: &Dir, name: &Path) -> io::Result<Dir> {
    let mut builder = DirBuilder::new();
    builder.unix_mode(0o700);
    match dir.create_dir_with(name, &builder) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = dir.symlink_metadata(name)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a cache folder is not a folder (a symlink?)",
        ));
    }
    dir.open_dir_nofollow(name)
}

/// Fails when `vault` (device, inode) is `dir` or one of its ancestors.
pub(super) fn ensure_outside(dir: &Dir, vault: (u64, u64)) -> Result<(), CacheError> {
    let id = |d: &Dir| -> io::Result<(u64, u64)> {
        let m = d.dir_metadata()?;
        Ok(super::sys::file_id(&m))
    };
    let mut here = id(dir)?;
    let mut parent = ambient(Ambient::Parent(dir))?;
    for _ in 0..MAX_DEPTH {
        if here == vault {
            return Err(CacheError::InsideVault);
        }
        let up = id(&parent)?;
        if up == here {
            return Ok(()); // the filesystem root is its own parent
        }
        here = up;
        parent = ambient(Ambient::Parent(&parent))?;
    }
    Err(CacheError::BadPath)
}

/// Opens (creating what is missing, `0700`) the folder `kind/<vault id>` under `root`, which must
/// lie outside the vault (checked before anything is created) and be private to this user.
pub(super) fn open_private(root: &Path, vault: &Vault, kind: &str) -> Result<Dir, CacheError> {
    let vault_id = vault.identity()?;
    let dir = open_private_base(root, vault, kind)?;
    let name = format!("{:x}-{:x}", vault_id.0, vault_id.1);
    private_sub_dir(&dir, &name)
}

/// Opens (creating it `0700` when missing) the folder `name` in `dir`, and checks it is private
/// to this user.
pub(super) fn private_sub_dir(dir: &Dir, name: &str) -> Result<Dir, CacheError> {
    let dir = sub_dir(dir, Path::new(name))?;
    let meta = dir.dir_metadata()?;
    if !super::sys::private_to_owner(&meta) {
        return Err(CacheError::NotPrivate);
    }
    Ok(dir)
}

/// Opens (creating what is missing, `0700`) the folder `kind` under `root`, which must lie
/// outside the vault (checked before anything is created).
pub(super) fn open_private_base(root: &Path, vault: &Vault, kind: &str) -> Result<Dir, CacheError> {
    let root = std::path::absolute(root)?;
    if root
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(CacheError::BadPath);
    }
    let vault_id = vault.identity()?;
    // The deepest ancestor that exists; the rest is created below it, after the check.
    let mut missing = Vec::new();
    let mut at = root.as_path();
    let mut dir = loop {
        match ambient(Ambient::Open(at)) {
            Ok(d) => break d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (Some(name), Some(parent)) = (at.file_name(), at.parent()) else {
                    return Err(e.into());
                };
                missing.push(name.to_owned());
                at = parent;
            }
            Err(e) => return Err(e.into()),
        }
    };
    ensure_outside(&dir, vault_id)?;
    for name in missing.iter().rev() {
        dir = sub_dir(&dir, Path::new(name))?;
    }
    let dir = sub_dir(&dir, Path::new(kind))?;
    let meta = dir.dir_metadata()?;
    if !super::sys::private_to_owner(&meta) {
        return Err(CacheError::NotPrivate);
    }
    Ok(dir)
}

/// Takes an exclusive lock on the open file, without waiting (released when the process ends,
/// however it ends).
fn lock_exclusive(file: cap_std::fs::File) -> Result<cap_std::fs::File, CacheError> {
    super::sys::try_lock(file).map_err(|(_, why)| match why {
        super::sys::LockFailed::Busy => CacheError::Busy,
        super::sys::LockFailed::Io(e) => CacheError::Io(e),
    })
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
        assert_eq!(dir.read("seg.idx", 100).unwrap(), b"index of this vault");
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
        assert_eq!(dir.read("vectors.bin", 100).unwrap(), b"first save");
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
