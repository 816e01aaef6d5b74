//! Setting capvault up in MCP clients: `capvault install`, `uninstall`, `install --list` and
//! `doctor`. The client table is in [`clients`], the config-text edits in [`install`](mod@install) (pure);
//! files are read and written only through [`crate::vault::host`].

pub mod bundle;
pub mod clients;
pub mod doctor;
pub mod install;

use std::io::Write;
use std::path::{Path, PathBuf};

use clients::{CLIENTS, Client, Home, Platform, client};
use install::Entry;

use crate::vault::host::{Host, HostError};
use crate::vault::{Limits, Vault};

/// Why `install`, `uninstall`, `install --list`, `bundle` or `doctor` failed. May name host
/// paths: only the user who typed the command sees them.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A client's config file, or this binary, could not be read or written.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The vault does not open as `capvault serve` would open it.
    #[error(transparent)]
    Vault(Box<dyn std::error::Error + Send + Sync>),
    /// `doctor`: the vault does not open (the report says why).
    #[error("the vault does not open")]
    VaultDoesNotOpen,
    /// `doctor`: some checks failed (the report says which).
    #[error("{0} checks failed")]
    ChecksFailed(usize),
    /// No home folder to find clients' config files in.
    #[error("no home folder: set HOME")]
    NoHome,
    /// This binary's path is unknown.
    #[error("cannot find this binary: {0}")]
    NoBinary(std::io::Error),
    /// This binary's path is not UTF-8 (a client's entry is text).
    #[error("the binary's path is not UTF-8")]
    BinaryNotUtf8,
    /// This binary could not be read for the bundle.
    #[error("this binary cannot be read")]
    BinaryUnreadable,
    /// `install` names one vault folder twice.
    #[error("{path}: named twice")]
    SameVaultTwice { path: String },
    /// The vault's path is not UTF-8 (a client's entry is text).
    #[error("the vault's path is not UTF-8")]
    VaultNotUtf8,
    /// The vault's path could not be made absolute.
    #[error("{path}: {source}")]
    Absolute {
        path: String,
        source: std::io::Error,
    },
    /// No client has this id.
    #[error("unknown client `{id}`; clients: {known}")]
    UnknownClient { id: String, known: String },
    /// A `--name` a client would not take.
    #[error("--name `{name}`: {source}")]
    BadName {
        name: String,
        source: crate::server::vaults::BadName,
    },
    /// Every `capvault-<folder>-<n>` name is taken.
    #[error("{path}: no free server name; give one with --name")]
    NoFreeName { path: String },
    /// A client's config file is not UTF-8.
    #[error("{path}: not UTF-8 text")]
    NotText { path: String },
    /// A client's JSON config file does not parse.
    #[error("{path} is not valid JSON (line {line}: {kind}); fix it first, nothing was changed")]
    Json {
        path: String,
        line: usize,
        kind: String,
    },
    /// A client's JSON config file is not an object.
    #[error("{path}: the top level is not a JSON object; nothing was changed")]
    NotAnObject { path: String },
    /// A client's TOML config file does not parse.
    #[error("{path} is not valid TOML (line {line}: {message}); fix it first, nothing was changed")]
    Toml {
        path: String,
        line: usize,
        message: String,
    },
    /// The key where servers go is not a table.
    #[error("{path}: `{key}` is not a table; nothing was changed")]
    NotATable { path: String, key: String },
    /// `capvault install`: the entry's command line is one `serve` would refuse, so the
    /// client's server would stop at once.
    #[error("`capvault {args}` would not start ({reason}); nothing was changed")]
    ServeRefuses { args: String, reason: ServeRefusal },
    /// The bundle's zip could not be made.
    #[error("bundle: {0}")]
    Zip(#[from] zip::result::ZipError),
    /// The bundle's manifest could not be written as JSON.
    #[error("{0}")]
    Manifest(#[from] serde_json::Error),
    /// Writing the report or the bundle failed.
    #[error("{0}")]
    Output(#[from] std::io::Error),
}

/// What `capvault install` was asked.
#[derive(Debug, Clone)]
pub struct InstallRequest {
    /// The client's id (`claude-desktop`...).
    pub client: String,
    /// The vault folder.
    pub vault: PathBuf,
    /// More vault folders the same entry serves (`capvault serve A B`).
    pub more: Vec<PathBuf>,
    /// The server's name in the client; `None`: the entry that already serves this vault, or
    /// `capvault` when free, or `capvault-<folder name>` (see [`entry_name`]).
    pub name: Option<String>,
    /// Serve with `--write`.
    pub write: bool,
    /// `--tools PROFILE`.
    pub tools: Option<String>,
    /// Print the change only.
    pub dry_run: bool,
}

fn home() -> Result<Home, SetupError> {
    Home::from_env().ok_or(SetupError::NoHome)
}

/// The absolute path of this binary (what the client will run).
fn this_binary() -> Result<String, SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::NoBinary)?;
    exe.to_str()
        .map(str::to_owned)
        .ok_or(SetupError::BinaryNotUtf8)
}

/// The shell-quoted form of `s` for a printed command.
fn quoted(s: &str) -> String {
    crate::vault::host::shell_quoted(s)
}

fn backup_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!(
        "{name}.capvault-backup-{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S")
    )
}

/// The vault folder's path as a client's entry names it: absolute, with `.` and `..` removed
/// (the path [`Vault`] records, so `capvault install CLIENT ..` names the parent folder itself),
/// when that path opens this same folder; otherwise (a symlink before a `..`, which the kernel
/// follows first) the path as given, made absolute.
pub(crate) fn entry_path(vault: &Vault, given: &Path) -> Result<PathBuf, SetupError> {
    let normal = vault.host_path();
    let same_folder = Vault::open(normal, Limits::default())
        .ok()
        .and_then(|v| v.identity().ok())
        .is_some_and(|id| vault.identity().is_ok_and(|me| me == id));
    if same_folder {
        return Ok(normal.to_path_buf());
    }
    std::path::absolute(given).map_err(|source| SetupError::Absolute {
        path: given.display().to_string(),
        source,
    })
}

/// Whether a client entry's arguments (`serve VAULT... [OPTIONS]`) would make `capvault serve`
/// stop at once, from the command line's own parser and checks (`app::serve::check_entry_args`).
pub type ServeCheck<'a> = &'a dyn Fn(&[String]) -> Result<(), ServeRefusal>;

/// Why `capvault serve` would stop at once with a client entry's arguments: the command line's
/// own refusal, as it prints it (its causes joined), since only the command line knows them.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ServeRefusal(pub String);

/// `capvault install`: adds or updates the client's entry for the vault, prints the diff. An
/// entry whose arguments `check` refuses is never written.
pub fn install(
    host: &Host,
    req: &InstallRequest,
    check: ServeCheck<'_>,
    out: &mut dyn Write,
) -> Result<(), SetupError> {
    let c = client(&req.client)?;
    if let Some(n) = &req.name {
        crate::server::vaults::check_name_within(n, 64).map_err(|source| SetupError::BadName {
            name: n.clone(),
            source,
        })?;
    }
    // The vault must open as capvault serve will open it.
    let vault =
        Vault::open(&req.vault, Limits::default()).map_err(|e| SetupError::Vault(e.into()))?;
    let vault_abs = entry_path(&vault, &req.vault)?;
    let vault_text = vault_abs
        .to_str()
        .ok_or(SetupError::VaultNotUtf8)?
        .to_owned();
    let mut args = vec!["serve".to_owned(), vault_text];
    for more in &req.more {
        let v = Vault::open(more, Limits::default()).map_err(|e| SetupError::Vault(e.into()))?;
        let abs = entry_path(&v, more)?;
        let text = abs.to_str().ok_or(SetupError::VaultNotUtf8)?.to_owned();
        if args.contains(&text) {
            return Err(SetupError::SameVaultTwice { path: text });
        }
        args.push(text);
    }
    let these = if req.more.is_empty() {
        "this vault"
    } else {
        "these vaults"
    };
    if req.write {
        args.push("--write".to_owned());
    }
    if let Some(t) = &req.tools {
        args.push("--tools".to_owned());
        args.push(t.clone());
    }
    check(&args).map_err(|reason| SetupError::ServeRefuses {
        args: shown_args(&args),
        reason,
    })?;
    let entry = Entry {
        command: this_binary()?,
        args,
    };
    let path = c.config_path(Platform::current(), &home()?);
    let mut file = host.file(&path)?;
    let old_bytes = file.read()?;
    let old = match &old_bytes {
        Some(b) => Some(
            String::from_utf8(b.clone()).map_err(|_| SetupError::NotText {
                path: file.shown().to_owned(),
            })?,
        ),
        None => None,
    };
    let (name, before) = entry_name(
        c,
        old.as_deref().unwrap_or(""),
        file.shown(),
        req,
        &vault_abs,
    )?;
    let new = install::add(c, old.as_deref(), file.shown(), &name, &entry)?;
    if old.as_deref() == Some(new.as_str()) {
        writeln!(
            out,
            "{}: already set up (server `{name}`); nothing to change",
            file.shown()
        )?;
        return Ok(());
    }
    match &before {
        Before::Nothing => writeln!(out, "adds the server `{name}` for {these}"),
        Before::SameVault(e) => writeln!(
            out,
            "updates the server `{name}`, which serves this vault (it ran: {})",
            shown_entry(e)
        ),
        Before::Named(e) => writeln!(
            out,
            "replaces the server `{name}` (it ran: {})",
            shown_entry(e)
        ),
        Before::Beside(others) => writeln!(
            out,
            "adds the server `{name}` for {these}, beside {} for another vault \
             (--name chooses the name)",
            others
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }?;
    let diff = similar::TextDiff::from_lines(old.as_deref().unwrap_or(""), &new)
        .unified_diff()
        .header(file.shown(), file.shown())
        .to_string();
    write!(out, "{diff}")?;
    if req.dry_run {
        writeln!(out, "(dry run: {} not changed)", file.shown())?;
    } else {
        let backup = old.as_ref().map(|_| backup_name(&path));
        let backup = file.replace(new.as_bytes(), backup.as_deref())?;
        writeln!(out, "wrote {}", file.shown())?;
        if let Some(b) = backup {
            writeln!(out, "backup: {b} beside it")?;
        }
        if c.restart {
            writeln!(out, "Restart {} to see the new server.", c.name)?;
        }
    }
    if let Some(cmd) = own_command(c, &name, &entry) {
        writeln!(out, "({} can also do this itself: {cmd})", c.name)?;
    }
    if in_cargo_build(host, Path::new(&entry.command)) {
        let slower = if cfg!(debug_assertions) {
            " (an unoptimised debug build, many times slower)"
        } else {
            ""
        };
        writeln!(
            out,
            "note: {} will run a build inside cargo's target folder{slower}, which `cargo clean` \
             or the next build removes or replaces; to keep one: `cargo install --locked --path .`, \
             then run `capvault install` again",
            c.name
        )?;
    }
    Ok(())
}

/// Whether the binary `exe` runs from a cargo build folder (a profile folder of a target
/// folder, wherever `CARGO_TARGET_DIR` puts it, whatever it is named): cargo keeps its build
/// lock `.cargo-lock` in every folder it builds into, which an installed copy never has beside
/// it (`cargo install` builds elsewhere and copies the binary alone).
fn in_cargo_build(host: &Host, exe: &Path) -> bool {
    exe.parent()
        .and_then(|dir| host.file(&dir.join(".cargo-lock")).ok())
        .is_some_and(|lock| lock.is_file())
}

/// What an install's entry name held before.
#[derive(Debug)]
enum Before {
    /// Nothing: a new name.
    Nothing,
    /// The entry serving this vault (updated).
    SameVault(Entry),
    /// The entry of the name given with `--name` (replaced).
    Named(Entry),
    /// Nothing, but these capvault entries serve other vaults.
    Beside(Vec<String>),
}

/// The vaults an entry serves: the arguments after `serve`, up to the first option.
pub(crate) fn entry_vaults(args: &[String]) -> Vec<&str> {
    let Some(at) = args.iter().position(|a| a == "serve") else {
        return Vec::new();
    };
    args[at + 1..]
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect()
}

/// The first vault an entry serves (the one `install` matches entries by).
fn entry_vault(e: &Entry) -> Option<&str> {
    entry_vaults(&e.args).first().copied()
}

/// An entry as a command line, for messages.
fn shown_entry(e: &Entry) -> String {
    shown_args(&e.args)
}

/// Arguments as a command line, for messages.
fn shown_args(args: &[String]) -> String {
    args.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ")
}

/// The name `capvault install` gives the vault's entry in `text`, and what that name held: the
/// name given; else the capvault entry that already serves the vault; else `capvault` when no
/// server has that name; else `capvault-<folder name>` (sanitised; `-2`, `-3`... when taken).
/// A second vault so gets its own entry instead of replacing the first one's.
fn entry_name(
    c: &Client,
    text: &str,
    shown: &str,
    req: &InstallRequest,
    vault_abs: &Path,
) -> Result<(String, Before), SetupError> {
    if let Some(n) = &req.name {
        return Ok(match install::find(c, text, shown, n)? {
            Some(e) if entry_vault(&e).is_some_and(|v| Path::new(v) == vault_abs) => {
                (n.clone(), Before::SameVault(e))
            }
            Some(e) => (n.clone(), Before::Named(e)),
            None => (n.clone(), Before::Nothing),
        });
    }
    let mut others = Vec::new();
    for n in install::capvault_entries(c, text, shown)? {
        if let Some(e) = install::find(c, text, shown, &n)? {
            if entry_vault(&e).is_some_and(|v| Path::new(v) == vault_abs) {
                return Ok((n, Before::SameVault(e)));
            }
            others.push(n);
        }
    }
    let free = |n: &str| install::find(c, text, shown, n).map(|e| e.is_none());
    let before = if others.is_empty() {
        Before::Nothing
    } else {
        Before::Beside(others)
    };
    if free("capvault")? {
        return Ok(("capvault".to_owned(), before));
    }
    let base = format!("capvault-{}", folder_slug(vault_abs));
    for n in 1..1000 {
        let name = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        if free(&name)? {
            return Ok((name, before));
        }
    }
    Err(SetupError::NoFreeName {
        path: shown.to_owned(),
    })
}

/// The vault folder's name as part of a server name: lowercase ASCII letters and digits, other
/// runs of characters as one `-`, at most 40 characters; `vault` when nothing is left.
fn folder_slug(vault: &Path) -> String {
    let name = vault
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut slug = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() {
            slug.push(ch.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(40).collect();
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "vault".to_owned()
    } else {
        slug.to_owned()
    }
}

fn own_command(c: &Client, name: &str, e: &Entry) -> Option<String> {
    let template = c.own_command?;
    let args: Vec<String> = e.args.iter().map(|a| quoted(a)).collect();
    let json = serde_json::json!({"name": name, "command": e.command, "args": e.args}).to_string();
    Some(
        template
            .replace("{name}", &quoted(name))
            .replace("{bin}", &quoted(&e.command))
            .replace("{args}", &args.join(" "))
            .replace("{json}", &json.replace('\'', "'\\''")),
    )
}

/// `capvault uninstall`: removes the entry, prints the diff.
pub fn uninstall(
    host: &Host,
    client_id: &str,
    name: &str,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), SetupError> {
    let c = client(client_id)?;
    let path = c.config_path(Platform::current(), &home()?);
    let mut file = host.file(&path)?;
    let Some(bytes) = file.read()? else {
        writeln!(out, "{}: no such file; nothing to remove", file.shown())?;
        return Ok(());
    };
    let old = String::from_utf8(bytes).map_err(|_| SetupError::NotText {
        path: file.shown().to_owned(),
    })?;
    let Some(new) = install::remove(c, &old, file.shown(), name)? else {
        writeln!(
            out,
            "{}: no server `{name}`; nothing to remove",
            file.shown()
        )?;
        return Ok(());
    };
    let diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .header(file.shown(), file.shown())
        .to_string();
    write!(out, "{diff}")?;
    if dry_run {
        writeln!(out, "(dry run: {} not changed)", file.shown())?;
    } else {
        let backup = file.replace(new.as_bytes(), Some(&backup_name(&path)))?;
        writeln!(
            out,
            "wrote {} (backup: {} beside it)",
            file.shown(),
            backup.unwrap_or_default()
        )?;
    }
    Ok(())
}

/// `capvault install --list`: every client, its config file here, and what it holds.
pub fn list(host: &Host, out: &mut dyn Write) -> Result<(), SetupError> {
    let home = home()?;
    writeln!(
        out,
        "{:<16} {:<10} {:<24} config file",
        "client", "found", "capvault entries"
    )?;
    for c in CLIENTS {
        let path = c.config_path(Platform::current(), &home);
        let file = host.file(&path)?;
        let (found, entries) = match file.read() {
            Ok(Some(b)) => {
                let text = String::from_utf8_lossy(&b).into_owned();
                match install::capvault_entries(c, &text, file.shown()) {
                    Ok(e) if e.is_empty() => ("yes", "-".to_owned()),
                    Ok(e) => ("yes", e.join(", ")),
                    Err(_) => ("yes", "(file does not parse)".to_owned()),
                }
            }
            Ok(None) if file.folder_exists() => ("folder", "-".to_owned()),
            Ok(None) => ("no", "-".to_owned()),
            Err(_) => ("unreadable", "-".to_owned()),
        };
        writeln!(
            out,
            "{:<16} {:<10} {:<24} {}",
            c.id,
            found,
            entries,
            file.shown()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // the test writes its own fixture
    fn a_binary_in_a_cargo_build_folder_is_told_apart_by_cargos_lock_not_by_folder_names() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::claim();
        // A target folder elsewhere (CARGO_TARGET_DIR), named anything.
        let built = tmp.path().join("elsewhere/debug");
        std::fs::create_dir_all(&built).unwrap();
        std::fs::write(built.join(".cargo-lock"), "").unwrap();
        assert!(in_cargo_build(&host, &built.join("capvault")));
        // A copy in a folder named `target/debug` without cargo's lock is an installed one.
        let copied = tmp.path().join("target/debug");
        std::fs::create_dir_all(&copied).unwrap();
        assert!(!in_cargo_build(&host, &copied.join("capvault")));
        for installed in ["/nonexistent/bin/capvault", "capvault", "/"] {
            assert!(!in_cargo_build(&host, Path::new(installed)), "{installed}");
        }
    }

    #[test]
    fn a_folder_name_becomes_a_safe_server_name() {
        assert_eq!(folder_slug(Path::new("/h/My Vault")), "my-vault");
        assert_eq!(folder_slug(Path::new("/h/--Work__2026!!")), "work-2026");
        assert_eq!(folder_slug(Path::new("/h/Ñotes")), "otes");
        assert_eq!(folder_slug(Path::new("/h/日本")), "vault");
        assert_eq!(folder_slug(Path::new("/")), "vault");
        assert_eq!(folder_slug(Path::new(&"a".repeat(100))).len(), 40);
        for n in ["my-vault", "work-2026", "vault"] {
            crate::server::vaults::check_name_within(&format!("capvault-{n}"), 64).unwrap();
        }
    }
}
