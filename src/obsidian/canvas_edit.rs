//! Building and changing JSON Canvas documents: nodes and edges added, updated and removed (a
//! removed node takes its edges with it), every field capvault does not know kept, and the
//! result validated against JSON Canvas 1.0 ([`super::canvas::parse_canvas`]) before it may be
//! written. Written as Obsidian writes canvases: tab-indented JSON.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::canvas::{MAX_CANVAS_BYTES, MAX_CANVAS_ITEMS, parse_canvas};

/// One change to a canvas. Its schema (its `JsonSchema` impl) is one object with an `op` and
/// the fields each op takes, not a `oneOf` of six: a third of the size in every `tools/list`,
/// while serde still checks each op's own fields (`deny_unknown_fields`).
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CanvasOp {
    /// Adds a node (`id` made up when missing).
    AddNode {
        /// The node, with JSON Canvas fields (`type`, `x`, `y`, `width`, `height`, and `text`,
        /// `file`, `url` or `label` by type).
        node: Map<String, Value>,
    },
    /// Sets fields of a node (`null` removes one); its `id` cannot change.
    UpdateNode {
        // The node's id (described by the op).
        id: String,
        // Fields to set (described by the op).
        set: Map<String, Value>,
    },
    /// Removes a node and every edge attached to it.
    RemoveNode {
        // The node's id (described by the op).
        id: String,
    },
    /// Adds an edge (`id` made up when missing).
    AddEdge {
        /// The edge, with JSON Canvas fields (`fromNode`, `toNode`, `fromSide`, `toSide`,
        /// `toEnd`, `label`, `color`).
        edge: Map<String, Value>,
    },
    /// Sets fields of an edge (`null` removes one); its `id` cannot change.
    UpdateEdge {
        // The edge's id (described by the op).
        id: String,
        // Fields to set (described by the op).
        set: Map<String, Value>,
    },
    /// Removes an edge.
    RemoveEdge {
        // The edge's id (described by the op).
        id: String,
    },
}

impl schemars::JsonSchema for CanvasOp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CanvasOp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "`add_node` {node}, `update_node` {id, set}, `remove_node` {id} (its edges too), `add_edge` {edge}, `update_edge` {id, set}, `remove_edge` {id}. Nodes and edges have JSON Canvas fields (`type`, `x`, `y`, `width`, `height`, `text`/`file`/`url`/`label`; `fromNode`, `toNode`, `fromSide`, `toSide`, `toEnd`, `label`, `color`); a missing `id` is made up; `null` in `set` removes a field; ids cannot change.",
            "type": "object",
            "properties": {
                "op": {
                    "type": "string",
                    "enum": ["add_node", "update_node", "remove_node", "add_edge", "update_edge", "remove_edge"]
                },
                "id": { "type": "string" },
                "node": { "type": "object" },
                "edge": { "type": "object" },
                "set": { "type": "object" }
            },
            "required": ["op"]
        })
    }
}

/// Why a canvas cannot be built or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanvasEditError {
    /// The existing file is not a canvas capvault can change.
    #[error("the canvas cannot be read: {0}")]
    Unreadable(String),
    /// An operation does not apply.
    #[error("operation {index}: {reason}")]
    Op {
        /// 1-based.
        index: usize,
        /// Why.
        reason: OpError,
    },
    /// The result would break JSON Canvas 1.0.
    #[error("the result would not be a valid JSON Canvas: {0}")]
    Invalid(String),
}

/// Why one operation does not apply ([`CanvasEditError::Op`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// A new item's `id` is not a string.
    #[error("`id` must be a string")]
    IdNotString,
    /// A new item's `id` is taken.
    #[error("there is already an item with id `{0}`")]
    DuplicateId(String),
    /// The canvas holds its most items already.
    #[error("the canvas is full")]
    Full,
    /// An update sets `id`.
    #[error("an item's `id` cannot change")]
    IdChange,
    /// An update names an id that no item, or more than one, has.
    #[error("no single item with id `{id}` in {list}")]
    NotSingle { id: String, list: &'static str },
    /// A removal names an id no item has.
    #[error("no item with id `{id}` in {list}")]
    NotFound { id: String, list: &'static str },
}

/// A new canvas from `doc` (`{nodes, edges}`), validated.
pub fn build(
    doc: &Map<String, Value>,
    mut new_id: impl FnMut() -> String,
) -> Result<String, CanvasEditError> {
    let mut doc = doc.clone();
    for list in ["nodes", "edges"] {
        let entry = doc.entry(list).or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(items) = entry else {
            return Err(CanvasEditError::Invalid(format!("`{list}` must be a list")));
        };
        for item in items.iter_mut() {
            if let Value::Object(o) = item
                && !o.contains_key("id")
            {
                o.insert("id".into(), Value::String(new_id()));
            }
        }
    }
    finish(&Value::Object(doc), &[])
}

/// `text` (an existing canvas) with `ops` applied, all or none, validated. Issues the canvas
/// already had are tolerated; new ones are refused.
pub fn apply(
    text: &[u8],
    ops: &[CanvasOp],
    mut new_id: impl FnMut() -> String,
) -> Result<String, CanvasEditError> {
    let before = parse_canvas(text).map_err(|e| CanvasEditError::Unreadable(e.to_string()))?;
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    let mut doc: Value = if text.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Map::new())
    } else {
        serde_json::from_slice(text).map_err(|e| CanvasEditError::Unreadable(e.to_string()))?
    };
    let Value::Object(root) = &mut doc else {
        return Err(CanvasEditError::Unreadable("not a JSON object".to_owned()));
    };
    for list in ["nodes", "edges"] {
        if !root.get(list).is_some_and(Value::is_array) {
            root.insert(list.into(), Value::Array(Vec::new()));
        }
    }
    for (i, op) in ops.iter().enumerate() {
        let fail = |reason: OpError| CanvasEditError::Op {
            index: i + 1,
            reason,
        };
        match op {
            CanvasOp::AddNode { node } => add(root, "nodes", node, &mut new_id).map_err(fail)?,
            CanvasOp::AddEdge { edge } => add(root, "edges", edge, &mut new_id).map_err(fail)?,
            CanvasOp::UpdateNode { id, set } => update(root, "nodes", id, set).map_err(fail)?,
            CanvasOp::UpdateEdge { id, set } => update(root, "edges", id, set).map_err(fail)?,
            CanvasOp::RemoveNode { id } => {
                remove(root, "nodes", id).map_err(fail)?;
                if let Some(Value::Array(edges)) = root.get_mut("edges") {
                    edges.retain(|e| {
                        e.get("fromNode").and_then(Value::as_str) != Some(id)
                            && e.get("toNode").and_then(Value::as_str) != Some(id)
                    });
                }
            }
            CanvasOp::RemoveEdge { id } => remove(root, "edges", id).map_err(fail)?,
        }
    }
    finish(&doc, &before.issues)
}

fn items<'a>(root: &'a mut Map<String, Value>, list: &str) -> &'a mut Vec<Value> {
    match root.entry(list).or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(a) => a,
        other => {
            *other = Value::Array(Vec::new());
            match other {
                Value::Array(a) => a,
                // Infallible: `other` was set to an array on the line above.
                _ => unreachable!("just set to an array"),
            }
        }
    }
}

fn has_id(v: &Value, id: &str) -> bool {
    v.get("id").and_then(Value::as_str) == Some(id)
}

fn add(
    root: &mut Map<String, Value>,
    list: &str,
    item: &Map<String, Value>,
    new_id: &mut impl FnMut() -> String,
) -> Result<(), OpError> {
    let mut item = item.clone();
    let id = match item.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(_) => return Err(OpError::IdNotString),
        None => {
            let id = new_id();
            item.insert("id".into(), Value::String(id.clone()));
            id
        }
    };
    let all = items(root, list);
    if all.iter().any(|v| has_id(v, &id)) {
        return Err(OpError::DuplicateId(id));
    }
    if all.len() >= MAX_CANVAS_ITEMS {
        return Err(OpError::Full);
    }
    all.push(Value::Object(item));
    Ok(())
}

fn update(
    root: &mut Map<String, Value>,
    list: &'static str,
    id: &str,
    set: &Map<String, Value>,
) -> Result<(), OpError> {
    if set.contains_key("id") {
        return Err(OpError::IdChange);
    }
    let all = items(root, list);
    let mut found = all.iter_mut().filter(|v| has_id(v, id));
    let (Some(Value::Object(o)), None) = (found.next(), found.next()) else {
        return Err(OpError::NotSingle {
            id: id.to_owned(),
            list,
        });
    };
    for (k, v) in set {
        if v.is_null() {
            o.remove(k);
        } else {
            o.insert(k.clone(), v.clone());
        }
    }
    Ok(())
}

fn remove(root: &mut Map<String, Value>, list: &'static str, id: &str) -> Result<(), OpError> {
    let all = items(root, list);
    let n = all.len();
    all.retain(|v| !has_id(v, id));
    if all.len() == n {
        return Err(OpError::NotFound {
            id: id.to_owned(),
            list,
        });
    }
    Ok(())
}

/// Writes `doc` tab-indented and checks it: a JSON Canvas with no issue beyond `tolerated`.
fn finish(doc: &Value, tolerated: &[String]) -> Result<String, CanvasEditError> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"\t");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(doc, &mut ser)
        .map_err(|e| CanvasEditError::Invalid(e.to_string()))?;
    if out.len() > MAX_CANVAS_BYTES {
        return Err(CanvasEditError::Invalid(
            "larger than the canvas size limit".to_owned(),
        ));
    }
    let parsed = parse_canvas(&out).map_err(|e| CanvasEditError::Invalid(e.to_string()))?;
    if let Some(issue) = parsed.issues.iter().find(|i| !tolerated.contains(i)) {
        return Err(CanvasEditError::Invalid(issue.clone()));
    }
    String::from_utf8(out).map_err(|e| CanvasEditError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("gen{n}")
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn removing_a_node_takes_its_edges_and_unknown_fields_stay() {
        let text = br#"{"nodes":[
            {"id":"a","type":"text","text":"A","x":0,"y":0,"width":10,"height":10,"custom":{"k":1}},
            {"id":"b","type":"text","text":"B","x":20,"y":0,"width":10,"height":10}],
          "edges":[{"id":"e","fromNode":"a","toNode":"b"}],"extra":true}"#;
        let out = apply(text, &[CanvasOp::RemoveNode { id: "b".into() }], ids()).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["edges"], json!([]));
        assert_eq!(v["nodes"][0]["custom"], json!({"k": 1}));
        assert_eq!(v["extra"], true);
        assert!(out.contains("\n\t\"edges\""), "tab-indented: {out}");
    }

    #[test]
    fn edits_are_validated_and_all_or_nothing() {
        let text = br#"{"nodes":[{"id":"a","type":"text","text":"A","x":0,"y":0,"width":10,"height":10}],"edges":[]}"#;
        let ops = [
            CanvasOp::AddNode {
                node: obj(
                    json!({"type": "file", "file": "N.md", "x": 0, "y": 20, "width": 5, "height": 5}),
                ),
            },
            CanvasOp::AddEdge {
                edge: obj(json!({"fromNode": "a", "toNode": "gen1", "toSide": "left"})),
            },
            CanvasOp::UpdateNode {
                id: "a".into(),
                set: obj(json!({"text": "A2", "color": "3"})),
            },
        ];
        let out = apply(text, &ops, ids()).unwrap();
        let c = parse_canvas(out.as_bytes()).unwrap();
        assert!(c.issues.is_empty(), "{:?}", c.issues);
        assert_eq!(c.edges[0].to_node, "gen1");
        // An edge to a missing node, a duplicate id, an id change: refused.
        let bad = [CanvasOp::AddEdge {
            edge: obj(json!({"fromNode": "a", "toNode": "zzz"})),
        }];
        assert!(matches!(
            apply(text, &bad, ids()),
            Err(CanvasEditError::Invalid(_))
        ));
        let dup = [CanvasOp::AddNode {
            node: obj(
                json!({"id": "a", "type": "text", "text": "x", "x": 0, "y": 0, "width": 1, "height": 1}),
            ),
        }];
        assert!(matches!(
            apply(text, &dup, ids()),
            Err(CanvasEditError::Op { index: 1, .. })
        ));
        let rename = [CanvasOp::UpdateNode {
            id: "a".into(),
            set: obj(json!({"id": "b"})),
        }];
        assert!(apply(text, &rename, ids()).is_err());
        let missing_size = [CanvasOp::AddNode {
            node: obj(json!({"type": "text", "text": "x"})),
        }];
        assert!(matches!(
            apply(text, &missing_size, ids()),
            Err(CanvasEditError::Invalid(_))
        ));
    }
}
