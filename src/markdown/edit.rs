//! Pure text edits of one note, the way the write tools make them: every byte outside the edit
//! stays as it was, the note's line endings (LF or CRLF) are used for inserted lines, and a
//! UTF-8 byte order mark stays in front. An edit whose place cannot be found exactly (text not
//! there, there twice, a heading missing or repeated) is an error that says how many matches
//! there were; nothing ever falls back to appending or rewriting.

use super::frontmatter;
use super::{Heading, parse_note};

/// The byte order mark some editors put at the start of UTF-8 files.
pub const BOM: &str = "\u{feff}";

/// Why an edit cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The text or heading to edit at occurs `count` times (0, or more than one).
    #[error("{what} occurs {count} times; it must occur exactly once")]
    Count {
        /// What was looked for, described for the client.
        what: String,
        /// How many times it was found.
        count: usize,
        /// Headings of the note, when a heading was looked for (at most 30).
        headings: Vec<String>,
    },
    /// Two edits overlap.
    #[error("edits {0} and {1} overlap")]
    Overlap(usize, usize),
    /// Edit `n` (1-based) has an empty `old_text`.
    #[error("edit {0}: old_text is empty")]
    EmptyOldText(usize),
    /// The heading to edit under is empty.
    #[error("heading is empty")]
    EmptyHeading,
}

/// A note's text split into its byte order mark (if any) and the rest, with its line ending.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'t> {
    /// `BOM` or `""`.
    pub bom: &'t str,
    /// The text after the byte order mark.
    pub body: &'t str,
    /// `"\r\n"` when the note's first line ends so, else `"\n"`.
    pub newline: &'static str,
}

impl<'t> Layout<'t> {
    /// Takes `text` apart.
    pub fn of(text: &'t str) -> Layout<'t> {
        let (bom, body) = match text.strip_prefix(BOM) {
            Some(rest) => (BOM, rest),
            None => ("", text),
        };
        let newline = match memchr::memchr(b'\n', body.as_bytes()) {
            Some(i) if i > 0 && body.as_bytes()[i - 1] == b'\r' => "\r\n",
            _ => "\n",
        };
        Layout { bom, body, newline }
    }

    /// `s` with its line breaks written as this note writes them.
    pub fn lines_of(&self, s: &str) -> String {
        let lf = s.replace("\r\n", "\n");
        if self.newline == "\n" {
            lf
        } else {
            lf.replace('\n', "\r\n")
        }
    }

    /// The whole note again, from a new body.
    pub fn with_body(&self, body: &str) -> String {
        let mut out = String::with_capacity(self.bom.len() + body.len());
        out.push_str(self.bom);
        out.push_str(body);
        out
    }
}

/// One replacement of `edit_note`.
#[derive(Debug, Clone)]
pub struct Replace {
    /// The text to find: it must occur exactly once.
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
}

/// Applies every replacement to `text`, or none: each `old_text` must occur exactly once in the
/// note as it is (overlapping occurrences count), and no two may overlap. In a CRLF note, text
/// written with `\n` line breaks matches the note's `\r\n` ones.
pub fn replace_each(text: &str, edits: &[Replace]) -> Result<String, EditError> {
    let layout = Layout::of(text);
    let body = layout.body;
    let mut spans: Vec<(usize, usize, usize, String)> = Vec::with_capacity(edits.len());
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(EditError::EmptyOldText(i + 1));
        }
        let mut old = e.old_text.clone();
        // The new text's line breaks are the note's, whatever the client sent.
        let new = if e.new_text.contains('\n') {
            layout.lines_of(&e.new_text)
        } else {
            e.new_text.clone()
        };
        let mut found = occurrences(body, &old);
        if found.is_empty() && layout.newline == "\r\n" && old.contains('\n') {
            old = layout.lines_of(&old);
            found = occurrences(body, &old);
        }
        if found.len() != 1 {
            return Err(EditError::Count {
                what: format!("edit {}: old_text", i + 1),
                count: found.len(),
                headings: Vec::new(),
            });
        }
        spans.push((found[0], found[0] + old.len(), i, new));
    }
    spans.sort_by_key(|s| s.0);
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            let (a, b) = (w[0].2.min(w[1].2), w[0].2.max(w[1].2));
            return Err(EditError::Overlap(a + 1, b + 1));
        }
    }
    let mut out = String::with_capacity(body.len());
    let mut at = 0;
    for (start, end, _, new) in &spans {
        out.push_str(&body[at..*start]);
        out.push_str(new);
        at = *end;
    }
    out.push_str(&body[at..]);
    Ok(layout.with_body(&out))
}

/// Start offsets of every occurrence of `needle` in `hay`, overlapping ones included (at most 100).
fn occurrences(hay: &str, needle: &str) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&hay.as_bytes()[from..]) {
        out.push(from + i);
        if out.len() >= 100 {
            break;
        }
        // The next occurrence may start inside this one, at the next character.
        let step = hay[from + i..].chars().next().map_or(1, char::len_utf8);
        from += i + step;
    }
    out
}

/// `content` as lines to insert: the note's line breaks, ending with one.
fn as_lines(layout: &Layout<'_>, content: &str) -> String {
    let mut s = layout.lines_of(content);
    if !s.ends_with('\n') {
        s.push_str(layout.newline);
    }
    s
}

/// What kind of block a line starts or continues, for [`separator`].
#[derive(PartialEq, Eq)]
enum LineKind {
    Blank,
    Heading,
    ListItem,
    Quote,
    TableRow,
    Other,
}

fn line_kind(line: &str) -> LineKind {
    let t = line.trim();
    if t.is_empty() {
        return LineKind::Blank;
    }
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) && t[hashes..].chars().next().is_none_or(char::is_whitespace) {
        return LineKind::Heading;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let after_digits = &t[digits..];
    if t.starts_with(['-', '*', '+']) && t[1..].chars().next().is_none_or(char::is_whitespace)
        || (1..=9).contains(&digits)
            && (after_digits.starts_with(". ") || after_digits.starts_with(") "))
    {
        return LineKind::ListItem;
    }
    if t.starts_with('>') {
        return LineKind::Quote;
    }
    if t.starts_with('|') {
        return LineKind::TableRow;
    }
    LineKind::Other
}

/// The line break to put between `before` (the note up to the insertion point, ending with a
/// line break or empty) and `content`, so that appended text never joins a paragraph: a blank
/// line, except after a heading or a blank line, before content that starts with a blank line,
/// or when both sides are list items, quote lines or table rows (the block goes on).
fn separator<'n>(before: &str, content: &str, nl: &'n str) -> &'n str {
    let one_line_less = before.strip_suffix('\n').unwrap_or(before);
    let last = one_line_less.rsplit('\n').next().unwrap_or("");
    let first = content.split('\n').next().unwrap_or("");
    let (a, b) = (line_kind(last), line_kind(first));
    let goes_on = a == b && matches!(a, LineKind::ListItem | LineKind::Quote | LineKind::TableRow);
    if before.is_empty()
        || matches!(a, LineKind::Blank | LineKind::Heading)
        || b == LineKind::Blank
        || goes_on
    {
        ""
    } else {
        nl
    }
}

/// Appends `content` at the end of the note, on lines of its own, separated from a paragraph
/// before it by a blank line (see [`separator`]); right after the frontmatter, nothing is
/// added between.
pub fn append(text: &str, content: &str) -> String {
    let layout = Layout::of(text);
    let mut body = layout.body.to_owned();
    if !body.is_empty() && !body.ends_with('\n') {
        body.push_str(layout.newline);
    }
    let after_frontmatter =
        frontmatter::find_block(&body).is_some_and(|b| body[b.body_start..].trim().is_empty());
    if !after_frontmatter {
        let sep = separator(&body, content, layout.newline);
        body.push_str(sep);
    }
    body.push_str(&as_lines(&layout, content));
    layout.with_body(&body)
}

/// Inserts `content` at the start of the body: after the frontmatter block when there is one.
pub fn prepend(text: &str, content: &str) -> String {
    let layout = Layout::of(text);
    let at = frontmatter::find_block(layout.body).map_or(0, |b| b.body_start);
    layout.with_body(&insert_lines(&layout, at, content))
}

/// The body with `content` inserted as lines of its own at `at` (a line start, or the end of a
/// last line without a newline), separated from a paragraph that follows by a blank line.
fn insert_lines(layout: &Layout<'_>, at: usize, content: &str) -> String {
    let body = layout.body;
    let mut out = String::with_capacity(body.len() + content.len() + 2);
    out.push_str(&body[..at]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(layout.newline);
    }
    out.push_str(&as_lines(layout, content));
    let next = body[at..].split('\n').next().unwrap_or("");
    let last = content
        .trim_end_matches(['\n', '\r'])
        .rsplit('\n')
        .next()
        .unwrap_or("");
    if !separator(last, next, layout.newline).is_empty() && line_kind(last) != LineKind::Heading {
        out.push_str(layout.newline);
    }
    out.push_str(&body[at..]);
    out
}

/// Appends `content` at the end of the text of the section under `heading` (`Parent/Child` for
/// a heading nested under another; a heading whose own text holds `/` matches as written too):
/// after the last line that is not blank before the next heading of any level, so text for a
/// heading lands under it, never inside its last subsection. A paragraph before it is separated
/// by a blank line as in [`append`]. Headings compare by `key` (the model's heading key, as
/// links find headings).
pub fn append_to_section(
    text: &str,
    heading: &str,
    content: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<String, EditError> {
    let layout = Layout::of(text);
    let body = layout.body;
    let section = find_section(body, heading, key)?;
    // Back over blank lines at the end of the section, never above the heading's own line.
    let mut at = section.end;
    while at > section.text_start {
        let prev_start = body[..at - 1].rfind('\n').map_or(0, |p| p + 1);
        let line = &body[prev_start..at];
        if line.trim().is_empty() {
            at = prev_start;
        } else {
            break;
        }
    }
    let mut out = String::with_capacity(body.len() + content.len() + 2);
    out.push_str(&body[..at]);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(layout.newline);
    }
    let sep = separator(&out, content, layout.newline);
    out.push_str(sep);
    out.push_str(&as_lines(&layout, content));
    out.push_str(&body[at..]);
    Ok(layout.with_body(&out))
}

/// Inserts `content` at the start of the text of the section under `heading` (found as
/// [`append_to_section`] finds it): on the lines right after the heading's, separated from a
/// paragraph that follows by a blank line as [`prepend`] separates it.
pub fn prepend_to_section(
    text: &str,
    heading: &str,
    content: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<String, EditError> {
    let layout = Layout::of(text);
    let at = find_section(layout.body, heading, key)?.text_start;
    Ok(layout.with_body(&insert_lines(&layout, at, content)))
}

/// Where a section's own text lies in a body: from the line after its heading to the next
/// heading of any level (or the end).
struct Section {
    text_start: usize,
    end: usize,
}

/// The one section under `heading` (see [`append_to_section`]); none or several is an error
/// that lists the note's headings.
fn find_section(
    body: &str,
    heading: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<Section, EditError> {
    let parsed = parse_note(body);
    let headings = &parsed.headings;
    let wanted = heading.trim().trim_start_matches('#').trim();
    if wanted.is_empty() {
        return Err(EditError::EmptyHeading);
    }
    let mut found = matching_headings(headings, &[wanted], key);
    if found.is_empty() && wanted.contains('/') {
        let parts: Vec<&str> = wanted.split('/').map(str::trim).collect();
        found = matching_headings(headings, &parts, key);
    }
    if found.len() != 1 {
        return Err(EditError::Count {
            what: format!("heading `{wanted}`"),
            count: found.len(),
            headings: headings
                .iter()
                .take(30)
                .map(|h| h.text.to_string())
                .collect(),
        });
    }
    let i = found[0];
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', body.as_bytes()).map(|p| p + 1))
        .collect();
    let line_start = |line: u32| {
        line_starts
            .get(line as usize - 1)
            .copied()
            .unwrap_or(body.len())
    };
    let end = headings
        .get(i + 1)
        .map_or(body.len(), |h| line_start(h.pos.line));
    let text_start = line_starts
        .get(headings[i].pos.line as usize)
        .copied()
        .unwrap_or(body.len());
    Ok(Section { text_start, end })
}

/// Indexes of the headings that are the last of a chain matching `parts`, each nested under the
/// one before (a deeper level, before the outer section ends).
fn matching_headings(
    headings: &[Heading],
    parts: &[&str],
    key: &dyn Fn(&str) -> String,
) -> Vec<usize> {
    let keys: Vec<String> = parts.iter().map(|p| key(p)).collect();
    let mut out = Vec::new();
    for (i, h) in headings.iter().enumerate() {
        if key(&h.text) != keys[keys.len() - 1] {
            continue;
        }
        // Walk outwards: each earlier part must be an enclosing heading.
        let mut need = keys.len() - 1;
        let mut level = h.level;
        let mut j = i;
        while need > 0 && j > 0 {
            j -= 1;
            let outer = &headings[j];
            if outer.level < level {
                if key(&outer.text) == keys[need - 1] {
                    need -= 1;
                }
                level = outer.level;
            }
        }
        if need == 0 {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append_to_section(t: &str, h: &str, c: &str) -> Result<String, EditError> {
        super::append_to_section(t, h, c, &|s| s.trim().to_lowercase())
    }

    fn r(old: &str, new: &str) -> Replace {
        Replace {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    #[test]
    fn replacements_apply_all_or_none_and_count_matches() {
        let t = "alpha beta gamma\n";
        assert_eq!(
            replace_each(t, &[r("beta", "B"), r("gamma", "G")]).unwrap(),
            "alpha B G\n"
        );
        match replace_each(t, &[r("beta", "B"), r("delta", "D")]) {
            Err(EditError::Count { count: 0, .. }) => {}
            other => panic!("{other:?}"),
        }
        match replace_each("aaa", &[r("aa", "b")]) {
            Err(EditError::Count { count: 2, .. }) => {}
            other => panic!("overlapping occurrences count: {other:?}"),
        }
        assert!(matches!(
            replace_each(t, &[r("alpha beta", "x"), r("beta gamma", "y")]),
            Err(EditError::Overlap(1, 2))
        ));
        assert!(matches!(
            replace_each(t, &[r("", "x")]),
            Err(EditError::EmptyOldText(1))
        ));
        assert_eq!(
            EditError::EmptyOldText(1).to_string(),
            "edit 1: old_text is empty"
        );
    }

    #[test]
    fn crlf_and_the_byte_order_mark_are_kept() {
        let t = "\u{feff}one\r\ntwo\r\nthree\r\n";
        assert_eq!(
            replace_each(t, &[r("one\ntwo", "1\n2")]).unwrap(),
            "\u{feff}1\r\n2\r\nthree\r\n"
        );
        // Whatever old_text matched, the new text gets the note's line breaks.
        assert_eq!(
            replace_each(t, &[r("two", "2a\n2b")]).unwrap(),
            "\u{feff}one\r\n2a\r\n2b\r\nthree\r\n"
        );
        assert_eq!(
            replace_each("a\nb\n", &[r("a", "x\r\ny")]).unwrap(),
            "x\ny\nb\n"
        );
        assert_eq!(
            append(t, "four\nfive"),
            "\u{feff}one\r\ntwo\r\nthree\r\n\r\nfour\r\nfive\r\n"
        );
        assert_eq!(append("no newline", "x"), "no newline\n\nx\n");
        assert_eq!(append("", "x"), "x\n");
    }

    #[test]
    fn prepend_goes_after_the_frontmatter() {
        assert_eq!(
            prepend("---\na: 1\n---\nbody\n", "top"),
            "---\na: 1\n---\ntop\n\nbody\n"
        );
        assert_eq!(prepend("body\n", "top"), "top\n\nbody\n");
        assert_eq!(prepend("- b\n", "- a"), "- a\n- b\n");
        assert_eq!(prepend("# H\n", "top"), "top\n\n# H\n");
        assert_eq!(prepend("", "top"), "top\n");
        assert_eq!(prepend("---\na: 1\n---", "top"), "---\na: 1\n---\ntop\n");
        assert_eq!(
            prepend("\u{feff}---\r\na: 1\r\n---\r\nbody\r\n", "top"),
            "\u{feff}---\r\na: 1\r\n---\r\ntop\r\n\r\nbody\r\n"
        );
    }

    #[test]
    fn prepend_to_a_section_goes_right_under_its_heading() {
        let key = |s: &str| s.trim().to_lowercase();
        let at = |t: &str, h: &str, c: &str| prepend_to_section(t, h, c, &key);
        assert_eq!(
            at("# A\npara\n## B\nx\n", "A", "top").unwrap(),
            "# A\ntop\n\npara\n## B\nx\n"
        );
        // A list continues; an empty section keeps the next heading apart.
        assert_eq!(at("# A\n- b\n", "a", "- a").unwrap(), "# A\n- a\n- b\n");
        assert_eq!(at("# A\n## B\n", "A", "top").unwrap(), "# A\ntop\n\n## B\n");
        assert_eq!(at("# A", "A", "top").unwrap(), "# A\ntop\n");
        assert_eq!(
            at("---\nk: 1\n---\r\n# A\r\nx\r\n", "A/", "top"),
            Err(EditError::Count {
                what: "heading `A/`".into(),
                count: 0,
                headings: vec!["A".into()],
            })
        );
        assert_eq!(
            at("# A\r\nx\r\n", "A", "one\ntwo").unwrap(),
            "# A\r\none\r\ntwo\r\n\r\nx\r\n"
        );
        assert!(matches!(
            at("# A\n# A\n", "A", "x"),
            Err(EditError::Count { count: 2, .. })
        ));
    }

    #[test]
    fn appended_text_never_joins_a_paragraph_but_continues_a_list() {
        assert_eq!(append("para\n", "more"), "para\n\nmore\n");
        assert_eq!(append("para\n\n", "more"), "para\n\nmore\n");
        assert_eq!(append("- a\n", "- b"), "- a\n- b\n");
        assert_eq!(append("- a\n", "text"), "- a\n\ntext\n");
        assert_eq!(append("1. a\n", "2. b"), "1. a\n2. b\n");
        assert_eq!(append("> a\n", "> b"), "> a\n> b\n");
        assert_eq!(append("| a |\n", "| b |"), "| a |\n| b |\n");
        assert_eq!(append("# H\n", "text"), "# H\ntext\n");
        assert_eq!(append("---\na: 1\n---\n", "text"), "---\na: 1\n---\ntext\n");
        assert_eq!(append("para\r\n", "x"), "para\r\n\r\nx\r\n");
    }

    #[test]
    fn a_section_append_lands_at_the_end_of_that_headings_own_text() {
        let t = "# A\none\n\n## B\ntwo\n\n\n## C\nthree\n# D\nfour";
        assert_eq!(
            append_to_section(t, "B", "new").unwrap(),
            "# A\none\n\n## B\ntwo\n\nnew\n\n\n## C\nthree\n# D\nfour"
        );
        // A parent heading's own text, before its first subsection.
        assert_eq!(
            append_to_section(t, "A", "new").unwrap(),
            "# A\none\n\nnew\n\n## B\ntwo\n\n\n## C\nthree\n# D\nfour"
        );
        assert_eq!(
            append_to_section(t, "D", "- new").unwrap(),
            "# A\none\n\n## B\ntwo\n\n\n## C\nthree\n# D\nfour\n\n- new\n"
        );
        assert_eq!(
            append_to_section(t, "A/C", "new").unwrap(),
            "# A\none\n\n## B\ntwo\n\n\n## C\nthree\n\nnew\n# D\nfour"
        );
        assert_eq!(
            append_to_section("# A\n## B\n- x\n", "A", "- y").unwrap(),
            "# A\n- y\n## B\n- x\n"
        );
        match append_to_section(t, "Missing", "x") {
            Err(EditError::Count {
                count: 0, headings, ..
            }) => assert_eq!(headings.len(), 4),
            other => panic!("{other:?}"),
        }
        match append_to_section("# X\n# X\n", "X", "y") {
            Err(EditError::Count { count: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            append_to_section(t, "D/C", "x"),
            Err(EditError::Count { count: 0, .. })
        ));
    }
}
