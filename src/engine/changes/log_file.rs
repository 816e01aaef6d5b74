//! `changes.log`: the change log's file format, read back and written in the cache folder.
//!
//! A header line (format, epoch, floor, since when the log is complete), then one JSON line per
//! entry and a floor line for each gap. Appended as entries are logged, rewritten whole when it
//! holds far more lines than entries kept.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ChangeEntry, ChangeKind, State, hex, now_ms, parse_hex};
use crate::vault::VaultPath;
use crate::vault::cache::IndexCacheDir;

/// Entry numbers stay below this (a file read back naming larger ones is not this format's).
const MAX_SEQ: u64 = 1 << 62;
/// Largest log file read back.
const MAX_LOG_FILE: u64 = 128 * 1024 * 1024;

/// The log's file in the cache folder.
const LOG_FILE: &str = crate::vault::cache::CHANGES_LOG_FILE;

/// The file's first line.
#[derive(Serialize, Deserialize)]
struct Header {
    capvault_changes: u32,
    epoch: String,
    floor: u64,
    /// [`State::known_from`] (absent in logs of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    t: Option<i64>,
}

/// One entry as a line of the file.
#[derive(Serialize, Deserialize)]
pub(super) struct Line {
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
pub(super) struct FloorLine {
    pub(super) floor: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) t: Option<i64>,
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

impl Line {
    pub(super) fn of(e: &ChangeEntry) -> Line {
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

/// A log file as read back: what [`parse_log`] found.
#[derive(Debug)]
pub struct LogRead {
    /// The log's epoch.
    pub epoch: u64,
    /// Its floor (see [`ChangeLog::oldest_cursor`](super::ChangeLog::oldest_cursor)).
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

impl State {
    pub(super) fn load(dir: &Arc<IndexCacheDir>) -> io::Result<Option<State>> {
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

    /// Writes the whole log anew (atomically).
    pub(super) fn rewrite(&mut self) {
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

    pub(super) fn append_lines(&mut self, lines: &[String]) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
