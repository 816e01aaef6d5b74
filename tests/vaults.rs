//! Several vaults in one server, through the real binary: each vault is its own capability
//! root, and nothing of one is reachable through another: not by a path (the attack rows aimed
//! at the other vault, on every path-taking tool), a wikilink, a resource URI or a move. Tools
//! take `vault` (an enum of the names); searches without it cover every vault and name each
//! hit's; a token limited to some vaults sees and uses only those; `[[vault]]` tables give each
//! vault its own settings; one vault alone is served exactly as before.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use serde_json::{Value, json};

#[cfg(feature = "http")]
use crate::common::HttpChild;
use crate::common::{Server, snapshot, symlink, write_tree};

const WORK_SECRET: &str = "WORK-ONLY-SECRET-51c0de";
const HOME_SECRET: &str = "HOME-ONLY-SECRET-a9f3e2";

/// tmp/{Work, Home}: two vaults whose notes share names, each with a secret word, Work with a
/// symlink into Home and links that would resolve in Home.
fn two_vaults() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("Work");
    let home = tmp.path().join("Home");
    write_tree(
        &work,
        &[
            (
                "ok.md",
                "# Work ok\n\nplanning notes shared word: lantern\n",
            ),
            (
                "Links.md",
                "[[diary]] and [[Home/diary]] and [x](../Home/diary.md)\n",
            ),
            ("Plan.md", &format!("# Plan\n\nlantern {WORK_SECRET}\n")),
        ],
    );
    write_tree(
        &home,
        &[
            ("ok.md", "# Home ok\n\nlantern lantern lantern at home\n"),
            ("diary.md", &format!("# Diary\n\n{HOME_SECRET}\n")),
            ("Private/keys.md", &format!("{HOME_SECRET} keys\n")),
        ],
    );
    symlink(&work, "to_home", "../Home");
    symlink(&work, "diary_link.md", "../Home/diary.md");
    tmp
}

fn no_leak(what: &str, reply: &str, tmp: &Path) {
    assert!(
        !reply.contains(HOME_SECRET),
        "{what}: Home's secret through Work: {reply}"
    );
    let host = tmp.to_string_lossy();
    assert!(
        !reply.contains(host.as_ref()),
        "{what}: a host path in the reply: {reply}"
    );
}

/// The arguments that put `path` in each path parameter of `tool`, the rest harmless.
fn aimed(tool: &rmcp::model::Tool, path: &str) -> Vec<Value> {
    let schema = Value::Object((*tool.input_schema).clone());
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let filler = |name: &str| match name {
        "query" => json!("lantern"),
        "link" => json!("[[diary]]"),
        "path" | "from" => json!("ok.md"),
        "to" => json!("moved-by-attack.md"),
        "content" | "text" => json!("written by an attack"),
        "if_match" | "sha256" => json!("0".repeat(64)),
        "edits" => json!([{"old_text": "no such text", "new_text": "x"}]),
        "ops" => json!([{"op": "remove_node", "id": "none"}]),
        "line" => json!(1),
        "canvas" => json!({"nodes": [], "edges": []}),
        "vault" => json!("Work"),
        other => panic!("{}: no harmless value for `{other}`", tool.name),
    };
    let mut calls = Vec::new();
    for param in ["path", "folder", "from", "to", "this"] {
        if !props.contains_key(param) {
            continue;
        }
        let mut args = serde_json::Map::new();
        for r in &required {
            if r != param {
                args.insert(r.clone(), filler(r));
            }
        }
        args.insert("vault".into(), json!("Work"));
        if param == "this" && props.contains_key("base") {
            args.insert("base".into(), json!("views: [{order: [file.name]}]"));
        }
        args.insert(param.to_owned(), json!(path));
        calls.push(Value::Object(args));
    }
    calls
}

#[tokio::test]
async fn nothing_of_one_vault_is_reachable_through_another() {
    let tmp = two_vaults();
    let (work, home) = (tmp.path().join("Work"), tmp.path().join("Home"));
    let state = tmp.path().join("state");
    let before_home = snapshot(&home);
    let s = Server::start_with(
        &work,
        &[
            home.to_str().unwrap(),
            "--write",
            "--state-dir",
            state.to_str().unwrap(),
        ],
    )
    .await;
    let tools = s.client.list_all_tools().await.unwrap();
    // Every tool names the two vaults; all but the searches require one.
    for t in &tools {
        let schema = Value::Object((*t.input_schema).clone());
        assert_eq!(
            schema["properties"]["vault"]["enum"],
            json!(["Work", "Home"]),
            "{}",
            t.name
        );
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        let across = ["search_notes", "vault_info"].contains(&t.name.as_ref());
        assert_eq!(
            required.contains(&json!("vault")),
            !across,
            "{}: {schema}",
            t.name
        );
    }
    let abs = home.join("diary.md").to_string_lossy().into_owned();
    let rows = [
        "../Home/diary.md",
        "../Home/Private/keys.md",
        "to_home/diary.md",
        "to_home",
        "diary_link.md",
        abs.as_str(),
        "Home/diary.md",
        "../Home",
    ];
    let mut tried = 0;
    for row in rows {
        for tool in &tools {
            for args in aimed(tool, row) {
                let what = format!("{} {args}", tool.name);
                let r = s.call(&tool.name, args.clone()).await;
                tried += 1;
                // `Home/diary.md` and `to_home` are legal names for a new note of Work: a
                // create or move there stays in Work (and is undone).
                let made = !r.is_error
                    && ["create_note", "create_canvas", "move_note"].contains(&tool.name.as_ref());
                if made {
                    let field = if tool.name == "move_note" {
                        "to"
                    } else {
                        "path"
                    };
                    let p = r.structured[field].as_str().unwrap().to_owned();
                    assert!(work.join(&p).is_file(), "{what}: not a file of Work: {p}");
                    if tool.name == "move_note" {
                        s.ok(
                            "move_note",
                            json!({"vault": "Work", "from": p, "to": "ok.md"}),
                        )
                        .await;
                    } else {
                        s.ok("delete_note", json!({"vault": "Work", "path": p}))
                            .await;
                    }
                } else if !["Home/diary.md", "to_home"].contains(&row) {
                    // The two legal names of Work may have a history there; every other row
                    // leads out of Work and fails.
                    assert!(r.is_error, "{what}: accepted: {}", r.raw);
                }
                no_leak(&what, &r.raw, tmp.path());
            }
        }
    }
    assert!(tried > 200, "only {tried} calls");
    // Links resolve in their own vault only: Work's `[[diary]]` is unresolved.
    let links = s
        .ok(
            "get_links",
            json!({"vault": "Work", "path": "Links.md", "direction": "out"}),
        )
        .await;
    no_leak("get_links", &links.to_string(), tmp.path());
    assert!(
        !links.to_string().contains("\"resolved\":\"diary.md\""),
        "{links}"
    );
    let r = s
        .call(
            "resolve_link",
            json!({"vault": "Work", "link": "[[diary]]"}),
        )
        .await;
    no_leak("resolve_link", &r.raw, tmp.path());
    assert!(r.is_error || r.structured["path"].is_null(), "{}", r.raw);
    // A bare name that only Home has is not found in Work.
    let e = s
        .err("read_note", json!({"vault": "Work", "path": "diary"}))
        .await;
    assert!(e.starts_with("not_found"), "{e}");
    // Resource URIs name their vault; no spelling of one reaches the other.
    for uri in [
        "capvault://Work/../Home/diary.md",
        "capvault://Work/%2e%2e/Home/diary.md",
        "capvault://Work/to_home/diary.md",
        "capvault://Work/diary.md",
        "capvault:///diary.md",
        "capvault://Work%2F..%2FHome/diary.md",
        "capvault://Nope/diary.md",
    ] {
        match s.read_resource(uri).await {
            Ok(r) => panic!("{uri}: read {r}"),
            Err((_, m)) => no_leak(uri, &m, tmp.path()),
        }
    }
    let ok = s.read_resource("capvault://Home/diary.md").await.unwrap();
    assert!(
        ok.contains(HOME_SECRET) && ok.contains("capvault://Home/diary.md"),
        "{ok}"
    );
    // A move that names the other vault fails, and Home is byte-for-byte as it was.
    for to in ["../Home/moved.md", abs.as_str(), "to_home/moved.md"] {
        let r = s
            .call(
                "move_note",
                json!({"vault": "Work", "from": "ok.md", "to": to}),
            )
            .await;
        assert!(r.is_error, "move to {to}: {}", r.raw);
    }
    assert_eq!(snapshot(&home), before_home, "Home changed");
    assert!(work.join("ok.md").is_file());
    s.stop().await;
}

#[tokio::test]
async fn searches_cover_every_vault_and_each_tool_names_one() {
    let tmp = two_vaults();
    let (work, home) = (tmp.path().join("Work"), tmp.path().join("Home"));
    let s = Server::start_with(&work, &[home.to_str().unwrap()]).await;
    s.eventually(30, "vault_info", json!({}), |v| {
        v["vaults"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|x| x["index"] == "ready"))
    })
    .await;
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["vaults"][0]["vault"], "Work");
    assert_eq!(info["vaults"][1]["vault"], "Home");
    assert_eq!(info["vaults"][1]["notes"], 3);
    // Without `vault`: both vaults' hits, merged by score, each naming its vault.
    let all = s.ok("search_notes", json!({"query": "lantern"})).await;
    let hits = all["hits"].as_array().unwrap();
    let from: Vec<(&str, &str)> = hits
        .iter()
        .map(|h| (h["vault"].as_str().unwrap(), h["path"].as_str().unwrap()))
        .collect();
    assert!(
        from.contains(&("Home", "ok.md")) && from.contains(&("Work", "ok.md")),
        "{all}"
    );
    assert!(from.contains(&("Work", "Plan.md")), "{all}");
    assert_eq!(all["total"], 3, "{all}");
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Paged one hit at a time: every hit once, in the same order.
    let pages = s
        .pages("search_notes", json!({"query": "lantern", "limit": 1}))
        .await;
    let paged: Vec<(String, String)> = pages
        .iter()
        .flat_map(|p| p["hits"].as_array().unwrap().clone())
        .map(|h| {
            (
                h["vault"].as_str().unwrap().into(),
                h["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    let whole: Vec<(String, String)> = from
        .iter()
        .map(|(v, p)| ((*v).into(), (*p).into()))
        .collect();
    assert_eq!(paged, whole);
    // A forged cursor naming one vault 300 times is one search of it; garbage is refused.
    use base64::Engine as _;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"v": vec![json!(["Home", null]); 300], "t": 0, "e": false}).to_string());
    let r = s
        .ok(
            "search_notes",
            json!({"query": "lantern", "cursor": forged}),
        )
        .await;
    assert_eq!(r["hits"].as_array().unwrap().len(), 1, "{r}");
    let e = s
        .err("search_notes", json!({"query": "lantern", "cursor": "!!"}))
        .await;
    assert!(e.starts_with("invalid_argument"), "{e}");
    // A limit is taken as one vault takes it: a number in a string, a range refused the same.
    let r = s
        .ok("search_notes", json!({"query": "lantern", "limit": "2"}))
        .await;
    assert_eq!(r["hits"].as_array().unwrap().len(), 2, "{r}");
    for bad in [json!(0), json!(500), json!("lots")] {
        let e = s
            .err("search_notes", json!({"query": "lantern", "limit": bad}))
            .await;
        assert!(
            e.starts_with("invalid_argument") && e.contains("`limit`"),
            "{bad}: {e}"
        );
    }
    // With `vault`: that vault only, and the reply says which.
    let one = s
        .ok(
            "search_notes",
            json!({"query": "lantern", "vault": "Home", "mode": "exact"}),
        )
        .await;
    assert_eq!(one["vault"], "Home");
    assert!(
        one["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["vault"].is_null())
    );
    assert!(!one.to_string().contains(WORK_SECRET));
    // Tools that act on one note need `vault`; a wrong one is named as unknown.
    let e = s.err("read_note", json!({"path": "ok.md"})).await;
    assert!(
        e.contains("pass `vault`") && e.contains("Work, Home"),
        "{e}"
    );
    let e = s
        .err("read_note", json!({"path": "ok.md", "vault": "work"}))
        .await;
    assert!(
        e.starts_with("invalid_argument") && e.contains("no vault `work`"),
        "{e}"
    );
    let read = s
        .ok("read_note", json!({"path": "ok.md", "vault": "Home"}))
        .await;
    assert!(read["content"].as_str().unwrap().contains("Home ok"));
    assert_eq!(read["vault"], "Home");
    // Resources: both vaults' notes, each URI naming its vault.
    let listed = s.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert!(
        uris.contains(&"capvault://Work/Plan.md") && uris.contains(&"capvault://Home/diary.md"),
        "{uris:?}"
    );
    // Prompts: each vault's, named after it.
    let prompts = s.client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"Work/daily-review") && names.contains(&"Home/daily-review"),
        "{names:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn one_vault_is_served_as_before() {
    let tmp = two_vaults();
    let s = Server::start(&tmp.path().join("Home")).await;
    for t in s.client.list_all_tools().await.unwrap() {
        assert!(
            t.input_schema
                .get("properties")
                .is_none_or(|p| p.get("vault").is_none()),
            "{} takes `vault` with one vault",
            t.name
        );
    }
    let r = s.ok("read_note", json!({"path": "ok.md"})).await;
    assert!(r.get("vault").is_none(), "{r}");
    assert!(s.read_resource("capvault:///ok.md").await.is_ok());
    s.stop().await;
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_token_limited_to_one_vault_sees_and_uses_only_it() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = two_vaults();
    let (work, home) = (tmp.path().join("Work"), tmp.path().join("Home"));
    const WORK_TOKEN: &str = "work-token-0123456789abcdef0123456789";
    const ALL_TOKEN: &str = "all-token-0123456789abcdef01234567890";
    let tokens = tmp.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("{WORK_TOKEN} read vaults=Work name=work\n{ALL_TOKEN} read\n"),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let child = HttpChild::spawn(
        &work,
        &[
            home.to_str().unwrap(),
            "--token-file",
            tokens.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let limited = Server::of_client(child.connect(Some(WORK_TOKEN)).await);
    for t in limited.client.list_all_tools().await.unwrap() {
        let schema = Value::Object((*t.input_schema).clone());
        assert_eq!(
            schema["properties"]["vault"]["enum"],
            json!(["Work"]),
            "{}",
            t.name
        );
    }
    let e = limited
        .err("read_note", json!({"vault": "Home", "path": "diary.md"}))
        .await;
    assert!(e.contains("no vault `Home`") && !e.contains("Home,"), "{e}");
    no_leak("read_note Home", &e, tmp.path());
    // Its one vault needs no naming; searches cover only it.
    let r = limited.ok("read_note", json!({"path": "ok.md"})).await;
    assert_eq!(r["vault"], "Work");
    let found = limited
        .eventually(30, "search_notes", json!({"query": "lantern"}), |v| {
            v["total"].as_u64() >= Some(2)
        })
        .await;
    assert!(
        found["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["vault"] == "Work"),
        "{found}"
    );
    let uris: Vec<String> = limited
        .client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert!(
        uris.iter().all(|u| u.starts_with("capvault://Work/")),
        "{uris:?}"
    );
    assert!(
        limited
            .read_resource("capvault://Home/diary.md")
            .await
            .is_err()
    );
    // Nor is it told of Home's notes, nor of its changes.
    #[allow(deprecated)]
    {
        use rmcp::model::SubscribeRequestParams;
        assert!(
            limited
                .client
                .subscribe(SubscribeRequestParams::new("capvault://Home/diary.md"))
                .await
                .is_err()
        );
        limited
            .client
            .subscribe(SubscribeRequestParams::new("capvault://Work/ok.md"))
            .await
            .unwrap();
    }
    let e = limited
        .err("changes_since", json!({"vault": "Home", "since": "1d"}))
        .await;
    assert!(e.contains("no vault `Home`"), "{e}");
    // Another token sees both.
    let all = Server::of_client(child.connect(Some(ALL_TOKEN)).await);
    let r = all
        .ok("read_note", json!({"vault": "Home", "path": "diary.md"}))
        .await;
    assert!(r["content"].as_str().unwrap().contains(HOME_SECRET));
    limited.stop().await;
    all.stop().await;
    child.terminate().await;
}

#[cfg(feature = "semantic")]
#[tokio::test]
async fn vault_tables_give_each_vault_its_name_and_settings() {
    let tmp = two_vaults();
    let (work, home) = (tmp.path().join("Work"), tmp.path().join("Home"));
    let config = tmp.path().join("config.toml");
    // Home's own embedding model: semantic search there only.
    let model = tmp.path().join("model");
    crate::common::write_model(&model);
    std::fs::write(
        &config,
        format!(
            "[[vault]]\npath = \"{}\"\nname = \"office\"\nwrite = true\n\n[[vault]]\npath = \
             \"{}\"\nexclude = [\"Private\"]\ntools = \"read\"\ndisabled_tools = \
             [\"get_links\"]\nembedding_model = \"{}\"\n",
            work.display(),
            home.display(),
            model.display()
        ),
    )
    .unwrap();
    let state = tmp.path().join("state");
    let audit = tmp.path().join("audit.jsonl");
    let mut cmd = crate::common::capvault();
    cmd.args(["serve", "--config", config.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap()])
        .args(["--audit-log", audit.to_str().unwrap()]);
    let s = Server::from_command(cmd.into()).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let enum_of = |name: &str| {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object((*t.input_schema).clone())["properties"]["vault"]["enum"].clone()
    };
    // Writes are on for `office` only; Home's profile leaves out get_links; Home alone has a
    // model, so related_notes and a semantic search are Home's.
    assert_eq!(enum_of("edit_note"), json!(["office"]));
    assert_eq!(enum_of("read_note"), json!(["office", "Home"]));
    assert_eq!(enum_of("get_links"), json!(["office"]));
    assert_eq!(enum_of("related_notes"), json!(["Home"]));
    let e = s
        .err(
            "search_notes",
            json!({"vault": "office", "query": "lantern", "mode": "semantic"}),
        )
        .await;
    assert!(e.contains("model"), "{e}");
    let e = s
        .err(
            "write_note",
            json!({"vault": "Home", "path": "x.md", "content": "x"}),
        )
        .await;
    assert!(e.contains("not offered for the vault `Home`"), "{e}");
    s.ok(
        "create_note",
        json!({"vault": "office", "path": "New.md", "content": "made"}),
    )
    .await;
    assert!(work.join("New.md").is_file());
    // The audit log names the vault of each change.
    let log = std::fs::read_to_string(&audit).unwrap();
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(
        (line["vault"].as_str(), line["path"].as_str()),
        (Some("office"), Some("New.md")),
        "{log}"
    );
    // Home's own exclusion.
    let e = s
        .err(
            "read_note",
            json!({"vault": "Home", "path": "Private/keys.md"}),
        )
        .await;
    no_leak("excluded", &e, tmp.path());
    s.stop().await;
}

#[cfg(feature = "oauth")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consent_page_lets_the_owner_choose_the_vaults_a_client_may_use() {
    use crate::common::oauth::*;
    let (tmp, vault, state) = fixture();
    let other = tmp.path().join("Other");
    write_tree(&other, &[("Secret.md", &format!("# S\n{HOME_SECRET}\n"))]);
    let server = HttpChild::spawn(
        &vault,
        &[
            other.to_str().unwrap(),
            "--no-index-cache",
            "--oauth",
            "builtin",
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let base = base_url(&server);
    // The page offers both vaults, ticked; unticking both is refused.
    let client = register(&base, "Test client", "none").await;
    let id = client["client_id"].as_str().unwrap();
    let (_, challenge) = pkce();
    let url = authorize_url(&base, id, &challenge, "vault:read");
    let page = get(&url).await;
    assert!(
        page.body.contains("name=\"vault.vault\"") && page.body.contains("name=\"vault.Other\""),
        "{}",
        page.body
    );
    let (request, csrf) = (field(&page.body, "request"), field(&page.body, "csrf"));
    let none = post_form(
        &format!("{base}/oauth/authorize"),
        &[
            ("request", &request),
            ("csrf", &csrf),
            ("passphrase", PASSPHRASE),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(none.status, 400, "{}", none.body);
    assert!(
        none.body.contains("Tick at least one vault"),
        "{}",
        none.body
    );
    // Only `vault` ticked: the token sees and uses that vault alone.
    let t = tokens(&base, "vault:read", &[("vault.vault", "on")]).await;
    let access = t["access_token"].as_str().unwrap();
    let (status, _, list) = mcp(&server, access, "tools/list", json!({})).await;
    assert_eq!(status, 200);
    let read = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_note")
        .unwrap()
        .clone();
    assert_eq!(
        read["inputSchema"]["properties"]["vault"]["enum"],
        json!(["vault"])
    );
    let (_, _, r) = mcp(
        &server,
        access,
        "tools/call",
        json!({"name": "read_note", "arguments": {"vault": "Other", "path": "Secret.md"}}),
    )
    .await;
    assert!(!r.to_string().contains(HOME_SECRET), "{r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    // `capvault tokens list` (on the first vault, whose state holds the grants) says which.
    let out = crate::common::run(&[
        "tokens",
        "list",
        vault.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(vaults: vault)"), "{text}");
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn tools_list_grows_only_by_the_vault_enum() {
    let tmp = two_vaults();
    let (work, home) = (tmp.path().join("Work"), tmp.path().join("Home"));
    let state = tmp.path().join("state");
    let flags = [
        "--write",
        "--no-index-cache",
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let one = Server::start_with(&work, &flags).await;
    let mut with_home = vec![home.to_str().unwrap()];
    with_home.extend(flags);
    let two = Server::start_with(&work, &with_home).await;
    let single = one.client.list_all_tools().await.unwrap();
    let several = two.client.list_all_tools().await.unwrap();
    assert_eq!(single.len(), several.len());
    let size =
        |t: &[rmcp::model::Tool]| serde_json::to_string(&json!({ "tools": t })).unwrap().len();
    for t in &several {
        let mut stripped = t.clone();
        let mut schema = (*stripped.input_schema).clone();
        let vault = schema["properties"]
            .as_object_mut()
            .unwrap()
            .remove("vault");
        assert!(vault.is_some(), "{}: no `vault`", t.name);
        if let Some(Value::Array(r)) = schema.get_mut("required") {
            r.retain(|n| n != "vault");
            if r.is_empty() {
                schema.remove("required");
            }
        }
        stripped.input_schema = std::sync::Arc::new(schema);
        let same = single.iter().find(|s| s.name == t.name).unwrap();
        assert_eq!(
            serde_json::to_value(&stripped).unwrap(),
            serde_json::to_value(same).unwrap(),
            "{}: differs beyond `vault`",
            t.name
        );
    }
    let (a, b) = (size(&single), size(&several));
    println!(
        "tools/list --write: one vault {a} bytes, two vaults {b} bytes (+{})",
        b - a
    );
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn two_folders_of_one_name_get_distinct_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        tmp.path().join("Notes"),
        tmp.path().join("old").join("Notes"),
    );
    write_tree(&a, &[("a.md", "new\n")]);
    write_tree(&b, &[("b.md", "old\n")]);
    let s = Server::start_with(&a, &[b.to_str().unwrap()]).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let read = tools.iter().find(|t| t.name == "read_note").unwrap();
    assert_eq!(
        Value::Object((*read.input_schema).clone())["properties"]["vault"]["enum"],
        json!(["Notes", "Notes-2"])
    );
    let r = s
        .ok("read_note", json!({"vault": "Notes-2", "path": "b.md"}))
        .await;
    assert_eq!(r["content"], "old\n");
    s.stop().await;
}
