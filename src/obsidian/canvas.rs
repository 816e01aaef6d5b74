//! JSON Canvas 1.0 (`.canvas` files; spec at <https://jsoncanvas.org/spec/1.0/>).
//!
//! [`parse_canvas`] reads a document and checks it against the spec. A canvas that breaks the
//! spec is still returned, as far as it can be read, with one human-readable line per violation
//! in [`Canvas::issues`] (duplicate ids, edges to unknown nodes, bad colours, missing or mistyped
//! fields...): Obsidian opens such files too, and a client is better served by the content plus
//! the list of problems than by a refusal. Only input that is not a JSON object, or that is over
//! the size bounds, is an error.
//!
//! Leniency rules, each reported as an issue: a missing or mistyped required field reads as an
//! empty string or `0`; a non-integral coordinate is rounded (integral floats such as `100.0`
//! are accepted silently: some editors write them); an invalid side, end or background style
//! reads as unset or the default; an invalid colour is kept as written. Array elements that are
//! not objects are skipped. Unknown fields are ignored. Nodes keep the array order, which is
//! their z-order.
//!
//! The reply types use `snake_case` field names like every capvault reply (`from_node`, not
//! `fromNode`); they describe the canvas and are not meant to be written back as a `.canvas`.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};

/// Largest document accepted, in bytes.
pub const MAX_CANVAS_BYTES: usize = 8 * 1024 * 1024;
/// Most nodes, and separately most edges, a document may hold.
pub const MAX_CANVAS_ITEMS: usize = 100_000;
/// Most issues listed; past it one last line says how many more there were.
pub const MAX_ISSUES: usize = 1000;
/// Longest piece of the document quoted in an issue, in characters.
const MAX_QUOTE_CHARS: usize = 60;

/// Why a canvas could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanvasError {
    /// The document is larger than [`MAX_CANVAS_BYTES`].
    #[error("the canvas is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The document's size in bytes.
        size: usize,
        /// The limit it exceeded.
        max: usize,
    },
    /// The document is not JSON (the message is serde_json's, with line and column).
    #[error("the canvas is not valid JSON: {0}")]
    InvalidJson(String),
    /// The document is JSON but not an object.
    #[error("the canvas's top level is not a JSON object")]
    NotAnObject,
    /// `nodes` or `edges` holds more than [`MAX_CANVAS_ITEMS`] entries.
    #[error("the canvas has {count} {what}, over the limit of {max}")]
    TooManyItems {
        /// `"nodes"` or `"edges"`.
        what: &'static str,
        /// How many the document holds.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// A parsed canvas: its nodes (in z-order), its edges, and what in it breaks the spec.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
pub struct Canvas {
    /// The nodes, first drawn first (lowest).
    pub nodes: Vec<Node>,
    /// The edges between nodes.
    pub edges: Vec<Edge>,
    /// Spec violations, one sentence each, naming the node or edge (empty for a valid canvas).
    pub issues: Vec<String>,
}

impl Canvas {
    /// Every file node as `(node id, file)`, in z-order.
    pub fn file_nodes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::File { file, .. } => Some((n.id.as_str(), file.as_str())),
            _ => None,
        })
    }

    /// The vault files the canvas shows, as `(file, subpath)` pairs in z-order: a canvas file
    /// node is a link, so moving or renaming that file must update it.
    pub fn file_references(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            NodeKind::File { file, subpath } => Some((file.as_str(), subpath.as_deref())),
            _ => None,
        })
    }

    /// The node with this id (the first one, when ids are duplicated).
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }
}

/// One node of a canvas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Node {
    /// Unique id that edges refer to.
    pub id: String,
    /// Left edge, in canvas pixels.
    pub x: i64,
    /// Top edge, in canvas pixels.
    pub y: i64,
    /// Width in pixels.
    pub width: i64,
    /// Height in pixels.
    pub height: i64,
    /// `#RRGGBB`, or a preset `"1"` (red) to `"6"` (purple); as written even when invalid.
    pub color: Option<String>,
    /// What the node shows.
    #[serde(flatten)]
    pub kind: NodeKind,
}

/// What a node shows, by its `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum NodeKind {
    /// A card of Markdown text.
    Text {
        /// The Markdown.
        text: String,
    },
    /// A vault file (note, image, PDF...).
    File {
        /// Vault path of the file, with its extension.
        file: String,
        /// A heading or block inside it, starting with `#`.
        subpath: Option<String>,
    },
    /// A web page.
    Link {
        /// The page's URL.
        url: String,
    },
    /// A box that groups the nodes drawn inside it.
    Group {
        /// The group's title.
        label: Option<String>,
        /// Vault path of a background image.
        background: Option<String>,
        /// How the background image is drawn.
        #[serde(rename = "backgroundStyle")]
        background_style: Option<BackgroundStyle>,
    },
    /// A `type` the spec does not define (reported as an issue); kept so edges still resolve.
    Other {
        /// The `type` as written (empty when it was missing or not a string).
        node_type: String,
    },
}

/// How a group's background image is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundStyle {
    /// Fills the whole group.
    Cover,
    /// Keeps the image's aspect ratio.
    Ratio,
    /// Tiles the image.
    Repeat,
}

/// The side of a node an edge attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Top side.
    Top,
    /// Right side.
    Right,
    /// Bottom side.
    Bottom,
    /// Left side.
    Left,
}

/// What an edge's end looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EdgeEnd {
    /// No arrowhead.
    None,
    /// An arrowhead.
    Arrow,
}

/// One edge (a line between two nodes). Serialised with JSON Canvas's own field names
/// (`fromNode`, `toSide`...), so what `read_canvas` returns can be written back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// Unique id of the edge.
    pub id: String,
    /// Id of the node it starts at.
    pub from_node: String,
    /// Side of the start node, when given.
    pub from_side: Option<Side>,
    /// Shape at the start (`none` unless given).
    pub from_end: EdgeEnd,
    /// Id of the node it ends at.
    pub to_node: String,
    /// Side of the end node, when given.
    pub to_side: Option<Side>,
    /// Shape at the end (`arrow` unless given).
    pub to_end: EdgeEnd,
    /// `#RRGGBB` or a preset `"1"` to `"6"`; as written even when invalid.
    pub color: Option<String>,
    /// Text shown on the edge.
    pub label: Option<String>,
}

/// Parses and validates a JSON Canvas 1.0 document.
///
/// ```
/// use capvault::obsidian::canvas::{parse_canvas, EdgeEnd, NodeKind};
///
/// let c = parse_canvas(br##"{
///   "nodes": [
///     {"id": "a", "type": "file", "file": "Notes/Plan.md", "subpath": "#Goals",
///      "x": 0, "y": 0, "width": 400, "height": 300},
///     {"id": "b", "type": "text", "text": "Why?", "x": 500, "y": 0, "width": 200, "height": 100,
///      "color": "4"}
///   ],
///   "edges": [{"id": "e", "fromNode": "b", "toNode": "a", "toSide": "left"}]
/// }"##).unwrap();
/// assert!(c.issues.is_empty());
/// assert_eq!(c.file_references().collect::<Vec<_>>(), [("Notes/Plan.md", Some("#Goals"))]);
/// assert_eq!(c.edges[0].to_end, EdgeEnd::Arrow);
/// ```
pub fn parse_canvas(bytes: &[u8]) -> Result<Canvas, CanvasError> {
    if bytes.len() > MAX_CANVAS_BYTES {
        return Err(CanvasError::TooLarge {
            size: bytes.len(),
            max: MAX_CANVAS_BYTES,
        });
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| CanvasError::InvalidJson(e.to_string()))?;
    let Value::Object(top) = value else {
        return Err(CanvasError::NotAnObject);
    };
    let mut issues = Issues::default();
    let node_values = items(&top, "nodes", &mut issues)?;
    let edge_values = items(&top, "edges", &mut issues)?;

    let mut nodes = Vec::with_capacity(node_values.len());
    for (i, value) in node_values.iter().enumerate() {
        match value.as_object() {
            Some(obj) => nodes.push(parse_node(obj, &format!("nodes[{i}]"), &mut issues)),
            None => issues.push(format!("nodes[{i}] is not an object; skipped")),
        }
    }

    let mut node_ids: HashSet<&str> = HashSet::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        if !node.id.is_empty() && !node_ids.insert(node.id.as_str()) {
            issues.push(format!(
                "nodes[{i}]: id {} is used by an earlier node",
                quote(&node.id)
            ));
        }
    }

    let mut edges = Vec::with_capacity(edge_values.len());
    for (i, value) in edge_values.iter().enumerate() {
        match value.as_object() {
            Some(obj) => edges.push(parse_edge(obj, &format!("edges[{i}]"), &mut issues)),
            None => issues.push(format!("edges[{i}] is not an object; skipped")),
        }
    }

    let mut edge_ids: HashSet<&str> = HashSet::with_capacity(edges.len());
    for (i, edge) in edges.iter().enumerate() {
        let at = format!("edges[{i}] ({})", quote(&edge.id));
        if !edge.id.is_empty() && !edge_ids.insert(edge.id.as_str()) {
            issues.push(format!("{at}: id is used by an earlier edge"));
        }
        for (end, target) in [("fromNode", &edge.from_node), ("toNode", &edge.to_node)] {
            if !target.is_empty() && !node_ids.contains(target.as_str()) {
                issues.push(format!("{at}: {end} {} is not a node", quote(target)));
            }
        }
    }

    Ok(Canvas {
        nodes,
        edges,
        issues: issues.finish(),
    })
}

/// The issue list, bounded by [`MAX_ISSUES`].
#[derive(Default)]
struct Issues {
    list: Vec<String>,
    dropped: usize,
}

impl Issues {
    fn push(&mut self, issue: String) {
        if self.list.len() < MAX_ISSUES {
            self.list.push(issue);
        } else {
            self.dropped += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.list
                .push(format!("... and {} more issues", self.dropped));
        }
        self.list
    }
}

/// The `nodes` or `edges` array (absent or `null`: empty), with the count bound.
fn items<'a>(
    top: &'a Map<String, Value>,
    key: &'static str,
    issues: &mut Issues,
) -> Result<&'a [Value], CanvasError> {
    match top.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(list)) if list.len() > MAX_CANVAS_ITEMS => {
            Err(CanvasError::TooManyItems {
                what: key,
                count: list.len(),
                max: MAX_CANVAS_ITEMS,
            })
        }
        Some(Value::Array(list)) => Ok(list),
        Some(other) => {
            issues.push(format!(
                "`{key}` is {}, not an array; ignored",
                kind_of(other)
            ));
            Ok(&[])
        }
    }
}

fn parse_node(obj: &Map<String, Value>, at: &str, issues: &mut Issues) -> Node {
    let id = required_id(obj, "id", at, issues);
    let at = format!("{at} ({})", quote(&id));
    let at = at.as_str();
    let x = integer(obj, "x", at, issues);
    let y = integer(obj, "y", at, issues);
    let width = integer(obj, "width", at, issues);
    let height = integer(obj, "height", at, issues);
    let color = color(obj, at, issues);
    let kind = match obj.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "text" => NodeKind::Text {
                text: required_string(obj, "text", at, issues),
            },
            "file" => {
                let file = required_string(obj, "file", at, issues);
                let subpath = optional_string(obj, "subpath", at, issues);
                if let Some(s) = &subpath
                    && !s.starts_with('#')
                {
                    issues.push(format!(
                        "{at}: subpath {} does not start with `#`",
                        quote(s)
                    ));
                }
                NodeKind::File { file, subpath }
            }
            "link" => NodeKind::Link {
                url: required_string(obj, "url", at, issues),
            },
            "group" => NodeKind::Group {
                label: optional_string(obj, "label", at, issues),
                background: optional_string(obj, "background", at, issues),
                background_style: optional_string(obj, "backgroundStyle", at, issues).and_then(
                    |s| match s.as_str() {
                        "cover" => Some(BackgroundStyle::Cover),
                        "ratio" => Some(BackgroundStyle::Ratio),
                        "repeat" => Some(BackgroundStyle::Repeat),
                        _ => {
                            issues.push(format!(
                                "{at}: backgroundStyle {} is not cover, ratio or repeat",
                                quote(&s)
                            ));
                            None
                        }
                    },
                ),
            },
            _ => {
                issues.push(format!(
                    "{at}: type {} is not text, file, link or group",
                    quote(t)
                ));
                NodeKind::Other {
                    node_type: t.clone(),
                }
            }
        },
        None => {
            issues.push(format!("{at}: missing required field `type`"));
            NodeKind::Other {
                node_type: String::new(),
            }
        }
        Some(other) => {
            issues.push(format!("{at}: `type` is {}, not a string", kind_of(other)));
            NodeKind::Other {
                node_type: String::new(),
            }
        }
    };
    Node {
        id,
        x,
        y,
        width,
        height,
        color,
        kind,
    }
}

fn parse_edge(obj: &Map<String, Value>, at: &str, issues: &mut Issues) -> Edge {
    let id = required_id(obj, "id", at, issues);
    let at = format!("{at} ({})", quote(&id));
    let at = at.as_str();
    Edge {
        from_node: required_id(obj, "fromNode", at, issues),
        from_side: side(obj, "fromSide", at, issues),
        from_end: end(obj, "fromEnd", EdgeEnd::None, at, issues),
        to_node: required_id(obj, "toNode", at, issues),
        to_side: side(obj, "toSide", at, issues),
        to_end: end(obj, "toEnd", EdgeEnd::Arrow, at, issues),
        color: color(obj, at, issues),
        label: optional_string(obj, "label", at, issues),
        id,
    }
}

fn side(obj: &Map<String, Value>, key: &str, at: &str, issues: &mut Issues) -> Option<Side> {
    let s = optional_string(obj, key, at, issues)?;
    match s.as_str() {
        "top" => Some(Side::Top),
        "right" => Some(Side::Right),
        "bottom" => Some(Side::Bottom),
        "left" => Some(Side::Left),
        _ => {
            issues.push(format!(
                "{at}: {key} {} is not top, right, bottom or left",
                quote(&s)
            ));
            None
        }
    }
}

fn end(
    obj: &Map<String, Value>,
    key: &str,
    default: EdgeEnd,
    at: &str,
    issues: &mut Issues,
) -> EdgeEnd {
    match optional_string(obj, key, at, issues).as_deref() {
        None => default,
        Some("none") => EdgeEnd::None,
        Some("arrow") => EdgeEnd::Arrow,
        Some(other) => {
            issues.push(format!("{at}: {key} {} is not none or arrow", quote(other)));
            default
        }
    }
}

/// The optional `color`, kept as written; an issue when it is neither `#RRGGBB` nor a preset.
fn color(obj: &Map<String, Value>, at: &str, issues: &mut Issues) -> Option<String> {
    let c = optional_string(obj, "color", at, issues)?;
    if !is_valid_color(&c) {
        issues.push(format!(
            "{at}: color {} is neither #RRGGBB nor a preset \"1\" to \"6\"",
            quote(&c)
        ));
    }
    Some(c)
}

/// `#RRGGBB` (hex digits of either case) or one of the presets `"1"` to `"6"`.
pub fn is_valid_color(color: &str) -> bool {
    matches!(color, "1" | "2" | "3" | "4" | "5" | "6")
        || color
            .strip_prefix('#')
            .is_some_and(|hex| hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A required id (of a node or edge, or an edge's end): a string, and not empty, since an empty
/// id names nothing (an edge to `""` leads nowhere).
fn required_id(obj: &Map<String, Value>, key: &str, at: &str, issues: &mut Issues) -> String {
    let id = required_string(obj, key, at, issues);
    if id.is_empty() && matches!(obj.get(key), Some(Value::String(_))) {
        issues.push(format!("{at}: `{key}` is empty"));
    }
    id
}

fn required_string(obj: &Map<String, Value>, key: &str, at: &str, issues: &mut Issues) -> String {
    match obj.get(key) {
        Some(Value::String(s)) => s.clone(),
        None => {
            issues.push(format!("{at}: missing required field `{key}`"));
            String::new()
        }
        Some(other) => {
            issues.push(format!("{at}: `{key}` is {}, not a string", kind_of(other)));
            String::new()
        }
    }
}

/// An optional string field; `null` counts as absent, another type is an issue.
fn optional_string(
    obj: &Map<String, Value>,
    key: &str,
    at: &str,
    issues: &mut Issues,
) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            issues.push(format!("{at}: `{key}` is {}, not a string", kind_of(other)));
            None
        }
    }
}

/// A required integer field. Integral floats (`100.0`) are accepted; other numbers are rounded
/// (and clamped to `i64`) with an issue; a missing or non-numeric value reads as 0.
fn integer(obj: &Map<String, Value>, key: &str, at: &str, issues: &mut Issues) -> i64 {
    let Some(value) = obj.get(key) else {
        issues.push(format!("{at}: missing required field `{key}`"));
        return 0;
    };
    let Value::Number(n) = value else {
        issues.push(format!(
            "{at}: `{key}` is {}, not an integer",
            kind_of(value)
        ));
        return 0;
    };
    if let Some(i) = n.as_i64() {
        return i;
    }
    if n.as_u64().is_some() {
        issues.push(format!("{at}: `{key}` {n} is out of range"));
        return i64::MAX;
    }
    // Neither i64 nor u64: serde_json holds it as a finite f64.
    let f = n.as_f64().unwrap_or(0.0);
    // 2^63 as f64; every f64 strictly inside (-2^63, 2^63) converts to i64 exactly after rounding.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.fract() == 0.0 && f > -LIMIT && f < LIMIT {
        // Integral and in range: the cast is exact.
        return f as i64;
    }
    if f.fract() != 0.0 {
        issues.push(format!("{at}: `{key}` {n} is not an integer; rounded"));
    } else {
        issues.push(format!("{at}: `{key}` {n} is out of range"));
    }
    // `as` saturates at the i64 bounds (and NaN, impossible here, would give 0).
    f.round() as i64
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A piece of the document for an issue message: JSON-quoted and cut to [`MAX_QUOTE_CHARS`].
fn quote(s: &str) -> String {
    let mut cut: String = s.chars().take(MAX_QUOTE_CHARS).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Canvas {
        parse_canvas(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn issues_of(text: &str) -> Vec<String> {
        parse(text).issues
    }

    fn assert_issue(text: &str, needle: &str) {
        let issues = issues_of(text);
        assert!(
            issues.iter().any(|i| i.contains(needle)),
            "no issue containing {needle:?} in {issues:#?}"
        );
    }

    const SAMPLE: &str = r##"{
        "nodes": [
            {"id": "g1", "type": "group", "label": "Ideas", "x": -50, "y": -50, "width": 900,
             "height": 600, "background": "Attachments/bg.png", "backgroundStyle": "cover"},
            {"id": "t1", "type": "text", "text": "# Hello\n\n[[Note]]", "x": 0, "y": 0,
             "width": 250, "height": 60, "color": "1"},
            {"id": "f1", "type": "file", "file": "Projects/Plan.md", "subpath": "#^block-1",
             "x": 300, "y": 0, "width": 400, "height": 400, "color": "#FFaa00"},
            {"id": "l1", "type": "link", "url": "https://jsoncanvas.org", "x": 0, "y": 100,
             "width": 250, "height": 200}
        ],
        "edges": [
            {"id": "e1", "fromNode": "t1", "fromSide": "right", "toNode": "f1", "toSide": "left",
             "label": "details", "color": "6"},
            {"id": "e2", "fromNode": "l1", "toNode": "t1", "fromEnd": "arrow", "toEnd": "none"}
        ]
    }"##;

    #[test]
    fn a_valid_canvas_parses_without_issues() {
        let c = parse(SAMPLE);
        assert_eq!(c.issues, Vec::<String>::new());
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(
            c.nodes[0].kind,
            NodeKind::Group {
                label: Some("Ideas".into()),
                background: Some("Attachments/bg.png".into()),
                background_style: Some(BackgroundStyle::Cover),
            }
        );
        assert_eq!(
            (
                c.nodes[0].x,
                c.nodes[0].y,
                c.nodes[0].width,
                c.nodes[0].height
            ),
            (-50, -50, 900, 600)
        );
        assert_eq!(
            c.nodes[1].kind,
            NodeKind::Text {
                text: "# Hello\n\n[[Note]]".into()
            }
        );
        assert_eq!(c.nodes[1].color.as_deref(), Some("1"));
        assert_eq!(
            c.nodes[3].kind,
            NodeKind::Link {
                url: "https://jsoncanvas.org".into()
            }
        );
        assert_eq!(
            c.file_references().collect::<Vec<_>>(),
            [("Projects/Plan.md", Some("#^block-1"))]
        );
        assert_eq!(
            c.file_nodes().collect::<Vec<_>>(),
            [("f1", "Projects/Plan.md")]
        );
        assert_eq!(c.node("f1").map(|n| n.width), Some(400));
        assert_eq!(
            c.edges[0],
            Edge {
                id: "e1".into(),
                from_node: "t1".into(),
                from_side: Some(Side::Right),
                from_end: EdgeEnd::None,
                to_node: "f1".into(),
                to_side: Some(Side::Left),
                to_end: EdgeEnd::Arrow,
                color: Some("6".into()),
                label: Some("details".into()),
            }
        );
        assert_eq!(c.edges[1].from_end, EdgeEnd::Arrow);
        assert_eq!(c.edges[1].to_end, EdgeEnd::None);
        assert_eq!(c.edges[1].from_side, None);
    }

    #[test]
    fn nodes_and_edges_are_optional() {
        for text in [
            "{}",
            r#"{"nodes": []}"#,
            r#"{"edges": []}"#,
            r#"{"nodes": null, "edges": null}"#,
        ] {
            let c = parse(text);
            assert_eq!(c, Canvas::default(), "{text}");
        }
    }

    #[test]
    fn invalid_json_and_non_objects_are_errors() {
        for bad in [&b""[..], b"{", b"{\"nodes\": [}", b"\xff", b"{} {}"] {
            assert!(
                matches!(parse_canvas(bad), Err(CanvasError::InvalidJson(_))),
                "{bad:?}"
            );
        }
        for bad in [&b"[]"[..], b"null", b"42", b"\"canvas\""] {
            assert_eq!(parse_canvas(bad), Err(CanvasError::NotAnObject), "{bad:?}");
        }
    }

    #[test]
    fn byte_order_mark_is_skipped() {
        assert_eq!(parse_canvas(b"\xEF\xBB\xBF{}").unwrap(), Canvas::default());
    }

    #[test]
    fn integral_floats_are_accepted_and_fractions_reported() {
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "text", "text": "", "x": 100.0, "y": -20.0,
                "width": 250.5, "height": 1e2}]}"#,
        );
        let n = &c.nodes[0];
        assert_eq!((n.x, n.y, n.width, n.height), (100, -20, 251, 100));
        assert_eq!(c.issues.len(), 1, "{:?}", c.issues);
        assert!(
            c.issues[0].contains("`width` 250.5 is not an integer"),
            "{:?}",
            c.issues
        );
    }

    #[test]
    fn huge_and_non_numeric_coordinates_are_reported() {
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "text", "text": "", "x": 1e300, "y": "10",
                "width": 18446744073709551615, "height": -1e300}]}"#,
        );
        let n = &c.nodes[0];
        assert_eq!(
            (n.x, n.y, n.width, n.height),
            (i64::MAX, 0, i64::MAX, i64::MIN)
        );
        assert_eq!(c.issues.len(), 4, "{:?}", c.issues);
        assert!(
            c.issues
                .iter()
                .any(|i| i.contains("`y` is a string, not an integer"))
        );
    }

    #[test]
    fn missing_required_fields_are_reported() {
        let c = parse(r#"{"nodes": [{"type": "file"}], "edges": [{"id": "e"}]}"#);
        for field in [
            "`id`",
            "`x`",
            "`y`",
            "`width`",
            "`height`",
            "`file`",
            "`fromNode`",
            "`toNode`",
        ] {
            assert!(
                c.issues
                    .iter()
                    .any(|i| i.contains(&format!("missing required field {field}"))),
                "{field}: {:#?}",
                c.issues
            );
        }
        assert_eq!(
            c.nodes[0].kind,
            NodeKind::File {
                file: String::new(),
                subpath: None
            }
        );
        assert_issue(
            r#"{"nodes": [{"id": "t", "type": "text", "x": 0, "y": 0, "width": 1, "height": 1}]}"#,
            "missing required field `text`",
        );
        assert_issue(
            r#"{"nodes": [{"id": "l", "type": "link", "x": 0, "y": 0, "width": 1, "height": 1}]}"#,
            "missing required field `url`",
        );
        assert_issue(
            r#"{"nodes": [{"id": "n", "x": 0, "y": 0, "width": 1, "height": 1}]}"#,
            "missing required field `type`",
        );
    }

    #[test]
    fn duplicate_ids_are_reported() {
        let c = parse(
            r#"{"nodes": [
                {"id": "a", "type": "text", "text": "1", "x": 0, "y": 0, "width": 1, "height": 1},
                {"id": "a", "type": "text", "text": "2", "x": 0, "y": 0, "width": 1, "height": 1}
               ],
               "edges": [
                {"id": "e", "fromNode": "a", "toNode": "a"},
                {"id": "e", "fromNode": "a", "toNode": "a"}
               ]}"#,
        );
        assert_eq!(c.nodes.len(), 2, "both nodes are kept");
        assert_eq!(c.issues.len(), 2, "{:#?}", c.issues);
        assert!(c.issues[0].contains("nodes[1]: id \"a\" is used by an earlier node"));
        assert!(c.issues[1].contains("edges[1] (\"e\"): id is used by an earlier edge"));
    }

    #[test]
    fn edges_to_unknown_nodes_are_reported() {
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "text", "text": "", "x": 0, "y": 0, "width": 1, "height": 1}],
                "edges": [{"id": "e", "fromNode": "a", "toNode": "ghost"}]}"#,
        );
        assert_eq!(
            c.issues,
            vec!["edges[0] (\"e\"): toNode \"ghost\" is not a node"]
        );
        assert_eq!(c.edges[0].to_node, "ghost");
    }

    #[test]
    fn empty_ids_and_edge_ends_are_reported() {
        // Found by the canvas fuzz target: an edge to "" passed as valid.
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "text", "text": "", "x": 0, "y": 0, "width": 1, "height": 1},
                          {"id": "", "type": "text", "text": "", "x": 0, "y": 0, "width": 1, "height": 1}],
                "edges": [{"id": "e", "fromNode": "a", "toNode": ""}]}"#,
        );
        assert_eq!(
            c.issues,
            vec![
                "nodes[1]: `id` is empty",
                "edges[0] (\"e\"): `toNode` is empty"
            ]
        );
    }

    #[test]
    fn colors_must_be_hex_or_presets() {
        for ok in ["1", "6", "#000000", "#ffAA09"] {
            assert!(is_valid_color(ok), "{ok}");
        }
        for bad in [
            "0", "7", "red", "#fff", "#GGGGGG", "#0000000", "FF0000", "", "#ff00ff ",
        ] {
            assert!(!is_valid_color(bad), "{bad}");
        }
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "text", "text": "", "x": 0, "y": 0, "width": 1,
                "height": 1, "color": "red"}],
               "edges": [{"id": "e", "fromNode": "a", "toNode": "a", "color": 3}]}"#,
        );
        assert_eq!(c.nodes[0].color.as_deref(), Some("red"), "kept as written");
        assert_eq!(c.edges[0].color, None);
        assert_eq!(c.issues.len(), 2, "{:#?}", c.issues);
        assert!(c.issues[0].contains("color \"red\" is neither"));
        assert!(c.issues[1].contains("`color` is a number"));
    }

    #[test]
    fn bad_sides_ends_and_styles_fall_back_with_an_issue() {
        let c = parse(
            r#"{"nodes": [
                 {"id": "a", "type": "group", "x": 0, "y": 0, "width": 1, "height": 1,
                  "backgroundStyle": "stretch"},
                 {"id": "f", "type": "file", "file": "x.md", "subpath": "Heading",
                  "x": 0, "y": 0, "width": 1, "height": 1}
               ],
               "edges": [{"id": "e", "fromNode": "a", "toNode": "a", "fromSide": "middle",
                          "toSide": "LEFT", "fromEnd": "circle", "toEnd": "dot"}]}"#,
        );
        let e = &c.edges[0];
        assert_eq!((e.from_side, e.to_side), (None, None));
        assert_eq!((e.from_end, e.to_end), (EdgeEnd::None, EdgeEnd::Arrow));
        assert_eq!(
            c.nodes[0].kind,
            NodeKind::Group {
                label: None,
                background: None,
                background_style: None
            }
        );
        assert_eq!(c.issues.len(), 6, "{:#?}", c.issues);
        assert!(
            c.issues
                .iter()
                .any(|i| i.contains("subpath \"Heading\" does not start with `#`"))
        );
        assert!(
            c.issues
                .iter()
                .any(|i| i.contains("backgroundStyle \"stretch\""))
        );
    }

    #[test]
    fn unknown_node_types_are_kept_and_reported() {
        let c = parse(
            r#"{"nodes": [{"id": "a", "type": "sticker", "x": 0, "y": 0, "width": 1, "height": 1}],
                "edges": [{"id": "e", "fromNode": "a", "toNode": "a"}]}"#,
        );
        assert_eq!(
            c.nodes[0].kind,
            NodeKind::Other {
                node_type: "sticker".into()
            }
        );
        assert_eq!(
            c.issues.len(),
            1,
            "the edge still resolves: {:#?}",
            c.issues
        );
    }

    #[test]
    fn non_object_items_and_non_array_lists_are_reported() {
        let c = parse(r#"{"nodes": [1, "x", null], "edges": {"id": "e"}}"#);
        assert!(c.nodes.is_empty() && c.edges.is_empty());
        assert_eq!(c.issues.len(), 4, "{:#?}", c.issues);
        assert!(c.issues[0].starts_with("`edges` is an object, not an array"));
        assert!(c.issues[1].starts_with("nodes[0] is not an object"));
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let c = parse(
            r#"{"version": 2, "metadata": {"x": 1}, "nodes": [{"id": "a", "type": "text", "text": "",
                "x": 0, "y": 0, "width": 1, "height": 1, "styleAttributes": {}, "z": 3}]}"#,
        );
        assert!(c.issues.is_empty(), "{:#?}", c.issues);
    }

    #[test]
    fn issues_quote_long_values_briefly() {
        let long = "x".repeat(10_000);
        let text = format!(
            r#"{{"nodes": [{{"id": "{long}", "type": "text", "text": "", "x": 0, "y": 0, "width": 1, "height": 1, "color": "{long}"}}]}}"#
        );
        let c = parse(&text);
        assert_eq!(c.issues.len(), 1);
        assert!(c.issues[0].len() < 300, "{}", c.issues[0]);
        assert!(c.issues[0].contains('…'));
    }

    #[test]
    fn issue_list_is_bounded() {
        let edges: Vec<String> = (0..MAX_ISSUES + 50)
            .map(|i| format!(r#"{{"id": "e{i}", "fromNode": "a", "toNode": "a"}}"#))
            .collect();
        let text = format!(r#"{{"edges": [{}]}}"#, edges.join(","));
        let c = parse(&text);
        assert_eq!(c.edges.len(), MAX_ISSUES + 50);
        assert_eq!(c.issues.len(), MAX_ISSUES + 1);
        assert_eq!(
            c.issues.last().map(String::as_str),
            Some("... and 1100 more issues")
        );
    }

    #[test]
    fn oversized_documents_are_refused() {
        let mut big = b"{\"nodes\": [], \"pad\": \"".to_vec();
        big.resize(MAX_CANVAS_BYTES + 1, b'x');
        assert_eq!(
            parse_canvas(&big),
            Err(CanvasError::TooLarge {
                size: MAX_CANVAS_BYTES + 1,
                max: MAX_CANVAS_BYTES
            })
        );
        let nodes = vec!["{}"; MAX_CANVAS_ITEMS + 1].join(",");
        let text = format!(r#"{{"nodes": [{nodes}]}}"#);
        assert_eq!(
            parse_canvas(text.as_bytes()),
            Err(CanvasError::TooManyItems {
                what: "nodes",
                count: MAX_CANVAS_ITEMS + 1,
                max: MAX_CANVAS_ITEMS
            })
        );
        let edges = vec!["0"; MAX_CANVAS_ITEMS + 1].join(",");
        let text = format!(r#"{{"edges": [{edges}]}}"#);
        assert!(matches!(
            parse_canvas(text.as_bytes()),
            Err(CanvasError::TooManyItems { what: "edges", .. })
        ));
    }

    #[test]
    fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
        let deep = format!(
            "{{\"nodes\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(
            parse_canvas(deep.as_bytes()),
            Err(CanvasError::InvalidJson(_))
        ));
    }

    #[test]
    fn reply_serialises_with_json_canvas_field_names_and_type_tags() {
        let c = parse(SAMPLE);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["nodes"][2]["type"], "file");
        assert_eq!(v["nodes"][2]["file"], "Projects/Plan.md");
        assert_eq!(v["nodes"][0]["backgroundStyle"], "cover");
        assert_eq!(v["edges"][0]["fromNode"], "t1");
        assert_eq!(v["edges"][0]["toEnd"], "arrow");
        let schema = schemars::schema_for!(Canvas);
        let schema = serde_json::to_string(&schema).unwrap();
        assert!(schema.contains("fromNode") && schema.contains("backgroundStyle"));
        assert!(!schema.contains("from_node"), "{schema}");
    }
}
