//! What a reconcile changed in the notes, as the change log records it: each step named.
//!
//! The reconcile's changes are sorted into notes changed (logged as they are), notes gone and
//! notes new; on the first reconcile after a restart, the notes the index cache held that the
//! vault no longer has are gone too; then the gone and the new are paired into moves, the rest
//! being deletions and creations.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{ChangeKind, ChangeLog, MAX_ONE_TEXT, Observed, Sha, sha_of};
use crate::model::Change;
use crate::vault::{FileMeta, VaultPath, is_note_name};

/// Each note read that was not as the index cache had it: its content's hash, size and text
/// (the text when small enough to keep).
pub(in crate::engine) type Hashed = HashMap<VaultPath, (Sha, u64, Option<Arc<str>>)>;

/// What one reconcile read, for [`observe`].
pub(in crate::engine) struct Found<'a> {
    /// The first reconcile of this process.
    pub first: bool,
    /// On a first reconcile, the notes the index cache held (their stamps).
    pub cached: Option<&'a crate::engine::cache::Stamps>,
    /// The model before the reconcile.
    pub model: &'a crate::model::Model,
    /// The notes' kept texts before the reconcile.
    pub texts: Option<&'a crate::engine::Texts>,
    /// See [`Hashed`].
    pub hashed: Hashed,
}

/// A file's identity across a rename: its inode, and what a new file given a freed inode
/// number would not share (its birth time where known, its size and modification time).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity {
    ino: u64,
    born: Option<SystemTime>,
    size: u64,
    mtime: Option<SystemTime>,
}

impl Identity {
    fn of(meta: &FileMeta) -> Identity {
        Identity {
            ino: meta.ino,
            born: meta.created,
            size: meta.size,
            mtime: Some(meta.modified),
        }
    }

    fn of_stamp(s: &crate::index::Stamp) -> Identity {
        let mtime = u64::try_from(s.mtime_ns)
            .ok()
            .map(|ns| UNIX_EPOCH + Duration::from_nanos(ns));
        Identity {
            ino: s.ino,
            born: None,
            size: s.size,
            mtime,
        }
    }

    /// True when `self` (gone) and `new` are one file renamed: the same inode, and the same
    /// birth time (or, where one is unknown, the same size and modification time).
    fn renamed_to(&self, new: &Identity) -> bool {
        if self.ino == 0 || self.ino != new.ino {
            return false;
        }
        match (self.born, new.born) {
            (Some(a), Some(b)) => a == b,
            _ => self.size == new.size && self.mtime.is_some() && self.mtime == new.mtime,
        }
    }
}

/// A note gone: deleted, or moved if a new note pairs with it.
struct Gone {
    path: VaultPath,
    id: Identity,
    sha: Option<Sha>,
    size: u64,
}

/// A note new: created, or moved if a gone note pairs with it.
struct New {
    path: VaultPath,
    id: Identity,
    sha: Option<Sha>,
    size: u64,
}

/// The changes to notes a reconcile found, as entries to log (sorted by path), and the
/// versions to keep for diffs. A note whose content is what the log last saw (a file touched,
/// or a change already logged before a restart) is not logged again; a note gone and one new
/// with the same inode or the same content are one move.
pub(in crate::engine) fn observe(
    log: &ChangeLog,
    changes: &[Change],
    found: Found<'_>,
) -> (Vec<Observed>, Vec<(Sha, Arc<str>)>) {
    let mut seen = Seen::new(log, found);
    for c in changes {
        match c {
            Change::Note(p, meta, ..) => seen.note_read(p, meta),
            Change::File(p, meta) if is_note_name(p.file_name()) => seen.note_unread(p, meta),
            Change::Removed(p) if is_note_name(p.file_name()) && seen.existed(p) => {
                seen.note_removed(p);
            }
            _ => {}
        }
    }
    seen.notes_gone_while_stopped(changes);
    seen.finish()
}

/// What [`observe`] has sorted so far: the entries to log as they are, the notes gone and the
/// notes new (paired at the end), and the versions to keep.
struct Seen<'a> {
    log: &'a ChangeLog,
    found: Found<'a>,
    out: Vec<Observed>,
    keep: Vec<(Sha, Arc<str>)>,
    gone: Vec<Gone>,
    new: Vec<New>,
}

impl<'a> Seen<'a> {
    fn new(log: &'a ChangeLog, found: Found<'a>) -> Seen<'a> {
        Seen {
            log,
            found,
            out: Vec::new(),
            keep: Vec::new(),
            gone: Vec::new(),
            new: Vec::new(),
        }
    }

    /// True when `p` was there before this reconcile: in the index cache on a first reconcile
    /// (nothing without one), else in the model.
    fn existed(&self, p: &VaultPath) -> bool {
        match (self.found.first, self.found.cached) {
            (true, Some(c)) => c.contains_key(p),
            (true, None) => false,
            (false, _) => self.found.model.files().contains_key(p),
        }
    }

    /// The content of `p` before this reconcile: its kept text's (that text kept for diffs
    /// when the log has it not), else what the log last saw.
    fn before(&mut self, p: &VaultPath) -> Option<Sha> {
        let texts = self.found.texts;
        if !self.found.first
            && let Some(kept) = texts.and_then(|t| t.get(p))
        {
            let sha = sha_of(&kept.text);
            if !self.log.has_text(&sha) && kept.text.len() <= MAX_ONE_TEXT {
                self.keep.push((sha, Arc::from(kept.text.as_ref())));
            }
            return Some(sha);
        }
        self.log.last_known(p).flatten()
    }

    /// A note read: changed, unless its content is what it was (or, on a first reconcile, what
    /// the log last saw); or new. Its text is kept for diffs.
    fn note_read(&mut self, p: &VaultPath, meta: &FileMeta) {
        let Some((sha, size, text)) = self.found.hashed.remove(p) else {
            // As the index cache had it.
            return;
        };
        if self.found.first && self.log.last_known(p) == Some(Some(sha)) {
            return;
        }
        if self.existed(p) {
            let before = self.before(p);
            if before == Some(sha) {
                return;
            }
            if let Some(t) = text {
                self.keep.push((sha, t));
            }
            self.out.push(Observed {
                kind: ChangeKind::Changed,
                path: p.clone(),
                from: None,
                sha256: Some(sha),
                before,
                size,
            });
        } else {
            if let Some(t) = text {
                self.keep.push((sha, t));
            }
            self.new.push(New {
                path: p.clone(),
                id: Identity::of(meta),
                sha: Some(sha),
                size,
            });
        }
    }

    /// A note that could not be read (too large, say): changed, content unknown; or new.
    fn note_unread(&mut self, p: &VaultPath, meta: &FileMeta) {
        if self.existed(p) {
            self.out.push(Observed {
                kind: ChangeKind::Changed,
                path: p.clone(),
                from: None,
                sha256: None,
                before: self.log.last_known(p).flatten(),
                size: meta.size,
            });
        } else {
            self.new.push(New {
                path: p.clone(),
                id: Identity::of(meta),
                sha: None,
                size: meta.size,
            });
        }
    }

    /// A note that was there removed: gone, with its identity and content as the model and the
    /// kept text had them.
    fn note_removed(&mut self, p: &VaultPath) {
        let model = self.found.model;
        let meta = model.files().get(p);
        let gone = Gone {
            path: p.clone(),
            id: meta.map_or(
                Identity {
                    ino: 0,
                    born: None,
                    size: 0,
                    mtime: None,
                },
                Identity::of,
            ),
            sha: self.before(p),
            size: meta.map_or(0, |m| m.size),
        };
        self.gone.push(gone);
    }

    /// On a first reconcile, the notes the index cache held that the vault no longer has:
    /// deleted (or moved) while capvault was stopped.
    fn notes_gone_while_stopped(&mut self, changes: &[Change]) {
        if !self.found.first {
            return;
        }
        let Some(cached) = self.found.cached else {
            return;
        };
        let read: HashSet<&VaultPath> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Note(p, ..) | Change::File(p, _) => Some(p),
                Change::Removed(_) => None,
            })
            .collect();
        for (p, stamp) in cached {
            if read.contains(p) || !is_note_name(p.file_name()) {
                continue;
            }
            if self.log.last_known(p) == Some(None) {
                continue;
            }
            self.gone.push(Gone {
                path: p.clone(),
                id: Identity::of_stamp(stamp),
                sha: self.log.last_known(p).flatten(),
                size: stamp.size,
            });
        }
    }

    /// The entries to log, sorted by path (the changes, then the moves, deletions and
    /// creations: a stable sort keeps that order within a path), and the versions to keep.
    fn finish(self) -> (Vec<Observed>, Vec<(Sha, Arc<str>)>) {
        let Seen {
            mut out,
            keep,
            gone,
            new,
            ..
        } = self;
        out.extend(pair_moves(gone, new));
        out.sort_by(|a, b| a.path.cmp(&b.path));
        (out, keep)
    }
}

/// Moves: the same file renamed, else the same content (a delete and a create). A new file may
/// get the inode number a deleted one freed: the birth time (or size and modification time)
/// tells them apart. Returns the moves and deletions in the order of the gone notes' paths, then
/// the creations in the order of the new notes' paths.
fn pair_moves(mut gone: Vec<Gone>, mut new: Vec<New>) -> Vec<Observed> {
    gone.sort_by(|a, b| a.path.cmp(&b.path));
    new.sort_by(|a, b| a.path.cmp(&b.path));
    let (by_ino, by_sha) = index_new(&new);
    let mut out = Vec::with_capacity(gone.len() + new.len());
    let mut taken = vec![false; new.len()];
    for g in gone {
        let pair = by_ino
            .get(&g.id.ino)
            .filter(|&&i| g.id.renamed_to(&new[i].id))
            .or_else(|| g.sha.as_ref().and_then(|s| by_sha.get(s)))
            .copied()
            .filter(|&i| !taken[i]);
        match pair {
            Some(i) => {
                taken[i] = true;
                out.push(moved(g, &new[i]));
            }
            None => out.push(deleted(g)),
        }
    }
    for (i, n) in new.into_iter().enumerate() {
        if !taken[i] {
            out.push(created(n));
        }
    }
    out
}

/// The new notes by inode and by content: the first (in path order) of each.
fn index_new(new: &[New]) -> (HashMap<u64, usize>, HashMap<Sha, usize>) {
    let mut by_ino: HashMap<u64, usize> = HashMap::new();
    let mut by_sha: HashMap<Sha, usize> = HashMap::new();
    for (i, n) in new.iter().enumerate() {
        if n.id.ino != 0 {
            by_ino.entry(n.id.ino).or_insert(i);
        }
        if let Some(s) = n.sha {
            by_sha.entry(s).or_insert(i);
        }
    }
    (by_ino, by_sha)
}

/// The entry of a note gone from `g.path` to `n.path`.
fn moved(g: Gone, n: &New) -> Observed {
    Observed {
        kind: ChangeKind::Moved,
        path: n.path.clone(),
        from: Some(g.path),
        sha256: n.sha,
        before: g.sha,
        size: n.size,
    }
}

/// The entry of a note gone that no new note pairs with.
fn deleted(g: Gone) -> Observed {
    Observed {
        kind: ChangeKind::Deleted,
        path: g.path,
        from: None,
        sha256: g.sha,
        before: None,
        size: g.size,
    }
}

/// The entry of a new note that no gone note pairs with.
fn created(n: New) -> Observed {
    Observed {
        kind: ChangeKind::Created,
        path: n.path,
        from: None,
        sha256: n.sha,
        before: None,
        size: n.size,
    }
}
