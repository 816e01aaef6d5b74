//! Files of the user's own outside any vault, for `capvault install` and `capvault doctor`:
//! MCP clients' config files, and the kernel's inotify limit. Each is reached by opening its
//! folder through [`ambient`] (the one use of ambient authority) and then acting on its name in
//! that handle, never following a link at the last step. Errors may name the host path: only the
//! user who typed the command sees them.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, MetadataExt, OpenOptions, OpenOptionsExt};

use super::{Ambient, ambient};

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
    /// The file at `path` (which need not exist, nor its folder).
    pub fn at(path: &Path) -> Result<HostFile, String> {
        let shown = path.display().to_string();
        let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(format!("{shown}: not a file path"));
        };
        let name = name
            .to_str()
            .ok_or_else(|| format!("{shown}: the name is not UTF-8"))?
            .to_owned();
        let dir = match ambient(Ambient::Open(folder)) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", folder.display())),
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
    pub fn read(&self) -> Result<Option<Vec<u8>>, String> {
        self.read_up_to(MAX_HOST_FILE_BYTES)
    }

    /// [`HostFile::read`] with another cap (`capvault bundle` reads its own binary).
    pub fn read_up_to(&self, max: u64) -> Result<Option<Vec<u8>>, String> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let mut file = match dir.open(&self.name) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", self.shown)),
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
    ) -> Result<Vec<u8>, String> {
        let meta = file
            .metadata()
            .map_err(|e| format!("{}: {e}", self.shown))?;
        if !meta.is_file() {
            return Err(format!("{}: not a regular file", self.shown));
        }
        if private && meta.mode() & 0o077 != 0 {
            return Err(format!(
                "{}: others may read or change it (mode {:o}); run `chmod 600 {}`",
                self.shown,
                meta.mode() & 0o777,
                self.shown
            ));
        }
        let too_large = || format!("{}: larger than {max} bytes", self.shown);
        if meta.len() > max {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        Read::take(file, max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: {e}", self.shown))?;
        if bytes.len() as u64 > max {
            return Err(too_large());
        }
        Ok(bytes)
    }

    /// A file that holds secrets (`--token-file`, a TLS key): read like [`HostFile::read`], but
    /// never through a symlink, and refused when its permission bits let anyone but its owner
    /// read or write it (`chmod 600` fixes that). Missing is an error here.
    pub fn read_private(&self, max: u64) -> Result<Vec<u8>, String> {
        self.read_nofollow(max, true)
    }

    /// A file that need not be secret (a TLS certificate), read without following a symlink at
    /// the last step. Missing is an error here.
    pub fn read_public(&self, max: u64) -> Result<Vec<u8>, String> {
        self.read_nofollow(max, false)
    }

    fn read_nofollow(&self, max: u64, private: bool) -> Result<Vec<u8>, String> {
        let Some(dir) = &self.dir else {
            return Err(format!("{}: the folder does not exist", self.shown));
        };
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let mut file = dir.open_with(&self.name, &options).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("{}: no such file", self.shown)
            } else {
                format!("{}: {e} (symlinks are not followed here)", self.shown)
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
    ) -> Result<Option<String>, String> {
        let err = |e: std::io::Error| format!("{}: {e}", self.shown);
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
                return Err(format!(
                    "{}: is a symlink; edit the file it points to yourself",
                    self.shown
                ));
            }
            Ok(meta) if !meta.is_file() => {
                return Err(format!("{}: not a regular file", self.shown));
            }
            Ok(meta) => {
                mode = meta.mode() & 0o7777;
                if mode & 0o200 == 0 {
                    return Err(format!("{}: is read-only; left unchanged", self.shown));
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
                            Err(e) => return Err(format!("{}: backup: {e}", self.shown)),
                        }
                    }
                    if backed_up.is_none() {
                        return Err(format!("{}: no free backup name", self.shown));
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
        dir.open_with(".", OpenOptions::new().read(true))
            .and_then(|d| d.sync_all())
            .map_err(err)?;
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
            .mode(mode),
    )?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Opens `folder`, creating it and any missing folder above it.
fn create_folders(folder: &Path) -> Result<Dir, String> {
    let mut missing = Vec::new();
    let mut at = folder;
    let mut dir = loop {
        match ambient(Ambient::Open(at)) {
            Ok(d) => break d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(name), Some(parent)) = (at.file_name(), at.parent()) else {
                    return Err(format!("{}: {e}", folder.display()));
                };
                missing.push(name.to_owned());
                at = parent;
            }
            Err(e) => return Err(format!("{}: {e}", at.display())),
        }
    };
    for name in missing.iter().rev() {
        let mut b = DirBuilder::new();
        b.mode(0o755);
        match dir.create_dir_with(name, &b) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("{}: {e}", folder.display())),
        }
        use cap_fs_ext::DirExt;
        dir = dir
            .open_dir_nofollow(name)
            .map_err(|e| format!("{}: {e}", folder.display()))?;
    }
    Ok(dir)
}

/// Reads a passphrase: from the terminal without echo, asked twice (`prompt`, then `again`)
/// and compared, or one line from stdin when stdin is not a terminal (scripts, tests).
pub fn read_passphrase(prompt: &str, again: &str) -> Result<String, String> {
    use rustix::termios::{self, LocalModes, OptionalActions};
    let stdin = std::io::stdin();
    let line = || -> Result<String, String> {
        let mut s = String::new();
        std::io::stdin()
            .read_line(&mut s)
            .map_err(|e| format!("cannot read the passphrase: {e}"))?;
        Ok(s.trim_end_matches(['\n', '\r']).to_owned())
    };
    if !termios::isatty(&stdin) {
        return line();
    }
    let saved = termios::tcgetattr(&stdin).map_err(|e| format!("terminal: {e}"))?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    let ask = |text: &str| -> Result<String, String> {
        eprint!("{text}");
        let _ = std::io::stderr().flush();
        termios::tcsetattr(&stdin, OptionalActions::Now, &quiet)
            .map_err(|e| format!("terminal: {e}"))?;
        let got = line();
        let _ = termios::tcsetattr(&stdin, OptionalActions::Now, &saved);
        eprintln!();
        got
    };
    let first = ask(prompt)?;
    if ask(again)? != first {
        return Err("the two passphrases differ".to_owned());
    }
    Ok(first)
}
