//! How property values compare, shared by the `list_notes`/`search_notes` property filter and
//! the search index's property terms, so that the two always agree: scalars by their trimmed,
//! lower-cased text, lists by any element, and a wikilink value `"[[Note]]"` also as `Note`.

use serde_json::Value;

use super::Frontmatter;

/// The terms under which the search index files a note's properties, so that an index lookup
/// agrees with the `list_notes` filter (`notes::filter`): each key with a non-null value, and [`property_term`] for each
/// scalar value (each element of a list; the target of a wikilink value as well).
pub fn property_terms(frontmatter: &Frontmatter) -> Vec<String> {
    let Frontmatter::Valid { value: props, .. } = frontmatter else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, v) in props.iter() {
        if v.is_null() {
            continue;
        }
        out.push(key.to_owned());
        let items: &[Value] = match v {
            Value::Array(items) => items,
            other => std::slice::from_ref(other),
        };
        for item in items {
            let Some(text) = scalar_text(item) else {
                continue;
            };
            if let Some(inner) = text.strip_prefix("[[").and_then(|x| x.strip_suffix("]]")) {
                let target = inner.split('|').next().unwrap_or(inner);
                out.push(property_term(key, target));
            }
            out.push(property_term(key, &text));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The index term for "property `key` has value `value`" (value compared case-insensitively).
pub fn property_term(key: &str, value: &str) -> String {
    format!("{key}\u{1f}{}", value.trim().to_lowercase())
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_lowercase()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A frontmatter value equals `want`: scalars by their text (case-insensitive), lists when any
/// element does. A wikilink value `"[[Note]]"` also matches `Note`.
pub fn value_matches(v: &Value, want: &str) -> bool {
    let want = want.trim().to_lowercase();
    let eq = |v: &Value| {
        scalar_text(v).is_some_and(|s| {
            s == want
                || s.strip_prefix("[[")
                    .and_then(|x| x.strip_suffix("]]"))
                    .is_some_and(|inner| inner.split('|').next() == Some(want.as_str()))
        })
    };
    match v {
        Value::Array(items) => items.iter().any(eq),
        other => eq(other),
    }
}
