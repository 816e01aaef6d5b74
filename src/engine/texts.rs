//! The notes' texts, kept for exact and regex search, excerpts and embedding.
//!
//! With an index cache folder they live in a scratch file there ([`TEXTS_FILE`], made anew at
//! each start, removed at the end), appended as notes are read and read back at offsets: the
//! kernel's page cache holds them rather than the process, which at 100,000 notes is 257 MB less
//! resident memory for a few milliseconds more per full scan. Without one (`--no-index-cache`, or
//! a second process on the same vault) they stay in memory. Replaced and removed texts leave dead
//! bytes in the file; once they outweigh the live ones (and 64 MB), the file is rewritten.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::vault::VaultPath;
use crate::vault::cache::{IndexCacheDir, TEXTS_FILE};
use crate::vault::private::ScratchFile;

/// Dead bytes tolerated in the scratch file before it is rewritten (and never more than the
/// live ones).
const MAX_DEAD_BYTES: u64 = 64 << 20;
/// Notes read from the scratch file with one read when they lie together (a full scan reads
/// the file in order, a group at a time).
const GROUP: usize = 128;
/// Largest span read at once for a group; a group spread wider is read note by note.
const MAX_GROUP_BYTES: u64 = 8 << 20;

/// A note's text kept in memory, with its name (the file name without extension) in the same
/// allocation, just before the text: an exact search matches both, and reading the name from the
/// path instead cost a cache miss per note (12 to 20% of a 100,000-note scan).
#[derive(Debug)]
pub struct NoteText {
    buf: Box<str>,
    name_len: usize,
}

impl NoteText {
    /// The text of the note at `path`.
    pub fn new(path: &VaultPath, text: &str) -> Self {
        let name = path.stem();
        let mut buf = String::with_capacity(name.len() + text.len());
        buf.push_str(name);
        buf.push_str(text);
        NoteText {
            buf: buf.into_boxed_str(),
            name_len: name.len(),
        }
    }

    /// The note's name (file name without extension).
    pub fn name(&self) -> &str {
        &self.buf[..self.name_len]
    }

    /// Asks the CPU to start loading the beginning of the note into its cache, ahead of a scan
    /// that reaches it shortly. Scanning every note in memory otherwise waits on a cache miss at
    /// the start of each one (16% of a no-hit exact search at 100,000 notes).
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let p = self.buf.as_ptr();
            for line in (0..self.buf.len().min(256)).step_by(64) {
                // SAFETY: a prefetch is only a hint: it never faults and changes no memory,
                // and `line` stays inside the buffer.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(line).cast()) };
            }
        }
    }

    /// The note's text.
    pub fn text(&self) -> &str {
        &self.buf[self.name_len..]
    }
}

/// Where one note's text is.
#[derive(Debug)]
pub enum Slot {
    /// In memory.
    Memory(NoteText),
    /// In the scratch file, `len` bytes at `at`.
    Packed { at: u64, len: u32 },
}

/// The scratch file and how far it is written.
#[derive(Debug)]
struct Pack {
    dir: Arc<IndexCacheDir>,
    /// Closed (taken) only when the pack is dropped, before its file is removed.
    file: Option<ScratchFile>,
    /// Its name in the folder: [`TEXTS_FILE`] or [`ALT_FILE`] (a rewrite goes to the other
    /// name, so no file is ever renamed over one still open: Windows refuses that). Removed
    /// with the last reference (every word of the vault is not left behind after the process).
    name: &'static str,
    end: AtomicU64,
    /// Set once a write failed (a full disk, a file size limit): the texts staged from then on
    /// stay in memory, and the failure is logged once.
    refused: AtomicBool,
}

/// The other name a rewritten scratch file takes (see [`Pack::name`]).
const ALT_FILE: &str = crate::vault::cache::TEXTS_ALT_FILE;

impl Pack {
    fn create(dir: Arc<IndexCacheDir>, name: &'static str) -> std::io::Result<Pack> {
        Ok(Pack {
            file: Some(dir.scratch(name)?),
            dir,
            name,
            end: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        })
    }

    fn file(&self) -> std::io::Result<&ScratchFile> {
        self.file
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the texts file is closed"))
    }

    /// Appends `bytes` (from any thread) and returns where they are.
    fn append(&self, bytes: &[u8]) -> std::io::Result<u64> {
        let at = self.end.fetch_add(bytes.len() as u64, Ordering::AcqRel);
        self.file()?.write_all_at(bytes, at)?;
        Ok(at)
    }

    fn read(&self, at: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.file()?.read_exact_at(&mut buf, at)?;
        Ok(buf)
    }
}

impl Drop for Pack {
    fn drop(&mut self) {
        drop(self.file.take());
        let _ = self.dir.remove(self.name);
    }
}

/// Puts texts where the store keeps them, from the threads that read the notes; the slots it
/// returns go to [`Texts::apply`].
pub struct Stager {
    pack: Option<Arc<Pack>>,
}

impl Stager {
    /// The slot for `text`, the note at `path`'s: in the scratch file, or in memory when there
    /// is none or it refused a write.
    pub fn stage(&self, path: &VaultPath, text: &str) -> Slot {
        if let Some(pack) = &self.pack
            && !pack.refused.load(Ordering::Relaxed)
            && let Ok(len) = u32::try_from(text.len())
        {
            match pack.append(text.as_bytes()) {
                Ok(at) => return Slot::Packed { at, len },
                Err(e) => {
                    if !pack.refused.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            error = %e,
                            "the cache folder refused the notes' texts; keeping them in memory"
                        );
                    }
                }
            }
        }
        Slot::Memory(NoteText::new(path, text))
    }
}

/// A kept note's name and text.
pub struct Kept<'a> {
    /// The file name without extension.
    pub name: &'a str,
    /// The text (borrowed from memory, or read from the scratch file).
    pub text: Cow<'a, str>,
}

/// Every note's text, by path.
#[derive(Debug, Default)]
pub struct Texts {
    /// foldhash: an exact search looks up every note of the vault (SipHash was 9% of a
    /// 100,000-note scan), and its per-process random seed keeps crafted file names from
    /// degrading the map.
    map: std::collections::HashMap<VaultPath, Slot, foldhash::fast::RandomState>,
    pack: Option<Arc<Pack>>,
    /// Bytes of the scratch file no slot points at.
    dead: u64,
    /// Bytes of the scratch file slots point at.
    live: u64,
}

impl Texts {
    /// Texts kept in memory.
    pub fn in_memory() -> Self {
        Texts::default()
    }

    /// Texts kept in a new scratch file in `dir` (replacing any an earlier run left).
    pub fn in_folder(dir: Arc<IndexCacheDir>) -> std::io::Result<Self> {
        let _ = dir.remove(ALT_FILE);
        Ok(Texts {
            pack: Some(Arc::new(Pack::create(dir, TEXTS_FILE)?)),
            ..Texts::default()
        })
    }

    /// True when the texts are in the cache folder rather than in memory.
    #[cfg(test)]
    fn in_file(&self) -> bool {
        self.pack.is_some()
    }

    /// What stages texts for this store until the next [`Texts::apply`].
    pub fn stager(&self) -> Stager {
        Stager {
            pack: self.pack.clone(),
        }
    }

    /// Number of notes kept.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no text is kept.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Drops the texts of `removed`, then keeps `staged` (replacing older versions). Rewrites
    /// the scratch file when its dead bytes outweigh the live ones.
    pub fn apply<'p>(
        &mut self,
        removed: impl IntoIterator<Item = &'p VaultPath>,
        staged: Vec<(VaultPath, Slot)>,
    ) {
        for p in removed {
            if let Some(old) = self.map.remove(p) {
                self.forget(&old);
            }
        }
        for (p, slot) in staged {
            if let Slot::Packed { len, .. } = &slot {
                self.live += u64::from(*len);
            }
            if let Some(old) = self.map.insert(p, slot) {
                self.forget(&old);
            }
        }
        if self.dead > MAX_DEAD_BYTES.max(self.live) {
            self.compact();
        }
    }

    fn forget(&mut self, slot: &Slot) {
        if let Slot::Packed { len, .. } = slot {
            self.live -= u64::from(*len);
            self.dead += u64::from(*len);
        }
    }

    /// Copies the live texts, in file order, into a new scratch file under the other name (see
    /// [`Pack::name`]); the old one is removed with its last reader. On an error the old file
    /// stays (with its dead bytes).
    fn compact(&mut self) {
        let Some(old) = self.pack.clone() else {
            return;
        };
        let started = Instant::now();
        let next = if old.name == TEXTS_FILE {
            ALT_FILE
        } else {
            TEXTS_FILE
        };
        let copied = (|| -> std::io::Result<(Pack, Vec<(VaultPath, u64)>)> {
            let new = Pack::create(Arc::clone(&old.dir), next)?;
            let order = self.in_file_order();
            let mut moved = Vec::with_capacity(order.len());
            for (at, len, p) in order {
                let bytes = old.read(at, len as usize)?;
                moved.push((p.clone(), new.append(&bytes)?));
            }
            Ok((new, moved))
        })();
        match copied {
            Ok((new, moved)) => {
                for (p, at) in moved {
                    if let Some(Slot::Packed { at: slot_at, .. }) = self.map.get_mut(&p) {
                        *slot_at = at;
                    }
                }
                tracing::debug!(
                    dead = self.dead,
                    live = self.live,
                    ms = started.elapsed().as_millis() as u64,
                    "texts scratch file rewritten"
                );
                self.pack = Some(Arc::new(new));
                self.dead = 0;
            }
            Err(e) => {
                // The new pack (dropped above) removed its own file.
                tracing::warn!(error = %e, "could not rewrite the texts scratch file");
            }
        }
    }

    /// Where each text in the scratch file is (offset, length, note), in file order.
    fn in_file_order(&self) -> Vec<(u64, u32, &VaultPath)> {
        use rayon::slice::ParallelSliceMut;
        let mut order: Vec<(u64, u32, &VaultPath)> = self
            .map
            .iter()
            .filter_map(|(p, s)| match s {
                Slot::Packed { at, len } => Some((*at, *len, p)),
                Slot::Memory(_) => None,
            })
            .collect();
        order.par_sort_unstable_by_key(|e| e.0);
        order
    }

    /// The kept name and text of the note at `path`.
    pub fn get<'s>(&'s self, path: &'s VaultPath) -> Option<Kept<'s>> {
        match self.map.get(path)? {
            Slot::Memory(t) => Some(Kept {
                name: t.name(),
                text: Cow::Borrowed(t.text()),
            }),
            Slot::Packed { at, len } => {
                let pack = self.pack.as_ref()?;
                match pack.read(*at, *len as usize) {
                    Ok(bytes) => Some(Kept {
                        name: path.stem(),
                        text: Cow::Owned(into_text(bytes)),
                    }),
                    Err(e) => {
                        tracing::warn!(path = %path, error = %e, "a kept text could not be read");
                        None
                    }
                }
            }
        }
    }

    /// Calls `score(path, name, text)` for every kept note on all cores and collects what it
    /// returns; stops starting new notes once `budget` has passed (then the second value is
    /// true: the results cover only the notes reached).
    pub fn scan<'s, R: Send>(
        &'s self,
        budget: Duration,
        score: &(dyn Fn(&'s VaultPath, &str, &str) -> Option<R> + Sync),
    ) -> (Vec<R>, bool) {
        use rayon::prelude::*;
        let started = Instant::now();
        let over = AtomicBool::new(false);
        let out_of_time = || {
            if over.load(Ordering::Relaxed) {
                return true;
            }
            if started.elapsed() > budget {
                over.store(true, Ordering::Relaxed);
                return true;
            }
            false
        };
        // Texts in memory (all of them without a scratch file; those it refused with one).
        let in_memory = {
            const AHEAD: usize = 2;
            let notes: Vec<(&VaultPath, &NoteText)> = self
                .map
                .iter()
                .filter_map(|(p, s)| match s {
                    Slot::Memory(t) => Some((p, t)),
                    Slot::Packed { .. } => None,
                })
                .collect();
            notes
                .par_chunks(64)
                .flat_map_iter(|chunk| {
                    chunk.iter().take(AHEAD).for_each(|(_, t)| t.prefetch());
                    let out_of_time = &out_of_time;
                    chunk.iter().enumerate().filter_map(move |(i, (p, t))| {
                        if out_of_time() {
                            return None;
                        }
                        if let Some((_, next)) = chunk.get(i + AHEAD) {
                            next.prefetch();
                        }
                        score(p, t.name(), t.text())
                    })
                })
                .collect::<Vec<R>>()
        };
        let Some(pack) = &self.pack else {
            return (in_memory, over.into_inner());
        };
        // In file order, a group of neighbours per read.
        let order = self.in_file_order();
        let found = order
            .par_chunks(GROUP)
            .flat_map_iter(|group| {
                let mut found = Vec::new();
                if out_of_time() {
                    return found;
                }
                let (first, last) = (group[0], group[group.len() - 1]);
                let span = last.0 + u64::from(last.1) - first.0;
                let whole = (span <= MAX_GROUP_BYTES)
                    .then(|| pack.read(first.0, span as usize).ok())
                    .flatten();
                for &(at, len, path) in group {
                    let bytes: Cow<'_, [u8]> = match &whole {
                        Some(w) => {
                            let from = (at - first.0) as usize;
                            Cow::Borrowed(&w[from..from + len as usize])
                        }
                        None => match pack.read(at, len as usize) {
                            Ok(b) => Cow::Owned(b),
                            Err(_) => continue,
                        },
                    };
                    let text = String::from_utf8_lossy(&bytes);
                    if let Some(r) = score(path, path.stem(), &text) {
                        found.push(r);
                    }
                }
                found
            })
            .collect::<Vec<R>>();
        let mut found = found;
        found.extend(in_memory);
        (found, over.into_inner())
    }
}

/// Bytes written from a `&str` are UTF-8 unless the file was changed under us.
fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::Vault;

    #[test]
    fn a_kept_text_holds_the_note_name_apart_from_the_text() {
        let path = VaultPath::parse("Folder/My note.v2.md").unwrap();
        let kept = NoteText::new(&path, "# Title\nbody");
        assert_eq!(kept.name(), "My note.v2");
        assert_eq!(kept.text(), "# Title\nbody");
        let empty = NoteText::new(&VaultPath::parse("x.md").unwrap(), "");
        assert_eq!((empty.name(), empty.text()), ("x", ""));
    }

    /// A vault and its cache folder, in a temporary folder.
    #[allow(clippy::disallowed_methods)] // test fixture
    fn cache_dir() -> (tempfile::TempDir, Arc<IndexCacheDir>) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        let vault = Vault::open(&root, Default::default()).unwrap();
        let dir = IndexCacheDir::open(&tmp.path().join("cache"), &vault).unwrap();
        (tmp, Arc::new(dir))
    }

    fn path(s: &str) -> VaultPath {
        VaultPath::parse(s).unwrap()
    }

    /// Stages `notes` into `texts` and applies them, with `removed`.
    fn put(texts: &mut Texts, notes: &[(&str, String)], removed: &[&str]) {
        let stager = texts.stager();
        let staged: Vec<(VaultPath, Slot)> = notes
            .iter()
            .map(|(p, t)| (path(p), stager.stage(&path(p), t)))
            .collect();
        let removed: Vec<VaultPath> = removed.iter().map(|p| path(p)).collect();
        texts.apply(&removed, staged);
    }

    /// Everything a full scan sees, sorted.
    fn scanned(texts: &Texts) -> Vec<(String, String, String)> {
        let (mut all, partial) = texts.scan(Duration::from_secs(60), &|p, name, text| {
            Some((p.to_string(), name.to_owned(), text.to_owned()))
        });
        assert!(!partial);
        all.sort();
        all
    }

    #[test]
    fn texts_in_the_cache_folder_read_back_as_texts_in_memory_do_through_edits_and_rewrites() {
        let (_tmp, dir) = cache_dir();
        let mut in_file = Texts::in_folder(Arc::clone(&dir)).unwrap();
        let mut in_memory = Texts::in_memory();
        assert!(in_file.in_file() && !in_memory.in_file());
        // 600 notes of about 100 KB, then every one replaced twice and a third removed: the
        // dead bytes pass 64 MB and the live ones, so the file is rewritten along the way.
        let body =
            |i: usize, round: usize| format!("# {i} r{round} é\n{}\n", "x".repeat(100_000 + i));
        for round in 0..3 {
            let notes: Vec<(String, String)> = (0..600)
                .map(|i| (format!("F/n{i}.md"), body(i, round)))
                .collect();
            let refs: Vec<(&str, String)> =
                notes.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
            let removed: Vec<String> = if round == 2 {
                (0..200).map(|i| format!("F/n{i}.md")).collect()
            } else {
                Vec::new()
            };
            let removed: Vec<&str> = removed.iter().map(String::as_str).collect();
            let refs = if round == 2 {
                refs[200..].to_vec()
            } else {
                refs
            };
            put(&mut in_file, &refs, &removed);
            put(&mut in_memory, &refs, &removed);
        }
        assert_eq!(in_file.len(), 400);
        assert!(
            in_file.dead <= MAX_DEAD_BYTES.max(in_file.live),
            "{}",
            in_file.dead
        );
        assert_eq!(scanned(&in_file), scanned(&in_memory));
        let p = path("F/n599.md");
        let kept = in_file.get(&p).unwrap();
        assert_eq!((kept.name, &*kept.text), ("n599", body(599, 2).as_str()));
        assert!(in_file.get(&path("F/n1.md")).is_none());
        // Rewritten: the file holds the live texts and what died since, not all ever written.
        let written: u64 = (0..3)
            .flat_map(|round| (0..600).map(move |i| (round, i)))
            .filter(|&(round, i)| round < 2 || i >= 200)
            .map(|(round, i)| body(i, round).len() as u64)
            .sum();
        let name = in_file.pack.as_ref().unwrap().name;
        let other = if name == TEXTS_FILE {
            ALT_FILE
        } else {
            TEXTS_FILE
        };
        let on_disk = dir.open_file(name).unwrap().len();
        assert_eq!(on_disk, in_file.live + in_file.dead);
        assert!(on_disk < written, "{on_disk} of {written}");
        // The file before the last rewrite went with its last reader.
        assert!(dir.open_file(other).is_err(), "{other} is left behind");
        drop(in_file);
        for name in [TEXTS_FILE, ALT_FILE] {
            assert!(
                dir.open_file(name).is_err(),
                "{name}: the texts file is removed with the store"
            );
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // test fixture: plants a symlink in the cache folder
    #[cfg(unix)]
    fn a_symlink_planted_at_the_texts_file_is_replaced_not_followed() {
        let (tmp, dir) = cache_dir();
        let outside = tmp.path().join("outside.txt");
        std::fs::write(&outside, "keep me").unwrap();
        let folder = std::fs::read_dir(tmp.path().join("cache/index-1"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::os::unix::fs::symlink(&outside, folder.join(TEXTS_FILE)).unwrap();
        let mut texts = Texts::in_folder(dir).unwrap();
        put(&mut texts, &[("a.md", "secret words".to_owned())], &[]);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
        assert!(!folder.join(TEXTS_FILE).is_symlink());
        assert_eq!(&*texts.get(&path("a.md")).unwrap().text, "secret words");
    }
}
