//! Tags changed in a note's text, the way Obsidian counts them: a tag renamed wherever the
//! parser finds it (frontmatter `tags`/`tag` in list and string forms, inline `#tags`), tags
//! nested under it renamed with it, and nothing else touched (code, links, URLs, headings' `#`
//! are not tags to the parser, so they are never edited); tags added to or removed from the
//! frontmatter list.
//!
//! Every edit is checked by parsing the result again: the note's tags must be exactly the old
//! ones with the rename applied (or the list asked for), else the edit is refused and the text
//! stays as it was.

use super::tags::{is_tag_char, is_valid_tag_name};
use super::yaml_edit::{self, FrontmatterError};
use super::{Frontmatter, TagSource, normalize_tag, parse_note, tag_matches_normalized};

/// Longest tag name accepted, in bytes (a rename writes it into every note that has the tag).
pub const MAX_TAG_BYTES: usize = 256;

/// Why a tag edit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagEditError {
    /// Not something Obsidian reads as a tag.
    #[error(
        "`{0}` is not a tag name: letters, digits, `_`, `-` and `/` between parts, not only digits, no spaces, at most 256 bytes"
    )]
    InvalidName(String),
    /// The edited text would not read back with the tags intended.
    #[error("the edit would change other tags too (near line {line}); nothing was changed")]
    Unverified { line: u32 },
    /// The frontmatter could not be edited.
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterError),
}

/// A tag as a person types it (`#project/old`, `project/old/`), checked, without `#` and a
/// trailing `/`.
pub fn tag_name(input: &str) -> Result<String, TagEditError> {
    let bad = || TagEditError::InvalidName(input.chars().take(80).collect());
    let name = input.trim();
    let name = name.strip_prefix('#').unwrap_or(name);
    let name = name.strip_suffix('/').unwrap_or(name);
    let parts_ok = name.split('/').all(|p| !p.is_empty());
    if name.len() > MAX_TAG_BYTES
        || !parts_ok
        || !name.chars().all(is_tag_char)
        || !is_valid_tag_name(name)
    {
        return Err(bad());
    }
    Ok(name.to_owned())
}

/// One note's text after a rename, and how many tags it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    pub text: String,
    /// Occurrences renamed.
    pub count: usize,
    /// Their 1-based lines, in text order.
    pub lines: Vec<u32>,
}

/// The tags of `text`, normalised and sorted (a multiset), for the read-back check.
fn tag_set(text: &str) -> Vec<String> {
    let mut tags: Vec<String> = parse_note(text)
        .tags
        .iter()
        .map(|t| normalize_tag(&t.name))
        .collect();
    tags.sort_unstable();
    tags
}

/// `name` with its first `depth` parts replaced by `to` (the rest as written).
fn renamed(name: &str, depth: usize, to: &str) -> String {
    match name.splitn(depth + 1, '/').nth(depth) {
        Some(rest) => format!("{to}/{rest}"),
        None => to.to_owned(),
    }
}

/// Renames the tag `from` and every tag nested under it (`from/...`) to `to` in `text`,
/// comparing as Obsidian does (any case); `from` and `to` as [`tag_name`] returns them.
/// `None` when the note has no such tag.
pub fn rename_tag(text: &str, from: &str, to: &str) -> Result<Option<Renamed>, TagEditError> {
    let from_n = normalize_tag(from);
    let depth = from_n.split('/').count();
    let note = parse_note(text);
    let mut edits: Vec<(std::ops::Range<usize>, String, u32)> = Vec::new();
    for t in &note.tags {
        if !tag_matches_normalized(&t.name, &from_n) {
            continue;
        }
        let range = t.pos.range();
        let Some(span) = text.get(range.clone()) else {
            return Err(TagEditError::Unverified { line: t.pos.line });
        };
        let (hash, name) = match span.strip_prefix('#') {
            Some(rest) => ("#", rest),
            None => ("", span),
        };
        // The parser's span is the tag as written; anything else is not edited blindly.
        if name.trim_end_matches('/') != &*t.name {
            return Err(TagEditError::Unverified { line: t.pos.line });
        }
        edits.push((
            range,
            format!("{hash}{}", renamed(name, depth, to)),
            t.pos.line,
        ));
    }
    if edits.is_empty() {
        return Ok(None);
    }
    let mut out = text.to_owned();
    for (range, new, _) in edits.iter().rev() {
        out.replace_range(range.clone(), new);
    }
    // Read back: the old tags with the rename applied, and nothing else.
    let mut expected: Vec<String> = note
        .tags
        .iter()
        .map(|t| {
            let n = normalize_tag(&t.name);
            if tag_matches_normalized(&t.name, &from_n) {
                normalize_tag(&renamed(&t.name, depth, to))
            } else {
                n
            }
        })
        .collect();
    expected.sort_unstable();
    if tag_set(&out) != expected {
        return Err(TagEditError::Unverified { line: edits[0].2 });
    }
    Ok(Some(Renamed {
        text: out,
        count: edits.len(),
        lines: edits.iter().map(|(_, _, l)| *l).collect(),
    }))
}

/// What [`retag`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retagged {
    pub text: String,
    /// The frontmatter tags now, as written.
    pub tags: Vec<String>,
    /// Tags asked to be removed that stay in the body as inline `#tags` (text is not edited),
    /// with their 1-based line.
    pub inline_left: Vec<(String, u32)>,
}

/// The frontmatter keys Obsidian reads tags from, in the spelling the note uses.
/// `tags` first, then `tag`, then other spellings.
fn tag_keys(front: &Frontmatter) -> Vec<String> {
    let mut keys: Vec<String> = match front {
        Frontmatter::Valid { value, .. } => value
            .iter()
            .map(|(k, _)| k)
            .filter(|k| k.eq_ignore_ascii_case("tags") || k.eq_ignore_ascii_case("tag"))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    keys.sort_by_key(|k| (k != "tags", k != "tag", k.clone()));
    keys
}

/// Adds `add` to and removes `remove` from the note's frontmatter tags (names as [`tag_name`]
/// returns them; comparisons in any case, a removal exact, not nested). The tags are written as
/// Obsidian's property editor writes them: one `tags` list (the key keeps the note's spelling;
/// a second tag key is merged into it), each name without `#`; no list is left empty (the key
/// goes). Body text is never edited.
pub fn retag(text: &str, add: &[String], remove: &[String]) -> Result<Retagged, TagEditError> {
    let note = parse_note(text);
    if let Frontmatter::Invalid { .. } = &note.frontmatter {
        // yaml_edit reports what is wrong with it.
        yaml_edit::update(text, &serde_json::Map::new(), &[])?;
    }
    let keys = tag_keys(&note.frontmatter);
    let removing: Vec<String> = remove.iter().map(|r| normalize_tag(r)).collect();
    let mut tags: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let front = note
        .tags
        .iter()
        .filter(|t| t.source == TagSource::Frontmatter)
        .map(|t| t.name.to_string());
    for name in front.chain(add.iter().cloned()) {
        let n = normalize_tag(&name);
        if removing.contains(&n) || seen.contains(&n) {
            continue;
        }
        seen.push(n);
        tags.push(name);
    }
    let inline_left = note
        .tags
        .iter()
        .filter(|t| t.source == TagSource::Inline && removing.contains(&normalize_tag(&t.name)))
        .map(|t| (t.name.to_string(), t.pos.line))
        .collect();
    let key = keys.first().cloned().unwrap_or_else(|| "tags".to_owned());
    let mut set = serde_json::Map::new();
    let mut drop: Vec<String> = keys.iter().skip(1).cloned().collect();
    if tags.is_empty() {
        drop.push(key);
    } else {
        set.insert(
            key,
            serde_json::Value::Array(tags.iter().cloned().map(Into::into).collect()),
        );
    }
    let out = if set.is_empty() && drop.iter().all(|k| !keys.contains(k)) {
        text.to_owned()
    } else {
        yaml_edit::update(text, &set, &drop)?
    };
    // Read back: the body's tags unchanged, the frontmatter's the list asked for.
    let mut expected: Vec<String> = tags.iter().map(|t| normalize_tag(t)).collect();
    expected.extend(
        note.tags
            .iter()
            .filter(|t| t.source == TagSource::Inline)
            .map(|t| normalize_tag(&t.name)),
    );
    expected.sort_unstable();
    if tag_set(&out) != expected {
        return Err(TagEditError::Unverified { line: 1 });
    }
    Ok(Retagged {
        text: out,
        tags,
        inline_left,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename(text: &str, from: &str, to: &str) -> Option<Renamed> {
        rename_tag(text, from, to).unwrap()
    }

    #[test]
    fn a_rename_changes_every_occurrence_and_the_nested_tags_and_nothing_else() {
        let text = "---\ntags:\n  - project\n  - other\n  - Project/Old\n---\n\
                    # project heading #project\n\
                    Text #project and #projects and #project/sub/deep and #PROJECT.\n\
                    `#project` in code, [[Note#project]], https://x.example/#project\n\
                    ```\n#project in a block\n```\n";
        let r = rename(text, "project", "work").unwrap();
        assert_eq!(r.count, 6, "{}", r.text);
        assert_eq!(
            r.text,
            "---\ntags:\n  - work\n  - other\n  - work/Old\n---\n\
             # project heading #work\n\
             Text #work and #projects and #work/sub/deep and #work.\n\
             `#project` in code, [[Note#project]], https://x.example/#project\n\
             ```\n#project in a block\n```\n"
        );
        assert_eq!(r.lines, [3, 5, 7, 8, 8, 8]);
        assert_eq!(rename(text, "nothing", "x"), None);
    }

    #[test]
    fn a_nested_tag_is_renamed_alone_and_frontmatter_forms_keep_their_shape() {
        let text = "---\ntag: \"#a/b, c\"\nTags: [a/b/c, a]\n---\n#a/b #a\n";
        let r = rename(text, "#a/b/", "x/y").unwrap();
        assert_eq!(
            r.text,
            "---\ntag: \"#x/y, c\"\nTags: [x/y/c, a]\n---\n#x/y #a\n"
        );
        // Merging into an existing tag.
        let r = rename("#old and #new\n", "old", "new").unwrap();
        assert_eq!(r.text, "#new and #new\n");
    }

    #[test]
    fn tag_names_are_checked() {
        assert_eq!(tag_name(" #Project/Sub/ ").unwrap(), "Project/Sub");
        for bad in ["", "#", "1984", "a b", "a//b", "/a", "a,b", "#a#b", "a:b"] {
            assert!(tag_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(tag_name("y1984").unwrap(), "y1984");
        assert!(tag_name(&"a".repeat(MAX_TAG_BYTES)).is_ok());
        assert!(tag_name(&"a".repeat(MAX_TAG_BYTES + 1)).is_err());
        assert_eq!(tag_name("été/👩‍💻").unwrap(), "été/👩‍💻");
    }

    #[test]
    fn retag_writes_one_list_as_obsidian_does_and_leaves_the_body_alone() {
        let text = "---\ntitle: T\ntags: a, b\nTag: c\n---\nBody #b\n";
        let r = retag(text, &["d".into(), "A".into()], &["b".into()]).unwrap();
        assert_eq!(
            r.text,
            "---\ntitle: T\ntags:\n  - a\n  - c\n  - d\n---\nBody #b\n"
        );
        assert_eq!(r.tags, ["a", "c", "d"]);
        assert_eq!(r.inline_left, [("b".to_owned(), 6)]);
        // A note without frontmatter gets one; removing the last tag removes the key.
        let r = retag("Text\n", &["new".into()], &[]).unwrap();
        assert_eq!(r.text, "---\ntags:\n  - new\n---\nText\n");
        let r = retag(&r.text, &[], &["NEW".into()]).unwrap();
        assert_eq!(r.text, "---\n---\nText\n");
        assert!(r.tags.is_empty());
    }
}
