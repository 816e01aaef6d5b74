//! The insides of links: splitting `target#sub|display` of a wikilink, decoding the destination
//! of a Markdown link, telling external URLs from vault paths.
//!
//! Nothing here finds links in a note: the body walker ([`super::body`]) knows where links are
//! from pulldown-cmark's events, and the frontmatter reader knows which strings are property
//! values. These functions only take apart text already known to be one link.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;

use super::Subpath;

/// One link taken apart, before it gets a kind and a position.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct LinkParts {
    /// The path part, trimmed (`""` for a link into the same note).
    pub target: Box<str>,
    /// `#H1#H2` or `#^block`.
    pub subpath: Option<Subpath>,
    /// Text after `|` (wikilinks) or the link text (Markdown links).
    pub display: Option<Box<str>>,
    /// `|640x480` or `|100` on an embed.
    pub size: Option<(u32, Option<u32>)>,
    /// `#page=3` on a link to a PDF.
    pub page: Option<u32>,
}

/// True when `s` is a URL that leaves the vault: `//host`, or anything that starts with a URI
/// scheme (`http:`, `https:`, `mailto:`, `obsidian:`, `file:`, `C:`...).
///
/// A scheme is an ASCII letter followed by letters, digits, `+`, `-` or `.`, then `:`. A colon
/// followed by a space is not a scheme, because vault names may contain `: ` (`Note: draft.md`).
///
/// ```
/// use capvault::markdown::is_external_url;
///
/// assert!(is_external_url("https://example.com/a#b"));
/// assert!(is_external_url("mailto:someone@example.com"));
/// assert!(is_external_url("obsidian://open?vault=x"));
/// assert!(is_external_url("//cdn.example.com/x.png"));
/// assert!(!is_external_url("Folder/Note.md"));
/// assert!(!is_external_url("Note: draft.md"));
/// assert!(!is_external_url("#Heading"));
/// ```
pub fn is_external_url(s: &str) -> bool {
    let s = s.trim_start();
    if s.starts_with("//") {
        return true;
    }
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        match b {
            b':' => return bytes.get(i + 1) != Some(&b' '),
            b'+' | b'-' | b'.' => {}
            _ if b.is_ascii_alphanumeric() => {}
            _ => return false,
        }
    }
    false
}

/// Takes apart the inside of a wikilink (`Note#H1#H2|alias`, without the brackets).
///
/// `embed` enables the size forms (`|640x480`, `|100`). Returns `None` for a link with neither
/// a target nor a subpath (`[[ ]]`, `[[#]]`, `[[|x]]`), which Obsidian does not treat as a link.
pub(crate) fn parse_wikilink_inner(inner: &str, embed: bool) -> Option<LinkParts> {
    let (link, display) = match inner.find('|') {
        Some(bar) => {
            // Inside tables the alias pipe is written `\|`; the backslash is not part of the
            // target in Obsidian.
            let link = &inner[..bar];
            let link = link.strip_suffix('\\').unwrap_or(link);
            (link, Some(&inner[bar + 1..]))
        }
        None => (inner, None),
    };
    let (path, fragment) = match link.find('#') {
        Some(hash) => (&link[..hash], Some(&link[hash + 1..])),
        None => (link, None),
    };
    let mut parts = LinkParts {
        target: path.trim().into(),
        ..LinkParts::default()
    };
    if let Some(fragment) = fragment {
        apply_fragment(&mut parts, fragment);
    }
    if let Some(display) = display {
        if embed {
            let (text, size) = split_size(display);
            parts.size = size;
            parts.display = text.filter(|t| !t.is_empty()).map(Box::from);
        } else if !display.is_empty() {
            parts.display = Some(display.into());
        }
    }
    if parts.target.is_empty() && parts.subpath.is_none() {
        return None;
    }
    Some(parts)
}

/// Takes apart the destination of a Markdown link or image (already unescaped by the Markdown
/// parser, still percent-encoded). Returns `None` for external URLs and empty destinations.
///
/// `text` is the link text (or image alt text); for images a trailing `|100` or `|640x480` in
/// it is the display size, as in Obsidian.
pub(crate) fn parse_markdown_dest(dest: &str, text: &str, image: bool) -> Option<LinkParts> {
    let dest = dest.trim();
    if dest.is_empty() || is_external_url(dest) {
        return None;
    }
    let (path, fragment) = match dest.find('#') {
        Some(hash) => (&dest[..hash], Some(&dest[hash + 1..])),
        None => (dest, None),
    };
    let path = decode(path);
    if is_external_url(&path) {
        return None;
    }
    let mut parts = LinkParts {
        target: path.trim().into(),
        ..LinkParts::default()
    };
    if let Some(fragment) = fragment {
        apply_fragment(&mut parts, &decode(fragment));
    }
    let (display, size) = if image {
        match text.rfind('|') {
            Some(bar) => match parse_size(&text[bar + 1..]) {
                Some(size) => (&text[..bar], Some(size)),
                None => (text, None),
            },
            None => (text, None),
        }
    } else {
        (text, None)
    };
    parts.size = size;
    parts.display = (!display.is_empty()).then(|| display.into());
    if parts.target.is_empty() && parts.subpath.is_none() {
        return None;
    }
    Some(parts)
}

/// Percent-decodes a Markdown destination; invalid UTF-8 after decoding is replaced.
fn decode(s: &str) -> Cow<'_, str> {
    if s.contains('%') {
        percent_decode_str(s).decode_utf8_lossy()
    } else {
        Cow::Borrowed(s)
    }
}

/// Reads what follows the first `#`: `^block`, `page=3` (PDFs), or headings `H1#H2`.
fn apply_fragment(parts: &mut LinkParts, fragment: &str) {
    if let Some(block) = fragment.strip_prefix('^') {
        let block = block.trim();
        if !block.is_empty() {
            parts.subpath = Some(Subpath::Block(block.into()));
        }
        return;
    }
    if parts.target.to_ascii_lowercase().ends_with(".pdf")
        && let Some(page) = fragment.trim().strip_prefix("page=")
    {
        // `#page=3&selection=...` and `#page=3&color=...` keep the page.
        let digits = page.split('&').next().unwrap_or("");
        if let Some(page) = parse_u32(digits) {
            parts.page = Some(page);
            return;
        }
    }
    let headings: Box<[Box<str>]> = fragment
        .split('#')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(Box::from)
        .collect();
    if !headings.is_empty() {
        parts.subpath = Some(Subpath::Heading(headings));
    }
}

/// Splits an embed's display text into (text, size): `100` and `640x480` are sizes, and so is a
/// last `|`-separated part (`alt|100`).
fn split_size(display: &str) -> (Option<&str>, Option<(u32, Option<u32>)>) {
    if let Some(size) = parse_size(display) {
        return (None, Some(size));
    }
    if let Some(bar) = display.rfind('|')
        && let Some(size) = parse_size(&display[bar + 1..])
    {
        return (Some(&display[..bar]), Some(size));
    }
    (Some(display), None)
}

/// `100` → (100, None), `640x480` → (640, Some(480)); anything else is not a size.
fn parse_size(s: &str) -> Option<(u32, Option<u32>)> {
    let s = s.trim();
    match s.split_once('x') {
        Some((w, h)) => Some((parse_u32(w)?, Some(parse_u32(h)?))),
        None => Some((parse_u32(s)?, None)),
    }
}

/// ASCII digits only (no sign, no spaces), fitting in a u32.
fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Finds `[[...]]` occurrences in a plain string (a frontmatter value): byte ranges of the
/// bracketed text. The inside may not hold another `[[`, nor a line break unless
/// `allow_line_breaks` (used to find the source of a folded YAML value).
pub(crate) fn find_wikilinks(s: &str, allow_line_breaks: bool) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = s[from..].find("[[").map(|i| from + i) {
        let inner_start = open + 2;
        let Some(close) = s[inner_start..].find("]]").map(|i| inner_start + i) else {
            break;
        };
        let inner = &s[inner_start..close];
        if let Some(nested) = inner.rfind("[[") {
            // `[[a [[b]]`: the link is the innermost one.
            from = inner_start + nested;
            continue;
        }
        if allow_line_breaks || !inner.contains(['\n', '\r']) {
            found.push((open, close + 2));
        }
        from = close + 2;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wiki(inner: &str) -> LinkParts {
        parse_wikilink_inner(inner, false).unwrap()
    }

    #[test]
    fn heading_subpath_and_alias_are_split() {
        let p = wiki("Folder/Note#Heading|the alias");
        assert_eq!(&*p.target, "Folder/Note");
        assert_eq!(
            p.subpath,
            Some(Subpath::Heading(vec!["Heading".into()].into()))
        );
        assert_eq!(p.display.as_deref(), Some("the alias"));
    }

    #[test]
    fn nested_headings_become_a_heading_path() {
        let p = wiki("Note#H1#H2");
        assert_eq!(
            p.subpath,
            Some(Subpath::Heading(vec!["H1".into(), "H2".into()].into()))
        );
    }

    #[test]
    fn block_reference_is_a_block_subpath() {
        let p = wiki("2023-01-01#^37066d");
        assert_eq!(&*p.target, "2023-01-01");
        assert_eq!(p.subpath, Some(Subpath::Block("37066d".into())));
    }

    #[test]
    fn same_note_heading_has_empty_target() {
        let p = wiki("#Heading in this note");
        assert_eq!(&*p.target, "");
        assert_eq!(
            p.subpath,
            Some(Subpath::Heading(vec!["Heading in this note".into()].into()))
        );
    }

    #[test]
    fn only_the_first_pipe_splits_the_alias() {
        assert_eq!(wiki("a|b|c").display.as_deref(), Some("b|c"));
    }

    #[test]
    fn escaped_table_pipe_is_not_part_of_the_target() {
        let p = wiki("Note\\|alias");
        assert_eq!(&*p.target, "Note");
        assert_eq!(p.display.as_deref(), Some("alias"));
    }

    #[test]
    fn empty_links_are_not_links() {
        assert!(parse_wikilink_inner(" ", false).is_none());
        assert!(parse_wikilink_inner("#", false).is_none());
        assert!(parse_wikilink_inner("|x", false).is_none());
    }

    #[test]
    fn embed_sizes_are_width_or_width_by_height() {
        let p = parse_wikilink_inner("img.png|640x480", true).unwrap();
        assert_eq!((p.size, p.display), (Some((640, Some(480))), None));
        let p = parse_wikilink_inner("img.png|100", true).unwrap();
        assert_eq!((p.size, p.display), (Some((100, None)), None));
        let p = parse_wikilink_inner("img.png|a cat|100", true).unwrap();
        assert_eq!(p.size, Some((100, None)));
        assert_eq!(p.display.as_deref(), Some("a cat"));
        let p = parse_wikilink_inner("Note|alias", true).unwrap();
        assert_eq!((p.size, p.display.as_deref()), (None, Some("alias")));
    }

    #[test]
    fn a_number_after_the_pipe_of_a_plain_link_is_display_text() {
        let p = wiki("Note|100");
        assert_eq!((p.size, p.display.as_deref()), (None, Some("100")));
    }

    #[test]
    fn oversized_numbers_are_not_sizes() {
        let p = parse_wikilink_inner("img.png|99999999999", true).unwrap();
        assert_eq!(p.size, None);
        assert_eq!(p.display.as_deref(), Some("99999999999"));
    }

    #[test]
    fn pdf_page_is_read_from_the_fragment() {
        let p = parse_wikilink_inner("doc.pdf#page=3", true).unwrap();
        assert_eq!((p.page, p.subpath), (Some(3), None));
        let p = wiki("Doc.PDF#page=12&selection=1,2,3");
        assert_eq!(p.page, Some(12));
        // Not a PDF: `page=3` is a heading like any other.
        let p = wiki("Note#page=3");
        assert_eq!(p.page, None);
        assert_eq!(
            p.subpath,
            Some(Subpath::Heading(vec!["page=3".into()].into()))
        );
    }

    #[test]
    fn markdown_destination_is_percent_decoded() {
        let p = parse_markdown_dest("Folder/Note%20name.md#Some%20heading", "text", false).unwrap();
        assert_eq!(&*p.target, "Folder/Note name.md");
        assert_eq!(
            p.subpath,
            Some(Subpath::Heading(vec!["Some heading".into()].into()))
        );
        assert_eq!(p.display.as_deref(), Some("text"));
    }

    #[test]
    fn encoded_hash_stays_in_the_target() {
        let p = parse_markdown_dest("C%23%20notes.md", "", false).unwrap();
        assert_eq!((&*p.target, p.subpath), ("C# notes.md", None));
    }

    #[test]
    fn external_destinations_are_not_vault_links() {
        for dest in [
            "https://example.com",
            "http://x.com/#frag",
            "mailto:a@b.c",
            "obsidian://open?vault=v",
            "file:///etc/passwd",
            "//host/x",
            "https%3A//x.com",
        ] {
            assert!(parse_markdown_dest(dest, "", false).is_none(), "{dest}");
        }
    }

    #[test]
    fn markdown_image_alt_can_carry_a_size() {
        let p = parse_markdown_dest("img.png", "cat|300x200", true).unwrap();
        assert_eq!(p.size, Some((300, Some(200))));
        assert_eq!(p.display.as_deref(), Some("cat"));
    }

    #[test]
    fn colon_space_is_a_name_not_a_scheme() {
        assert!(!is_external_url("Meeting: notes.md"));
        assert!(is_external_url("C:\\Users\\x"));
        assert!(!is_external_url("1http://x"));
    }

    #[test]
    fn wikilinks_in_plain_strings_are_found() {
        let s = "see [[A]] and ![[b.png|100]], not [[x\ny]] nor [[]";
        let found: Vec<&str> = find_wikilinks(s, false)
            .iter()
            .map(|&(a, b)| &s[a..b])
            .collect();
        assert_eq!(found, ["[[A]]", "[[b.png|100]]"]);
        let s = "[[a [[b]]";
        let found: Vec<&str> = find_wikilinks(s, false)
            .iter()
            .map(|&(a, b)| &s[a..b])
            .collect();
        assert_eq!(found, ["[[b]]"]);
        let s = "[[a\n  b]]";
        assert_eq!(find_wikilinks(s, true), [(0, s.len())]);
    }
}
