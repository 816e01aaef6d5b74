//! MCP prompts through the real binary over stdio: the notes of `--prompts-folder` listed and
//! filled in (arguments, Templates variables, embeds read as `read_note` reads them), errors
//! for what a prompt does not take, hidden and excluded notes never prompts nor embedded, the
//! built-in prompts gathering daily notes, tasks and links, and `list_changed` sent once for a
//! burst of changes to the prompts folder, never for other notes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::GetPromptRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{Server, poll, serve_command, write_tree};

fn vault(dir: &Path) {
    write_tree(
        dir,
        &[
            (
                "Prompts/Weekly plan.md",
                "---\ntitle: Weekly planning\ndescription: Plan the week for a project\narguments:\n  - name: project\n    \
                 description: The project's name\n  - name: focus\n    required: false\n---\n\
                 Plan {{project}} (focus: {{ focus }}) on {{date:YYYY}}; {{other}} stays.\n\n\
                 ![[Goals]]\n\n![[Goals#Later]]\n![[Nowhere]]\n```\n![[Goals]] in code\n```\n",
            ),
            ("Prompts/Plain.md", "Just text, no frontmatter.\n"),
            (
                "Prompts/sub/Plain.md",
                "---\narguments: [who]\n---\nHello {{who}}\n",
            ),
            (
                "Prompts/Leak.md",
                "A: ![[Secret]] B: ![[Private/Secret]] C: ![[.hidden/Note]]\n",
            ),
            ("Prompts/Private/Hidden prompt.md", "never a prompt\n"),
            ("Private/Secret.md", "TOPSECRET\n"),
            (".hidden/Note.md", "HIDDENTEXT\n"),
            ("Goals.md", "# Goals\nShip it.\n## Later\nRest.\n"),
            ("Other.md", "Goals are [[Goals]] here.\n"),
            ("Third.md", "The Goals came up today.\n"),
        ],
    );
}

async fn start(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "--prompts-folder",
        "Prompts",
        "--exclude",
        "Private/**",
        "--exclude",
        "Prompts/Private/**",
    ];
    args.extend_from_slice(extra);
    let s = Server::start_with(dir, &args).await;
    s.wait_index_ready().await;
    s
}

async fn get(s: &Server, name: &str, args: Value) -> Result<String, String> {
    let mut params = GetPromptRequestParams::new(name);
    if let Value::Object(m) = args {
        params = params.with_arguments(m);
    }
    let answer = tokio::time::timeout(crate::common::CALL_TIMEOUT, s.client.get_prompt(params));
    match answer.await.expect("prompts/get: no answer (a hang)") {
        Ok(r) => {
            assert_eq!(r.messages.len(), 1);
            let content = &r.messages[0].content;
            Ok(content
                .as_text()
                .unwrap_or_else(|| panic!("{content:?}"))
                .text
                .clone())
        }
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602, "{e:?}");
            Err(e.message.to_string())
        }
        Err(e) => panic!("{e:?}"),
    }
}

/// The `data` of a `prompts/get` refusal (`{"param": ...}` for a bad argument).
async fn refusal_data(s: &Server, name: &str, args: Value) -> Value {
    let mut params = GetPromptRequestParams::new(name);
    if let Value::Object(m) = args {
        params = params.with_arguments(m);
    }
    let answer = tokio::time::timeout(crate::common::CALL_TIMEOUT, s.client.get_prompt(params));
    match answer.await.expect("prompts/get: no answer (a hang)") {
        Err(ServiceError::McpError(e)) => e.data.unwrap_or_default(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn vault_prompts_are_listed_and_filled_with_arguments_templates_and_embeds() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = start(tmp.path(), &[]).await;
    let list = s.client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = list.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "leak",
            "plain",
            "weekly-plan",
            "sub-plain",
            "daily-review",
            "summarize-note",
            "suggest-links"
        ],
        "the folder's notes by path (a shared name made unique) named as commands, then the \
         built-in ones"
    );
    // The note's own name stays what a person reads, where no title is given.
    let plain = list.iter().find(|p| p.name == "plain").unwrap();
    assert_eq!(plain.title.as_deref(), Some("Plain"));
    let weekly = list.iter().find(|p| p.name == "weekly-plan").unwrap();
    assert_eq!(
        weekly.description.as_deref(),
        Some("Plan the week for a project")
    );
    assert_eq!(weekly.title.as_deref(), Some("Weekly planning"));
    let args: Vec<(&str, Option<bool>)> = weekly
        .arguments
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| (a.name.as_str(), a.required))
        .collect();
    assert_eq!(args, [("project", Some(true)), ("focus", Some(false))]);

    let year = chrono::Local::now().format("%Y").to_string();
    let text = get(
        &s,
        "Weekly plan",
        json!({"project": "Apollo {{focus}} {{date}} ![[Goals]]", "focus": "tests"}),
    )
    .await
    .unwrap();
    assert_eq!(
        text,
        format!(
            "Plan Apollo {{{{focus}}}} {{{{date}}}} ![[Goals]] (focus: tests) on {year}; {{{{other}}}} stays.\n\n\
             # Goals\nShip it.\n## Later\nRest.\n\n\n## Later\nRest.\n\n\
             [![[Nowhere]]: no such file in the vault]\n```\n![[Goals]] in code\n```\n"
        ),
        "arguments and Templates variables in the prompt's own text only; embeds outside code \
         read as read_note reads them"
    );
    assert_eq!(
        get(&s, "sub/Plain", json!({"who": "Ada"})).await.unwrap(),
        "Hello Ada\n"
    );
    let e = get(&s, "Weekly plan", json!({})).await.unwrap_err();
    assert_eq!(e, "prompt `Weekly plan` needs the argument `project`");
    let e = get(&s, "Plain", json!({"x": "1"})).await.unwrap_err();
    assert_eq!(e, "prompt `Plain` has no argument `x`");
    let e = get(&s, "nope", json!({})).await.unwrap_err();
    assert!(
        e.starts_with("no prompt `nope`; prompts: leak, plain,"),
        "{e}"
    );
    // The parameter at fault, in the error's data.
    let d = refusal_data(&s, "nope", json!({})).await;
    assert_eq!(d, json!({"param": "name"}));
    let d = refusal_data(&s, "Plain", json!({"x": "1"})).await;
    assert_eq!(d, json!({"param": "arguments"}));
    s.stop().await;
}

#[tokio::test]
async fn hidden_and_excluded_notes_are_never_prompts_and_never_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let s = start(tmp.path(), &[]).await;
    let names: Vec<String> = s
        .client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(!names.iter().any(|n| n.contains("Hidden")), "{names:?}");
    let text = get(&s, "Leak", json!({})).await.unwrap();
    assert!(
        !text.contains("TOPSECRET") && !text.contains("HIDDENTEXT"),
        "{text}"
    );
    assert_eq!(
        text,
        "A: [![[Secret]]: no such file in the vault] B: [![[Private/Secret]]: no such file in \
         the vault] C: [![[.hidden/Note]]: no such file in the vault]\n"
    );
    s.stop().await;
    // A hidden prompts folder is refused at startup.
    let out = crate::common::capvault()
        .args([
            "serve",
            tmp.path().to_str().unwrap(),
            "--prompts-folder",
            ".hidden",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--prompts-folder .hidden"), "{err}");
}

#[tokio::test]
async fn built_in_prompts_gather_daily_notes_open_tasks_and_links_and_can_be_turned_off() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let today = chrono::Local::now().date_naive();
    let yesterday = today - chrono::Duration::days(1);
    let day = |d: chrono::NaiveDate| d.format("%Y-%m-%d").to_string();
    write_tree(
        tmp.path(),
        &[
            (
                format!("{}.md", day(today)).as_str(),
                format!(
                    "Met Ada.\n- [ ] send the plan ⏫ 🔁 every week 📅 {}\n",
                    day(yesterday)
                )
                .as_str(),
            ),
            (
                "Later.md",
                "- [ ] far off 📅 2999-01-01\n- [x] done 📅 2000-01-01\n",
            ),
        ],
    );
    let s = start(tmp.path(), &[]).await;
    let text = get(&s, "daily-review", json!({})).await.unwrap();
    assert!(
        text.contains(&format!(
            "## Today ({}): {}.md\n\nMet Ada.",
            day(today),
            day(today)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "## Yesterday ({}): {}.md\n\n(no daily note)",
            day(yesterday),
            day(yesterday)
        )),
        "{text}"
    );
    // Each task as the Tasks plugin writes it: its priority, recurrence and due date say why
    // it is there.
    assert!(
        text.contains(&format!(
            "## Open tasks due by today (1 in all)\n\n- [ ] send the plan ⏫ 🔁 every week 📅 {} \
             ({}.md, line 2)\n",
            day(yesterday),
            day(today)
        )),
        "{text}"
    );
    let text = get(&s, "summarize-note", json!({"note": "Goals"}))
        .await
        .unwrap();
    assert!(text.contains("## Goals.md\n\n# Goals\nShip it."), "{text}");
    assert!(
        text.contains("- Other.md (line 1): Goals are [[Goals]] here."),
        "{text}"
    );
    let text = get(&s, "suggest-links", json!({"note": "Goals"}))
        .await
        .unwrap();
    let mentions = text.split("without a link\n\n").nth(1).unwrap();
    assert!(
        mentions.contains("- Third.md (line 1): The Goals came up today."),
        "{text}"
    );
    assert!(
        !mentions.contains("Other.md"),
        "Other.md links already: {text}"
    );
    let e = get(&s, "summarize-note", json!({})).await.unwrap_err();
    assert_eq!(e, "prompt `summarize-note` needs the argument `note`");
    s.stop().await;

    let s = start(tmp.path(), &["--no-builtin-prompts"]).await;
    let names: Vec<String> = s
        .client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["leak", "plain", "weekly-plan", "sub-plain"]);
    s.stop().await;
    // No prompts at all: the capability is not offered.
    let s = Server::start_with(tmp.path(), &["--no-builtin-prompts"]).await;
    let info = s.client.peer_info().unwrap();
    assert!(
        info.capabilities.prompts.is_none(),
        "{:?}",
        info.capabilities
    );
    s.stop().await;
}

/// A raw stdio session: JSON-RPC lines in and out, every message kept in order.
struct Raw {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Every message read so far.
    seen: Vec<Value>,
    next_id: u64,
}

impl Raw {
    async fn start(vault: &Path) -> Raw {
        let mut child = serve_command(vault, &["--prompts-folder", "Prompts", "--no-index-cache"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut raw = Raw {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next_id: 1,
        };
        let init = raw
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}),
            )
            .await;
        assert_eq!(
            init["result"]["capabilities"]["prompts"]["listChanged"],
            true
        );
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("the session is open");
        stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// Reads the next message (at most [`crate::common::CALL_TIMEOUT`]); `None` at the end.
    async fn read(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(crate::common::CALL_TIMEOUT, self.lines.next_line())
            .await
            .expect("a message (or the end) within the timeout")
            .unwrap()?;
        let v: Value = serde_json::from_str(&line).unwrap();
        self.seen.push(v.clone());
        Some(v)
    }

    /// Sends a request and reads until its answer.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let v = self.read().await.expect("an answer before the end");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Reads until `list_changed` notifications number `n` in all.
    async fn until_list_changed(&mut self, n: usize) {
        while list_changed(&self.seen) < n {
            self.read().await.expect("a list_changed before the end");
        }
    }

    /// The changes after `cursor` once they name `path`.
    async fn changes_naming(&mut self, cursor: &str, path: &str) {
        poll(
            &format!("a change of {path}"),
            Duration::from_secs(30),
            async || {
                let r = self
                    .request(
                        "tools/call",
                        json!({"name": "changes_since", "arguments": {"cursor": cursor}}),
                    )
                    .await;
                let changes = r["result"]["structuredContent"]["changes"]
                    .as_array()
                    .cloned();
                changes
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c["path"] == path)
                    .then_some(())
            },
        )
        .await;
    }

    /// Closes the session's input and reads to the end (the server exits): every message of the
    /// session.
    async fn close(mut self) -> Vec<Value> {
        self.stdin = None;
        while self.read().await.is_some() {}
        let status = tokio::time::timeout(crate::common::EXIT_WITHIN, self.child.wait())
            .await
            .expect("the server exits once its input ends")
            .unwrap();
        assert!(status.success(), "{status:?}");
        self.seen
    }
}

fn list_changed(msgs: &[Value]) -> usize {
    msgs.iter()
        .filter(|m| m["method"] == "notifications/prompts/list_changed")
        .count()
}

#[tokio::test]
async fn a_burst_of_changes_to_the_prompts_folder_is_one_list_changed_and_other_notes_none() {
    let tmp = tempfile::tempdir().unwrap();
    vault(tmp.path());
    let mut raw = Raw::start(tmp.path()).await;
    // The first build done, with no list change.
    let cursor = poll("the first build", Duration::from_secs(60), async || {
        let r = raw
            .request("tools/call", json!({"name": "vault_info", "arguments": {}}))
            .await;
        let info = &r["result"]["structuredContent"];
        let ready = info["index"]["state"] == "ready" && !info["notes"].is_null();
        ready.then(|| info["changes_cursor"].as_str().unwrap().to_owned())
    })
    .await;
    let first = raw.request("prompts/list", json!({})).await;
    assert!(first["result"]["prompts"].is_array(), "{first}");
    assert_eq!(list_changed(&raw.seen), 0, "{:?}", raw.seen);

    // Another note changes: the prompts do not. (Seen by the server before what follows.)
    write_tree(tmp.path(), &[("Third.md", "changed\n")]);
    raw.changes_naming(&cursor, "Third.md").await;

    // Three prompt notes in a burst: one notification.
    for i in 0..3 {
        write_tree(
            tmp.path(),
            &[(format!("Prompts/New {i}.md").as_str(), "new\n")],
        );
    }
    raw.until_list_changed(1).await;
    // A description edited changes the list too.
    write_tree(
        tmp.path(),
        &[(
            "Prompts/Plain.md",
            "---\ndescription: now described\n---\nJust text.\n",
        )],
    );
    raw.until_list_changed(2).await;
    let reply = raw.request("prompts/list", json!({})).await;
    let plain = reply["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "plain")
        .unwrap();
    assert_eq!(plain["description"], "now described");
    // Two in all: a notification for the other note, or a second one for the burst, would have
    // come before the description's (a session's notifications come in order).
    let all = raw.close().await;
    assert_eq!(list_changed(&all), 2, "{all:?}");
}

#[tokio::test]
async fn a_prompts_placeholders_are_its_arguments_when_it_declares_none() {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        tmp.path(),
        &[
            (
                "Prompts/Summarise for.md",
                "Summarise {{note}} for {{ audience }} on {{date}}; {{date:YYYY}} and {{title}} are filled.\n",
            ),
            ("Goals.md", "# Goals\n"),
        ],
    );
    let s = start(tmp.path(), &["--no-builtin-prompts"]).await;
    let list = s.client.list_all_prompts().await.unwrap();
    assert_eq!(list.len(), 1);
    let p = &list[0];
    assert_eq!(p.name, "summarise-for");
    assert_eq!(p.title.as_deref(), Some("Summarise for"));
    let args: Vec<(&str, Option<bool>)> = p
        .arguments
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| (a.name.as_str(), a.required))
        .collect();
    assert_eq!(args, [("note", Some(true)), ("audience", Some(true))]);
    let text = get(
        &s,
        "summarise-for",
        json!({"note": "Goals", "audience": "the team"}),
    )
    .await
    .unwrap();
    assert!(
        text.starts_with("Summarise Goals for the team on "),
        "{text}"
    );
    assert!(!text.contains("{{"), "{text}");
    let e = get(&s, "Summarise for", json!({"audience": "x"}))
        .await
        .unwrap_err();
    assert!(e.contains("needs the argument `note`"), "{e}");
    s.stop().await;
}
