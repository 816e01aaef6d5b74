//! The command line as a person uses it: `--help`, `--version`, `call` and `demo`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::process::{Command, Output};

fn capvault(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capvault"))
        .args(args)
        .env("CAPVAULT_LOG", "capvault=warn")
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
    let v = capvault(&["--version"]);
    assert!(v.status.success());
    assert_eq!(
        stdout(&v).trim(),
        format!("capvault {}", env!("CARGO_PKG_VERSION"))
    );
    let help = stdout(&capvault(&["--help"]));
    for sub in ["serve", "call", "demo"] {
        assert!(help.contains(sub), "--help lacks {sub}: {help}");
        let sub_help = capvault(&[sub, "--help"]);
        assert!(sub_help.status.success(), "{sub} --help failed");
        assert!(stdout(&sub_help).contains("Usage: capvault"), "{sub}");
    }
    assert!(stdout(&capvault(&["serve", "--help"])).contains("--max-file-size"));
}

#[test]
fn call_prints_the_structured_result_as_json() {
    let tmp = tempfile::tempdir().unwrap();
    common::write_tree(tmp.path(), &[("a/Note.md", "hello garden\n")]);
    let vault = tmp.path().to_str().unwrap();
    let o = capvault(&["call", vault, "search_notes", r#"{"query": "garden"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["hits"][0]["path"], "a/Note.md");
    assert_eq!(v["hits"][0]["line"], 1);

    let o = capvault(&["call", vault, "read_note", r#"{"path": "a/Note.md"}"#]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["content"], "hello garden\n");

    // No arguments means {}.
    let o = capvault(&["call", vault, "list_notes"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("a/Note.md"));
}

#[test]
fn call_reports_tool_errors_and_bad_input_on_stderr_with_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["read_note", r#"{"path": "../x"}"#],
            "read_note failed: refused: invalid path",
        ),
        (&["no_such_tool"], "unknown tool `no_such_tool`"),
        (&["read_note", "not json"], "JSON_ARGS is not valid JSON"),
        (&["read_note", "[1]"], "JSON_ARGS must be a JSON object"),
    ];
    for (args, want) in cases {
        let mut full = vec!["call", vault];
        full.extend_from_slice(args);
        let o = capvault(&full);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?} printed to stdout");
    }
    let o = capvault(&["call", "/nonexistent/vault/dir", "list_notes"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot open vault folder"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn demo_prints_a_real_wire_session_over_the_embedded_vault() {
    let o = capvault(&["demo"]);
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
    ] {
        assert!(out.contains(want), "demo output lacks {want}");
    }
    // Every message between the arrows is valid JSON-RPC.
    let messages = out.matches("client → server").count() + out.matches("server → client").count();
    assert!(messages >= 20, "only {messages} messages");
}
