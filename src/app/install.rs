//! `capvault install`, `uninstall`, `bundle` and `doctor`: the command line's requests handed to
//! [`crate::setup`], which edits clients' config files, builds the bundle and runs the checks.

use std::path::Path;

use super::cli::InstallArgs;
use crate::setup::{self, InstallRequest};
use crate::vault::host::Host;

/// `capvault install` (or `install --list`).
pub fn install(host: &Host, args: InstallArgs) -> anyhow::Result<()> {
    let InstallArgs {
        client,
        vault,
        more_vaults,
        name,
        write,
        tools,
        dry_run,
        list,
    } = args;
    let mut out = std::io::stdout();
    if list {
        return setup::list(host, &mut out).map_err(anyhow::Error::from);
    }
    let (Some(client), Some(vault)) = (client, vault) else {
        anyhow::bail!("give a client and a vault (or --list)");
    };
    let req = InstallRequest {
        client,
        vault,
        more: more_vaults,
        name,
        write,
        tools,
        dry_run,
    };
    // The entry's `serve` arguments, checked as `serve` itself checks them.
    let check = |args: &[String]| {
        super::serve::check_entry_args(host, args)
            .map_err(|e| setup::ServeRefusal(format!("{e:#}")))
    };
    setup::install(host, &req, &check, &mut out).map_err(anyhow::Error::from)
}

/// `capvault uninstall`.
pub fn uninstall(host: &Host, client: &str, name: &str, dry_run: bool) -> anyhow::Result<()> {
    setup::uninstall(host, client, name, dry_run, &mut std::io::stdout())
        .map_err(anyhow::Error::from)
}

/// `capvault bundle`.
pub fn bundle(host: &Host, out: &Path, level: u8) -> anyhow::Result<()> {
    setup::bundle::build(host, out, level, &mut std::io::stdout()).map_err(anyhow::Error::from)
}

/// `capvault doctor`.
pub async fn doctor(host: &Host, vault: &Path) -> anyhow::Result<()> {
    setup::doctor::run(host, vault, &mut std::io::stdout())
        .await
        .map_err(anyhow::Error::from)
}
