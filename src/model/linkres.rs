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
//! When several suffix candidates match, the choice is deterministic and prefers the candidate
//! nearest the linking note: most leading folders in common with the linking note's folder, then the
//! fewest folders deep, then the smallest path in byte order. The others are reported as
//! alternatives, so `resolve_link` can say the link is ambiguous.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

use crate::vault::VaultPath;

/// The lookup key of a path or name: NFC, lower case.
pub fn key(s: &str) -> String {
    if s.is_ascii() {
        // ASCII is already in NFC.
        s.to_ascii_lowercase()
    } else {
        s.nfc().collect::<String>().to_lowercase()
    }
}

/// Every file of the vault, indexed for link resolution.
#[derive(Debug, Default, Clone)]
pub struct FileIndex {
    /// key(path) → path.
    by_path: HashMap<String, VaultPath>,
    /// key(file name, with extension) → paths with that name, each with key(path).
    by_name: HashMap<String, Vec<(VaultPath, String)>>,
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
    /// Adds a file.
    pub fn insert(&mut self, path: &VaultPath) {
        let path_key = key(path.as_str());
        if self
            .by_path
            .insert(path_key.clone(), path.clone())
            .is_none()
        {
            self.by_name
                .entry(key(path.file_name()))
                .or_default()
                .push((path.clone(), path_key));
        }
    }

    /// Removes a file.
    pub fn remove(&mut self, path: &VaultPath) {
        if self.by_path.remove(&key(path.as_str())).is_some() {
            let name = key(path.file_name());
            if let Some(list) = self.by_name.get_mut(&name) {
                list.retain(|(p, _)| p != path);
                if list.is_empty() {
                    self.by_name.remove(&name);
                }
            }
        }
    }

    /// True when the file is indexed.
    pub fn contains(&self, path: &VaultPath) -> bool {
        self.by_path.contains_key(&key(path.as_str()))
    }

    /// Number of files indexed.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// True when no file is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// The key under which the model remembers which notes link to `target`: its last path
    /// segment (`note` for `[[Folder/Note#H]]`'s target `Folder/Note`).
    pub fn link_name_key(target: &str) -> String {
        key(target.trim().rsplit('/').next().unwrap_or(target))
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
        if target.starts_with("./") || target.starts_with("../") {
            let Some(joined) = from.and_then(|f| join_relative(f, target)) else {
                return Resolution::NotFound;
            };
            return self.exact(&keys(&joined));
        }
        let keys = keys(target.trim_start_matches('/'));
        if let found @ Resolution::Found { .. } = self.exact(&keys) {
            return found;
        }
        self.by_suffix(&keys, from)
    }

    fn exact(&self, keys: &[String; 2]) -> Resolution {
        for candidate in keys {
            if let Some(path) = self.by_path.get(candidate) {
                return Resolution::Found {
                    path: path.clone(),
                    alternatives: Vec::new(),
                };
            }
        }
        Resolution::NotFound
    }

    fn by_suffix(&self, keys: &[String; 2], from: Option<&VaultPath>) -> Resolution {
        let mut candidates: Vec<&VaultPath> = Vec::new();
        for suffix in keys {
            let name = suffix.rsplit('/').next().unwrap_or(suffix);
            let Some(list) = self.by_name.get(name) else {
                continue;
            };
            for (path, k) in list {
                let matches = k == suffix
                    || (k.len() > suffix.len()
                        && k.ends_with(suffix.as_str())
                        && k.as_bytes()[k.len() - suffix.len() - 1] == b'/');
                if matches && !candidates.contains(&path) {
                    candidates.push(path);
                }
            }
        }
        if candidates.is_empty() {
            return Resolution::NotFound;
        }
        let from_dirs: Vec<&str> = from
            .map(|f| {
                let mut c: Vec<&str> = f.components().collect();
                c.pop();
                c
            })
            .unwrap_or_default();
        candidates.sort_by(|a, b| {
            let rank = |p: &VaultPath| {
                let dirs: Vec<&str> = {
                    let mut c: Vec<&str> = p.components().collect();
                    c.pop();
                    c
                };
                let common = dirs
                    .iter()
                    .zip(&from_dirs)
                    .take_while(|(x, y)| key(x) == key(y))
                    .count();
                (std::cmp::Reverse(common), dirs.len())
            };
            rank(a)
                .cmp(&rank(b))
                .then_with(|| a.as_str().cmp(b.as_str()))
        });
        let mut iter = candidates.into_iter().cloned();
        match iter.next() {
            Some(path) => Resolution::Found {
                path,
                alternatives: iter.collect(),
            },
            None => Resolution::NotFound,
        }
    }
}

/// The lookup keys of a target as written and with `.md` added.
fn keys(target: &str) -> [String; 2] {
    let k = key(target);
    let md = format!("{k}.md");
    [k, md]
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

    fn resolve(idx: &FileIndex, target: &str, from: &str) -> Option<String> {
        match idx.resolve(target, Some(&VaultPath::parse(from).unwrap())) {
            Resolution::Found { path, .. } => Some(path.to_string()),
            Resolution::NotFound => None,
        }
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
