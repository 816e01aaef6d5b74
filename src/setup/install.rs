//! Adding, updating and removing capvault's entry in a client's config text, keeping everything
//! else: other servers, unknown keys, and (JSON with comments, TOML) comments and layout. Pure:
//! text in, text out; [`crate::setup`] reads and writes the files.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::{Value, json};

use super::SetupError;
use super::clients::{Client, Format};

/// What a client runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Absolute path of the capvault binary.
    pub command: String,
    /// Its arguments (`serve <vault> ...`).
    pub args: Vec<String>,
}

/// The parse options for `client`'s JSON: comments and trailing commas only where the client
/// itself accepts them (VS Code and Zed read JSON with comments).
fn options(client: &Client) -> ParseOptions {
    let loose = matches!(client.id, "vscode" | "zed");
    ParseOptions {
        allow_comments: loose,
        allow_trailing_commas: loose,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// The entry as `client` writes it.
pub fn entry_value(client: &Client, e: &Entry) -> Value {
    match client.format {
        Format::Json { typed: true, .. } => {
            json!({"type": "stdio", "command": e.command, "args": e.args})
        }
        Format::Json { .. } if client.id == "zed" => {
            json!({"source": "custom", "command": e.command, "args": e.args, "env": {}})
        }
        _ => json!({"command": e.command, "args": e.args}),
    }
}

fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

fn parse_json(client: &Client, text: &str, shown: &str) -> Result<CstRootNode, SetupError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let root = CstRootNode::parse(text, &options(client)).map_err(|e| SetupError::Json {
        path: shown.to_owned(),
        line: e.line_display(),
        kind: e.kind().to_string(),
    })?;
    if root.value().is_some() && root.object_value().is_none() {
        return Err(SetupError::NotAnObject {
            path: shown.to_owned(),
        });
    }
    Ok(root)
}

fn parse_toml(text: &str, shown: &str) -> Result<toml_edit::DocumentMut, SetupError> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| SetupError::Toml {
            path: shown.to_owned(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(1),
            message: e.message().to_owned(),
        })
}

/// `text` (the config file; `None` when missing) with the server `name` set to `entry`.
pub fn add(
    client: &Client,
    text: Option<&str>,
    shown: &str,
    name: &str,
    entry: &Entry,
) -> Result<String, SetupError> {
    let text = text.unwrap_or("");
    match client.format {
        Format::Json { key, .. } => {
            let root = parse_json(client, text, shown)?;
            let servers = root.object_value_or_set().object_value_or_set(key);
            let value = input(&entry_value(client, entry));
            match servers.get(name) {
                Some(prop) => prop.set_value(value),
                None => {
                    servers.append(name, value);
                }
            }
            let mut out = root.to_string();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            Ok(out)
        }
        Format::Toml { key } => {
            let mut doc = parse_toml(text, shown)?;
            let servers = doc
                .entry(key)
                .or_insert_with(|| {
                    let mut t = toml_edit::Table::new();
                    t.set_implicit(true);
                    toml_edit::Item::Table(t)
                })
                .as_table_mut()
                .ok_or_else(|| SetupError::NotATable {
                    path: shown.to_owned(),
                    key: key.to_string(),
                })?;
            let mut t = toml_edit::Table::new();
            t["command"] = toml_edit::value(entry.command.clone());
            let mut args = toml_edit::Array::new();
            for a in &entry.args {
                args.push(a.as_str());
            }
            t["args"] = toml_edit::value(args);
            servers[name] = toml_edit::Item::Table(t);
            Ok(doc.to_string())
        }
    }
}

/// `text` without the server `name`; `None` when it has no such server.
pub fn remove(
    client: &Client,
    text: &str,
    shown: &str,
    name: &str,
) -> Result<Option<String>, SetupError> {
    match client.format {
        Format::Json { key, .. } => {
            let root = parse_json(client, text, shown)?;
            let Some(prop) = root
                .object_value()
                .and_then(|o| o.object_value(key))
                .and_then(|s| s.get(name))
            else {
                return Ok(None);
            };
            prop.remove();
            Ok(Some(root.to_string()))
        }
        Format::Toml { key } => {
            let mut doc = parse_toml(text, shown)?;
            let removed = doc
                .get_mut(key)
                .and_then(|s| s.as_table_like_mut())
                .and_then(|t| t.remove(name));
            Ok(removed.map(|_| doc.to_string()))
        }
    }
}

/// The command and arguments of the server `name` in `text`, when there is one.
pub fn find(
    client: &Client,
    text: &str,
    shown: &str,
    name: &str,
) -> Result<Option<Entry>, SetupError> {
    let value: Option<Value> = match client.format {
        Format::Json { key, .. } => parse_json(client, text, shown)?
            .object_value()
            .and_then(|o| o.object_value(key))
            .and_then(|s| s.get(name))
            .and_then(|p| p.object_value())
            .and_then(|o| o.to_serde_value()),
        Format::Toml { key } => {
            let doc = parse_toml(text, shown)?;
            doc.get(key)
                .and_then(|s| s.get(name))
                .and_then(|e| e.as_table_like())
                .map(|t| {
                    let command = t
                        .get("command")
                        .and_then(|c| c.as_str())
                        .unwrap_or_default();
                    let args: Vec<&str> = t
                        .get("args")
                        .and_then(|a| a.as_array())
                        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                        .unwrap_or_default();
                    json!({"command": command, "args": args})
                })
        }
    };
    Ok(value.map(|v| Entry {
        command: v["command"].as_str().unwrap_or_default().to_owned(),
        args: v["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    }))
}

/// The names of every server in `text` whose command is a capvault binary.
pub fn capvault_entries(
    client: &Client,
    text: &str,
    shown: &str,
) -> Result<Vec<String>, SetupError> {
    let names: Vec<String> = match client.format {
        Format::Json { key, .. } => parse_json(client, text, shown)?
            .object_value()
            .and_then(|o| o.object_value(key))
            .map(|s| {
                s.properties()
                    .iter()
                    .filter_map(|p| p.decoded_name())
                    .collect()
            })
            .unwrap_or_default(),
        Format::Toml { key } => parse_toml(text, shown)?
            .get(key)
            .and_then(|s| s.as_table_like())
            .map(|t| t.iter().map(|(k, _)| k.to_owned()).collect())
            .unwrap_or_default(),
    };
    let mut out = Vec::new();
    for n in names {
        if let Some(e) = find(client, text, shown, &n)?
            && e.command
                .rsplit(['/', '\\'])
                .next()
                .is_some_and(|b| b.starts_with("capvault"))
        {
            out.push(n);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::clients::client;

    fn entry() -> Entry {
        Entry {
            command: "/bin/capvault".into(),
            args: vec!["serve".into(), "/v".into()],
        }
    }

    #[test]
    fn other_servers_unknown_keys_and_comments_survive_and_updates_replace() {
        let vs = client("vscode").unwrap();
        let text = "{\n  // mine\n  \"servers\": {\n    \"other\": {\"command\": \"x\"}\n  },\n  \"inputs\": []\n}\n";
        let out = add(vs, Some(text), "f", "capvault", &entry()).unwrap();
        assert!(
            out.contains("// mine") && out.contains("\"other\": {\"command\": \"x\"}"),
            "{out}"
        );
        assert!(out.contains("\"inputs\": []"), "{out}");
        let v: Value = serde_json::from_str(&out.replace("// mine\n", "")).unwrap();
        assert_eq!(v["servers"]["capvault"]["type"], "stdio");
        let again = add(
            vs,
            Some(&out),
            "f",
            "capvault",
            &Entry {
                args: vec!["serve".into(), "/w".into()],
                ..entry()
            },
        )
        .unwrap();
        assert_eq!(again.matches("\"capvault\"").count(), 1, "{again}");
        assert!(again.contains("/w"), "{again}");
        let removed = remove(vs, &again, "f", "capvault").unwrap().unwrap();
        assert!(
            !removed.contains("capvault") && removed.contains("\"other\""),
            "{removed}"
        );
        assert_eq!(remove(vs, &removed, "f", "capvault").unwrap(), None);
    }

    #[test]
    fn malformed_files_are_refused_with_their_line() {
        let cd = client("claude-desktop").unwrap();
        let e = add(
            cd,
            Some("{\n  \"mcpServers\": {,\n}"),
            "cfg.json",
            "c",
            &entry(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cfg.json is not valid JSON (line 2"), "{e}");
        assert!(
            add(cd, Some("[1]"), "cfg.json", "c", &entry())
                .unwrap_err()
                .to_string()
                .contains("not a JSON object")
        );
        let codex = client("codex").unwrap();
        let e = add(codex, Some("a = 1\nb = [\n"), "config.toml", "c", &entry())
            .unwrap_err()
            .to_string();
        assert!(e.contains("config.toml is not valid TOML (line"), "{e}");
    }

    #[test]
    fn toml_keeps_comments_and_other_tables() {
        let codex = client("codex").unwrap();
        let text = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let out = add(codex, Some(text), "f", "capvault", &entry()).unwrap();
        assert!(out.starts_with("# my settings\nmodel = \"o3\"\n"), "{out}");
        assert!(
            out.contains(
                "[mcp_servers.capvault]\ncommand = \"/bin/capvault\"\nargs = [\"serve\", \"/v\"]"
            ),
            "{out}"
        );
        assert_eq!(find(codex, &out, "f", "capvault").unwrap(), Some(entry()));
        assert_eq!(capvault_entries(codex, &out, "f").unwrap(), ["capvault"]);
        let removed = remove(codex, &out, "f", "capvault").unwrap().unwrap();
        assert!(
            removed.contains("[mcp_servers.other]") && !removed.contains("capvault"),
            "{removed}"
        );
    }

    #[test]
    fn a_missing_or_empty_file_gets_just_the_entry() {
        let cursor = client("cursor").unwrap();
        let out = add(cursor, None, "f", "capvault", &entry()).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            json!({"mcpServers": {"capvault": {"command": "/bin/capvault", "args": ["serve", "/v"]}}})
        );
        let zed = client("zed").unwrap();
        let out = add(zed, Some(""), "f", "notes", &entry()).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["context_servers"]["notes"]["source"], "custom");
    }
}
