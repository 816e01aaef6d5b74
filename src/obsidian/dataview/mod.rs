//! Dataview's data of one note, parsed without I/O: inline fields, typed values, list items
//! and tasks (with the Tasks plugin's emoji fields), as the Dataview plugin indexes them.
//! Nothing here is wired into a tool yet (issue 34, part 1). [`query`] parses and evaluates
//! DQL queries over any [`query::DvSource`] (part 2).
//!
//! [`parse_note`] is the entry point: it takes the note's text and returns a
//! [`DataviewNote`] (sections are heading texts; the caller, who knows the note's path, makes
//! links of them). It never panics, runs in time
//! linear in the note's size whatever the text (hostile lines of `[[[[`, `::::`, deeply
//! nested lists included), and keeps at most [`MAX_FIELDS`] fields and [`MAX_ITEMS`] list
//! items per note.
//!
//! ## Where the rules come from
//!
//! Dataview's documentation (`annotation/add-metadata.md`, `types-of-metadata.md`,
//! `metadata-tasks.md`, `reference/literals.md`) and, where it is silent, the behaviour its
//! tests pin (`parse.inline.test.ts`, `parse.file.test.ts`):
//!
//! - **Bracket fields** `[key:: value]` and `(key:: value)` anywhere in a line: the key runs
//!   from the bracket to the first `::` and may hold no bracket of either kind (so in
//!   `[[[[hello:: 16]]` the field starts at the last `[`); the value runs to the bracket that
//!   closes it, nested pairs of the same kind counted (`[key:: [value]]` has the value
//!   `[value]`) and a `\` escaping the next character. Several per line; a field that overlaps
//!   or directly touches the previous one (`[a:: 1][b:: 2]`) is dropped, as Dataview drops it.
//! - **Full-line fields** `Key:: value`, only when the line has no bracket field: leading
//!   characters that are not letters or digits are dropped from the key (`**Bold Field**`,
//!   `> Key`, `# Key`, a leading emoji), so are trailing `_`, `*`, `~` and backticks, and what
//!   remains must be letters, digits, `_`, `-`, `/`, spaces and emoji (else the line holds no
//!   field: `This is a sentence, key:: x` is text). A full-line field on a list item counts
//!   only when the item is not a task and has no other field.
//! - **Sanitised keys** ([`fields::canonical_key`]): emoji kept, letters and digits
//!   lower-cased, each run of white space one `-`, any other character (formatting, `/`, `.`)
//!   dropped: `Basic Field` → `basic-field`, `**Bold Field**` → `bold-field`.
//! - **Values** ([`value::parse_inline_value`]): blank is null; then the whole value must read
//!   as one atom, or atoms separated by commas (a list: `1, 2, 3`, `"yes", "or", "no"`, even
//!   `[[a]],`), else it is text (`yes, or, no`). Atoms, tried in this order: a date
//!   (`YYYY-MM`, then optionally `-DD`, `THH`, `:mm`, `:ss`, `.SSS`, and after the seconds a
//!   zone `Z`, `+06:30` or `[Zone/Name]`; `2021-04-18 18:00` is text), a duration (`7 hours`,
//!   `16days`, `6hr7min`, `9 years, 8 months`; units are case-sensitive), a quoted string, a
//!   `#tag` (text), a link `[[..]]` or embed `![[..]]` (display text after the first
//!   unescaped `|`), `true`/`false`/`True`/`False`, a number (`-?digits(.digits)?`), `null`.
//! - **Shorthand task fields**: Dataview finds `➕`, `🛫`, `⏳`/`⌛`, `📅`/`📆`/`🗓️` and `✅`
//!   followed by `YYYY-MM-DD` anywhere in a list item's text and names them `created`,
//!   `start`, `scheduled`, `due`, `completion`. The Tasks plugin's own reading (from the end
//!   of the line, with priorities, `❌` cancelled, `🔁` recurrence) is in [`tasks`].
//! - **Frontmatter** ([`value::from_frontmatter`]): strings that read whole as a date, a
//!   duration or a link become one (`"[[Page]]"`, `2021-08-17` quoted or not); numbers,
//!   booleans, lists and objects keep their type.
//! - **List items** as Obsidian's cache lists them (pulldown-cmark finds them here): the text
//!   after the marker and checkbox with continuation lines, lines 0-based as Dataview numbers
//!   them, `parent` the line of the enclosing item, `children` the lines of the direct
//!   sub-items, `section` the last heading above, tags and links on the item's lines.
//!   `completed` is `x` or `X`; `fullyCompleted` also needs every task below it completed.
//!   Items starting on one line (`- - [ ] x`): the last is kept, without a parent (Dataview
//!   keys items by line).
//!
//! ## Where we differ from Dataview, and why
//!
//! - Fields are not read inside code (fenced, indented, inline `` `[a:: b]` ``) or in the
//!   frontmatter: code is code. (Dataview 0.5 skips only list sections when it scans lines,
//!   so it does read `::` lines inside code blocks.) Headings, quotes, callouts and tables
//!   are read as Dataview reads them, line by line, and so are Obsidian comments (`%% %%`),
//!   as Dataview does: `%% [reviewed:: 2024-01-05] %%` is a field, and so is each `key::`
//!   line of a `%%` block (a `- [ ]` line there is no task, as Obsidian lists no item inside
//!   a comment, but its fields are the page's).
//! - Dates are checked strictly: `2021-02-30` or hour `25` is text (Dataview's Luxon rolls
//!   them over into the next month or day). Zone names are kept unchecked.
//! - Durations use Bases' duration type (months plus milliseconds): years count 12 months, a
//!   fraction of a month its average length.
//! - Tags and links of an item are the ones Obsidian's rules find (capvault's markdown
//!   parser), not Dataview's looser tag pattern (which counts `#123`).
//! - A field whose key is empty (`[:: x]`) is dropped; lines longer than
//!   [`MAX_LINE_BYTES`] are not scanned for fields (Dataview skips such paragraph lines too).
//! - Dataview's settings (`.obsidian/plugins/dataview/data.json`) are not read yet.

pub mod fields;
pub mod query;
pub mod tasks;
pub mod value;

#[cfg(test)]
mod tests;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::markdown::{Frontmatter, LinkKind};

pub use fields::{FieldSyntax, canonical_is, canonical_key};
pub use tasks::{Priority, TasksFields};
pub use value::{DvDate, Link, Subpath, Value, Zone};

/// At most this many inline fields are kept per note (the rest are counted in
/// [`DataviewNote::omitted`]), as the markdown parser keeps 20,000 of each kind.
pub const MAX_FIELDS: usize = 20_000;
/// At most this many list items are kept per note.
pub const MAX_ITEMS: usize = 20_000;
/// Lines (and list items' joined text) longer than this are not scanned for fields.
pub const MAX_LINE_BYTES: usize = 32_768;

/// One inline field.
#[derive(Debug, Clone, PartialEq)]
pub struct InlineField {
    /// 0-based line, as Dataview numbers lines.
    pub line: usize,
    /// The key as written (for a full-line field, without its formatting).
    pub key: String,
    /// The sanitised key ([`canonical_key`]).
    pub canonical: String,
    /// The value's text, trimmed.
    pub raw: String,
    /// The typed value.
    pub value: Value,
    /// How it was written.
    pub syntax: FieldSyntax,
}

/// A task's checkbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState {
    /// The character between the brackets (` `, `x`, `-`, `/`...).
    pub status: char,
    /// The status is not a space.
    pub checked: bool,
    /// The status is `x` or `X`.
    pub completed: bool,
    /// Completed, and so is every task below it.
    pub fully_completed: bool,
}

/// A list item or task.
#[derive(Debug, Clone, PartialEq)]
pub struct ListItem {
    /// 0-based first line.
    pub line: usize,
    /// Lines the item's own text takes (sub-items not included).
    pub line_count: usize,
    /// Text after the marker and checkbox, continuation lines trimmed and joined by `\n`.
    pub text: String,
    /// The heading the item is under (`None`: the file itself).
    pub section: Option<String>,
    /// Tags on the item's lines, with `#`.
    pub tags: Vec<String>,
    /// Links on the item's lines (wikilinks, embeds, Markdown links to notes).
    pub outlinks: Vec<Link>,
    /// Line of the enclosing list item.
    pub parent: Option<usize>,
    /// Lines of the direct sub-items, in order.
    pub children: Vec<usize>,
    /// The checkbox, for a task.
    pub task: Option<TaskState>,
    /// The `^block-id` on the item's lines.
    pub block_id: Option<String>,
    /// The item's inline fields, shorthand dates included.
    pub fields: Vec<InlineField>,
    /// What the Tasks plugin reads from the end of the first line (tasks only).
    pub tasks: Option<TasksFields>,
}

impl ListItem {
    /// The first value of the field whose sanitised key is `key` (`due`, `completion`,
    /// `created`, `start`, `scheduled`: the task dates Dataview reads from inline fields and
    /// emoji shorthands alike).
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|f| f.canonical == key)
            .map(|f| &f.value)
    }

    /// `due` (inline field or 📅).
    pub fn due(&self) -> Option<&Value> {
        self.field("due")
    }
    /// `completion` (inline field or ✅).
    pub fn completion(&self) -> Option<&Value> {
        self.field("completion")
    }
    /// `created` (inline field or ➕).
    pub fn created(&self) -> Option<&Value> {
        self.field("created")
    }
    /// `start` (inline field or 🛫).
    pub fn start(&self) -> Option<&Value> {
        self.field("start")
    }
    /// `scheduled` (inline field or ⏳).
    pub fn scheduled(&self) -> Option<&Value> {
        self.field("scheduled")
    }
}

/// Dataview's data of one note.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DataviewNote {
    /// Frontmatter properties, typed, in key order (none when the frontmatter is invalid).
    pub frontmatter: Vec<(String, Value)>,
    /// Inline fields outside list items, in text order.
    pub fields: Vec<InlineField>,
    /// List items and tasks, in text order.
    pub items: Vec<ListItem>,
    /// Fields and items left out past [`MAX_FIELDS`] and [`MAX_ITEMS`].
    pub omitted: usize,
}

impl DataviewNote {
    /// The page's fields as Dataview merges them: frontmatter, then the fields of list items
    /// that are not tasks, then inline fields outside lists (Dataview reads the lists first);
    /// a key given several times
    /// becomes a list of its values; each sanitised key that differs from every raw key is
    /// added with the values of all the raw keys it sanitises.
    pub fn page_fields(&self) -> Vec<(String, Value)> {
        let mut order: Vec<String> = Vec::new();
        let mut values: std::collections::HashMap<String, Vec<Value>> =
            std::collections::HashMap::new();
        let mut add = |key: &str, v: Value| {
            if !values.contains_key(key) {
                order.push(key.to_owned());
            }
            values.entry(key.to_owned()).or_default().push(v);
        };
        for (k, v) in &self.frontmatter {
            add(k, v.clone());
        }
        for item in self.items.iter().filter(|i| i.task.is_none()) {
            for f in &item.fields {
                add(&f.key, f.value.clone());
            }
        }
        for f in &self.fields {
            add(&f.key, f.value.clone());
        }
        let mut normalized_order: Vec<String> = Vec::new();
        let mut normalized: std::collections::HashMap<String, Vec<Value>> =
            std::collections::HashMap::new();
        for key in &order {
            let norm = canonical_key(key);
            if norm.is_empty() || values.contains_key(&norm) {
                continue;
            }
            if !normalized.contains_key(&norm) {
                normalized_order.push(norm.clone());
            }
            let vals = values.get(key).cloned().unwrap_or_default();
            normalized.entry(norm).or_default().extend(vals);
        }
        let squash = |mut v: Vec<Value>| {
            if v.len() == 1 {
                v.pop().unwrap_or(Value::Null)
            } else {
                Value::List(v)
            }
        };
        let mut out = Vec::with_capacity(order.len() + normalized_order.len());
        for key in order {
            let v = values.remove(&key).unwrap_or_default();
            out.push((key, squash(v)));
        }
        for key in normalized_order {
            let v = normalized.remove(&key).unwrap_or_default();
            out.push((key, squash(v)));
        }
        out
    }
}

/// Byte offsets of line starts, to turn offsets into 0-based lines.
struct Lines {
    starts: Vec<usize>,
    len: usize,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Lines {
            starts,
            len: text.len(),
        }
    }

    /// 0-based line of byte `offset`.
    fn line(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    fn count(&self) -> usize {
        self.starts.len()
    }

    /// The byte range of line `n` without its `\n` (and a `\r` before it).
    fn range(&self, text: &str, n: usize) -> (usize, usize) {
        let start = self.starts.get(n).copied().unwrap_or(self.len);
        let mut end = self
            .starts
            .get(n + 1)
            .map_or(self.len, |&s| s.saturating_sub(1));
        if end > start && text.as_bytes().get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        (start, end.max(start))
    }
}

/// A list item being read: its start, where its own text ends, its parent's index.
struct OpenItem {
    start: usize,
    own_end: Option<usize>,
    parent: Option<usize>,
    index: usize,
}

/// What the walk over the body finds.
#[derive(Default)]
struct Structure {
    /// Byte ranges to hide from the field scan: code and inline code (not inside comments).
    masks: Vec<(usize, usize)>,
    /// The comments (`%% %%`), in order.
    comments: Vec<(usize, usize)>,
    /// Ranges of outermost lists.
    lists: Vec<(usize, usize)>,
    /// Items: start, end of own text, parent index.
    items: Vec<(usize, usize, Option<usize>)>,
    omitted_items: usize,
}

/// One walk over the body with pulldown-cmark.
fn walk(text: &str, body_start: usize) -> Structure {
    let body = &text[body_start..];
    let mut out = Structure::default();
    let mut open: Vec<OpenItem> = Vec::new();
    let mut list_depth = 0usize;
    let mut list_start = 0usize;
    let mut code_start: Option<usize> = None;
    let mut comment_marks: Vec<usize> = Vec::new();
    for (event, range) in Parser::new_ext(body, crate::markdown::dialect()).into_offset_iter() {
        let (start, end) = (range.start + body_start, range.end + body_start);
        match event {
            Event::Start(Tag::CodeBlock(_)) => code_start = Some(start),
            Event::End(TagEnd::CodeBlock) => {
                if let Some(s) = code_start.take() {
                    out.masks.push((s, end));
                }
            }
            Event::Code(_) => out.masks.push((start, end)),
            Event::Text(_) if code_start.is_none() => {
                let src = &text.as_bytes()[start..end];
                let mut i = 0;
                while let Some(p) = memchr::memmem::find(&src[i..], b"%%") {
                    comment_marks.push(start + i + p);
                    i += p + 2;
                }
            }
            Event::Start(Tag::List(_)) => {
                if list_depth == 0 {
                    list_start = start;
                }
                list_depth += 1;
                if let Some(top) = open.last_mut()
                    && top.own_end.is_none()
                {
                    top.own_end = Some(start);
                }
            }
            Event::End(TagEnd::List(_)) => {
                list_depth = list_depth.saturating_sub(1);
                if list_depth == 0 {
                    out.lists.push((list_start, end));
                }
            }
            Event::Start(Tag::Item) => {
                let parent = open.last().map(|o| o.index);
                let index = out.items.len();
                if index < MAX_ITEMS {
                    out.items.push((start, end, parent));
                } else {
                    out.omitted_items += 1;
                }
                open.push(OpenItem {
                    start,
                    own_end: None,
                    parent,
                    index,
                });
            }
            Event::End(TagEnd::Item) => {
                if let Some(item) = open.pop()
                    && let Some(slot) = out.items.get_mut(item.index)
                {
                    *slot = (item.start, item.own_end.unwrap_or(end), item.parent);
                }
            }
            _ => {}
        }
    }
    // `%%` pairs hide what is between them; an unclosed one hides the rest of the note.
    for pair in comment_marks.chunks(2) {
        match pair {
            [a, b] => out.comments.push((*a, b + 2)),
            [a] => out.comments.push((*a, text.len())),
            _ => {}
        }
    }
    if COMMENT_FIELDS.load(std::sync::atomic::Ordering::Relaxed) {
        // A comment is not code, nor anything else, to Obsidian: what pulldown-cmark reads as
        // code inside one (an indented line after a blank one) is read as the comment's text.
        let comments = &out.comments;
        out.masks.retain(|&(s, _)| !inside(comments, s));
    } else {
        // Hidden text kept from the model: a comment's fields are not read.
        out.masks.extend(out.comments.iter().copied());
    }
    out
}

/// Whether fields inside `%%` comments are read, as Dataview reads them (the default).
static COMMENT_FIELDS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Reads fields inside `%%` comments (Dataview's behaviour) or not: a server that marks or
/// strips hidden text (`--hidden-text`) turns them off, so that a comment's text cannot reach
/// a client through a query's values. One setting for the process, made when an engine opens.
pub fn read_comment_fields(on: bool) {
    COMMENT_FIELDS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The text of `text` with each masked range blanked (newlines kept), same byte length.
fn masked(text: &str, masks: &[(usize, usize)], body_start: usize) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let blank = |bytes: &mut Vec<u8>, s: usize, e: usize| {
        for b in &mut bytes[s.min(e)..e.min(text.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    blank(&mut bytes, 0, body_start);
    for &(s, e) in masks {
        blank(&mut bytes, s, e);
    }
    // Masked ranges start and end on character boundaries, so this is UTF-8; should it not
    // be, nothing is masked rather than anything lost.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// The range of `v` (sorted by line) whose lines are in `first..=last`.
fn span<T>(v: &[(usize, T)], first: usize, last: usize) -> (usize, usize) {
    let start = v.partition_point(|(l, _)| *l < first);
    (start, v.partition_point(|(l, _)| *l <= last).max(start))
}

/// Whether `offset` is inside one of the sorted, disjoint `ranges`.
fn inside(ranges: &[(usize, usize)], offset: usize) -> bool {
    let i = ranges.partition_point(|&(s, _)| s <= offset);
    i > 0 && offset < ranges[i - 1].1
}

/// Dataview's list-item pattern on a first line: leading spaces and `>`, the marker, an
/// optional `[c]`; the byte where the text starts, and the checkbox character of a task
/// (`[c]` followed by white space or the end of the line, as Obsidian requires).
fn item_head(line: &str) -> Option<(usize, Option<char>)> {
    let b = line.as_bytes();
    let mut i = b
        .iter()
        .take_while(|c| c.is_ascii_whitespace() || **c == b'>')
        .count();
    let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && matches!(b.get(i + digits), Some(b'.' | b')')) {
        i += digits + 1;
    } else if matches!(b.get(i), Some(b'*' | b'-' | b'+')) {
        i += 1;
    } else {
        return None;
    }
    let after_marker = i;
    i += line[i..].len() - line[i..].trim_start_matches(value::is_js_space).len();
    let mut status = None;
    if line[i..].starts_with('[') {
        let mut chars = line[i + 1..].char_indices();
        match (chars.next(), chars.next()) {
            (Some((_, c)), Some((j, ']'))) if c != '\n' => {
                let end = i + 1 + j + 1;
                let after = line[end..].chars().next();
                if i > after_marker && after.is_none_or(value::is_js_space) {
                    status = Some(c);
                }
                i = end;
            }
            (Some((0, ']')), _) => i += 2,
            _ => {}
        }
        i += line[i..].len() - line[i..].trim_start_matches(value::is_js_space).len();
    }
    Some((i, status))
}

/// Lines of text, trimmed by the original's white space, joined: the joined original, the
/// joined masked text (same byte layout), and where each line starts in them.
struct Joined {
    text: String,
    masked: String,
    starts: Vec<(usize, usize)>,
}

impl Joined {
    fn line_of(&self, offset: usize) -> usize {
        let i = self.starts.partition_point(|&(s, _)| s <= offset);
        self.starts.get(i.saturating_sub(1)).map_or(0, |&(_, l)| l)
    }
}

/// Turns raw fields of a (joined) line into typed fields.
fn typed_fields(
    raw: Vec<fields::RawField>,
    original: &str,
    line_of: &dyn Fn(usize) -> usize,
) -> Vec<InlineField> {
    raw.into_iter()
        .map(|f| {
            let raw_value = original.get(f.value.0..f.value.1).unwrap_or_default();
            // The key as the note writes it (the scan saw code blanked out).
            let key = match f.syntax {
                FieldSyntax::Bracket | FieldSyntax::Paren => original
                    .get(f.key_span.0..f.key_span.1)
                    .map_or(f.key, str::to_owned),
                FieldSyntax::FullLine | FieldSyntax::Emoji => f.key,
            };
            InlineField {
                line: line_of(f.start),
                canonical: canonical_key(&key),
                key,
                raw: raw_value.to_owned(),
                value: value::parse_inline_value(raw_value),
                syntax: f.syntax,
            }
        })
        .collect()
}

/// Dataview's data of one note's text.
pub fn parse_note(text: &str) -> DataviewNote {
    parse_note_with(text, &crate::markdown::parse_note(text))
}

/// A link of the note as Dataview holds it (an item's `outlinks`).
pub fn link_of(l: &crate::markdown::Link) -> Link {
    let subpath = l.subpath().map(|s| match s {
        crate::markdown::Subpath::Heading(h) => {
            Subpath::Heading(h.first().map(|x| x.to_string()).unwrap_or_default())
        }
        crate::markdown::Subpath::Block(b) => Subpath::Block(b.to_string()),
    });
    Link {
        path: l.target().to_owned(),
        subpath,
        display: l.display().map(str::to_owned),
        embed: l.kind == LinkKind::Embed,
    }
}

/// [`parse_note`] for a caller that already holds the note's [`crate::markdown::ParsedNote`]
/// (the vault model does): its frontmatter, headings, tags, links and block ids are reused (a
/// parse cut by [`crate::markdown::ParsedNote::keep_at_most`] gives items only what it kept).
pub fn parse_note_with(text: &str, parsed: &crate::markdown::ParsedNote) -> DataviewNote {
    let lines = Lines::new(text);
    let mut note = DataviewNote::default();
    let body_line = match &parsed.frontmatter {
        Frontmatter::Valid { value, end_line } => {
            note.frontmatter = value
                .iter()
                .map(|(k, v)| (k.to_owned(), value::from_frontmatter(v)))
                .collect();
            *end_line
        }
        Frontmatter::Invalid { end_line, .. } => *end_line,
        Frontmatter::None => 0,
    };
    let body_start = lines.starts.get(body_line).copied().unwrap_or(text.len());
    let structure = walk(text, body_start);
    note.omitted += structure.omitted_items;
    let mut masks = structure.masks.clone();
    masks.sort_unstable();
    let masked = masked(text, &masks, body_start);

    // Lines that lists cover are read item by item, never as paragraph lines; but a line that
    // starts inside a comment is the comment's (Obsidian lists no item there), read as a
    // paragraph line, as Dataview reads the lines of a comment section.
    let mut in_list = vec![false; lines.count()];
    for &(s, e) in &structure.lists {
        let (first, last) = (lines.line(s), lines.line(e.saturating_sub(1).max(s)));
        for (n, flag) in in_list.iter_mut().enumerate().take(last + 1).skip(first) {
            *flag = lines
                .starts
                .get(n)
                .is_none_or(|&at| !inside(&structure.comments, at));
        }
    }

    let mut field_budget = MAX_FIELDS;
    let mut take_fields = |found: Vec<InlineField>, omitted: &mut usize| -> Vec<InlineField> {
        let keep = found.len().min(field_budget);
        field_budget -= keep;
        *omitted += found.len() - keep;
        found.into_iter().take(keep).collect()
    };

    // Items.
    let headings: Vec<(usize, &str)> = parsed
        .headings
        .iter()
        .map(|h| ((h.pos.line as usize).saturating_sub(1), &*h.text))
        .collect();
    let tags: Vec<(usize, String)> = parsed
        .tags
        .iter()
        .filter(|t| t.source == crate::markdown::TagSource::Inline)
        .map(|t| {
            (
                (t.pos.line as usize).saturating_sub(1),
                format!("#{}", t.name),
            )
        })
        .collect();
    let links: Vec<(usize, Link)> = parsed
        .links
        .iter()
        .filter(|l| l.kind != LinkKind::Frontmatter)
        .map(|l| ((l.pos.line as usize).saturating_sub(1), link_of(l)))
        .collect();
    let block_ids: Vec<(usize, &str)> = parsed
        .block_ids
        .iter()
        .map(|b| ((b.pos.line as usize).saturating_sub(1), &*b.id))
        .collect();

    let mut index_of_line: Vec<Option<usize>> = Vec::with_capacity(structure.items.len());
    for (k, &(start, own_end, parent)) in structure.items.iter().enumerate() {
        // Dataview keys items by line: of items starting on one line (`- - [ ] x`), the last
        // is kept, and it has no parent.
        let next_same_line = structure
            .items
            .get(k + 1)
            .is_some_and(|&(next, _, _)| lines.line(next) == lines.line(start));
        if next_same_line || inside(&structure.comments, start) {
            index_of_line.push(None);
            continue;
        }
        let first = lines.line(start);
        let own_text_end = {
            let s = text.get(start..own_end.max(start)).unwrap_or_default();
            start + s.trim_end().len()
        };
        let last = lines
            .line(own_text_end.saturating_sub(1).max(start))
            .max(first);
        let (l0s, l0e) = lines.range(text, first);
        // The text as Dataview's pattern reads the line (from its first marker); the checkbox
        // as Obsidian reads the item (from its own marker: `- - [ ] x` is a task).
        let Some((text_at, _)) = item_head(&text[l0s..l0e]) else {
            index_of_line.push(None);
            continue;
        };
        let status = text
            .get(start.clamp(l0s, l0e)..l0e)
            .and_then(item_head)
            .and_then(|(_, status)| status);
        // The joined text: the first line from `text_at`, then the other lines trimmed.
        let mut joined = Joined {
            text: String::new(),
            masked: String::new(),
            starts: Vec::new(),
        };
        let mut with_newlines = String::new();
        for n in first..=last {
            let (s, e) = lines.range(text, n);
            let s = if n == first { l0s + text_at } else { s };
            let part = &text[s.min(e)..e];
            let lead = part.len() - part.trim_start_matches(value::is_js_space).len();
            let t = part.trim_matches(value::is_js_space);
            let (ts, te) = (s + lead, s + lead + t.len());
            if n > first {
                joined.text.push(' ');
                joined.masked.push(' ');
                with_newlines.push('\n');
            }
            joined.starts.push((joined.text.len(), n));
            joined.text.push_str(t);
            joined.masked.push_str(masked.get(ts..te).unwrap_or(t));
            with_newlines.push_str(t);
        }
        let task = status.map(|c| TaskState {
            status: c,
            checked: c != ' ',
            completed: c == 'x' || c == 'X',
            fully_completed: c == 'x' || c == 'X',
        });
        let mut item_fields = Vec::new();
        if joined.masked.len() <= MAX_LINE_BYTES {
            let raw = fields::extract_inline_fields(&joined.masked, true);
            let line_of = |o: usize| joined.line_of(o);
            let mut found = typed_fields(raw, &joined.text, &line_of);
            if task.is_none()
                && found.is_empty()
                && let Some(f) = fields::extract_full_line_field(&joined.masked)
            {
                found = typed_fields(vec![f], &joined.text, &line_of);
            }
            item_fields = take_fields(found, &mut note.omitted);
        }
        let (ts, te) = span(&tags, first, last);
        let (ls, le) = span(&links, first, last);
        let (bs, be) = span(&block_ids, first, last);
        let section = headings
            .get(
                headings
                    .partition_point(|(l, _)| *l <= first)
                    .wrapping_sub(1),
            )
            .map(|(_, h)| (*h).to_owned());
        let tasks_fields = task.map(|_| {
            let first_text = joined
                .starts
                .get(1)
                .map_or(joined.text.as_str(), |&(s, _)| {
                    joined.text.get(..s.saturating_sub(1)).unwrap_or_default()
                });
            tasks::parse_tasks_fields(first_text)
        });
        index_of_line.push(Some(note.items.len()));
        note.items.push(ListItem {
            line: first,
            line_count: last - first + 1,
            text: with_newlines,
            section,
            tags: tags[ts..te].iter().map(|(_, t)| t.clone()).collect(),
            outlinks: links[ls..le].iter().map(|(_, l)| l.clone()).collect(),
            parent: parent.and_then(|p| index_of_line.get(p).copied().flatten()),
            children: Vec::new(),
            task,
            block_id: block_ids[bs..be].last().map(|(_, b)| (*b).to_owned()),
            fields: item_fields,
            tasks: tasks_fields,
        });
    }
    // Parents were indexes into the items kept; now lines, with children and fullyCompleted.
    // Children come after their parent, so one backward pass sees every child first:
    // `below_done[i]` is whether every task below item i is completed.
    let parents: Vec<Option<usize>> = note.items.iter().map(|i| i.parent).collect();
    let mut below_done = vec![true; note.items.len()];
    for i in (0..note.items.len()).rev() {
        if let Some(t) = note.items[i].task.as_mut() {
            t.fully_completed = t.completed && below_done[i];
        }
        let Some(p) = parents[i] else { continue };
        let done = below_done[i] && note.items[i].task.is_none_or(|t| t.completed);
        let child_line = note.items[i].line;
        if let Some(parent) = note.items.get_mut(p) {
            parent.children.push(child_line);
            below_done[p] &= done;
        }
    }
    let lines_of: Vec<usize> = note.items.iter().map(|i| i.line).collect();
    for item in &mut note.items {
        item.children.reverse();
        item.parent = item.parent.and_then(|p| lines_of.get(p).copied());
    }

    // Paragraph lines.
    for n in body_line..lines.count() {
        if in_list.get(n).copied().unwrap_or(false) {
            continue;
        }
        let (s, e) = lines.range(text, n);
        let m = &masked[s..e];
        if m.len() > MAX_LINE_BYTES || memchr::memmem::find(m.as_bytes(), b"::").is_none() {
            continue;
        }
        let orig = &text[s..e];
        let lead = orig.len() - orig.trim_start_matches(value::is_js_space).len();
        let t = orig.trim_matches(value::is_js_space);
        let (ts, te) = (lead, lead + t.len());
        let m = &m[ts..te];
        let raw = fields::extract_inline_fields(m, false);
        let line_of = |_: usize| n;
        let found = if raw.is_empty() {
            fields::extract_full_line_field(m)
                .map(|f| typed_fields(vec![f], t, &line_of))
                .unwrap_or_default()
        } else {
            typed_fields(raw, t, &line_of)
        };
        let kept = take_fields(found, &mut note.omitted);
        note.fields.extend(kept);
    }
    note
}
