//! The command line as a person uses it: `--help`, `--version`, `call` and `demo`, paths given
//! relative to the current folder, errors, output cut short by a closed pipe, `token new`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::Output;

use crate::common::{capvault, run};

/// `capvault ARGS` run in the folder `cwd`, with the tests' environment.
fn capvault_in(cwd: &std::path::Path, args: &[&str]) -> Output {
    capvault()
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("run capvault")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version_and_help_describe_every_subcommand() {
    let v = run(&["--version"]);
    assert!(v.status.success());
    assert_eq!(
        stdout(&v).trim(),
        format!("capvault {}", env!("CARGO_PKG_VERSION"))
    );
    let help = stdout(&run(&["--help"]));
    for sub in ["serve", "call", "demo"] {
        assert!(help.contains(sub), "--help lacks {sub}: {help}");
        let sub_help = run(&[sub, "--help"]);
        assert!(sub_help.status.success(), "{sub} --help failed");
        assert!(stdout(&sub_help).contains("Usage: capvault"), "{sub}");
    }
    assert!(stdout(&run(&["serve", "--help"])).contains("--max-file-size"));
}

#[test]
fn call_prints_the_structured_result_as_json() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::write_tree(tmp.path(), &[("a/Note.md", "hello garden\n")]);
    let vault = tmp.path().to_str().unwrap();
    let o = run(&["call", vault, "search_notes", r#"{"query": "garden"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["hits"][0]["path"], "a/Note.md");
    assert_eq!(v["hits"][0]["line"], 1);

    let o = run(&["call", vault, "read_note", r#"{"path": "a/Note.md"}"#]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["content"], "hello garden\n");

    // No arguments means {}.
    let o = run(&["call", vault, "list_notes"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("a/Note.md"));

    // A reply with text beside its structured part (a PDF's pages, a task list's lines): one
    // JSON document (what `| jq` reads), the text in it.
    std::fs::write(
        tmp.path().join("a/minutes.pdf"),
        capvault::media::pdf::sample_pdf(&["first page", "second page text"]),
    )
    .unwrap();
    let o = run(&[
        "call",
        vault,
        "read_attachment",
        r#"{"path": "minutes.pdf", "pages": "2"}"#,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {out}"));
    if cfg!(feature = "pdf") {
        assert_eq!(v["pdf"]["pages_sent"], "2");
        assert_eq!(v["text"], "[page 2 of 2]\nsecond page text");
    } else {
        // A build without the PDF reader sends the file's bytes and says why.
        let why = v["pdf_error"].as_str().unwrap_or_default();
        assert!(why.contains("built without the `pdf` feature"), "{out}");
        assert!(v.get("pdf").is_none_or(|p| p.is_null()), "{out}");
    }
    std::fs::write(tmp.path().join("a/Tasks.md"), "- [ ] buy milk\n").unwrap();
    let o = run(&["call", vault, "list_tasks"]);
    let out = stdout(&o);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {out}"));
    assert_eq!(v["items"][0]["description"], "buy milk", "{out}");
    // Without CAPVAULT_LOG, a call that goes well says nothing on stderr.
    let o = capvault()
        .args(["call", vault, "vault_info"])
        .env_remove("CAPVAULT_LOG")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "a call logged");
}

#[test]
fn call_reports_tool_errors_and_bad_input_on_stderr_with_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["read_note", r#"{"path": "../x"}"#],
            "read_note failed: refused: invalid path",
        ),
        (&["no_such_tool"], "unknown tool `no_such_tool`"),
        // A misspelling: the closest names, not the whole list.
        (&["serch_notes"], "did you mean `search_notes`?"),
        (&["read_note", "not json"], "JSON_ARGS is not valid JSON"),
        (&["read_note", "[1]"], "JSON_ARGS must be a JSON object"),
    ];
    for (args, want) in cases {
        let mut full = vec!["call", vault];
        full.extend_from_slice(args);
        let o = run(&full);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} printed to stdout");
    }
    let o = run(&["call", vault, "serch_notes"]);
    assert!(!stderr(&o).contains("vault_info"), "{}", stderr(&o));
    // No tool: where the list is.
    let o = run(&["call", vault]);
    assert!(
        !o.status.success() && stderr(&o).contains(&format!("capvault call {vault} --list")),
        "{}",
        stderr(&o)
    );
    let o = run(&["call", "/nonexistent/vault/dir", "list_notes"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot open vault folder"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_default_demo_is_a_first_look_of_at_most_150_lines() {
    let o = run(&["demo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines = out.lines().count();
    assert!(lines <= 150, "the first look has {lines} lines:\n{out}");
    for want in [
        "client → server  initialize",
        "\"name\": \"capvault\"",
        "tools/list",
        "  search_notes ",
        "  read_note ",
        "tools/call search_notes",
        "Projects/Garden Plan.md",
        "tool error: refused",
        "`.` and `..` components are not allowed",
        "hidden files and folders",
        "capvault demo --full",
        // A list cut short says so: the search found 3, two are shown.
        "hits: 3 item(s)",
        "  … 1 more",
    ] {
        assert!(out.contains(want), "the first look lacks {want}:\n{out}");
    }
    // One line per tool: no tool's JSON schema in the first look.
    assert!(!out.contains("inputSchema"), "{out}");
    quiet_end(&o);
}

/// A demo ends without a warning: its background work stops before the example vault's
/// temporary folder goes (it used to report that folder's subfolders as unreadable, now and
/// then).
fn quiet_end(o: &Output) {
    let err = stderr(o);
    assert!(
        !err.contains(" WARN ") && !err.contains(" ERROR "),
        "the demo warned:\n{err}"
    );
}

#[test]
fn demo_full_prints_a_real_wire_session_over_the_embedded_vault() {
    let o = run(&["demo", "--full"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "\"method\": \"initialize\"",
        "\"name\": \"capvault\"",
        "\"method\": \"tools/list\"",
        "\"name\": \"search_notes\"",
        "Projects/Garden Plan.md",
        "\"method\": \"resources/read\"",
        "capvault:///Daily/2026-11-30.md",
        "`.` and `..` components are not allowed",
        "hidden files and folders",
        "not_found: Projects/Garden Plna.md: not found (did you mean: Projects/Garden Plan.md",
        "\"path\": \"Resources/Compost.md\"",
        "\"name\": \"list_folders\"",
        "[[Greenhouse Ideas]]",
        "\"source\": \"daily-notes\"",
        "\"method\": \"prompts/get\"",
        "Summarise the note Resources/Compost.md",
    ] {
        assert!(out.contains(want), "demo output lacks {want}");
    }
    // Every message between the arrows is valid JSON-RPC.
    let messages = out.matches("client → server").count() + out.matches("server → client").count();
    assert!(messages >= 20, "only {messages} messages");
    quiet_end(&o);
}

#[test]
fn a_vault_given_as_dot_or_dotdot_is_named_after_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("Garden Notes");
    crate::common::write_tree(&vault, &[("sub/a.md", "# A\n")]);
    for (cwd, arg) in [
        (vault.clone(), "."),
        (vault.join("sub"), ".."),
        (vault.join("sub"), "../."),
    ] {
        let o = capvault_in(&cwd, &["call", arg, "vault_info"]);
        assert!(o.status.success(), "{arg}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["name"], "Garden Notes", "{arg}");
    }
}

#[test]
fn a_missing_vault_names_the_os_error_once() {
    for sub in ["serve", "call"] {
        let mut args = vec![sub, "/no/such/vault/here"];
        if sub == "call" {
            args.push("list_notes");
        }
        let o = run(&args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{sub}");
        assert!(
            err.contains("cannot open vault folder /no/such/vault/here"),
            "{sub}: {err}"
        );
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "{sub}: {err}"
        );
    }
}

#[cfg(feature = "http")]
#[test]
fn path_flags_are_relative_to_the_current_folder() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("v");
    crate::common::write_tree(&vault, &[("a.md", "# A\n")]);
    let v = vault.to_str().unwrap();
    // A private token file named relatively is read (its bad line is reported), not "missing".
    crate::common::write_tree(tmp.path(), &[("tokens", "too-short\n")]);
    std::fs::set_permissions(
        tmp.path().join("tokens"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let o = capvault_in(
        tmp.path(),
        &[
            "serve",
            v,
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            "tokens",
        ],
    );
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("tokens: line 1: a token needs"), "{err}");
    // A relative --append creates the file in the current folder.
    let o = capvault_in(tmp.path(), &["token", "new", "--append", "new-tokens"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("new-tokens").is_file());
    // A relative --state-dir and --index-cache are made where the command runs.
    let o = capvault_in(
        tmp.path(),
        &[
            "call",
            v,
            "--write",
            "--state-dir",
            "state",
            "--index-cache",
            "cache",
            "create_note",
            r##"{"path": "b.md", "content": "# B\n"}"##,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("state").is_dir(), "no state folder");
    assert!(tmp.path().join("cache").is_dir(), "no index cache folder");
}

/// Runs `capvault ARGS` with a stdout pipe whose reader is already gone.
fn with_a_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = capvault()
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    crate::common::write_tree(tmp.path(), &[("a.md", "# A\n")]);
    let v = tmp.path().to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["install", "--list"],
        &["demo"],
        &["call", v, "--list"],
        #[cfg(feature = "http")]
        &["token", "new"],
    ];
    for &args in cases {
        let o = with_a_closed_stdout(args);
        let quiet = o.status.success() || o.status.signal() == Some(13);
        assert!(quiet, "{args:?}: {:?}", o.status);
        let err = stderr(&o);
        assert!(
            !err.contains("Broken pipe") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn call_lists_the_tools_and_takes_the_serve_options_that_change_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("v");
    crate::common::write_tree(
        &vault,
        &[("a.md", "# A\nthe garden\n"), ("private/p.md", "garden\n")],
    );
    let v = vault.to_str().unwrap();
    let o = run(&["call", v, "--list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list = stdout(&o);
    let search = list
        .lines()
        .find(|l| l.starts_with("search_notes "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(search.trim_end().ends_with('.'), "{search}");
    assert!(
        !list.contains("create_note"),
        "read-only lists a write tool: {list}"
    );
    let o = run(&["call", v, "--list", "--tools", "minimal"]);
    assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
    // The write tools, with --write; --exclude hides a folder.
    let state = tmp.path().join("state");
    let o = run(&[
        "call",
        v,
        "--write",
        "--state-dir",
        state.to_str().unwrap(),
        "create_note",
        r##"{"path": "new.md", "content": "# New\n"}"##,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(vault.join("new.md")).unwrap(),
        "# New\n"
    );
    let o = run(&["call", v, "create_note", r#"{"path": "x.md"}"#]);
    assert!(stderr(&o).contains("need --write"), "{}", stderr(&o));
    let o = run(&["call", v, "--exclude", "private", "list_notes"]);
    let out = stdout(&o);
    assert!(
        out.contains("a.md") && !out.contains("private/p.md"),
        "{out}"
    );
}

#[cfg(feature = "http")]
#[test]
fn token_new_prints_only_the_token_and_appends_a_named_line_to_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tokens");
    let f = file.to_str().unwrap();
    let o = run(&["token", "new", "--name", "laptop", "--append", f]);
    assert!(o.status.success(), "{}", stderr(&o));
    let token = stdout(&o);
    assert_eq!(
        token.lines().count(),
        1,
        "stdout holds the token alone: {token}"
    );
    let token = token.trim();
    assert!(token.starts_with("cvt_"), "{token}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("sha256:") && text.trim_end().ends_with(" read name=laptop"),
        "{text}"
    );
    assert!(!text.contains(token), "the file holds the secret");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // A second token is appended; a name used twice and a file others can read are refused.
    let o = run(&["token", "new", "--scope", "write", "--append", f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);
    // tokens list names them.
    let vault = tmp.path().join("v");
    std::fs::create_dir_all(&vault).unwrap();
    let state = tmp.path().join("state");
    let o = run(&[
        "tokens",
        "list",
        vault.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--token-file",
        f,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = stdout(&o);
    let line = listed
        .lines()
        .find(|l| l.starts_with("laptop (token-"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains(" read ") && line.ends_with("all"), "{line}");
    assert!(listed.contains("read,write"), "{listed}");
    let o = run(&["token", "new", "--name", "laptop", "--append", f]);
    assert!(
        !o.status.success() && stderr(&o).contains("already name=laptop"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty(), "a refused token was printed");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(&["token", "new", "--append", f]);
    assert!(
        !o.status.success() && stderr(&o).contains("others may read"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 2);
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_named_token_is_named_in_the_access_log() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("v");
    crate::common::write_tree(&vault, &[("a.md", "# A\n")]);
    let file = tmp.path().join("tokens");
    let o = run(&[
        "token",
        "new",
        "--name",
        "laptop",
        "--append",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let token = stdout(&o).trim().to_owned();
    let server =
        crate::common::HttpChild::spawn(&vault, &["--token-file", file.to_str().unwrap()], &[])
            .await;
    let client = server.connect(Some(&token)).await;
    client.list_all_tools().await.unwrap();
    let _ = client.cancel().await;
    let logged = server.stderr.lock().unwrap().join("\n");
    assert!(logged.contains("laptop (token-"), "{logged}");
    server.terminate().await;
}

/// `--listen`, `--token-file` and the other HTTP options given to a stdio server used to be
/// ignored without a word (a world-readable token file too); now the command is refused.
#[test]
fn http_options_without_the_http_transport_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().to_str().unwrap();
    let out = run(&[
        "serve",
        vault,
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        "/x/t",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--listen, --token-file only apply to `serve --transport http`"),
        "{err}"
    );
}

#[cfg(feature = "http")]
#[test]
fn serve_refuses_at_start_what_several_vaults_make_possible_to_get_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("A"), tmp.path().join("B"));
    crate::common::write_tree(&a, &[("n.md", "x\n")]);
    crate::common::write_tree(&b, &[("n.md", "y\n")]);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // No folder and no [[vault]] table.
    let o = run(&["serve"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("name the vault folder"),
        "{}",
        stderr(&o)
    );
    // A flag that only means something with writes, and no vault writes (flag or table).
    let log = tmp.path().join("audit.jsonl");
    for (flag, value) in [
        ("--audit-log", Some(log.to_str().unwrap())),
        ("--write-scope", Some("Inbox")),
        ("--confirm", Some("destructive")),
        ("--allow-permanent-delete", None),
    ] {
        let mut args = vec!["serve", a, b, flag];
        args.extend(value);
        let o = run(&args);
        assert!(!o.status.success(), "{flag}");
        assert!(
            stderr(&o).contains(&format!("{flag} needs --write")),
            "{flag}: {}",
            stderr(&o)
        );
        let mut args = vec!["call", a, "vault_info", flag];
        args.extend(value);
        let o = run(&args);
        assert!(
            stderr(&o).contains(&format!("{flag} needs --write")),
            "{}",
            stderr(&o)
        );
    }
    // A token limited to a vault this server does not serve.
    let tokens = tmp.path().join("tokens");
    std::fs::write(
        &tokens,
        "vault-token-0123456789abcdef0123456789ab read vaults=A,Nope\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = run(&[
        "serve",
        a,
        b,
        "--transport",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("`vaults=Nope` names no vault") && stderr(&o).contains("A, B"),
        "{}",
        stderr(&o)
    );
}

/// A build without a feature (`--no-default-features`, or one feature left out) refuses each
/// command and option of that feature at once, in one line that names the feature and where
/// the full build is; nothing is served, downloaded or written.
#[cfg(not(all(
    feature = "http",
    feature = "oauth",
    feature = "semantic",
    feature = "import",
    feature = "pdf"
)))]
#[test]
fn a_build_without_a_feature_names_it_for_each_command_and_option_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    crate::common::write_tree(tmp.path(), &[("a.md", "# A\n")]);
    let v = tmp.path().to_str().unwrap();
    let mut cases: Vec<(Vec<&str>, &str)> = Vec::new();
    if cfg!(not(feature = "http")) {
        cases.push((vec!["serve", v, "--transport", "http"], "http"));
        cases.push((vec!["token", "new"], "http"));
    }
    if cfg!(not(feature = "oauth")) {
        cases.push((vec!["passwd", v], "oauth"));
        cases.push((vec!["tokens", "list", v], "oauth"));
    }
    if cfg!(all(feature = "http", not(feature = "oauth"))) {
        cases.push((
            vec!["serve", v, "--transport", "http", "--oauth", "builtin"],
            "oauth",
        ));
    }
    if cfg!(not(feature = "semantic")) {
        cases.push((vec!["serve", v, "--semantic"], "semantic"));
        cases.push((vec!["model", "check", v], "semantic"));
        cases.push((vec!["call", v, "--list", "--semantic"], "semantic"));
        // A client asking for a search by meaning is told the same, not to pass --semantic.
        cases.push((
            vec![
                "call",
                v,
                "search_notes",
                r#"{"query": "a", "mode": "hybrid"}"#,
            ],
            "semantic",
        ));
    }
    if cfg!(all(feature = "semantic", not(feature = "import"))) {
        cases.push((vec!["model", "import", v, "--out", v], "import"));
    }
    if cfg!(not(feature = "pdf")) {
        cases.push((vec!["serve", v, "--index-pdfs"], "pdf"));
        cases.push((vec!["call", v, "--list", "--index-pdfs"], "pdf"));
    }
    assert!(!cases.is_empty());
    let before = crate::common::snapshot(tmp.path());
    for (args, feature) in cases {
        let o = run(&args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded: {err}");
        assert!(
            err.contains(&format!("built without the `{feature}` feature"))
                && err.contains("install the full build"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    assert_eq!(crate::common::snapshot(tmp.path()), before);
}

#[test]
fn serve_in_a_terminal_says_on_stderr_that_it_waits_for_an_mcp_client() {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let tmp = tempfile::tempdir().unwrap();
    crate::common::write_tree(tmp.path(), &[("a.md", "# A\n")]);
    // A terminal for stdin, as when a person types the command.
    let (mut leader, mut follower) = (-1, -1);
    // SAFETY: openpty writes two new file descriptors into the two ints; the other arguments
    // may be null.
    let rc = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    let (leader, follower) =
        unsafe { (OwnedFd::from_raw_fd(leader), OwnedFd::from_raw_fd(follower)) };
    let mut child = capvault()
        .args(["serve", tmp.path().to_str().unwrap(), "--no-index-cache"])
        .env("CAPVAULT_LOG", "capvault=error")
        .stdin(std::process::Stdio::from(follower))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            said.extend_from_slice(&buf[..n]);
            let _ = tx.send(String::from_utf8_lossy(&said).into_owned());
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut said = String::new();
    while !said.contains("waiting for an MCP client on stdin")
        && std::time::Instant::now() < deadline
    {
        if let Ok(s) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            said = s;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(leader);
    assert!(
        said.contains("waiting for an MCP client on stdin"),
        "{said}"
    );
    // Not over a pipe, where a client is the reader.
    let o = capvault()
        .args(["serve", tmp.path().to_str().unwrap(), "--no-index-cache"])
        .env("CAPVAULT_LOG", "capvault=error")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        !stderr(&o).contains("waiting for an MCP client"),
        "{}",
        stderr(&o)
    );
}
