//! `capvault bundle`: the `.mcpb` file is a zip holding `manifest.json` and this binary (mode
//! 0755); the manifest validates against the format's published schema (v0.3, pinned under
//! tests/mcpb/); and the server it describes, started as Claude Desktop would start it (the
//! bundle unpacked, `${__dirname}` and the user's settings substituted), serves the vault, with
//! the write tools exactly when "Allow changes" is on.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::common::BIN;

#[tokio::test]
async fn the_bundle_holds_a_schema_valid_manifest_and_a_server_that_runs_as_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("capvault.mcpb");
    // Stored, not deflated: the test binary carries its debug info.
    let o = crate::common::capvault()
        .args(["bundle", "--level", "0", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // On Linux, a note (not an error) that Claude Desktop runs on macOS and Windows.
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("Claude Desktop runs on macOS and Windows") && said.contains("(linux)"),
        "{said}"
    );
    // The binary under test is cargo's debug build: the bundle says it holds one.
    assert!(
        said.contains("holds this unoptimised debug build"),
        "{said}"
    );
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
    let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
    assert_eq!(names, ["manifest.json", "server/capvault"]);
    let mut text = String::new();
    zip.by_name("manifest.json")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mcpb/mcpb-manifest-v0.3.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&manifest)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "manifest fails the schema: {errors:?}");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    let tools: Vec<&str> = manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"search_notes") && tools.contains(&"edit_note"),
        "{tools:?}"
    );
    // The same binary, executable.
    let server = tmp.path().join("unpacked/server/capvault");
    std::fs::create_dir_all(server.parent().unwrap()).unwrap();
    {
        let mut entry = zip.by_name("server/capvault").unwrap();
        assert_eq!(entry.unix_mode().map(|m| m & 0o777), Some(0o755));
        assert_eq!(entry.size(), std::fs::metadata(BIN).unwrap().len());
        let mut f = std::fs::File::create(&server).unwrap();
        std::io::copy(&mut entry, &mut f).unwrap();
    }
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Started as Claude Desktop starts it, once with each setting of "Allow changes".
    let vault = tmp.path().join("Notes");
    crate::common::write_tree(&vault, &[("a.md", "# A\nthe garden\n")]);
    let state = tmp.path().join("state");
    let config = &manifest["server"]["mcp_config"];
    let dirname = tmp.path().join("unpacked");
    for allow in [false, true] {
        let subst = |s: &str| {
            s.replace("${__dirname}", dirname.to_str().unwrap())
                .replace("${user_config.vault}", vault.to_str().unwrap())
                .replace(
                    "${user_config.allow_writes}",
                    if allow { "true" } else { "false" },
                )
        };
        let mut cmd = tokio::process::Command::new(subst(config["command"].as_str().unwrap()));
        for a in config["args"].as_array().unwrap() {
            cmd.arg(subst(a.as_str().unwrap()));
        }
        for (k, v) in config["env"].as_object().unwrap() {
            cmd.env(k, subst(v.as_str().unwrap()));
        }
        cmd.env("XDG_STATE_HOME", &state)
            .env("XDG_CACHE_HOME", crate::common::test_cache_home())
            .env(
                "XDG_CONFIG_HOME",
                crate::common::test_cache_home().join("no-config"),
            )
            .env("CAPVAULT_LOG", "capvault=error");
        let s = crate::common::Server::from_command(cmd).await;
        let listed = s.client.list_all_tools().await.unwrap();
        let has_writes = listed.iter().any(|t| t.name == "edit_note");
        assert_eq!(has_writes, allow, "allow_writes = {allow}");
        let info = s.ok("vault_info", serde_json::json!({})).await;
        assert_eq!(info["writes_enabled"], allow);
        s.stop().await;
    }
}

/// The release binary is what ships (and what a bundle zips): stripped, with panics that
/// unwind; the symbols live in a separate profile. A release build takes too long for CI, so
/// the settings are checked here, and `.ci/release` builds it and checks the sizes.
#[test]
fn the_release_profile_ships_a_stripped_binary_and_bundles_default_to_maximum_compression() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&text).unwrap();
    let profiles = manifest["profile"].as_table().unwrap();
    let release = profiles["release"].as_table().unwrap();
    assert_eq!(release.get("strip").and_then(|v| v.as_bool()), Some(true));
    // What brings it under 30 MB (thin LTO and 4 codegen units gave 31.8 MB): `.ci/release`.
    assert_eq!(release.get("lto").and_then(|v| v.as_str()), Some("fat"));
    assert_eq!(
        release.get("codegen-units").and_then(|v| v.as_integer()),
        Some(1)
    );
    assert_ne!(
        release.get("panic").and_then(|v| v.as_str()),
        Some("abort"),
        "panics must unwind"
    );
    assert!(
        release
            .get("debug")
            .is_none_or(|d| d.as_bool() == Some(false)),
        "debug info in the shipped binary"
    );
    let symbols = profiles["release-debug"].as_table().unwrap();
    assert_eq!(symbols["inherits"].as_str(), Some("release"));
    assert_eq!(symbols["strip"].as_bool(), Some(false));
    assert_eq!(symbols["debug"].as_str(), Some("line-tables-only"));
    let help = crate::common::capvault()
        .args(["bundle", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 9]"), "{help}");
}
