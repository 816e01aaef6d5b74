//! No Landlock outside Linux: the sandbox reports itself unavailable (see sandbox.rs).

use std::path::Path;
use std::sync::OnceLock;

use super::Vault;
use super::cache::IndexCacheDir;
use super::state::{AuditFile, StateDir};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    BestEffort,
    Require,
    Off,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    pub state: &'static str,
    pub abi: u32,
    pub filesystem: String,
    pub network: String,
}

static REPORT: OnceLock<Report> = OnceLock::new();

pub fn report() -> Option<&'static Report> {
    REPORT.get()
}

pub struct Plan<'a> {
    pub vault: &'a Vault,
    pub vault_writable: bool,
    pub cache: Option<&'a IndexCacheDir>,
    pub state: Option<&'a StateDir>,
    pub audit: Option<&'a AuditFile>,
}

pub fn apply(_plan: &Plan<'_>, mode: Mode) -> Result<&'static Report, String> {
    if mode == Mode::Require {
        return Err("--sandbox require: Landlock exists only on Linux".to_owned());
    }
    let off = mode == Mode::Off;
    Ok(REPORT.get_or_init(|| Report {
        state: if off { "off" } else { "unavailable" },
        abi: 0,
        filesystem: "not restricted (Landlock is Linux only)".to_owned(),
        network: "not restricted (Landlock is Linux only)".to_owned(),
    }))
}

pub fn probe(path: &Path) -> String {
    format!("{}: no sandbox on this system", path.display())
}
