//! Every tool and the resources API, driven through a real rmcp client talking to the real
//! `capvault` binary over stdio, including the error replies.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::{Duration, SystemTime};

use crate::common::{Server, write_tree};
use serde_json::{Value, json};

/// A vault with known notes and known modification times (newest first: b, a, c/d tie, e).
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let v = tmp.path().join("My Vault");
    write_tree(
        &v,
        &[
            ("Home.md", "# Home\nWelcome to the garden of notes.\n"),
            (
                "Projects/Garden Plan.md",
                "# Garden plan\nPlant garlic in November.\nThe GARDEN needs compost.\nnothing here\n",
            ),
            (
                "Projects/Budget.md",
                "Costs\nSeeds: 12 EUR\nGarden hose: 30 EUR\n",
            ),
            ("Archive/Old.md", "old stuff\n"),
            ("Archive/Deep/Older.md", "older stuff\n"),
            ("Notes/Café ☕.md", "un café, s'il vous plaît\n"),
            ("Notes/readme.txt", "not a note\n"),
            (".obsidian/app.json", "{\"HIDDEN\": true}\n"),
        ],
    );
    std::fs::write(v.join("bin.md"), b"caf\xff garden\n").unwrap();
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let times = [
        ("Projects/Budget.md", 500),
        ("Home.md", 400),
        ("Archive/Old.md", 300),
        ("Archive/Deep/Older.md", 300),
        ("Projects/Garden Plan.md", 200),
        ("Notes/Café ☕.md", 100),
        ("bin.md", 50),
    ];
    for (p, secs) in times {
        let f = std::fs::File::options()
            .write(true)
            .open(v.join(p))
            .unwrap();
        f.set_modified(base + Duration::from_secs(secs)).unwrap();
    }
    tmp
}

fn vault(tmp: &tempfile::TempDir) -> std::path::PathBuf {
    tmp.path().join("My Vault")
}

fn paths(list: &Value) -> Vec<String> {
    crate::common::paths_at(list, "notes")
}

#[tokio::test]
async fn server_identifies_itself_and_hides_the_host_path() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let info = s.client.peer_info().expect("server info");
    let si = info.server_info.as_ref().expect("implementation");
    assert_eq!(si.name, "capvault");
    assert_eq!(si.version, env!("CARGO_PKG_VERSION"));
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains("My Vault"), "{instructions}");
    assert!(!instructions.contains(tmp.path().to_str().unwrap()));
    assert!(info.capabilities.tools.is_some() && info.capabilities.resources.is_some());
    s.stop().await;
}

#[tokio::test]
async fn tools_have_fixed_names_truthful_annotations_and_output_schemas() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "changes_since",
            "find_broken_links",
            "find_orphans",
            "get_links",
            "get_neighbors",
            "get_periodic_note",
            "list_bases",
            "list_folders",
            "list_notes",
            "list_tags",
            "list_tasks",
            "query_base",
            "read_attachment",
            "read_canvas",
            "read_note",
            "resolve_link",
            "run_query",
            "search_notes",
            "vault_info",
        ]
    );
    for t in &tools {
        let a = t.annotations.as_ref().expect("annotations");
        assert_eq!(a.read_only_hint, Some(true), "{}", t.name);
        // Meaningful only when readOnlyHint is false (the spec): not sent.
        assert_eq!(
            (a.destructive_hint, a.idempotent_hint),
            (None, None),
            "{}",
            t.name
        );
        assert_eq!(a.open_world_hint, Some(false), "{}", t.name);
        assert!(t.output_schema.is_some(), "{} has no outputSchema", t.name);
        assert!(t.description.as_ref().is_some_and(|d| d.len() > 20));
    }
    s.stop().await;
}

#[tokio::test]
async fn read_note_returns_text_size_time_and_sha256() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let r = s
        .ok("read_note", json!({"path": "Projects/Garden Plan.md"}))
        .await;
    let bytes = std::fs::read(vault(&tmp).join("Projects/Garden Plan.md")).unwrap();
    assert_eq!(r["path"], "Projects/Garden Plan.md");
    assert_eq!(r["content"].as_str().unwrap().as_bytes(), &bytes[..]);
    assert_eq!(r["size"], bytes.len());
    assert_eq!(r["sha256"], crate::common::sha256_hex(&bytes));
    assert_eq!(r["modified"], "2023-11-14T22:16:40.000Z");
    // Non-ASCII names work as they are.
    let r = s.ok("read_note", json!({"path": "Notes/Café ☕.md"})).await;
    assert!(r["content"].as_str().unwrap().contains("plaît"));
    s.stop().await;
}

#[tokio::test]
async fn read_note_errors_are_short_and_name_only_vault_paths() {
    let tmp = fixture();
    let s = Server::start_with(&vault(&tmp), &["--max-file-size", "64"]).await;
    std::fs::write(vault(&tmp).join("big.md"), "x".repeat(65)).unwrap();
    let cases = [
        (json!({"path": "Nope.md"}), "Nope.md: not found"),
        (json!({"path": "Projects"}), "Projects: is a folder"),
        (json!({"path": "bin.md"}), "bin.md: is not valid UTF-8"),
        (
            json!({"path": "big.md"}),
            "big.md: is 65 bytes, over the 64-byte limit",
        ),
        (json!({"path": ".obsidian/app.json"}), "hidden"),
        (json!({"path": ""}), "the path is empty"),
        (json!({"path": "Home.md/x"}), "Home.md/x: not found"),
    ];
    for (args, want) in cases {
        let msg = s.err("read_note", args.clone()).await;
        assert!(msg.contains(want), "{args}: {msg}");
        assert!(!msg.contains(tmp.path().to_str().unwrap()), "{msg}");
        assert!(msg.len() < 300, "{msg}");
    }
    // Unknown and missing arguments are refused too, whatever layer refuses them.
    for args in [json!({}), json!({"path": "Home.md", "bogus": 1})] {
        let outcome = s
            .client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("read_note")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await;
        if let Ok(r) = outcome {
            assert_eq!(r.is_error, Some(true), "{args} accepted");
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn list_notes_is_newest_first_with_path_ties_and_filters() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let all = s.ok("list_notes", json!({})).await;
    assert_eq!(
        paths(&all),
        [
            "Projects/Budget.md",
            "Home.md",
            "Archive/Deep/Older.md",
            "Archive/Old.md",
            "Projects/Garden Plan.md",
            "Notes/Café ☕.md",
            "bin.md"
        ]
    );
    assert_eq!(all["total"], 7);
    assert!(all.get("next_cursor").is_none());
    assert_eq!(all["truncated"], false);
    let first = s.ok("list_notes", json!({"limit": 2})).await;
    assert_eq!(first["truncated"], true);
    assert_eq!(all["notes"][0]["size"], 40);
    let archive = s.ok("list_notes", json!({"folder": "Archive"})).await;
    assert_eq!(paths(&archive), ["Archive/Deep/Older.md", "Archive/Old.md"]);
    let shallow = s
        .ok(
            "list_notes",
            json!({"folder": "Archive/", "recursive": false}),
        )
        .await;
    assert_eq!(paths(&shallow), ["Archive/Old.md"]);
    let root_only = s.ok("list_notes", json!({"recursive": false})).await;
    assert_eq!(paths(&root_only), ["Home.md", "bin.md"]);
    s.stop().await;
}

#[tokio::test]
async fn list_notes_pages_with_an_opaque_cursor() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let all = paths(&s.ok("list_notes", json!({})).await);
    let pages = s.pages("list_notes", json!({"limit": 3})).await;
    assert!(pages.iter().all(|p| paths(p).len() <= 3));
    let seen: Vec<String> = pages.iter().flat_map(paths).collect();
    assert_eq!(seen, all);
    // A cursor is only valid for the listing that made it, and garbage is refused.
    let page = s.ok("list_notes", json!({"limit": 1})).await;
    let c = page["next_cursor"].as_str().unwrap();
    let msg = s
        .err("list_notes", json!({"folder": "Archive", "cursor": c}))
        .await;
    assert!(msg.contains("other arguments"), "{msg}");
    let msg = s.err("list_notes", json!({"cursor": "not-a-cursor"})).await;
    assert!(msg.contains("invalid cursor"), "{msg}");
    let msg = s.err("list_notes", json!({"limit": 0})).await;
    assert!(
        msg.contains("`limit` must be a whole number from 1 to 1000"),
        "{msg}"
    );
    let msg = s.err("list_notes", json!({"folder": "Nope"})).await;
    assert!(msg.contains("Nope: not found"), "{msg}");
    let msg = s.err("list_notes", json!({"folder": "Home.md"})).await;
    assert!(msg.contains("Home.md: is not a folder"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn exact_search_scores_name_matches_first_then_lines() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    // Once built, the search runs over the texts kept in memory, names included.
    s.wait_index_ready().await;
    let r = s
        .ok("search_notes", json!({"mode": "exact", "query": "garden"}))
        .await;
    let hits: Vec<(String, u64, u64)> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_owned(),
                h["line"].as_u64().unwrap(),
                h["score"].as_f64().unwrap() as u64,
            )
        })
        .collect();
    assert_eq!(
        hits,
        [
            ("Projects/Garden Plan.md".into(), 1, 12),
            ("Projects/Garden Plan.md".into(), 3, 12),
            ("Home.md".into(), 2, 1),
            ("Projects/Budget.md".into(), 3, 1),
            ("bin.md".into(), 1, 1),
        ]
    );
    assert_eq!(r["total"], 5);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["hits"][1]["excerpt"], "The GARDEN needs compost.");
    // Invalid UTF-8 is replaced in excerpts, not refused.
    assert!(
        r["hits"][4]["excerpt"]
            .as_str()
            .unwrap()
            .contains('\u{fffd}')
    );

    let r = s
        .ok(
            "search_notes",
            json!({"mode": "exact", "query": "GARDEN", "case_sensitive": true}),
        )
        .await;
    assert_eq!(r["total"], 1);
    assert_eq!(r["hits"][0]["line"], 3);

    let r = s
        .ok(
            "search_notes",
            json!({"mode": "exact", "query": "garden", "folder": "Projects", "limit": 2}),
        )
        .await;
    assert_eq!(r["hits"].as_array().unwrap().len(), 2);
    assert_eq!(r["total"], 3);
    assert_eq!(r["truncated"], true);

    // Paging through every hit with the cursor gives the same hits as one big page.
    let all = s
        .ok(
            "search_notes",
            json!({"mode": "exact", "query": "garden", "limit": 200}),
        )
        .await;
    let paged: Vec<Value> = s
        .pages(
            "search_notes",
            json!({"mode": "exact", "query": "garden", "limit": 2}),
        )
        .await
        .iter()
        .flat_map(|page| page["hits"].as_array().unwrap().clone())
        .collect();
    assert_eq!(&Value::Array(paged), &all["hits"]);
    let c = s
        .ok(
            "search_notes",
            json!({"mode": "exact", "query": "garden", "limit": 1}),
        )
        .await["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let msg = s
        .err(
            "search_notes",
            json!({"mode": "exact", "query": "compost", "cursor": c}),
        )
        .await;
    assert!(msg.contains("other arguments"), "{msg}");

    // A match on the file name alone yields one hit on the title, at line 1.
    let r = s
        .ok("search_notes", json!({"mode": "exact", "query": "budget"}))
        .await;
    assert_eq!(r["hits"][0]["path"], "Projects/Budget.md");
    assert_eq!(r["hits"][0]["line"], 1);
    assert_eq!(r["hits"][0]["score"], 10.0);
    assert_eq!(r["hits"][0]["matched"], "title");
    assert_eq!(r["hits"][0]["excerpt"], "Budget");

    let r = s
        .ok("search_notes", json!({"mode": "exact", "query": "zebra"}))
        .await;
    assert_eq!(r["total"], 0);
    // Hidden folders are never searched.
    let r = s
        .ok("search_notes", json!({"mode": "exact", "query": "HIDDEN"}))
        .await;
    assert_eq!(r["total"], 0);

    let msg = s
        .err("search_notes", json!({"mode": "exact", "query": ""}))
        .await;
    assert!(msg.contains("query is empty"), "{msg}");
    let msg = s
        .err(
            "search_notes",
            json!({"mode": "exact", "query": "x", "limit": 500}),
        )
        .await;
    assert!(
        msg.contains("`limit` must be a whole number from 1 to 200"),
        "{msg}"
    );
    let msg = s
        .err(
            "search_notes",
            json!({"mode": "exact", "query": "x", "folder": "../"}),
        )
        .await;
    assert!(msg.starts_with("refused: invalid path"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn resources_list_template_and_read() {
    let tmp = fixture();
    let s = Server::start(&vault(&tmp)).await;
    let resources = s.client.list_all_resources().await.unwrap();
    let uris: Vec<_> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "capvault:///Archive/Deep/Older.md",
            "capvault:///Archive/Old.md",
            "capvault:///Home.md",
            "capvault:///Notes/Caf%C3%A9%20%E2%98%95.md",
            "capvault:///Projects/Budget.md",
            "capvault:///Projects/Garden%20Plan.md",
            "capvault:///bin.md",
        ]
    );
    assert!(
        resources
            .iter()
            .all(|r| r.mime_type.as_deref() == Some("text/markdown"))
    );
    let templates = s.client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "capvault:///{+path}");

    let body = s
        .read_resource("capvault:///Projects/Garden%20Plan.md")
        .await
        .unwrap();
    assert!(body.contains("Plant garlic in November"), "{body}");
    assert!(body.contains("text/markdown"));

    let (code, msg) = s.read_resource("capvault:///Nope.md").await.unwrap_err();
    assert_eq!(code, -32002, "{msg}");
    assert!(msg.contains("Nope.md: not found"));
    for bad in [
        "capvault:///%2e%2e/secret.md",
        "capvault:///.obsidian/app.json",
        "file:///etc/passwd",
        "capvault:///bin.md",
    ] {
        let (code, msg) = s.read_resource(bad).await.unwrap_err();
        assert_eq!(code, -32602, "{bad}: {msg}");
        assert!(!msg.contains(tmp.path().to_str().unwrap()));
    }
    s.stop().await;
}

#[tokio::test]
async fn resources_are_paged_past_two_hundred_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<(String, String)> = (0..450)
        .map(|i| (format!("f{}/n{i:04}.md", i % 7), format!("note {i}")))
        .collect();
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;
    let first = s.client.list_resources(None).await.unwrap();
    assert_eq!(first.resources.len(), 200);
    assert!(first.next_cursor.is_some());
    let all = s.client.list_all_resources().await.unwrap();
    assert_eq!(all.len(), 450);
    let mut uris: Vec<_> = all.iter().map(|r| r.uri.clone()).collect();
    let before = uris.clone();
    uris.sort();
    uris.dedup();
    assert_eq!(uris, before, "pages overlap or are out of order");
    s.stop().await;
}

#[tokio::test]
async fn list_notes_globs_keep_a_star_within_one_folder_and_double_stars_cross() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("Top.md", "top\n"),
            ("Templates/Book Template.md", "t\n"),
            ("Templates/Bases/Trips.base", "views:\n  - type: table\n"),
            ("Templates/Deep/More.md", "m\n"),
        ],
    );
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    let listed = |r: &Value| {
        let mut v: Vec<String> = r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["path"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let r = s
        .ok("list_notes", json!({"glob": "Templates/*", "kind": "any"}))
        .await;
    assert_eq!(listed(&r), ["Templates/Book Template.md"], "{r}");
    let r = s.ok("list_notes", json!({"glob": "*"})).await;
    assert_eq!(listed(&r), ["Top.md"], "{r}");
    let r = s
        .ok("list_notes", json!({"glob": "Templates/**", "kind": "any"}))
        .await;
    assert_eq!(
        listed(&r),
        [
            "Templates/Bases/Trips.base",
            "Templates/Book Template.md",
            "Templates/Deep/More.md"
        ],
        "{r}"
    );
    let r = s.ok("list_notes", json!({"glob": "**/*.md"})).await;
    assert_eq!(listed(&r).len(), 3, "{r}");
    s.stop().await;
}
