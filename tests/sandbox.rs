//! The Landlock sandbox of `capvault serve`, proven from inside the sandboxed process itself:
//! `--sandbox-probe` makes the real binary try to read a host file (or connect somewhere) after
//! the sandbox applies, as any bug in it could. This machine's kernel has Landlock (ABI 4 or
//! later), so these tests require it rather than skip without it. Every other integration test
//! runs the server sandboxed too (best effort is the default), which shows the sandbox takes
//! nothing away that capvault needs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use crate::common::{Server, write_tree};
use serde_json::json;

fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write_tree(
        &tmp.path().join("vault"),
        &[("Home.md", "# Home\n"), ("Sub/Inner.md", "inner\n")],
    );
    write_tree(tmp.path(), &[("outside/secret.txt", "OUTSIDE-SECRET")]);
    tmp
}

/// Runs `serve` on stdio with stdin closed (it exits at once) and returns its stderr.
fn probe(vault: &Path, target: &str, extra: &[&str]) -> String {
    let out = crate::common::capvault()
        .arg("serve")
        .arg(vault)
        .args(["--no-index-cache", "--sandbox-probe", target])
        .args(extra)
        .env("CAPVAULT_LOG", "capvault=info")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err.lines()
        .find_map(|l| l.strip_prefix("capvault: sandbox probe: "))
        .unwrap_or_else(|| panic!("no probe line: {err}"))
        .to_owned()
}

#[test]
fn the_sandboxed_process_cannot_read_outside_the_vault_but_can_read_inside() {
    let tmp = fixture();
    let v = tmp.path().join("vault");
    let secret = tmp.path().join("outside/secret.txt");
    let secret = secret.to_str().unwrap();
    assert!(probe(&v, secret, &[]).ends_with(": denied"));
    assert!(probe(&v, "/etc/passwd", &[]).ends_with(": denied"));
    assert!(probe(&v, secret, &["--sandbox", "require"]).ends_with(": denied"));
    // The probe does read when nothing stops it: inside the vault, or with the sandbox off.
    let inner = v.join("Sub/Inner.md");
    assert_eq!(
        probe(&v, inner.to_str().unwrap(), &[]),
        format!("{}: read 6 bytes", inner.display())
    );
    assert!(probe(&v, secret, &["--sandbox", "off"]).ends_with(": read 14 bytes"));
}

#[test]
fn with_write_the_state_folder_is_reachable_and_the_rest_still_is_not() {
    let tmp = fixture();
    let v = tmp.path().join("vault");
    let state = tmp.path().join("state");
    let flags = ["--write", "--state-dir", state.to_str().unwrap()];
    let secret = tmp.path().join("outside/secret.txt");
    assert!(probe(&v, secret.to_str().unwrap(), &flags).ends_with(": denied"));
    // The first run made this vault's state folder (the one holding its vault.json): a file
    // put in it is readable to the server.
    let any = walk(&state)
        .into_iter()
        .find(|p| p.ends_with("vault.json"))
        .expect("the vault's state folder has its record");
    let beside = any.parent().unwrap().join("probe.txt");
    std::fs::write(&beside, "kept").unwrap();
    assert_eq!(
        probe(&v, beside.to_str().unwrap(), &flags),
        format!("{}: read 4 bytes", beside.display())
    );
    // Without --write the state folder is not in the sandbox.
    assert!(probe(&v, beside.to_str().unwrap(), &[]).ends_with(": denied"));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_sandboxed_process_cannot_connect_anywhere() {
    let tmp = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let target = format!("tcp:{addr}");
    assert_eq!(
        probe(&tmp.path().join("vault"), &target, &[]),
        format!("{target}: denied")
    );
    assert_eq!(
        probe(&tmp.path().join("vault"), &target, &["--sandbox", "off"]),
        format!("{target}: connected")
    );
}

#[tokio::test]
async fn vault_info_says_what_the_sandbox_enforces() {
    let tmp = fixture();
    let s = Server::start(&tmp.path().join("vault")).await;
    let info = s.ok("vault_info", json!({})).await;
    let sandbox = &info["sandbox"];
    assert_eq!(sandbox["state"], "enforced", "{info}");
    assert!(sandbox["abi"].as_u64().unwrap() >= 4, "{sandbox}");
    let fs = sandbox["filesystem"].as_str().unwrap();
    assert!(
        fs.contains("the vault (read-only)") && !fs.contains("state"),
        "{fs}"
    );
    assert!(
        sandbox["network"]
            .as_str()
            .unwrap()
            .starts_with("no TCP bind or connect")
    );
    s.stop().await;
    let s = Server::start_with(&tmp.path().join("vault"), &["--sandbox", "off"]).await;
    let info = s.ok("vault_info", json!({})).await;
    assert_eq!(info["sandbox"]["state"], "off", "{info}");
}
