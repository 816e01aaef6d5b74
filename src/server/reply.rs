//! A tool's reply finished before it is sent: hidden text, provenance, argument errors.
//!
//! Text from notes is shown as `--hidden-text` says, with the provenance of the notes it came
//! from; rmcp's argument errors take their stable form.

use serde_json::Value;

use super::{CapvaultServer, ToolError, args};

impl CapvaultServer {
    /// Text from notes in replies that are not a note's text (query rows, task descriptions,
    /// frontmatter values, headings): what it hides is counted into the reply's `hidden` (kinds
    /// and counts) and shown as `--hidden-text` says. `read_note` already reports the whole
    /// note's `hidden`: its other formats only follow the policy.
    pub(super) fn show_hidden_in_reply(
        &self,
        tool: &str,
        format: Option<&str>,
        result: &mut rmcp::model::CallToolResult,
    ) {
        let summary = match tool {
            "run_query" | "query_base" | "list_tasks" => true,
            "read_note" if format.is_some_and(|f| f != "content") => false,
            _ => return,
        };
        if result.is_error == Some(true) {
            return;
        }
        let Some(mut value) = result.structured_content.take() else {
            return;
        };
        let policy = self.engine.options().hidden_text;
        let mut counts = std::collections::BTreeMap::new();
        crate::markdown::hidden_in_json(
            &mut value,
            policy,
            &[
                "path",
                "file",
                "sha256",
                "hidden",
                "next_cursor",
                "modified",
                "content",
            ],
            &mut counts,
        );
        // The notes the rows come from that are not the vault's own, by path (and those the
        // tool found its values were read from).
        let mut provenance = match value.get_mut("provenance") {
            Some(found @ Value::Object(_)) if summary => match found.take() {
                Value::Object(found) => found,
                _ => serde_json::Map::new(),
            },
            _ => serde_json::Map::new(),
        };
        if summary {
            let mut paths = std::collections::BTreeSet::new();
            paths_in(&value, &mut paths);
            let model = self.engine.model_now();
            for p in paths {
                if let Ok(path) = crate::vault::VaultPath::parse(&p) {
                    let kind = self.engine.provenance(&model, &path);
                    if !kind.is_own() {
                        provenance.insert(p, serde_json::json!(kind));
                    }
                }
            }
        }
        if counts.is_empty() && provenance.is_empty() {
            result.structured_content = Some(value);
            return;
        }
        if summary && let Value::Object(map) = &mut value {
            if !counts.is_empty() {
                map.insert(
                    "hidden".to_owned(),
                    counts
                        .iter()
                        .map(|(kind, count)| serde_json::json!({"kind": kind, "count": count}))
                        .collect(),
                );
            }
            if !provenance.is_empty() {
                map.insert("provenance".to_owned(), Value::Object(provenance));
            }
        }
        let mut rebuilt = rmcp::model::CallToolResult::structured(value);
        rebuilt.meta = result.meta.take();
        // Pictures sent with the reply stay, after its JSON.
        rebuilt.content.extend(result.content.drain(..).skip(1));
        *result = rebuilt;
    }
}

/// Every string under a `path` key in `value` (the notes a query's rows come from), at most
/// 10,000.
fn paths_in(value: &Value, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| paths_in(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::String(s) if k == "path" && out.len() < 10_000 => {
                        out.insert(s.clone());
                    }
                    other => paths_in(other, out),
                }
            }
        }
        _ => {}
    }
}

/// Rewrites rmcp's argument-error result (plain text) as an `invalid_argument` [`ToolError`].
pub(super) fn args_error(result: rmcp::model::CallToolResult) -> rmcp::model::CallToolResult {
    if result.is_error != Some(true) || result.meta.is_some() {
        return result;
    }
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .unwrap_or("");
    match text.strip_prefix(args::ARGUMENT_ERROR_PREFIX) {
        Some(why) => match args::param_in(why) {
            Some(param) => ToolError::invalid(param, why),
            None => ToolError::new(super::error::Code::InvalidArgument, why),
        }
        .into_result(),
        None => result,
    }
}
