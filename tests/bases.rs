//! `query_base` and `list_bases` through the real binary and rmcp's client: the kepano vault's
//! own bases, each view evaluated as it is embedded in the vault's notes, with results checked
//! by hand against the notes and pinned; bases in code blocks; inline bases; and refusals.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Server, shared_vault, write_tree};
use serde_json::{Value, json};

/// The row paths of a reply.
fn paths(reply: &Value) -> Vec<&str> {
    reply["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect()
}

async fn view(s: &Server, base: &str, view: Option<&str>, this: &str) -> Value {
    let mut args =
        json!({"path": format!("Templates/Bases/{base}.base"), "this": this, "limit": 500});
    if let Some(v) = view {
        args["view"] = json!(v);
    }
    s.ok("query_base", args).await
}

#[tokio::test]
async fn kepano_vault_bases_select_what_obsidian_shows() {
    let Some(vault) = shared_vault("kepano-obsidian") else {
        eprintln!("skipped: ../shared/vaults/kepano-obsidian is absent");
        return;
    };
    let s = Server::start(&vault).await;

    // Categories/Books.md embeds ![[Books.base]]: the two book notes (the template is
    // filtered out), sorted by name, with typed columns and display names.
    let r = view(&s, "Books", None, "Categories/Books.md").await;
    assert_eq!(r["view"], "Books");
    assert_eq!(
        paths(&r),
        [
            "References/Out of Control.md",
            "References/The Machine Stops.md"
        ]
    );
    assert_eq!(r["columns"][0], json!({"id": "file.name", "name": "Name"}));
    assert_eq!(
        r["columns"][1],
        json!({"id": "note.author", "name": "Author"})
    );
    let first = &r["rows"][0]["values"];
    assert_eq!(first["file.name"], "Out of Control");
    assert_eq!(first["note.year"], 1992);
    assert_eq!(
        first["note.last"],
        json!({"type": "date", "value": "2023-09-12"})
    );
    assert_eq!(
        first["note.author"][0],
        json!({"type": "link", "target": "Kevin Kelly", "path": "References/Kevin Kelly.md"})
    );

    // References/Kevin Kelly.md embeds ![[Books.base#Author]]: `list(author).contains(this)`.
    let r = view(&s, "Books", Some("Author"), "References/Kevin Kelly.md").await;
    assert_eq!(paths(&r), ["References/Out of Control.md"]);

    // References/Sci-fi.md embeds ![[Genre.base]]: legacy `display` names and `column` sorts
    // (rating, then last seen, newest first).
    let r = view(&s, "Genre", None, "References/Sci-fi.md").await;
    assert_eq!(
        paths(&r),
        [
            "References/Blade Runner.md",
            "References/Futurama.md",
            "References/The Machine Stops.md"
        ]
    );
    assert_eq!(
        r["columns"][1],
        json!({"id": "note.rating", "name": "Rating"})
    );

    // Daily/2023-09-12.md embeds ![[Daily.base]]: notes named after, created on, or starting
    // or ending on that day, or linking to it; the daily note itself left out.
    let r = view(&s, "Daily", None, "Daily/2023-09-12.md").await;
    let rows = paths(&r);
    assert_eq!(r["total"], 13, "{rows:?}");
    assert!(rows.contains(&"Notes/2023-09-12 Meeting with Steph.md"));
    assert!(rows.contains(&"Clippings/68 Bits of Unsolicited Advice.md"));
    assert!(!rows.contains(&"Daily/2023-09-12.md"));
    // Sorted by tags first: the one note with tags leads, the rest (no tags) follow.
    assert_eq!(rows[0], "References/The Machine Stops.md");
    let r = view(&s, "Daily", None, "Daily/2023-09-30.md").await;
    assert_eq!(paths(&r), ["Notes/2023 Japan Trip.md"]);

    // References/Kyoto.md embeds ![[Trips.base#Location]] and ![[Places.base#Location]].
    let r = view(&s, "Trips", Some("Location"), "References/Kyoto.md").await;
    assert_eq!(paths(&r), ["Notes/2023 Japan Trip.md"]);
    assert_eq!(
        r["rows"][0]["values"]["note.start"],
        json!({"type": "date", "value": "2023-09-12"})
    );
    let r = view(&s, "Places", Some("Location"), "References/Kyoto.md").await;
    assert_eq!(paths(&r), ["References/Fushimi Inari.md"]);

    // References/Parks.md embeds ![[Map.base#Type]]: a formula reading another note's
    // properties through a link (`list(type)[0].asFile().properties.color`).
    let r = view(&s, "Map", Some("Type"), "References/Parks.md").await;
    assert_eq!(paths(&r), ["References/Fushimi Inari.md"]);
    assert_eq!(r["rows"][0]["values"]["formula.Color"], "green");
    assert_eq!(r["type"], "map");
    assert_eq!(r["options"]["coordinates"], "note.coordinates");
    let r = view(&s, "Map", None, "Categories/Places.md").await;
    assert_eq!(
        paths(&r),
        ["References/Kyoto.md", "References/Fushimi Inari.md"]
    );
    assert_eq!(r["rows"][1]["values"]["formula.Icon"], "trees");

    // References/Steph Ango.md embeds ![[Clippings.base#Author]] and ![[Meetings.base#Person]].
    let r = view(&s, "Clippings", Some("Author"), "References/Steph Ango.md").await;
    assert_eq!(r["total"], 4);
    assert!(paths(&r).contains(&"Clippings/In good hands.md"));
    let r = view(&s, "Meetings", Some("Person"), "References/Steph Ango.md").await;
    assert_eq!(paths(&r), ["Notes/2023-09-12 Meeting with Steph.md"]);

    // References/Well Made.md and References/Paul Chambers.md.
    let r = view(
        &s,
        "Podcast episodes",
        Some("Show"),
        "References/Well Made.md",
    )
    .await;
    assert_eq!(paths(&r), ["References/Well Made 145 Kevin Kelly.md"]);
    let r = view(&s, "Albums", Some("Artist"), "References/Paul Chambers.md").await;
    assert_eq!(paths(&r), ["References/Bass on Top.md"]);
    assert_eq!(r["rows"][0]["values"]["note.year"], 1957);

    // People: `(now() - birthday).years.floor()` is empty where there is no birthday.
    let r = view(&s, "People", None, "Categories/People.md").await;
    assert_eq!(r["total"], 3);
    assert!(r["rows"][0]["values"]["formula.Age"].is_null());

    // Date-based: nothing was rated within the last 60 days of now (the vault is from 2023);
    // every rated note is in the other view.
    let r = view(&s, "Ratings", Some("Recent"), "Categories/Books.md").await;
    assert_eq!(r["total"], 0);
    let r = view(&s, "Ratings", None, "Categories/Books.md").await;
    assert_eq!(r["total"], 11);

    // Related, with `this`: notes linking to Kevin Kelly or linked (embedded) from it.
    let r = view(&s, "Related", None, "References/Kevin Kelly.md").await;
    let rows = paths(&r);
    assert!(rows.contains(&"References/Out of Control.md"), "{rows:?}");
    assert!(rows.contains(&"Templates/Bases/Books.base"), "{rows:?}");
    assert!(!rows.contains(&"References/Kevin Kelly.md"));

    // Every view of every base runs without a failed filter.
    let list = s.ok("list_bases", json!({"limit": 500})).await;
    assert_eq!(list["total"], 30);
    for b in list["bases"].as_array().unwrap() {
        for v in b["views"].as_array().unwrap() {
            let r = s
                .ok(
                    "query_base",
                    json!({"path": b["path"], "view": v, "this": "References/Kevin Kelly.md"}),
                )
                .await;
            assert!(
                r.get("errors").is_none(),
                "{} {v}: {}",
                b["path"],
                r["errors"]
            );
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn base_code_blocks_inline_bases_groups_summaries_and_paging() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files: Vec<(String, String)> = vec![
        (
            "Reading.md".into(),
            "# Reading\n\n```base\nfilters: 'file.hasTag(\"book\") && file.path != this.file.path'\nviews:\n  - type: table\n    name: Shelf\n    order: [file.name, rating]\n    sort:\n      - property: rating\n        direction: DESC\n```\n\nText.\n\n```base\nviews:\n  - name: Second\n```\n".into(),
        ),
        (".obsidian/types.json".into(), r#"{"types": {"rating": "number", "read": "date"}}"#.into()),
    ];
    for i in 0..30 {
        files.push((
            format!("Books/Book {i:02}.md"),
            format!(
                "---\ntags: [book{}]\nrating: {}\nread: 2025-0{}-1{}\nshelf: {}\n---\nA book.\n",
                if i % 10 == 0 { ", book/favourite" } else { "" },
                i % 5,
                1 + i % 9,
                i % 10,
                if i % 2 == 0 { "even" } else { "odd" }
            ),
        ));
    }
    files.push(("Books/Not a book.md".into(), "---\nrating: 9\n---\n".into()));
    write_tree(tmp.path(), &files);
    let s = Server::start(tmp.path()).await;

    // The first block of the note; `this` is the note holding it.
    let r = s
        .ok("query_base", json!({"path": "Reading.md", "limit": 5}))
        .await;
    assert_eq!(r["view"], "Shelf");
    assert_eq!(r["this"], "Reading.md");
    assert_eq!(r["total"], 30);
    assert_eq!(r["rows"].as_array().unwrap().len(), 5);
    assert!(
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["values"]["note.rating"] == 4)
    );
    // Following the cursor gives every row once.
    let pages = s
        .pages("query_base", json!({"path": "Reading.md", "limit": 7}))
        .await;
    let mut all: Vec<String> = pages
        .iter()
        .flat_map(|p| paths(p).into_iter().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert_eq!(all.len(), 30);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 30);
    let r = s
        .ok("query_base", json!({"path": "Reading.md", "block": 2}))
        .await;
    assert_eq!(r["view"], "Second");
    let e = s
        .err("query_base", json!({"path": "Reading.md", "block": 3}))
        .await;
    assert!(e.contains("has 2 ```base block(s)"), "{e}");

    let list = s.ok("list_bases", json!({})).await;
    assert_eq!(
        list["bases"],
        json!([
            {"path": "Reading.md", "block": 1, "line": 3, "views": ["Shelf"]},
            {"path": "Reading.md", "block": 2, "line": 16, "views": ["Second"]}
        ])
    );

    // An inline base: nested tags, a date typed by types.json, groups with summaries.
    let base = r#"
filters:
  and:
    - file.hasTag("book")
    - read >= date("2025-05-01")
formulas:
  stars: '"*".repeat(rating)'
views:
  - type: table
    name: By shelf
    order: [file.name, rating, formula.stars, read]
    groupBy:
      property: shelf
      direction: ASC
    summaries:
      rating: Average
      read: Latest
"#;
    let r = s
        .ok("query_base", json!({"base": base, "limit": 500}))
        .await;
    assert_eq!(r.get("path"), None);
    // Months 5 to 9 of `1 + i % 9`: i % 9 in 4..=8.
    let want = (0..30).filter(|i| (4..=8).contains(&(i % 9))).count();
    assert_eq!(r["total"], want);
    let groups = r["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["key"], "even");
    assert_eq!(groups[1]["key"], "odd");
    assert_eq!(
        groups[0]["count"].as_u64().unwrap() + groups[1]["count"].as_u64().unwrap(),
        want as u64
    );
    let first = &r["rows"][0];
    assert_eq!(first["group"], 0);
    assert_eq!(
        first["values"]["formula.stars"].as_str().unwrap().len() as u64,
        first["values"]["note.rating"].as_u64().unwrap()
    );
    assert_eq!(r["summaries"]["note.read"]["name"], "Latest");
    assert_eq!(
        r["summaries"]["note.read"]["value"],
        json!({"type": "date", "value": "2025-09-18"})
    );
    assert!(groups[0]["summaries"]["note.rating"]["value"].is_number());

    // `hasTag` narrows by nested tags (through the tag index).
    let r = s
        .ok(
            "query_base",
            json!({"base": "filters: 'file.hasTag(\"book/favourite\")'"}),
        )
        .await;
    assert_eq!(
        paths(&r),
        ["Books/Book 00.md", "Books/Book 10.md", "Books/Book 20.md"]
    );
    s.stop().await;
}

#[tokio::test]
async fn bad_bases_get_clear_errors_and_hidden_or_outside_bases_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            ("Note.md", "---\nrating: 3\n---\n"),
            ("Good.base", "views:\n  - name: One\n"),
            (".hidden/Secret.base", "views:\n  - name: Secret\n"),
        ],
    );
    let s = Server::start(tmp.path()).await;
    let code = |r: &crate::common::Reply| r.error["code"].as_str().unwrap_or_default().to_owned();

    let r = s
        .call("query_base", json!({"base": "filters: 'rating >> 2'"}))
        .await;
    assert!(r.is_error);
    assert_eq!(code(&r), "invalid_argument");
    assert!(
        r.text.contains(
            "filter `rating >> 2` does not parse: expected a value, found `>` (column 9)"
        ),
        "{}",
        r.text
    );
    let e = s
        .err("query_base", json!({"path": "Good.base", "view": "Two"}))
        .await;
    assert!(
        e.contains("no view named `Two`; the base has: `One`"),
        "{e}"
    );
    let e = s.err("query_base", json!({"base": "- a list"})).await;
    assert!(e.contains("invalid YAML"), "{e}");
    let e = s
        .err(
            "query_base",
            json!({"path": "Good.base", "base": "views: []"}),
        )
        .await;
    assert!(e.contains("either `path` or `base`"), "{e}");
    let e = s.err("query_base", json!({})).await;
    assert!(e.contains("give `path`"), "{e}");
    let e = s.err("query_base", json!({"path": "Note.md"})).await;
    assert!(e.contains("no ```base code block"), "{e}");
    // A formula that fails is an error cell, not a failed query.
    let r = s
        .ok(
            "query_base",
            json!({"base": "formulas:\n  bad: 'rating * [1]'\nviews:\n  - order: [file.name, formula.bad]\n"}),
        )
        .await;
    let row = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "Note.md")
        .unwrap();
    assert_eq!(row["values"]["formula.bad"]["type"], "error");
    // A runaway formula stops within the query's budget.
    let r = s
        .call(
            "query_base",
            json!({"base": "formulas:\n  big: '\"x\".repeat(5000).split(\"\").map(\"y\".repeat(5000).split(\"\").map(value))'\nviews:\n  - order: [formula.big]\n"}),
        )
        .await;
    assert!(r.is_error, "{}", r.raw);
    assert_eq!(code(&r), "budget_exceeded");

    // Hidden folders, `..` and absolute paths, for the base and for `this`.
    for args in [
        json!({"path": ".hidden/Secret.base"}),
        json!({"path": "../outside.base"}),
        json!({"path": "/etc/passwd"}),
        json!({"path": "Good.base", "this": "../outside.md"}),
        json!({"path": "Good.base", "this": ".hidden/Secret.base"}),
        json!({"base": "views: []", "this": "/etc/hosts"}),
    ] {
        let r = s.call("query_base", args.clone()).await;
        assert!(r.is_error, "{args}: {}", r.raw);
        assert!(!r.raw.contains("Secret\""), "{args}: {}", r.raw);
        assert!(
            !r.raw.contains(&tmp.path().display().to_string()),
            "{}",
            r.raw
        );
    }
    let list = s.ok("list_bases", json!({})).await;
    assert_eq!(list["total"], 1);
    let e = s.err("list_bases", json!({"folder": ".hidden"})).await;
    assert!(!e.contains("Secret"), "{e}");
    s.stop().await;
}

#[tokio::test]
async fn a_regex_replace_over_a_long_string_stops_within_the_query_budget() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &[("Note.md", "x\n")]);
    let s = Server::start(tmp.path()).await;
    // Matches the empty string at every position, and each search reads the rest of the
    // megabyte: 13 s as one evaluation step before the deadline was read between searches.
    let started = std::time::Instant::now();
    let r = s
        .call(
            "query_base",
            json!({"base": "formulas:\n  slow: '\"x\".repeat(1000000).replace(/(.*Z)?/gs, \"\")'\nviews:\n  - order: [formula.slow]\n"}),
        )
        .await;
    assert!(r.is_error, "{}", r.raw);
    assert_eq!(r.error["code"], "budget_exceeded", "{}", r.raw);
    assert!(r.text.contains("took too long"), "{}", r.text);
    // A sanity bound: the 3 s budget, plus a debug build's start.
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    s.stop().await;
}

/// `"a".repeat(100000).replace("a", "b".repeat(100000))` would build ten gigabytes, and
/// aborted the server: it is refused before anything is built, naming the bound, and the
/// server answers the next call.
#[tokio::test]
async fn a_formula_that_would_build_gigabytes_is_refused_and_the_server_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(tmp.path(), &[("Note.md", "x\n")]);
    let s = Server::start(tmp.path()).await;
    let r = s
        .call(
            "query_base",
            json!({"base": "formulas:\n  big: '\"a\".repeat(100000).replace(\"a\", \"b\".repeat(100000))'\nviews:\n  - order: [formula.big]\n"}),
        )
        .await;
    assert!(r.is_error, "{}", r.raw);
    assert_eq!(r.error["code"], "budget_exceeded", "{}", r.raw);
    assert!(r.text.contains("1 MiB"), "{}", r.text);
    let ok = s
        .ok(
            "query_base",
            json!({"base": "formulas:\n  small: '\"ab\".repeat(3).replace(\"a\", \"c\")'\nviews:\n  - order: [formula.small]\n"}),
        )
        .await;
    assert!(ok.to_string().contains("cbcbcb"), "{ok}");
    s.stop().await;
}
