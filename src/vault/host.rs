//! Files of the user's own outside any vault: the config file, `--token-file`, the TLS and
//! JWKS files, an embedding model's files, MCP clients' config files, the kernel's inotify limit.
//! Only a [`Host`] turns a host path into access, and `src/main.rs` claims the one `Host` of the
//! program ([`Host::claim`]) and passes `&Host` to the commands that need it (`tests/layers.rs`
//! checks that nothing else claims one). Each file is reached by opening its folder through
//! [`ambient`] (the one use of ambient authority) and then acting on its name in that handle,
//! never following a link at the last step. Errors may name the host path: only the user who
//! typed the command sees them.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::sys::UnixMode;
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, OpenOptions};

use super::download::{DownloadDir, DownloadError};
use super::{Ambient, ambient};

/// The authority to reach the user's own files outside any vault by host path. Made only by
/// [`Host::claim`]; everything that turns a host path into access takes `&Host`. (The vault
/// root, capvault's state and index cache folders and the audit log are opened by their own
/// types: [`super::Vault::open`], [`super::state::StateDir::open`],
/// [`super::cache::IndexCacheDir::open`], [`super::state::AuditFile::open`].)
#[derive(Clone, Copy, Debug)]
pub struct Host {
    _claimed: (),
}

impl Host {
    /// The one place the program takes the authority over host paths: `src/main.rs` calls
    /// this once and passes `&Host` down (tests and benches may call it too; `tests/layers.rs`
    /// fails when any other file in `src/` does).
    pub fn claim() -> Host {
        Host { _claimed: () }
    }

    /// The file at `path` (which need not exist, nor its folder).
    pub fn file(&self, path: &Path) -> Result<HostFile, HostError> {
        HostFile::at(path)
    }

    /// The user's own config file at `path` (`--config`, or the default location), under a
    /// 1 MiB cap: its folder is opened through `ambient`, then the file is read by name
    /// through that handle. `Ok(None)` when it does not exist. The error names the path the
    /// user gave (it is shown only to them, at startup).
    pub fn user_config(&self, path: &Path) -> Result<Option<Vec<u8>>, HostError> {
        read_user_config(path)
    }

    /// The folder at `path` that a model is downloaded into (absolute or relative to the
    /// current folder, without `..`), created with `mode` when missing: see
    /// [`super::download`].
    pub fn download_dir(&self, path: &Path, mode: u32) -> Result<DownloadDir, DownloadError> {
        DownloadDir::create(path, mode)
    }
}

/// Why a host file could not be had: which file (the path as the user gave it), what went
/// wrong. The messages may show the host path: only the user who typed the command sees them.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The path has no folder or no file name (`/`, `..`).
    #[error("{path}: not a file path")]
    NotAFilePath { path: String },
    /// The file name is not UTF-8.
    #[error("{path}: the name is not UTF-8")]
    NameNotUtf8 { path: String },
    /// The operating system refused (the path is the file, or the folder that failed).
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Not a regular file (a folder, a device...).
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    /// A private file others may read or change.
    #[error("{path}: others may read or change it (mode {mode:o}); run `chmod 600 {path}`")]
    NotPrivate { path: String, mode: u32 },
    /// Larger than the cap of what reads it.
    #[error("{path}: larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    /// The user's config file is over its cap, or could not be read.
    #[error("{path}: over {max} bytes, or unreadable")]
    ConfigUnreadable { path: String, max: u64 },
    /// A file that must exist is in a folder that does not.
    #[error("{path}: the folder does not exist")]
    NoFolder { path: String },
    /// A file that must exist does not.
    #[error("{path}: no such file")]
    Missing { path: String },
    /// Opening without following a symlink failed.
    #[error("{path}: {source} (symlinks are not followed here)")]
    NoFollow {
        path: String,
        source: std::io::Error,
    },
    /// A symlink where a file is to be replaced.
    #[error("{path}: is a symlink; edit the file it points to yourself")]
    Symlink { path: String },
    /// A file its owner made read-only.
    #[error("{path}: is read-only; left unchanged")]
    ReadOnly { path: String },
    /// The backup copy could not be written.
    #[error("{path}: backup: {source}")]
    Backup {
        path: String,
        source: std::io::Error,
    },
    /// Every backup name is taken.
    #[error("{path}: no free backup name")]
    NoBackupName { path: String },
}

impl HostError {
    fn io(path: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> HostError {
        let path = path.to_string();
        move |source| HostError::Io { path, source }
    }
}

/// Why a passphrase could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PassphraseError {
    /// Reading stdin failed.
    #[error("cannot read the passphrase: {0}")]
    Read(std::io::Error),
    /// The terminal's settings could not be read or changed.
    #[error("terminal: {0}")]
    Terminal(std::io::Error),
    /// This system's terminal cannot be asked to stop echoing here.
    #[error(
        "cannot hide the passphrase as it is typed on this system: pipe it in instead \
         (one line on stdin)"
    )]
    NoEchoControl,
    /// The passphrase and its repetition differ.
    #[error("the two passphrases differ")]
    Differ,
}

/// Largest user config file (`--config`) read.
pub const MAX_USER_CONFIG_BYTES: u64 = 1024 * 1024;

fn read_user_config(path: &Path) -> Result<Option<Vec<u8>>, HostError> {
    let shown = path.display().to_string();
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(HostError::NotAFilePath { path: shown });
    };
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let dir = match ambient(Ambient::Open(folder)) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HostError::io(&shown)(e)),
    };
    let file = match dir.open(name) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HostError::io(&shown)(e)),
    };
    let meta = file.metadata().map_err(HostError::io(&shown))?;
    if !meta.is_file() {
        return Err(HostError::NotAFile { path: shown });
    }
    let display = super::VaultPath::internal("config.toml");
    super::resolve::read_capped(file, meta.len(), MAX_USER_CONFIG_BYTES, &display)
        .map(Some)
        .map_err(|_| HostError::ConfigUnreadable {
            path: shown,
            max: MAX_USER_CONFIG_BYTES,
        })
}

/// Largest file read this way.
pub const MAX_HOST_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A file at a host path, its folder open (when the folder exists).
#[derive(Debug)]
pub struct HostFile {
    dir: Option<Dir>,
    folder: PathBuf,
    name: String,
    shown: String,
    /// Written readable by its owner only, whatever mode it had.
    private: bool,
}

impl HostFile {
    /// The file at `path` (which need not exist, nor its folder): [`Host::file`].
    fn at(path: &Path) -> Result<HostFile, HostError> {
        let shown = path.display().to_string();
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(HostError::NotAFilePath { path: shown });
        };
        let Some(name) = name.to_str() else {
            return Err(HostError::NameNotUtf8 { path: shown });
        };
        let name = name.to_owned();
        let dir = match ambient(Ambient::Open(folder)) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(HostError::io(folder.display())(e)),
        };
        Ok(HostFile {
            dir,
            folder: folder.to_path_buf(),
            name,
            shown,
            private: false,
        })
    }

    /// The file written by [`HostFile::replace`] is readable and writable by its owner only
    /// (`0600`), even when it had wider permissions: for what carries traces of a vault.
    pub fn private(mut self) -> HostFile {
        self.private = true;
        self
    }

    /// The path as given, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// True when the file's folder exists.
    pub fn folder_exists(&self) -> bool {
        self.dir.is_some()
    }

    /// True when a regular file is there (a symlink to one counts).
    pub fn is_file(&self) -> bool {
        self.dir
            .as_ref()
            .is_some_and(|d| d.metadata(&self.name).is_ok_and(|m| m.is_file()))
    }

    /// The file's bytes (at most [`MAX_HOST_FILE_BYTES`]); `None` when it does not exist. A
    /// symlink is followed only here, for reading (some users link their dotfiles).
    pub fn read(&self) -> Result<Option<Vec<u8>>, HostError> {
        self.read_up_to(MAX_HOST_FILE_BYTES)
    }

    /// [`HostFile::read`] with another cap (`capvault bundle` reads its own binary).
    pub fn read_up_to(&self, max: u64) -> Result<Option<Vec<u8>>, HostError> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let mut file = match dir.open(&self.name) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(HostError::io(&self.shown)(e)),
        };
        self.read_open(&mut file, max, false).map(Some)
    }

    /// The bytes of `file`, opened from this path: a regular file of at most `max` bytes
    /// (checked before and while reading), private to its owner when `private`.
    fn read_open(
        &self,
        file: &mut cap_std::fs::File,
        max: u64,
        private: bool,
    ) -> Result<Vec<u8>, HostError> {
        let path = || self.shown.clone();
        let meta = file.metadata().map_err(HostError::io(&self.shown))?;
        if !meta.is_file() {
            return Err(HostError::NotAFile { path: path() });
        }
        if private && super::sys::mode(&meta) & 0o077 != 0 {
            return Err(HostError::NotPrivate {
                path: path(),
                mode: super::sys::mode(&meta) & 0o777,
            });
        }
        let too_large = || HostError::TooLarge { path: path(), max };
        if meta.len() > max {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        Read::take(file, max + 1)
            .read_to_end(&mut bytes)
            .map_err(HostError::io(&self.shown))?;
        if bytes.len() as u64 > max {
            return Err(too_large());
        }
        Ok(bytes)
    }

    /// A file that holds secrets (`--token-file`, a TLS key): read like [`HostFile::read`], but
    /// never through a symlink, and refused when its permission bits let anyone but its owner
    /// read or write it (`chmod 600` fixes that). Missing is an error here.
    pub fn read_private(&self, max: u64) -> Result<Vec<u8>, HostError> {
        self.read_nofollow(max, true)
    }

    /// A file that need not be secret (a TLS certificate), read without following a symlink at
    /// the last step. Missing is an error here.
    pub fn read_public(&self, max: u64) -> Result<Vec<u8>, HostError> {
        self.read_nofollow(max, false)
    }

    fn read_nofollow(&self, max: u64, private: bool) -> Result<Vec<u8>, HostError> {
        let path = self.shown.clone();
        let Some(dir) = &self.dir else {
            return Err(HostError::NoFolder { path });
        };
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let mut file = dir.open_with(&self.name, &options).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                HostError::Missing { path }
            } else {
                HostError::NoFollow { path, source: e }
            }
        })?;
        self.read_open(&mut file, max, private)
    }

    /// Replaces the file with `bytes` atomically (temporary file, sync, rename, folder sync),
    /// keeping its permission bits, after copying what is there now to `backup` (a new name in
    /// the same folder). Creates missing folders (`0755`). A file its owner made read-only, or
    /// a symlink, is refused, not replaced. Returns the backup's name (`backup`, or `backup-1`...
    /// when that is taken).
    pub fn replace(
        &mut self,
        bytes: &[u8],
        backup: Option<&str>,
    ) -> Result<Option<String>, HostError> {
        let path = self.shown.clone();
        let err = |source: std::io::Error| HostError::Io {
            path: self.shown.clone(),
            source,
        };
        // Read before the folder handle is borrowed below (nothing to back up when missing).
        let old = match backup {
            Some(_) => self.read()?,
            None => None,
        };
        let dir: &Dir = match self.dir {
            Some(ref d) => d,
            None => self.dir.insert(create_folders(&self.folder)?),
        };
        let mut mode = 0o644;
        let mut backed_up = None;
        match dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(HostError::Symlink { path });
            }
            Ok(meta) if !meta.is_file() => {
                return Err(HostError::NotAFile { path });
            }
            Ok(meta) => {
                mode = super::sys::mode(&meta) & 0o7777;
                if mode & 0o200 == 0 {
                    return Err(HostError::ReadOnly { path });
                }
                if let Some(b) = backup {
                    let old = old.clone().unwrap_or_default();
                    for n in 0..100 {
                        let name = if n == 0 {
                            b.to_owned()
                        } else {
                            format!("{b}-{n}")
                        };
                        match write_new(dir, &name, &old, mode) {
                            Ok(()) => {
                                backed_up = Some(name);
                                break;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                            Err(source) => return Err(HostError::Backup { path, source }),
                        }
                    }
                    if backed_up.is_none() {
                        return Err(HostError::NoBackupName { path });
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        if self.private {
            mode = 0o600;
        }
        let temp = format!(".{}.capvault-tmp-{}", self.name, std::process::id());
        let _ = dir.remove_file(&temp);
        write_new(dir, &temp, bytes, mode).map_err(err)?;
        if let Err(e) = dir.rename(&temp, dir, &self.name) {
            let _ = dir.remove_file(&temp);
            return Err(err(e));
        }
        super::sys::sync_folder(dir).map_err(err)?;
        Ok(backed_up)
    }
}

/// Creates a new file `name` in `dir` (never replacing) with `bytes` and `mode`, synced.
fn write_new(dir: &Dir, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut file = dir.open_with(
        name,
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .follow(FollowSymlinks::No)
            .unix_mode(mode),
    )?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Opens `folder`, creating it and any missing folder above it.
fn create_folders(folder: &Path) -> Result<Dir, HostError> {
    let mut missing = Vec::new();
    let mut at = folder;
    let mut dir = loop {
        match ambient(Ambient::Open(at)) {
            Ok(d) => break d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(name), Some(parent)) = (at.file_name(), at.parent()) else {
                    return Err(HostError::io(folder.display())(e));
                };
                missing.push(name.to_owned());
                at = parent;
            }
            Err(e) => return Err(HostError::io(at.display())(e)),
        }
    };
    for name in missing.iter().rev() {
        let mut b = DirBuilder::new();
        b.unix_mode(0o755);
        match dir.create_dir_with(name, &b) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(HostError::io(folder.display())(e)),
        }
        use cap_fs_ext::DirExt;
        dir = dir
            .open_dir_nofollow(name)
            .map_err(HostError::io(folder.display()))?;
    }
    Ok(dir)
}

/// The shell-quoted form of `s` (a host path, an argument) for a command printed for the person
/// to run: as it is when it holds only characters no shell treats specially, else in single
/// quotes.
pub fn shell_quoted(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:,@+".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// True when stdin is a terminal (a person typing, not a pipe or a program).
pub fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}

/// One line from stdin, without its line end.
pub fn read_line() -> std::io::Result<String> {
    let mut s = String::new();
    std::io::stdin().read_line(&mut s)?;
    Ok(s.trim_end_matches(['\n', '\r']).to_owned())
}

/// Reads a passphrase: from the terminal without echo, asked twice (`prompt`, then `again`)
/// and compared, or one line from stdin when stdin is not a terminal (scripts, tests).
pub fn read_passphrase(prompt: &str, again: &str) -> Result<String, PassphraseError> {
    let line = || -> Result<String, PassphraseError> {
        let mut s = String::new();
        std::io::stdin()
            .read_line(&mut s)
            .map_err(PassphraseError::Read)?;
        Ok(s.trim_end_matches(['\n', '\r']).to_owned())
    };
    if !stdin_is_terminal() {
        return line();
    }
    #[cfg(not(unix))]
    {
        let _ = (prompt, again);
        Err(PassphraseError::NoEchoControl)
    }
    #[cfg(unix)]
    read_hidden_twice(prompt, again, line)
}

/// Asks for the passphrase twice in the terminal with echo off (Unix's termios).
#[cfg(unix)]
fn read_hidden_twice(
    prompt: &str,
    again: &str,
    line: impl Fn() -> Result<String, PassphraseError>,
) -> Result<String, PassphraseError> {
    use rustix::termios::{self, LocalModes, OptionalActions};
    let stdin = std::io::stdin();
    let saved = termios::tcgetattr(&stdin).map_err(|e| PassphraseError::Terminal(e.into()))?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    let ask = |text: &str| -> Result<String, PassphraseError> {
        eprint!("{text}");
        let _ = std::io::stderr().flush();
        termios::tcsetattr(&stdin, OptionalActions::Now, &quiet)
            .map_err(|e| PassphraseError::Terminal(e.into()))?;
        let got = line();
        let _ = termios::tcsetattr(&stdin, OptionalActions::Now, &saved);
        eprintln!();
        got
    };
    let first = ask(prompt)?;
    if ask(again)? != first {
        return Err(PassphraseError::Differ);
    }
    Ok(first)
}
