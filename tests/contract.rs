//! The contract every client relies on, through the real binary: stable error codes, paths as
//! people write them, arguments read generously, standard and lean schemas, tool profiles,
//! files of every kind and the folder tree.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Server, write_tree};
use serde_json::{Value, json};

fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("Categories/Books.md", "# Books\nA list of books.\n"),
            ("Projects/Garden Plan.md", "# Garden plan\ngarlic\n"),
            ("Projects/Todo.md", "one\n"),
            ("Archive/Todo.md", "two\n"),
            ("Boards/Plan.canvas", r#"{"nodes":[],"edges":[]}"#),
            ("Boards/Books.base", "views:\n  - type: table\n"),
            ("Images/cover.png", "png"),
            ("Notes/big.md", &"x".repeat(5000)),
            (".obsidian/app.json", "{}"),
        ],
    );
    std::fs::write(tmp.path().join("Notes/latin1.md"), b"caf\xe9\n").unwrap();
    tmp
}

/// The `error` object of an isError reply, with its text.
async fn error(s: &Server, tool: &str, args: Value) -> (Value, String) {
    let r = s.call(tool, args.clone()).await;
    assert!(r.is_error, "{tool} {args} should fail: {}", r.raw);
    let e = r.error.clone();
    assert!(
        r.structured.is_null(),
        "an error carries no structuredContent: {}",
        r.raw
    );
    let code = e["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code: {}", r.raw));
    assert!(r.text.starts_with(&format!("{code}: ")), "{}", r.text);
    (e, r.text)
}

#[tokio::test]
async fn every_failure_carries_a_stable_code_and_names_only_vault_paths() {
    let tmp = fixture();
    let s = Server::start_with(tmp.path(), &["--max-file-size", "4096"]).await;
    s.wait_index_ready().await;
    let cases = [
        (
            "read_note",
            json!({"path": "Nowhere/Missing.md"}),
            "not_found",
        ),
        (
            "read_note",
            json!({"path": ".obsidian/app.json"}),
            "refused",
        ),
        ("read_note", json!({"path": "../etc/passwd"}), "refused"),
        ("read_note", json!({"path": "/etc/passwd"}), "refused"),
        ("read_note", json!({"path": "Notes/big.md"}), "too_large"),
        ("read_note", json!({"path": "Notes/latin1.md"}), "not_utf8"),
        ("read_note", json!({"path": "Projects"}), "invalid_argument"),
        ("read_note", json!({}), "invalid_argument"),
        ("list_notes", json!({"limit": 0}), "invalid_argument"),
        ("list_notes", json!({"folder": "Nope"}), "not_found"),
        (
            "read_canvas",
            json!({"path": "Projects/Todo.md"}),
            "invalid_argument",
        ),
        ("get_links", json!({"path": "Missing.md"}), "not_found"),
        ("list_folders", json!({"depth": 99}), "invalid_argument"),
    ];
    for (tool, args, want) in cases {
        let (e, text) = error(&s, tool, args.clone()).await;
        assert_eq!(e["code"], want, "{tool} {args}: {text}");
        assert!(!text.contains(tmp.path().to_str().unwrap()), "{text}");
        // A bad argument is named where a client finds it; no other error names one.
        assert_eq!(
            e["param"].is_string(),
            want == "invalid_argument",
            "{tool} {args}: {e}"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn an_invalid_argument_names_its_parameter_in_the_error_structure() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let cases = [
        // Refused by the arguments' schema, and by the tools' own checks.
        ("read_note", json!({}), "path"),
        ("read_note", json!({"path": "Books", "colour": 1}), "colour"),
        (
            "read_note",
            json!({"path": "Books", "max_chars": 0}),
            "max_chars",
        ),
        ("read_note", json!({"path": "Projects"}), "path"),
        ("read_note", json!({"path": "Books", "lines": "0"}), "lines"),
        (
            "read_note",
            json!({"path": "Books", "section": "Nope"}),
            "section",
        ),
        (
            "read_note",
            json!({"path": "Books", "format": "outline", "offset": 3}),
            "offset",
        ),
        ("search_notes", json!({"query": "  "}), "query"),
        (
            "search_notes",
            json!({"query": "(", "mode": "regex"}),
            "query",
        ),
        (
            "search_notes",
            json!({"query": "garlic", "modified_after": "soon"}),
            "modified_after",
        ),
        ("list_notes", json!({"cursor": "not-a-cursor"}), "cursor"),
        ("list_notes", json!({"value": "x"}), "value"),
        ("read_canvas", json!({"path": "Projects/Todo.md"}), "path"),
        (
            "run_query",
            json!({"query": "LIST", "path": "Projects/Todo.md"}),
            "query",
        ),
    ];
    for (tool, args, param) in cases {
        let (e, text) = error(&s, tool, args.clone()).await;
        assert_eq!(e["code"], "invalid_argument", "{tool} {args}: {text}");
        assert_eq!(e["param"], param, "{tool} {args}: {e}");
        // The text is still `code: message`: the parameter is named in the structure.
        assert_eq!(
            text,
            format!("invalid_argument: {}", e["message"].as_str().unwrap())
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn note_paths_may_omit_md_and_bare_names_resolve_like_wikilinks() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    for typed in [
        "Categories/Books.md",
        "Categories/Books",
        "Books",
        "books.md",
        "BOOKS",
    ] {
        let r = s.ok("read_note", json!({"path": typed})).await;
        assert_eq!(r["path"], "Categories/Books.md", "{typed}");
    }
    let r = s.ok("get_links", json!({"path": "Garden Plan"})).await;
    assert_eq!(r["path"], "Projects/Garden Plan.md");
    let r = s.ok("read_canvas", json!({"path": "Plan.canvas"})).await;
    assert_eq!(r["path"], "Boards/Plan.canvas");
    // Two notes called Todo: the client is told which.
    let (e, _) = error(&s, "read_note", json!({"path": "Todo"})).await;
    assert_eq!(e["code"], "ambiguous");
    let mut sug: Vec<&str> = e["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    sug.sort();
    assert_eq!(sug, ["Archive/Todo.md", "Projects/Todo.md"]);
    // A misspelling gets suggestions to correct itself in one step.
    let (e, text) = error(&s, "read_note", json!({"path": "Categories/Boks.md"})).await;
    assert_eq!(e["code"], "not_found");
    assert_eq!(e["suggestions"][0], "Categories/Books.md", "{text}");
    // The resolved path obeys every rule a typed one does: hidden files are never reached.
    let (e, _) = error(&s, "read_note", json!({"path": "app.json"})).await;
    assert_eq!(e["code"], "not_found");
    s.stop().await;
}

#[tokio::test]
async fn string_arguments_are_read_as_the_schema_types_and_errors_name_the_parameter() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    // As the MCP Inspector CLI sends them.
    let r = s
        .ok(
            "list_notes",
            json!({"limit": "2", "recursive": "true", "kind": "any"}),
        )
        .await;
    assert_eq!(r["notes"].as_array().unwrap().len(), 2, "{r}");
    let r = s
        .ok(
            "search_notes",
            json!({"query": "GARLIC", "mode": "exact", "case_sensitive": "false", "limit": "5"}),
        )
        .await;
    assert_eq!(r["hits"][0]["path"], "Projects/Garden Plan.md", "{r}");
    let (e, _) = error(&s, "list_notes", json!({"limit": "two"})).await;
    assert_eq!(e["code"], "invalid_argument");
    let m = e["message"].as_str().unwrap();
    assert!(m.starts_with("`limit` must be a whole number"), "{m}");
    let (e, _) = error(&s, "read_note", json!({"path": "Books", "format": "html"})).await;
    let m = e["message"].as_str().unwrap();
    assert!(m.starts_with("`format` must be one of `content`"), "{m}");
    let (e, _) = error(&s, "read_note", json!({"path": "Books", "colour": 1})).await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`")
    );
    s.stop().await;
}

/// Walks a schema and returns every `format` it names.
fn formats(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(f)) = o.get("format") {
                out.push(f.clone());
            }
            o.values().for_each(|c| formats(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| formats(c, out)),
        _ => {}
    }
}

#[tokio::test]
async fn tools_list_is_standard_json_schema_and_small() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let wire = serde_json::to_string(&json!({ "tools": tools })).unwrap();
    println!("tools/list: {} tools, {} bytes", tools.len(), wire.len());
    // The read set alone: far under the bound the full list with --write must meet.
    assert!(wire.len() < 16_000, "tools/list is {} bytes", wire.len());
    let mut found = Vec::new();
    for t in &tools {
        formats(&Value::Object((*t.input_schema).clone()), &mut found);
        if let Some(o) = &t.output_schema {
            formats(&Value::Object((**o).clone()), &mut found);
        }
        assert!(!t.input_schema.contains_key("$schema"));
        // Every description still tells a model when to use the tool.
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() >= 40),
            "{}",
            t.name
        );
    }
    assert_eq!(found, Vec::<String>::new(), "private formats left");
    s.stop().await;
}

/// Every `description` string in a schema.
fn descriptions<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(d)) = o.get("description") {
                out.push(d);
            }
            o.values().for_each(|c| descriptions(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| descriptions(c, out)),
        _ => {}
    }
}

#[tokio::test]
async fn tools_list_with_write_is_under_24_kib_and_its_descriptions_are_unwrapped() {
    let tmp = fixture();
    let state = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        tmp.path(),
        &["--write", "--state-dir", state.path().to_str().unwrap()],
    )
    .await;
    let tools = s.client.list_all_tools().await.unwrap();
    let wire = serde_json::to_string(&json!({ "tools": tools })).unwrap();
    println!(
        "tools/list --write: {} tools, {} bytes",
        tools.len(),
        wire.len()
    );
    assert!(tools.len() >= 30, "{} tools", tools.len());
    // Issue 33: 43.7 KB (about 11,000 tokens in every conversation) before.
    assert!(
        wire.len() < 24_576,
        "tools/list --write is {} bytes",
        wire.len()
    );
    for t in &tools {
        let mut texts: Vec<&str> = t.description.as_deref().into_iter().collect();
        let input = Value::Object((*t.input_schema).clone());
        descriptions(&input, &mut texts);
        for d in texts {
            // Wrapped doc comments put line breaks inside sentences.
            assert!(!d.contains('\n'), "{}: {d:?}", t.name);
        }
        // Still a checked outline of every reply.
        let out = t.output_schema.as_ref().expect("outputSchema");
        assert_eq!(out.get("type"), Some(&json!("object")), "{}", t.name);
    }
    s.stop().await;
}

#[tokio::test]
async fn every_number_out_of_range_is_refused_naming_the_parameter_and_its_range() {
    let tmp = fixture();
    let state = tempfile::tempdir().unwrap();
    let s = Server::start_with(
        tmp.path(),
        &["--write", "--state-dir", state.path().to_str().unwrap()],
    )
    .await;
    s.wait_index_ready().await;
    let (e, _) = error(&s, "read_note", json!({"path": "Books", "max_chars": 0})).await;
    assert_eq!(e["code"], "invalid_argument");
    assert_eq!(
        e["message"], "`max_chars` must be a whole number from 1 to 400000",
        "the parameter given, not `limit`"
    );
    let (e, _) = error(&s, "list_notes", json!({"limit": -1})).await;
    let m = e["message"].as_str().unwrap();
    assert_eq!(m, "`limit` must be a whole number from 1 to 1000");
    let (e, _) = error(&s, "search_notes", json!({"query": "a", "limit": "lots"})).await;
    let m = e["message"].as_str().unwrap();
    assert!(!m.contains("u32") && !m.contains("i64"), "{m}");
    // One rule for every tool: above the maximum is refused (never clamped), below the
    // minimum too, each naming its parameter.
    let mut checked = 0;
    for t in s.client.list_all_tools().await.unwrap() {
        let Some(Value::Object(props)) = t.input_schema.get("properties") else {
            continue;
        };
        for (name, p) in props {
            for bound in ["maximum", "minimum"] {
                let Some(b) = p.get(bound).and_then(Value::as_i64) else {
                    continue;
                };
                let bad = if bound == "maximum" { b + 1 } else { b - 1 };
                let mut args = serde_json::Map::new();
                // The required arguments, filled with something: the number is checked first.
                if let Some(Value::Array(req)) = t.input_schema.get("required") {
                    for r in req {
                        args.insert(r.as_str().unwrap().to_owned(), json!("Books"));
                    }
                }
                args.insert(name.clone(), json!(bad));
                let (e, text) = error(&s, &t.name, Value::Object(args)).await;
                assert_eq!(
                    e["code"], "invalid_argument",
                    "{} {name}={bad}: {text}",
                    t.name
                );
                let m = e["message"].as_str().unwrap();
                assert!(
                    m.starts_with(&format!("`{name}` must be a whole number")),
                    "{} {name}={bad}: {m}",
                    t.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} bounds checked");
    s.stop().await;
}

#[tokio::test]
async fn a_folder_a_binary_file_and_a_bare_canvas_name_point_to_the_right_tool() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("References/Paper.md", "# Paper\n"),
            ("Boards/Board.canvas", r#"{"nodes":[],"edges":[]}"#),
            ("Notes/Board.md", "a note called Board\n"),
        ],
    );
    std::fs::write(
        tmp.path().join("References/photo.jpg"),
        b"\xff\xd8\xff\xe0 JFIF",
    )
    .unwrap();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    for path in ["References/", "References"] {
        let (e, text) = error(&s, "read_note", json!({ "path": path })).await;
        assert_eq!(e["code"], "invalid_argument", "{text}");
        let m = e["message"].as_str().unwrap();
        assert!(
            m.contains("is a folder") && m.contains("list_notes"),
            "{path}: {m}"
        );
        assert!(!m.contains("//"), "{m}");
    }
    let (e, _) = error(&s, "read_note", json!({"path": "References/photo.jpg"})).await;
    assert_eq!(e["code"], "not_utf8");
    assert!(
        e["message"].as_str().unwrap().contains("read_attachment"),
        "{e}"
    );
    // `read_canvas "Board"` is the canvas, not the note of that name.
    let r = s.ok("read_canvas", json!({"path": "Board"})).await;
    assert_eq!(r["path"], "Boards/Board.canvas");
    let r = s.ok("read_canvas", json!({"path": "Boards/Board"})).await;
    assert_eq!(r["path"], "Boards/Board.canvas");
    s.stop().await;
}

#[tokio::test]
async fn a_tool_profile_without_read_note_serves_no_resources() {
    let tmp = fixture();
    let s = Server::start_with(tmp.path(), &["--tools", "search_notes"]).await;
    let info = s.client.peer_info().unwrap();
    assert!(
        info.capabilities.resources.is_none(),
        "resources advertised"
    );
    let (code, msg) = s
        .read_resource("capvault:///Categories/Books.md")
        .await
        .unwrap_err();
    assert_eq!(code, -32600, "{msg}");
    assert!(msg.contains("read_note"), "{msg}");
    assert!(s.client.list_resources(None).await.is_err());
    s.stop().await;
    // With read_note in the profile, notes are resources as before.
    let s = Server::start_with(tmp.path(), &["--tools", "read_note"]).await;
    let r = s.read_resource("capvault:///Categories/Books.md").await;
    assert!(r.unwrap().contains("A list of books."));
    assert!(s.client.list_resources(None).await.is_ok());
    s.stop().await;
}

#[cfg(feature = "semantic")]
#[tokio::test]
async fn semantic_with_no_network_says_what_happened_and_both_ways_out() {
    let tmp = fixture();
    let home = tempfile::tempdir().unwrap();
    // A loopback port nothing listens on: the hub is unreachable.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = crate::common::serve_command(tmp.path(), &["--semantic"]);
    cmd.env("CAPVAULT_LOG", "capvault=error");
    cmd.env("HF_ENDPOINT", format!("http://127.0.0.1:{port}"));
    cmd.env("XDG_CACHE_HOME", home.path().join("cache"));
    cmd.env("XDG_CONFIG_HOME", home.path().join("config"));
    let s = Server::from_command(cmd).await;
    s.wait_index_ready().await;
    let (e, _) = error(
        &s,
        "search_notes",
        json!({"query": "books", "mode": "semantic"}),
    )
    .await;
    assert_eq!(e["code"], "refused");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("--semantic was given"), "{m}");
    assert!(m.contains("could not be downloaded"), "{m}");
    assert!(m.contains("capvault model fetch"), "{m}");
    assert!(m.contains("--embedding-model DIR"), "{m}");
    assert!(!m.contains("Start capvault with --semantic"), "{m}");
    assert!(!m.contains(home.path().to_str().unwrap()), "{m}");
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["embedding"]["state"], "unavailable", "{info}");
    assert!(
        info["embedding"]["reason"]
            .as_str()
            .unwrap()
            .contains("downloaded")
    );
    assert!(
        info["embedding"]["fix"]
            .as_str()
            .unwrap()
            .contains("capvault model import")
    );
    // Keyword search still works.
    s.ok("search_notes", json!({"query": "books"})).await;
    s.stop().await;
}

#[tokio::test]
async fn tool_profiles_list_only_their_tools_and_refuse_the_others() {
    let tmp = fixture();
    let s = Server::start_with(tmp.path(), &["--tools", "minimal"]).await;
    let mut names: Vec<String> = s
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["list_notes", "read_note", "search_notes"]);
    let (e, _) = error(&s, "get_links", json!({"path": "Books"})).await;
    assert_eq!(e["code"], "refused");
    s.ok("read_note", json!({"path": "Books"})).await;
    s.stop().await;

    let s = Server::start_with(tmp.path(), &["--tools", "vault_info, list_folders"]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 2);
    let (e, _) = error(&s, "read_note", json!({"path": "Books"})).await;
    assert_eq!(e["code"], "refused");
    s.stop().await;

    let o = crate::common::capvault()
        .args([
            "serve",
            tmp.path().to_str().unwrap(),
            "--tools",
            "read_note,rm_rf",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown tool `rm_rf`"), "{err}");
}

#[tokio::test]
async fn files_of_every_kind_are_listed_and_the_folder_tree_is_counted() {
    let tmp = fixture();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let kind = |k: &str| json!({"kind": k});
    let paths = |v: &Value| -> Vec<String> {
        let mut p: Vec<String> = v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["path"].as_str().unwrap().to_owned())
            .collect();
        p.sort();
        p
    };
    assert_eq!(
        paths(&s.ok("list_notes", kind("canvas")).await),
        ["Boards/Plan.canvas"]
    );
    assert_eq!(
        paths(&s.ok("list_notes", kind("base")).await),
        ["Boards/Books.base"]
    );
    assert_eq!(
        paths(&s.ok("list_notes", kind("attachment")).await),
        ["Images/cover.png"]
    );
    let any = s.ok("list_notes", kind("any")).await;
    assert_eq!(any["total"], 9, "{any}");
    let png = any["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["path"] == "Images/cover.png")
        .unwrap();
    assert_eq!(png["kind"], "attachment");
    let notes = s.ok("list_notes", json!({})).await;
    assert_eq!(notes["total"], 6);
    assert!(notes["notes"][0].get("kind").is_none());
    // Folders, a parent before its subfolders, with counts of everything below.
    write_tree(tmp.path(), &[("Projects/Deep/Er/x.md", "x")]);
    let tree = s
        .eventually(10, "list_folders", json!({"depth": 2}), |v| {
            v["folders"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["path"] == "Projects/Deep")
        })
        .await;
    let rows: Vec<(String, u64, u64, u64)> = tree["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["depth"].as_u64().unwrap(),
                f["notes"].as_u64().unwrap(),
                f["files"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |p: &str| rows.iter().find(|r| r.0 == p).cloned();
    assert_eq!(row("Projects"), Some(("Projects".into(), 1, 3, 3)));
    assert_eq!(
        row("Projects/Deep"),
        Some(("Projects/Deep".into(), 2, 1, 1))
    );
    assert_eq!(row("Projects/Deep/Er"), None, "deeper than asked");
    assert_eq!(row("Boards"), Some(("Boards".into(), 1, 0, 2)));
    assert!(rows.iter().all(|r| !r.0.starts_with('.')), "{rows:?}");
    let sub = s
        .ok("list_folders", json!({"folder": "Projects", "depth": 5}))
        .await;
    assert_eq!(sub["total"], 2, "{sub}");
    s.stop().await;
}

#[tokio::test]
async fn a_config_file_renames_disables_and_excludes_and_a_bad_one_names_its_line() {
    let tmp = fixture();
    let conf = tempfile::tempdir().unwrap();
    let file = conf.path().join("config.toml");
    std::fs::write(
        &file,
        r#"
exclude = ["Archive"]
disabled_tools = ["find_orphans"]
[tool.search_notes]
name = "work_search"
description = "Search the work vault's notes by words, phrases, exact text or regex."
"#,
    )
    .unwrap();
    let s = Server::start_with(tmp.path(), &["--config", file.to_str().unwrap()]).await;
    s.wait_index_ready().await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"work_search") && !names.contains(&"search_notes"),
        "{names:?}"
    );
    assert!(!names.contains(&"find_orphans"));
    let renamed = tools.iter().find(|t| t.name == "work_search").unwrap();
    assert!(
        renamed
            .description
            .as_deref()
            .unwrap()
            .starts_with("Search the work vault")
    );
    let r = s
        .ok("work_search", json!({"query": "two", "mode": "exact"}))
        .await;
    assert_eq!(r["total"], 0, "Archive/Todo.md is excluded: {r}");
    let (e, _) = error(&s, "read_note", json!({"path": "Archive/Todo.md"})).await;
    assert_eq!(e["code"], "refused");
    // A bare name resolves to the one Todo left.
    let r = s.ok("read_note", json!({"path": "Todo"})).await;
    assert_eq!(r["path"], "Projects/Todo.md");
    let (e, _) = error(&s, "find_orphans", json!({})).await;
    assert_eq!(e["code"], "refused");
    s.stop().await;

    std::fs::write(
        &file,
        "exclude = [\"Archive\"]\n\n[tool.search_notes]\nnmae = \"x\"\n",
    )
    .unwrap();
    let o = crate::common::capvault()
        .args([
            "serve",
            tmp.path().to_str().unwrap(),
            "--config",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("config.toml: line 4") && err.contains("nmae"),
        "{err}"
    );
}

/// Every way list_notes picks its candidates (the recency order, the tag index, a folder's
/// range) pages through exactly the expected notes, newest first, with the right totals.
#[tokio::test]
async fn listing_pages_agree_with_the_files_whatever_picks_the_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let mut expected: Vec<(u64, String, bool)> = Vec::new(); // (secs, path, tagged)
    for i in 0..60u64 {
        let folder = ["A", "A/B", "C"][(i % 3) as usize];
        let tagged = i % 4 == 0;
        let path = format!("{folder}/n{i:02}.md");
        // Some notes carry the tag and a nested one: listed once.
        let body = match (tagged, i % 8 == 0) {
            (true, true) => "#proj #proj/sub text",
            (true, false) => "#proj/sub text",
            _ => "text",
        };
        write_tree(tmp.path(), &[(path.as_str(), body)]);
        // Some notes share a time: ties are by path.
        let secs = (i * 7) % 40;
        std::fs::File::options()
            .write(true)
            .open(tmp.path().join(&path))
            .unwrap()
            .set_modified(base + std::time::Duration::from_secs(secs))
            .unwrap();
        expected.push((secs, path, tagged));
    }
    expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    type Keep = Box<dyn Fn(&str, bool) -> bool>;
    let cases: Vec<(Value, Keep)> = vec![
        (json!({}), Box::new(|_, _| true)),
        (json!({"tag": "proj"}), Box::new(|_, t| t)),
        (json!({"folder": "A"}), Box::new(|p, _| p.starts_with("A/"))),
        (
            json!({"folder": "A", "recursive": false}),
            Box::new(|p, _| p.starts_with("A/n")),
        ),
        (
            json!({"folder": "A", "tag": "PROJ/sub"}),
            Box::new(|p, t| t && p.starts_with("A/")),
        ),
        (json!({"kind": "any"}), Box::new(|_, _| true)),
    ];
    // A small page makes the listing walk the recency order for every filter but the narrowest;
    // a larger one makes it sort the candidates.
    for limit in [2, 7] {
        for (args, keep) in &cases {
            let want: Vec<&str> = expected
                .iter()
                .filter(|(_, p, t)| keep(p, *t))
                .map(|(_, p, _)| p.as_str())
                .collect();
            let mut a = args.clone();
            a["limit"] = json!(limit);
            let pages = s.pages("list_notes", a).await;
            let got: Vec<String> = pages
                .iter()
                .flat_map(|p| p["notes"].as_array().unwrap().clone())
                .map(|n| n["path"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(got, want, "{args} limit {limit}");
            for p in &pages {
                assert_eq!(p["total"], want.len(), "{args} limit {limit}");
            }
        }
    }
    s.stop().await;
}

/// A vault whose Obsidian settings exclude a folder and, by regex, draft notes.
fn excluded_files_vault() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            (
                ".obsidian/app.json",
                r#"{"userIgnoreFilters": ["Archive/", "/\\.draft\\.md$/"]}"#,
            ),
            ("Live.md", "quokka here\n"),
            ("Hub.md", "see [[Live]] and [[Archive/Old]]\n"),
            ("Archive/Old.md", "an old quokka [[Live]] #zoo\n"),
            ("Archive/Lonely.md", "nobody links here\n"),
            ("Notes/Idea.draft.md", "a quokka draft [[Nowhere]]\n"),
        ],
    );
    tmp
}

/// The paths `tool` returns for `args`, across every page, found under `key`.
async fn all_paths(s: &Server, tool: &str, args: Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = s
        .pages(tool, args)
        .await
        .iter()
        .flat_map(|p| p[key].as_array().unwrap().clone())
        .map(|v| match &v {
            Value::String(p) => p.clone(),
            _ => v
                .get("path")
                .or_else(|| v.get("source"))
                .and_then(Value::as_str)
                .unwrap()
                .to_owned(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn obsidian_excluded_files_are_left_out_of_search_lists_and_graph_but_stay_readable() {
    let tmp = excluded_files_vault();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    for mode in ["ranked", "exact", "regex"] {
        let r = s
            .ok(
                "search_notes",
                json!({"query": "quokka", "mode": mode, "limit": 50}),
            )
            .await;
        let mut got: Vec<&str> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap())
            .collect();
        got.dedup();
        assert_eq!(got, ["Live.md"], "{mode}: {r}");
        assert_eq!(r["total"], 1, "{mode}");
    }
    let listed = all_paths(&s, "list_notes", json!({"limit": 2}), "notes").await;
    assert_eq!(listed, ["Hub.md", "Live.md"]);
    let page = s.ok("list_notes", json!({"limit": 1})).await;
    assert_eq!(page["total"], 2);
    let tagged = s.ok("list_notes", json!({"tag": "zoo"})).await;
    assert_eq!(tagged["total"], 0, "{tagged}");
    // Archive/Lonely.md is an orphan, but excluded; Hub.md is the only one shown.
    let orphans = all_paths(&s, "find_orphans", json!({}), "items").await;
    assert_eq!(orphans, ["Hub.md"]);
    let broken = all_paths(&s, "find_broken_links", json!({}), "items").await;
    assert!(broken.is_empty(), "{broken:?}");
    let near = all_paths(
        &s,
        "get_neighbors",
        json!({"path": "Live.md", "depth": 2}),
        "items",
    )
    .await;
    assert_eq!(near, ["Hub.md"]);
    // Readable by path, as in Obsidian.
    let old = s.ok("read_note", json!({"path": "Archive/Old.md"})).await;
    assert!(
        old["content"].as_str().unwrap().contains("old quokka"),
        "{old}"
    );

    // Settings edited while the server runs apply within a second.
    std::fs::write(
        tmp.path().join(".obsidian/app.json"),
        r#"{"userIgnoreFilters": ["Archive/"]}"#,
    )
    .unwrap();
    s.eventually(
        5,
        "search_notes",
        json!({"query": "quokka", "mode": "exact"}),
        |r| r["total"] == 2,
    )
    .await;
    s.stop().await;

    let s = Server::start_with(tmp.path(), &["--show-obsidian-excluded"]).await;
    s.wait_index_ready().await;
    let r = s
        .ok("search_notes", json!({"query": "quokka", "limit": 50}))
        .await;
    assert_eq!(r["total"], 3, "{r}");
    let listed = all_paths(&s, "list_notes", json!({}), "notes").await;
    assert_eq!(listed.len(), 5, "{listed:?}");
    s.stop().await;
}
