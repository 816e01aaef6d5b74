//! `list_notes` filters: tag (nested tags included), frontmatter property (and value), path glob.

use globset::GlobMatcher;

use super::NoteError;
use super::paging::fingerprint;
use crate::markdown::properties::value_matches;
use crate::markdown::{self, Frontmatter};
use crate::model::Model;
use crate::vault::VaultPath;

/// Longest filter argument accepted, in bytes.
const MAX_FILTER_BYTES: usize = 1024;

/// A conjunction of optional filters.
#[derive(Debug, Default)]
pub struct NoteFilter {
    tag: Option<String>,
    property: Option<String>,
    value: Option<String>,
    glob: Option<GlobMatcher>,
    /// Identifies the filter in paging cursors.
    id: u64,
}

impl NoteFilter {
    /// Validates and compiles the filters.
    pub fn new(
        tag: Option<String>,
        property: Option<String>,
        value: Option<String>,
        glob: Option<String>,
    ) -> Result<Self, NoteError> {
        let given = [
            ("tag", &tag),
            ("property", &property),
            ("value", &value),
            ("glob", &glob),
        ];
        for (param, s) in given {
            if s.as_ref().is_some_and(|s| s.len() > MAX_FILTER_BYTES) {
                return Err(NoteError::invalid(
                    param,
                    format!("`{param}`: filter arguments are limited to {MAX_FILTER_BYTES} bytes"),
                ));
            }
        }
        if value.is_some() && property.is_none() {
            return Err(NoteError::invalid(
                "value",
                "`value` needs `property`: the frontmatter key to compare",
            ));
        }
        let id = fingerprint(&(&tag, &property, &value, &glob));
        let glob = match glob {
            Some(g) => Some(
                crate::vault::exclude::path_glob(&g, false)
                    .map_err(|e| NoteError::invalid("glob", format!("invalid glob: {e}")))?
                    .compile_matcher(),
            ),
            None => None,
        };
        let tag = tag
            .map(|t| markdown::normalize_tag(&t))
            .filter(|t| !t.is_empty());
        Ok(NoteFilter {
            tag,
            property,
            value,
            glob,
            id,
        })
    }

    /// True when no filter is set.
    pub fn is_empty(&self) -> bool {
        self.tag.is_none() && self.property.is_none() && self.glob.is_none()
    }

    /// Identifies the filter (for cursors).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The same filter without its tag (for notes the tag index already picked).
    pub fn without_tag(&self) -> NoteFilter {
        NoteFilter {
            tag: None,
            property: self.property.clone(),
            value: self.value.clone(),
            glob: self.glob.clone(),
            id: self.id,
        }
    }

    /// The tag filter, normalised, if there is one.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The property filter and its value, if there is one.
    pub fn property(&self) -> Option<(&str, Option<&str>)> {
        self.property.as_deref().map(|k| (k, self.value.as_deref()))
    }

    /// True when the note at `path` passes every filter.
    pub fn matches(&self, model: &Model, path: &VaultPath) -> bool {
        if let Some(g) = &self.glob
            && !g.is_match(path.as_str())
        {
            return false;
        }
        if self.tag.is_none() && self.property.is_none() {
            return true;
        }
        match model.note(path) {
            Some(note) => self.matches_parsed(&note.parsed),
            None => false,
        }
    }

    /// [`NoteFilter::matches`] for a note already looked up (a lookup in the model compares
    /// paths a few dozen times: twice per note was a tenth of an exact search's time).
    pub fn matches_note(&self, path: &VaultPath, note: &crate::model::Note) -> bool {
        if let Some(g) = &self.glob
            && !g.is_match(path.as_str())
        {
            return false;
        }
        self.tag.is_none() && self.property.is_none() || self.matches_parsed(&note.parsed)
    }

    /// True when a note parsed as `parsed` passes the tag and property filters (the glob, which
    /// needs the path, is not checked here).
    pub fn matches_parsed(&self, parsed: &markdown::ParsedNote) -> bool {
        if let Some(tag) = &self.tag
            && !parsed
                .tags
                .iter()
                .any(|t| markdown::tag_matches_normalized(&t.name, tag))
        {
            return false;
        }
        if let Some(key) = &self.property {
            let Frontmatter::Valid { value: fm, .. } = &parsed.frontmatter else {
                return false;
            };
            let Some(v) = fm.get(key.as_str()) else {
                return false;
            };
            return match &self.value {
                None => !v.is_null(),
                Some(want) => value_matches(v, want),
            };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::properties::{property_term, property_terms};
    use serde_json::json;

    #[test]
    fn values_compare_as_text_and_lists_by_element() {
        assert!(value_matches(&json!("Active"), "active"));
        assert!(value_matches(&json!(3), "3"));
        assert!(value_matches(&json!(true), "true"));
        assert!(value_matches(&json!(["a", "B"]), "b"));
        assert!(value_matches(&json!("[[Garden Plan]]"), "garden plan"));
        assert!(value_matches(
            &json!(["[[Garden Plan|the plan]]"]),
            "Garden Plan"
        ));
        assert!(!value_matches(&json!("activex"), "active"));
        assert!(!value_matches(&json!({"a": 1}), "a"));
    }

    #[test]
    fn index_property_terms_agree_with_the_filter() {
        let fm = Frontmatter::Valid {
            value: json!({
                "status": "Active",
                "n": 3,
                "up": ["[[Garden Plan|the plan]]", "B"],
                "empty": null,
                "deep": {"a": 1},
            })
            .try_into()
            .unwrap(),
            end_line: 7,
        };
        let terms = property_terms(&fm);
        let has = |k: &str, v: Option<&str>| {
            terms.contains(&match v {
                None => k.to_owned(),
                Some(v) => property_term(k, v),
            })
        };
        let Frontmatter::Valid { value, .. } = &fm else {
            unreachable!()
        };
        for (key, want) in [
            ("status", "active"),
            ("status", "ACTIVE "),
            ("status", "activex"),
            ("n", "3"),
            ("up", "garden plan"),
            ("up", "b"),
            ("up", "the plan"),
            ("deep", "a"),
        ] {
            let filter_says = value.get(key).is_some_and(|v| value_matches(v, want));
            assert_eq!(has(key, Some(want)), filter_says, "{key}={want}");
        }
        assert!(has("status", None) && has("deep", None) && !has("empty", None));
    }

    #[test]
    fn bad_filters_are_refused_with_a_reason() {
        let e = NoteFilter::new(None, None, Some("x".into()), None).unwrap_err();
        assert!(e.to_string().contains("needs `property`"));
        let e = NoteFilter::new(None, None, None, Some("a/[".into())).unwrap_err();
        assert!(e.to_string().contains("invalid glob"));
        assert!(NoteFilter::new(None, None, None, None).unwrap().is_empty());
    }
}
