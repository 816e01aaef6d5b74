//! [`VaultError`]: what can go wrong inside the capability layer.
//!
//! Every variant names the failing path only as a [`VaultPath`] (vault-relative), and never
//! carries an `io::Error` whose text could mention a host path: I/O failures are reduced to
//! their [`std::io::ErrorKind`].

use std::io;

use super::path::{PathError, VaultPath};

/// An error from a vault operation. `Display` gives the short, actionable message that tool
/// replies show to the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// The client's path was refused before touching the disk.
    #[error("invalid path: {0}")]
    InvalidPath(#[from] PathError),
    /// Nothing exists at the path (or a component on the way is not a folder).
    #[error("{0}: not found")]
    NotFound(VaultPath),
    /// The path resolves (through a symlink) to a location outside the vault.
    #[error("{0}: leads outside the vault (through a symlink)")]
    Escapes(VaultPath),
    /// The path resolves (through a symlink) into a hidden file or folder.
    #[error("{0}: leads into a hidden file or folder (through a symlink)")]
    LeadsToHidden(VaultPath),
    /// Too many symlinks on the way, or a symlink loop.
    #[error("{0}: too many levels of symlinks")]
    SymlinkLoop(VaultPath),
    /// The path is excluded from the vault by the server's configuration (`--exclude`).
    #[error("{0}: excluded by the server's configuration")]
    Excluded(VaultPath),
    /// A file was expected but a folder was found.
    #[error("{0}: is a folder, not a file")]
    IsAFolder(VaultPath),
    /// A folder was expected but something else was found.
    #[error("{0}: is not a folder")]
    NotAFolder(VaultPath),
    /// A FIFO, socket, device or other non-regular file.
    #[error("{path}: is a {kind}, not a regular file")]
    NotRegular {
        /// Where it is.
        path: VaultPath,
        /// What kind of file it is (`FIFO`, `socket`, `device`...).
        kind: &'static str,
    },
    /// The file is larger than the configured read cap.
    #[error("{path}: is {size} bytes, over the {limit}-byte limit for reading")]
    TooLarge {
        /// Where it is.
        path: VaultPath,
        /// Its size in bytes.
        size: u64,
        /// The cap in force.
        limit: u64,
    },
    /// The note is not valid UTF-8 text.
    #[error("{0}: is not valid UTF-8 text")]
    NotUtf8(VaultPath),
    /// A file was to be created where one exists.
    #[error("{0}: already exists")]
    Exists(VaultPath),
    /// The file is not at the version the writer expected.
    #[error("{path}: changed since it was read (its sha256 is now {current_sha256})")]
    Changed {
        /// Where it is.
        path: VaultPath,
        /// The version it has now.
        current_sha256: String,
    },
    /// The location is outside the folders writes are confined to (`--write-scope`).
    #[error("{0}: outside the folders this server may write to")]
    OutsideWriteScope(VaultPath),
    /// The work was stopped because the server is shutting down.
    #[error("stopped: the server is shutting down")]
    Stopped,
    /// The operating system refused (permissions and the like).
    #[error("{path}: {}", describe_io(*kind))]
    Io {
        /// Where it happened.
        path: VaultPath,
        /// The kind of failure, without the OS message.
        kind: io::ErrorKind,
    },
}

impl VaultError {
    /// Maps an `io::Error` from an operation on `path` to a `VaultError`, keeping only its kind.
    pub(crate) fn from_io(path: &VaultPath, err: &io::Error) -> Self {
        match err.kind() {
            io::ErrorKind::NotFound => VaultError::NotFound(path.clone()),
            io::ErrorKind::NotADirectory => VaultError::NotAFolder(path.clone()),
            io::ErrorKind::IsADirectory => VaultError::IsAFolder(path.clone()),
            kind => VaultError::Io {
                path: path.clone(),
                kind,
            },
        }
    }

    /// True when the error means "nothing there" rather than "refused".
    pub fn is_not_found(&self) -> bool {
        matches!(self, VaultError::NotFound(_))
    }
}

fn describe_io(kind: io::ErrorKind) -> &'static str {
    match kind {
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::InvalidData => "unreadable data",
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => {
            "temporarily unavailable; try again"
        }
        _ => "could not be read",
    }
}
