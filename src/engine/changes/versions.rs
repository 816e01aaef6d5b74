//! `changes.texts`: the versions of notes kept for diffs, within their budget, checked when read.
//!
//! Records (a marker, the sha256, the length, the text) appended to one file in the cache
//! folder, or the texts themselves in memory without one; the oldest dropped first, the file
//! rewritten then.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;

use super::{
    ChangeEntry, ChangeLog, MAX_BATCH_TEXT_BYTES, MAX_ONE_TEXT, MAX_TEXT_BYTES, Sha, State, sha_of,
};
use crate::vault::cache::IndexCacheDir;

/// The note versions' file in the cache folder.
const TEXTS_FILE: &str = crate::vault::cache::CHANGES_TEXTS_FILE;
/// A record's header in [`TEXTS_FILE`]: a marker, the sha256, the length (u32, little-endian).
const HEADER: usize = 1 + 32 + 4;
const MARKER: u8 = b'T';

/// The kept versions: offsets into [`TEXTS_FILE`] (or the texts themselves, without a folder).
#[derive(Debug, Default)]
pub(super) struct TextStore {
    at: HashMap<Sha, (u64, u32)>,
    memory: HashMap<Sha, Arc<str>>,
    /// Kept versions, oldest first.
    order: VecDeque<Sha>,
    /// Bytes of the versions kept.
    pub(super) bytes: u64,
    /// Length of the file (where the next record goes).
    file_len: u64,
}

impl ChangeLog {
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
}

impl State {
    /// Keeps the versions not yet kept, then drops the oldest over [`MAX_TEXT_BYTES`].
    pub(super) fn keep_texts(&mut self, texts: Vec<(Sha, Arc<str>)>) {
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
    pub(super) fn load(&mut self, dir: &IndexCacheDir, entries: &VecDeque<ChangeEntry>) {
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
