//! Link resolution as Obsidian does it: which vault file a link's path part opens.
//!
//! Rules, in order (the first that yields a candidate wins):
//!
//! 1. An empty target is the linking note itself (`[[#Heading]]`).
//! 2. A target starting with `./` or `../` is relative to the linking note's folder; only that exact
//!    file can match (a `..` above the vault root is broken).
//! 3. Exact vault path: the target itself, or the target plus `.md` (`[[Folder/Note]]`,
//!    `[[Folder/Note.md]]`, `[[Note.v2]]` for `Note.v2.md`). A leading `/` is ignored.
//! 4. Path-suffix match: every file whose path ends with `/` + the target (or target + `.md`), which
//!    includes plain file-name matches for a target without `/`.
//!
//! Matching is case-insensitive and blind to Unicode normalisation (NFC and NFD spellings of a
//! name are the same file, as on macOS). A non-Markdown file (an attachment, a canvas) only matches
//! with its extension: `[[diagram]]` never opens `diagram.png`.
//!
//! When several files match, the choice is deterministic and prefers the candidate nearest the
//! linking note: most leading folders in common with the linking note's folder, then the fewest
//! folders deep, then the smallest path in byte order. The others are reported as alternatives,
//! so `resolve_link` can say the link is ambiguous. (Two files whose paths differ only in case or
//! normalisation have the same exact-path key; the smallest path wins there too.)
//!
//! ## Layout
//!
//! Every file gets a small integer id (the model keys its backlinks by it). The two lookup maps,
//! by path key and by file-name key, hold no key text: they map a keyed hash of the key to the
//! ids of the files with that key, and every hit is checked against the file's path (an ASCII
//! path is compared case-insensitively in place; only non-ASCII paths have their key computed).
//! A hash collision therefore costs one comparison, never a wrong answer, and the index holds
//! about 40 bytes per file besides the paths it shares with the model.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use rayon::prelude::*;
use unicode_normalization::UnicodeNormalization;

use crate::vault::VaultPath;

/// The lookup key of a path or name: NFC, lower case.
pub fn key(s: &str) -> String {
    let mut out = String::new();
    key_into(s, &mut out);
    out
}

/// [`key`] written into `out` (cleared first), so that a caller resolving many links reuses one
/// buffer.
pub fn key_into(s: &str, out: &mut String) {
    out.clear();
    if s.is_ascii() {
        // ASCII is already in NFC.
        out.push_str(s);
        out.make_ascii_lowercase();
    } else {
        out.extend(s.nfc());
        let lower = out.to_lowercase();
        *out = lower;
    }
}

/// Does `path` have the lookup key `want` (itself a [`key`])? Without allocating for ASCII paths.
fn has_key(path: &str, want: &str) -> bool {
    if path.is_ascii() {
        // `want` is lower case, so comparing ASCII case-insensitively is comparing keys.
        path.eq_ignore_ascii_case(want)
    } else {
        key(path) == want
    }
}

/// Does the key of `path` equal `suffix`, or end with `/` + `suffix`?
fn key_has_suffix(path: &str, suffix: &str) -> bool {
    let matches = |k: &str| {
        k == suffix
            || (k.len() > suffix.len()
                && k.ends_with(suffix)
                && k.as_bytes()[k.len() - suffix.len() - 1] == b'/')
    };
    if path.is_ascii() {
        // The key of an ASCII path has the same bytes up to case.
        path.len() >= suffix.len()
            && path.is_char_boundary(path.len() - suffix.len())
            && path[path.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            && (path.len() == suffix.len()
                || path.as_bytes()[path.len() - suffix.len() - 1] == b'/')
    } else {
        matches(&key(path))
    }
}

/// Do two folder names have the same key?
fn same_key(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        a.eq_ignore_ascii_case(b)
    } else {
        key(a) == key(b)
    }
}

/// A hasher for keys that already are hashes (the maps' keys are keyed SipHash values).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; this keeps any other input well defined.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map keyed by a hash computed elsewhere.
pub(crate) type HashKeyed<V> = HashMap<u64, V, BuildHasherDefault<PassThrough>>;

/// The ids filed under one hash: nearly always one.
#[derive(Debug, Clone)]
enum Ids {
    One(u32),
    Many(Vec<u32>),
}

impl Ids {
    fn as_slice(&self) -> &[u32] {
        match self {
            Ids::One(id) => std::slice::from_ref(id),
            Ids::Many(ids) => ids,
        }
    }

    fn push(&mut self, id: u32) {
        match self {
            Ids::One(first) => *self = Ids::Many(vec![*first, id]),
            Ids::Many(ids) => ids.push(id),
        }
    }

    /// Removes `id`; true when nothing is left.
    fn remove(&mut self, id: u32) -> bool {
        match self {
            Ids::One(only) => *only == id,
            Ids::Many(ids) => {
                ids.retain(|&x| x != id);
                if let [last] = ids[..] {
                    *self = Ids::One(last);
                }
                false
            }
        }
    }
}

/// Reusable buffers for resolving many links without allocating for each.
#[derive(Debug, Default)]
pub struct Scratch {
    key: String,
    candidates: Vec<u32>,
    /// [`FileIndex::resolve_batch`]: the keys of the batch's plain targets, each followed by
    /// `.md`, and what is known of each link.
    keys: String,
    plan: Vec<Plan>,
}

/// One link of a batch: its target and the note it is in.
#[derive(Debug, Clone, Copy)]
pub struct LinkRef<'a> {
    /// The path part of the link.
    pub target: &'a str,
    /// The id of the linking note.
    pub from: u32,
    /// Its path.
    pub from_path: &'a VaultPath,
}

/// How a link of a batch is being resolved.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Known without a lookup.
    Done(Option<u32>),
    /// Relative or with folders: resolved on its own.
    Slow,
    /// A plain name (the usual case): `keys[start..start + len]` is its key, then `.md`.
    Plain {
        start: usize,
        len: usize,
        hash: u64,
        hash_md: u64,
    },
}

/// Every file of the vault, indexed for link resolution, each with a small integer id.
#[derive(Debug, Default, Clone)]
pub struct FileIndex {
    /// Keys the hashes (per process, so file names cannot be chosen to collide).
    seed: RandomState,
    /// id → path; `None` for a free slot.
    paths: Vec<Option<VaultPath>>,
    /// Slots freed by [`FileIndex::release`], reused first.
    free: Vec<u32>,
    /// Number of files.
    len: usize,
    /// hash(key(path)) → ids.
    by_path: HashKeyed<Ids>,
    /// hash(key(file name, with extension)) → ids.
    by_name: HashKeyed<Ids>,
}

/// The outcome of resolving a link target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The file Obsidian would open, and any other files that matched as well.
    Found {
        /// The chosen file.
        path: VaultPath,
        /// Other suffix matches, nearest first (empty unless the link is ambiguous).
        alternatives: Vec<VaultPath>,
    },
    /// No file matches.
    NotFound,
}

impl FileIndex {
    /// The hash under which a lookup key is filed (also used by the model for link names).
    pub(crate) fn hash_key(&self, key: &str) -> u64 {
        self.seed.hash_one(key)
    }

    /// Adds a file, returning its id (its existing id when already indexed).
    pub fn insert(&mut self, path: &VaultPath) -> u32 {
        if let Some(id) = self.id(path) {
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.paths[id as usize] = Some(path.clone());
                id
            }
            None => {
                let id = u32::try_from(self.paths.len()).unwrap_or(u32::MAX);
                self.paths.push(Some(path.clone()));
                id
            }
        };
        self.len += 1;
        let path_hash = self.hash_key(&key(path.as_str()));
        let name_hash = self.hash_key(&key(path.file_name()));
        self.by_path
            .entry(path_hash)
            .and_modify(|ids| ids.push(id))
            .or_insert(Ids::One(id));
        self.by_name
            .entry(name_hash)
            .and_modify(|ids| ids.push(id))
            .or_insert(Ids::One(id));
        id
    }

    /// An index of `paths` (distinct), with ids `0..` in their order: the keys are hashed in
    /// parallel, then filed.
    pub fn from_sorted<'p>(paths: impl Iterator<Item = &'p VaultPath>) -> Self {
        let paths: Vec<Option<VaultPath>> = paths.cloned().map(Some).collect();
        let mut index = FileIndex {
            len: paths.len(),
            ..FileIndex::default()
        };
        let hashes: Vec<(u64, u64)> = paths
            .par_iter()
            .map_init(String::new, |buf, path| {
                let path = path.as_ref().map_or("", VaultPath::as_str);
                key_into(path, buf);
                let path_hash = index.hash_key(buf);
                let name = buf.rsplit('/').next().unwrap_or(buf);
                (path_hash, index.hash_key(name))
            })
            .collect();
        index.by_path.reserve(hashes.len());
        index.by_name.reserve(hashes.len());
        for (id, (path_hash, name_hash)) in hashes.into_iter().enumerate() {
            let id = id as u32;
            for (map, hash) in [
                (&mut index.by_path, path_hash),
                (&mut index.by_name, name_hash),
            ] {
                map.entry(hash)
                    .and_modify(|ids| ids.push(id))
                    .or_insert(Ids::One(id));
            }
        }
        index.paths = paths;
        index
    }

    /// Removes a file, returning the id it had. The id is not reused until [`FileIndex::release`].
    pub fn remove(&mut self, path: &VaultPath) -> Option<u32> {
        let id = self.id(path)?;
        let path_hash = self.hash_key(&key(path.as_str()));
        let name_hash = self.hash_key(&key(path.file_name()));
        for (map, hash) in [
            (&mut self.by_path, path_hash),
            (&mut self.by_name, name_hash),
        ] {
            if let Some(ids) = map.get_mut(&hash)
                && ids.remove(id)
            {
                map.remove(&hash);
            }
        }
        self.paths[id as usize] = None;
        self.len -= 1;
        Some(id)
    }

    /// Makes the id of a removed file available again.
    pub fn release(&mut self, id: u32) {
        if self.paths.get(id as usize).is_some_and(Option::is_none) && !self.free.contains(&id) {
            self.free.push(id);
        }
    }

    /// The id of an indexed file.
    pub fn id(&self, path: &VaultPath) -> Option<u32> {
        let path_key = key(path.as_str());
        self.by_path
            .get(&self.hash_key(&path_key))?
            .as_slice()
            .iter()
            .copied()
            .find(|&id| self.path(id) == Some(path))
    }

    /// The path of a file id (`None` for a removed file).
    pub fn path(&self, id: u32) -> Option<&VaultPath> {
        self.paths.get(id as usize).and_then(Option::as_ref)
    }

    /// One more than the largest id in use: the size of a table indexed by id.
    pub fn id_bound(&self) -> usize {
        self.paths.len()
    }

    /// True when the file is indexed.
    pub fn contains(&self, path: &VaultPath) -> bool {
        self.id(path).is_some()
    }

    /// Number of files indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no file is indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The link-name keys that a file named `file_name` can satisfy: its name, and its name
    /// without `.md` for a note (links may omit the extension).
    pub fn file_name_keys(file_name: &str) -> Vec<String> {
        let k = key(file_name);
        match k.strip_suffix(".md") {
            Some(stem) if !stem.is_empty() => vec![stem.to_owned(), k],
            _ => vec![k],
        }
    }

    /// Resolves `target` (the path part of a link, no `#subpath`) from the note `from`.
    pub fn resolve(&self, target: &str, from: Option<&VaultPath>) -> Resolution {
        let mut scratch = Scratch::default();
        let target = target.trim();
        if target.is_empty() {
            return match from {
                Some(f) => Resolution::Found {
                    path: f.clone(),
                    alternatives: Vec::new(),
                },
                None => Resolution::NotFound,
            };
        }
        let found = |id: Option<u32>| match id.and_then(|id| self.path(id)) {
            Some(path) => Resolution::Found {
                path: path.clone(),
                alternatives: Vec::new(),
            },
            None => Resolution::NotFound,
        };
        if let Some(joined) = relative(target, from) {
            return found(joined.and_then(|j| self.exact(&j, &mut scratch)));
        }
        let target = target.trim_start_matches('/');
        if let Some(id) = self.exact(target, &mut scratch) {
            return found(Some(id));
        }
        self.suffix_candidates(target, &mut scratch);
        let mut candidates: Vec<&VaultPath> = scratch
            .candidates
            .iter()
            .filter_map(|&id| self.path(id))
            .collect();
        let from_dirs = folders_of(from);
        candidates.sort_by(|a, b| rank(a, &from_dirs).cmp(&rank(b, &from_dirs)));
        let mut iter = candidates.into_iter().cloned();
        match iter.next() {
            Some(path) => Resolution::Found {
                path,
                alternatives: iter.collect(),
            },
            None => Resolution::NotFound,
        }
    }

    /// Resolves many links at once, as [`FileIndex::resolve_id`] would one by one, into `out`
    /// (same order), with the hash of each link's name key (its target's last path segment, as
    /// a key) in `names`.
    ///
    /// The index is much larger than the caches, and each lookup is a short chain of cache
    /// misses (hash table, then the candidate's path). Done link after link, the chains run one
    /// after the other; done in phases over the whole batch (all keys, then all table lookups,
    /// then all paths), the misses of different links overlap, which is several times faster.
    /// Plain names (`[[Note]]`, `[[img.png]]`, no folder) take this way: the two name lookups
    /// (the name, the name + `.md`) find every file that can match, the exact matches being the
    /// ones at the vault root. Other targets take [`FileIndex::resolve_id`].
    pub fn resolve_batch(
        &self,
        links: &[LinkRef<'_>],
        scratch: &mut Scratch,
        out: &mut Vec<Option<u32>>,
        names: &mut Vec<u64>,
    ) {
        out.clear();
        names.clear();
        // The link texts are scattered in memory: bring them in first, all at once.
        let mut touched = 0usize;
        for link in links {
            let first = link.target.as_bytes().first().copied().unwrap_or(0);
            touched = touched.wrapping_add(usize::from(first));
        }
        std::hint::black_box(touched);
        let mut keys = std::mem::take(&mut scratch.keys);
        let mut plan = std::mem::take(&mut scratch.plan);
        keys.clear();
        plan.clear();
        // Keys and hashes: no memory outside the batch is touched.
        for link in links {
            let target = link.target.trim();
            let plain = target.trim_start_matches('/');
            if target.is_empty() || plain.contains('/') {
                // The name key of a target with folders is its last segment's.
                key_into(
                    target.rsplit('/').next().unwrap_or(target),
                    &mut scratch.key,
                );
                names.push(self.hash_key(&scratch.key));
            }
            let step = if target.is_empty() {
                Plan::Done(Some(link.from))
            } else if target.starts_with("./") || target.starts_with("../") {
                Plan::Slow
            } else {
                let target = plain;
                if target.contains('/') {
                    Plan::Slow
                } else {
                    let start = keys.len();
                    key_into(target, &mut scratch.key);
                    keys.push_str(&scratch.key);
                    let len = keys.len() - start;
                    keys.push_str(".md");
                    let hash = self.hash_key(&keys[start..start + len]);
                    names.push(hash);
                    Plan::Plain {
                        start,
                        len,
                        hash,
                        hash_md: self.hash_key(&keys[start..start + len + 3]),
                    }
                }
            };
            plan.push(step);
        }
        // Table lookups, independent of each other.
        let found: Vec<[Option<&Ids>; 2]> = plan
            .iter()
            .map(|step| match *step {
                Plan::Plain { hash, hash_md, .. } => {
                    [self.by_name.get(&hash), self.by_name.get(&hash_md)]
                }
                _ => [None, None],
            })
            .collect();
        // Bring each first candidate's path into the cache, again independently.
        for ids in found.iter().flatten().flatten() {
            if let Some(path) = self.path(ids.as_slice()[0]) {
                let first = path.as_str().as_bytes().first().copied().unwrap_or(0);
                touched = touched.wrapping_add(usize::from(first));
            }
        }
        std::hint::black_box(touched);
        // Decide.
        for ((link, step), ids) in links.iter().zip(&plan).zip(&found) {
            let id = match *step {
                Plan::Done(id) => id,
                Plan::Slow => {
                    self.resolve_id(link.target, Some((link.from, link.from_path)), scratch)
                }
                Plan::Plain { start, len, .. } => self.pick_named(
                    [&keys[start..start + len], &keys[start..start + len + 3]],
                    *ids,
                    link.from_path,
                    scratch,
                ),
            };
            out.push(id);
        }
        scratch.keys = keys;
        scratch.plan = plan;
    }

    /// Chooses among the files found under a plain name's two keys (`[name, name + ".md"]`),
    /// following the rules: an exact match at the root (first key first), else the nearest of
    /// the suffix matches.
    fn pick_named(
        &self,
        keys: [&str; 2],
        found: [Option<&Ids>; 2],
        from: &VaultPath,
        scratch: &mut Scratch,
    ) -> Option<u32> {
        scratch.candidates.clear();
        for (key, ids) in keys.iter().zip(found) {
            for &id in ids.map(Ids::as_slice).unwrap_or_default() {
                if let Some(path) = self.path(id)
                    && key_has_suffix(path.as_str(), key)
                    && !scratch.candidates.contains(&id)
                {
                    scratch.candidates.push(id);
                }
            }
        }
        // An exact match is a file at the root whose whole key is the first key, else the second.
        for key in keys {
            let exact = scratch
                .candidates
                .iter()
                .filter_map(|&id| Some((id, self.path(id)?)))
                .filter(|(_, p)| !p.as_str().contains('/') && has_key(p.as_str(), key))
                .min_by(|(_, a), (_, b)| a.as_str().cmp(b.as_str()));
            if let Some((id, _)) = exact {
                return Some(id);
            }
        }
        match scratch.candidates[..] {
            [] => None,
            [only] => Some(only),
            ref several => {
                let from_dirs = folders_of(Some(from));
                several
                    .iter()
                    .copied()
                    .filter_map(|id| Some((id, self.path(id)?)))
                    .min_by(|(_, a), (_, b)| rank(a, &from_dirs).cmp(&rank(b, &from_dirs)))
                    .map(|(id, _)| id)
            }
        }
    }

    /// [`FileIndex::resolve`] for the model's bulk work: the id of the file chosen, without the
    /// alternatives, reusing `scratch`. An empty target resolves to `from` (the caller's own id).
    pub fn resolve_id(
        &self,
        target: &str,
        from: Option<(u32, &VaultPath)>,
        scratch: &mut Scratch,
    ) -> Option<u32> {
        let target = target.trim();
        if target.is_empty() {
            return from.map(|(id, _)| id);
        }
        if let Some(joined) = relative(target, from.map(|(_, p)| p)) {
            return joined.and_then(|j| self.exact(&j, scratch));
        }
        let target = target.trim_start_matches('/');
        if let Some(id) = self.exact(target, scratch) {
            return Some(id);
        }
        self.suffix_candidates(target, scratch);
        match scratch.candidates[..] {
            [] => None,
            [only] => Some(only),
            ref several => {
                let from_dirs = folders_of(from.map(|(_, p)| p));
                several
                    .iter()
                    .copied()
                    .filter_map(|id| Some((id, self.path(id)?)))
                    .min_by(|(_, a), (_, b)| rank(a, &from_dirs).cmp(&rank(b, &from_dirs)))
                    .map(|(id, _)| id)
            }
        }
    }

    /// The file whose path key is `key(target)` or `key(target) + ".md"`, in that order (the
    /// smallest path when several share the key).
    fn exact(&self, target: &str, scratch: &mut Scratch) -> Option<u32> {
        key_into(target, &mut scratch.key);
        for with_md in [false, true] {
            if with_md {
                scratch.key.push_str(".md");
            }
            let want = scratch.key.as_str();
            if let Some(ids) = self.by_path.get(&self.hash_key(want)) {
                let best = ids
                    .as_slice()
                    .iter()
                    .filter_map(|&id| Some((id, self.path(id)?)))
                    .filter(|(_, p)| has_key(p.as_str(), want))
                    .min_by(|(_, a), (_, b)| a.as_str().cmp(b.as_str()));
                if let Some((id, _)) = best {
                    return Some(id);
                }
            }
        }
        None
    }

    /// Fills `scratch.candidates` with the files whose path key ends with `/` + `key(target)` or
    /// `/` + `key(target) + ".md"` (or equals one of them), without duplicates.
    fn suffix_candidates(&self, target: &str, scratch: &mut Scratch) {
        scratch.candidates.clear();
        key_into(target, &mut scratch.key);
        for with_md in [false, true] {
            if with_md {
                scratch.key.push_str(".md");
            }
            let suffix = scratch.key.as_str();
            let name = suffix.rsplit('/').next().unwrap_or(suffix);
            let Some(ids) = self.by_name.get(&self.hash_key(name)) else {
                continue;
            };
            for &id in ids.as_slice() {
                if let Some(path) = self.path(id)
                    && key_has_suffix(path.as_str(), suffix)
                    && !scratch.candidates.contains(&id)
                {
                    scratch.candidates.push(id);
                }
            }
        }
    }
}

/// For a `./` or `../` target: `Some` of the joined path (`None` inside when it leaves the vault
/// or there is no linking note). `None` for any other target.
fn relative(target: &str, from: Option<&VaultPath>) -> Option<Option<String>> {
    if target.starts_with("./") || target.starts_with("../") {
        Some(from.and_then(|f| join_relative(f, target)))
    } else {
        None
    }
}

/// The folders of `from` (its components without the file name).
fn folders_of(from: Option<&VaultPath>) -> Vec<&str> {
    from.map(|f| {
        let mut c: Vec<&str> = f.components().collect();
        c.pop();
        c
    })
    .unwrap_or_default()
}

/// How near a candidate is to the linking note's folders (smaller is nearer): most leading
/// folders in common, then fewest folders, then the path in byte order.
fn rank<'p>(path: &'p VaultPath, from_dirs: &[&str]) -> (std::cmp::Reverse<usize>, usize, &'p str) {
    let mut dirs: Vec<&str> = path.components().collect();
    dirs.pop();
    let common = dirs
        .iter()
        .zip(from_dirs)
        .take_while(|(x, y)| same_key(x, y))
        .count();
    (std::cmp::Reverse(common), dirs.len(), path.as_str())
}

/// `from`'s folder joined with a `./` or `../` target, lexically; None above the root.
fn join_relative(from: &VaultPath, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = from.components().collect();
    parts.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}
#[cfg(test)]
mod tests {
    use super::*;

    fn index(paths: &[&str]) -> FileIndex {
        let mut idx = FileIndex::default();
        for p in paths {
            idx.insert(&VaultPath::parse(p).unwrap());
        }
        idx
    }

    /// Resolves through both entry points, which must agree.
    fn resolve(idx: &FileIndex, target: &str, from: &str) -> Option<String> {
        let from = VaultPath::parse(from).unwrap();
        let found = match idx.resolve(target, Some(&from)) {
            Resolution::Found { path, .. } => Some(path.to_string()),
            Resolution::NotFound => None,
        };
        if !target.trim().is_empty() {
            let by_id = idx
                .resolve_id(target, Some((u32::MAX, &from)), &mut Scratch::default())
                .and_then(|id| idx.path(id))
                .map(|p| p.to_string());
            assert_eq!(by_id, found, "{target} from {from}");
        }
        found
    }

    #[test]
    fn exact_path_then_suffix_then_name() {
        let idx = index(&[
            "Note.md",
            "A/Note.md",
            "A/B/Deep.md",
            "X/A/B/Deep.md",
            "img.png",
        ]);
        assert_eq!(resolve(&idx, "Note", "Z/x.md").as_deref(), Some("Note.md"));
        assert_eq!(
            resolve(&idx, "A/Note", "Z/x.md").as_deref(),
            Some("A/Note.md")
        );
        assert_eq!(
            resolve(&idx, "A/Note.md", "Z/x.md").as_deref(),
            Some("A/Note.md")
        );
        assert_eq!(
            resolve(&idx, "/A/Note", "Z/x.md").as_deref(),
            Some("A/Note.md")
        );
        // Exact vault path beats a longer suffix match.
        assert_eq!(
            resolve(&idx, "A/B/Deep", "X/y.md").as_deref(),
            Some("A/B/Deep.md")
        );
        assert_eq!(
            resolve(&idx, "B/Deep", "Z/x.md").as_deref(),
            Some("A/B/Deep.md")
        );
        assert_eq!(
            resolve(&idx, "Deep", "X/A/q.md").as_deref(),
            Some("X/A/B/Deep.md")
        );
        assert_eq!(resolve(&idx, "Missing", "Z/x.md"), None);
        // A suffix must start at a folder boundary.
        assert_eq!(resolve(&idx, "ote", "Z/x.md"), None);
    }

    #[test]
    fn matching_ignores_case_and_unicode_normalisation() {
        let idx = index(&["Caf\u{e9}/R\u{e9}sum\u{e9}.md"]);
        assert_eq!(
            resolve(&idx, "cafe\u{301}/re\u{301}sume\u{301}", "x.md").as_deref(),
            Some("Café/Résumé.md")
        );
        assert_eq!(
            resolve(&idx, "RÉSUMÉ", "x.md").as_deref(),
            Some("Café/Résumé.md")
        );
    }

    #[test]
    fn attachments_need_their_extension_and_dotted_names_work() {
        let idx = index(&["diagram.png", "Note.v2.md", "Board.canvas"]);
        assert_eq!(resolve(&idx, "diagram", "x.md"), None);
        assert_eq!(
            resolve(&idx, "diagram.png", "x.md").as_deref(),
            Some("diagram.png")
        );
        assert_eq!(
            resolve(&idx, "Note.v2", "x.md").as_deref(),
            Some("Note.v2.md")
        );
        assert_eq!(
            resolve(&idx, "Board.canvas", "x.md").as_deref(),
            Some("Board.canvas")
        );
        assert_eq!(resolve(&idx, "Board", "x.md"), None);
    }

    #[test]
    fn ambiguous_names_prefer_the_nearest_candidate_deterministically() {
        let idx = index(&["A/Same.md", "B/Same.md", "B/C/Same.md", "D/E/F/Same.md"]);
        assert_eq!(
            resolve(&idx, "Same", "B/C/n.md").as_deref(),
            Some("B/C/Same.md")
        );
        assert_eq!(
            resolve(&idx, "Same", "B/n.md").as_deref(),
            Some("B/Same.md")
        );
        assert_eq!(
            resolve(&idx, "Same", "A/x/y.md").as_deref(),
            Some("A/Same.md")
        );
        // No folder in common: the shallowest, then by path.
        assert_eq!(
            resolve(&idx, "Same", "Z/n.md").as_deref(),
            Some("A/Same.md")
        );
        match idx.resolve("Same", Some(&VaultPath::parse("B/C/n.md").unwrap())) {
            Resolution::Found { alternatives, .. } => {
                let alt: Vec<_> = alternatives.iter().map(|p| p.as_str()).collect();
                assert_eq!(alt, ["B/Same.md", "A/Same.md", "D/E/F/Same.md"]);
            }
            Resolution::NotFound => panic!("not found"),
        }
    }

    #[test]
    fn relative_targets_and_self_links() {
        let idx = index(&["A/B/x.md", "A/y.md", "y.md"]);
        assert_eq!(resolve(&idx, "../y", "A/B/x.md").as_deref(), Some("A/y.md"));
        assert_eq!(
            resolve(&idx, "./x.md", "A/B/n.md").as_deref(),
            Some("A/B/x.md")
        );
        assert_eq!(resolve(&idx, "../../../y", "A/B/x.md"), None);
        assert_eq!(resolve(&idx, "", "A/y.md").as_deref(), Some("A/y.md"));
    }

    #[test]
    fn paths_differing_only_in_case_resolve_to_the_smallest() {
        let idx = index(&["b/Note.md", "B/note.md", "c/d/NOTE.md"]);
        assert_eq!(
            resolve(&idx, "b/note", "a/x.md").as_deref(),
            Some("B/note.md")
        );
        assert_eq!(
            resolve(&idx, "NOTE", "a/x.md").as_deref(),
            Some("B/note.md")
        );
        // Folders compare without case too; nearer still wins over the byte order.
        assert_eq!(
            resolve(&idx, "note", "b/y.md").as_deref(),
            Some("B/note.md")
        );
        assert_eq!(
            resolve(&idx, "note", "c/d/y.md").as_deref(),
            Some("c/d/NOTE.md")
        );
    }

    #[test]
    fn ids_are_stable_and_reused_only_after_release() {
        let mut idx = index(&["a.md", "b.md"]);
        let a = idx.id(&VaultPath::parse("a.md").unwrap()).unwrap();
        assert_eq!(idx.remove(&VaultPath::parse("a.md").unwrap()), Some(a));
        assert_eq!(idx.path(a), None);
        let c = idx.insert(&VaultPath::parse("c.md").unwrap());
        assert_ne!(c, a);
        idx.release(a);
        assert_eq!(idx.insert(&VaultPath::parse("d.md").unwrap()), a);
        assert_eq!(idx.len(), 3);
        assert_eq!(resolve(&idx, "a", "x.md"), None);
        assert_eq!(resolve(&idx, "d", "x.md").as_deref(), Some("d.md"));
    }

    #[test]
    fn removal_unindexes() {
        let mut idx = index(&["A/Same.md", "B/Same.md"]);
        idx.remove(&VaultPath::parse("A/Same.md").unwrap());
        assert_eq!(
            resolve(&idx, "Same", "A/n.md").as_deref(),
            Some("B/Same.md")
        );
        idx.remove(&VaultPath::parse("B/Same.md").unwrap());
        assert_eq!(resolve(&idx, "Same", "A/n.md"), None);
        assert!(idx.is_empty());
    }
}
