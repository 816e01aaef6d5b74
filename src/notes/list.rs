//! `list_notes`: the notes of a folder, newest first, paged with a keyset cursor.

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{NoteError, check_limit, cursor, rfc3339};
use crate::vault::{Vault, VaultPath, is_note_name};

/// Default and largest page size.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest page size a client may ask for.
pub const MAX_LIMIT: u32 = 1000;

/// What to list.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Folder to list (the root when empty).
    pub folder: VaultPath,
    /// Include notes in subfolders.
    pub recursive: bool,
    /// Page size.
    pub limit: Option<u32>,
    /// `next_cursor` from the previous page.
    pub cursor: Option<String>,
    /// Identifies the filters in force (0 for none), so a cursor cannot cross filters.
    pub filter_id: u64,
}

/// One note in a listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NoteSummary {
    /// Vault-relative path.
    pub path: String,
    /// Last modification time, RFC 3339 (UTC).
    pub modified: String,
    /// Size in bytes.
    pub size: u64,
}

/// One page of a listing.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ListPage {
    /// Notes on this page, newest first (ties by path).
    pub notes: Vec<NoteSummary>,
    /// Number of notes the query matches in all.
    pub total: usize,
    /// True when more notes follow this page (see `next_cursor`).
    pub truncated: bool,
    /// Pass this back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The sort key, and what a cursor remembers.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
struct Key {
    /// Modification time in nanoseconds since the epoch.
    m: u128,
    /// Path.
    p: String,
}

#[derive(Serialize, Deserialize)]
struct ListCursor {
    /// The folder and recursion of the query the cursor belongs to.
    f: String,
    r: bool,
    /// The filters of the query (see [`ListQuery::filter_id`]).
    #[serde(default)]
    x: u64,
    /// The last key returned.
    k: Key,
}

/// Newest first, then by path.
fn order(a: &Key, b: &Key) -> Ordering {
    b.m.cmp(&a.m).then_with(|| a.p.cmp(&b.p))
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Lists notes per `query`.
/// `keep`, when given, filters notes by path (tag, property and glob filters).
pub fn list_notes(
    vault: &Vault,
    query: &ListQuery,
    keep: Option<&dyn Fn(&VaultPath) -> bool>,
) -> Result<ListPage, NoteError> {
    let limit = check_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = match &query.cursor {
        Some(c) => {
            let c: ListCursor = cursor::decode(c)?;
            if c.f != query.folder.as_str() || c.r != query.recursive || c.x != query.filter_id {
                return Err(NoteError::InvalidArgument(
                    "this cursor belongs to a listing with other arguments; start again without a cursor"
                        .to_owned(),
                ));
            }
            Some(c.k)
        }
        None => None,
    };

    let mut all: Vec<(Key, SystemTime, u64)> = Vec::new();
    vault.walk(
        &query.folder,
        query.recursive,
        &is_note_name,
        &mut |entry| {
            if keep.is_some_and(|k| !k(&entry.path)) {
                return ControlFlow::Continue(());
            }
            match entry.meta(vault) {
                Ok(meta) => all.push((
                    Key {
                        m: nanos(meta.modified),
                        p: entry.path.as_str().to_owned(),
                    },
                    meta.modified,
                    meta.size,
                )),
                Err(e) => tracing::warn!(path = %entry.path, error = %e, "listing skipped a note"),
            }
            ControlFlow::Continue(())
        },
    )?;
    let total = all.len();
    all.sort_unstable_by(|a, b| order(&a.0, &b.0));

    let start = match &after {
        Some(k) => all.partition_point(|(key, _, _)| order(key, k) != Ordering::Greater),
        None => 0,
    };
    let page: Vec<_> = all.iter().skip(start).take(limit).collect();
    let next_cursor = if start + page.len() < all.len() {
        page.last().map(|(k, _, _)| {
            cursor::encode(&ListCursor {
                f: query.folder.as_str().to_owned(),
                r: query.recursive,
                x: query.filter_id,
                k: k.clone(),
            })
        })
    } else {
        None
    };
    Ok(ListPage {
        notes: page
            .into_iter()
            .map(|(k, modified, size)| NoteSummary {
                path: k.p.clone(),
                modified: rfc3339(*modified),
                size: *size,
            })
            .collect(),
        total,
        truncated: next_cursor.is_some(),
        next_cursor,
    })
}
