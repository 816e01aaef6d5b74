//! `rename_tag` and `tag_note`: tags changed through the one write path.
//!
//! A rename finds its notes in the model's tag index (the tag and every tag nested under it),
//! then edits each note as it is on disk now ([`crate::markdown::tag_edit::rename_tag`], which
//! reads the result back before anything is written). Every note changed is one atomic,
//! version-checked write with its old version in the history, and every history line of one
//! rename carries the rename's id: `rename_tag(undo = id)` brings each of those notes back,
//! and only when none of them changed since (all or nothing; the undo is a rename of its own,
//! with its own id). `tag_note` edits one note's frontmatter list.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Serialize;

use super::history::read_log;
use super::{
    Change, Current, MAX_DIFF_BYTES, NoteName, WriteResult, Writer, check_version, existing,
    existing_note, read_current,
};
use crate::engine::Engine;
use crate::markdown::tag_edit::{self, TagEditError};
use crate::markdown::{normalize_tag, tag_matches_normalized};
use crate::notes::{NoteError, sha256_hex};
use crate::vault::VaultPath;

/// Most notes one rename changes.
pub const MAX_RENAMED_NOTES: usize = 20_000;
/// Most notes listed as skipped in a reply (the count is exact).
const MAX_SKIPPED_LISTED: usize = 100;
/// Most tags one `tag_note` call adds or removes.
const MAX_TAG_ARGS: usize = 100;

/// What `rename_tag` asks: a rename, or the undo of one.
#[derive(Debug, Clone)]
pub enum RenameTagRequest {
    Rename {
        from: String,
        to: String,
        dry_run: bool,
    },
    Undo {
        id: String,
        dry_run: bool,
    },
}

impl RenameTagRequest {
    /// Checks the arguments: `from` and `to` (tag names), or `undo` alone.
    pub fn new(
        from: Option<&str>,
        to: Option<&str>,
        undo: Option<&str>,
        dry_run: bool,
    ) -> Result<Self, NoteError> {
        let name = |what: &'static str, v: &str| {
            tag_edit::tag_name(v).map_err(|e| NoteError::invalid(what, format!("{what}: {e}")))
        };
        match (from, to, undo) {
            (None, None, Some(id)) => {
                let id = id.trim();
                if id.len() != 20
                    || !id.starts_with("tag-")
                    || !id[4..].bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(NoteError::invalid(
                        "undo",
                        "undo: the `batch` id a rename returned (tag- and 16 hex digits)",
                    ));
                }
                Ok(RenameTagRequest::Undo {
                    id: id.to_ascii_lowercase(),
                    dry_run,
                })
            }
            (Some(from), Some(to), None) => {
                let (from, to) = (name("from", from)?, name("to", to)?);
                if from == to {
                    return Err(NoteError::invalid("to", "from and to are the same tag"));
                }
                if normalize_tag(&to).starts_with(&format!("{}/", normalize_tag(&from))) {
                    return Err(NoteError::invalid(
                        "to",
                        format!("to: #{to} is nested under #{from}, which the rename changes too"),
                    ));
                }
                Ok(RenameTagRequest::Rename { from, to, dry_run })
            }
            _ => Err(NoteError::invalid(
                "from",
                "give `from` and `to`, or `undo` alone",
            )),
        }
    }
}

/// One note a rename changed (or would).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RenamedNote {
    pub path: String,
    /// Tags renamed in it (0 for an undo).
    pub tags: usize,
    /// Its new version (absent for a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The change (dry runs; the replies' diffs share one size bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// A note a rename left alone, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkippedNote {
    pub path: String,
    pub reason: String,
}

/// The reply of `rename_tag`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TagRename {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Pass it as `undo` to reverse this call (absent for a dry run or when nothing changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The notes changed (or, for a dry run, that would be), in path order.
    pub notes: Vec<RenamedNote>,
    /// Tags renamed in all.
    pub occurrences: usize,
    /// Dry runs: notes whose diff was left out (the diffs of one reply share a size bound).
    #[serde(skip_serializing_if = "is_zero")]
    pub diffs_omitted: usize,
    /// Notes that could not be changed (at most 100 listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedNote>,
    pub skipped_total: usize,
    pub dry_run: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A new rename's id: `tag-` and 16 hex digits.
fn batch_id(seed: &str) -> String {
    let nanos = crate::model::nanos(SystemTime::now());
    format!(
        "tag-{}",
        &sha256_hex(format!("{nanos}\n{seed}").as_bytes())[..16]
    )
}

/// Collects the reply's notes and skips, bounding the diffs.
struct Report {
    notes: Vec<RenamedNote>,
    skipped: Vec<SkippedNote>,
    skipped_total: usize,
    occurrences: usize,
    diff_bytes: usize,
    diffs_omitted: usize,
}

impl Report {
    fn new() -> Self {
        Report {
            notes: Vec::new(),
            skipped: Vec::new(),
            skipped_total: 0,
            occurrences: 0,
            diff_bytes: 0,
            diffs_omitted: 0,
        }
    }

    fn skip(&mut self, path: &VaultPath, reason: String) {
        self.skipped_total += 1;
        if self.skipped.len() < MAX_SKIPPED_LISTED {
            self.skipped.push(SkippedNote {
                path: path.to_string(),
                reason,
            });
        }
    }

    fn done(&mut self, w: WriteResult, tags: usize) {
        let had_diff = w.diff.is_some();
        let diff = w.diff.filter(|d| {
            self.diff_bytes += d.len();
            self.diff_bytes <= MAX_DIFF_BYTES
        });
        if had_diff && diff.is_none() {
            self.diffs_omitted += 1;
        }
        self.occurrences += tags;
        self.notes.push(RenamedNote {
            sha256: (!w.dry_run).then_some(w.sha256),
            path: w.path,
            tags,
            diff,
        });
    }
}

/// `rename_tag`: a rename across the vault, or the undo of one.
pub fn rename_tag(
    writer: &Writer,
    engine: &Engine,
    req: &RenameTagRequest,
) -> Result<TagRename, NoteError> {
    match req {
        RenameTagRequest::Rename { from, to, dry_run } => {
            rename(writer, engine, from, to, *dry_run)
        }
        RenameTagRequest::Undo { id, dry_run } => undo(writer, engine, id, *dry_run),
    }
}

fn rename(
    writer: &Writer,
    engine: &Engine,
    from: &str,
    to: &str,
    dry_run: bool,
) -> Result<TagRename, NoteError> {
    let from_n = normalize_tag(from);
    let paths: BTreeSet<VaultPath> = {
        let model = engine.model()?;
        model
            .tags()
            .range(from_n.clone()..)
            .take_while(|(tag, _)| tag.starts_with(&from_n))
            .filter(|(tag, _)| tag_matches_normalized(tag, &from_n))
            .flat_map(|(_, notes)| notes.iter().cloned())
            .collect()
    };
    if paths.len() > MAX_RENAMED_NOTES {
        return Err(NoteError::TooLarge(format!(
            "#{from} is in {} notes, over the {MAX_RENAMED_NOTES} one rename changes",
            paths.len()
        )));
    }
    let id = batch_id(&format!("{from}\n{to}"));
    let mut held = writer.hold(engine)?;
    let mut report = Report::new();
    for path in &paths {
        let current = match read_current(engine.vault(), path) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                report.skip(path, e.to_string());
                continue;
            }
        };
        let Ok(text) = std::str::from_utf8(&current.bytes) else {
            report.skip(path, "not UTF-8 text".to_owned());
            continue;
        };
        let renamed = match tag_edit::rename_tag(text, from, to) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                report.skip(path, e.to_string());
                continue;
            }
        };
        let change = Change {
            tool: "rename_tag",
            path,
            before: Some(&current),
            new: renamed.text.into_bytes(),
            dry_run,
        };
        match writer.commit_in(engine, &mut held, change, Some(&id)) {
            Ok(w) => report.done(w, renamed.count),
            Err(e) => report.skip(path, e.to_string()),
        }
    }
    Ok(TagRename {
        from: Some(from.to_owned()),
        to: Some(to.to_owned()),
        batch: (!dry_run && !report.notes.is_empty()).then_some(id),
        occurrences: report.occurrences,
        diffs_omitted: report.diffs_omitted,
        notes: report.notes,
        skipped: report.skipped,
        skipped_total: report.skipped_total,
        dry_run,
    })
}

fn undo(writer: &Writer, engine: &Engine, id: &str, dry_run: bool) -> Result<TagRename, NoteError> {
    let mut held = writer.hold(engine)?;
    // The rename's changes, each note once (its first change in the batch: a note is renamed
    // once per call).
    let mut seen = BTreeSet::new();
    let changes: Vec<(VaultPath, String, String)> = read_log(writer)?
        .into_iter()
        .filter(|l| l.batch.as_deref() == Some(id))
        .filter_map(|l| {
            let path = VaultPath::parse(&l.path).ok()?;
            let new = l.new_sha256?;
            seen.insert(path.clone()).then_some((path, l.sha256, new))
        })
        .collect();
    if changes.is_empty() {
        return Err(NoteError::NotFound {
            message: format!("no rename {id} in the history (it may have been pruned)"),
            suggestions: Vec::new(),
        });
    }
    // All or nothing: every note must still be as the rename left it.
    let limit = engine.vault().limits().max_read_bytes;
    let mut plan: Vec<(VaultPath, Current, Vec<u8>)> = Vec::new();
    let mut changed = Vec::new();
    let mut back = 0;
    let total = changes.len();
    for (path, old, new) in changes {
        let current = read_current(engine.vault(), &path)?;
        if current.as_ref().is_some_and(|c| c.sha256 == old) {
            back += 1;
        }
        match current {
            Some(c) if c.sha256 == new => {
                let bytes = writer
                    .state
                    .read_version(&old, limit)
                    .ok()
                    .flatten()
                    .filter(|b| sha256_hex(b) == old)
                    .ok_or_else(|| {
                        NoteError::Unavailable(format!(
                            "{path}: its version before the rename is no longer in the history; nothing was undone"
                        ))
                    })?;
                plan.push((path, c, bytes));
            }
            _ => changed.push(path.to_string()),
        }
    }
    if back == total {
        return Err(NoteError::Conflict(format!(
            "every note of {id} is already as it was before it; nothing to undo"
        )));
    }
    if !changed.is_empty() {
        let n = changed.len();
        changed.truncate(10);
        return Err(NoteError::Conflict(format!(
            "{n} note(s) changed since the rename ({}); nothing was undone: restore_note them one by one",
            changed.join(", ")
        )));
    }
    let undo_id = batch_id(id);
    let mut report = Report::new();
    // What the undo restores, read from each note's two versions: the tags the rename wrote
    // (`from` of the undo) go back to the ones it replaced (`to`).
    let mut names: (BTreeMap<String, usize>, BTreeMap<String, usize>) = Default::default();
    for (path, current, bytes) in &plan {
        let (gone, back) = tag_difference(&current.bytes, bytes);
        let tags = gone.values().sum::<usize>().max(back.values().sum());
        for (k, n) in gone {
            *names.0.entry(k).or_default() += n;
        }
        for (k, n) in back {
            *names.1.entry(k).or_default() += n;
        }
        let change = Change {
            tool: "rename_tag",
            path,
            before: Some(current),
            new: bytes.clone(),
            dry_run,
        };
        match writer.commit_in(engine, &mut held, change, Some(&undo_id)) {
            Ok(w) => report.done(w, tags),
            Err(e) => report.skip(path, e.to_string()),
        }
    }
    // The names, most frequent first (a rename of a tag with nested tags has several).
    let named = |m: BTreeMap<String, usize>| {
        let mut v: Vec<(String, usize)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        (!v.is_empty()).then(|| {
            v.into_iter()
                .map(|(k, _)| format!("#{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    Ok(TagRename {
        from: named(names.0),
        to: named(names.1),
        batch: (!dry_run && !report.notes.is_empty()).then_some(undo_id),
        occurrences: report.occurrences,
        diffs_omitted: report.diffs_omitted,
        notes: report.notes,
        skipped: report.skipped,
        skipped_total: report.skipped_total,
        dry_run,
    })
}

/// The tags `now` has more of than `before` (by name, with how many more), and those
/// `before` has more of: what a rename wrote, and what it replaced.
fn tag_difference(now: &[u8], before: &[u8]) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let count = |bytes: &[u8]| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for t in crate::markdown::parse_note(&String::from_utf8_lossy(bytes)).tags {
            *m.entry(t.name.to_string()).or_default() += 1;
        }
        m
    };
    let (a, b) = (count(now), count(before));
    let more = |x: &BTreeMap<String, usize>, y: &BTreeMap<String, usize>| {
        x.iter()
            .filter_map(|(k, &n)| {
                let m = y.get(k).copied().unwrap_or(0);
                (n > m).then(|| (k.clone(), n - m))
            })
            .collect::<BTreeMap<String, usize>>()
    };
    (more(&a, &b), more(&b, &a))
}

/// What `tag_note` asks.
#[derive(Debug, Clone)]
pub struct TagNoteRequest {
    note: NoteName,
    add: Vec<String>,
    remove: Vec<String>,
    if_match: Option<String>,
    dry_run: bool,
}

impl TagNoteRequest {
    /// Checks the tag names (`#` optional).
    pub fn new(
        note: NoteName,
        add: &[String],
        remove: &[String],
        if_match: Option<String>,
        dry_run: bool,
    ) -> Result<Self, NoteError> {
        if add.is_empty() && remove.is_empty() {
            return Err(NoteError::invalid("add", "give tags to `add` or `remove`"));
        }
        if add.len() + remove.len() > MAX_TAG_ARGS {
            return Err(NoteError::invalid(
                "add",
                format!("at most {MAX_TAG_ARGS} tags in one call"),
            ));
        }
        let names = |what: &'static str, list: &[String]| -> Result<Vec<String>, NoteError> {
            list.iter()
                .map(|t| {
                    tag_edit::tag_name(t)
                        .map_err(|e| NoteError::invalid(what, format!("{what}: {e}")))
                })
                .collect()
        };
        Ok(TagNoteRequest {
            note,
            add: names("add", add)?,
            remove: names("remove", remove)?,
            if_match,
            dry_run,
        })
    }
}

/// An inline tag `tag_note` was asked to remove and left in the text.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InlineTag {
    pub tag: String,
    pub line: u32,
}

/// The reply of `tag_note`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TagNoteResult {
    #[serde(flatten)]
    pub write: WriteResult,
    /// The frontmatter's tags now.
    pub tags: Vec<String>,
    /// Tags asked to be removed that are written in the body (`#tag` is text: edit_note
    /// changes it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inline_left: Vec<InlineTag>,
}

/// `tag_note`: tags added to and removed from one note's frontmatter.
pub fn tag_note(
    writer: &Writer,
    engine: &Engine,
    req: &TagNoteRequest,
) -> Result<TagNoteResult, NoteError> {
    let path = existing_note(engine, &req.note)?;
    let mut held = writer.hold(engine)?;
    let (current, text) = existing(engine.vault(), &path, req.if_match.as_deref())?;
    check_version(&path, &current, req.if_match.as_deref())?;
    let r = tag_edit::retag(&text, &req.add, &req.remove).map_err(|e| match e {
        TagEditError::Frontmatter(e) => super::frontmatter_error(&path, e, "add"),
        e @ TagEditError::InvalidName(_) => NoteError::invalid("add", format!("{path}: {e}")),
        e @ TagEditError::Unverified { .. } => NoteError::invalid("path", format!("{path}: {e}")),
    })?;
    let write = writer.commit(
        engine,
        &mut held,
        Change {
            tool: "tag_note",
            path: &path,
            before: Some(&current),
            new: r.text.into_bytes(),
            dry_run: req.dry_run,
        },
    )?;
    Ok(TagNoteResult {
        write,
        tags: r.tags,
        inline_left: r
            .inline_left
            .into_iter()
            .map(|(tag, line)| InlineTag { tag, line })
            .collect(),
    })
}
