//! `capvault install`, `uninstall`, `install --list` and `doctor` through the real binary, with
//! `HOME` (and `XDG_CONFIG_HOME`, `APPDATA`) pointed at a temporary folder holding fixture config
//! files for every client: missing, empty, with other servers, with comments, malformed,
//! read-only.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::common::BIN;

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    vault: PathBuf,
}

fn home() -> Home {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let vault = tmp.path().join("My Vault");
    crate::common::write_tree(&vault, &[("Note.md", "# Note\nthe garden\n")]);
    std::fs::create_dir_all(&home).unwrap();
    Home {
        _tmp: tmp,
        home,
        vault,
    }
}

/// `capvault ARGS` run in the home folder, with `HOME` there.
fn in_home(h: &Home, args: &[&str]) -> Output {
    in_home_at(h, &h.home, args)
}

/// `capvault ARGS` run in the folder `cwd`, with `HOME` at the fixture's: its clients' config
/// files, caches and state are there.
fn in_home_at(h: &Home, cwd: &Path, args: &[&str]) -> Output {
    crate::common::capvault()
        .current_dir(cwd)
        .args(args)
        .env("HOME", &h.home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("APPDATA")
        .env("XDG_CACHE_HOME", h.home.join(".cache"))
        .env_remove("XDG_STATE_HOME")
        .env("CAPVAULT_LOG", "capvault=error")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn backups(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".capvault-backup-"))
        .collect();
    out.sort();
    out
}

/// (client, config file under HOME) on Linux.
const FILES: &[(&str, &str)] = &[
    (
        "claude-desktop",
        ".config/Claude/claude_desktop_config.json",
    ),
    ("claude-code", ".claude.json"),
    ("cursor", ".cursor/mcp.json"),
    ("vscode", ".config/Code/User/mcp.json"),
    ("windsurf", ".codeium/windsurf/mcp_config.json"),
    ("zed", ".config/zed/settings.json"),
    ("codex", ".codex/config.toml"),
    ("gemini", ".gemini/settings.json"),
];

#[test]
fn install_writes_each_clients_file_keeping_other_servers_with_a_backup_and_uninstall_undoes_it() {
    let h = home();
    let vault = h.vault.to_str().unwrap().to_owned();
    for (client, file) in FILES {
        let path = h.home.join(file);
        let toml = file.ends_with(".toml");
        // A file with another server (and a comment where the format allows).
        let before = if toml {
            "# mine\n[mcp_servers.other]\ncommand = \"other\"\n".to_owned()
        } else if matches!(*client, "vscode" | "zed") {
            let key = if *client == "vscode" {
                "servers"
            } else {
                "context_servers"
            };
            format!(
                "{{\n  // mine\n  \"{key}\": {{\"other\": {{\"command\": \"other\"}}}},\n  \"theme\": \"dark\"\n}}\n"
            )
        } else {
            "{\"mcpServers\": {\"other\": {\"command\": \"other\"}}, \"unknown\": [1, 2]}\n"
                .to_owned()
        };
        crate::common::write_tree(&h.home, &[(*file, before.as_str())]);
        let dry = in_home(&h, &["install", client, &vault, "--dry-run"]);
        assert!(dry.status.success(), "{client}: {}", text(&dry));
        assert!(
            text(&dry).contains("+"),
            "{client}: no diff: {}",
            text(&dry)
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            before,
            "{client}: a dry run wrote"
        );
        let o = in_home(
            &h,
            &["install", client, &vault, "--write", "--name", "notes"],
        );
        assert!(o.status.success(), "{client}: {}", text(&o));
        // The binary under test is cargo's own debug build: the client is told it will go.
        assert!(
            text(&o).contains("inside cargo's target folder (an unoptimised debug build"),
            "{client}: {}",
            text(&o)
        );
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after.contains("other"),
            "{client}: the other server is gone: {after}"
        );
        assert!(
            after.contains(BIN) && after.contains(&vault),
            "{client}: {after}"
        );
        assert!(after.contains("--write"), "{client}: {after}");
        if toml {
            assert!(after.starts_with("# mine\n"), "{after}");
        } else if matches!(*client, "vscode" | "zed") {
            assert!(
                after.contains("// mine") && after.contains("\"theme\": \"dark\""),
                "{after}"
            );
        } else {
            let v: Value = serde_json::from_str(&after).unwrap();
            assert_eq!(v["unknown"], json!([1, 2]));
            assert_eq!(
                v["mcpServers"]["notes"]["args"],
                json!(["serve", vault, "--write"])
            );
        }
        let b = backups(path.parent().unwrap());
        assert_eq!(b.len(), 1, "{client}: backups {b:?}");
        assert_eq!(std::fs::read_to_string(&b[0]).unwrap(), before);
        // Installing again changes nothing.
        let again = in_home(
            &h,
            &["install", client, &vault, "--write", "--name", "notes"],
        );
        assert!(
            text(&again).contains("already set up"),
            "{client}: {}",
            text(&again)
        );
        // The list shows it.
        let list = text(&in_home(&h, &["install", "--list"]));
        let line = list.lines().find(|l| l.starts_with(client)).unwrap();
        assert!(line.contains("notes"), "{client}: {line}");
        // Uninstall takes the entry out and leaves the rest.
        let u = in_home(&h, &["uninstall", client, "--name", "notes"]);
        assert!(u.status.success(), "{client}: {}", text(&u));
        let removed = std::fs::read_to_string(&path).unwrap();
        assert!(
            !removed.contains(BIN) && removed.contains("other"),
            "{client}: {removed}"
        );
        for b in backups(path.parent().unwrap()) {
            std::fs::remove_file(b).unwrap();
        }
    }
}

#[test]
fn a_missing_file_is_created_and_malformed_or_read_only_ones_are_never_overwritten() {
    let h = home();
    let vault = h.vault.to_str().unwrap().to_owned();
    // An empty file is a file without servers.
    crate::common::write_tree(&h.home, &[(".cursor/mcp.json", "")]);
    let o = in_home(&h, &["install", "cursor", &vault]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(h.home.join(".cursor/mcp.json")).unwrap())
            .unwrap();
    assert_eq!(v["mcpServers"]["capvault"]["command"], BIN);
    assert_eq!(
        backups(&h.home.join(".cursor")).len(),
        1,
        "the empty file is backed up"
    );
    // A missing file (and folder) is created, with nothing to back up.
    let o = in_home(&h, &["install", "claude-desktop", &vault]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        backups(&h.home.join(".config/Claude")).is_empty(),
        "a backup of nothing"
    );

    let bad = "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"a\",}\n  }\n}\n";
    crate::common::write_tree(&h.home, &[(".gemini/settings.json", bad)]);
    let o = in_home(&h, &["install", "gemini", &vault]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("settings.json is not valid JSON (line 3"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(h.home.join(".gemini/settings.json")).unwrap(),
        bad
    );

    crate::common::write_tree(&h.home, &[(".codex/config.toml", "a = [\n")]);
    let o = in_home(&h, &["install", "codex", &vault]);
    assert!(text(&o).contains("is not valid TOML (line"), "{}", text(&o));

    let ro = h.home.join(".codeium/windsurf/mcp_config.json");
    crate::common::write_tree(&h.home, &[(".codeium/windsurf/mcp_config.json", "{}")]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = in_home(&h, &["install", "windsurf", &vault]);
    assert!(
        !o.status.success() && text(&o).contains("read-only"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_to_string(&ro).unwrap(), "{}");

    let o = in_home(&h, &["install", "claude-desktop", "/no/such/vault"]);
    assert!(
        !o.status.success() && text(&o).contains("cannot open vault"),
        "{}",
        text(&o)
    );
    let o = in_home(&h, &["install", "notepad", &vault]);
    assert!(
        text(&o).contains("unknown client `notepad`"),
        "{}",
        text(&o)
    );
    // A client with its own command for this says so.
    let o = in_home(&h, &["install", "claude-code", &vault, "--dry-run"]);
    assert!(
        text(&o).contains("claude mcp add --scope user capvault -- "),
        "{}",
        text(&o)
    );
}

#[test]
fn doctor_reports_each_problem_with_a_fix_and_runs_a_real_session() {
    let h = home();
    let vault = h.vault.to_str().unwrap().to_owned();
    // Nothing set up yet: a warning, a working session.
    let o = in_home(&h, &["doctor", &vault]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("ok   the vault opens"), "{t}");
    // The build's optional features, by name: every one, or what this build left out.
    let build = t
        .lines()
        .find(|l| l.contains("this build"))
        .unwrap_or_default();
    for (name, built) in capvault::FEATURES {
        assert!(build.contains(name), "{name} unnamed: {build}");
        if !built {
            assert!(!build.contains("every optional feature"), "{build}");
        }
    }
    if capvault::FEATURES.iter().all(|(_, built)| *built) {
        assert!(
            build.starts_with("ok   this build has every optional feature"),
            "{build}"
        );
    }
    assert!(t.contains("warn no client is set up"), "{t}");
    assert!(t.contains("a session works: handshake"), "{t}");
    // A broken settings file, and a client entry whose binary is gone: a warning and a failure.
    crate::common::write_tree(&h.vault, &[(".obsidian/app.json", "{not json")]);
    crate::common::write_tree(
        &h.home,
        &[(
            ".cursor/mcp.json",
            json!({"mcpServers": {"old": {"command": "/gone/capvault", "args": ["serve", vault]}}})
                .to_string()
                .as_str(),
        )],
    );
    in_home(&h, &["install", "claude-desktop", &vault]);
    let o = in_home(&h, &["doctor", &vault]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("warn a settings file does not parse"), "{t}");
    assert!(
        t.contains("FAIL Cursor server `old`") && t.contains("does not exist"),
        "{t}"
    );
    assert!(t.contains("fix: capvault install cursor"), "{t}");
    assert!(
        t.contains("ok   Claude Desktop server `capvault`") && t.contains("this vault"),
        "{t}"
    );
    // An entry whose vault is gone fails; an index cache folder others can write to warns.
    crate::common::write_tree(
        &h.home,
        &[(
            ".gemini/settings.json",
            json!({"mcpServers": {"gone": {"command": BIN, "args": ["serve", "/no/such/vault"]}}})
                .to_string()
                .as_str(),
        )],
    );
    // The cache root taken by a file: the cache cannot be used (a warning with the fix).
    std::fs::create_dir_all(h.home.join(".cache")).unwrap();
    let _ = std::fs::remove_dir_all(h.home.join(".cache/capvault"));
    std::fs::write(h.home.join(".cache/capvault"), "not a folder").unwrap();
    let t = text(&in_home(&h, &["doctor", &vault]));
    assert!(
        t.contains("FAIL Gemini CLI server `gone`") && t.contains("does not open"),
        "{t}"
    );
    assert!(
        t.contains("warn the index cache folder cannot be used"),
        "{t}"
    );
    // A config file that does not parse: the server would not start, and doctor says both.
    let cfg = h.home.join("cfg");
    crate::common::write_tree(&cfg, &[("capvault/config.toml", "tools = [\n")]);
    let o = std::process::Command::new(BIN)
        .args(["doctor", &vault])
        .env("HOME", &h.home)
        .env("XDG_CONFIG_HOME", &cfg)
        .env("CAPVAULT_LOG", "capvault=error")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("FAIL the capvault config file does not parse"),
        "{t}"
    );
    assert!(
        t.contains("FAIL the MCP handshake failed") || t.contains("FAIL no MCP handshake"),
        "{t}"
    );
    // A vault that does not open stops at the first check.
    let o = in_home(&h, &["doctor", "/no/such/vault"]);
    assert!(
        !o.status.success() && text(&o).contains("FAIL"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_second_vault_gets_its_own_entry_and_doctor_checks_each() {
    let h = home();
    let a = h.vault.to_str().unwrap().to_owned();
    let second = h._tmp.path().join("Work Notes");
    crate::common::write_tree(&second, &[("w.md", "# W\n")]);
    let b = second.to_str().unwrap().to_owned();
    let file = h.home.join(".config/Claude/claude_desktop_config.json");
    let servers = || -> Value {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        v["mcpServers"].clone()
    };
    let o = in_home(&h, &["install", "claude-desktop", &a]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("adds the server `capvault`"),
        "{}",
        text(&o)
    );
    // The second vault does not replace the first: it gets an entry named after its folder.
    let o = in_home(&h, &["install", "claude-desktop", &b]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("adds the server `capvault-work-notes`")
            && text(&o).contains("beside `capvault`"),
        "{}",
        text(&o)
    );
    let s = servers();
    assert_eq!(s["capvault"]["args"], json!(["serve", a]));
    assert_eq!(s["capvault-work-notes"]["args"], json!(["serve", b]));
    // Installing a vault again updates its own entry, and says so.
    let o = in_home(&h, &["install", "claude-desktop", &b, "--write"]);
    assert!(
        text(&o).contains("updates the server `capvault-work-notes`, which serves this vault"),
        "{}",
        text(&o)
    );
    let s = servers();
    assert_eq!(s.as_object().unwrap().len(), 2, "{s}");
    assert_eq!(
        s["capvault-work-notes"]["args"],
        json!(["serve", b, "--write"])
    );
    assert_eq!(s["capvault"]["args"], json!(["serve", a]));
    // An explicit --name replaces that entry, and says what it ran.
    let o = in_home(&h, &["install", "claude-desktop", &b, "--name", "capvault"]);
    assert!(
        text(&o).contains("replaces the server `capvault` (it ran: serve "),
        "{}",
        text(&o)
    );
    assert_eq!(servers()["capvault"]["args"], json!(["serve", b]));
    // doctor checks each entry, and warns when none serves its vault.
    let t = text(&in_home(&h, &["doctor", &a]));
    assert!(
        t.contains("server `capvault` (") && t.contains("on another vault ("),
        "{t}"
    );
    assert!(t.contains("server `capvault-work-notes`"), "{t}");
    assert!(t.contains("warn no client entry serves this vault"), "{t}");
    let t = text(&in_home(&h, &["doctor", &b]));
    assert!(t.contains("runs this binary on this vault"), "{t}");
    assert!(!t.contains("no client entry serves this vault"), "{t}");
}

#[test]
fn install_of_dot_or_dot_dot_stores_the_folders_own_path() {
    let h = home();
    let inside = h.vault.join("Sub");
    std::fs::create_dir_all(&inside).unwrap();
    let file = h.home.join(".config/Claude/claude_desktop_config.json");
    let vault_arg = || -> String {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        v["mcpServers"]["capvault"]["args"][1]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The current folder is a real path (getcwd), so the vault's own path is its canonical one.
    let own = std::fs::canonicalize(&h.vault).unwrap();
    let o = in_home_at(&h, &inside, &["install", "claude-desktop", ".."]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(Path::new(&vault_arg()), own, "{}", text(&o));
    // `.` in the vault names the same folder the same way: nothing to change.
    let o = in_home_at(&h, &h.vault, &["install", "claude-desktop", "."]);
    assert!(text(&o).contains("already set up"), "{}", text(&o));
    let t = text(&in_home_at(&h, &inside, &["doctor", ".."]));
    assert!(t.contains("runs this binary on this vault"), "{t}");
    // A symlink before `..`: the kernel follows the link first, so `..` is the folder above the
    // link's target, not the link's own folder; the entry must name that folder.
    let above = h._tmp.path().join("Elsewhere");
    std::fs::create_dir_all(above.join("inner")).unwrap();
    std::os::unix::fs::symlink(above.join("inner"), inside.join("jump")).unwrap();
    let o = in_home_at(
        &h,
        &inside,
        &["install", "claude-desktop", "jump/..", "--name", "x"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let stored = v["mcpServers"]["x"]["args"][1].as_str().unwrap();
    assert_eq!(
        std::fs::canonicalize(stored).unwrap(),
        std::fs::canonicalize(&above).unwrap(),
        "{stored}"
    );
}

#[test]
fn one_entry_serves_several_vaults_and_doctor_knows_each() {
    let h = home();
    let a = h.vault.to_str().unwrap().to_owned();
    let second = h._tmp.path().join("Work Notes");
    crate::common::write_tree(&second, &[("w.md", "# W\n")]);
    let b = second.to_str().unwrap().to_owned();
    let file = h.home.join(".cursor/mcp.json");
    let o = in_home(&h, &["install", "cursor", &a, &b, "--write"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("adds the server `capvault` for these vaults"),
        "{}",
        text(&o)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        v["mcpServers"]["capvault"]["args"],
        json!(["serve", a, b, "--write"])
    );
    // doctor finds the entry from either vault.
    for vault in [&a, &b] {
        let t = text(&in_home(&h, &["doctor", vault]));
        assert!(t.contains("runs this binary on this vault"), "{t}");
    }
    // A folder named twice, or one that does not open, changes nothing.
    let before = std::fs::read(&file).unwrap();
    let o = in_home(&h, &["install", "cursor", &a, &a]);
    assert!(
        !o.status.success() && text(&o).contains("named twice"),
        "{}",
        text(&o)
    );
    let o = in_home(&h, &["install", "cursor", &a, "/no/such/vault"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn install_refuses_arguments_serve_would_refuse_and_doctor_runs_each_entrys_own_command_line() {
    let h = home();
    let vault = h.vault.to_str().unwrap().to_owned();
    let file = h.home.join(".config/Claude/claude_desktop_config.json");
    // `serve --tools reed` stops at once: install says why and writes nothing.
    let o = in_home(
        &h,
        &["install", "claude-desktop", &vault, "--tools", "reed"],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("would not start") && text(&o).contains("reed"),
        "{}",
        text(&o)
    );
    assert!(!file.exists(), "an entry that cannot start was written");
    // What serve takes, install takes.
    let o = in_home(
        &h,
        &["install", "claude-desktop", &vault, "--tools", "minimal"],
    );
    assert!(o.status.success(), "{}", text(&o));
    // An entry written by hand with a bad profile: doctor starts it as the client would, so
    // the failure (and serve's own reason) shows, although its binary and vault are fine.
    crate::common::write_tree(
        &h.home,
        &[(
            ".cursor/mcp.json",
            json!({"mcpServers": {"typo": {"command": BIN, "args": ["serve", vault, "--tools", "reed"]}}})
                .to_string()
                .as_str(),
        )],
    );
    let o = in_home(&h, &["doctor", &vault]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    let typo = t
        .lines()
        .find(|l| l.starts_with("FAIL Cursor server `typo`"))
        .unwrap_or_else(|| panic!("no failure for the entry: {t}"));
    assert!(typo.contains("reed"), "{typo}");
    // The good entry's own session runs its own arguments: the minimal profile's 3 tools.
    let good = t
        .lines()
        .find(|l| l.contains("Claude Desktop server `capvault`") && l.contains("a session works"))
        .unwrap_or_else(|| panic!("no session for the entry: {t}"));
    assert!(
        good.starts_with("ok") && good.contains(", 3 tools,"),
        "{good}"
    );
}

#[test]
fn doctor_on_the_folder_above_a_vault_names_the_vault_inside() {
    let h = home();
    crate::common::write_tree(&h.vault, &[(".obsidian/app.json", "{}")]);
    let parent = h.vault.parent().unwrap().to_str().unwrap().to_owned();
    let t = text(&in_home(&h, &["doctor", &parent]));
    assert!(
        t.contains(
            "this folder is not a vault (it holds no `.obsidian`), but `My Vault` inside it is one"
        ),
        "{t}"
    );
    assert!(!t.contains("settings parse"), "{t}");
    // The vault itself: its settings are read.
    let vault = h.vault.to_str().unwrap().to_owned();
    let t = text(&in_home(&h, &["doctor", &vault]));
    assert!(t.contains("ok   the .obsidian settings parse"), "{t}");
}
