//! `capvault state`: which state folder a vault uses, how it was recognised, and every other
//! state; `--adopt ID` gives the vault an earlier one.

use std::path::Path;

use super::state_root;
use crate::vault::state::StateDir;
use crate::vault::{Limits, Vault};

/// `capvault state`: shows the vault's state folder and the others, or adopts one.
pub fn run(
    vault: &Path,
    adopt: Option<&str>,
    force: bool,
    state_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let vault = Vault::open(vault, Limits::default())?;
    let root = state_root(state_dir)?;
    let folder = root.join("state-1");
    if let Some(id) = adopt {
        let previous = StateDir::adopt(&root, &vault, id, force).map_err(anyhow::Error::msg)?;
        println!(
            "{} now uses the state {}",
            vault.name(),
            folder.join(id).display()
        );
        if let Some(previous) = previous {
            println!("its earlier state {previous} is kept, detached (capvault state lists it)");
        }
        return Ok(());
    }
    let Some(report) = StateDir::report(&root, &vault).map_err(anyhow::Error::msg)? else {
        println!(
            "No vault has a state under {} yet (`capvault serve --write` makes one).",
            folder.display()
        );
        return Ok(());
    };
    match &report.choice.id {
        Some(id) => println!(
            "{} uses {}: {}",
            vault.name(),
            folder.join(id).display(),
            report.choice.how.describe()
        ),
        None => println!(
            "{} has no state yet: `capvault serve --write` makes a new one under {}",
            vault.name(),
            folder.display()
        ),
    }
    for notice in &report.choice.notices {
        println!("note: {notice}");
    }
    println!("\nstates under {}:", folder.display());
    for s in &report.states {
        let mine = report.choice.id.as_deref() == Some(s.id.as_str());
        let (path, seen, detached) = match &s.record {
            Some(r) => (
                r.path.as_str(),
                chrono::DateTime::from_timestamp(r.seen as i64, 0)
                    .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
                    .unwrap_or_default(),
                r.detached,
            ),
            None => ("(recorded before vault.json)", String::new(), false),
        };
        let mut flags = Vec::new();
        if mine {
            flags.push("this vault".to_owned());
        }
        if detached {
            flags.push("detached".to_owned());
        }
        if s.record.is_some() && !s.alive {
            // This vault's own state records where it was last served from.
            flags.push(
                if mine {
                    "recorded at its old path"
                } else {
                    "its folder is gone"
                }
                .to_owned(),
            );
        }
        if s.oauth {
            flags.push("OAuth".to_owned());
        }
        println!(
            "  {}  {path}  seen {seen}  {} version{} ({} KiB){}",
            s.id,
            s.versions.0,
            if s.versions.0 == 1 { "" } else { "s" },
            s.versions.1.div_ceil(1024),
            if flags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", flags.join(", "))
            }
        );
    }
    Ok(())
}
