//! The knowledge-model tools over the example vault, through the real binary over stdio.
//! Facts asserted here were checked by hand against `examples/vault/`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

use crate::common::{Server, copy_tree};
use serde_json::{Value, json};

/// A private copy of examples/vault plus one orphan note.
fn example_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dst = tmp.path().join("vault");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vault"),
        &dst,
    );
    std::fs::write(
        dst.join("Loose Thought.md"),
        "Nothing links here, and this links nowhere.\n",
    )
    .unwrap();
    (tmp, dst)
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x[field].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn outgoing_links_resolve_with_headings_blocks_and_aliases() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s
        .ok(
            "get_links",
            json!({"path": "Projects/Garden Plan.md", "direction": "out"}),
        )
        .await;
    let out = r["outgoing"].as_array().unwrap();
    let find = |raw: &str| {
        out.iter()
            .find(|l| l["raw"] == raw)
            .unwrap_or_else(|| panic!("no link {raw} in {r}"))
            .clone()
    };
    let l = find("[[Compost#Ratios]]");
    assert_eq!(l["resolved"], "Resources/Compost.md");
    assert_eq!(l["subpath"], "#Ratios");
    assert_eq!(l["status"], "resolved");
    assert_eq!(l["kind"], "wikilink");
    assert_eq!(l["line"], 34);
    let l = find("[[Compost#^browns-greens]]");
    assert_eq!(l["status"], "resolved");
    assert_eq!(l["subpath"], "#^browns-greens");
    let l = find("[[Daily/2026-11-30|today]]");
    assert_eq!(l["resolved"], "Daily/2026-11-30.md");
    assert_eq!(l["line"], 11);
    assert!(r.get("incoming").is_none());
    s.stop().await;
}

#[tokio::test]
async fn backlinks_list_every_source_with_line_and_excerpt() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s
        .ok(
            "get_links",
            json!({"path": "Resources/Compost.md", "direction": "in"}),
        )
        .await;
    let sources = strings(&r["incoming"], "source");
    for want in [
        "Areas/Garden Journal.md",
        "Home.md",
        "Projects/Garden Plan.md",
        "Resources/The Patient Plot.md",
    ] {
        assert!(
            sources.iter().any(|s| s == want),
            "{want} missing from {sources:?}"
        );
    }
    // The markdown link [compost ratios](Resources/Compost.md#Ratios) in Home.md counts.
    let home: Vec<&Value> = r["incoming"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["source"] == "Home.md")
        .collect();
    assert_eq!(home.len(), 2, "{home:?}");
    assert!(home.iter().all(|l| l["line"] == 22));
    assert!(
        home[0]["excerpt"]
            .as_str()
            .unwrap()
            .contains("compost ratios")
    );
    assert_eq!(r["incoming_total"], r["incoming"].as_array().unwrap().len());
    s.stop().await;
}

#[tokio::test]
async fn the_only_broken_link_is_the_deliberate_one() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s.ok("find_broken_links", json!({})).await;
    assert_eq!(r["total"], 1, "{r}");
    assert_eq!(r["items"][0]["source"], "Inbox.md");
    assert_eq!(r["items"][0]["raw"], "[[Greenhouse Ideas]]");
    assert_eq!(r["items"][0]["status"], "broken");
    // A heading that does not exist is reported as such.
    std::fs::write(
        v.join("Bad.md"),
        "See [[Compost#No Such Heading]] and [[Compost#^nope]].\n",
    )
    .unwrap();
    let r = s.ok("find_broken_links", json!({"limit": 10})).await;
    let statuses: Vec<String> = strings(&r["items"], "status");
    assert_eq!(
        statuses,
        ["missing_heading", "missing_block", "broken"],
        "{r}"
    );
    let r = s
        .ok("find_broken_links", json!({"folder": "Projects"}))
        .await;
    assert_eq!(r["total"], 0);
    s.stop().await;
}

#[tokio::test]
async fn orphans_neighbors_and_tags() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s.ok("find_orphans", json!({})).await;
    assert_eq!(r["items"], json!(["Loose Thought.md"]), "{r}");
    let r = s.ok("find_orphans", json!({"no_outbound": true})).await;
    assert_eq!(r["items"], json!(["Loose Thought.md"]));

    let r = s
        .ok(
            "get_neighbors",
            json!({"path": "Resources/Compost.md", "direction": "in", "depth": 1}),
        )
        .await;
    let near = strings(&r["items"], "path");
    assert!(
        near.contains(&"Home.md".to_owned())
            && near.contains(&"Areas/Garden Journal.md".to_owned())
    );
    assert!(
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["distance"] == 1)
    );
    let r2 = s
        .ok(
            "get_neighbors",
            json!({"path": "Resources/Compost.md", "direction": "in", "depth": 2}),
        )
        .await;
    assert!(r2["total"].as_u64() > r["total"].as_u64(), "{r2}");
    let msg = s
        .err("get_neighbors", json!({"path": "Home.md", "depth": 6}))
        .await;
    assert!(
        msg.contains("`depth` must be a whole number from 1 to 5"),
        "{msg}"
    );

    let r = s.ok("list_tags", json!({"prefix": "garden"})).await;
    let tags: Vec<(String, u64)> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tag"].as_str().unwrap().to_owned(),
                t["notes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tags,
        [
            ("garden".to_owned(), 6),
            ("garden/planning".to_owned(), 1),
            ("garden/soil".to_owned(), 1)
        ]
    );
    let r = s.ok("list_tags", json!({"sort": "name", "limit": 3})).await;
    assert_eq!(strings(&r["items"], "tag"), ["area", "book", "daily"]);
    assert_eq!(r["truncated"], true);
    // `not-a-tag` sits in a code block and must not be a tag.
    let r = s.ok("list_tags", json!({"limit": 1000})).await;
    assert!(!strings(&r["items"], "tag").iter().any(|t| t == "not-a-tag"));
    s.stop().await;
}

#[tokio::test]
async fn resolve_link_explains_each_outcome() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s
        .ok("resolve_link", json!({"link": "[[Compost#Ratios|ratios]]"}))
        .await;
    assert_eq!(
        (r["resolved"].as_str(), r["status"].as_str()),
        (Some("Resources/Compost.md"), Some("resolved"))
    );
    let r = s
        .ok("resolve_link", json!({"link": "Seed Catalogue"}))
        .await;
    assert_eq!(r["resolved"], "Resources/Seed Catalogue.md");
    let r = s
        .ok("resolve_link", json!({"link": "[[Greenhouse Ideas]]"}))
        .await;
    assert_eq!(r["status"], "broken");
    assert!(r["resolved"].is_null());
    let r = s
        .ok("resolve_link", json!({"link": "[[Veg Garden]]"}))
        .await;
    assert_eq!(r["status"], "broken");
    assert_eq!(r["alias_matches"], json!(["Projects/Garden Plan.md"]));
    assert!(r["explanation"].as_str().unwrap().contains("alias"));
    let r = s
        .ok("resolve_link", json!({"link": "[[Garden Plan#Nope]]"}))
        .await;
    assert_eq!(r["status"], "missing_heading");
    let r = s
        .ok(
            "resolve_link",
            json!({"link": "[text](Resources/Compost.md#Ratios)"}),
        )
        .await;
    assert_eq!(r["resolved"], "Resources/Compost.md");
    s.stop().await;
}

#[tokio::test]
async fn read_note_views_sections_lines_and_pages() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let p = "Projects/Garden Plan.md";
    let full = s.ok("read_note", json!({"path": p})).await;
    let text = full["content"].as_str().unwrap().to_owned();
    assert!(full.get("next_offset").is_none());

    let outline = s
        .ok("read_note", json!({"path": p, "format": "outline"}))
        .await;
    let headings = outline["outline"].as_array().unwrap();
    assert!(!headings.is_empty());
    assert!(outline.get("content").is_none());
    let first = &headings[0];
    let line = first["line"].as_u64().unwrap() as usize;
    assert!(
        text.lines()
            .nth(line - 1)
            .unwrap()
            .contains(first["text"].as_str().unwrap())
    );

    let sec = s
        .ok("read_note", json!({"path": p, "section": "Sowing dates"}))
        .await;
    let body = sec["content"].as_str().unwrap();
    assert!(
        body.starts_with("## Sowing dates") || body.contains("Sowing dates"),
        "{body}"
    );
    assert!(body.len() < text.len());
    let (a, b) = (
        sec["line_range"][0].as_u64().unwrap(),
        sec["line_range"][1].as_u64().unwrap(),
    );
    let expected: String = text
        .lines()
        .skip(a as usize - 1)
        .take((b - a + 1) as usize)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(body.trim_end(), expected.trim_end());

    let lines = s.ok("read_note", json!({"path": p, "lines": "1-3"})).await;
    assert_eq!(lines["content"].as_str().unwrap().lines().count(), 3);
    assert_eq!(
        lines["content"].as_str().unwrap(),
        text.lines()
            .take(3)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );

    // A line as a number (what models send) is the line as text.
    let one = s.ok("read_note", json!({"path": p, "lines": 2})).await;
    assert_eq!(
        one["content"].as_str().unwrap(),
        format!("{}\n", text.lines().nth(1).unwrap())
    );

    // Paging by characters reassembles the note exactly.
    let mut assembled = String::new();
    let mut offset = 0u64;
    loop {
        let page = s
            .ok(
                "read_note",
                json!({"path": p, "max_chars": 100, "offset": offset}),
            )
            .await;
        assembled.push_str(page["content"].as_str().unwrap());
        match page["next_offset"].as_u64() {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert_eq!(assembled, text);

    let fm = s
        .ok("read_note", json!({"path": p, "format": "frontmatter"}))
        .await;
    assert_eq!(fm["frontmatter"]["status"], "active");
    assert_eq!(fm["frontmatter"]["aliases"], json!(["Veg Garden"]));
    let md = s
        .ok("read_note", json!({"path": p, "format": "metadata"}))
        .await;
    let tags: Vec<&str> = md["metadata"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tags, ["project", "garden", "garden/planning"]);
    assert!(
        md["metadata"]["block_ids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["id"] == "sowing-dates")
    );
    assert_eq!(md["sha256"], full["sha256"]);

    let msg = s
        .err("read_note", json!({"path": p, "section": "Nope"}))
        .await;
    assert!(msg.contains("no heading `Nope`"), "{msg}");
    let msg = s
        .err("read_note", json!({"path": p, "lines": "500-600"}))
        .await;
    assert!(msg.contains("lines 500-600: the note has"), "{msg}");
    let msg = s
        .err(
            "read_note",
            json!({"path": p, "format": "outline", "lines": "1"}),
        )
        .await;
    assert!(msg.contains("format `content` only"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn list_notes_filters_by_tag_property_and_glob() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let paths = |r: &Value| {
        let mut p = strings(&r["notes"], "path");
        p.sort();
        p
    };
    let r = s.ok("list_notes", json!({"tag": "garden/soil"})).await;
    // Compost has `soil` and `garden` as separate tags, not the nested `garden/soil`.
    assert_eq!(paths(&r), ["Areas/Garden Journal.md"]);
    let r = s.ok("list_notes", json!({"tag": "#Garden"})).await;
    assert_eq!(r["total"], 6);
    let r = s
        .ok(
            "list_notes",
            json!({"property": "status", "value": "ACTIVE"}),
        )
        .await;
    assert!(
        paths(&r).contains(&"Projects/Garden Plan.md".to_owned()),
        "{r}"
    );
    let r = s.ok("list_notes", json!({"glob": "Daily/**"})).await;
    assert_eq!(paths(&r), ["Daily/2026-11-29.md", "Daily/2026-11-30.md"]);
    let r = s
        .ok("list_notes", json!({"glob": "Daily/**", "tag": "garden"}))
        .await;
    assert_eq!(r["total"], 0);
    let msg = s.err("list_notes", json!({"value": "x"})).await;
    assert!(msg.contains("needs `property`"));
    s.stop().await;
}

#[tokio::test]
async fn the_model_follows_changes_on_disk() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s.ok("find_broken_links", json!({})).await;
    assert_eq!(r["total"], 1);
    // Creating the missing note fixes the broken link...
    std::fs::write(
        v.join("Projects/Greenhouse Ideas.md"),
        "# Greenhouse\n#garden/greenhouse\n",
    )
    .unwrap();
    let r = s.ok("find_broken_links", json!({})).await;
    assert_eq!(r["total"], 0, "{r}");
    let r = s
        .ok("list_tags", json!({"prefix": "garden/greenhouse"}))
        .await;
    assert_eq!(r["items"][0]["notes"], 1);
    // ...deleting it breaks it again, and renaming a linked note breaks its backlinks.
    std::fs::remove_file(v.join("Projects/Greenhouse Ideas.md")).unwrap();
    std::fs::rename(v.join("Resources/Compost.md"), v.join("Resources/Humus.md")).unwrap();
    let r = s.ok("find_broken_links", json!({"limit": 1000})).await;
    let raws = strings(&r["items"], "raw");
    assert!(raws.contains(&"[[Greenhouse Ideas]]".to_owned()));
    assert!(
        raws.iter().filter(|r| r.contains("Compost")).count() >= 5,
        "{raws:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn vault_info_reports_counts_and_obsidian_settings() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    s.wait_index_ready().await;
    let r = s.ok("vault_info", json!({})).await;
    assert_eq!(r["name"], "vault");
    assert_eq!(r["notes"], 15, "{r}");
    assert_eq!(r["canvases"], 1);
    assert_eq!(r["attachments"], 0);
    assert_eq!(r["writes_enabled"], false);
    assert_eq!(r["settings"]["app"]["new_link_format"], "shortest");
    assert_eq!(
        r["settings"]["app"]["attachment_folder_path"],
        "Attachments"
    );
    assert_eq!(r["settings"]["app"]["trash_option"], "local");
    assert_eq!(r["settings"]["daily_notes"]["folder"], "Daily");
    assert_eq!(r["settings"]["daily_notes"]["source"], "daily-notes");
    assert_eq!(r["settings"]["templates"]["folder"], "Templates");
    assert_eq!(r["settings"]["errors"], json!([]));
    // A broken settings file is reported by its vault-relative name, not fatal.
    std::fs::write(v.join(".obsidian/templates.json"), "{not json").unwrap();
    let r = s.ok("vault_info", json!({})).await;
    let errors = r["settings"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .starts_with(".obsidian/templates.json"),
        "{errors:?}"
    );
    assert!(!r.to_string().contains(_tmp.path().to_str().unwrap()));
    s.stop().await;
}

#[tokio::test]
async fn daily_notes_follow_the_vault_settings() {
    let (_tmp, v) = example_copy();
    let s = Server::start(&v).await;
    let r = s.ok("get_daily_note", json!({"date": "2026-11-30"})).await;
    assert_eq!(r["path"], "Daily/2026-11-30.md");
    assert_eq!(r["exists"], true);
    assert!(r["content"].as_str().unwrap().contains("date: 2026-11-30"));
    assert_eq!(r["source"], "daily-notes");
    let r = s.ok("get_daily_note", json!({"date": "2026-11-28"})).await;
    assert_eq!(r["exists"], false);
    assert_eq!(r["path"], "Daily/2026-11-28.md");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("no daily note for 2026-11-28")
    );
    let msg = s.err("get_daily_note", json!({"date": "30/11/2026"})).await;
    assert!(
        msg.starts_with("invalid_argument: `date`: the value is not a date: use YYYY-MM-DD"),
        "{msg}"
    );
    s.stop().await;

    // Periodic Notes, when enabled, takes precedence, and `/` in the format makes folders.
    std::fs::write(
        v.join(".obsidian/community-plugins.json"),
        r#"["periodic-notes"]"#,
    )
    .unwrap();
    std::fs::create_dir_all(v.join(".obsidian/plugins/periodic-notes")).unwrap();
    std::fs::write(
        v.join(".obsidian/plugins/periodic-notes/data.json"),
        r#"{"daily": {"enabled": true, "folder": "Journal", "format": "YYYY/MM/YYYY-MM-DD ddd", "template": ""}}"#,
    )
    .unwrap();
    crate::common::write_tree(
        &v,
        &[("Journal/2026/11/2026-11-30 Mon.md", "periodic daily\n")],
    );
    let s = Server::start(&v).await;
    let r = s.ok("get_daily_note", json!({"date": "2026-11-30"})).await;
    assert_eq!(r["path"], "Journal/2026/11/2026-11-30 Mon.md", "{r}");
    assert_eq!(r["source"], "periodic-notes");
    assert_eq!(r["content"], "periodic daily\n");
    s.stop().await;
}

#[tokio::test]
async fn canvases_are_validated_and_file_nodes_resolved() {
    let (_tmp, v) = example_copy();
    let s = Server::start_with(&v, &["--rescan-after", "0"]).await;
    let r = s
        .ok(
            "read_canvas",
            json!({"path": "Projects/Garden Layout.canvas"}),
        )
        .await;
    assert!(r["canvas"]["nodes"].as_array().unwrap().len() >= 3);
    assert_eq!(r["canvas"]["issues"], json!([]), "{r}");
    let files = r["files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f["resolved"] == "Projects/Garden Plan.md"),
        "{r}"
    );
    std::fs::write(
        v.join("Bad.canvas"),
        r#"{"nodes":[{"id":"a","type":"file","file":"Nowhere.md","x":0,"y":0,"width":10,"height":10}],"edges":[{"id":"e","fromNode":"a","toNode":"zz"}]}"#,
    )
    .unwrap();
    let r = s.ok("read_canvas", json!({"path": "Bad.canvas"})).await;
    assert!(r["files"][0]["resolved"].is_null());
    assert!(!r["canvas"]["issues"].as_array().unwrap().is_empty(), "{r}");
    let msg = s.err("read_canvas", json!({"path": "Home.md"})).await;
    assert!(msg.contains("not a canvas"));
    std::fs::write(v.join("Broken.canvas"), "{nope").unwrap();
    let msg = s.err("read_canvas", json!({"path": "Broken.canvas"})).await;
    assert!(msg.starts_with("invalid_argument: Broken.canvas:"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn attachments_come_back_whole_or_not_at_all() {
    let (_tmp, v) = example_copy();
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRfake";
    crate::common::write_tree(&v, &[("Attachments/readme.txt", "x")]);
    std::fs::write(v.join("Attachments/pixel.png"), png).unwrap();
    let big = std::fs::File::create(v.join("Attachments/huge.pdf")).unwrap();
    big.set_len(7 * 1024 * 1024).unwrap();
    let s = Server::start(&v).await;
    let r = s
        .call("read_attachment", json!({"path": "Attachments/pixel.png"}))
        .await;
    assert!(!r.is_error, "{}", r.raw);
    assert_eq!(r.structured["mime_type"], "image/png");
    assert_eq!(r.structured["size"], png.len());
    let raw: Value = serde_json::from_str(&r.raw).unwrap();
    let blob = raw["content"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| c["resource"]["blob"].as_str())
        .expect("an embedded blob resource");
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap(),
        png
    );
    let msg = s
        .err("read_attachment", json!({"path": "Attachments/huge.pdf"}))
        .await;
    assert!(msg.contains("over the 6291456-byte limit"), "{msg}");
    let msg = s
        .err("read_attachment", json!({"path": ".obsidian/app.json"}))
        .await;
    assert!(msg.contains("hidden"), "{msg}");
    s.stop().await;
}

#[tokio::test]
async fn parent_tags_take_their_casing_from_a_child_even_when_case_changes_length() {
    let tmp = tempfile::tempdir().unwrap();
    // `İ` lower-cases to two characters: byte lengths of display and normalised forms differ.
    crate::common::write_tree(
        tmp.path(),
        &[
            ("a.md", "#İstanbul/Trip and #Proj/Alpha\n"),
            ("b.md", "#proj/beta\n"),
        ],
    );
    let s = Server::start(tmp.path()).await;
    let r = s
        .ok("list_tags", json!({"sort": "name", "limit": 100}))
        .await;
    let tags = strings(&r["items"], "tag");
    assert!(tags.contains(&"İstanbul".to_owned()), "{tags:?}");
    assert!(tags.contains(&"Proj".to_owned()), "{tags:?}");
    assert_eq!(find_count(&r, "Proj"), 2);
    s.stop().await;
}

fn find_count(r: &Value, tag: &str) -> u64 {
    r["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == tag)
        .and_then(|t| t["notes"].as_u64())
        .unwrap_or(0)
}

#[tokio::test]
async fn vault_info_counts_the_tags_list_tags_lists() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("A.md"),
        "#garden/soil and #garden/planning and #book\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("B.md"), "#Book #area/home/kitchen\n").unwrap();
    let s = Server::start(tmp.path()).await;
    s.wait_index_ready().await;
    // Written: garden/soil, garden/planning, book, area/home/kitchen (4); with their parents
    // garden, area, area/home: 7.
    let tags = s.ok("list_tags", json!({"limit": 1000})).await;
    assert_eq!(tags["total"], 7, "{tags}");
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["tags"], tags["total"], "{info}");
    s.stop().await;
}
