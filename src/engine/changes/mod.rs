//! The change log: every note created, changed, moved or deleted, as the reconciles found it,
//! numbered, kept across restarts in the cache folder, and the versions of changed notes that a
//! diff needs.
//!
//! Each reconcile that changed a note appends its entries (one JSON line each) to
//! `changes.log`, and the texts of the versions involved (the one before, from the kept texts;
//! the one after, as read) to `changes.texts`, both in the vault's cache folder (in memory only
//! when there is none). A cursor is the log's epoch and the number of the last entry seen: it
//! stays valid across restarts, until the entries after it are dropped (more than
//! [`MAX_ENTRIES`], or older than [`MAX_AGE`]) or the log is started again (a lost or damaged
//! file). The first reconcile after a restart compares the vault with the index cache, so what
//! changed while capvault was stopped is logged then; without a usable index cache nothing tells
//! what changed, and every older cursor is expired (the "floor" moves up).
//!
//! Nothing read back from the folder is trusted beyond its shape: paths are parsed as every
//! client path is (no hidden component), texts are checked against their sha256 when read.
//!
//! This file holds the log in memory and what it answers (cursors, entries, the last content
//! seen of each path); `log_file.rs` is `changes.log`'s format, `versions.rs` the note versions
//! kept (`changes.texts`), `observe.rs` what a reconcile changed, as entries to log.

mod log_file;
mod observe;
mod versions;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::locks::lock;
use crate::vault::VaultPath;
use crate::vault::cache::IndexCacheDir;
use log_file::{FloorLine, Line};
use versions::TextStore;

pub use log_file::{LogRead, parse_log};
pub(super) use observe::{Found, Hashed, observe};

/// Most entries kept; older ones are dropped (their cursors expire).
pub const MAX_ENTRIES: usize = 100_000;
/// Entries older than this are dropped.
pub const MAX_AGE: Duration = Duration::from_secs(90 * 24 * 3600);
/// Most bytes of note versions kept for diffs; the oldest go first.
pub const MAX_TEXT_BYTES: u64 = 64 * 1024 * 1024;
/// Largest note version kept for diffs.
pub const MAX_ONE_TEXT: usize = 256 * 1024;
/// Most bytes of note versions one reconcile keeps (a sync or a checkout that rewrote thousands
/// of notes logs their hashes, not their texts).
pub const MAX_BATCH_TEXT_BYTES: usize = 8 * 1024 * 1024;

/// A content hash.
pub type Sha = [u8; 32];

/// The sha256 of a text, as `read_note` reports a note's.
pub fn sha_of(text: &str) -> Sha {
    Sha256::digest(text.as_bytes()).into()
}

/// What happened to a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// A new note.
    Created,
    /// A note's content changed.
    Changed,
    /// A note got a new path (renamed or moved), its content maybe changed too.
    Moved,
    /// A note is gone.
    Deleted,
}

/// One logged change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEntry {
    /// Its number (1 is the log's first).
    pub seq: u64,
    /// When the reconcile found it, milliseconds since the epoch.
    pub at_ms: i64,
    /// What happened.
    pub kind: ChangeKind,
    /// The note's path (for a move, the new one).
    pub path: VaultPath,
    /// A move's old path.
    pub from: Option<VaultPath>,
    /// The content after the change (for a deletion, the content deleted), when known.
    pub sha256: Option<Sha>,
    /// The content before a change or a move, when known.
    pub before: Option<Sha>,
    /// Size in bytes of the content `sha256` names.
    pub size: u64,
}

/// A change a reconcile found, before it is numbered.
#[derive(Debug, Clone)]
pub struct Observed {
    /// What happened.
    pub kind: ChangeKind,
    /// The note's path (for a move, the new one).
    pub path: VaultPath,
    /// A move's old path.
    pub from: Option<VaultPath>,
    /// See [`ChangeEntry::sha256`].
    pub sha256: Option<Sha>,
    /// See [`ChangeEntry::before`].
    pub before: Option<Sha>,
    /// See [`ChangeEntry::size`].
    pub size: u64,
}

/// Why a cursor cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorError {
    /// Not a cursor of this log (malformed, from another vault, or from a log started again).
    Unknown,
    /// The changes after it were dropped; `oldest` is the oldest cursor that works.
    Expired {
        /// The oldest cursor still answered.
        oldest: String,
    },
}

/// The log: its entries, the versions kept, and where they are saved.
#[derive(Debug)]
pub struct ChangeLog {
    /// Read from the folder on first use (the first reconcile, on the build's thread), not
    /// when the engine is opened: a long log is not read before the first answer.
    state: OnceLock<Mutex<State>>,
    /// Where it is saved, if anywhere.
    dir: Option<Arc<IndexCacheDir>>,
}

#[derive(Debug)]
struct State {
    /// Identifies this log in cursors (new when a log is started).
    epoch: u64,
    /// Entries up to this number may have been dropped: a cursor below it is expired.
    floor: u64,
    /// Since when (ms since the epoch) every change is in the log: when the log was started,
    /// its last gap, or (later) the last entry dropped. `None` for a log saved before this was
    /// recorded.
    known_from: Option<i64>,
    /// The next entry's number.
    next: u64,
    entries: VecDeque<ChangeEntry>,
    /// Each path's last known content in the log (`None`: deleted), for the first reconcile
    /// after a restart (what it finds that the log already has is not logged twice) and the
    /// "before" of a note whose earlier text is not kept.
    last: HashMap<VaultPath, Option<Sha>>,
    /// Lines in the log file (rewritten when well over the entries kept).
    file_lines: usize,
    texts: TextStore,
    dir: Option<Arc<IndexCacheDir>>,
}

fn hex(sha: &Sha) -> String {
    use std::fmt::Write;
    sha.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Parses 64 lowercase or uppercase hex digits.
pub fn parse_hex(s: &str) -> Option<Sha> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The sha256 as hex, as replies show it.
pub fn sha_hex(sha: &Sha) -> String {
    hex(sha)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn new_epoch() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return now_ms() as u64;
    }
    u64::from_le_bytes(b) | 1
}

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog::in_memory()
    }
}

impl ChangeLog {
    /// A log kept in memory only (no cache folder): it starts empty at each start.
    pub fn in_memory() -> ChangeLog {
        ChangeLog {
            state: OnceLock::new(),
            dir: None,
        }
    }

    /// The log saved in `dir`, read back when first used (a damaged or missing file starts a
    /// new log: older cursors are then answered as unknown).
    pub fn open(dir: Arc<IndexCacheDir>) -> ChangeLog {
        ChangeLog {
            state: OnceLock::new(),
            dir: Some(dir),
        }
    }

    /// The log's state, read back from the folder the first time.
    fn state(&self) -> MutexGuard<'_, State> {
        lock(self.state.get_or_init(|| {
            Mutex::new(match &self.dir {
                None => State::empty(None),
                Some(dir) => match State::load(dir) {
                    Ok(Some(s)) => s,
                    Ok(None) => State::start(Arc::clone(dir)),
                    Err(e) => {
                        tracing::warn!(error = %e, "the change log could not be read; starting a new one");
                        State::start(Arc::clone(dir))
                    }
                },
            })
        }))
    }

    /// The cursor that means "everything up to now".
    pub fn cursor(&self) -> String {
        let s = self.state();
        cursor_of(s.epoch, s.next - 1)
    }

    /// The oldest cursor still answered.
    pub fn oldest_cursor(&self) -> String {
        let s = self.state();
        cursor_of(s.epoch, s.floor)
    }

    /// The number of the last entry, and of the oldest cursor answered.
    pub fn bounds(&self) -> (u64, u64) {
        let s = self.state();
        (s.next - 1, s.floor)
    }

    /// When the oldest kept entry was logged (ms since the epoch), if any.
    pub fn oldest_time(&self) -> Option<i64> {
        self.state().entries.front().map(|e| e.at_ms)
    }

    /// The entry number a cursor names, if it is this log's and not expired.
    pub fn resolve(&self, cursor: &str) -> Result<u64, CursorError> {
        let s = self.state();
        let (epoch, seq) = parse_cursor(cursor).ok_or(CursorError::Unknown)?;
        if epoch != s.epoch || seq >= s.next {
            return Err(CursorError::Unknown);
        }
        if seq < s.floor {
            return Err(CursorError::Expired {
                oldest: cursor_of(s.epoch, s.floor),
            });
        }
        Ok(seq)
    }

    /// The number just before the first entry logged at or after `ms` (the last entry's when
    /// none is), and, when the log does not hold every change since `ms` (it began later, had a
    /// gap, or dropped older entries), the moment from which it does.
    pub fn seq_at(&self, ms: i64) -> (u64, Option<i64>) {
        let s = self.state();
        let i = s.entries.partition_point(|e| e.at_ms < ms);
        let seq = s.entries.get(i).map_or(s.next - 1, |e| e.seq - 1);
        let unknown = match s.known_from {
            Some(k) => (ms < k).then_some(k),
            // A log of an earlier version: only its dropped entries are known to be missing.
            None => (s.floor > 0 && s.entries.front().is_none_or(|e| e.at_ms > ms))
                .then(|| s.entries.front().map_or_else(now_ms, |e| e.at_ms)),
        };
        (seq.max(s.floor), unknown)
    }

    /// Up to `max` entries after number `after`, oldest first.
    pub fn entries_after(&self, after: u64, max: usize) -> Vec<ChangeEntry> {
        let s = self.state();
        let i = s.entries.partition_point(|e| e.seq <= after);
        s.entries.range(i..).take(max).cloned().collect()
    }

    /// The cursor for entry number `seq`.
    pub fn cursor_at(&self, seq: u64) -> String {
        cursor_of(self.state().epoch, seq)
    }

    /// The content the log last saw at `path`: `Some(None)` deleted, `None` never logged.
    pub fn last_known(&self, path: &VaultPath) -> Option<Option<Sha>> {
        self.state().last.get(path).copied()
    }

    /// Entries up to now can no longer be completed (a start with no index cache to compare
    /// with): every older cursor expires.
    pub fn gap(&self) {
        let mut s = self.state();
        if s.next == 1 && s.floor == 0 {
            // A new log: nothing to expire.
            return;
        }
        s.floor = s.next - 1;
        s.known_from = Some(now_ms());
        s.entries.clear();
        s.last.clear();
        let line = FloorLine {
            floor: s.floor,
            t: s.known_from,
        };
        s.append_lines(&[serde_json::to_string(&line).unwrap_or_default()]);
        tracing::info!("no index cache to compare with: changes made while stopped are unknown");
    }

    /// Numbers and keeps `observed` (in order), with the texts of the versions they name.
    /// Returns how many entries were logged.
    pub fn record(&self, observed: Vec<Observed>, texts: Vec<(Sha, Arc<str>)>) -> usize {
        if observed.is_empty() {
            return 0;
        }
        let mut s = self.state();
        let at_ms = now_ms();
        let mut lines = Vec::with_capacity(observed.len());
        let n = observed.len();
        for o in observed {
            let entry = ChangeEntry {
                seq: s.next,
                at_ms,
                kind: o.kind,
                path: o.path,
                from: o.from,
                sha256: o.sha256,
                before: o.before,
                size: o.size,
            };
            s.next += 1;
            if let Some(f) = &entry.from {
                s.last.insert(f.clone(), None);
            }
            let content = match entry.kind {
                ChangeKind::Deleted => None,
                _ => entry.sha256,
            };
            s.last.insert(entry.path.clone(), content);
            lines.push(serde_json::to_string(&Line::of(&entry)).unwrap_or_default());
            s.entries.push_back(entry);
        }
        s.keep_texts(texts);
        s.append_lines(&lines);
        s.trim(at_ms);
        n
    }

    /// Entries and bytes kept (for `vault_info` and the benchmarks).
    pub fn size(&self) -> (usize, u64) {
        let s = self.state();
        (s.entries.len(), s.texts.bytes)
    }
}

fn cursor_of(epoch: u64, seq: u64) -> String {
    format!("c1.{epoch:016x}.{seq}")
}

fn parse_cursor(c: &str) -> Option<(u64, u64)> {
    let rest = c.trim().strip_prefix("c1.")?;
    let (epoch, seq) = rest.split_once('.')?;
    if epoch.len() != 16 || seq.is_empty() || seq.len() > 20 {
        return None;
    }
    Some((
        u64::from_str_radix(epoch, 16).ok()?,
        seq.parse::<u64>().ok()?,
    ))
}

impl State {
    fn empty(dir: Option<Arc<IndexCacheDir>>) -> State {
        State {
            epoch: new_epoch(),
            floor: 0,
            known_from: Some(now_ms()),
            next: 1,
            entries: VecDeque::new(),
            last: HashMap::new(),
            file_lines: 0,
            texts: TextStore::default(),
            dir,
        }
    }

    /// A new log written to `dir` (replacing what was there).
    fn start(dir: Arc<IndexCacheDir>) -> State {
        let mut s = State::empty(Some(dir));
        s.rewrite();
        s
    }

    fn rebuild_last(&mut self) {
        self.last.clear();
        for e in &self.entries {
            if let Some(f) = &e.from {
                self.last.insert(f.clone(), None);
            }
            let content = match e.kind {
                ChangeKind::Deleted => None,
                _ => e.sha256,
            };
            self.last.insert(e.path.clone(), content);
        }
    }

    /// Drops entries over the count or the age, then rewrites the file when it holds far more
    /// lines than entries kept.
    fn trim(&mut self, now: i64) {
        let oldest_ms = now.saturating_sub(MAX_AGE.as_millis() as i64);
        let mut dropped = false;
        while let Some(front) = self.entries.front() {
            if self.entries.len() > MAX_ENTRIES || front.at_ms < oldest_ms {
                self.floor = front.seq;
                // What changed at that moment is no longer all here.
                // (Times read back from the file are any i64: saturating.)
                let after = front.at_ms.saturating_add(1);
                self.known_from = Some(self.known_from.map_or(after, |k| k.max(after)));
                self.entries.pop_front();
                dropped = true;
            } else {
                break;
            }
        }
        if dropped {
            self.rebuild_last();
        }
        if self.file_lines > 2 * self.entries.len() + 1000 {
            self.rewrite();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    fn changed(path: &str, text: &str, before: Option<&str>) -> Observed {
        Observed {
            kind: if before.is_some() {
                ChangeKind::Changed
            } else {
                ChangeKind::Created
            },
            path: p(path),
            from: None,
            sha256: Some(sha_of(text)),
            before: before.map(sha_of),
            size: text.len() as u64,
        }
    }

    #[test]
    fn cursors_name_an_entry_of_this_log_only() {
        let log = ChangeLog::in_memory();
        let start = log.cursor();
        assert_eq!(log.resolve(&start), Ok(0));
        log.record(vec![changed("a.md", "one", None)], vec![]);
        let now = log.cursor();
        assert_eq!(log.resolve(&now), Ok(1));
        assert_eq!(log.entries_after(0, 10).len(), 1);
        assert!(log.entries_after(1, 10).is_empty());
        // Another log's cursor, a cursor past the end, and garbage are unknown.
        let other = ChangeLog::in_memory();
        other.record(vec![changed("a.md", "x", None)], vec![]);
        other.record(vec![changed("a.md", "y", Some("x"))], vec![]);
        assert_eq!(log.resolve(&other.cursor()), Err(CursorError::Unknown));
        let (_, epoch, _) = (0, &now[3..19], 0);
        assert_eq!(
            log.resolve(&format!("c1.{epoch}.2")),
            Err(CursorError::Unknown)
        );
        for bad in ["", "c1.", "c1.zz.1", "c2.0000000000000001.1", "c1.1.1"] {
            assert_eq!(log.resolve(bad), Err(CursorError::Unknown), "{bad}");
        }
    }

    #[test]
    fn a_gap_expires_older_cursors_and_names_the_oldest() {
        let log = ChangeLog::in_memory();
        log.record(vec![changed("a.md", "one", None)], vec![]);
        let before = log.cursor();
        log.gap();
        let oldest = log.oldest_cursor();
        assert_eq!(
            log.resolve(&log.cursor_at(0)),
            Err(CursorError::Expired {
                oldest: oldest.clone()
            })
        );
        assert_eq!(log.resolve(&before), Ok(1), "the last cursor is the floor");
        assert_eq!(log.resolve(&oldest), Ok(1));
    }

    #[test]
    fn a_moment_before_the_log_began_or_its_last_gap_or_drop_is_said_to_be_unknown() {
        let log = ChangeLog::in_memory();
        log.record(vec![changed("a.md", "one", None)], vec![]);
        let began = log.state().known_from.unwrap();
        let at = log.entries_after(0, 1)[0].at_ms;
        assert!(began <= at);
        // Before it began: unknown from then; from then on: all here.
        assert_eq!(log.seq_at(began - 1).1, Some(began));
        assert_eq!(log.seq_at(began), (0, None));
        // A gap: known from the gap on.
        std::thread::sleep(std::time::Duration::from_millis(2));
        log.gap();
        let gap = log.state().known_from.unwrap();
        assert!(gap > began);
        assert_eq!(log.seq_at(began).1, Some(gap));
        // Entries dropped for the count: known from just after the last one dropped.
        let log = ChangeLog::in_memory();
        log.record(vec![changed("first.md", "t", None)], vec![]);
        let dropped_at = log.entries_after(0, 1)[0].at_ms;
        let batch: Vec<Observed> = (0..MAX_ENTRIES)
            .map(|i| changed(&format!("n{i}.md"), "t", None))
            .collect();
        log.record(batch, vec![]);
        assert_eq!(log.entries_after(0, 1)[0].seq, 2, "the first was dropped");
        assert_eq!(log.seq_at(dropped_at).1, Some(dropped_at + 1));
        assert_eq!(log.seq_at(dropped_at + 1).1, None);
    }

    #[test]
    fn too_many_entries_drop_the_oldest_and_expire_their_cursors() {
        let log = ChangeLog::in_memory();
        let first = log.cursor();
        let batch: Vec<Observed> = (0..MAX_ENTRIES + 5)
            .map(|i| changed(&format!("n{i}.md"), "t", None))
            .collect();
        log.record(batch, vec![]);
        assert_eq!(log.size().0, MAX_ENTRIES);
        assert!(matches!(
            log.resolve(&first),
            Err(CursorError::Expired { .. })
        ));
        assert_eq!(log.resolve(&log.oldest_cursor()), Ok(5));
    }

    #[test]
    fn kept_texts_are_read_back_and_checked() {
        let log = ChangeLog::in_memory();
        let t: Arc<str> = Arc::from("hello\n");
        log.record(
            vec![changed("a.md", "hello\n", None)],
            vec![(sha_of("hello\n"), t)],
        );
        assert_eq!(log.text(&sha_of("hello\n")).as_deref(), Some("hello\n"));
        assert_eq!(log.text(&sha_of("other")), None);
        assert_eq!(log.last_known(&p("a.md")), Some(Some(sha_of("hello\n"))));
    }
}
