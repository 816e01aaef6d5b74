//! Tag rules: which characters a tag may hold, where an inline `#` may start one, how frontmatter
//! tag strings split, and how tags compare.
//!
//! The left-boundary rules follow readbacks of Obsidian's metadata cache reported against other
//! servers (Obsidian 1.13): a `#` starts a tag at the start of a line (or table cell, or list
//! item), after whitespace (including NBSP and U+3000), after `_` or `*` (emphasis:
//! `x _#uc_ y` and `snake_case_#wc` are tags), and right after another tag (`#a#b` and `#a/#b`
//! are two tags each); after any other character (`(#x)`, `"#x"`, `.#x`, `a#b`, `x—#y`) it
//! does not.

use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Non-ASCII characters that end a tag: punctuation, separators, control and format
/// characters. Compiled once; used only for non-ASCII characters, which are rare in tags.
static NON_TAG_CHAR: LazyLock<Regex> = LazyLock::new(|| {
    // infallible: a constant, valid pattern (every test that scans a tag compiles it)
    Regex::new(r"\A[\p{P}\p{Z}\p{Cc}\p{Cf}\p{Cn}]\z")
        .expect("infallible: a constant, valid pattern")
});

/// True for a character that may appear in a tag name.
///
/// ASCII: letters, digits, `_`, `-`, `/`. Beyond ASCII: anything that is not whitespace,
/// punctuation, a separator, a control or format character, nor in the General Punctuation
/// (U+2000–U+206F) or Supplemental Punctuation (U+2E00–U+2E7F) blocks; so letters, digits and
/// marks of every script (NFD accents included) and emoji are allowed. Exception: the zero-width
/// joiner (U+200D) is allowed so that emoji sequences like 👩‍💻 stay one tag.
pub(crate) fn is_tag_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
    }
    if c == '\u{200D}' {
        return true;
    }
    if c.is_whitespace() || ('\u{2000}'..='\u{206F}').contains(&c) {
        return false;
    }
    if ('\u{2E00}'..='\u{2E7F}').contains(&c) {
        return false;
    }
    let mut buf = [0u8; 4];
    !NON_TAG_CHAR.is_match(c.encode_utf8(&mut buf))
}

/// A tag name (without `#`) is valid when it is not empty and not only ASCII digits
/// (`1984` is not a tag, `y1984` and `2024/01` are).
pub(crate) fn is_valid_tag_name(name: &str) -> bool {
    !name.is_empty() && !name.bytes().all(|b| b.is_ascii_digit())
}

/// May a `#` preceded by `prev` start a tag? (`None`: start of a line, cell or item.)
fn is_left_boundary(prev: Option<char>) -> bool {
    match prev {
        None => true,
        Some(c) => c.is_whitespace() || c == '_' || c == '*',
    }
}

/// An inline tag found in a text run: byte range of `#name` in the note, and the name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InlineTag {
    /// Byte range of `#name` in the note.
    pub start: usize,
    pub end: usize,
    /// The name, without `#` and trailing `/`.
    pub name: Box<str>,
}

/// Finds inline tags in `text[start..end]`, a run of ordinary text (no code, math, HTML, link
/// destination). `line_start` says the run begins a line of inline content (block start, table
/// cell, after a line break), so that its first character counts as being at line start even
/// when the source has `>` or `|` before it.
pub(crate) fn scan_inline_tags(
    text: &str,
    start: usize,
    end: usize,
    line_start: bool,
    out: &mut Vec<InlineTag>,
) {
    let run = &text[start..end];
    let mut search_from = 0;
    // End (relative) of the last `#name` match: a `#` right there starts another tag.
    let mut last_match_end = usize::MAX;
    while let Some(hash) = memchr::memchr(b'#', &run.as_bytes()[search_from..]) {
        let hash = search_from + hash;
        search_from = hash + 1;
        let prev = if hash == 0 {
            // The character before the run in the note (a delimiter like `_`, or `(`).
            let before = text[..start].chars().next_back();
            if before == Some('\\') {
                // `\#x`: the escaped `#` is literal text.
                continue;
            }
            if line_start {
                None
            } else {
                Some(before.unwrap_or('\n'))
            }
        } else {
            run[..hash].chars().next_back()
        };
        if hash != last_match_end && !is_left_boundary(prev) {
            continue;
        }
        let body_start = hash + 1;
        let body_len: usize = run[body_start..]
            .chars()
            .take_while(|&c| is_tag_char(c))
            .map(char::len_utf8)
            .sum();
        if body_len == 0 {
            continue;
        }
        let body_end = body_start + body_len;
        last_match_end = body_end;
        search_from = body_end;
        // A trailing `/` is not part of the tag (`#a/` is `a`).
        let name = run[body_start..body_end].trim_end_matches('/');
        if is_valid_tag_name(name) {
            out.push(InlineTag {
                start: start + hash,
                end: start + body_start + name.len(),
                name: name.into(),
            });
        }
    }
}

/// Splits one frontmatter tag string into names with their byte offsets in the string.
///
/// Old vaults write `tags: a, b` or `tags: a b` (one string); Obsidian splits such strings on
/// commas and whitespace. A leading `#` (Obsidian accepts `"#tag"` in properties) and trailing
/// `/` are dropped; all-digit names are skipped like inline ones.
pub(crate) fn split_frontmatter_tags(value: &str) -> Vec<(usize, usize, &str)> {
    fn add<'v>(names: &mut Vec<(usize, usize, &'v str)>, piece_start: usize, piece: &'v str) {
        let name = piece.trim_start_matches('#');
        let name_start = piece_start + (piece.len() - name.len());
        let name = name.trim_end_matches('/');
        if is_valid_tag_name(name) {
            // The position covers the `#` when the source had one.
            let pos_start = if name_start > piece_start {
                name_start - 1
            } else {
                name_start
            };
            names.push((pos_start, name_start + name.len(), name));
        }
    }
    let mut names = Vec::new();
    let mut piece_start = 0;
    for (i, c) in value.char_indices() {
        if c == ',' || c.is_whitespace() {
            add(&mut names, piece_start, &value[piece_start..i]);
            piece_start = i + c.len_utf8();
        }
    }
    add(&mut names, piece_start, &value[piece_start..]);
    names
}

/// Lowercases a tag and drops leading `#` and surrounding whitespace and trailing `/`; the
/// result is NFC, so that a tag typed on macOS (NFD) equals the same tag typed elsewhere.
///
/// ```
/// use capvault::markdown::normalize_tag;
///
/// assert_eq!(normalize_tag("#Project/Alpha"), "project/alpha");
/// assert_eq!(normalize_tag("Cafe\u{301}"), "caf\u{e9}");
/// ```
pub fn normalize_tag(tag: &str) -> String {
    let tag = tag.trim().trim_start_matches('#').trim_end_matches('/');
    let lower = if tag.is_ascii() {
        tag.to_ascii_lowercase()
    } else {
        tag.to_lowercase()
    };
    if is_nfc_quick(lower.chars()) == IsNormalized::Yes {
        lower
    } else {
        lower.nfc().collect()
    }
}

/// Does `tag` match a search for `query`? Case-insensitive, and nested tags match their parents:
/// `a/b` matches `a` and `a/b`, but not `a/bc` nor `b`. An empty query matches nothing.
///
/// ```
/// use capvault::markdown::tag_matches;
///
/// assert!(tag_matches("Project/Alpha", "project"));
/// assert!(tag_matches("project/alpha", "#Project/Alpha"));
/// assert!(!tag_matches("project/alphabet", "project/alpha"));
/// assert!(!tag_matches("project", "project/alpha"));
/// ```
pub fn tag_matches(tag: &str, query: &str) -> bool {
    tag_matches_normalized(tag, &normalize_tag(query))
}

/// [`tag_matches`] with the query already through [`normalize_tag`] (for many tags against one
/// query): ASCII tags are compared without allocating.
///
/// ```
/// use capvault::markdown::{normalize_tag, tag_matches_normalized};
///
/// let q = normalize_tag("#Project");
/// assert!(tag_matches_normalized("PROJECT/alpha", &q));
/// assert!(!tag_matches_normalized("projects", &q));
/// ```
pub fn tag_matches_normalized(tag: &str, query: &str) -> bool {
    if query.is_empty() {
        return false;
    }
    let mut t = tag;
    if t.starts_with(char::is_whitespace) || t.ends_with(char::is_whitespace) {
        t = t.trim();
    }
    t = t.trim_start_matches('#');
    t = t.trim_end_matches('/');
    let (tb, qb) = (t.as_bytes(), query.as_bytes());
    // Bytes equal but for ASCII case: `t` normalises to `query` (which is normalised).
    if tb.len() >= qb.len()
        && tb[..qb.len()].eq_ignore_ascii_case(qb)
        && (tb.len() == qb.len() || tb[qb.len()] == b'/')
    {
        return true;
    }
    if t.is_ascii() {
        return false;
    }
    let tag = normalize_tag(tag);
    tag == query || (tag.starts_with(query) && tag.as_bytes().get(query.len()) == Some(&b'/'))
}

/// The NFC form of `s` (cheap when `s` already is NFC, the common case).
///
/// macOS stores file names in NFD while clients usually send NFC; compare names in this form.
pub fn nfc(s: &str) -> String {
    if is_nfc_quick(s.chars()) == IsNormalized::Yes {
        s.to_owned()
    } else {
        s.nfc().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        scan_inline_tags(s, 0, s.len(), true, &mut out);
        out.into_iter().map(|t| t.name.into()).collect()
    }

    #[test]
    fn tag_needs_line_start_or_whitespace_before_the_hash() {
        assert_eq!(tags("#a b #c\t#d"), ["a", "c", "d"]);
        assert!(tags("(#x) \"#y\" .#z a#b x\u{2014}#e").is_empty());
    }

    #[test]
    fn unicode_whitespace_is_a_boundary() {
        assert_eq!(tags("x\u{a0}#nbsp y\u{3000}#ideo"), ["nbsp", "ideo"]);
    }

    #[test]
    fn emphasis_delimiters_are_a_boundary() {
        assert_eq!(tags("snake_case_#wc **x*#y"), ["wc", "y"]);
    }

    #[test]
    fn adjacent_tags_are_both_tags() {
        // Observed in Obsidian's cache: `#tl#tm` and `#tn/#to` give two tags each.
        assert_eq!(tags("#a#b"), ["a", "b"]);
        assert_eq!(tags("#tn/#to"), ["tn", "to"]);
    }

    #[test]
    fn all_digit_names_are_not_tags() {
        assert_eq!(
            tags("#1984 #y1984 #1990s #2024/01"),
            ["y1984", "1990s", "2024/01"]
        );
    }

    #[test]
    fn only_ascii_digits_count_as_digits() {
        // U+16B50 is a Pahawh Hmong digit: not an ASCII digit, so the name is valid.
        assert_eq!(tags("#\u{16b50} #١٢"), ["\u{16b50}", "١٢"]);
    }

    #[test]
    fn trailing_slash_is_dropped() {
        assert_eq!(tags("#a/b/ #c/"), ["a/b", "c"]);
        assert!(tags("#/").is_empty());
    }

    #[test]
    fn tag_stops_at_punctuation() {
        assert_eq!(
            tags("#done. #why? #a,b #x:y #q'z"),
            ["done", "why", "a", "x", "q"]
        );
    }

    #[test]
    fn unicode_letters_marks_and_emoji_are_tag_characters() {
        assert_eq!(
            tags("#日本語 #café #cafe\u{301} #✅done #👩\u{200d}💻 #naïve…"),
            [
                "日本語",
                "café",
                "cafe\u{301}",
                "✅done",
                "👩\u{200d}💻",
                "naïve"
            ]
        );
    }

    #[test]
    fn heading_marker_is_not_a_tag() {
        assert!(tags("# Title").is_empty());
        assert!(tags("## Title").is_empty());
    }

    #[test]
    fn tag_positions_cover_hash_and_name() {
        let s = "x #ab/ y";
        let mut out = Vec::new();
        scan_inline_tags(s, 0, s.len(), true, &mut out);
        assert_eq!(&s[out[0].start..out[0].end], "#ab");
    }

    #[test]
    fn run_start_uses_the_character_before_the_run() {
        let s = "(#x _#y";
        let mut out = Vec::new();
        scan_inline_tags(s, 1, 3, false, &mut out);
        scan_inline_tags(s, 5, 7, false, &mut out);
        let names: Vec<String> = out.into_iter().map(|t| t.name.into()).collect();
        assert_eq!(names, ["y"]);
    }

    #[test]
    fn frontmatter_tag_strings_split_on_commas_and_spaces() {
        let names: Vec<_> = split_frontmatter_tags("a, #b  c/d,,1984")
            .into_iter()
            .map(|(_, _, n)| n)
            .collect();
        assert_eq!(names, ["a", "b", "c/d"]);
        let s = "x #b";
        let (start, end, _) = split_frontmatter_tags(s)[1];
        assert_eq!(&s[start..end], "#b");
        // Multi-byte separators (NBSP) keep the offsets right.
        let s = "<!--\u{a0}\"";
        let (start, end, name) = split_frontmatter_tags(s)[1];
        assert_eq!((&s[start..end], name), ("\"", "\""));
    }

    #[test]
    fn nested_tags_match_their_parents_only() {
        assert!(tag_matches("a/b", "a"));
        assert!(tag_matches("A/B", "a/b"));
        assert!(!tag_matches("a/bc", "a/b"));
        assert!(!tag_matches("ab", "a"));
        assert!(!tag_matches("a", ""));
        assert!(tag_matches("Café", "cafe\u{301}"));
    }
}
