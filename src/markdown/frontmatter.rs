//! Frontmatter: finding the YAML block at the top of a note and turning it into JSON, safely.
//!
//! The YAML comes from files anyone may have written, so it is read with saphyr-parser's event
//! API into a `serde_json::Value` by our own builder with hard limits: at most
//! [`MAX_YAML_BYTES`] of YAML, [`MAX_DEPTH`] levels of nesting, [`MAX_NODES`] nodes and
//! [`MAX_STRING_BYTES`] of string data produced, *counting every copy an alias makes*, so that a
//! "billion laughs" document is refused after a few thousand events instead of exhausting
//! memory. Parsing stops at the first problem with a short reason and a line number.
//!
//! What the builder does, and why:
//! - Plain scalars resolve with the YAML 1.2 core schema (null/`~`, booleans, integers in
//!   decimal, `0o` and `0x`, floats); quoted and block scalars stay strings. Dates stay strings
//!   (`2020-08-21`). `.inf`/`.nan` stay strings (JSON has no such numbers).
//! - Duplicate keys are refused, like js-yaml (which Obsidian's `parseYaml` is built on) and
//!   Obsidian's Properties ("Keys unique"). Merge keys (`<<: *base`) work as in js-yaml.
//! - Non-string keys are stringified: scalars as written (`1: x` → `"1"`, empty → `"null"`),
//!   sequences joined with `,` and mappings as `[object Object]`, as JavaScript would.
//! - Tags: `!!str` forces a string; other core-schema tags are accepted; any other tag
//!   (`!foo`) is an error, as in js-yaml.
//! - The document must be a mapping (or empty); a lone scalar or list is an error.

use std::collections::{HashMap, HashSet};

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput, Tag as YamlTag};
use serde_json::{Map, Number, Value};

/// Largest YAML block read, in bytes.
pub(crate) const MAX_YAML_BYTES: usize = 256 * 1024;
/// Deepest nesting of mappings and sequences (the top mapping is level 1).
pub(crate) const MAX_DEPTH: usize = 64;
/// Most nodes (scalars, sequences, mappings) produced, alias copies included.
pub(crate) const MAX_NODES: usize = 100_000;
/// Most bytes of strings (keys and values) produced, alias copies included.
pub(crate) const MAX_STRING_BYTES: usize = 4 * 1024 * 1024;

/// Where the frontmatter block is in the note.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    /// Byte range of the YAML text between the delimiter lines.
    pub yaml_start: usize,
    pub yaml_end: usize,
    /// 1-based line of the closing `---` (or `...`).
    pub end_line: usize,
    /// Byte offset where the body starts (after the closing line).
    pub body_start: usize,
}

/// Is this line (without its `\n`) the delimiter `marker`, allowing trailing blanks and `\r`?
fn is_delimiter(line: &str, marker: &str) -> bool {
    line.trim_end_matches([' ', '\t', '\r']) == marker
}

/// Finds the frontmatter block: `---` as the very first line, closed by the next line that is
/// `---` or `...`. Without a closing line there is no frontmatter (the `---` is then a thematic
/// break in the body, as Obsidian shows it).
pub(crate) fn find_block(text: &str) -> Option<Block> {
    let first_end = memchr::memchr(b'\n', text.as_bytes())?;
    if !is_delimiter(&text[..first_end], "---") {
        return None;
    }
    let yaml_start = first_end + 1;
    let mut line_start = yaml_start;
    let mut line_no = 2;
    while line_start <= text.len() {
        let line_end = memchr::memchr(b'\n', &text.as_bytes()[line_start..])
            .map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        if is_delimiter(line, "---") || is_delimiter(line, "...") {
            return Some(Block {
                yaml_start,
                yaml_end: line_start,
                end_line: line_no,
                body_start: (line_end + 1).min(text.len()),
            });
        }
        if line_end == text.len() {
            break;
        }
        line_start = line_end + 1;
        line_no += 1;
    }
    None
}

/// A scalar value as it appears in the source, kept to find tags, aliases and links in the
/// frontmatter with their positions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SourceScalar {
    /// The top-level key this value sits under.
    pub top_key: String,
    /// 0: the value of the top-level key itself; 1: an item of a list under it; and so on.
    pub depth: usize,
    /// The scalar's text after YAML unescaping (before type resolution).
    pub text: String,
    /// Did the scalar resolve to a string (not a number, boolean or null)?
    pub is_string: bool,
    /// Byte range of the scalar in the note (including quotes, tag and anchor).
    pub start: usize,
    pub end: usize,
}

/// The parsed frontmatter: its properties and the scalars they came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    pub properties: Map<String, Value>,
    /// Value scalars (not keys, not alias copies) in source order.
    pub scalars: Vec<SourceScalar>,
}

/// Why the YAML was refused, and on which line of the note.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YamlError {
    pub reason: String,
    pub line: usize,
}

/// Parses the YAML of a frontmatter block. `text` is the whole note; the YAML is
/// `text[block.yaml_start..block.yaml_end]`, starting on line 2.
pub(crate) fn parse(text: &str, block: &Block) -> Result<Document, YamlError> {
    let yaml = &text[block.yaml_start..block.yaml_end];
    if yaml.len() > MAX_YAML_BYTES {
        return Err(YamlError {
            reason: format!("larger than {} KiB", MAX_YAML_BYTES / 1024),
            line: 1,
        });
    }
    let mut builder = Builder {
        parser: Parser::new_from_str(yaml),
        yaml,
        base: block.yaml_start,
        ascii: yaml.is_ascii(),
        char_offsets: None,
        nodes: 0,
        string_bytes: 0,
        anchors: HashMap::new(),
        scalars: Vec::new(),
        last_line: 1,
    };
    builder.document()
}

/// Where a node sits, to label the scalars under it.
#[derive(Clone, Copy)]
struct Context<'k> {
    /// The top-level key above this node (`None` for the root mapping and its keys).
    top_key: Option<&'k str>,
    /// Depth below that key's value.
    depth: usize,
}

/// A node built so far, with its cost (for alias accounting).
struct Built {
    value: Value,
    /// Nodes in `value`, itself included: what one more copy of it costs.
    nodes: usize,
    /// Bytes of strings (keys included) in `value`.
    string_bytes: usize,
}

/// The event-driven YAML → JSON builder and its budgets.
struct Builder<'y> {
    parser: Parser<'y, StrInput<'y>>,
    /// The YAML text (between the delimiter lines).
    yaml: &'y str,
    /// Byte offset of the YAML in the note.
    base: usize,
    /// The YAML is ASCII: char indices are byte offsets.
    ascii: bool,
    /// Byte offset of each char of a non-ASCII YAML text (built on first use), to turn saphyr's
    /// char indices into byte offsets in constant time.
    char_offsets: Option<Vec<usize>>,
    /// Nodes produced so far (alias copies and anchor copies included), against [`MAX_NODES`].
    nodes: usize,
    /// String bytes produced so far, against [`MAX_STRING_BYTES`].
    string_bytes: usize,
    /// Anchored nodes by saphyr's anchor id, with their cost.
    anchors: HashMap<usize, Built>,
    scalars: Vec<SourceScalar>,
    /// YAML line (1-based) of the last event, for errors that have no position of their own.
    last_line: usize,
}

type Step<'y> = (Event<'y>, Span);

impl<'y> Builder<'y> {
    fn error(&self, reason: impl Into<String>, yaml_line: usize) -> YamlError {
        YamlError {
            reason: reason.into(),
            line: yaml_line + 1,
        }
    }

    fn next(&mut self) -> Result<Step<'y>, YamlError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => {
                self.last_line = span.start.line();
                Ok((event, span))
            }
            Some(Err(e)) => {
                // saphyr's scanner runs ahead of us and may hit its own flow-nesting limit
                // (255) before our depth check sees the events.
                let reason = if e.info().contains("recursion limit") {
                    format!("nested deeper than {MAX_DEPTH} levels")
                } else {
                    e.info().to_owned()
                };
                Err(self.error(reason, e.marker().line()))
            }
            None => Err(self.error("unexpected end of YAML", self.last_line)),
        }
    }

    /// Charges `nodes` nodes and `bytes` string bytes against the limits.
    fn charge(&mut self, nodes: usize, bytes: usize, line: usize) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(nodes);
        self.string_bytes = self.string_bytes.saturating_add(bytes);
        if self.nodes > MAX_NODES {
            return Err(self.error(
                format!("more than {MAX_NODES} values (alias expansion included)"),
                line,
            ));
        }
        if self.string_bytes > MAX_STRING_BYTES {
            return Err(self.error(
                format!(
                    "more than {} MiB of text (alias expansion included)",
                    MAX_STRING_BYTES / (1024 * 1024)
                ),
                line,
            ));
        }
        Ok(())
    }

    /// Byte offset in the note of saphyr's char index into the YAML.
    fn byte_offset(&mut self, char_index: usize) -> usize {
        if self.ascii {
            return self.base + char_index.min(self.yaml.len());
        }
        let yaml = self.yaml;
        let offsets = self.char_offsets.get_or_insert_with(|| {
            let mut offsets: Vec<usize> = yaml.char_indices().map(|(i, _)| i).collect();
            offsets.push(yaml.len());
            offsets
        });
        self.base + offsets.get(char_index).copied().unwrap_or(yaml.len())
    }

    fn document(&mut self) -> Result<Document, YamlError> {
        let (event, _) = self.next()?;
        if !matches!(event, Event::StreamStart) {
            return Err(self.error("unexpected YAML event", self.last_line));
        }
        let (event, _) = self.next()?;
        let properties = match event {
            Event::StreamEnd => Map::new(),
            Event::DocumentStart(_) => {
                let (event, span) = self.next()?;
                let root_line = span.start.line();
                let root = self.node(
                    event,
                    span,
                    1,
                    Context {
                        top_key: None,
                        depth: 0,
                    },
                )?;
                let (event, span) = self.next()?;
                if !matches!(event, Event::DocumentEnd) {
                    return Err(self.error("unexpected YAML event", span.start.line()));
                }
                let (event, span) = self.next()?;
                if !matches!(event, Event::StreamEnd) {
                    return Err(self.error("more than one YAML document", span.start.line()));
                }
                match root.value {
                    Value::Object(map) => map,
                    Value::Null => Map::new(),
                    _ => {
                        return Err(self.error("not a mapping of properties", root_line));
                    }
                }
            }
            _ => return Err(self.error("unexpected YAML event", self.last_line)),
        };
        Ok(Document {
            properties,
            scalars: std::mem::take(&mut self.scalars),
        })
    }

    /// Builds the node that starts with `event`. `level` is its nesting level (1 = top).
    fn node(
        &mut self,
        event: Event<'y>,
        span: Span,
        level: usize,
        ctx: Context<'_>,
    ) -> Result<Built, YamlError> {
        let line = span.start.line();
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(&text, style, tag.as_deref())
                    .map_err(|reason| self.error(reason.to_string(), line))?;
                let bytes = string_bytes(&value);
                self.charge(1, bytes, line)?;
                if let Some(top_key) = ctx.top_key
                    && !value.is_null()
                {
                    let start = self.byte_offset(span.start.index());
                    let end = self.byte_offset(span.end.index());
                    self.scalars.push(SourceScalar {
                        top_key: top_key.to_owned(),
                        depth: ctx.depth,
                        text: text.into_owned(),
                        is_string: value.is_string(),
                        start,
                        end,
                    });
                }
                let built = Built {
                    value,
                    nodes: 1,
                    string_bytes: bytes,
                };
                self.anchor(anchor, built, line)
            }
            Event::SequenceStart(anchor, tag) => {
                check_collection_tag(tag.as_deref())
                    .map_err(|r| self.error(r.to_string(), line))?;
                self.check_level(level, line)?;
                self.charge(1, 0, line)?;
                let mut items = Vec::new();
                let mut built = Built {
                    value: Value::Null,
                    nodes: 1,
                    string_bytes: 0,
                };
                let child = Context {
                    top_key: ctx.top_key,
                    depth: ctx.depth + 1,
                };
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    let item = self.node(event, span, level + 1, child)?;
                    built.nodes += item.nodes;
                    built.string_bytes += item.string_bytes;
                    items.push(item.value);
                }
                items.shrink_to_fit();
                built.value = Value::Array(items);
                self.anchor(anchor, built, line)
            }
            Event::MappingStart(anchor, tag) => {
                check_collection_tag(tag.as_deref())
                    .map_err(|r| self.error(r.to_string(), line))?;
                self.check_level(level, line)?;
                self.charge(1, 0, line)?;
                let built = self.mapping(level, ctx)?;
                self.anchor(anchor, built, line)
            }
            Event::Alias(id) => {
                let Some(target) = self.anchors.get(&id) else {
                    return Err(self.error("alias to an unknown or unfinished anchor", line));
                };
                let (nodes, bytes) = (target.nodes, target.string_bytes);
                self.charge(nodes, bytes, line)?;
                let value = self
                    .anchors
                    .get(&id)
                    .map_or(Value::Null, |t| t.value.clone());
                Ok(Built {
                    value,
                    nodes,
                    string_bytes: bytes,
                })
            }
            _ => Err(self.error("unexpected YAML event", line)),
        }
    }

    fn check_level(&self, level: usize, line: usize) -> Result<(), YamlError> {
        if level > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels"), line));
        }
        Ok(())
    }

    /// Keeps a copy of an anchored node for later aliases; the copy counts against the limits.
    fn anchor(&mut self, anchor: usize, built: Built, line: usize) -> Result<Built, YamlError> {
        if anchor != 0 {
            self.charge(built.nodes, built.string_bytes, line)?;
            let copy = Built {
                value: built.value.clone(),
                nodes: built.nodes,
                string_bytes: built.string_bytes,
            };
            self.anchors.insert(anchor, copy);
        }
        Ok(built)
    }

    /// The entries of a mapping, after its `MappingStart`.
    fn mapping(&mut self, level: usize, ctx: Context<'_>) -> Result<Built, YamlError> {
        let mut map = Map::new();
        let mut built = Built {
            value: Value::Null,
            nodes: 1,
            string_bytes: 0,
        };
        // Keys written in this mapping (merged keys may be overridden, explicit ones not).
        let mut explicit: HashSet<String> = HashSet::new();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                break;
            }
            let key_line = span.start.line();
            let is_merge =
                matches!(&event, Event::Scalar(k, ScalarStyle::Plain, _, None) if k == "<<");
            let key = self.key(event, span, level, ctx)?;
            built.nodes += 1;
            built.string_bytes += key.len();
            let child = match ctx.top_key {
                None => Context {
                    top_key: Some(&key),
                    depth: 0,
                },
                Some(_) => Context {
                    top_key: ctx.top_key,
                    depth: ctx.depth + 1,
                },
            };
            let (event, span) = self.next()?;
            let value = self.node(event, span, level + 1, child)?;
            built.nodes += value.nodes;
            built.string_bytes += value.string_bytes;
            if is_merge {
                self.merge(&mut map, value.value, key_line)?;
                continue;
            }
            if !explicit.insert(key.clone()) {
                return Err(self.error(format!("duplicate key `{}`", short(&key)), key_line));
            }
            map.insert(key, value.value);
        }
        built.value = Value::Object(map);
        Ok(built)
    }

    /// `<<: *base` or `<<: [*a, *b]`: adds the keys the mapping does not have yet.
    fn merge(
        &self,
        map: &mut Map<String, Value>,
        value: Value,
        line: usize,
    ) -> Result<(), YamlError> {
        let sources = match value {
            Value::Object(source) => vec![source],
            Value::Array(items) => {
                let mut sources = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::Object(source) => sources.push(source),
                        _ => return Err(self.error("merge key `<<` needs mappings", line)),
                    }
                }
                sources
            }
            _ => return Err(self.error("merge key `<<` needs mappings", line)),
        };
        for source in sources {
            for (k, v) in source {
                map.entry(k).or_insert(v);
            }
        }
        Ok(())
    }

    /// A mapping key, as a string.
    fn key(
        &mut self,
        event: Event<'y>,
        span: Span,
        level: usize,
        ctx: Context<'_>,
    ) -> Result<String, YamlError> {
        let line = span.start.line();
        if let Event::Scalar(text, style, anchor, tag) = event {
            let key = if style == ScalarStyle::Plain && tag.is_none() && is_null(&text) {
                "null".to_owned()
            } else {
                text.clone().into_owned()
            };
            self.charge(1, key.len(), line)?;
            if anchor != 0 {
                let value = resolve(&text, style, tag.as_deref())
                    .map_err(|reason| self.error(reason.to_string(), line))?;
                let bytes = string_bytes(&value);
                self.anchor(
                    anchor,
                    Built {
                        value,
                        nodes: 1,
                        string_bytes: bytes,
                    },
                    line,
                )?;
            }
            return Ok(key);
        }
        // Aliases and complex keys (`? [a, b]`): built like values, then stringified.
        let key_ctx = Context {
            top_key: None,
            depth: ctx.depth,
        };
        let built = self.node(event, span, level + 1, key_ctx)?;
        let key = js_string(&built.value);
        self.charge(0, key.len(), line)?;
        Ok(key)
    }
}

/// A YAML tag capvault does not resolve (`!foo`, `!!python/object`), shortened for the message.
#[derive(Debug, thiserror::Error)]
#[error("unsupported tag `{0}`")]
struct UnsupportedTag(String);

impl UnsupportedTag {
    fn of(tag: &YamlTag) -> UnsupportedTag {
        UnsupportedTag(short(&tag.to_string()))
    }
}

/// Checks the tag of a sequence or mapping: core-schema tags are fine, others are refused.
fn check_collection_tag(tag: Option<&YamlTag>) -> Result<(), UnsupportedTag> {
    match tag {
        None => Ok(()),
        Some(t) if is_known_core_tag(t) => Ok(()),
        Some(t) => Err(UnsupportedTag::of(t)),
    }
}

/// The tags of js-yaml's default schema (`!!str`, `!!map`, ...).
fn is_known_core_tag(tag: &YamlTag) -> bool {
    tag.is_yaml_core_schema()
        && matches!(
            tag.suffix.as_str(),
            "str"
                | "null"
                | "bool"
                | "int"
                | "float"
                | "binary"
                | "timestamp"
                | "map"
                | "seq"
                | "set"
                | "omap"
                | "pairs"
                | "merge"
        )
}

/// The JSON value of a scalar.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&YamlTag>) -> Result<Value, UnsupportedTag> {
    match tag {
        None if style == ScalarStyle::Plain => Ok(resolve_plain(text)),
        None => Ok(Value::String(text.to_owned())),
        Some(t) if is_known_core_tag(t) => Ok(match t.suffix.as_str() {
            "null" | "bool" | "int" | "float" => resolve_plain(text),
            _ => Value::String(text.to_owned()),
        }),
        // The non-specific tag `! x`: a string.
        Some(t) if t.handle == "!" && t.suffix.is_empty() => Ok(Value::String(text.to_owned())),
        Some(t) => Err(UnsupportedTag::of(t)),
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// YAML 1.2 core schema resolution of a plain scalar.
fn resolve_plain(text: &str) -> Value {
    if is_null(text) {
        return Value::Null;
    }
    match text {
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = resolve_number(text) {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

/// Integers (`12`, `-3`, `+4`, `0o17`, `0x1F`) and floats (`1.5`, `.5`, `1e3`, `-2.`).
fn resolve_number(text: &str) -> Option<Number> {
    let bytes = text.as_bytes();
    if let Some(oct) = text.strip_prefix("0o") {
        return u64::from_str_radix(oct, 8).ok().map(Number::from);
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok().map(Number::from);
    }
    let unsigned = match bytes.first()? {
        b'-' | b'+' => &text[1..],
        _ => text,
    };
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Some(Number::from(i));
        }
        if let Ok(u) = unsigned.parse::<u64>()
            && !text.starts_with('-')
        {
            return Some(Number::from(u));
        }
        return text.parse::<f64>().ok().and_then(Number::from_f64);
    }
    if is_core_float(unsigned) {
        return text.parse::<f64>().ok().and_then(Number::from_f64);
    }
    None
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (sign already stripped).
fn is_core_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let exp_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits == 0 {
            return false;
        }
        i += exp_digits;
    }
    i == b.len()
}

fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        _ => 0,
    }
}

/// JavaScript's `String(value)` for a key that is not a plain string.
fn js_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Null => String::new(),
                v => js_string(v),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// At most 60 characters of a key or tag for an error message.
fn short(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(src: &str) -> Result<Value, YamlError> {
        let text = format!("---\n{src}\n---\n");
        let block = find_block(&text).unwrap();
        parse(&text, &block).map(|d| Value::Object(d.properties))
    }

    fn reason(src: &str) -> String {
        yaml(src).unwrap_err().reason
    }

    #[test]
    fn block_needs_dashes_on_the_first_line_and_a_closing_line() {
        let b = find_block("---\na: 1\n---\nbody").unwrap();
        assert_eq!((b.end_line, b.body_start), (3, 13));
        assert!(find_block("\n---\na: 1\n---\n").is_none());
        assert!(find_block("---\na: 1\n").is_none());
        assert!(find_block("----\na: 1\n---\n").is_none());
        assert_eq!(find_block("---\n---").unwrap().end_line, 2);
        assert_eq!(find_block("---\r\na: 1\r\n...\r\nx").unwrap().end_line, 3);
        assert_eq!(find_block("--- \na: 1\n---  \n").unwrap().end_line, 3);
    }

    #[test]
    fn plain_scalars_resolve_with_the_core_schema() {
        let v = yaml(
            "n: ~\ne:\nb: true\nB: False\ni: -12\nh: 0x1F\no: 0o17\nf: 1.5\ng: .5e1\n\
             s: '12'\nd: 2020-08-21\ninf: .inf\nbig: 123456789012345678901\nv: 1.2.3",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"n": null, "e": null, "b": true, "B": false, "i": -12, "h": 31, "o": 15,
                   "f": 1.5, "g": 5.0, "s": "12", "d": "2020-08-21", "inf": ".inf",
                   "big": 123456789012345678901.0, "v": "1.2.3"})
        );
    }

    #[test]
    fn quoted_and_block_scalars_stay_strings() {
        let v = yaml("a: \"true\"\nb: |\n  12\nc: !!str 5").unwrap();
        assert_eq!(v, json!({"a": "true", "b": "12\n", "c": "5"}));
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_line() {
        let e = yaml("a: 1\nb: 2\na: 3").unwrap_err();
        assert_eq!(e.reason, "duplicate key `a`");
        assert_eq!(e.line, 4);
    }

    #[test]
    fn merge_keys_fill_in_missing_keys() {
        let v = yaml("base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  y: 3").unwrap();
        assert_eq!(v["this"], json!({"x": 1, "y": 3}));
    }

    #[test]
    fn non_string_keys_are_stringified() {
        let v = yaml("1: a\n~: b\n? [x, y]\n: c\ntrue: d").unwrap();
        assert_eq!(v, json!({"1": "a", "null": "b", "x,y": "c", "true": "d"}));
    }

    #[test]
    fn unknown_tags_are_refused() {
        assert!(reason("a: !foo 1").contains("unsupported tag"));
        assert!(reason("a: !!python/object {x: 1}").contains("unsupported tag"));
        assert!(yaml("a: !!map {x: 1}\nb: !!int 3").is_ok());
    }

    #[test]
    fn top_level_must_be_a_mapping() {
        assert_eq!(reason("just text"), "not a mapping of properties");
        assert_eq!(reason("- a\n- b"), "not a mapping of properties");
        assert_eq!(yaml("# only a comment").unwrap(), json!({}));
        assert_eq!(yaml("~").unwrap(), json!({}));
    }

    #[test]
    fn second_document_is_refused() {
        assert_eq!(reason("a: 1\n--- b"), "more than one YAML document");
    }

    #[test]
    fn aliases_replay_their_anchor() {
        let v = yaml("a: &x [1, 2]\nb: *x\nc: *x").unwrap();
        assert_eq!(v["c"], json!([1, 2]));
    }

    #[test]
    fn unknown_alias_is_refused() {
        assert!(yaml("a: *nope").is_err());
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let mut src = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names: Vec<char> = ('b'..='z').collect();
        let mut prev = 'a';
        for &n in &names {
            src.push_str(&format!("{n}: &{n} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
            prev = n;
        }
        let started = std::time::Instant::now();
        let e = yaml(&src).unwrap_err();
        assert!(e.reason.contains("alias expansion"), "{}", e.reason);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn repeated_alias_of_a_long_string_is_refused() {
        let long = "x".repeat(200_000);
        let src = format!("a: &s \"{long}\"\nb: [{}]", vec!["*s"; 30].join(", "));
        let e = yaml(&src).unwrap_err();
        assert!(e.reason.contains("MiB of text"), "{}", e.reason);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let src = format!("a: {}{}", "[".repeat(100), "]".repeat(100));
        assert!(reason(&src).contains("nested deeper than 64"));
        let mut block = String::new();
        for i in 0..80 {
            block.push_str(&" ".repeat(i));
            block.push_str("k:\n");
        }
        assert!(reason(&block).contains("nested deeper than 64"));
        // 64 levels are fine.
        let src = format!("a: {}{}", "[".repeat(63), "]".repeat(63));
        assert!(yaml(&src).is_ok());
    }

    #[test]
    fn oversized_yaml_is_refused() {
        let src = format!("a: \"{}\"", "x".repeat(MAX_YAML_BYTES));
        assert!(reason(&src).contains("larger than 256 KiB"));
    }

    #[test]
    fn syntax_errors_report_the_note_line() {
        let e = yaml("a: 1\nb: [unclosed\nc: 2").unwrap_err();
        assert!(e.line >= 3, "{e:?}");
        let e = yaml("a: b: c").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn source_scalars_record_key_depth_and_byte_range() {
        let text = "---\ntags: [a, \"b\"]\nup: \"[[Note]]\"\n---\n";
        let block = find_block(text).unwrap();
        let doc = parse(text, &block).unwrap();
        let got: Vec<(&str, usize, &str)> = doc
            .scalars
            .iter()
            .map(|s| (s.top_key.as_str(), s.depth, &text[s.start..s.end]))
            .collect();
        assert_eq!(
            got,
            [
                ("tags", 1, "a"),
                ("tags", 1, "\"b\""),
                ("up", 0, "\"[[Note]]\"")
            ]
        );
    }

    #[test]
    fn non_ascii_yaml_maps_char_indices_to_bytes() {
        let text = "---\ntitre: « été »\nx: \"[[Café]]\"\n---\n";
        let block = find_block(text).unwrap();
        let doc = parse(text, &block).unwrap();
        let s = &doc.scalars[1];
        assert_eq!(&text[s.start..s.end], "\"[[Café]]\"");
    }
}
