//! `capvault confirm`: the person's yes for changes held by `--confirm destructive` that the
//! client could not ask about. It lists what waits in the vault's state folder, asks about each
//! in the terminal, and marks what the person allows; the assistant's same call, made again,
//! then goes ahead once. A yes is read from a terminal only: never from a pipe or a program.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::markdown::hidden::quoted_visible;
use crate::notes::write::confirm::{self, Pending};
use crate::vault::state::StateDir;
use crate::vault::{Limits, Vault, VaultError, VaultPath};

use super::state_root;

/// Asks about the changes waiting for `vault` (only the one named `code`, when given).
pub fn run(vault_dir: &Path, code: Option<&str>, state_dir: Option<&Path>) -> anyhow::Result<()> {
    let vault = Vault::open(vault_dir, Limits::default())?;
    let root = state_root(state_dir)?;
    let state = StateDir::open(&root, &vault)
        .map_err(|e| anyhow::anyhow!("{e} (--state-dir {})", root.display()))?;
    let files = confirm::pending_files(&state).map_err(|e| anyhow::anyhow!("state folder: {e}"))?;
    // A request whose note or folder is gone since is dropped, not asked about: the
    // assistant's call would fail, and a yes would allow nothing.
    let all = confirm::update(&files, |p| {
        let (gone, kept): (Vec<Pending>, Vec<Pending>) =
            p.drain(..).partition(|q| gone_path(&vault, q).is_some());
        *p = kept;
        Ok((gone, p.clone()))
    })?;
    let (gone, all) = all;
    for g in gone
        .iter()
        .filter(|g| code.is_none_or(|c| g.code.eq_ignore_ascii_case(c)))
    {
        eprintln!(
            "capvault: change {} in \"{}\" dropped: {} no longer exists, so there is nothing \
             to allow.",
            g.code,
            vault.name(),
            quoted_visible(gone_path(&vault, g).unwrap_or_default())
        );
    }
    let waiting: Vec<Pending> = all
        .into_iter()
        .filter(|p| !p.approved && code.is_none_or(|c| p.code.eq_ignore_ascii_case(c)))
        .collect();
    if waiting.is_empty() {
        match code {
            Some(c) => anyhow::bail!(
                "no change {c} waits in \"{}\" (it may have expired after {} minutes: the \
                 assistant's call made again asks anew)",
                vault.name(),
                confirm::PENDING_TTL.as_secs() / 60
            ),
            None => {
                eprintln!(
                    "capvault: no change waits for your yes in \"{}\".",
                    vault.name()
                );
                return Ok(());
            }
        }
    }
    if !crate::vault::host::stdin_is_terminal() {
        anyhow::bail!(
            "the answer is read from a terminal only (a yes cannot come from a pipe or a \
             program): run `capvault confirm` yourself in a terminal"
        );
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for p in waiting {
        let ago = now.saturating_sub(p.asked) / 60;
        eprintln!(
            "\nChange {} in \"{}\", asked {}:\n  {}",
            p.code,
            vault.name(),
            if ago == 0 {
                "just now".to_owned()
            } else {
                format!("{ago} min ago")
            },
            p.summary
        );
        eprint!("Allow it? [y/N] ");
        let _ = std::io::stderr().flush();
        let answer = crate::vault::host::read_line()?;
        let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        let found = confirm::update(&files, |all| {
            let i = all.iter().position(|q| q.code == p.code);
            if let Some(i) = i {
                if yes {
                    all[i].approved = true;
                } else {
                    all.remove(i);
                }
            }
            Ok(i.is_some())
        })?;
        if !found {
            eprintln!("capvault: it expired meanwhile; nothing was allowed.");
        } else if yes {
            eprintln!(
                "capvault: allowed. The assistant's same call, made again within {} minutes, \
                 goes ahead once.",
                confirm::PENDING_TTL.as_secs() / 60
            );
        } else {
            eprintln!("capvault: not allowed; the change will not be made.");
        }
    }
    Ok(())
}

/// The first path the request `p` acts on that no longer exists in `vault`, if any.
fn gone_path<'p>(vault: &Vault, p: &'p Pending) -> Option<&'p str> {
    p.needs
        .iter()
        .find(|path| {
            VaultPath::parse(path)
                .is_ok_and(|vp| matches!(vault.stat_file(&vp), Err(VaultError::NotFound(_))))
        })
        .map(String::as_str)
}
