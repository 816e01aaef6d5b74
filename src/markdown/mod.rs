//! Pure parsing of one note's Markdown (no I/O): frontmatter, aliases, tags, headings, block ids
//! and links, with positions, as Obsidian's metadata cache reads them.
//!
//! [`parse_note`] is the entry point. It never panics, never loops without end and uses memory
//! bounded by the size of the note, whatever the input (the frontmatter reader has hard limits
//! against alias bombs and deep nesting; see the `frontmatter` submodule).
//!
//! ## Layout
//!
//! - `frontmatter`: finds the `---` block at the top and reads its YAML (saphyr-parser events)
//!   into JSON with limits.
//! - `body`: one walk over pulldown-cmark's events; code, math and HTML are skipped as whole
//!   events, text runs are scanned for tags, block ids and `%%` comment markers.
//! - `links`: taking one link apart (`target#H1#H2|alias`, `^block`, sizes, `page=`), percent
//!   decoding, [`is_external_url`].
//! - `tags`: tag characters and boundaries, [`normalize_tag`], [`tag_matches`], [`nfc`].
//! - `pos`: byte offsets to 1-based line and character column.
//!
//! ## Decisions where Obsidian's rules are not written down
//!
//! Each is pinned by a test named after it.
//! - Inline tags: `#` must follow line start, whitespace (any Unicode whitespace), `_` or `*`,
//!   or end another tag (`#a#b` is two tags), per readbacks of Obsidian's cache. Tags in
//!   Markdown link text count (`[text #tag](url)`); text inside wikilinks (`[[Note|#x]]`) and
//!   image alt text does not. Only ASCII digits count as digits for the "not all digits" rule.
//! - Block ids: ` ^id` ending the last line of a paragraph or list item, or a line `^id` alone
//!   (its own paragraph, a lazy continuation line, or a line right under a table); not in
//!   headings, not in table cells.
//! - Wikilinks never span lines; `\|` in a wikilink (tables) is the alias pipe. Page numbers
//!   (`#page=3`) are read for targets ending in `.pdf`.
//! - Frontmatter: closed by `---` or `...`; duplicate keys make it invalid (js-yaml does the
//!   same); invalid frontmatter is still not part of the body.

mod body;
pub mod edit;
mod frontmatter;
pub mod hidden;
mod links;
mod pos;
pub mod properties;
pub mod tag_edit;
mod tags;
pub mod yaml_edit;

#[cfg(test)]
mod tests;

use schemars::JsonSchema;
use serde::Serialize;

pub(crate) use body::options as dialect;
pub use links::is_external_url;
pub(crate) use links::{find_wikilinks, parse_wikilink_inner};
pub use tags::{nfc, normalize_tag, tag_matches, tag_matches_normalized};

use frontmatter::{Document, SourceScalar};
use pos::LineIndex;

/// Everything Obsidian's metadata cache extracts from one note.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ParsedNote {
    /// The YAML properties block at the top of the note, if any.
    pub frontmatter: Frontmatter,
    /// Other names of the note, from the `aliases` property (or legacy `alias`), in order and
    /// without duplicates; what a search or link resolver may match besides the file name.
    pub aliases: Vec<String>,
    /// Every tag occurrence: frontmatter `tags` (or legacy `tag`) first, then inline `#tags`
    /// in text order.
    pub tags: Vec<Tag>,
    /// ATX and setext headings in text order; the outline of the note.
    pub headings: Vec<Heading>,
    /// Block identifiers (`^id`) that `[[Note#^id]]` links can point at.
    pub block_ids: Vec<BlockId>,
    /// Every vault link: frontmatter links first, then body links in text order. External URLs
    /// are not included.
    pub links: Vec<Link>,
    /// How many ```` ```base ```` code blocks the body has (Obsidian Bases queries; see
    /// [`base_blocks`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub base_blocks: u16,
    /// Tags, headings, block ids and links left out by [`ParsedNote::keep_at_most`].
    #[serde(skip)]
    #[schemars(skip)]
    pub omitted: u32,
    /// What a reader of the rendered note does not see ([`hidden`]); `None` when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Box<hidden::Hidden>>,
}

impl ParsedNote {
    /// Keeps the first `max` of each of the tags, headings, block ids and links, counting the
    /// rest in [`ParsedNote::omitted`]; true when something was left out. What the vault model
    /// keeps of a note is bounded this way whatever the note holds.
    pub fn keep_at_most(&mut self, max: usize) -> bool {
        fn cut<T>(v: &mut Vec<T>, max: usize) -> usize {
            let over = v.len().saturating_sub(max);
            if over > 0 {
                v.truncate(max);
                v.shrink_to_fit();
            }
            over
        }
        let over = cut(&mut self.tags, max)
            + cut(&mut self.headings, max)
            + cut(&mut self.block_ids, max)
            + cut(&mut self.links, max);
        self.omitted = self
            .omitted
            .saturating_add(u32::try_from(over).unwrap_or(u32::MAX));
        over > 0
    }

    /// The note's distinct tags: each normalised form ([`normalize_tag`]) once, with the name
    /// its first occurrence writes, in order of first occurrence. Linear in the number of
    /// occurrences (a note may repeat one tag 100,000 times).
    pub fn distinct_tags(&self) -> Vec<(String, &str)> {
        let mut names: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut norms: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut out = Vec::new();
        for t in &self.tags {
            // The same name normalises the same: only a new spelling is normalised.
            if !names.insert(&t.name) {
                continue;
            }
            let norm = normalize_tag(&t.name);
            if norms.insert(norm.clone()) {
                out.push((norm, &*t.name));
            }
        }
        out
    }
}

/// The frontmatter of a note.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Frontmatter {
    /// The note does not start with a closed `---` block.
    None,
    /// The YAML was read.
    Valid {
        /// The properties (serialised as a JSON object; empty for an empty block).
        value: Properties,
        /// 1-based line of the closing `---`, so that an edit can leave the block alone.
        end_line: usize,
    },
    /// The block is there but its YAML could not be read (Obsidian shows "invalid properties").
    /// The body after it is still parsed.
    Invalid {
        /// `invalid frontmatter: <reason> (line N)`, N a line of the note.
        error: String,
        /// 1-based line of the closing `---`.
        end_line: usize,
    },
}

impl Frontmatter {
    /// The properties, when the block was read.
    pub fn properties(&self) -> Option<&Properties> {
        match self {
            Frontmatter::Valid { value, .. } => Some(value),
            _ => None,
        }
    }
}

/// The properties of a note: its frontmatter's keys, in order, with their values.
///
/// The model holds one per note, so the keys are not a `serde_json::Map`, whose smallest tree
/// node takes 640 bytes however few keys it holds (about 960 bytes per note in all for two
/// properties; 37 MB of the model at 100,000 notes). Nor is each key a string of its own: a
/// query reading a field of half of a 100,000-note vault spent most of its time on the cache
/// misses of a binary search through scattered keys. The keys are in one allocation, their
/// ends first, so a lookup reads one or two cache lines and touches the values only to return
/// one. Values are plain JSON values; [`Properties::to_value`] gives the whole object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Properties {
    /// Each key's end (a little-endian `u32`, counted from the first key's start), then every
    /// key, concatenated in byte order. Keys hold at most the note's bytes (1 GiB at most), so
    /// their ends fit.
    index: Box<[u8]>,
    /// The values, in the keys' order.
    values: Box<[serde_json::Value]>,
}

impl Properties {
    /// The bytes of the key of entry `i`.
    fn key_bytes(&self, i: usize) -> &[u8] {
        let end_of = |i: usize| -> usize {
            self.index
                .get(4 * i..4 * i + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, |b| u32::from_le_bytes(b) as usize)
        };
        let start = i.checked_sub(1).map_or(0, end_of);
        let keys = 4 * self.values.len();
        self.index
            .get(keys + start..keys + end_of(i))
            .unwrap_or_default()
    }

    /// The key of entry `i`.
    fn key(&self, i: usize) -> &str {
        std::str::from_utf8(self.key_bytes(i)).unwrap_or_default()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        // Byte order is `str` order.
        let (mut lo, mut hi) = (0, self.values.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key_bytes(mid).cmp(key.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.values.get(mid),
            }
        }
        None
    }

    /// Every key with its value, keys in (byte) order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| (self.key(i), v))
    }

    /// The keys, concatenated.
    fn keys(&self) -> &[u8] {
        self.index.get(4 * self.values.len()..).unwrap_or_default()
    }

    /// Whether every key is plain: ASCII lower-case letters, digits, `_` and `-` only (a plain
    /// key is its own sanitised form wherever a plugin lower-cases and dashes keys).
    pub fn keys_are_plain(&self) -> bool {
        self.keys()
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    }

    /// Number of properties.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The properties as one JSON object.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.iter()
                .map(|(k, v)| (k.to_owned(), v.clone()))
                .collect(),
        )
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Properties {
    fn from(map: serde_json::Map<String, serde_json::Value>) -> Self {
        // A map iterates in the order its keys were written (serde_json's `preserve_order`):
        // sorted here, as `get` expects.
        let mut sorted: Vec<(String, serde_json::Value)> = map.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let key_bytes: usize = sorted.iter().map(|(k, _)| k.len()).sum();
        let mut index = Vec::with_capacity(4 * sorted.len() + key_bytes);
        let mut end = 0usize;
        for (k, _) in &sorted {
            end += k.len();
            // At most the note's length, which is under 4 GiB (see the field).
            index.extend_from_slice(&u32::try_from(end).unwrap_or(u32::MAX).to_le_bytes());
        }
        for (k, _) in &sorted {
            index.extend_from_slice(k.as_bytes());
        }
        Properties {
            index: index.into_boxed_slice(),
            values: sorted.into_iter().map(|(_, v)| v).collect(),
        }
    }
}

impl TryFrom<serde_json::Value> for Properties {
    type Error = serde_json::Value;

    /// The properties of a JSON object; any other value is handed back.
    fn try_from(value: serde_json::Value) -> Result<Self, Self::Error> {
        match value {
            serde_json::Value::Object(map) => Ok(map.into()),
            other => Err(other),
        }
    }
}

/// Equal to a JSON object with the same keys and values.
impl PartialEq<serde_json::Value> for Properties {
    fn eq(&self, other: &serde_json::Value) -> bool {
        other
            .as_object()
            .is_some_and(|o| o.len() == self.len() && self.iter().all(|(k, v)| o.get(k) == Some(v)))
    }
}

impl Serialize for Properties {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl JsonSchema for Properties {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Properties".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <serde_json::Map<String, serde_json::Value>>::json_schema(generator)
    }
}

/// Where a tag was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TagSource {
    /// In the `tags` property.
    Frontmatter,
    /// As `#tag` in the body.
    Inline,
}

/// One occurrence of a tag.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Tag {
    /// The name without `#`, with its original casing (`Project/Alpha`); compare with
    /// [`tag_matches`] or [`normalize_tag`]. Shared: the model keeps one copy of each name
    /// however many notes carry it.
    pub name: std::sync::Arc<str>,
    /// Property or inline.
    pub source: TagSource,
    /// Where it is: the `#name` text (or the name in the frontmatter).
    pub pos: Pos,
}

/// A heading of the note.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Heading {
    /// 1 to 6.
    pub level: u8,
    /// The heading as plain text, as the outline shows it (inline markup stripped, link text
    /// kept); what `[[Note#Heading]]` links name.
    pub text: Box<str>,
    /// The heading's lines (a setext heading includes its underline).
    pub pos: Pos,
}

/// A block identifier.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct BlockId {
    /// The id without `^`.
    pub id: Box<str>,
    /// The `^id` text.
    pub pos: Pos,
}

/// How a link is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// `[[Note]]`.
    Wikilink,
    /// `![[file]]` or `![alt](file)`: the target's content is shown in place.
    Embed,
    /// `[text](Note.md)`.
    Markdown,
    /// `"[[Note]]"` inside a property value.
    Frontmatter,
}

/// What follows `#` in a link target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Subpath {
    /// `#H1#H2`: a heading path, outermost first.
    Heading(Box<[Box<str>]>),
    /// `#^id`: a block id, without `^`.
    Block(Box<str>),
}

/// A link to something in the vault.
///
/// Serialised (and described by its JSON schema) as `kind, raw, target, subpath, display, size,
/// page, pos`.
///
/// The model keeps every link of the vault (1.2 million at 100,000 notes), so a link is 56 bytes
/// plus its `raw` text: the target is a range of `raw` when it is written there (almost always),
/// and the parts most links lack (a subpath, a display text, an embed size, a page, a target not
/// found in `raw`) live in one optional box.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// How the link is written.
    pub kind: LinkKind,
    /// The exact source text, e.g. `![[img.png|100]]`; rewriting a link replaces this text.
    pub raw: Box<str>,
    /// Where `raw` is.
    pub pos: Pos,
    /// `raw[start..end]` is the target, unless `rare.target` holds it.
    target: (u32, u32),
    /// The parts most links do not have.
    rare: Option<Box<RareParts>>,
}

/// What a [`Link`] keeps apart because few links have it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct RareParts {
    /// The target when it is not written as it is in `raw` (a percent-decoded Markdown target,
    /// a folded property value).
    target: Option<Box<str>>,
    subpath: Option<Subpath>,
    display: Option<Box<str>>,
    size: Option<(u32, Option<u32>)>,
    page: Option<u32>,
}

impl Link {
    /// The path part (`Folder/Note`, `Note.md`, `img.png`); `""` for a link into the same
    /// note. Markdown targets are percent-decoded.
    pub fn target(&self) -> &str {
        if let Some(owned) = self.rare.as_ref().and_then(|r| r.target.as_deref()) {
            return owned;
        }
        let (start, end) = self.target;
        self.raw
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// A heading path or block id after `#`.
    pub fn subpath(&self) -> Option<&Subpath> {
        self.rare.as_ref()?.subpath.as_ref()
    }

    /// Text after `|`, or a Markdown link's text; `None` for embeds whose `|` holds a size.
    pub fn display(&self) -> Option<&str> {
        self.rare.as_ref()?.display.as_deref()
    }

    /// Embed size: `|640x480` → `(640, Some(480))`, `|100` → `(100, None)`.
    pub fn size(&self) -> Option<(u32, Option<u32>)> {
        self.rare.as_ref()?.size
    }

    /// `#page=3` on a link to a PDF.
    pub fn page(&self) -> Option<u32> {
        self.rare.as_ref()?.page
    }

    /// A link from its parts, `target` stored as a range of `raw` when it appears there.
    fn new(kind: LinkKind, raw: &str, parts: links::LinkParts, pos: Pos) -> Link {
        let in_raw = find_in(raw, &parts.target).and_then(|start| {
            let end = u32::try_from(start + parts.target.len()).ok()?;
            Some((u32::try_from(start).ok()?, end))
        });
        let mut rare = RareParts {
            target: None,
            subpath: parts.subpath,
            display: parts.display,
            size: parts.size,
            page: parts.page,
        };
        let target = match in_raw {
            Some(range) => range,
            None => {
                rare.target = Some(parts.target);
                (0, 0)
            }
        };
        Link {
            kind,
            raw: raw.into(),
            pos,
            target,
            rare: (rare != RareParts::default()).then(|| Box::new(rare)),
        }
    }
}

/// Where `needle` first occurs in `raw`. The target usually starts at the first occurrence of its
/// first byte (`[[Note]]`), so a few such candidates are tried before a full substring search.
fn find_in(raw: &str, needle: &str) -> Option<usize> {
    let (raw, needle) = (raw.as_bytes(), needle.as_bytes());
    let Some(&first) = needle.first() else {
        return Some(0);
    };
    for at in memchr::memchr_iter(first, raw).take(4) {
        if raw.get(at..at + needle.len()) == Some(needle) {
            return Some(at);
        }
    }
    memchr::memmem::find(raw, needle)
}

/// The serialised form of a [`Link`].
#[derive(Serialize, JsonSchema)]
#[serde(rename = "Link")]
#[schemars(rename = "Link", description = "A link to something in the vault.")]
struct LinkShape<'a> {
    /// How the link is written.
    kind: LinkKind,
    /// The exact source text, e.g. `![[img.png|100]]`; rewriting a link replaces this text.
    raw: &'a str,
    /// The path part (`Folder/Note`, `Note.md`, `img.png`); `""` for a link into the same
    /// note. Markdown targets are percent-decoded.
    target: &'a str,
    /// A heading path or block id after `#`.
    subpath: Option<&'a Subpath>,
    /// Text after `|`, or a Markdown link's text; `None` for embeds whose `|` holds a size.
    display: Option<&'a str>,
    /// Embed size: `|640x480` → `(640, Some(480))`, `|100` → `(100, None)`.
    size: Option<(u32, Option<u32>)>,
    /// `#page=3` on a link to a PDF.
    page: Option<u32>,
    /// Where `raw` is.
    pos: Pos,
}

impl Serialize for Link {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        LinkShape {
            kind: self.kind,
            raw: &self.raw,
            target: self.target(),
            subpath: self.subpath(),
            display: self.display(),
            size: self.size(),
            page: self.page(),
            pos: self.pos,
        }
        .serialize(serializer)
    }
}

impl JsonSchema for Link {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        LinkShape::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        LinkShape::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        LinkShape::json_schema(generator)
    }
}

/// A position in the note text.
///
/// The fields are `u32` (the model keeps one per link, tag, heading and block id): a note the
/// vault can read is far smaller than 4 GiB (see [`MAX_POSITION`]). In a longer text, values past
/// [`MAX_POSITION`] saturate at it rather than wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(description = "A position in the note text.")]
pub struct Pos {
    /// 1-based line.
    #[schemars(with = "usize")]
    pub line: u32,
    /// 1-based column, in characters (not bytes).
    #[schemars(with = "usize")]
    pub column: u32,
    /// Byte offset of the start in the note text.
    #[schemars(with = "usize")]
    pub start: u32,
    /// Byte offset just past the end.
    #[schemars(with = "usize")]
    pub end: u32,
}

/// The largest line, column or offset a [`Pos`] holds. The vault reads no file larger than
/// [`crate::vault::MAX_READ_BYTES_LIMIT`] (1 GiB), and decoding it as UTF-8 (invalid bytes
/// replaced) at most triples it, so positions in a note read from the vault always fit.
pub const MAX_POSITION: u32 = u32::MAX;

impl Pos {
    /// The byte range `start..end`, to slice the note text with.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// What a reader of the rendered `text` (a whole note) does not see, sorted by start.
pub fn hidden_spans(text: &str) -> hidden::Spans {
    let body_start = frontmatter::find_block(text).map_or(0, |b| b.body_start);
    let mut spans = body::scan(text, body_start).hidden;
    hidden::scan_chars(text, &mut spans);
    spans.finish();
    spans
}

/// What the strings of a reply built from notes' text (query rows, task descriptions, property
/// values) hide from a reader, counted by kind into `counts`; under `mark` and `strip` each such
/// string is rewritten as `policy` says. Strings under the keys in `skip` (paths, versions) are
/// left alone. Each string is scanned as the Markdown it came from; one with nothing that can
/// hide text (no `<`, `%`, `[`, non-ASCII or blank line) is passed over, so the work is linear
/// in the reply's size and near nothing for plain text.
pub fn hidden_in_json(
    value: &mut serde_json::Value,
    policy: hidden::Policy,
    skip: &[&str],
    counts: &mut std::collections::BTreeMap<hidden::HiddenKind, usize>,
) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            let suspect = s
                .bytes()
                .any(|b| b >= 0x80 || matches!(b, b'<' | b'%' | b'['))
                || s.contains("\n\n");
            if !suspect {
                return;
            }
            let spans = hidden_spans(s);
            let Some(found) = hidden::Hidden::of(s, &spans) else {
                return;
            };
            for k in &found.kinds {
                *counts.entry(k.kind).or_default() += k.count;
            }
            if policy != hidden::Policy::Show {
                *s = hidden::apply(s, 0..s.len(), &spans, policy);
            }
        }
        Value::Array(items) => {
            for v in items {
                hidden_in_json(v, policy, skip, counts);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if !skip.contains(&k.as_str()) {
                    hidden_in_json(v, policy, skip, counts);
                }
            }
        }
        _ => {}
    }
}

/// Parses one note.
///
/// ```
/// use capvault::markdown::{parse_note, Frontmatter, LinkKind, Subpath};
///
/// let note = parse_note("---\naliases: [AI]\ntags: [ml]\n---\n# Intro\nSee [[Folder/Note#Part|this]] #todo\n");
/// assert!(matches!(note.frontmatter, Frontmatter::Valid { end_line: 4, .. }));
/// assert_eq!(note.aliases, ["AI"]);
/// let tags: Vec<&str> = note.tags.iter().map(|t| &*t.name).collect();
/// assert_eq!(tags, ["ml", "todo"]);
/// assert_eq!(&*note.headings[0].text, "Intro");
/// let link = &note.links[0];
/// assert_eq!((link.kind, link.target()), (LinkKind::Wikilink, "Folder/Note"));
/// assert_eq!(link.subpath(), Some(&Subpath::Heading(["Part".into()].into())));
/// assert_eq!(link.display(), Some("this"));
/// assert_eq!((link.pos.line, link.pos.column), (6, 5));
/// ```
pub fn parse_note(text: &str) -> ParsedNote {
    let lines = LineIndex::new(text);
    let mut note = ParsedNote {
        frontmatter: Frontmatter::None,
        aliases: Vec::new(),
        tags: Vec::new(),
        headings: Vec::new(),
        block_ids: Vec::new(),
        links: Vec::new(),
        base_blocks: 0,
        omitted: 0,
        hidden: None,
    };
    let mut body_start = 0;
    if let Some(block) = frontmatter::find_block(text) {
        body_start = block.body_start;
        note.frontmatter = match frontmatter::parse(text, &block) {
            Ok(doc) => {
                add_frontmatter_items(text, &doc, &lines, &mut note);
                Frontmatter::Valid {
                    value: doc.properties.into(),
                    end_line: block.end_line,
                }
            }
            Err(e) => Frontmatter::Invalid {
                error: format!("invalid frontmatter: {} (line {})", e.reason, e.line),
                end_line: block.end_line,
            },
        };
    }

    let mut body = body::scan(text, body_start);
    hidden::scan_chars(text, &mut body.hidden);
    body.hidden.finish();
    note.hidden = hidden::Hidden::of(text, &body.hidden);
    note.base_blocks = body.base_blocks;
    note.tags.extend(body.tags.into_iter().map(|t| Tag {
        name: t.name.into(),
        source: TagSource::Inline,
        pos: lines.pos(t.start, t.end),
    }));
    note.headings = body
        .headings
        .into_iter()
        .map(|h| Heading {
            level: h.level,
            text: h.text,
            pos: lines.pos(h.start, h.end),
        })
        .collect();
    note.block_ids = body
        .block_ids
        .into_iter()
        .map(|b| BlockId {
            id: b.id,
            pos: lines.pos(b.start, b.end),
        })
        .collect();
    note.links.extend(body.links.into_iter().map(|l| {
        Link::new(
            l.kind,
            &text[l.start..l.end],
            l.parts,
            lines.pos(l.start, l.end),
        )
    }));
    // The vault model keeps every note's parse: no spare capacity.
    note.aliases.shrink_to_fit();
    note.tags.shrink_to_fit();
    note.headings.shrink_to_fit();
    note.block_ids.shrink_to_fit();
    note.links.shrink_to_fit();
    note
}

/// A ```` ```base ```` code block of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseBlock {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The YAML inside.
    pub yaml: String,
}

/// The ```` ```base ```` code blocks of a note, in order (fenced blocks whose info string
/// starts with `base`, outside the frontmatter), as [`ParsedNote::base_blocks`] counts them.
///
/// ```
/// use capvault::markdown::base_blocks;
///
/// let blocks = base_blocks("# Books\n\n```base\nviews:\n  - type: table\n```\n");
/// assert_eq!(blocks.len(), 1);
/// assert_eq!(blocks[0].line, 3);
/// assert_eq!(blocks[0].yaml, "views:\n  - type: table\n");
/// ```
pub fn base_blocks(text: &str) -> Vec<BaseBlock> {
    let body_start = frontmatter::find_block(text).map_or(0, |b| b.body_start);
    let lines = LineIndex::new(text);
    body::base_blocks(text, body_start)
        .into_iter()
        .map(|(start, yaml)| BaseBlock {
            line: lines.pos(start, start).line as usize,
            yaml,
        })
        .collect()
}

/// A fenced code block of a note in one of the languages asked for ([`code_blocks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The language as written after the fence (`dataview`, `tasks`...).
    pub language: String,
    /// The text inside.
    pub body: String,
}

/// The fenced code blocks of a note whose info string starts with one of `languages`, in
/// order, outside the frontmatter (```` ```dataview ````, ```` ```tasks ````).
pub fn code_blocks(text: &str, languages: &[&str]) -> Vec<CodeBlock> {
    let body_start = frontmatter::find_block(text).map_or(0, |b| b.body_start);
    let lines = LineIndex::new(text);
    body::fenced_blocks(text, body_start, languages)
        .into_iter()
        .map(|(start, language, body)| CodeBlock {
            line: lines.pos(start, start).line as usize,
            language,
            body,
        })
        .collect()
}

/// The inline code spans of a note outside the frontmatter and code blocks, at most `max`:
/// each with its 1-based line and its code (`` `= this.rating` `` gives `= this.rating`).
pub fn inline_code(text: &str, max: usize) -> Vec<(usize, String)> {
    let body_start = frontmatter::find_block(text).map_or(0, |b| b.body_start);
    let lines = LineIndex::new(text);
    body::inline_code(text, body_start, max)
        .into_iter()
        .map(|(start, code)| (lines.pos(start, start).line as usize, code))
        .collect()
}

/// Why a YAML document was refused by [`parse_yaml_mapping`]: the reason and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (line {line})")]
pub struct YamlMappingError {
    /// What is wrong (`duplicate key `a``, `not a mapping of properties`, ...).
    pub reason: String,
    /// The line of the document, from 1.
    pub line: usize,
}

/// Reads a YAML document that must be a mapping (a `.base` file), with the same hardened
/// limits as frontmatter. The error gives the reason and the 1-based line.
pub fn parse_yaml_mapping(
    yaml: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, YamlMappingError> {
    let block = frontmatter::Block {
        yaml_start: 0,
        yaml_end: yaml.len(),
        end_line: 0,
        body_start: yaml.len(),
    };
    frontmatter::parse(yaml, &block)
        .map(|doc| doc.properties)
        .map_err(|e| YamlMappingError {
            reason: e.reason,
            line: e.line.saturating_sub(1).max(1),
        })
}

/// Is this the property `name` (case-insensitive, as Obsidian matches `tags`/`Tags`)?
fn is_key(scalar: &SourceScalar, names: &[&str]) -> bool {
    names.iter().any(|n| scalar.top_key.eq_ignore_ascii_case(n))
}

/// Where the scalar's text starts in the note, when the source holds it verbatim (plain and
/// quoted scalars without escapes on one line).
fn verbatim_start(text: &str, scalar: &SourceScalar) -> Option<usize> {
    text[scalar.start..scalar.end]
        .rfind(&scalar.text)
        .map(|i| scalar.start + i)
}

/// Aliases, tags and links of the frontmatter.
fn add_frontmatter_items(text: &str, doc: &Document, lines: &LineIndex<'_>, note: &mut ParsedNote) {
    let mut seen_aliases = std::collections::HashSet::new();
    for scalar in doc.scalars.iter().filter(|s| s.is_string) {
        if scalar.depth <= 1 && is_key(scalar, &["aliases", "alias"]) {
            // A single string is a comma-separated list (old vaults); list items are whole.
            let names: Vec<&str> = if scalar.depth == 0 {
                scalar.text.split(',').collect()
            } else {
                vec![scalar.text.as_str()]
            };
            for name in names.into_iter().map(str::trim).filter(|n| !n.is_empty()) {
                if seen_aliases.insert(name) {
                    note.aliases.push(name.to_owned());
                }
            }
        }
        if scalar.depth <= 1 && is_key(scalar, &["tags", "tag"]) {
            let base = verbatim_start(text, scalar);
            for (start, end, name) in tags::split_frontmatter_tags(&scalar.text) {
                let pos = match base {
                    Some(base) => lines.pos(base + start, base + end),
                    None => lines.pos(scalar.start, scalar.end),
                };
                note.tags.push(Tag {
                    name: name.into(),
                    source: TagSource::Frontmatter,
                    pos,
                });
            }
        }
        if scalar.text.contains("[[") {
            add_frontmatter_links(text, scalar, lines, note);
        }
    }
}

/// `[[...]]` occurrences in a property value.
///
/// Links are found in the value (what Obsidian reads) and located in the source: exactly when
/// the value is verbatim in the source (plain and quoted scalars on one line, the usual case);
/// else by pairing the value's links in order with the `[[...]]` pairs of the source, which may
/// span folded lines (`[[Far\n  Away]]`). A link whose source cannot be paired (escapes inside
/// the brackets, which real notes do not use) is left out rather than given a wrong position.
fn add_frontmatter_links(
    text: &str,
    scalar: &SourceScalar,
    lines: &LineIndex<'_>,
    note: &mut ParsedNote,
) {
    let base = verbatim_start(text, scalar);
    let source = &text[scalar.start..scalar.end];
    let source_pairs = if base.is_none() {
        links::find_wikilinks(source, true)
    } else {
        Vec::new()
    };
    let mut next_pair = 0;
    for (start, end) in links::find_wikilinks(&scalar.text, false) {
        let inner = &scalar.text[start + 2..end - 2];
        let Some(parts) = links::parse_wikilink_inner(inner, false) else {
            continue;
        };
        let (abs_start, abs_end) = match base {
            Some(base) => (base + start, base + end),
            None => {
                let Some(&(s, e)) = source_pairs.get(next_pair) else {
                    break;
                };
                next_pair += 1;
                if !same_words(&source[s + 2..e - 2], inner) {
                    continue;
                }
                (scalar.start + s, scalar.start + e)
            }
        };
        note.links.push(Link::new(
            LinkKind::Frontmatter,
            &text[abs_start..abs_end],
            parts,
            lines.pos(abs_start, abs_end),
        ));
    }
}

/// Equal once runs of whitespace (line folding and indentation) count as one space.
fn same_words(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}
