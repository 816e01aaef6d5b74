//! A note cut into sections for embedding: one chunk per heading's section (frontmatter and
//! fenced code skipped as headings), long sections split at line ends, each chunk's text led by
//! the note's title and its heading path, so a section is read in its context.
//!
//! What is embedded is what a reader sees: Obsidian comments (`%% ... %%`) are left out, and
//! the Markdown is read as text: a link is its words, not its address, a wikilink
//! its display text, HTML tags and bare addresses are dropped. A static model averages its
//! tokens, so the dozens of tokens of a badge's image address would otherwise outweigh the
//! sentence that says what the note is about.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::BuildHasher;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::markdown::{self, Subpath};

/// Longest chunk text, in bytes (longer sections are split).
pub const MAX_CHUNK_BYTES: usize = 1500;
/// Most chunks of one note (the rest of a very long note is left out of its embeddings).
pub const MAX_CHUNKS: usize = 64;

/// One section, or a piece of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based line where it starts (its heading, or its first line).
    pub line: u32,
    /// The heading it sits under, if any.
    pub heading: Option<String>,
    /// What is embedded: title, heading path, then the section's text.
    pub text: String,
}

/// Cuts `text` (the note named `title`) into chunks; always at least one (the title alone for
/// an empty note).
pub fn chunks(title: &str, text: &str) -> Vec<Chunk> {
    chunks_without(title, text, &Boilerplate::default())
}

/// Lines of text that repeat across many notes of a vault (a template's fixed lines, a shared
/// footer), by [`line_key`]: they say nothing about the note they sit in, and a static model
/// averages them into every note alike.
pub type Boilerplate = HashSet<u64>;

/// Fewest notes a line must be found in, of `notes`, to count as [`Boilerplate`]: one in a
/// hundred, and at least eight.
fn boilerplate_threshold(notes: usize) -> usize {
    (notes / 100).max(8)
}

/// The boilerplate of a vault of `notes` notes, from how many notes each line key was found in
/// (each note's [`line_keys`] counted once).
pub fn boilerplate(counts: impl IntoIterator<Item = (u64, u32)>, notes: usize) -> Boilerplate {
    let least = u32::try_from(boilerplate_threshold(notes)).unwrap_or(u32::MAX);
    counts
        .into_iter()
        .filter(|&(_, n)| n >= least)
        .map(|(k, _)| k)
        .collect()
}

/// The key of a line of readable text, as [`Boilerplate`] holds it (case folded). Keys are
/// stable for a build of capvault; a saved set is only used with vectors saved beside it.
pub fn line_key(line: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(0x6361_7076_6175_6c74).hash_one(line.to_lowercase())
}

/// The keys of the readable lines of a note's sections, each once: what a vault counts to find
/// its [`Boilerplate`].
pub fn line_keys(title: &str, text: &str) -> HashSet<u64> {
    chunks(title, text)
        .iter()
        .flat_map(|c| c.text.lines().skip(1))
        .map(line_key)
        .collect()
}

/// [`chunks`] with the lines of `boilerplate` left out; a section of nothing but boilerplate is
/// left out whole (its heading too).
pub fn chunks_without(title: &str, text: &str, boilerplate: &Boilerplate) -> Vec<Chunk> {
    let mut out = Vec::new();
    // Headings above the current line, by level.
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut current = Section::new(1, None, title, &path, boilerplate);
    let mut fence: Option<(u8, usize)> = None;
    let body_start = frontmatter_lines(text);
    let mut in_comment = false;
    for (i, line) in text.lines().enumerate() {
        if i < body_start {
            continue;
        }
        let lineno = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let line: Cow<'_, str> = if fence.is_none() && (in_comment || line.contains("%%")) {
            let (visible, hidden) = uncommented(line, &mut in_comment);
            if hidden && visible.trim().is_empty() {
                continue;
            }
            visible
        } else {
            Cow::Borrowed(line)
        };
        let line = line.as_ref();
        if let Some(f) = fence_marker(line) {
            match fence {
                None => fence = Some(f),
                Some((c, n)) if f.0 == c && f.1 >= n => fence = None,
                Some(_) => {}
            }
        } else if fence.is_none()
            && let Some((level, heading)) = heading(line)
        {
            current.finish(&mut out);
            if out.len() >= MAX_CHUNKS {
                return out;
            }
            path.retain(|(l, _)| *l < level);
            path.push((level, heading.to_owned()));
            current = Section::new(lineno, Some(heading.to_owned()), title, &path, boilerplate);
            continue;
        }
        if current.body.len() + line.len() + 1 > MAX_CHUNK_BYTES
            && !current.body.is_empty()
            && !current.split(lineno, &mut out)
        {
            return out;
        }
        if current.body.is_empty() && line.trim().is_empty() {
            continue;
        }
        if current.body.is_empty() && current.heading.is_none() {
            current.line = lineno;
        }
        let mut piece = line;
        while piece.len() > MAX_CHUNK_BYTES {
            // One very long line: cut at character boundaries.
            let mut cut = MAX_CHUNK_BYTES;
            while !piece.is_char_boundary(cut) {
                cut -= 1;
            }
            current.body.push_str(&piece[..cut]);
            if !current.split(lineno, &mut out) {
                return out;
            }
            piece = &piece[cut..];
        }
        current.body.push_str(piece);
        current.body.push('\n');
    }
    current.finish(&mut out);
    if out.is_empty() {
        out.push(Chunk {
            line: 1,
            heading: None,
            text: title.to_owned(),
        });
    }
    out
}

struct Section<'b> {
    line: u32,
    heading: Option<String>,
    context: String,
    body: String,
    boilerplate: &'b Boilerplate,
}

impl<'b> Section<'b> {
    fn new(
        line: u32,
        heading: Option<String>,
        title: &str,
        path: &[(usize, String)],
        boilerplate: &'b Boilerplate,
    ) -> Self {
        let mut context = title.to_owned();
        for (_, h) in path {
            context.push_str(" > ");
            context.push_str(h);
        }
        Section {
            line,
            heading,
            context,
            body: String::new(),
            boilerplate,
        }
    }

    /// Adds the section as a chunk unless it is empty (a heading with no text still counts: its
    /// words say what the section is about).
    fn finish(&mut self, out: &mut Vec<Chunk>) {
        let body = self.body.trim();
        if body.is_empty() && self.heading.is_none() {
            return;
        }
        let mut text = readable(body);
        if !self.boilerplate.is_empty() {
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !self.boilerplate.contains(&line_key(l)))
                .collect();
            if kept.is_empty() && !text.is_empty() {
                return;
            }
            text = kept.join("\n");
        }
        out.push(Chunk {
            line: self.line,
            heading: self.heading.take(),
            text: format!("{}\n{}", self.context, text),
        });
    }

    /// Finishes this chunk and goes on with the same section in a new one starting at `line`
    /// (a section too long for one chunk). False when the note has its most chunks already.
    fn split(&mut self, line: u32, out: &mut Vec<Chunk>) -> bool {
        let heading = self.heading.clone();
        self.finish(out);
        if out.len() >= MAX_CHUNKS {
            return false;
        }
        self.line = line;
        self.heading = heading;
        self.body.clear();
        true
    }
}

/// The part of `line` outside Obsidian comments, given whether a comment is open at its start
/// (updated for the next line), and whether any of it was hidden.
///
/// Line by line, as the chunker reads: a `%%` inside inline code counts as a marker here, where
/// the note parser ([`crate::markdown`]) keeps it as code. Only what is embedded differs.
fn uncommented<'l>(line: &'l str, in_comment: &mut bool) -> (Cow<'l, str>, bool) {
    let mut visible = String::new();
    let mut hidden = *in_comment;
    let mut rest = line;
    loop {
        match rest.find("%%") {
            Some(at) => {
                if !*in_comment {
                    visible.push_str(&rest[..at]);
                }
                *in_comment = !*in_comment;
                hidden = true;
                rest = &rest[at + 2..];
            }
            None => {
                if !*in_comment {
                    visible.push_str(rest);
                }
                break;
            }
        }
    }
    if hidden {
        (Cow::Owned(visible), true)
    } else {
        (Cow::Borrowed(line), false)
    }
}

/// Markdown read as text: the words of paragraphs, headings, lists, tables, quotes and code,
/// a link's or image's text without its address, a wikilink's display text (else its target),
/// without HTML tags or bare `http(s)://` addresses. Blocks end in a line break.
fn readable(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut run = String::new();
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(md, options) {
        match event {
            Event::Text(t) | Event::Code(t) => run.push_str(&t),
            // A line of the source is a line of text, so that a template's fixed lines can be
            // told apart from the note's own (a static model reads no line breaks anyway).
            Event::SoftBreak => flush(&mut run, &mut out),
            // Tags and inline HTML are dropped; the text between them is kept.
            Event::Html(_) | Event::InlineHtml(_) => {}
            Event::Start(Tag::Link { .. } | Tag::Image { .. } | Tag::Emphasis | Tag::Strong)
            | Event::End(TagEnd::Link | TagEnd::Image | TagEnd::Emphasis | TagEnd::Strong) => {}
            Event::Start(_) | Event::End(_) | Event::HardBreak | Event::Rule => {
                flush(&mut run, &mut out);
            }
            _ => run.push(' '),
        }
    }
    flush(&mut run, &mut out);
    out.truncate(out.trim_end().len());
    out
}

/// Appends a run of inline text to `out` as a line, wikilinks and bare addresses resolved.
fn flush(run: &mut String, out: &mut String) {
    let line = wikilinks_as_text(run);
    let mut any = false;
    for word in line.split_whitespace() {
        if word.starts_with("http://") || word.starts_with("https://") {
            continue;
        }
        if any {
            out.push(' ');
        }
        out.push_str(word);
        any = true;
    }
    if any {
        out.push('\n');
    }
    run.clear();
}

/// Wikilinks as a reader sees them: `[[target#heading|shown]]` as `shown`, `[[Folder/target#heading]]`
/// as `target heading` (an embed's `!` dropped too); other text as it is. The links are found
/// and taken apart by the Markdown layer's own wikilink parser.
fn wikilinks_as_text(s: &str) -> Cow<'_, str> {
    let found = markdown::find_wikilinks(s, false);
    if found.is_empty() {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut from = 0;
    for (start, end) in found {
        let before = &s[from..start];
        out.push_str(before.strip_suffix('!').unwrap_or(before));
        let embed = before.ends_with('!');
        if let Some(parts) = markdown::parse_wikilink_inner(&s[start + 2..end - 2], embed) {
            match (&parts.display, &parts.subpath) {
                (Some(shown), _) => out.push_str(shown),
                (None, subpath) => {
                    let name = parts.target.rsplit('/').next().unwrap_or(&parts.target);
                    out.push_str(name.strip_suffix(".md").unwrap_or(name));
                    if let Some(Subpath::Heading(headings)) = subpath {
                        for h in headings.iter() {
                            out.push(' ');
                            out.push_str(h);
                        }
                    }
                }
            }
        }
        from = end;
    }
    out.push_str(&s[from..]);
    Cow::Owned(out)
}

/// Lines taken by a leading `---` frontmatter block (0 when there is none).
fn frontmatter_lines(text: &str) -> usize {
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return 0;
    }
    for (i, l) in lines.enumerate() {
        if matches!(l.trim_end(), "---" | "...") {
            return i + 2;
        }
    }
    0
}

/// An ATX heading: its level and text.
fn heading(line: &str) -> Option<(usize, &str)> {
    let t = line
        .strip_prefix("   ")
        .or(line.strip_prefix("  "))
        .or(line.strip_prefix(' '))
        .unwrap_or(line);
    let level = t.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim_end();
    (!text.is_empty()).then_some((level, text))
}

/// A code fence line: its character and length.
fn fence_marker(line: &str) -> Option<(u8, usize)> {
    let t = line.trim_start();
    let c = *t.as_bytes().first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let n = t.bytes().take_while(|&b| b == c).count();
    (n >= 3).then_some((c, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_headings_with_their_path_as_context() {
        let text = "---\ntitle: x\n---\nIntro line.\n\n# Garden\nSoil and seeds.\n## Tools\nA \
                    spade.\n```\n# not a heading\n```\n# Kitchen\n";
        let c = chunks("Home", text);
        assert_eq!(c.len(), 4, "{c:#?}");
        assert_eq!((c[0].line, c[0].heading.as_deref()), (4, None));
        assert_eq!(c[0].text, "Home\nIntro line.");
        assert_eq!((c[1].line, c[1].heading.as_deref()), (6, Some("Garden")));
        assert_eq!(c[2].heading.as_deref(), Some("Tools"));
        assert!(c[2].text.starts_with("Home > Garden > Tools\nA spade."));
        assert!(c[2].text.contains("# not a heading"));
        assert_eq!(c[3].text, "Home > Kitchen\n");
    }

    #[test]
    fn boilerplate_lines_and_all_boilerplate_sections_are_left_out() {
        let note = |about: &str| {
            format!(
                "# Plugin\nPlugin ID: `{about}`\nMobile compatible: [[Mobile|Yes]]\n{about} turns \
                 notes into maps.\n# This note in GitHub\n[Edit In GitHub](https://x.dev/{about}) \
                 | [Copy this note](https://raw.x/{about})\n"
            )
        };
        // Nine notes from one template (a line must be in eight to count).
        let notes: Vec<String> = std::iter::once("maps".to_owned())
            .chain((1..9).map(|i| format!("topic{i}")))
            .map(|a| note(&a))
            .collect();
        // Counted as a vault counts them: each line once per note.
        let mut counts = std::collections::HashMap::<u64, u32>::new();
        for n in &notes {
            for k in line_keys("T", n) {
                *counts.entry(k).or_default() += 1;
            }
        }
        let common = boilerplate(counts, notes.len());
        // The template's fixed lines and the footer are common; the note's own lines are not.
        assert!(common.contains(&line_key("mobile compatible: yes")));
        assert!(common.contains(&line_key("Edit In GitHub | Copy this note")));
        let c = chunks_without("maps", &notes[0], &common);
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(
            c[0].text,
            "maps > Plugin\nPlugin ID: maps\nmaps turns notes into maps."
        );
        // Without the set, everything is there.
        let all = chunks("maps", &notes[0]);
        assert_eq!(all.len(), 2);
        assert!(all[0].text.contains("Mobile compatible: Yes"));
        // A note of nothing but boilerplate still has its title.
        let bare =
            "# This note in GitHub\n[Edit In GitHub](https://x) | [Copy this note](https://y)\n";
        assert_eq!(chunks_without("bare", bare, &common)[0].text, "bare");
        assert_eq!(boilerplate_threshold(10), 8);
        assert_eq!(boilerplate_threshold(100_000), 1000);
    }

    #[test]
    fn long_sections_are_split_and_notes_bounded() {
        let para = "word ".repeat(100);
        let text = format!("# Big\n{}", format!("{para}\n").repeat(40));
        let c = chunks("T", &text);
        assert!(c.len() > 5);
        assert!(c.iter().all(|c| c.text.len() <= MAX_CHUNK_BYTES + 100));
        assert!(c.iter().all(|c| c.heading.as_deref() == Some("Big")));
        let one_line = "é".repeat(100_000);
        let c = chunks("T", &one_line);
        assert_eq!(c.len(), MAX_CHUNKS);
        let c = chunks("Empty", "");
        assert_eq!(
            c,
            vec![Chunk {
                line: 1,
                heading: None,
                text: "Empty".into()
            }]
        );
    }

    #[test]
    fn what_is_embedded_is_what_a_reader_sees() {
        let text = "%% hidden\n# Not a heading %%\n\
                    ![GitHub stars](https://img.shields.io/github/stars/a/b?color=573E7A)\n\
                    # Game\n\
                    Play **DOOM** in [your app](https://example.com/x?y=1), see [[Retro games|old \
                    games]] and [[Folder/Arcade#Scores]] or https://example.com/raw %%not this%% \
                    <span class=\"x\">now</span> ![[Folder/Map.md#^b1]].\n\
                    ```\n%% code stays %%\n```\n";
        let c = chunks("Doom", text);
        assert_eq!(c.len(), 2, "{c:#?}");
        assert_eq!(c[0].text, "Doom\nGitHub stars");
        assert_eq!(c[1].heading.as_deref(), Some("Game"));
        assert_eq!(
            c[1].text,
            "Doom > Game\nPlay DOOM in your app, see old games and Arcade Scores or now Map.\n\
             %% code stays %%"
        );
        // An unclosed comment hides the rest of the note, headings included.
        let c = chunks("T", "Seen.\n%%\n# Hidden\nHidden too.\n");
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(c[0].text, "T\nSeen.");
    }
}
