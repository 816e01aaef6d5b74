//! `docs/tools.md` is rendered from what the real binary lists in `tools/list`, so the reference
//! and the schemas a model reads cannot disagree: this test renders it again and fails on any
//! difference. `CAPVAULT_BLESS=1 cargo test --test integration tools_doc::` writes the file
//! instead. Each tool's example call is run too (write tools as a dry run), so an example that no
//! longer parses fails here, not in a reader's shell.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use crate::common::{Server, sha256_hex, write_model, write_tree};
use serde_json::{Map, Value, json};

/// The file this test keeps, relative to the repository.
const DOC: &str = "docs/tools.md";

/// The variable that makes the test write [`DOC`] instead of comparing.
const BLESS: &str = "CAPVAULT_BLESS";

/// One example call per tool, as the reference shows it (the JSON is shown as written here).
/// A tool missing from this list, or listed here and no longer served, fails the test.
const EXAMPLES: &[(&str, &str)] = &[
    ("append_periodic_note", r#"{"text": "Called the plumber"}"#),
    (
        "append_to_note",
        r#"{"path": "Projects/Plan.md", "content": "- order seeds", "heading": "Tasks"}"#,
    ),
    ("changes_since", r#"{"since": "24h"}"#),
    (
        "create_canvas",
        r#"{"path": "Boards/Ideas.canvas", "canvas": {"nodes": [], "edges": []}}"#,
    ),
    (
        "create_note",
        r#"{"path": "Projects/Idea", "content": "First steps", "frontmatter": {"status": "draft"}}"#,
    ),
    ("delete_note", r#"{"path": "Inbox/Old.md"}"#),
    (
        "edit_canvas",
        r#"{"path": "Boards/Plan.canvas", "ops": [{"op": "add_node", "node": {"id": "why", "type": "text", "text": "Why?", "x": 0, "y": 0, "width": 200, "height": 80}}]}"#,
    ),
    (
        "edit_note",
        r#"{"path": "Projects/Plan.md", "edits": [{"old_text": "- [ ] call Ada", "new_text": "- [x] call Ada"}]}"#,
    ),
    ("find_broken_links", r#"{"folder": "Projects"}"#),
    ("find_orphans", r#"{"no_outbound": true}"#),
    ("get_links", r#"{"path": "Projects/Plan.md"}"#),
    (
        "get_neighbors",
        r#"{"path": "Projects/Plan.md", "depth": 2}"#,
    ),
    ("get_periodic_note", r#"{"period": "week"}"#),
    ("list_bases", r#"{}"#),
    ("list_folders", r#"{"depth": 1}"#),
    ("list_notes", r#"{"tag": "project", "limit": 10}"#),
    ("list_tags", r#"{"sort": "name"}"#),
    ("list_tasks", r#"{"due_before": "next week"}"#),
    (
        "move_note",
        r#"{"from": "Projects/Plan.md", "to": "Archive/Plan.md"}"#,
    ),
    ("note_history", r#"{"path": "Projects/Plan.md"}"#),
    ("query_base", r#"{"path": "Boards/Books.base"}"#),
    ("read_attachment", r#"{"path": "Attachments/diagram.svg"}"#),
    ("read_canvas", r#"{"path": "Boards/Plan.canvas"}"#),
    (
        "read_note",
        r#"{"path": "Projects/Plan.md", "format": "outline"}"#,
    ),
    ("related_notes", r#"{"path": "Projects/Plan.md"}"#),
    ("rename_tag", r#"{"from": "project", "to": "work"}"#),
    ("resolve_link", r#"{"link": "[[Plan#Tasks]]"}"#),
    (
        "restore_note",
        r#"{"path": "Inbox/Old.md", "sha256": "SHA256_FROM_NOTE_HISTORY"}"#,
    ),
    ("run_query", r#"{"query": "TABLE status FROM #project"}"#),
    ("search_notes", r#"{"query": "garden"}"#),
    (
        "set_task_status",
        r#"{"path": "Projects/Plan.md", "line": 7, "status": "done"}"#,
    ),
    (
        "tag_note",
        r#"{"path": "Projects/Plan.md", "add": ["active"], "remove": ["draft"]}"#,
    ),
    (
        "update_frontmatter",
        r#"{"path": "Projects/Plan.md", "set": {"status": "done"}, "remove": ["draft"]}"#,
    ),
    ("vault_info", r#"{}"#),
    (
        "write_note",
        r#"{"path": "Projects/Plan.md", "content": "New text", "if_match": "SHA256_FROM_READ_NOTE"}"#,
    ),
];

/// The vault the examples run on, named `Notes` (the name the server's instructions show).
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        &tmp.path().join("Notes"),
        &[
            (
                "Projects/Plan.md",
                "---\nstatus: draft\ntags: [project, draft]\n---\n# Plan\n## Tasks\n- [ ] call Ada\n\
                 - [ ] order seeds for the garden\n\nSee [[Garden]].\n",
            ),
            (
                "Garden.md",
                "# Garden\nThe garden needs compost. #project\n",
            ),
            ("Inbox/Old.md", "old garden notes\n"),
            (
                "Boards/Plan.canvas",
                r#"{"nodes":[{"id":"a","type":"file","file":"Projects/Plan.md","x":0,"y":0,"width":400,"height":300}],"edges":[]}"#,
            ),
            (
                "Boards/Books.base",
                "filters: 'file.hasTag(\"project\")'\nviews:\n  - type: table\n    name: All\n",
            ),
            (
                "Attachments/diagram.svg",
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n",
            ),
        ],
    );
    tmp
}

/// What three servers list: read-only, `--write`, and `--write` with an embedding model.
struct Listing {
    /// The names a read-only server lists.
    read: BTreeSet<String>,
    /// The names a `--write` server lists.
    write: BTreeSet<String>,
    /// Every tool, as the server with `--write` and a model lists it, in its order.
    tools: Vec<Value>,
    /// The `--write` server's instructions (what every model is told before any tool).
    instructions: String,
}

async fn names(s: &Server) -> BTreeSet<String> {
    let tools = s.client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

async fn listing(vault: &Path, state: &Path, model: &Path) -> (Listing, Server) {
    let state = state.to_str().unwrap();
    let s = Server::start(vault).await;
    let read = names(&s).await;
    s.stop().await;
    let s = Server::start_with(vault, &["--write", "--state-dir", state]).await;
    let write = names(&s).await;
    let instructions = s
        .client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .expect("the server's instructions");
    s.stop().await;
    let s = Server::start_with(
        vault,
        &[
            "--write",
            "--state-dir",
            state,
            "--embedding-model",
            model.to_str().unwrap(),
        ],
    )
    .await;
    let tools = s.client.list_all_tools().await.unwrap();
    let tools = tools
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let listing = Listing {
        read,
        write,
        tools,
        instructions,
    };
    (listing, s)
}

/// A description as Markdown prose: a fence's three backticks (```` ```base ````) escaped, so
/// they do not open a code span.
fn prose(text: &str) -> String {
    text.replace("```", "\\`\\`\\`")
}

/// Text for a Markdown table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    prose(text).replace('\n', " ").replace('|', "\\|")
}

/// `a`, `b` and `c` as code.
fn codes(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("`{s}`"),
            other => format!("`{other}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The type column: `string`, `array of string`, `array of object`...
fn type_name(p: &Map<String, Value>) -> String {
    let base = p.get("type").and_then(Value::as_str).unwrap_or("any");
    match (base, p.get("items").and_then(Value::as_object)) {
        ("array", Some(items)) => format!("array of {}", type_name(items)),
        _ => base.to_owned(),
    }
}

/// The bounds column: range, length and allowed values, as the schema states them.
fn bounds(p: &Map<String, Value>) -> String {
    let mut out = Vec::new();
    match (p.get("minimum"), p.get("maximum")) {
        (Some(lo), Some(hi)) => out.push(format!("{lo} to {hi}")),
        (Some(lo), None) => out.push(format!("at least {lo}")),
        (None, Some(hi)) => out.push(format!("at most {hi}")),
        (None, None) => {}
    }
    if let Some(n) = p.get("maxLength") {
        out.push(format!("at most {n} characters"));
    }
    if let Some(Value::Array(values)) = p.get("enum") {
        out.push(format!("one of {}", codes(values)));
    }
    if let Some(Value::Array(values)) = p
        .get("items")
        .and_then(Value::as_object)
        .and_then(|i| i.get("enum"))
    {
        out.push(format!("each one of {}", codes(values)));
    }
    out.join("; ")
}

/// One table row per parameter, and one per field of an array's objects (`edits[].old_text`).
fn parameter_rows(out: &mut String, prefix: &str, schema: &Map<String, Value>) {
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, p) in properties {
        let p = p.as_object().expect("a property's schema is an object");
        let default = p
            .get("default")
            .map(|d| format!("`{d}`"))
            .unwrap_or_default();
        let description = p.get("description").and_then(Value::as_str).unwrap_or("");
        writeln!(
            out,
            "| `{prefix}{name}` | {} | {} | {} | {} | {} |",
            type_name(p),
            if required.contains(name.as_str()) {
                "yes"
            } else {
                ""
            },
            cell(&default),
            cell(&bounds(p)),
            cell(description),
        )
        .unwrap();
        if let Some(items) = p.get("items").and_then(Value::as_object) {
            parameter_rows(out, &format!("{prefix}{name}[]."), items);
        }
    }
}

/// When a tool is listed: always, with `--write`, or with an embedding model.
fn listed_when(listing: &Listing, name: &str) -> &'static str {
    if listing.read.contains(name) {
        "always"
    } else if listing.write.contains(name) {
        "with `--write`"
    } else {
        "with an embedding model (`--semantic` or `--embedding-model DIR`)"
    }
}

/// The flags an example's `capvault call` line needs for the tool to be listed.
fn call_flags(listing: &Listing, name: &str) -> &'static str {
    if listing.read.contains(name) {
        ""
    } else if listing.write.contains(name) {
        " --write"
    } else {
        " --semantic"
    }
}

/// What the annotations say the tool does to the vault, in the hints' own words.
fn effect(annotations: &Value) -> String {
    if annotations["readOnlyHint"] == true {
        return "reads only (`readOnlyHint`)".to_owned();
    }
    let hints: Vec<String> = ["destructiveHint", "idempotentHint"]
        .iter()
        .filter_map(|h| annotations.get(*h).map(|v| format!("`{h}: {v}`")))
        .collect();
    if hints.is_empty() {
        // MCP's default for a tool that is not read-only: it may destroy.
        "changes the vault (no hint: a client assumes it may destroy)".to_owned()
    } else {
        format!("changes the vault ({})", hints.join(", "))
    }
}

fn example(name: &str) -> &'static str {
    EXAMPLES
        .iter()
        .find(|(tool, _)| *tool == name)
        .map(|(_, args)| *args)
        .unwrap_or_else(|| {
            panic!(
                "no example for `{name}`: add one to EXAMPLES in {}",
                file!()
            )
        })
}

/// The opening of [`DOC`], before the tables.
const HEADER: &str = "# Tools

<!-- Generated by tests/tools_doc.rs from the server's tools/list: do not edit by hand.
     Regenerate: CAPVAULT_BLESS=1 cargo test --test integration tools_doc:: -->

Every tool capvault serves, as `tools/list` gives it to a client: the description and input
schema a model reads, and the fields every reply has. The page is generated from a running
server by `tests/tools_doc.rs`, which fails when the two differ, so this is what the server says,
word for word ([testing.md](testing.md#the-tool-reference)). What the tools do in depth is in
[tools-in-depth.md](tools-in-depth.md), the options that change them in [guide.md](guide.md),
and the error codes a failure carries in [tools-in-depth.md](tools-in-depth.md#errors).

Parameters without a description are explained once, in the instructions below: `path`
(vault-relative; `.md` may be left out, and a bare note name works when one note has it),
`cursor` (a reply's `next_cursor`, for the next page), `if_match` (the `sha256` that `read_note`
gave: a note changed since is a `conflict`) and `dry_run` (the change shown as a diff, nothing
written). A number outside its bounds is refused with `invalid_argument`, never clamped. A server
of several vaults adds a `vault` parameter to every tool.

Each example runs the tool once from a shell, through `capvault call` (a real MCP client,
in-process), on the vault `~/Notes`; the same arguments work from any client. The test runs
every example on a small vault, the write tools as a dry run.

";

/// The whole of `docs/tools.md`.
fn render(listing: &Listing) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push_str("| tool | listed | what it does |\n|---|---|---|\n");
    for t in &listing.tools {
        let name = t["name"].as_str().unwrap();
        let description = t["description"].as_str().unwrap_or("");
        writeln!(
            out,
            "| [`{name}`](#{name}) | {} | {} |",
            listed_when(listing, name),
            cell(description)
        )
        .unwrap();
    }
    out.push_str(
        "\n## What the server tells the model\n\n\
         The `instructions` of a `--write` server's answer to `initialize`, for a vault named \
         `Notes`:\n\n",
    );
    for line in listing.instructions.lines() {
        writeln!(out, "> {line}").unwrap();
    }
    for t in &listing.tools {
        let name = t["name"].as_str().unwrap();
        let schema = t["inputSchema"].as_object().unwrap();
        writeln!(out, "\n## {name}\n").unwrap();
        writeln!(
            out,
            "{}\n",
            prose(t["description"].as_str().unwrap_or("").trim_end())
        )
        .unwrap();
        writeln!(
            out,
            "*{}*: listed {}; {}.\n",
            t["annotations"]["title"].as_str().unwrap_or(name),
            listed_when(listing, name),
            effect(&t["annotations"])
        )
        .unwrap();
        if schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            out.push_str(
                "| parameter | type | required | default | bounds | description |\n\
                 |---|---|---|---|---|---|\n",
            );
            parameter_rows(&mut out, "", schema);
            out.push('\n');
        } else {
            out.push_str("No parameters.\n\n");
        }
        if let Some(Value::Array(fields)) = t["outputSchema"].get("required") {
            writeln!(out, "Every reply has: {}.\n", codes(fields)).unwrap();
        }
        writeln!(
            out,
            "```sh\ncapvault call ~/Notes {name} '{}'{}\n```",
            example(name),
            call_flags(listing, name)
        )
        .unwrap();
    }
    out
}

/// Each example is valid for its tool's schema, and runs on the fixture: read tools succeed,
/// write tools succeed as a dry run (but for `restore_note`, whose version only a real
/// history has; its example is checked against the schema alone).
async fn check_examples(listing: &Listing, s: &Server, vault: &Path) {
    let served: BTreeSet<&str> = listing
        .tools
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for (name, _) in EXAMPLES {
        assert!(
            served.contains(name),
            "EXAMPLES names `{name}`, which no server lists any more"
        );
    }
    let plan = std::fs::read(vault.join("Projects/Plan.md")).unwrap();
    for t in &listing.tools {
        let name = t["name"].as_str().unwrap();
        let text = example(name);
        assert!(
            !text.contains('\''),
            "{name}: a shell-quoted example holds no `'`"
        );
        let mut args: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("{name}: the example is not JSON ({e}): {text}"));
        let schema = &t["inputSchema"];
        let validator = jsonschema::validator_for(schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{name}: {text} against its schema: {errors:?}"
        );
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for key in args.as_object().unwrap().keys() {
            assert!(
                properties.contains_key(key),
                "{name}: the example's `{key}` is not a parameter"
            );
        }
        if name == "restore_note" {
            continue;
        }
        if properties.contains_key("dry_run") {
            args["dry_run"] = json!(true);
        }
        if args["if_match"] == "SHA256_FROM_READ_NOTE" {
            args["if_match"] = json!(sha256_hex(&plan));
        }
        let r = s.call(name, args.clone()).await;
        assert!(!r.is_error, "{name} {args}: the example failed: {}", r.text);
    }
}

#[tokio::test]
async fn docs_tools_md_is_what_tools_list_says() {
    let tmp = fixture();
    let vault = tmp.path().join("Notes");
    let state = tempfile::tempdir().unwrap();
    let model = tempfile::tempdir().unwrap();
    write_model(model.path());
    let (listing, s) = listing(&vault, state.path(), model.path()).await;
    s.wait_index_ready().await;
    check_examples(&listing, &s, &vault).await;
    s.stop().await;

    let rendered = render(&listing);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    if kept != rendered {
        let first = kept
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| kept.lines().count().min(rendered.lines().count()));
        panic!(
            "{DOC} differs from what the server lists (first at line {}: kept {:?}, server {:?}).\n\
             Regenerate it with `{BLESS}=1 cargo test --test integration tools_doc::` and commit it.",
            first + 1,
            kept.lines().nth(first).unwrap_or("<end>"),
            rendered.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

#[tokio::test]
async fn the_readme_table_names_every_tool_and_no_other() {
    let tmp = fixture();
    let vault = tmp.path().join("Notes");
    let state = tempfile::tempdir().unwrap();
    let model = tempfile::tempdir().unwrap();
    write_model(model.path());
    let (listing, s) = listing(&vault, state.path(), model.path()).await;
    s.stop().await;
    let served: BTreeSet<String> = listing
        .tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    // The rows of the table under "## Tools" start with the tool's name in backticks.
    let named: BTreeSet<String> = readme
        .lines()
        .skip_while(|l| !l.starts_with("## Tools"))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert_eq!(
        named, served,
        "README.md's tool table and tools/list disagree"
    );
}
