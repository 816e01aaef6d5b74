//! The note operations behind the tools: reading, listing, searching.
//!
//! Plain functions over a [`Vault`]: no MCP types here, so they are tested directly and the
//! tool handlers stay thin. Every result is bounded (limits on counts, on excerpt length, on
//! file size through the vault's read cap).

pub mod bases;
pub mod cancel;
pub mod changes;
pub mod cursor;
pub mod files;
pub mod filter;
pub mod graph;
pub mod knowledge;
pub mod list;
pub mod locate;
pub mod paging;
pub mod periodic;
pub mod prompts;
pub mod query;
pub mod related;
pub mod search;
pub mod settings;
pub mod tasks;
pub mod view;
pub mod write;

use serde::Serialize;

use crate::vault::{Vault, VaultError, VaultPath};

/// An error from a note operation, with a message written for the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoteError {
    /// The vault refused or failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// An argument is out of range or malformed. The tool edge puts `param` in the error's
    /// structured form (`_meta["capvault/error"]["param"]`); the message is `reason`.
    #[error("{reason}")]
    InvalidArgument {
        /// The tool (or prompt) parameter to change, as its input schema names it (`path`,
        /// `limit`, `cursor`...). When arguments conflict, the one the reason names first, or
        /// the one whose change fixes the call.
        param: &'static str,
        /// What is wrong, written for the model; it names the parameter itself where that
        /// reads better, since clients show only this sentence.
        reason: String,
    },
    /// No file by that path or name; `suggestions` are paths the client may have meant.
    #[error("{message}")]
    NotFound {
        /// What was not found, naming the vault path or name asked for.
        message: String,
        /// At most five vault paths.
        suggestions: Vec<String>,
    },
    /// A bare name matches several notes; `suggestions` lists them.
    #[error("{message}")]
    Ambiguous {
        /// Which name, and how many notes it matches.
        message: String,
        /// At most five vault paths.
        suggestions: Vec<String>,
    },
    /// A file or a reply over a size limit.
    #[error("{0}")]
    TooLarge(String),
    /// The vault model is not built yet.
    #[error("{0}")]
    NotReady(String),
    /// The server's configuration does not allow it.
    #[error("{0}")]
    Refused(String),
    /// The search index or the disk failed; a retry may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// A `changes_since` cursor whose changes are no longer kept (the message names the
    /// oldest cursor kept).
    #[error("{0}")]
    CursorExpired(String),
    /// Files changed since a call's plan was made (several of them: one file's change is a
    /// [`VaultError::Changed`]).
    #[error("{0}")]
    Conflict(String),
    /// The request went past its own budget (steps, time or bytes); the message names the bound.
    #[error("{0}")]
    BudgetExceeded(String),
    /// The process's memory for evaluations and decodes is in use by other requests.
    #[error("{0}")]
    Busy(String),
}

impl NoteError {
    /// An [`InvalidArgument`](NoteError::InvalidArgument) error about `param`.
    pub fn invalid(param: &'static str, reason: impl Into<String>) -> NoteError {
        NoteError::InvalidArgument {
            param,
            reason: reason.into(),
        }
    }

    /// The error of a request whose budget is [`Spent`](crate::obsidian::budget::Spent).
    pub fn spent(spent: crate::obsidian::budget::Spent, message: String) -> NoteError {
        use crate::obsidian::budget::Spent;
        match spent {
            Spent::Cancelled => cancel::cancelled(),
            Spent::Busy => NoteError::Busy(message),
            Spent::Steps(_) | Spent::Time(_) | Spent::Bytes(_) => {
                NoteError::BudgetExceeded(message)
            }
        }
    }
}

impl From<crate::vault::PathError> for NoteError {
    fn from(e: crate::vault::PathError) -> Self {
        NoteError::Vault(VaultError::from(e))
    }
}

/// A note's text with the facts a client needs to cite and, later, to edit it safely.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NoteText {
    /// Vault-relative path of the note.
    pub path: String,
    /// The note's full text.
    pub content: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time, RFC 3339 (UTC).
    pub modified: String,
    /// SHA-256 of the exact bytes, lowercase hex: the version write tools will check.
    pub sha256: String,
}

/// Reads a note (any regular UTF-8 text file in the vault).
pub fn read_note(vault: &Vault, path: &VaultPath) -> Result<NoteText, NoteError> {
    let data = vault.read_file(path)?;
    let sha256 = sha256_hex(&data.bytes);
    let content = String::from_utf8(data.bytes).map_err(|_| VaultError::NotUtf8(path.clone()))?;
    Ok(NoteText {
        path: path.to_string(),
        content,
        size: data.meta.size,
        modified: rfc3339(data.meta.modified),
        sha256,
    })
}

pub use crate::vault::sha256_hex;

pub use crate::model::rfc3339;

/// Checks `limit` against `1..=max`, or uses `default` when absent.
pub(crate) fn check_limit(limit: Option<u32>, default: u32, max: u32) -> Result<usize, NoteError> {
    check_count("limit", limit, default, max)
}

/// Checks the count `param` against `1..=max`, or uses `default` when absent.
pub(crate) fn check_count(
    param: &'static str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<usize, NoteError> {
    match value {
        None => Ok(default as usize),
        Some(n) if (1..=max).contains(&n) => Ok(n as usize),
        Some(n) => Err(NoteError::invalid(
            param,
            format!("`{param}` must be between 1 and {max} (got {n})"),
        )),
    }
}
