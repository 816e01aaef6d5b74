//! Defence in depth: a Landlock sandbox for `capvault serve` (Linux), applied once before the
//! async runtime starts a thread, so that every thread of the server is confined.
//!
//! The rules are built from the handles this layer already holds, never from paths: the vault
//! root (read, or read-write with `--write`), the index cache folder, the state folder and the
//! audit log's folder (read-write), and the system's time zone database (read, so local dates
//! stay right). Everything else on the filesystem is denied to the process itself, whatever a
//! bug elsewhere might try. Where the kernel's Landlock ABI has network rules (4 and later),
//! TCP bind and connect are denied too: the HTTP listener is bound before the sandbox applies,
//! and capvault connects nowhere.
//!
//! Landlock cannot take away what is already open (the listener, stdin/stdout) nor stop a hard
//! link that already points outside; SECURITY.md says where it stops.

use std::path::Path;
use std::sync::OnceLock;

use super::cache::IndexCacheDir;
use super::private::PrivateDir;
use super::state::{AuditFile, StateDir};
use super::{Ambient, Vault, ambient};

/// `--sandbox`: how hard to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Apply what the kernel supports; say what that is (the default).
    BestEffort,
    /// Refuse to start unless the filesystem rules are enforced.
    Require,
    /// Do not sandbox.
    Off,
}

/// How much of the sandbox holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Every rule.
    Enforced,
    /// Some rules: the kernel's Landlock ABI lacks some rights.
    Partial,
    /// None: no Landlock in this kernel (or not Linux).
    Unavailable,
    /// `--sandbox off`.
    Off,
}

/// What the sandbox enforces, for the log and `vault_info`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    pub state: State,
    /// The Landlock ABI in use (0 when none).
    pub abi: u32,
    /// What the process may reach on disk.
    pub filesystem: String,
    /// What it may do on the network.
    pub network: String,
}

static REPORT: OnceLock<Report> = OnceLock::new();

/// Why the sandbox was not applied ([`apply`]).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel refused a ruleset, a rule or the restriction itself.
    #[cfg(target_os = "linux")]
    #[error("sandbox: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// `--sandbox require` on a Linux kernel without Landlock.
    #[error(
        "--sandbox require: this kernel has no Landlock (or it is disabled); \
         run with --sandbox best-effort or off"
    )]
    NoLandlock,
    /// `--sandbox require` on another system.
    #[error("--sandbox require: Landlock exists only on Linux")]
    NotLinux,
}

/// What the sandbox of this process enforces (`None`: no sandbox was attempted, as in
/// `capvault call` or tests in-process).
pub fn report() -> Option<&'static Report> {
    REPORT.get()
}

/// The handles the sandboxed server needs, and how.
pub struct Plan<'a> {
    /// The vaults served, each writable when `true` (`--write`).
    pub vaults: Vec<(&'a Vault, bool)>,
    /// Their index cache folders, state folders and audit logs' folders.
    pub caches: Vec<&'a IndexCacheDir>,
    pub states: Vec<&'a StateDir>,
    pub audits: Vec<&'a AuditFile>,
    /// The authorization server's files (`--oauth builtin`), inside the state folder.
    pub oauth: Option<&'a PrivateDir>,
    /// TCP ports this process may still connect to (the external issuer's JWKS, refreshed on
    /// an unknown key id); none by default.
    pub connect_ports: Vec<u16>,
    /// Host names must be looked up (client metadata documents): the resolver's files in
    /// `/etc` become readable.
    pub name_lookups: bool,
}

/// The files the C library's resolver reads (those that exist are made readable).
#[cfg(target_os = "linux")]
const RESOLVER_FILES: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];

/// Opens the host file at `path` for a sandbox rule, following symlinks one step at a time
/// through folder handles (`/etc/resolv.conf` is often a link into `/run`).
#[cfg(target_os = "linux")]
fn open_host_file(path: &Path) -> Option<cap_std::fs::File> {
    let mut path = path.to_path_buf();
    for _ in 0..8 {
        let (folder, name) = (path.parent()?.to_path_buf(), path.file_name()?.to_owned());
        let dir = ambient(Ambient::Open(&folder)).ok()?;
        let meta = dir.symlink_metadata(&name).ok()?;
        if meta.is_symlink() {
            let target = dir.read_link(&name).ok()?;
            path = if target.is_absolute() {
                target
            } else {
                folder.join(target)
            };
            continue;
        }
        return meta.is_file().then(|| dir.open(&name).ok()).flatten();
    }
    None
}

/// Applies the sandbox to this thread and every thread it starts later. Call it before any
/// other thread exists. `Err` only in `Require` mode (or when the kernel refuses a ruleset
/// it claimed to support).
pub fn apply(plan: &Plan<'_>, mode: Mode) -> Result<&'static Report, SandboxError> {
    let report = match mode {
        Mode::Off => Report {
            state: State::Off,
            abi: 0,
            filesystem: "not restricted (--sandbox off)".to_owned(),
            network: "not restricted (--sandbox off)".to_owned(),
        },
        Mode::BestEffort | Mode::Require => enforce(plan, mode)?,
    };
    Ok(REPORT.get_or_init(|| report))
}

/// Landlock, on Linux.
#[cfg(target_os = "linux")]
mod landlock_rules {
    use std::os::fd::AsFd;
    use std::path::Path;

    use cap_std::fs::Dir;
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort,
        PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    };

    use super::{Ambient, Mode, Plan, Report, SandboxError, State, ambient};

    /// The newest Landlock ABI whose rights capvault asks for (network rules came in 4, file
    /// truncation in 3, cross-folder renames in 2).
    const TARGET_ABI: ABI = ABI::V5;

    /// Where the time zone database lives (read-only in the sandbox).
    const ZONEINFO: &str = "/usr/share/zoneinfo";

    pub(super) fn enforce(plan: &Plan<'_>, mode: Mode) -> Result<Report, SandboxError> {
        let level = match mode {
            Mode::Require => CompatLevel::SoftRequirement,
            _ => CompatLevel::BestEffort,
        };
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let all = AccessFs::from_all(TARGET_ABI);
        let mut ruleset = Ruleset::default()
            .set_compatibility(level)
            .handle_access(all)?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessNet::from_all(TARGET_ABI))?
            .create()?;
        let mut reach = Vec::new();
        let several = plan.vaults.len() > 1;
        for (vault, writable) in &plan.vaults {
            let vault_access = if *writable { all } else { read };
            ruleset = ruleset.add_rule(PathBeneath::new(vault.root.as_fd(), vault_access))?;
            reach.push(match (several, *writable) {
                (false, true) => "the vault (read-write)",
                (false, false) => "the vault (read-only)",
                (true, true) => "the vaults served read-write",
                (true, false) => "the vaults served read-only",
            });
        }
        let mut rw: Vec<(&Dir, &'static str)> = Vec::new();
        for c in &plan.caches {
            rw.push((c.dir(), "the index cache folder"));
        }
        for s in &plan.states {
            rw.push((s.dir(), "the state folder"));
        }
        for a in &plan.audits {
            rw.push((a.dir(), "the audit log's folder"));
        }
        if let Some(o) = plan.oauth {
            rw.push((o.dir(), "the authorization server's folder"));
        }
        for (dir, what) in rw {
            ruleset = ruleset.add_rule(PathBeneath::new(dir.as_fd(), all))?;
            reach.push(what);
        }
        if let Ok(zones) = ambient(Ambient::Open(Path::new(ZONEINFO))) {
            ruleset = ruleset.add_rule(PathBeneath::new(zones.as_fd(), read))?;
            reach.push("the time zone database (read-only)");
        }
        if plan.name_lookups {
            let mut any = false;
            for path in super::RESOLVER_FILES {
                if let Some(file) = super::open_host_file(Path::new(path)) {
                    ruleset =
                        ruleset.add_rule(PathBeneath::new(file.as_fd(), AccessFs::ReadFile))?;
                    any = true;
                }
            }
            if any {
                reach.push("the resolver's files in /etc (read-only)");
            }
        }
        for port in &plan.connect_ports {
            ruleset = ruleset.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
        let status = ruleset.restrict_self()?;
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
            _ => 0,
        };
        let state = match status.ruleset {
            RulesetStatus::FullyEnforced => State::Enforced,
            RulesetStatus::PartiallyEnforced => State::Partial,
            RulesetStatus::NotEnforced => State::Unavailable,
        };
        if mode == Mode::Require && state == State::Unavailable {
            return Err(SandboxError::NoLandlock);
        }
        let filesystem = if state == State::Unavailable {
            "not restricted (no Landlock in this kernel)".to_owned()
        } else {
            // Several vaults: each kind of folder once.
            let mut shown: Vec<&str> = Vec::new();
            for r in &reach {
                if !shown.contains(r) {
                    shown.push(r);
                }
            }
            let mut s = format!("only {}", shown.join(", "));
            if abi < 3 {
                s.push_str("; truncating files is not restricted before Landlock ABI 3");
            }
            s
        };
        let network = if abi >= 4 && !plan.connect_ports.is_empty() {
            let ports: Vec<String> = plan.connect_ports.iter().map(u16::to_string).collect();
            format!(
                "no TCP bind (the HTTP listener is bound before the sandbox); TCP connect only \
                 to port {} (the issuer's keys)",
                ports.join(", ")
            )
        } else if abi >= 4 {
            "no TCP bind or connect (the HTTP listener is bound before the sandbox)".to_owned()
        } else {
            format!("not restricted (network rules need Landlock ABI 4; this kernel has {abi})")
        };
        Ok(Report {
            state,
            abi,
            filesystem,
            network,
        })
    }
}

#[cfg(target_os = "linux")]
use landlock_rules::enforce;

/// Takes every file and network right from this process and the children it forks (the PDF
/// worker, which reads only the bytes its pipe brings): a Landlock ruleset that handles every
/// right and grants none. The state that holds (`Enforced`, `Partial` on an older ABI,
/// `Unavailable` without Landlock).
pub fn confine_to_nothing() -> State {
    #[cfg(target_os = "linux")]
    {
        use landlock::{
            ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
            RulesetStatus,
        };
        const TARGET_ABI: ABI = ABI::V5;
        let made = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(TARGET_ABI))
            .and_then(|r| r.handle_access(AccessNet::from_all(TARGET_ABI)))
            .and_then(|r| r.create())
            .and_then(|r| r.restrict_self());
        match made.map(|s| s.ruleset) {
            Ok(RulesetStatus::FullyEnforced) => State::Enforced,
            Ok(RulesetStatus::PartiallyEnforced) => State::Partial,
            _ => State::Unavailable,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        State::Unavailable
    }
}

/// No Landlock outside Linux: reported, and refused in `Require` mode.
#[cfg(not(target_os = "linux"))]
fn enforce(_plan: &Plan<'_>, mode: Mode) -> Result<Report, SandboxError> {
    if mode == Mode::Require {
        return Err(SandboxError::NotLinux);
    }
    Ok(Report {
        state: State::Unavailable,
        abi: 0,
        filesystem: "not restricted (Landlock is Linux only)".to_owned(),
        network: "not restricted (Landlock is Linux only)".to_owned(),
    })
}

/// Testing aid (`serve --sandbox-probe PATH`): tries to read the host file at `path` as any
/// code of the process could (or, for `tcp:HOST:PORT`, to connect there), and says whether the
/// sandbox let it.
pub fn probe(path: &Path) -> String {
    if let Some(addr) = path.to_str().and_then(|p| p.strip_prefix("tcp:")) {
        return match std::net::TcpStream::connect(addr) {
            Ok(_) => format!("tcp:{addr}: connected"),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                format!("tcp:{addr}: denied")
            }
            Err(e) => format!("tcp:{addr}: {e}"),
        };
    }
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return format!("{}: not a file path", path.display());
    };
    let outcome = ambient(Ambient::Open(folder)).and_then(|d| d.read(name));
    match outcome {
        Ok(bytes) => format!("{}: read {} bytes", path.display(), bytes.len()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            format!("{}: denied", path.display())
        }
        Err(e) => format!("{}: {e}", path.display()),
    }
}
