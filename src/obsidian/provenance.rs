//! Where a note's text came from, as far as the vault can tell: `clipped` (Obsidian Web
//! Clipper's notes, which carry the page's address in a `source` or `url` property, and the
//! folders the config file calls untrusted), `shared` (the folders it calls shared: a synced
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
    /// A web clipping (a `source` or `url` property holding a web address), or in a folder
    /// the config file names as untrusted.
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
        if self.untrusted.excludes(path) || props.is_some_and(clipped) {
            Provenance::Clipped
        } else if self.shared.excludes(path) {
            Provenance::Shared
        } else {
            Provenance::Own
        }
    }
}

/// Most bytes of a `source` value looked at.
const MAX_SOURCE: usize = 2048;

/// True when a `source` or `url` property (any case) holds a web address, as Obsidian Web
/// Clipper writes it (a string, or the first item of a list).
fn clipped(props: &Properties) -> bool {
    props.iter().any(|(k, v)| {
        (k.eq_ignore_ascii_case("source") || k.eq_ignore_ascii_case("url")) && {
            let first = match v {
                Value::Array(items) => items.first(),
                other => Some(other),
            };
            first.and_then(Value::as_str).is_some_and(is_web_address)
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
            "url: http://example.com",
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
}
