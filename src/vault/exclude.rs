//! [`Exclusions`]: paths the server's configuration removes from the vault (`--exclude GLOB`,
//! the config file's `exclude`). An excluded path is as unreachable as a hidden one: the
//! resolver refuses it wherever it is met (in the client's path or reached through a symlink,
//! in any letter case and either Unicode normalisation form), and scans skip it, so it is never
//! read, listed, searched, linked to, served as a resource or indexed.

use std::borrow::Cow;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use unicode_normalization::{UnicodeNormalization, is_nfc};

/// Compiled exclusion globs. Empty by default (nothing excluded).
#[derive(Debug, Clone, Default)]
pub struct Exclusions {
    set: Option<GlobSet>,
    patterns: Vec<String>,
}

/// The one glob dialect of vault paths (`--exclude`, `list_notes`'s `glob`): `*` and `?` stay
/// within one folder, `**` crosses folders, `{a,b}` and `[ab]` as usual.
pub fn path_glob(pattern: &str, case_insensitive: bool) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .literal_separator(true)
        .build()
}

/// Most exclusion patterns accepted.
pub const MAX_EXCLUSIONS: usize = 256;

/// Why a list of exclusion patterns was refused ([`Exclusions::new`]).
#[derive(Debug, thiserror::Error)]
pub enum ExclusionError {
    /// More than [`MAX_EXCLUSIONS`] patterns.
    #[error("at most {MAX_EXCLUSIONS} exclusion patterns")]
    TooMany,
    /// A pattern that is empty once spaces and slashes are trimmed.
    #[error("exclusion `{0}` is empty")]
    Empty(String),
    /// A pattern that is not a glob.
    #[error("exclusion `{pattern}` is not a valid glob: {source}")]
    NotGlob {
        pattern: String,
        source: globset::Error,
    },
    /// The globs compiled one by one but not as a set.
    #[error("exclusions: {0}")]
    Set(globset::Error),
}

impl Exclusions {
    /// Compiles `patterns`: globs over vault-relative paths (`Private`, `Journal/**`,
    /// `**/*.secret.md`), matched without regard to letter case or Unicode normalisation (macOS
    /// and Windows open `private/` for `Private/`, and macOS opens a name spelled with a
    /// combining accent as the same name precomposed); a folder that matches excludes everything
    /// in it. A pattern that is not a valid glob is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Exclusions, ExclusionError> {
        if patterns.len() > MAX_EXCLUSIONS {
            return Err(ExclusionError::TooMany);
        }
        if patterns.is_empty() {
            return Ok(Exclusions::default());
        }
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let trimmed = p.trim().trim_matches('/');
            if trimmed.is_empty() {
                return Err(ExclusionError::Empty(p.clone()));
            }
            let trimmed: String = trimmed.nfc().collect();
            let glob = path_glob(&trimmed, true).map_err(|source| ExclusionError::NotGlob {
                pattern: p.clone(),
                source,
            })?;
            b.add(glob);
        }
        let set = b.build().map_err(ExclusionError::Set)?;
        Ok(Exclusions {
            set: Some(set),
            patterns: patterns.to_vec(),
        })
    }

    /// True when nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.set.is_none()
    }

    /// The patterns as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// True when a pattern matches `path` itself (not one of its folders).
    pub fn matches_itself(&self, path: &str) -> bool {
        self.set
            .as_ref()
            .is_some_and(|set| set.is_match(&*composed(path)))
    }

    /// True when `path` (vault-relative, `/`-separated) or one of its folders is excluded.
    pub fn excludes(&self, path: &str) -> bool {
        let Some(set) = &self.set else {
            return false;
        };
        let path = composed(path);
        let mut end = 0;
        for part in path.split('/') {
            end += part.len();
            if set.is_match(&path[..end]) {
                return true;
            }
            end += 1;
        }
        false
    }
}

/// `path` in Unicode's composed form (NFC), as the patterns are: borrowed when it already is.
fn composed(path: &str) -> Cow<'_, str> {
    if is_nfc(path) {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(path.nfc().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(p: &[&str]) -> Exclusions {
        Exclusions::new(&p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_matching_folder_excludes_everything_below_it_in_any_case() {
        let e = ex(&["Private", "**/*.secret.md"]);
        assert!(e.excludes("Private"));
        assert!(e.excludes("private/a.md"));
        assert!(e.excludes("PRIVATE/deep/b.md"));
        assert!(e.excludes("Work/x.SECRET.md"));
        assert!(!e.excludes("Privateer.md"));
        assert!(!e.excludes("Public/Private.md.txt"));
        assert!(!ex(&[]).excludes("anything"));
    }

    #[test]
    fn a_pattern_excludes_both_unicode_spellings_of_a_name() {
        // "Privé" precomposed (U+00E9) and decomposed (e + U+0301): one folder on macOS.
        let composed = "Priv\u{e9}";
        let decomposed = "Prive\u{301}";
        for pattern in [composed, decomposed] {
            let e = ex(&[pattern]);
            for path in [composed, decomposed] {
                assert!(
                    e.excludes(&format!("{path}/journal.md")),
                    "{pattern:?} {path:?}"
                );
                assert!(e.matches_itself(path), "{pattern:?} {path:?}");
            }
            assert!(!e.excludes("Prive/journal.md"));
        }
    }

    #[test]
    fn bad_patterns_are_refused_by_name() {
        let e = Exclusions::new(&["a/[b".to_owned()]).unwrap_err();
        assert!(e.to_string().contains("`a/[b`"), "{e}");
    }
}
