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

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::locks::lock;
use crate::vault::VaultPath;
use crate::vault::cache::IndexCacheDir;

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
/// Entry numbers stay below this (a file read back naming larger ones is not this format's).
const MAX_SEQ: u64 = 1 << 62;
/// Largest log file read back.
const MAX_LOG_FILE: u64 = 128 * 1024 * 1024;

/// The log's file in the cache folder.
const LOG_FILE: &str = crate::vault::cache::CHANGES_LOG_FILE;
/// The note versions' file in the cache folder.
const TEXTS_FILE: &str = crate::vault::cache::CHANGES_TEXTS_FILE;
/// A record's header in [`TEXTS_FILE`]: a marker, the sha256, the length (u32, little-endian).
const HEADER: usize = 1 + 32 + 4;
const MARKER: u8 = b'T';

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

impl ChangeKind {
    fn letter(self) -> &'static str {
        match self {
            ChangeKind::Created => "c",
            ChangeKind::Changed => "m",
            ChangeKind::Moved => "v",
            ChangeKind::Deleted => "d",
        }
    }

    fn of_letter(s: &str) -> Option<ChangeKind> {
        Some(match s {
            "c" => ChangeKind::Created,
            "m" => ChangeKind::Changed,
            "v" => ChangeKind::Moved,
            "d" => ChangeKind::Deleted,
            _ => return None,
        })
    }
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

/// The kept versions: offsets into [`TEXTS_FILE`] (or the texts themselves, without a folder).
#[derive(Debug, Default)]
struct TextStore {
    at: HashMap<Sha, (u64, u32)>,
    memory: HashMap<Sha, Arc<str>>,
    /// Kept versions, oldest first.
    order: VecDeque<Sha>,
    bytes: u64,
    /// Length of the file (where the next record goes).
    file_len: u64,
}

#[derive(Serialize, Deserialize)]
struct Header {
    capvault_changes: u32,
    epoch: String,
    floor: u64,
    /// [`State::known_from`] (absent in logs of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct Line {
    s: u64,
    t: i64,
    k: String,
    p: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    f: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    h: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b: Option<String>,
    z: u64,
}

/// A floor raised after the header (a start without a baseline), and when.
#[derive(Serialize, Deserialize)]
struct FloorLine {
    floor: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<i64>,
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

impl Line {
    fn of(e: &ChangeEntry) -> Line {
        Line {
            s: e.seq,
            t: e.at_ms,
            k: e.kind.letter().to_owned(),
            p: e.path.as_str().to_owned(),
            f: e.from.as_ref().map(|f| f.as_str().to_owned()),
            h: e.sha256.as_ref().map(hex),
            b: e.before.as_ref().map(hex),
            z: e.size,
        }
    }

    fn entry(self) -> Option<ChangeEntry> {
        let kind = ChangeKind::of_letter(&self.k)?;
        let path = VaultPath::parse(&self.p).ok()?;
        let from = match self.f {
            Some(f) => Some(VaultPath::parse(&f).ok()?),
            None => None,
        };
        let sha256 = match self.h {
            Some(h) => Some(parse_hex(&h)?),
            None => None,
        };
        let before = match self.b {
            Some(b) => Some(parse_hex(&b)?),
            None => None,
        };
        Some(ChangeEntry {
            seq: self.s,
            at_ms: self.t,
            kind,
            path,
            from,
            sha256,
            before,
            size: self.z,
        })
    }
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

    /// A kept version's text, checked against its hash.
    pub fn text(&self, sha: &Sha) -> Option<String> {
        let s = self.state();
        if let Some(t) = s.texts.memory.get(sha) {
            return Some(t.to_string());
        }
        let (at, len) = *s.texts.at.get(sha)?;
        let dir = s.dir.as_ref()?;
        let read = (|| -> io::Result<Vec<u8>> {
            let file = dir.open_file(TEXTS_FILE)?;
            let mut bytes = vec![0u8; len as usize];
            file.read_exact_at(&mut bytes, at + HEADER as u64)?;
            Ok(bytes)
        })();
        let text = String::from_utf8(read.ok()?).ok()?;
        (sha_of(&text) == *sha).then_some(text)
    }

    /// True when the version is kept.
    pub fn has_text(&self, sha: &Sha) -> bool {
        let s = self.state();
        s.texts.at.contains_key(sha) || s.texts.memory.contains_key(sha)
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

/// A log file as read back: what [`parse_log`] found.
#[derive(Debug)]
pub struct LogRead {
    /// The log's epoch.
    pub epoch: u64,
    /// Its floor (see [`ChangeLog::oldest_cursor`]).
    pub floor: u64,
    /// Since when every change is in it, if recorded.
    pub known_from: Option<i64>,
    /// The next entry's number.
    pub next: u64,
    /// The entries, numbers strictly increasing.
    pub entries: VecDeque<ChangeEntry>,
    /// Lines in the file.
    pub lines: usize,
}

/// Reads a log file's bytes: `None` when its header is not this format's. A damaged line (a
/// write cut short by a crash) is skipped, as is an entry whose number does not follow the one
/// before; every path is parsed as a client's path is.
pub fn parse_log(bytes: &[u8]) -> Option<LogRead> {
    let mut lines = bytes.split(|b| *b == b'\n');
    let header = serde_json::from_slice::<Header>(lines.next()?).ok()?;
    let epoch = u64::from_str_radix(&header.epoch, 16).ok()?;
    if header.capvault_changes != 1 || header.floor >= MAX_SEQ {
        return None;
    }
    let mut read = LogRead {
        epoch,
        floor: header.floor,
        known_from: header.t,
        next: header.floor + 1,
        entries: VecDeque::new(),
        lines: 1,
    };
    for line in lines {
        if line.is_empty() {
            continue;
        }
        read.lines += 1;
        if let Ok(f) = serde_json::from_slice::<FloorLine>(line)
            && f.floor >= read.floor
            && f.floor < MAX_SEQ
        {
            read.floor = f.floor;
            read.known_from = f.t;
            read.next = read.next.max(f.floor + 1);
            read.entries.clear();
            continue;
        }
        let Some(e) = serde_json::from_slice::<Line>(line)
            .ok()
            .and_then(Line::entry)
        else {
            continue;
        };
        if e.seq < read.next || e.seq >= MAX_SEQ {
            continue;
        }
        read.next = e.seq + 1;
        read.entries.push_back(e);
    }
    Some(read)
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

    fn load(dir: &Arc<IndexCacheDir>) -> io::Result<Option<State>> {
        let Some(bytes) = dir.read(LOG_FILE, MAX_LOG_FILE)? else {
            return Ok(None);
        };
        let Some(read) = parse_log(&bytes) else {
            return Ok(None);
        };
        let mut s = State::empty(Some(Arc::clone(dir)));
        s.epoch = read.epoch;
        s.floor = read.floor;
        s.known_from = read.known_from;
        s.next = read.next;
        s.file_lines = read.lines;
        s.entries = read.entries;
        s.rebuild_last();
        s.texts.load(dir, &s.entries);
        s.trim(now_ms());
        Ok(Some(s))
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

    /// Writes the whole log anew (atomically).
    fn rewrite(&mut self) {
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let header = Header {
            capvault_changes: 1,
            epoch: format!("{:016x}", self.epoch),
            floor: self.floor,
            t: self.known_from,
        };
        let written = dir.write_with(LOG_FILE, |w| {
            serde_json::to_writer(&mut *w, &header)?;
            w.write_all(b"\n")?;
            for e in &self.entries {
                serde_json::to_writer(&mut *w, &Line::of(e))?;
                w.write_all(b"\n")?;
            }
            Ok(())
        });
        match written {
            Ok(()) => self.file_lines = 1 + self.entries.len(),
            Err(e) => tracing::warn!(error = %e, "the change log could not be saved"),
        }
    }

    fn append_lines(&mut self, lines: &[String]) {
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            bytes.extend_from_slice(l.as_bytes());
            bytes.push(b'\n');
        }
        match dir.append(LOG_FILE, &bytes) {
            Ok(_) => self.file_lines += lines.len(),
            Err(e) => tracing::warn!(error = %e, "the change log could not be saved"),
        }
    }

    /// Keeps the versions not yet kept, then drops the oldest over [`MAX_TEXT_BYTES`].
    fn keep_texts(&mut self, texts: Vec<(Sha, Arc<str>)>) {
        let mut fresh: Vec<(Sha, Arc<str>)> = Vec::new();
        let mut batch = 0usize;
        for (sha, text) in texts {
            if text.len() > MAX_ONE_TEXT
                || batch + text.len() > MAX_BATCH_TEXT_BYTES
                || self.texts.at.contains_key(&sha)
                || self.texts.memory.contains_key(&sha)
                || fresh.iter().any(|(s, _)| *s == sha)
            {
                continue;
            }
            batch += text.len();
            fresh.push((sha, text));
        }
        if fresh.is_empty() {
            return;
        }
        match self.dir.clone() {
            None => {
                for (sha, text) in fresh {
                    self.texts.bytes += text.len() as u64;
                    self.texts.order.push_back(sha);
                    self.texts.memory.insert(sha, text);
                }
            }
            Some(dir) => {
                let mut bytes = Vec::with_capacity(batch + fresh.len() * HEADER);
                let mut placed = Vec::with_capacity(fresh.len());
                let start = self.texts.file_len;
                for (sha, text) in &fresh {
                    let at = start + bytes.len() as u64;
                    bytes.push(MARKER);
                    bytes.extend_from_slice(sha);
                    bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
                    bytes.extend_from_slice(text.as_bytes());
                    placed.push((*sha, at, text.len() as u32));
                }
                match dir.append(TEXTS_FILE, &bytes) {
                    Ok(at) if at == start => {
                        self.texts.file_len = start + bytes.len() as u64;
                        for (sha, at, len) in placed {
                            self.texts.bytes += u64::from(len);
                            self.texts.order.push_back(sha);
                            self.texts.at.insert(sha, (at, len));
                        }
                    }
                    Ok(at) => {
                        // The file is not what this process wrote: start it again.
                        tracing::warn!(
                            at,
                            "the change log's texts file changed; starting it again"
                        );
                        self.texts = TextStore::default();
                        let _ = dir.remove(TEXTS_FILE);
                    }
                    Err(e) => tracing::warn!(error = %e, "note versions could not be kept"),
                }
            }
        }
        if self.texts.bytes > MAX_TEXT_BYTES {
            self.drop_texts();
        }
    }

    /// Drops the oldest versions until half the budget is used, rewriting the file.
    fn drop_texts(&mut self) {
        while self.texts.bytes > MAX_TEXT_BYTES / 2 {
            let Some(sha) = self.texts.order.pop_front() else {
                break;
            };
            if let Some((_, len)) = self.texts.at.remove(&sha) {
                self.texts.bytes -= u64::from(len);
            }
            if let Some(t) = self.texts.memory.remove(&sha) {
                self.texts.bytes -= t.len() as u64;
            }
        }
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let old = match dir.open_file(TEXTS_FILE) {
            Ok(f) => f,
            Err(_) => {
                self.texts = TextStore::default();
                return;
            }
        };
        let mut moved: Vec<(Sha, u64, u32)> = Vec::with_capacity(self.texts.order.len());
        let order: Vec<Sha> = self.texts.order.iter().copied().collect();
        let at = &self.texts.at;
        let written = dir.write_with(TEXTS_FILE, |w| {
            let mut pos = 0u64;
            for sha in &order {
                let Some(&(from, len)) = at.get(sha) else {
                    continue;
                };
                let mut rec = vec![0u8; HEADER + len as usize];
                old.read_exact_at(&mut rec, from)?;
                w.write_all(&rec)?;
                moved.push((*sha, pos, len));
                pos += rec.len() as u64;
            }
            Ok(())
        });
        match written {
            Ok(()) => {
                self.texts.file_len = moved
                    .last()
                    .map_or(0, |(_, at, len)| at + HEADER as u64 + u64::from(*len));
                for (sha, at, len) in moved {
                    self.texts.at.insert(sha, (at, len));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the change log's texts could not be rewritten");
                self.texts = TextStore::default();
                let _ = dir.remove(TEXTS_FILE);
            }
        }
    }
}

impl TextStore {
    /// Reads the records' headers back; keeps those the entries name, oldest first.
    fn load(&mut self, dir: &IndexCacheDir, entries: &VecDeque<ChangeEntry>) {
        let Ok(file) = dir.open_file(TEXTS_FILE) else {
            return;
        };
        let mut found: HashMap<Sha, (u64, u32)> = HashMap::new();
        // Each record's header only, read where it is: the texts are not read at all.
        let mut pos = 0u64;
        let mut header = [0u8; HEADER];
        while pos + HEADER as u64 <= file.len() {
            if file.read_exact_at(&mut header, pos).is_err() || header[0] != MARKER {
                break;
            }
            let mut sha = [0u8; 32];
            sha.copy_from_slice(&header[1..33]);
            let len = u32::from_le_bytes([header[33], header[34], header[35], header[36]]);
            if len as usize > MAX_ONE_TEXT || pos + (HEADER as u64) + u64::from(len) > file.len() {
                break;
            }
            found.insert(sha, (pos, len));
            pos += HEADER as u64 + u64::from(len);
        }
        self.file_len = pos;
        for e in entries {
            for sha in [e.before, e.sha256].into_iter().flatten() {
                if let Some(&(at, len)) = found.get(&sha)
                    && !self.at.contains_key(&sha)
                {
                    self.at.insert(sha, (at, len));
                    self.order.push_back(sha);
                    self.bytes += u64::from(len);
                }
            }
        }
        if pos < file.len() {
            // A record cut short (a crash): the next append finds the file longer than what
            // was read, and the versions start again (`keep_texts`).
            tracing::debug!("the change log's texts file ends with a partial record");
        }
    }
}

/// Each note read that was not as the index cache had it: its content's hash, size and text
/// (the text when small enough to keep).
pub(super) type Hashed = HashMap<VaultPath, (Sha, u64, Option<Arc<str>>)>;

/// What one reconcile read, for [`observe`].
pub(super) struct Found<'a> {
    /// The first reconcile of this process.
    pub first: bool,
    /// On a first reconcile, the notes the index cache held (their stamps).
    pub cached: Option<&'a super::cache::Stamps>,
    /// The model before the reconcile.
    pub model: &'a crate::model::Model,
    /// The notes' kept texts before the reconcile.
    pub texts: Option<&'a super::Texts>,
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
    fn of(meta: &crate::vault::FileMeta) -> Identity {
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

struct Gone {
    path: VaultPath,
    id: Identity,
    sha: Option<Sha>,
    size: u64,
}

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
pub(super) fn observe(
    log: &ChangeLog,
    changes: &[crate::model::Change],
    mut found: Found<'_>,
) -> (Vec<Observed>, Vec<(Sha, Arc<str>)>) {
    use crate::model::Change;
    use crate::vault::is_note_name;
    let mut out: Vec<Observed> = Vec::new();
    let mut keep: Vec<(Sha, Arc<str>)> = Vec::new();
    let mut gone: Vec<Gone> = Vec::new();
    let mut new: Vec<New> = Vec::new();
    let existed = |p: &VaultPath| match (found.first, found.cached) {
        (true, Some(c)) => c.contains_key(p),
        (true, None) => false,
        (false, _) => found.model.files().contains_key(p),
    };
    let before_of = |p: &VaultPath, keep: &mut Vec<(Sha, Arc<str>)>| -> Option<Sha> {
        if !found.first
            && let Some(kept) = found.texts.and_then(|t| t.get(p))
        {
            let sha = sha_of(&kept.text);
            if !log.has_text(&sha) && kept.text.len() <= MAX_ONE_TEXT {
                keep.push((sha, Arc::from(kept.text.as_ref())));
            }
            return Some(sha);
        }
        log.last_known(p).flatten()
    };
    for c in changes {
        match c {
            Change::Note(p, meta, ..) => {
                let Some((sha, size, text)) = found.hashed.remove(p) else {
                    // As the index cache had it.
                    continue;
                };
                if found.first && log.last_known(p) == Some(Some(sha)) {
                    continue;
                }
                if existed(p) {
                    let before = before_of(p, &mut keep);
                    if before == Some(sha) {
                        continue;
                    }
                    if let Some(t) = text {
                        keep.push((sha, t));
                    }
                    out.push(Observed {
                        kind: ChangeKind::Changed,
                        path: p.clone(),
                        from: None,
                        sha256: Some(sha),
                        before,
                        size,
                    });
                } else {
                    if let Some(t) = text {
                        keep.push((sha, t));
                    }
                    new.push(New {
                        path: p.clone(),
                        id: Identity::of(meta),
                        sha: Some(sha),
                        size,
                    });
                }
            }
            Change::File(p, meta) if is_note_name(p.file_name()) => {
                // A note that could not be read (too large, say): changed, content unknown.
                if existed(p) {
                    out.push(Observed {
                        kind: ChangeKind::Changed,
                        path: p.clone(),
                        from: None,
                        sha256: None,
                        before: log.last_known(p).flatten(),
                        size: meta.size,
                    });
                } else {
                    new.push(New {
                        path: p.clone(),
                        id: Identity::of(meta),
                        sha: None,
                        size: meta.size,
                    });
                }
            }
            Change::Removed(p) if is_note_name(p.file_name()) && existed(p) => {
                let meta = found.model.files().get(p);
                gone.push(Gone {
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
                    sha: before_of(p, &mut keep),
                    size: meta.map_or(0, |m| m.size),
                });
            }
            _ => {}
        }
    }
    if found.first
        && let Some(cached) = found.cached
    {
        // Notes the cache held that the vault no longer has: deleted (or moved) while stopped.
        let read: std::collections::HashSet<&VaultPath> = changes
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
            if log.last_known(p) == Some(None) {
                continue;
            }
            gone.push(Gone {
                path: p.clone(),
                id: Identity::of_stamp(stamp),
                sha: log.last_known(p).flatten(),
                size: stamp.size,
            });
        }
    }
    // Moves: the same file renamed, else the same content (a delete and a create). A new
    // file may get the inode number a deleted one freed: the birth time (or size and
    // modification time) tells them apart.
    gone.sort_by(|a, b| a.path.cmp(&b.path));
    new.sort_by(|a, b| a.path.cmp(&b.path));
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
                let n = &new[i];
                out.push(Observed {
                    kind: ChangeKind::Moved,
                    path: n.path.clone(),
                    from: Some(g.path),
                    sha256: n.sha,
                    before: g.sha,
                    size: n.size,
                });
            }
            None => out.push(Observed {
                kind: ChangeKind::Deleted,
                path: g.path,
                from: None,
                sha256: g.sha,
                before: None,
                size: g.size,
            }),
        }
    }
    for (i, n) in new.into_iter().enumerate() {
        if !taken[i] {
            out.push(Observed {
                kind: ChangeKind::Created,
                path: n.path,
                from: None,
                sha256: n.sha,
                before: None,
                size: n.size,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    (out, keep)
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
    fn since_when_the_log_is_complete_is_saved_in_its_header_and_gap_lines() {
        let read =
            parse_log(br#"{"capvault_changes":1,"epoch":"00000000000000ab","floor":0,"t":1000}"#)
                .unwrap();
        assert_eq!(read.known_from, Some(1000));
        let read = parse_log(
            b"{\"capvault_changes\":1,\"epoch\":\"ab\",\"floor\":0,\"t\":1000}\n{\"floor\":4,\"t\":2000}",
        )
        .unwrap();
        assert_eq!((read.floor, read.known_from), (4, Some(2000)));
        // A log of an earlier version: not known, and then only dropped entries are reported.
        let old = parse_log(br#"{"capvault_changes":1,"epoch":"ab","floor":0}"#).unwrap();
        assert_eq!(old.known_from, None);
        let header = Header {
            capvault_changes: 1,
            epoch: "ab".into(),
            floor: 0,
            t: Some(5),
        };
        let text = serde_json::to_string(&header).unwrap();
        assert_eq!(parse_log(text.as_bytes()).unwrap().known_from, Some(5));
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
    fn a_log_file_read_back_skips_damaged_lines_and_refuses_hidden_paths() {
        let e = |s: u64, p: &str| format!(r#"{{"s":{s},"t":1,"k":"m","p":"{p}","z":1}}"#);
        let file = [
            r#"{"capvault_changes":1,"epoch":"00000000000000ab","floor":3}"#.to_owned(),
            e(4, "a.md"),
            "{\"s\":5,\"t\":1,\"k\":\"m\",\"p\":\"cut".to_owned(),
            e(5, ".obsidian/app.json"),
            e(6, "../x.md"),
            e(7, "b.md"),
            e(7, "again.md"),
            r#"{"s":8,"t":1,"k":"x","p":"c.md","z":1}"#.to_owned(),
            e(9, "Folder/c.md"),
        ]
        .join("\n");
        let read = parse_log(file.as_bytes()).unwrap();
        assert_eq!(read.epoch, 0xab);
        assert_eq!(read.floor, 3);
        let kept: Vec<(u64, &str)> = read
            .entries
            .iter()
            .map(|e| (e.seq, e.path.as_str()))
            .collect();
        assert_eq!(kept, vec![(4, "a.md"), (7, "b.md"), (9, "Folder/c.md")]);
        assert_eq!(read.next, 10);
        // Not this format: a new log.
        assert!(parse_log(b"").is_none());
        assert!(parse_log(b"{\"capvault_changes\":2,\"epoch\":\"1\",\"floor\":0}").is_none());
        let huge = format!(
            "{{\"capvault_changes\":1,\"epoch\":\"1\",\"floor\":0}}\n{}",
            e(u64::MAX, "a.md")
        );
        assert!(parse_log(huge.as_bytes()).unwrap().entries.is_empty());
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
