//! `capvault install`, `uninstall`, `bundle` and `doctor`: the command line's requests handed to
//! [`crate::setup`], which edits clients' config files, builds the bundle and runs the checks.

use std::path::Path;

use super::cli::InstallArgs;
use crate::setup::{self, InstallRequest};

/// `capvault install` (or `install --list`).
pub fn install(args: InstallArgs) -> anyhow::Result<()> {
    let InstallArgs {
        client,
        vault,
        name,
        write,
        tools,
        dry_run,
        list,
    } = args;
    let mut out = std::io::stdout();
    if list {
        return setup::list(&mut out).map_err(anyhow::Error::msg);
    }
    let (Some(client), Some(vault)) = (client, vault) else {
        anyhow::bail!("give a client and a vault (or --list)");
    };
    let req = InstallRequest {
        client,
        vault,
        name,
        write,
        tools,
        dry_run,
    };
    setup::install(&req, &mut out).map_err(anyhow::Error::msg)
}

/// `capvault uninstall`.
pub fn uninstall(client: &str, name: &str, dry_run: bool) -> anyhow::Result<()> {
    setup::uninstall(client, name, dry_run, &mut std::io::stdout()).map_err(anyhow::Error::msg)
}

/// `capvault bundle`.
pub fn bundle(out: &Path, level: u8) -> anyhow::Result<()> {
    setup::bundle::build(out, level, &mut std::io::stdout()).map_err(anyhow::Error::msg)
}

/// `capvault doctor`.
pub async fn doctor(vault: &Path) -> anyhow::Result<()> {
    setup::doctor::run(vault, &mut std::io::stdout())
        .await
        .map_err(anyhow::Error::msg)
}
