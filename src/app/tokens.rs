//! `capvault token new` (a bearer token for the HTTP transport, its digest added to a token
//! file) and `capvault tokens list|revoke` (what the built-in authorization server has granted).

use std::path::Path;

#[cfg(feature = "oauth")]
use super::cli::TokensCommand;
use super::cli::{Scope, TokenCommand};
#[cfg(feature = "oauth")]
use super::oauth::oauth_store;
use crate::server::CapvaultServer;
use crate::vault::host::Host;

/// `capvault token ...`.
pub fn token(host: &Host, command: TokenCommand) -> anyhow::Result<()> {
    let TokenCommand::New {
        name,
        append,
        scope,
        tools,
    } = command;
    if let Some(spec) = &tools {
        crate::server::policy::profile_tools(spec, &CapvaultServer::tool_names())
            .map_err(|e| anyhow::anyhow!("--tools: {e}"))?;
    }
    let (token, line) =
        crate::http::auth::new_token(scope == Scope::Write, tools.as_deref(), name.as_deref())
            .map_err(anyhow::Error::msg)?;
    // The file first: a refused file leaves no token printed that works nowhere.
    if let Some(path) = &append {
        append_token_line(host, path, &line)?;
    }
    println!("{token}");
    match &append {
        Some(path) => eprintln!(
            "capvault: the token above is for the client (Authorization: Bearer ...); \
             its digest is now in {} (serve with --token-file {}).",
            path.display(),
            path.display()
        ),
        None => eprintln!(
            "\nThe line above is the token: give it to the client (Authorization: Bearer ...).\n\
             Add this line to the server's --token-file (it holds only the token's digest), \
             or let --append FILE add it:\n\n{line}\n"
        ),
    }
    Ok(())
}

/// `capvault tokens ...`.
#[cfg(feature = "oauth")]
pub fn tokens(host: &Host, command: TokensCommand) -> anyhow::Result<()> {
    match command {
        TokensCommand::List {
            vault,
            state_dir,
            token_file,
        } => list(host, &vault, state_dir.as_deref(), token_file.as_deref()),
        TokensCommand::Revoke {
            vault,
            id,
            all,
            state_dir,
        } => revoke(&vault, id, all, state_dir.as_deref()),
    }
}

/// `tokens list`: the grants of the built-in authorization server, after the tokens of
/// `--token-file` when given.
#[cfg(feature = "oauth")]
fn list(
    host: &Host,
    vault: &Path,
    state_dir: Option<&Path>,
    token_file: Option<&Path>,
) -> anyhow::Result<()> {
    if let Some(path) = token_file {
        list_token_file(host, path)?;
    }
    let store = oauth_store(vault, state_dir)?;
    let grants = store.grants()?;
    if grants.is_empty() {
        println!("No client has access.");
    } else {
        let day = |t: u64| {
            chrono::DateTime::from_timestamp(t as i64, 0)
                .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_default()
        };
        println!(
            "{:<16} {:<10} {:<17} {:<17} {:<17} CLIENT",
            "ID", "SCOPE", "GRANTED", "REFRESHED", "EXPIRES"
        );
        for g in grants {
            println!(
                "{:<16} {:<10} {:<17} {:<17} {:<17} {}",
                g.id,
                if g.write { "read,write" } else { "read" },
                day(g.created),
                day(g.last_refresh),
                day(g.expires()),
                match &g.vaults {
                    // A server of several vaults: the ones the owner allowed.
                    Some(v) => format!("{} (vaults: {})", g.client_name, v.join(", ")),
                    None => g.client_name.clone(),
                }
            );
        }
    }
    Ok(())
}

/// `tokens revoke`: one grant (by id or its first characters), or all of them.
#[cfg(feature = "oauth")]
fn revoke(
    vault: &Path,
    id: Option<String>,
    all: bool,
    state_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let store = oauth_store(vault, state_dir)?;
    if all {
        let n = store.revoke_all()?;
        println!("Revoked {n} grant(s) and forgot every registered client.");
    } else {
        let id = id.unwrap_or_default();
        match store.revoke(&id)? {
            Some(g) => println!("Revoked {g}."),
            None => anyhow::bail!(
                "no grant (or more than one) matches `{id}`: see `capvault tokens list`"
            ),
        }
    }
    Ok(())
}

/// Largest token file read by `token new --append` and `tokens list --token-file`.
const MAX_TOKEN_FILE: u64 = 1024 * 1024;

/// `tokens list --token-file`: each token of the file, by name, with its scope and tools.
#[cfg(feature = "oauth")]
fn list_token_file(host: &Host, path: &Path) -> anyhow::Result<()> {
    let file = host.file(path)?;
    let bytes = file
        .read_private(MAX_TOKEN_FILE)
        .map_err(|e| anyhow::anyhow!("--token-file {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--token-file {}: not UTF-8", file.shown()))?;
    let mut tokens = crate::http::Tokens::none();
    tokens
        .add_file(&text, &CapvaultServer::tool_names())
        .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", file.shown()))?;
    println!("Bearer tokens in {}:", file.shown());
    println!("{:<40} {:<10} TOOLS", "NAME", "SCOPE");
    for g in tokens.grants() {
        let tools = g.tools.as_ref().map_or_else(
            || "all".to_owned(),
            |t| t.iter().cloned().collect::<Vec<_>>().join(","),
        );
        println!(
            "{:<40} {:<10} {tools}",
            g.id,
            if g.write { "read,write" } else { "read" }
        );
    }
    println!();
    Ok(())
}

/// Adds `line` to the token file at `path` (replaced atomically, mode 600), after checking
/// that what is there is a private, valid token file that does not hold the name already.
fn append_token_line(host: &Host, path: &Path, line: &str) -> anyhow::Result<()> {
    let mut file = host.file(path)?.private();
    let mut text = if file.is_file() {
        let bytes = file
            .read_private(MAX_TOKEN_FILE)
            .map_err(|e| anyhow::anyhow!("--append {e}"))?;
        String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("--append {}: not UTF-8", file.shown()))?
    } else {
        String::new()
    };
    let names = CapvaultServer::tool_names();
    crate::http::Tokens::none()
        .add_file(&text, &names)
        .map_err(|e| anyhow::anyhow!("--append {}: {e}; nothing was added", file.shown()))?;
    if let Some(name) = line.split_whitespace().find(|w| w.starts_with("name=")) {
        let taken = text
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == name));
        if taken {
            anyhow::bail!(
                "--append {}: a token is already {name}; choose another --name",
                file.shown()
            );
        }
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    file.replace(text.as_bytes(), None)
        .map_err(|e| anyhow::anyhow!("--append {e}"))?;
    Ok(())
}
