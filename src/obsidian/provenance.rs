//! Where a note's text came from, as far as the vault can tell: `clipped` (web clippers' notes:
//! Obsidian Web Clipper and MarkDownload put the page's address in a `source` property, and Web
//! Clipper tags its notes `clippings`; and the folders the config file calls untrusted), `shared` (the folders it calls shared: a synced
//! team folder, notes from someone else), or `own`. Replies that carry a note's text name it,
//! so a model can treat text from the web as data, not as instructions; the `trust` filter of
//! search and list leaves the others out.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::markdown::Properties;
use crate::vault::exclude::{ExclusionError, Exclusions};

/// Where a note's text came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// Written in this vault (nothing says otherwise).
    #[default]
    Own,
    /// In a folder the config file names as shared.
    Shared,
    /// A web clipping (a `source` property holding a web address, or the tag `clippings`), or
    /// in a folder the config file names as untrusted.
    Clipped,
}

impl Provenance {
    /// True for `own`, which replies leave out.
    pub fn is_own(&self) -> bool {
        *self == Provenance::Own
    }
}

/// The `trust` filter of search and list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Only notes of the vault's own (neither shared nor clipped).
    Own,
    /// Own and shared notes (no clippings).
    Shared,
}

impl Trust {
    /// True when a note of provenance `p` passes.
    pub fn admits(self, p: Provenance) -> bool {
        match self {
            Trust::Own => p == Provenance::Own,
            Trust::Shared => p != Provenance::Clipped,
        }
    }
}

/// The config file's `untrusted` and `shared` folders (globs, as `exclude` takes them).
#[derive(Debug, Clone, Default)]
pub struct TrustRules {
    untrusted: Exclusions,
    shared: Exclusions,
}

impl TrustRules {
    /// Compiles the two lists of globs (a folder that matches covers everything in it).
    pub fn new(untrusted: &[String], shared: &[String]) -> Result<TrustRules, ExclusionError> {
        Ok(TrustRules {
            untrusted: Exclusions::new(untrusted)?,
            shared: Exclusions::new(shared)?,
        })
    }

    /// The provenance of the note at `path` (vault-relative) with frontmatter `props`.
    pub fn of(&self, path: &str, props: Option<&Properties>) -> Provenance {
        if props.is_some_and(clipped) {
            Provenance::Clipped
        } else {
            self.by_path(path)
        }
    }

    /// True when no folder is named untrusted or shared.
    pub fn is_empty(&self) -> bool {
        self.untrusted.is_empty() && self.shared.is_empty()
    }

    /// What the folders the config names make of `path` (the frontmatter aside).
    pub fn by_path(&self, path: &str) -> Provenance {
        if self.untrusted.excludes(path) {
            Provenance::Clipped
        } else if self.shared.excludes(path) {
            Provenance::Shared
        } else {
            Provenance::Own
        }
    }

    /// [`Self::by_path`] of `path` given what it is for the folder holding it (`folder`, from
    /// [`Self::by_path`] of that folder): one match of the path itself instead of one per
    /// folder above it, for a walk of every file.
    pub fn by_path_in(&self, folder: Provenance, path: &str) -> Provenance {
        if folder == Provenance::Clipped || self.untrusted.matches_itself(path) {
            Provenance::Clipped
        } else if folder == Provenance::Shared || self.shared.matches_itself(path) {
            Provenance::Shared
        } else {
            Provenance::Own
        }
    }
}

/// Most bytes of a `source` value looked at.
const MAX_SOURCE: usize = 2048;

/// True when a frontmatter key named `key` can mark a clipping (`source` or `tags`, any
/// case).
pub fn is_source_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("source") || key.eq_ignore_ascii_case("tags")
}

/// True when a note's properties say it was clipped from the web, as the clippers write them:
/// a `source` property (any case) holding a web address (a string, or the first item of a
/// list: Obsidian Web Clipper's and MarkDownload's templates), or the tag `clippings` (Web
/// Clipper's default). A `url` property alone does not: people keep their own references and
/// homepages in it (kepano's vault does, in its people and places).
pub fn clipped(props: &Properties) -> bool {
    props.iter().any(|(k, v)| {
        if k.eq_ignore_ascii_case("source") {
            let first = match v {
                Value::Array(items) => items.first(),
                other => Some(other),
            };
            first.and_then(Value::as_str).is_some_and(is_web_address)
        } else if k.eq_ignore_ascii_case("tags") {
            let is_clippings = |t: &Value| {
                t.as_str()
                    .is_some_and(|t| t.trim_start_matches('#').eq_ignore_ascii_case("clippings"))
            };
            match v {
                Value::Array(items) => items.iter().any(is_clippings),
                // `tags: clippings, web` as one string.
                Value::String(s) => s
                    .split([',', ' '])
                    .any(|t| is_clippings(&Value::String(t.to_owned()))),
                _ => false,
            }
        } else {
            false
        }
    })
}

fn is_web_address(s: &str) -> bool {
    let s = s.trim();
    let s = s.get(..s.len().min(MAX_SOURCE)).unwrap_or(s);
    // `[title](https://...)` and `<https://...>` as some templates write them.
    let s = s.trim_start_matches(['<', '[']);
    let s = match s.find("](") {
        Some(i) => &s[i + 2..],
        None => s,
    };
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::{Frontmatter, parse_note};

    fn props(yaml: &str) -> Option<Properties> {
        match parse_note(&format!("---\n{yaml}\n---\nbody\n")).frontmatter {
            Frontmatter::Valid { value, .. } => Some(value),
            _ => None,
        }
    }

    fn rules() -> TrustRules {
        TrustRules::new(&["Clippings/**".to_owned()], &["Team".to_owned()]).unwrap()
    }

    #[test]
    fn a_web_clippers_source_property_marks_a_clipping() {
        let r = TrustRules::default();
        for yaml in [
            "source: https://example.com/post",
            "Source: \"HTTP://EXAMPLE.COM\"",
            "tags: [clippings]",
            "tags:\n  - reading\n  - Clippings",
            "tags: \"#clippings, web\"",
            "source:\n  - https://example.com\n  - other",
            "source: \"[Post](https://example.com)\"",
        ] {
            assert_eq!(
                r.of("a.md", props(yaml).as_ref()),
                Provenance::Clipped,
                "{yaml}"
            );
        }
        for yaml in [
            "source: my own notes",
            "source: ftp://example.com",
            "link: https://example.com",
            // The owner's own references and homepages.
            "url: http://example.com",
            "tags: [clippings/archive-ideas, mine]",
            "source: 12",
            "source:",
        ] {
            assert_eq!(
                r.of("a.md", props(yaml).as_ref()),
                Provenance::Own,
                "{yaml}"
            );
        }
        assert_eq!(r.of("a.md", None), Provenance::Own);
    }

    #[test]
    fn folders_named_untrusted_or_shared_mark_every_note_in_them() {
        let r = rules();
        assert_eq!(r.of("Clippings/x.md", None), Provenance::Clipped);
        assert_eq!(r.of("clippings/deep/x.md", None), Provenance::Clipped);
        assert_eq!(r.of("Team/plan.md", None), Provenance::Shared);
        assert_eq!(r.of("Team/sub/plan.md", None), Provenance::Shared);
        assert_eq!(r.of("Teams/plan.md", None), Provenance::Own);
        // A clipping in a shared folder is still a clipping.
        let clip = props("source: https://example.com");
        assert_eq!(r.of("Team/plan.md", clip.as_ref()), Provenance::Clipped);
    }

    #[test]
    fn the_trust_filter_admits_what_it_says() {
        use Provenance::*;
        assert!(Trust::Own.admits(Own));
        assert!(!Trust::Own.admits(Shared));
        assert!(!Trust::Own.admits(Clipped));
        assert!(Trust::Shared.admits(Own));
        assert!(Trust::Shared.admits(Shared));
        assert!(!Trust::Shared.admits(Clipped));
    }

    #[test]
    fn a_files_provenance_from_its_folders_equals_the_whole_check() {
        let r = TrustRules::new(
            &["Clippings".to_owned(), "**/*.clip.md".to_owned()],
            &["Team/**".to_owned()],
        )
        .unwrap();
        for path in [
            "Clippings/a.md",
            "Clippings/Deep/b.md",
            "Team/x.clip.md",
            "Team/y.md",
            "Own/z.md",
            "Own/z.clip.md",
            "top.md",
            "CLIPPINGS/c.md",
        ] {
            let folder = path
                .rsplit_once('/')
                .map_or(Provenance::Own, |(f, _)| r.by_path(f));
            assert_eq!(r.by_path_in(folder, path), r.by_path(path), "{path}");
        }
    }
}
