//! `capvault doctor <VAULT>`: the checks that explain a client showing no tools or a server
//! misbehaving, each with how to fix it, then a real session as a client would start it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

use super::SetupError;
use super::clients::{CLIENTS, Home, Platform};
use super::install;
use crate::notes::settings::load_settings;
use crate::vault::cache::{CacheError, IndexCacheDir, default_root};
use crate::vault::host::Host;
use crate::vault::{Limits, Vault, VaultPath};

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Fine.
    Ok,
    /// Works, but worth fixing.
    Warn,
    /// Broken: a client will not work until it is fixed.
    Fail,
}

/// The report being written.
struct Report<'a> {
    out: &'a mut dyn Write,
    failed: usize,
    warned: usize,
}

impl Report<'_> {
    fn line(&mut self, outcome: Outcome, what: &str, fix: Option<&str>) {
        let tag = match outcome {
            Outcome::Ok => "ok  ",
            Outcome::Warn => {
                self.warned += 1;
                "warn"
            }
            Outcome::Fail => {
                self.failed += 1;
                "FAIL"
            }
        };
        let _ = writeln!(self.out, "{tag} {what}");
        if let Some(fix) = fix {
            let _ = writeln!(self.out, "     fix: {fix}");
        }
    }
}

/// Runs every check on the vault at `root` and prints the report to `out`. Fails when a check
/// failed.
pub async fn run(host: &Host, root: &Path, out: &mut dyn Write) -> Result<(), SetupError> {
    let mut r = Report {
        out,
        failed: 0,
        warned: 0,
    };
    let shown = root.display().to_string();
    let vault = match Vault::open(root, Limits::default()) {
        Ok(v) => {
            r.line(Outcome::Ok, &format!("the vault opens: {shown}"), None);
            v
        }
        Err(e) => {
            r.line(
                Outcome::Fail,
                &e.to_string(),
                Some("give the vault folder itself (the one that holds `.obsidian`), as an absolute path"),
            );
            return Err(SetupError::VaultDoesNotOpen);
        }
    };
    check_build(&mut r);
    check_config(host, &mut r);
    check_settings(&vault, &mut r);
    let folders = check_watches(host, &vault, &mut r);
    check_cache(&vault, &mut r);
    check_model(host, &mut r);
    let entries = check_clients(host, &vault, root, &mut r);
    // Each entry's own command line, as its client starts it; this vault's plain `serve` when
    // no entry serves it.
    for e in &entries {
        let args: Vec<OsString> = e.entry.args.iter().map(OsString::from).collect();
        check_session(Some(&e.what), Path::new(&e.entry.command), &args, &mut r).await;
    }
    if !entries.iter().any(|e| e.this_vault) {
        match std::env::current_exe() {
            Ok(me) => {
                let args = [OsString::from("serve"), root.as_os_str().to_owned()];
                check_session(None, &me, &args, &mut r).await;
            }
            Err(_) => r.line(Outcome::Fail, "cannot find this binary to start it", None),
        }
    }
    let _ = writeln!(
        r.out,
        "{} checks failed, {} warnings ({folders} folders watched)",
        r.failed, r.warned
    );
    if r.failed > 0 {
        Err(SetupError::ChecksFailed(r.failed))
    } else {
        Ok(())
    }
}

/// The default embedding model (`serve --semantic`): downloaded already, or how to get it
/// with a network and without one. Semantic search is optional: never a warning.
#[cfg(feature = "semantic")]
fn check_model(host: &Host, r: &mut Report<'_>) {
    let spec = crate::semantic::fetch::ModelSpec::default_model();
    let have = spec
        .cache_folder()
        .is_some_and(|f| crate::semantic::load_model(host, &f).is_ok());
    if have {
        r.line(
            Outcome::Ok,
            "semantic search (optional): the default embedding model is downloaded; \
             `serve --semantic` loads it",
            None,
        );
    } else {
        r.line(
            Outcome::Ok,
            "semantic search (optional): the default embedding model is not downloaded; \
             `serve --semantic` downloads it once, which needs a network",
            Some(crate::notes::search::MODEL_WAYS_OUT),
        );
    }
}

/// A build without the `semantic` feature: says so (semantic search is optional).
#[cfg(not(feature = "semantic"))]
fn check_model(_host: &Host, r: &mut Report<'_>) {
    r.line(
        Outcome::Ok,
        "semantic search (optional): not in this build (built without the `semantic` feature)",
        None,
    );
}

/// Which optional features this build has: a left-out one is a choice, never a warning.
fn check_build(r: &mut Report<'_>) {
    let names = |on: bool| {
        crate::FEATURES
            .iter()
            .filter(|(_, has)| *has == on)
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (built, left_out) = (names(true), names(false));
    let line = match (built.is_empty(), left_out.is_empty()) {
        (_, true) => format!("this build has every optional feature ({built})"),
        (true, false) => {
            format!("this build is the minimal one, without {left_out} (README, Builds)")
        }
        (false, false) => format!("this build has {built}; not {left_out} (README, Builds)"),
    };
    r.line(Outcome::Ok, &line, None);
}

/// The user's config file (`capvault/config.toml`): a server started without `--config` reads it,
/// and stops at once when it does not parse (a client then shows no tools).
fn check_config(host: &Host, r: &mut Report<'_>) {
    match crate::config::load(host, None) {
        Ok(_) => r.line(Outcome::Ok, "the capvault config file (if any) parses", None),
        Err(e) => r.line(
            Outcome::Fail,
            &format!("the capvault config file does not parse: {e}"),
            Some("fix the line it names, or move the file away; the server refuses to start until then"),
        ),
    }
}

fn check_settings(vault: &Vault, r: &mut Report<'_>) {
    if !vault.has_config_dir() {
        let inside = vault.folders_holding_a_vault(5);
        let (line, fix) = if inside.is_empty() {
            (
                format!(
                    "this folder holds no `{}`: Obsidian has not opened it as a vault, so its \
                     settings (links, daily and periodic notes, excluded files) are Obsidian's \
                     defaults",
                    vault.config_dir()
                ),
                "give the folder Obsidian opens as the vault, or open this one in Obsidian once"
                    .to_owned(),
            )
        } else {
            let names: Vec<String> = inside.iter().map(|p| format!("`{p}`")).collect();
            (
                format!(
                    "this folder is not a vault (it holds no `{}`), but {} inside it {}",
                    vault.config_dir(),
                    names.join(", "),
                    if inside.len() == 1 {
                        "is one"
                    } else {
                        "are vaults"
                    }
                ),
                format!(
                    "give the vault folder itself: this folder followed by /{}",
                    inside[0]
                ),
            )
        };
        r.line(Outcome::Warn, &line, Some(&fix));
        return;
    }
    let settings = load_settings(vault);
    if settings.errors.is_empty() {
        r.line(Outcome::Ok, "the .obsidian settings parse", None);
    } else {
        for e in &settings.errors {
            r.line(
                Outcome::Warn,
                &format!("a settings file does not parse: {e}"),
                Some("open the vault in Obsidian once, or fix the file; capvault uses Obsidian's defaults meanwhile"),
            );
        }
    }
}

/// Counts the vault's folders and compares with the inotify watch limit; returns the count.
fn check_watches(host: &Host, vault: &Vault, r: &mut Report<'_>) -> usize {
    let mut folders: BTreeSet<String> = BTreeSet::new();
    folders.insert(String::new());
    let _ = vault.walk(&VaultPath::root(), true, &|_| true, &mut |e| {
        let p = e.path.as_str();
        if let Some((folder, _)) = p.rsplit_once('/') {
            let mut at = String::new();
            for part in folder.split('/') {
                if !at.is_empty() {
                    at.push('/');
                }
                at.push_str(part);
                folders.insert(at.clone());
            }
        }
        ControlFlow::Continue(())
    });
    let n = folders.len();
    let limit = host
        .file(Path::new("/proc/sys/fs/inotify/max_user_watches"))
        .ok()
        .and_then(|f| f.read().ok().flatten())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.trim().parse::<usize>().ok());
    let (outcome, what, fix) = watch_verdict(limit, n);
    r.line(outcome, &what, fix);
    n
}

/// What the inotify watch `limit` (if known) means for a vault of `folders` folders.
fn watch_verdict(limit: Option<usize>, folders: usize) -> (Outcome, String, Option<&'static str>) {
    match limit {
        Some(l) if l < folders.saturating_mul(2) => (
            Outcome::Warn,
            format!(
                "the inotify watch limit ({l}) is low for {folders} folders (other programs use watches too)"
            ),
            Some(
                "sudo sysctl fs.inotify.max_user_watches=524288 (and add it to /etc/sysctl.conf); until then the periodic reconcile keeps the index fresh",
            ),
        ),
        Some(l) => (
            Outcome::Ok,
            format!("the inotify watch limit ({l}) covers the vault's {folders} folders"),
            None,
        ),
        None => (
            Outcome::Ok,
            format!("{folders} folders to watch (no inotify limit to compare on this system)"),
            None,
        ),
    }
}

fn check_cache(vault: &Vault, r: &mut Report<'_>) {
    let Some(root) = default_root() else {
        r.line(
            Outcome::Warn,
            "no cache folder for this user: every start indexes every note",
            Some("set HOME (or XDG_CACHE_HOME), or pass --index-cache DIR"),
        );
        return;
    };
    match IndexCacheDir::open(&root, vault) {
        Ok(_) => r.line(
            Outcome::Ok,
            &format!("the index cache folder is usable ({})", root.display()),
            None,
        ),
        Err(CacheError::Busy) => r.line(
            Outcome::Ok,
            "the index cache is in use by a running capvault server on this vault",
            None,
        ),
        Err(e) => r.line(
            Outcome::Warn,
            &format!("the index cache folder cannot be used: {e}"),
            Some(&format!(
                "fix or delete {} (it is rebuilt), or pass --index-cache DIR",
                root.display()
            )),
        ),
    }
}

/// A client's capvault entry whose binary exists and whose vaults open: its session is run.
struct Runnable {
    /// The entry as the report names it: client, server name, config file.
    what: String,
    entry: install::Entry,
    /// It serves the vault doctor was given.
    this_vault: bool,
}

/// Checks every client's capvault entries (binary, vaults); returns those worth starting.
fn check_clients(host: &Host, vault: &Vault, root: &Path, r: &mut Report<'_>) -> Vec<Runnable> {
    let mut runnable = Vec::new();
    let Some(home) = Home::from_env() else {
        r.line(
            Outcome::Warn,
            "no home folder: client configs not checked",
            None,
        );
        return runnable;
    };
    let me = std::env::current_exe().ok();
    // The path `capvault install` would write for this vault.
    let vault_abs = super::entry_path(vault, root).ok();
    let mut any = false;
    let mut serves_this = false;
    for c in CLIENTS {
        let path = c.config_path(Platform::current(), &home);
        let Ok(file) = host.file(&path) else {
            continue;
        };
        let text = match file.read() {
            Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            Ok(None) => continue,
            Err(e) => {
                r.line(Outcome::Warn, &format!("{}: {e}", c.name), None);
                continue;
            }
        };
        let names = match install::capvault_entries(c, &text, file.shown()) {
            Ok(n) => n,
            Err(e) => {
                r.line(
                    Outcome::Fail,
                    &format!("{}: {e}", c.name),
                    Some("the client cannot read it either; fix the file, then run capvault install again"),
                );
                continue;
            }
        };
        for name in names {
            any = true;
            let Ok(Some(entry)) = install::find(c, &text, file.shown(), &name) else {
                continue;
            };
            let what = format!("{} server `{name}` ({})", c.name, file.shown());
            let binary_ok = host
                .file(Path::new(&entry.command))
                .is_ok_and(|f| f.is_file());
            let vaults = super::entry_vaults(&entry.args);
            // The first vault of the entry that does not open, if any.
            let broken = vaults
                .iter()
                .find(|v| Vault::open(Path::new(v), Limits::default()).is_err());
            let vault_ok = !vaults.is_empty() && broken.is_none();
            let this_vault = vault_abs
                .as_ref()
                .is_some_and(|v| vaults.iter().any(|a| Path::new(a) == v));
            let vault_arg = vaults.first();
            serves_this |= this_vault && binary_ok;
            if !binary_ok {
                r.line(
                    Outcome::Fail,
                    &format!("{what}: its binary {} does not exist", entry.command),
                    Some(&format!("capvault install {} <VAULT> --name {name}", c.id)),
                );
            } else if !vault_ok {
                r.line(
                    Outcome::Fail,
                    &format!(
                        "{what}: its vault {} does not open",
                        broken.or(vault_arg).copied().unwrap_or("(none)")
                    ),
                    Some(&format!("capvault install {} <VAULT> --name {name}", c.id)),
                );
            } else if me
                .as_ref()
                .is_some_and(|m| m.to_str() != Some(entry.command.as_str()))
            {
                r.line(
                    Outcome::Warn,
                    &format!("{what}: runs another capvault binary ({})", entry.command),
                    Some(&format!(
                        "capvault install {} <VAULT> --name {name} (to use this one)",
                        c.id
                    )),
                );
            } else {
                r.line(
                    Outcome::Ok,
                    &if this_vault {
                        format!("{what}: runs this binary on this vault")
                    } else {
                        format!(
                            "{what}: runs this binary on another vault ({})",
                            vaults.join(", ")
                        )
                    },
                    None,
                );
            }
            if binary_ok && vault_ok {
                runnable.push(Runnable {
                    what,
                    entry,
                    this_vault,
                });
            }
        }
    }
    if any && !serves_this {
        r.line(
            Outcome::Warn,
            "no client entry serves this vault (the entries above serve other vaults or fail)",
            Some(
                "capvault install <CLIENT> <VAULT> (it adds an entry of its own beside the others)",
            ),
        );
    }
    if !any {
        r.line(
            Outcome::Warn,
            "no client is set up to run capvault",
            Some("capvault install claude-desktop <VAULT> (or another client: capvault install --list)"),
        );
    }
    runnable
}

/// Starts `program args` as a client would (an entry's own command line, or this binary's
/// `serve` on the vault) and runs the handshake and one search; `label` names the entry in the
/// report. A server that stops is reported with the last line it wrote on stderr.
async fn check_session(label: Option<&str>, program: &Path, args: &[OsString], r: &mut Report<'_>) {
    let said = |what: String| match label {
        Some(l) => format!("{l}: {what}"),
        None => what,
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).env("CAPVAULT_LOG", "capvault=error");
    let started = Instant::now();
    let (transport, stderr) = match TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(t) => t,
        Err(e) => {
            r.line(
                Outcome::Fail,
                &said(format!("the server does not start: {e}")),
                None,
            );
            return;
        }
    };
    let stderr = stderr.map(|s| tokio::spawn(last_line(s)));
    // What the server said on stderr before it stopped (waits for it to stop, briefly).
    let why = |stderr: Option<tokio::task::JoinHandle<String>>| async move {
        let Some(task) = stderr else {
            return String::new();
        };
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(line)) if !line.is_empty() => format!("; it said: {line}"),
            _ => String::new(),
        }
    };
    let client = match tokio::time::timeout(Duration::from_secs(20), ().serve(transport)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let why = why(stderr).await;
            r.line(
                Outcome::Fail,
                &said(format!("the MCP handshake failed ({e}){why}")),
                None,
            );
            return;
        }
        Err(_) => {
            r.line(
                Outcome::Fail,
                &said("no MCP handshake within 20 s".to_owned()),
                None,
            );
            return;
        }
    };
    let handshake = started.elapsed();
    let tools = client.list_all_tools().await.map(|t| t.len()).unwrap_or(0);
    let t = Instant::now();
    let mut args = serde_json::Map::new();
    args.insert("query".into(), "the".into());
    args.insert("limit".into(), 1.into());
    let search = client
        .call_tool(CallToolRequestParams::new("search_notes").with_arguments(args))
        .await;
    let search_ms = t.elapsed().as_secs_f64() * 1e3;
    match search {
        Ok(res) if res.is_error != Some(true) => {
            let served = res
                .structured_content
                .as_ref()
                .and_then(|v| v["served_by"].as_str().map(str::to_owned))
                .unwrap_or_default();
            r.line(
                Outcome::Ok,
                &said(format!(
                    "a session works: handshake {:.0} ms, {tools} tools, one search {search_ms:.1} ms ({served})",
                    handshake.as_secs_f64() * 1e3
                )),
                None,
            );
        }
        Ok(res) => r.line(
            Outcome::Fail,
            &said(format!(
                "a search failed: {:?}",
                res.content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
            )),
            None,
        ),
        Err(e) => r.line(Outcome::Fail, &said(format!("a search failed: {e}")), None),
    }
    let _ = client.cancel().await;
}

/// The last non-empty line a child wrote on `stderr` until it closed it (at most 200
/// characters; everything before is read and dropped, so the child never blocks on it).
async fn last_line(mut stderr: tokio::process::ChildStderr) -> String {
    use tokio::io::AsyncReadExt;
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 16 * 1024 {
            tail.drain(..tail.len() - 8 * 1024);
        }
    }
    let text = String::from_utf8_lossy(&tail);
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_limit_below_twice_the_folders_warns_with_the_fix() {
        let (o, what, fix) = watch_verdict(Some(100), 60);
        assert_eq!(o, Outcome::Warn, "{what}");
        assert!(fix.unwrap().contains("max_user_watches"));
        assert_eq!(watch_verdict(Some(8192), 60).0, Outcome::Ok);
        assert_eq!(watch_verdict(None, 60).0, Outcome::Ok);
    }
}
