//! The Dockerfile cannot be built by the test suite (no Docker engine, no registry; it is built by
//! hand with buildah, `scripts/docker_offline.sh`), so this test keeps it honest against the
//! binary instead: it runs the image's command (ENTRYPOINT + CMD, with the container's
//! /vault and /state mapped to temporary folders and the port made free) and its HEALTHCHECK
//! against the real binary, and checks the user is not root and the state folder is a volume.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[cfg(feature = "http")]
use std::io::{BufRead, BufReader};
#[cfg(feature = "http")]
use std::process::{Command, Stdio};

use serde_json::Value;

fn dockerfile() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap()
}

/// The JSON array after `KEYWORD` on its line (the exec form).
fn exec_form(text: &str, keyword: &str) -> Vec<String> {
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(keyword))
        .unwrap_or_else(|| panic!("no {keyword} in the Dockerfile"));
    let json = &line[line.find('[').expect("exec form")..];
    serde_json::from_str::<Vec<String>>(json).expect("a JSON array")
}

#[test]
fn the_image_runs_as_a_non_root_user_with_the_state_folder_as_a_volume() {
    let text = dockerfile();
    let user = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER line")
        .trim()
        .to_owned();
    assert!(user != "root" && user != "0", "USER {user}");
    let volumes: Vec<String> = serde_json::from_str::<Value>(
        text.lines()
            .find_map(|l| l.strip_prefix("VOLUME "))
            .expect("a VOLUME line"),
    )
    .unwrap()
    .as_array()
    .unwrap()
    .iter()
    .map(|v| v.as_str().unwrap().to_owned())
    .collect();
    assert!(volumes.contains(&"/state".to_owned()), "{volumes:?}");
    let cmd = exec_form(&text, "CMD ");
    assert!(
        cmd.iter().any(|a| a.starts_with("/state")),
        "the index cache is not on the volume: {cmd:?}"
    );
    assert!(
        !cmd.iter().any(|a| a == "--write"),
        "the default image must be read-only: {cmd:?}"
    );
}

#[cfg(feature = "http")]
#[tokio::test]
async fn the_images_command_and_health_check_work_against_the_binary() {
    let text = dockerfile();
    let entry = exec_form(&text, "ENTRYPOINT ");
    assert_eq!(entry, ["capvault"]);
    let tmp = tempfile::tempdir().unwrap();
    crate::common::write_tree(&tmp.path().join("vault"), &[("Home.md", "# Home\n")]);
    std::fs::create_dir(tmp.path().join("state")).unwrap();
    let map = |a: &str| -> String {
        for root in ["/vault", "/state"] {
            if a == root || a.starts_with(&format!("{root}/")) {
                return format!(
                    "{}{}",
                    tmp.path().join(&root[1..]).display(),
                    &a[root.len()..]
                );
            }
        }
        // Any free port instead of 8000 (the health check is pointed at it below).
        a.replace(":8000", ":0")
    };
    let args: Vec<String> = exec_form(&text, "CMD ").iter().map(|a| map(a)).collect();

    // Without a token the command refuses to start: the image listens on all interfaces.
    let out = crate::common::capvault().args(&args).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs bearer tokens"));

    let mut child = crate::common::capvault()
        .args(&args)
        .env(
            "CAPVAULT_TOKEN",
            "a-token-for-the-dockerfile-test-0123456789",
        )
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("capvault exited").unwrap();
        if let Some(u) = line.strip_prefix("capvault: serving over HTTP at ") {
            break u.to_owned();
        }
    };
    let port = url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let health = exec_form(&text, "HEALTHCHECK ");
    let health: Vec<String> = health
        .iter()
        .map(|a| a.replace("/8000", &format!("/{port}")))
        .collect();
    let status = Command::new(&health[0])
        .args(&health[1..])
        .status()
        .unwrap();
    assert!(status.success(), "the health check failed: {health:?}");
    let _ = child.kill();
    let _ = child.wait();
    // The health check fails when nothing answers.
    let status = Command::new(&health[0])
        .args(&health[1..])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the health check passed with no server");
}

/// `COPY . .` sends the build context: without `.dockerignore` leaving out build output, a
/// checkout that has run the tests would send tens of GB of `target/`.
#[test]
fn the_build_context_leaves_out_build_output_and_history() {
    let ignore =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/.dockerignore")).unwrap();
    let rules: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for needed in ["target/", "fuzz/target/", ".git/"] {
        assert!(
            rules.contains(&needed),
            "{needed} is not left out: {rules:?}"
        );
    }
    // What the build reads stays in.
    for kept in [
        "src",
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "examples",
        "docs",
    ] {
        assert!(
            !rules
                .iter()
                .any(|r| r.trim_end_matches('/') == kept || *r == "*"),
            "{kept} is left out of the build context"
        );
    }
}
