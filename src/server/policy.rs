//! Which tools a server lists, under which names: profiles (`--tools`), and the config file's
//! disabled tools and name and description overrides. Built once per server from the tool
//! router; every session of that server shares it.

use std::collections::{BTreeMap, BTreeSet};

use rmcp::model::Tool;
use serde_json::Value;

/// The reading tools: the `read` profile, taken once from the routers that are served without
/// `--write`. The write tools (listed only with `--write`) are not here, so `--tools read` keeps
/// a `--write` server read-only, and a tool added to the write router is refused to read-only
/// credentials without another list to update.
pub fn read_tools() -> &'static BTreeSet<String> {
    static READ: std::sync::LazyLock<BTreeSet<String>> = std::sync::LazyLock::new(|| {
        super::CapvaultServer::read_tool_names()
            .into_iter()
            .collect()
    });
    &READ
}

/// A refused tool profile, tool name or override.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No tool has this name; `known` lists them all.
    #[error("unknown tool `{name}`; tools: {known}")]
    UnknownTool {
        /// The name given.
        name: String,
        /// Every tool name, comma-separated.
        known: String,
    },
    /// An override's name breaks the MCP tool-name rule.
    #[error("tool name `{0}` is not allowed: use 1 to 64 letters, digits, `_`, `-` or `.`")]
    BadToolName(String),
    /// A profile that names nothing.
    #[error("a tool profile needs `all`, `read`, `minimal` or tool names")]
    EmptyProfile,
    /// Overrides give two tools one name.
    #[error("two tools would be called `{0}`")]
    SameName(String),
}

/// Former tool names that still answer, unlisted, as the tool that replaced them, with an
/// argument the old name implied: a client configured with the old name, or a saved prompt
/// that names it, keeps working with the same arguments and the same reply fields. `--tools`,
/// the config file and token files accept them.
pub const ALIASES: &[Alias] = &[
    Alias {
        old: "get_daily_note",
        new: "get_periodic_note",
        implied: None,
    },
    Alias {
        old: "append_daily_note",
        new: "append_periodic_note",
        implied: None,
    },
    Alias {
        old: "create_daily_note",
        new: "create_note",
        implied: Some(("period", "day")),
    },
];

/// A former tool name.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// The name clients used to call.
    pub old: &'static str,
    /// The tool (its name in the code) that answers it.
    pub new: &'static str,
    /// An argument the old name meant, added when the call leaves it out.
    pub implied: Option<(&'static str, &'static str)>,
}

/// The current name of `name` (itself unless it is a former name).
pub fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|a| a.old == name)
        .map_or(name, |a| a.new)
}

/// The smallest useful set.
pub const MINIMAL_TOOLS: &[&str] = &["list_notes", "read_note", "search_notes"];

/// How one tool is shown to clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Override {
    /// The name clients see and call (for namespacing several vaults in one agent).
    pub name: Option<String>,
    /// The description clients see.
    pub description: Option<String>,
}

/// Which tools are offered, and how they are shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// Only these tools (`None`: every tool).
    only: Option<BTreeSet<String>>,
    /// Tools taken away (the config file's `disabled`).
    disabled: BTreeSet<String>,
    /// Names and descriptions changed, by tool name.
    overrides: BTreeMap<String, Override>,
}

impl ToolPolicy {
    /// Every tool, as named in the code.
    pub fn all() -> Self {
        ToolPolicy::default()
    }

    /// A `--tools` value: `all`, `read`, `minimal`, or a comma-separated list of tool names.
    /// Names are checked against `known`.
    pub fn from_spec(spec: &str, known: &[String]) -> Result<Self, PolicyError> {
        Ok(ToolPolicy {
            only: profile_tools(spec, known)?,
            ..ToolPolicy::default()
        })
    }

    /// Also takes `name` away. Checked against `known`.
    pub fn disable(&mut self, name: &str, known: &[String]) -> Result<(), PolicyError> {
        let name = canonical(name);
        check_known(name, known)?;
        self.disabled.insert(name.to_owned());
        Ok(())
    }

    /// Shows `tool` as `o` says. Checked against `known`.
    pub fn set_override(
        &mut self,
        tool: &str,
        o: Override,
        known: &[String],
    ) -> Result<(), PolicyError> {
        let tool = canonical(tool);
        check_known(tool, known)?;
        if let Some(n) = &o.name
            && !valid_tool_name(n)
        {
            return Err(PolicyError::BadToolName(n.clone()));
        }
        self.overrides.insert(tool.to_owned(), o);
        Ok(())
    }

    /// True when `tool` (its name in the code) is offered.
    pub fn allows(&self, tool: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(tool)) && !self.disabled.contains(tool)
    }

    /// The tools offered out of `tools`, renamed and re-described, their schemas cleaned, with
    /// the map from the names clients call to the names in the code. Fails when two tools would
    /// share a name.
    pub fn apply(
        &self,
        tools: Vec<Tool>,
    ) -> Result<(Vec<Tool>, BTreeMap<String, String>), PolicyError> {
        let mut listed = Vec::new();
        let mut names = BTreeMap::new();
        for mut tool in tools {
            let internal = tool.name.to_string();
            if !self.allows(&internal) {
                continue;
            }
            if let Some(d) = &tool.description {
                tool.description = Some(unwrapped(d).into());
            }
            if let Some(o) = self.overrides.get(&internal) {
                if let Some(n) = &o.name {
                    tool.name = n.clone().into();
                }
                if let Some(d) = &o.description {
                    tool.description = Some(d.clone().into());
                }
            }
            tool.input_schema = std::sync::Arc::new(lean_input(&cleaned(&tool.input_schema)));
            if let Some(out) = &tool.output_schema {
                tool.output_schema = Some(std::sync::Arc::new(outline(out)));
            }
            if let Some(a) = tool.annotations.as_mut() {
                spec_defaults_left_out(a);
            }
            if names
                .insert(tool.name.to_string(), internal.clone())
                .is_some()
            {
                return Err(PolicyError::SameName(tool.name.to_string()));
            }
            listed.push(tool);
        }
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        let offered: BTreeSet<String> = names.values().cloned().collect();
        for a in ALIASES {
            if offered.contains(a.new) && !names.contains_key(a.old) {
                names.insert(a.old.to_owned(), a.new.to_owned());
            }
        }
        Ok((listed, names))
    }
}

/// The tools a profile names (`None` for `all`): `read`, `minimal`, or a comma-separated list
/// of tool names checked against `known`. Shared by `--tools` and the token file.
pub fn profile_tools(
    spec: &str,
    known: &[String],
) -> Result<Option<BTreeSet<String>>, PolicyError> {
    Ok(match spec.trim() {
        "all" => None,
        "read" => Some(read_tools().clone()),
        "minimal" => Some(MINIMAL_TOOLS.iter().map(|s| (*s).to_owned()).collect()),
        list => {
            let names: BTreeSet<String> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| canonical(s).to_owned())
                .collect();
            if names.is_empty() {
                return Err(PolicyError::EmptyProfile);
            }
            for n in &names {
                check_known(n, known)?;
            }
            Some(names)
        }
    })
}

fn check_known(name: &str, known: &[String]) -> Result<(), PolicyError> {
    if known.iter().any(|k| k == name) {
        Ok(())
    } else {
        Err(PolicyError::UnknownTool {
            name: name.to_owned(),
            known: known.join(", "),
        })
    }
}

/// The MCP spec's tool-name rule (SEP-986): 1 to 64 of `A-Za-z0-9_-.`.
fn valid_tool_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Formats JSON Schema 2020-12 defines; schemars adds its own (`uint32`, `int64`, `double`...),
/// which standard validators warn about.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// `schema` as standard JSON Schema 2020-12: private `format`s removed (unsigned integers keep
/// their `minimum: 0`), and no `$schema` (2020-12 is MCP's default dialect; the key cost 50
/// bytes in each of two schemas per tool).
pub fn cleaned(schema: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut v = Value::Object(schema.clone());
    clean(&mut v);
    match v {
        Value::Object(mut o) => {
            o.remove("$schema");
            o
        }
        _ => serde_json::Map::new(),
    }
}

/// `text` with its wrapped lines joined: a doc comment's line breaks fall inside sentences; a
/// blank line (a paragraph break) is kept as one line break.
pub fn unwrapped(text: &str) -> String {
    text.split("\n\n")
        .map(|para| para.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An input schema without repeats: the property that uses an enumeration says what each value
/// means, so the enumeration is one `enum` list (no per-value descriptions, no description of
/// its own); descriptions unwrapped; an optional property's `null` alternative left out (the
/// property may be left out instead), defaults that say nothing (`false`, `""`, `[]`, `{}`)
/// and boolean `additionalProperties` dropped.
pub fn lean_input(schema: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut o = schema.clone();
    lean_defs(&mut o);
    inline_single_use_defs(&mut o);
    let mut v = Value::Object(o);
    compact_input(&mut v);
    match v {
        Value::Object(o) => o,
        _ => serde_json::Map::new(),
    }
}

/// True for a default a model would assume anyway.
fn says_nothing(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn compact_input(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(d)) = o.get("description") {
                let d = unwrapped(d);
                o.insert("description".into(), Value::String(d));
            }
            if o.get("default").is_some_and(says_nothing) {
                o.remove("default");
            }
            // `true` is JSON Schema's default; `false` the server enforces itself, with an
            // error naming the unknown argument (40 bytes a tool otherwise).
            if o.get("additionalProperties").is_some_and(Value::is_boolean) {
                o.remove("additionalProperties");
            }
            // `["string", "null"]` → `"string"`.
            if let Some(Value::Array(ts)) = o.get("type")
                && ts.len() == 2
                && ts.contains(&Value::String("null".into()))
                && let Some(t) = ts.iter().find(|t| t.as_str() != Some("null")).cloned()
            {
                o.insert("type".into(), t);
            }
            // `anyOf: [X, {"type": "null"}]` → X.
            let null = serde_json::json!({"type": "null"});
            if let Some(Value::Array(alts)) = o.get("anyOf")
                && alts.len() == 2
                && alts.contains(&null)
                && let Some(Value::Object(x)) = alts.iter().find(|a| **a != null).cloned()
            {
                o.remove("anyOf");
                for (k, val) in x {
                    o.entry(k).or_insert(val);
                }
            }
            o.values_mut().for_each(compact_input);
        }
        Value::Array(a) => a.iter_mut().for_each(compact_input),
        _ => {}
    }
}

/// Leaves out the hints that say what the spec's defaults say (`readOnlyHint` false,
/// `destructiveHint` true, `idempotentHint` false, `openWorldHint` true), and the two the spec
/// gives meaning only when `readOnlyHint` is false: about 500 bytes of every `tools/list` with
/// `--write`, and nothing a client reads differently.
fn spec_defaults_left_out(a: &mut rmcp::model::ToolAnnotations) {
    if a.read_only_hint == Some(true) {
        a.destructive_hint = None;
        a.idempotent_hint = None;
    }
    if a.read_only_hint == Some(false) {
        a.read_only_hint = None;
    }
    if a.destructive_hint == Some(true) {
        a.destructive_hint = None;
    }
    if a.idempotent_hint == Some(false) {
        a.idempotent_hint = None;
    }
    if a.open_world_hint == Some(true) {
        a.open_world_hint = None;
    }
}

/// An output schema reduced to the reply's outline: an object and the fields every reply has.
/// It still checks each reply's top level, and costs a line instead of a page in every
/// `tools/list` (docs/tools.md and docs/guide.md say what each field holds; the reply shows it).
pub fn outline(schema: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut o = serde_json::Map::new();
    o.insert("type".into(), Value::String("object".into()));
    if let Some(r @ Value::Array(a)) = schema.get("required")
        && !a.is_empty()
    {
        o.insert("required".into(), r.clone());
    }
    o
}

fn lean_defs(o: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Object(defs)) = o.get_mut("$defs") {
        for def in defs.values_mut() {
            if let Value::Object(d) = def {
                if d.get("description").is_some_and(Value::is_string) {
                    d.remove("description");
                }
                if let Some(values) = const_values(d) {
                    d.remove("oneOf");
                    d.insert("type".into(), Value::String("string".into()));
                    d.insert("enum".into(), Value::Array(values));
                }
            }
        }
    }
}

/// Writes each definition used once in place of its `$ref` (a `$ref` and a `$defs` entry
/// cost more than the schema itself), innermost first; definitions used twice, or in a cycle,
/// stay in `$defs`.
fn inline_single_use_defs(root: &mut serde_json::Map<String, Value>) {
    fn refs<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r);
                }
                o.values().for_each(|c| refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    /// Replaces the one `{"$ref": target, ...}` in `v` by `def` (merged with its other keys).
    fn replace(v: &mut Value, target: &str, def: &serde_json::Map<String, Value>) -> bool {
        match v {
            Value::Object(o) => {
                if o.get("$ref").and_then(Value::as_str) == Some(target) {
                    o.remove("$ref");
                    for (k, d) in def {
                        o.entry(k.clone()).or_insert_with(|| d.clone());
                    }
                    return true;
                }
                o.values_mut().any(|c| replace(c, target, def))
            }
            Value::Array(a) => a.iter_mut().any(|c| replace(c, target, def)),
            _ => false,
        }
    }
    loop {
        let Some(Value::Object(defs)) = root.get("$defs") else {
            return;
        };
        let whole = Value::Object(root.clone());
        let mut all = Vec::new();
        refs(&whole, &mut all);
        // A definition referred to once, holding no reference itself (so never one in a cycle).
        let pick = defs.iter().find_map(|(name, def)| {
            let target = format!("#/$defs/{name}");
            let mut inner = Vec::new();
            refs(def, &mut inner);
            (all.iter().filter(|r| **r == target).count() == 1 && inner.is_empty())
                .then(|| (name.clone(), target, def.as_object().cloned()))
        });
        let Some((name, target, Some(def))) = pick else {
            return;
        };
        if let Some(Value::Object(defs)) = root.get_mut("$defs") {
            defs.remove(&name);
            if defs.is_empty() {
                root.remove("$defs");
            }
        }
        for v in root.values_mut() {
            if replace(v, &target, &def) {
                break;
            }
        }
    }
}

/// The constants of a `oneOf` made only of string constants.
fn const_values(o: &serde_json::Map<String, Value>) -> Option<Vec<Value>> {
    o.get("oneOf").and_then(Value::as_array).and_then(|a| {
        a.iter()
            .map(|alt| {
                let alt = alt.as_object()?;
                let c = alt.get("const")?;
                (c.is_string()
                    && alt
                        .keys()
                        .all(|k| matches!(k.as_str(), "const" | "type" | "description")))
                .then(|| c.clone())
            })
            .collect()
    })
}

fn clean(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
            {
                o.remove("format");
            }
            for (_, child) in o.iter_mut() {
                clean(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(clean),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        read_tools().iter().cloned().collect()
    }

    #[test]
    fn profiles_name_their_tools_and_lists_are_checked() {
        let k = known();
        assert!(
            ToolPolicy::from_spec("all", &k)
                .unwrap()
                .allows("get_links")
        );
        let min = ToolPolicy::from_spec("minimal", &k).unwrap();
        assert!(min.allows("read_note") && !min.allows("get_links"));
        let list = ToolPolicy::from_spec("read_note, vault_info", &k).unwrap();
        assert!(list.allows("vault_info") && !list.allows("search_notes"));
        let e = ToolPolicy::from_spec("read_note,delete_everything", &k).unwrap_err();
        assert!(
            e.to_string().contains("unknown tool `delete_everything`"),
            "{e}"
        );
    }

    #[test]
    fn private_formats_are_dropped_and_standard_ones_kept() {
        let s = serde_json::json!({
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "nested": {"items": {"format": "double", "type": "number"}}
            }
        });
        let out = Value::Object(cleaned(s.as_object().unwrap()));
        assert_eq!(out["properties"]["limit"].get("format"), None);
        assert_eq!(out["properties"]["limit"]["minimum"], 0);
        assert_eq!(out["properties"]["when"]["format"], "date-time");
        assert_eq!(out["properties"]["nested"]["items"].get("format"), None);
    }

    #[test]
    fn definitions_used_once_are_written_in_place_and_shared_or_cyclic_ones_stay() {
        let s = serde_json::json!({
            "type": "object",
            "properties": {
                "hit": {"$ref": "#/$defs/Hit"},
                "a": {"$ref": "#/$defs/Shared"},
                "b": {"anyOf": [{"$ref": "#/$defs/Shared"}, {"type": "null"}]},
                "tree": {"$ref": "#/$defs/Tree"},
                "count": {"type": "integer", "minimum": 0}
            },
            "$defs": {
                "Hit": {"type": "object", "properties": {"at": {"$ref": "#/$defs/Progress"}}},
                "Progress": {"type": "object", "properties": {"done": {"type": "integer"}}},
                "Shared": {"type": "string"},
                "Tree": {"type": "object", "properties": {"children": {
                    "type": "array", "items": {"$ref": "#/$defs/Tree"}}}}
            }
        });
        let out = Value::Object(lean_input(s.as_object().unwrap()));
        // Progress into Hit, then Hit into its one use.
        assert_eq!(
            out["properties"]["hit"],
            serde_json::json!({"type": "object", "properties": {"at": {
                "type": "object", "properties": {"done": {"type": "integer"}}}}})
        );
        assert_eq!(
            out["properties"]["a"],
            serde_json::json!({"$ref": "#/$defs/Shared"})
        );
        assert_eq!(
            out["properties"]["tree"],
            serde_json::json!({"$ref": "#/$defs/Tree"})
        );
        let defs: Vec<&String> = out["$defs"].as_object().unwrap().keys().collect();
        assert_eq!(defs, ["Shared", "Tree"]);
        // An input keeps its bounds.
        assert_eq!(out["properties"]["count"]["minimum"], 0);
    }

    #[test]
    fn an_output_outline_keeps_the_object_and_its_required_fields() {
        let s = serde_json::json!({
            "type": "object",
            "description": "A reply.",
            "properties": {"path": {"type": "string"}, "note": {"type": ["string", "null"]}},
            "required": ["path"]
        });
        let out = Value::Object(outline(s.as_object().unwrap()));
        assert_eq!(
            out,
            serde_json::json!({"type": "object", "required": ["path"]})
        );
    }

    #[test]
    fn input_schemas_lose_nulls_empty_defaults_and_line_breaks_inside_sentences() {
        let s = serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "folder": {"type": ["string", "null"], "description": "Only under\nthis folder."},
                "mode": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]},
                "dry_run": {"type": "boolean", "default": false},
                "recursive": {"type": "boolean", "default": true},
                "default": {"type": "string"}
            }
        });
        let out = Value::Object(lean_input(s.as_object().unwrap()));
        assert_eq!(out.get("additionalProperties"), None);
        let p = &out["properties"];
        assert_eq!(
            p["folder"],
            serde_json::json!({"type": "string", "description": "Only under this folder."})
        );
        assert_eq!(
            p["mode"],
            serde_json::json!({"enum": ["a", "b"], "type": "string"})
        );
        assert_eq!(p["dry_run"], serde_json::json!({"type": "boolean"}));
        assert_eq!(p["recursive"]["default"], true);
        // A property called `default` is a schema, kept.
        assert_eq!(p["default"], serde_json::json!({"type": "string"}));
        assert_eq!(
            unwrapped("One\ntwo.\n\nNext  para."),
            "One two.\nNext para."
        );
    }
}
