//! The note body: one walk over pulldown-cmark's events that collects links, tags, headings and
//! block ids with byte ranges, then drops whatever an Obsidian comment (`%% ... %%`) hides.
//!
//! Structure comes from the Markdown parser, never from regexes over raw text: code (fenced,
//! indented, inline), math (`$...$`, `$$...$$`), HTML blocks and inline HTML (comments
//! included) reach us as their own events and are skipped whole. Only *text runs* (consecutive
//! `Text` events that are contiguous in the source) are scanned for `#tags`, `^block-ids` and
//! `%%` markers, and they are scanned in their source form so that positions are exact.
//!
//! Obsidian comments are not Markdown, so they are resolved after the walk: `%%` markers found
//! in text runs pair up in order (an unclosed one hides the rest of the note, as in Obsidian),
//! and every item that starts inside a pair is dropped. `%%` inside code stays code.

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::LinkKind;
use super::hidden::{self, HiddenKind, Spans};
use super::links::{LinkParts, parse_markdown_dest, parse_wikilink_inner};
use super::tags::{InlineTag, scan_inline_tags};

/// What the body holds, with byte ranges into the whole note.
#[derive(Debug, Default)]
pub(crate) struct BodyItems {
    /// Inline `#tags`, in text order.
    pub tags: Vec<InlineTag>,
    /// Headings, in text order.
    pub headings: Vec<HeadingItem>,
    /// `^block-ids`, in text order.
    pub block_ids: Vec<BlockIdItem>,
    /// Vault links (external URLs left out), in text order.
    pub links: Vec<LinkItem>,
    /// Fenced ```` ```base ```` code blocks (Obsidian Bases queries).
    pub base_blocks: u16,
    /// What a reader of the rendered note does not see, of what structure tells: comments,
    /// hidden HTML elements, misleading links (characters are [`hidden::scan_chars`]'s).
    pub hidden: Spans,
}

/// A heading: level, plain text, byte range of its lines (trailing newline excluded).
#[derive(Debug)]
pub(crate) struct HeadingItem {
    pub level: u8,
    pub text: Box<str>,
    pub start: usize,
    pub end: usize,
}

/// A block id without `^`, and the byte range of `^id`.
#[derive(Debug)]
pub(crate) struct BlockIdItem {
    pub id: Box<str>,
    pub start: usize,
    pub end: usize,
}

/// A vault link taken apart, and the byte range of its source text.
#[derive(Debug)]
pub(crate) struct LinkItem {
    pub kind: LinkKind,
    pub parts: LinkParts,
    pub start: usize,
    pub end: usize,
}

/// The Markdown dialect: CommonMark plus what Obsidian adds that pulldown-cmark knows.
/// Heading attributes (`{#id}`) stay off: Obsidian shows them as text. Superscript stays off:
/// `^` belongs to block ids.
pub(crate) fn options() -> Options {
    Options::ENABLE_WIKILINKS
        | Options::ENABLE_MATH
        | Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
}

/// Is this a ```` ```base ```` block (the info string's first word, as Obsidian reads it)?
fn is_base_block(kind: &CodeBlockKind<'_>) -> bool {
    matches!(kind, CodeBlockKind::Fenced(info) if info.split_whitespace().next() == Some("base"))
}

/// The fenced code blocks of a note's body whose info string starts with one of `languages`:
/// the byte offset of each opening fence in `text`, the language as written, and the text
/// inside.
pub(crate) fn fenced_blocks(
    text: &str,
    body_start: usize,
    languages: &[&str],
) -> Vec<(usize, String, String)> {
    let body = &text[body_start..];
    let mut out = Vec::new();
    let mut current: Option<(usize, String, String)> = None;
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                if let Some(lang) = info
                    .split_whitespace()
                    .next()
                    .filter(|l| languages.contains(l))
                {
                    current = Some((range.start + body_start, lang.to_owned(), String::new()));
                }
            }
            Event::Text(t) => {
                if let Some((_, _, inside)) = current.as_mut() {
                    inside.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

/// The inline code spans of a note's body (not code blocks): the byte offset of each span in
/// `text` and the code inside, at most `max` of them.
pub(crate) fn inline_code(text: &str, body_start: usize, max: usize) -> Vec<(usize, String)> {
    let body = &text[body_start..];
    let mut out = Vec::new();
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        if let Event::Code(code) = event {
            if out.len() >= max {
                break;
            }
            out.push((range.start + body_start, code.into_string()));
        }
    }
    out
}

/// The ```` ```base ```` blocks of a note's body: the byte offset of each opening fence in
/// `text` and the YAML inside.
pub(crate) fn base_blocks(text: &str, body_start: usize) -> Vec<(usize, String)> {
    fenced_blocks(text, body_start, &["base"])
        .into_iter()
        .map(|(at, _, yaml)| (at, yaml))
        .collect()
}

/// Scans the body of `text`, which starts at byte `body_start` (after the frontmatter).
pub(crate) fn scan(text: &str, body_start: usize) -> BodyItems {
    let body = &text[body_start..];
    let mut walker = Walker {
        text,
        code_block: false,
        frames: Vec::new(),
        deep: Vec::new(),
        deep_wiki: 0,
        deep_image: 0,
        heading: None,
        run: None,
        line_start: true,
        last_run: None,
        item_depth: 0,
        row_start: None,
        comment_marks: Vec::new(),
        pending_headings: Vec::new(),
        html_block: None,
        hidden_open: None,
        out: BodyItems::default(),
    };
    for (event, range) in Parser::new_ext(body, options()).into_offset_iter() {
        walker.event(event, range.start + body_start, range.end + body_start);
    }
    walker.flush();
    walker.finish()
}

/// A run of ordinary text: consecutive `Text` events, contiguous in the source.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: usize,
    end: usize,
    /// Starts a line of inline content (block start, table cell, after a line break).
    line_start: bool,
    /// Inside a wikilink or embed (its target or display text).
    wiki: bool,
    /// Inside an image's alt text or an embed.
    image: bool,
}

/// A link being read (between its Start and End events).
struct Frame {
    kind: FrameKind,
    /// Byte range of the whole link in the note (`raw`).
    start: usize,
    end: usize,
    /// The destination as the Markdown parser read it (unescaped, still percent-encoded);
    /// wikilinks are re-read from `raw` instead, which keeps `\|` and `#` as written.
    dest: String,
    /// Link text or alt text, as plain text (display text of Markdown links).
    text: String,
}

/// What kind of link a [`Frame`] is.
#[derive(Clone, Copy, PartialEq)]
enum FrameKind {
    /// `[[...]]`, or `![[...]]` when `embed`.
    Wiki { embed: bool },
    /// `[text](dest)` and reference links, or `![alt](dest)` when `image`.
    Markdown { image: bool },
    /// Autolinks and e-mail links: always external.
    External,
}

impl FrameKind {
    /// An embed or an image: its text is alt text.
    fn is_image(self) -> bool {
        matches!(
            self,
            FrameKind::Wiki { embed: true } | FrameKind::Markdown { image: true }
        )
    }
}

/// A heading being read.
struct HeadingFrame {
    level: u8,
    /// Byte range of the heading's lines.
    start: usize,
    end: usize,
    /// Plain-text pieces with their source ranges (to cut comments out later).
    pieces: Vec<(String, usize, usize)>,
}

/// Links nested deeper than this (images in link texts in image alt texts...) are not read.
/// Real notes nest two (`[![badge](img.png)](url)`).
const MAX_LINK_NESTING: usize = 4;

/// A Markdown link or embed whose source is longer than this is not read as a link: its
/// source is kept whole, and nested ones would each copy the text around them.
const MAX_MARKDOWN_LINK_BYTES: usize = 4096;

/// The walk's state.
struct Walker<'t> {
    /// The whole note (event ranges are shifted to index it).
    text: &'t str,
    /// Inside a fenced or indented code block: its text is not ours to scan.
    code_block: bool,
    /// Links being read, outermost first (a link may sit in another's text); at most
    /// [`MAX_LINK_NESTING`].
    frames: Vec<Frame>,
    /// Kinds of the links opened inside the deepest frame kept, not read: `![![![...](a)](a)`
    /// nests 20,000 images in 120 KB, and each kept frame copies its whole source and gathers
    /// every text inside it (4 s and 1.2 GB for that note).
    deep: Vec<FrameKind>,
    /// How many of `deep` are wikilinks, and how many are images or embeds.
    deep_wiki: usize,
    deep_image: usize,
    /// The heading being read, if any.
    heading: Option<HeadingFrame>,
    /// The text run being gathered.
    run: Option<Run>,
    /// The next text starts a line of inline content.
    line_start: bool,
    /// The last text run of the current block, if nothing but text followed it: where a
    /// ` ^block-id` may end the block.
    last_run: Option<Run>,
    /// How many list items enclose us (a nested list ends the enclosing item's text).
    item_depth: usize,
    /// Start of the table row being read (a row that is only `^id` is a block id).
    row_start: Option<usize>,
    /// Offsets of `%%` in text runs, in order.
    comment_marks: Vec<usize>,
    /// Headings read, finished once comments are known.
    pending_headings: Vec<HeadingFrame>,
    /// Start of the HTML block being read (scanned whole at its end).
    html_block: Option<usize>,
    /// An inline HTML element hidden by its style, still open: tag name, start, nesting.
    hidden_open: Option<(String, usize, usize)>,
    /// Everything found so far, before comment filtering.
    out: BodyItems,
}

impl Walker<'_> {
    fn event(&mut self, event: Event<'_>, start: usize, end: usize) {
        if let Event::Text(cooked) = &event {
            if !self.code_block {
                self.text_event(cooked, start, end);
            }
            return;
        }
        self.flush();
        match event {
            Event::Start(tag) => self.start(tag, start, end),
            Event::End(tag) => self.end(tag, end),
            Event::Code(code) | Event::InlineMath(code) | Event::DisplayMath(code) => {
                self.add_plain_text(&code, start, end);
                self.inline();
            }
            Event::SoftBreak | Event::HardBreak => {
                self.add_plain_text(" ", start, end);
                self.last_run = None;
                self.line_start = true;
            }
            Event::InlineHtml(_) => {
                hidden::scan_html(
                    &self.text[start..end],
                    start,
                    &mut self.hidden_open,
                    &mut self.out.hidden,
                );
                self.inline();
            }
            Event::Html(_)
            | Event::FootnoteReference(_)
            | Event::TaskListMarker(_)
            | Event::Rule
            | Event::Text(_) => self.inline(),
        }
    }

    /// Something other than text happened inside a block.
    fn inline(&mut self) {
        self.last_run = None;
        self.line_start = false;
    }

    fn in_wiki(&self) -> bool {
        self.deep_wiki > 0
            || self
                .frames
                .iter()
                .any(|f| matches!(f.kind, FrameKind::Wiki { .. }))
    }

    fn in_image(&self) -> bool {
        self.deep_image > 0 || self.frames.iter().any(|f| f.kind.is_image())
    }

    /// Adds text to the heading and link texts being read.
    fn add_plain_text(&mut self, s: &str, start: usize, end: usize) {
        for frame in &mut self.frames {
            // Only a Markdown link's text is kept (its display text), and not past the longest
            // link kept.
            if matches!(frame.kind, FrameKind::Markdown { .. })
                && frame.text.len() <= MAX_MARKDOWN_LINK_BYTES
            {
                frame.text.push_str(s);
            }
        }
        let in_image = self.in_image();
        if let Some(heading) = &mut self.heading
            && !in_image
        {
            heading.pieces.push((s.to_owned(), start, end));
        }
    }

    fn text_event(&mut self, cooked: &str, start: usize, end: usize) {
        self.add_plain_text(cooked, start, end);
        let (wiki, image) = (self.in_wiki(), self.in_image());
        if let Some(run) = &mut self.run
            && run.end == start
            && run.wiki == wiki
            && run.image == image
        {
            run.end = end;
            return;
        }
        self.flush();
        self.run = Some(Run {
            start,
            end,
            line_start: self.line_start,
            wiki,
            image,
        });
        self.line_start = false;
    }

    /// Ends the current text run: finds its `%%` markers and tags.
    fn flush(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        let src = &self.text.as_bytes()[run.start..run.end];
        // Most runs hold neither a `%` nor a `#`: one search settles it.
        let Some(first) = memchr::memchr2(b'%', b'#', src) else {
            self.last_run = Some(run);
            return;
        };
        let mut from = first;
        while let Some(i) = memchr::memchr(b'%', &src[from..]) {
            let at = from + i;
            if src.get(at + 1) == Some(&b'%') {
                self.comment_marks.push(run.start + at);
                from = at + 2;
            } else {
                from = at + 1;
            }
        }
        if !run.wiki && !run.image {
            scan_inline_tags(
                self.text,
                run.start,
                run.end,
                run.line_start,
                &mut self.out.tags,
            );
        }
        self.last_run = Some(run);
    }

    fn start(&mut self, tag: Tag<'_>, start: usize, end: usize) {
        match tag {
            Tag::Paragraph
            | Tag::BlockQuote(_)
            | Tag::TableCell
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::MetadataBlock(_) => {
                self.last_run = None;
                self.line_start = true;
            }
            Tag::HtmlBlock => {
                self.last_run = None;
                self.line_start = true;
                self.html_block = Some(start);
            }
            Tag::Heading { level, .. } => {
                self.last_run = None;
                self.line_start = true;
                self.heading = Some(HeadingFrame {
                    // `HeadingLevel` is `H1 = 1` ... `H6 = 6`.
                    level: level as u8,
                    start,
                    end,
                    pieces: Vec::new(),
                });
            }
            Tag::Item => {
                self.last_run = None;
                self.line_start = true;
                self.item_depth += 1;
            }
            Tag::List(_) => {
                // A nested list ends the text of the item that holds it.
                if self.item_depth > 0 {
                    self.check_block_id();
                }
                self.last_run = None;
                self.line_start = true;
            }
            Tag::TableRow => {
                self.last_run = None;
                self.line_start = true;
                self.row_start = Some(start);
            }
            Tag::CodeBlock(kind) => {
                self.last_run = None;
                self.code_block = true;
                if is_base_block(&kind) {
                    self.out.base_blocks = self.out.base_blocks.saturating_add(1);
                }
            }
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => self.open_frame(&link_type, &dest_url, false, start, end),
            Tag::Image {
                link_type,
                dest_url,
                ..
            } => self.open_frame(&link_type, &dest_url, true, start, end),
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript => self.inline(),
        }
    }

    fn end(&mut self, tag: TagEnd, end: usize) {
        // An inline element hidden by its style and never closed hides the rest of its block.
        if matches!(
            tag,
            TagEnd::Paragraph | TagEnd::Item | TagEnd::Heading(_) | TagEnd::TableCell
        ) && let Some((_, start, _)) = self.hidden_open.take()
        {
            let end = start + self.text[start..end.max(start)].trim_end().len();
            self.out.hidden.push(HiddenKind::HiddenElement, start, end);
        }
        match tag {
            TagEnd::Paragraph => {
                self.check_block_id();
                self.line_start = true;
            }
            TagEnd::Item => {
                self.check_block_id();
                self.item_depth = self.item_depth.saturating_sub(1);
                self.line_start = true;
            }
            TagEnd::Heading(_) => {
                self.last_run = None;
                if let Some(heading) = self.heading.take() {
                    self.pending_headings.push(heading);
                }
            }
            TagEnd::CodeBlock => {
                self.code_block = false;
                self.last_run = None;
            }
            TagEnd::Link | TagEnd::Image => {
                if let Some(kind) = self.deep.pop() {
                    self.deep_wiki -= usize::from(matches!(kind, FrameKind::Wiki { .. }));
                    self.deep_image -= usize::from(kind.is_image());
                } else if let Some(frame) = self.frames.pop() {
                    if frame.kind == (FrameKind::Markdown { image: false })
                        && hidden::is_misleading(&frame.text, &frame.dest)
                    {
                        self.out
                            .hidden
                            .push(HiddenKind::MisleadingLink, frame.start, frame.end);
                    }
                    self.finish_link(frame);
                }
                self.inline();
            }
            TagEnd::HtmlBlock => {
                self.last_run = None;
                if let Some(start) = self.html_block.take() {
                    let mut open = None;
                    hidden::scan_html(
                        &self.text[start..end],
                        start,
                        &mut open,
                        &mut self.out.hidden,
                    );
                    if let Some((_, from, _)) = open {
                        self.out.hidden.push(HiddenKind::HiddenElement, from, end);
                    }
                }
            }
            TagEnd::TableRow | TagEnd::TableHead => {
                if let Some(row_start) = self.row_start.take() {
                    self.check_row_block_id(row_start, end);
                }
                self.last_run = None;
            }
            _ => {
                self.last_run = None;
            }
        }
    }

    fn open_frame(
        &mut self,
        link_type: &LinkType,
        dest: &str,
        image: bool,
        start: usize,
        end: usize,
    ) {
        let kind = match link_type {
            LinkType::WikiLink { .. } => FrameKind::Wiki { embed: image },
            LinkType::Autolink | LinkType::Email => FrameKind::External,
            _ => FrameKind::Markdown { image },
        };
        if self.frames.len() >= MAX_LINK_NESTING {
            self.deep_wiki += usize::from(matches!(kind, FrameKind::Wiki { .. }));
            self.deep_image += usize::from(kind.is_image());
            self.deep.push(kind);
            self.inline();
            return;
        }
        self.frames.push(Frame {
            kind,
            start,
            end,
            // Wikilinks are re-read from their source; autolinks are external.
            dest: if matches!(kind, FrameKind::Markdown { .. }) {
                dest.to_owned()
            } else {
                String::new()
            },
            text: String::new(),
        });
        self.inline();
    }

    /// Turns a finished link into a [`LinkItem`], if it is a vault link.
    fn finish_link(&mut self, frame: Frame) {
        let raw = &self.text[frame.start..frame.end];
        let (kind, parts) = match frame.kind {
            FrameKind::Wiki { embed } => {
                // Obsidian's wikilinks stay on one line; pulldown-cmark's may not.
                if raw.contains(['\n', '\r']) {
                    return;
                }
                let open = if embed { "![[" } else { "[[" };
                let Some(inner) = raw.strip_prefix(open).and_then(|r| r.strip_suffix("]]")) else {
                    return;
                };
                let kind = if embed {
                    LinkKind::Embed
                } else {
                    LinkKind::Wikilink
                };
                (kind, parse_wikilink_inner(inner, embed))
            }
            FrameKind::Markdown { image } => {
                if raw.len() > MAX_MARKDOWN_LINK_BYTES {
                    return;
                }
                let kind = if image {
                    LinkKind::Embed
                } else {
                    LinkKind::Markdown
                };
                (kind, parse_markdown_dest(&frame.dest, &frame.text, image))
            }
            FrameKind::External => return,
        };
        if let Some(parts) = parts {
            self.out.links.push(LinkItem {
                kind,
                parts,
                start: frame.start,
                end: frame.end,
            });
        }
    }

    /// A ` ^id` at the end of the block's last text run.
    fn check_block_id(&mut self) {
        let Some(run) = self.last_run.take() else {
            return;
        };
        if run.wiki || run.image {
            return;
        }
        let src = self.text[run.start..run.end].trim_end();
        let Some(caret) = src.rfind('^') else {
            return;
        };
        let id = &src[caret + 1..];
        if !is_block_id(id) {
            return;
        }
        let before = if caret == 0 {
            if run.line_start {
                None
            } else {
                Some(self.text[..run.start].chars().next_back().unwrap_or('\n'))
            }
        } else {
            src[..caret].chars().next_back()
        };
        if before.is_none_or(char::is_whitespace) {
            self.out.block_ids.push(BlockIdItem {
                id: id.into(),
                start: run.start + caret,
                end: run.start + src.len(),
            });
        }
    }

    /// A table "row" that is only `^id`: the id line written right under a table.
    fn check_row_block_id(&mut self, row_start: usize, row_end: usize) {
        let row = &self.text[row_start..row_end];
        let trimmed = row.trim();
        if let Some(id) = trimmed.strip_prefix('^')
            && is_block_id(id)
        {
            let start = row_start + (row.len() - row.trim_start().len());
            self.out.block_ids.push(BlockIdItem {
                id: id.into(),
                start,
                end: start + trimmed.len(),
            });
        }
    }

    /// Pairs the `%%` markers into comments, drops what they hide, and writes the headings.
    fn finish(mut self) -> BodyItems {
        let comments = Comments::from_marks(&self.comment_marks, self.text.len());
        let text = self.text;
        let mut out = std::mem::take(&mut self.out);
        for &(start, end) in &comments.0 {
            out.hidden.push(HiddenKind::ObsidianComment, start, end);
        }
        out.tags.retain(|t| !comments.hides(t.start));
        out.block_ids.retain(|b| !comments.hides(b.start));
        out.links.retain(|l| !comments.hides(l.start));
        // A link inside another link's text ends before its parent: keep text order.
        out.links.sort_by_key(|l| l.start);
        for heading in self.pending_headings {
            if comments.hides(heading.start) {
                continue;
            }
            let mut plain = String::new();
            for (piece, start, end) in &heading.pieces {
                comments.append_visible(text, piece, *start, *end, &mut plain);
            }
            let src = &text[heading.start..heading.end];
            out.headings.push(HeadingItem {
                level: heading.level,
                text: plain.trim().into(),
                start: heading.start,
                end: heading.start + src.trim_end().len(),
            });
        }
        out
    }
}

/// Byte ranges hidden by Obsidian comments, sorted and disjoint.
struct Comments(Vec<(usize, usize)>);

impl Comments {
    /// Pairs markers in order; an unclosed `%%` hides everything after it.
    fn from_marks(marks: &[usize], text_len: usize) -> Self {
        let ranges = marks
            .chunks(2)
            .map(|pair| match pair {
                [open, close] => (*open, close + 2),
                [open] => (*open, text_len),
                _ => (0, 0),
            })
            .collect();
        Comments(ranges)
    }

    /// Does a comment hide the item starting at `offset`?
    fn hides(&self, offset: usize) -> bool {
        let i = self.0.partition_point(|&(start, _)| start <= offset);
        i > 0 && offset < self.0[i - 1].1
    }

    /// The comments that overlap `start..end`, in order (binary search, then a scan of
    /// only those).
    fn overlapping(&self, start: usize, end: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let first = self.0.partition_point(|&(_, e)| e <= start);
        self.0[first..]
            .iter()
            .copied()
            .take_while(move |&(s, _)| s < end)
    }

    /// Appends the visible part of a heading piece: the cooked text when no comment touches
    /// it, else its source text minus the comments.
    fn append_visible(&self, text: &str, piece: &str, start: usize, end: usize, out: &mut String) {
        if self.overlapping(start, end).next().is_none() {
            out.push_str(piece);
            return;
        }
        let mut at = start;
        for (s, e) in self.overlapping(start, end) {
            if s > at {
                out.push_str(&text[at..s]);
            }
            at = e.min(end).max(at);
        }
        if at < end {
            out.push_str(&text[at..end]);
        }
    }
}

/// Letters, digits and dashes, at least one.
fn is_block_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}
